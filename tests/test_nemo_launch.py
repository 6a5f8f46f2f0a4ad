"""NeMo's own launcher route for editstream's recipe line, from a regular (wheel) install.

``automodel CFG --nproc-per-node N`` turns ``recipe: editstream.nemo.PretrainRecipeForMultimodal`` into
the file ``<site-packages>/editstream/nemo.py`` (NeMo's ``_recipe_module_path``) and has torchrun run it
as a script; the older line ``editstream.nemo.recipes.X`` gives ``editstream/nemo/recipes.py``. These
tests build editstream's wheel, install it into a folder, ask NeMo's own function for the path and run
each file the way a script runs (its folder first on ``sys.path``), checking that no editstream module
took a top-level name.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import ROOT

pytestmark = pytest.mark.nemo_env

RECIPE_LINES = ("editstream.nemo.PretrainRecipeForMultimodal", "editstream.nemo.recipes.PretrainRecipeForMultimodal")

# Runs a file as Python runs a script (its folder first on sys.path, __main__), then lists the
# top-level names that were loaded, or would now load, from inside the installed editstream tree
# (a later `import datasets` or `import utils` in a worker, say).
DRIVER = """
import json, os, runpy, sys
script, tree, config = sys.argv[1:4]
sys.path.insert(0, os.path.dirname(script))
sys.argv = [script, "-c", config]
error = ""
try:
    runpy.run_path(script, run_name="__main__")
except BaseException as exc:
    error = type(exc).__name__ + ": " + str(exc)
tree = os.path.realpath(tree)
taken = sorted(
    name for name, module in list(sys.modules.items())
    if "." not in name and not name.startswith(("editstream", "__"))
    and os.path.realpath(getattr(module, "__file__", None) or "/").startswith(tree + os.sep)
)
import importlib.util
folder = os.path.dirname(script)
for entry in sorted(os.listdir(folder)):
    name = entry[:-3] if entry.endswith(".py") else entry
    if not name.isidentifier() or name.startswith("__") or name in sys.modules:
        continue
    spec = importlib.util.find_spec(name)
    origin = os.path.realpath((spec.origin or "/") if spec else "/")
    if origin.startswith(tree + os.sep):
        taken.append(name)
print(json.dumps({"error": error, "taken": taken}))
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding editstream installed from its wheel (no dependencies, no network)."""
    pytest.importorskip("nemo_automodel.components.launcher.interactive")
    work = tmp_path_factory.mktemp("wheel")
    pip = [sys.executable, "-m", "pip", "-q"]
    subprocess.run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", str(work / "dist"), str(ROOT)],
        check=True,
        timeout=600,
    )
    (wheel,) = (work / "dist").glob("editstream-*.whl")
    target = work / "site"
    subprocess.run([*pip, "install", "--no-deps", "--no-index", "--target", str(target), str(wheel)], check=True)
    return target


@pytest.mark.parametrize("recipe", RECIPE_LINES)
def test_nemos_launcher_finds_the_recipe_file_and_it_runs_as_a_script_without_shadowing(installed, recipe, tmp_path):
    from nemo_automodel.components.launcher.interactive import _recipe_module_path

    script = _recipe_module_path(recipe, installed)
    assert script.is_file(), f"NeMo's launcher would run {script}, which a regular install does not hold"
    missing = tmp_path / "no-such-config.yaml"
    proc = subprocess.run(
        [sys.executable, "-c", DRIVER, str(script), str(installed / "editstream"), str(missing)],
        capture_output=True,
        text=True,
        timeout=300,
        env={"PYTHONPATH": str(installed), "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "no-such-config.yaml" in report["error"], report  # imports worked up to reading the config
    assert report["taken"] == [], f"editstream modules loaded as top-level names: {report['taken']}"
