"""The README's shell blocks, from "The blocks below run as they are" on, run in order in a fresh
folder holding the project's files, with the test venv's ``editstream`` on the PATH: what a new user
types after ``make demo`` works. The S3 block's moto_server gets a free port instead of 5000, and the
script waits for it to answer before the first request (a user typing the commands does the same)."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
START = "The blocks below run as they are"
WAIT_FOR_SERVER = "for _ in $(seq 1200); do curl -s -o /dev/null http://127.0.0.1:5000/ && break; sleep 0.1; done\n"


def readme_blocks() -> list[str]:
    text = (REPO / "README.md").read_text()
    return re.findall(r"```bash\n(.*?)```", text[text.index(START) :], re.S)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def as_script(blocks: list[str], port: int) -> str:
    script = "\n".join(blocks)
    script = script.replace("source .venv/bin/activate", f"export PATH={Path(sys.executable).parent}:$PATH")
    script = script.replace(".venv/bin/moto_server", "moto_server").replace(
        "curl -X PUT", WAIT_FOR_SERVER + "curl -X PUT"
    )
    return "set -euo pipefail\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n" + script.replace("5000", str(port))


def test_the_readme_blocks_after_the_install_run_in_order(tmp_path):
    assert shutil.which("curl"), "the README's S3 block uses curl"
    shutil.copytree(REPO / "converters", tmp_path / "converters")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    script = as_script(readme_blocks(), free_port())
    done = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "try" / "edit.html").is_file() and (tmp_path / "try" / "mb.html").is_file()
    assert (tmp_path / "try" / "mb-pq" / "parquet_info.json").is_file()
    assert '"samples": 20' in done.stdout  # the last block streamed from the local S3
