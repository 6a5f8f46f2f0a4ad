"""Every fenced block of README.md is accounted for, so a new one cannot be left out untested:

- the set-up blocks before "Every block from here on runs as written" (``make`` and ``pip install``
  lines) are checked: each ``make`` target exists and each ``pip install`` names this package and
  extras it defines (running them would build the venv the tests run in);
- the blocks of the NeMo section run in NeMo's venv (marked ``nemo_env``): the YAML's ``recipe:`` line
  is resolved the way NeMo's launcher resolves it, the Python block runs as it is;
- every other block runs in order in a fresh folder holding the project's files, shell blocks as they
  are and Python blocks through ``python``, with the test venv's ``editstream`` on the PATH: what a new
  user types after ``make demo`` works. The S3 block's moto_server gets a free port instead of 5000,
  and the script waits for it to answer before the first request (a user typing the commands does
  the same).
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text(encoding="utf-8")
START = "Every block from here on runs as written"
NEMO_SECTION = "## Coming from NeMo Automodel or BAGEL"
WAIT_FOR_SERVER = "for _ in $(seq 1200); do curl -s -o /dev/null http://127.0.0.1:5000/ && break; sleep 0.1; done\n"
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.M | re.S)


def blocks(text: str) -> list[tuple[str, str]]:
    """``(language, body)`` of every fenced block of ``text``, in order."""
    return [(m.group(1), m.group(2)) for m in _FENCE.finditer(text)]


def sections() -> tuple[list[tuple[str, str]], list[tuple[str, str]], list[tuple[str, str]]]:
    """README's blocks split into (set-up blocks, blocks run in order, blocks of the NeMo section)."""
    start, nemo = README.index(START), README.index(NEMO_SECTION)
    nemo_end = README.index("\n## ", nemo + 1)
    return blocks(README[:start]), blocks(README[start:nemo] + README[nemo_end:]), blocks(README[nemo:nemo_end])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def as_shell(language: str, body: str) -> str:
    """One README block as lines of a bash script: shell as it is, Python fed to ``python``."""
    if language == "bash":
        return body
    assert language == "python", f"no way to run a {language!r} block outside the NeMo section"
    return f"python - <<'README_PYTHON_BLOCK'\n{body}README_PYTHON_BLOCK\n"


def as_script(run: list[tuple[str, str]], port: int) -> str:
    script = "\n".join(as_shell(language, body) for language, body in run)
    script = script.replace("source .venv/bin/activate", f"export PATH={Path(sys.executable).parent}:$PATH")
    script = script.replace(".venv/bin/moto_server", "moto_server").replace(
        "curl -X PUT", WAIT_FOR_SERVER + "curl -X PUT"
    )
    return "set -euo pipefail\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n" + script.replace("5000", str(port))


def test_every_fenced_block_of_the_readme_is_checked_or_run():
    setup, run, nemo = sections()
    assert len(setup) + len(run) + len(nemo) == README.count("\n```") // 2 == len(blocks(README))
    assert {language for language, _ in setup} == {"bash"}
    assert {language for language, _ in run} <= {"bash", "python"}
    assert {language for language, _ in nemo} <= {"yaml", "python"} and nemo


def test_the_setup_blocks_name_make_targets_and_extras_that_exist():
    setup, _, _ = sections()
    makefile = (REPO / "Makefile").read_text()
    pyproject = (REPO / "pyproject.toml").read_text()
    section = pyproject[pyproject.index("[project.optional-dependencies]") :].split("\n[", 1)[0]
    extras = set(re.findall(r"^([\w-]+) = \[", section, re.M))
    assert {"train", "video", "demo"} <= extras, extras
    lines = [line.split("#")[0].strip() for _, body in setup for line in body.splitlines()]
    assert lines and all(line.startswith(("make ", "pip install ")) for line in lines), lines
    for line in lines:
        if line.startswith("make "):
            assert re.search(rf"^{line.split()[1]}:", makefile, re.M), line
        else:
            target = re.fullmatch(r"pip install '?\./editstream(?:\[(\w+)\])?'?", line)
            assert target, line
            assert target.group(1) is None or target.group(1) in extras, line


def test_the_readme_blocks_after_the_install_run_in_order(tmp_path):
    assert shutil.which("curl"), "the README's S3 block uses curl"
    shutil.copytree(REPO / "converters", tmp_path / "converters")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    _, run, _ = sections()
    done = subprocess.run(
        ["bash", "-c", as_script(run, free_port())], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "try" / "edit.html").is_file() and (tmp_path / "try" / "mb.html").is_file()
    assert (tmp_path / "try" / "mb-pq" / "parquet_info.json").is_file()
    assert re.search(r"^\d+ rows in \d+ batches, each once: True$", done.stdout, re.M)  # the elastic resume
    assert '"samples": 20' in done.stdout  # the S3 block streamed from the local S3


RESOLVE_RECIPE = """\
import importlib, sys, yaml
from nemo_automodel.cli.utils import resolve_recipe_name
from nemo_automodel.recipes.multimodal.pretrain import PretrainRecipeForMultimodal

target = resolve_recipe_name(yaml.safe_load(sys.stdin)["recipe"])
module, _, name = target.rpartition(".")
recipe = getattr(importlib.import_module(module), name)
assert issubclass(recipe, PretrainRecipeForMultimodal), recipe
print(target)
"""


@pytest.mark.nemo_env
def test_the_nemo_blocks_run_with_nemo_automodel_installed(tmp_path):
    pytest.importorskip("nemo_automodel.recipes.multimodal.pretrain")
    _, _, nemo = sections()
    for language, body in nemo:
        command = ["-c", RESOLVE_RECIPE] if language == "yaml" else ["-"]
        done = subprocess.run([sys.executable, *command], input=body, cwd=tmp_path, capture_output=True, text=True)
        assert done.returncode == 0, (body, done.stderr[-3000:])


def test_the_nemo_recipe_without_nemo_automodel_says_what_to_install(tmp_path):
    """As after ``make demo``, which installs no NeMo: one line naming the package and the command."""
    code = "import sys; sys.modules['nemo_automodel'] = None\nfrom editstream.nemo import PretrainRecipeForMultimodal"
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ModuleNotFoundError: editstream.nemo.PretrainRecipeForMultimodal"), done.stderr
    assert "nemo-automodel" in last and "pip install --no-deps nemo-automodel==0.7.0" in last, last
    assert "During handling" not in done.stderr  # one error, not a chain
