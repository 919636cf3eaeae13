"""A submission names the file its exception came from, and the grader never opens that file.

The worker reports where an exception was raised: a file and a line. A submission chooses both
(``compile(source, "<any name>", "exec")`` with blank lines in front), so a grader that read the
line itself would read, for the submission and outside its sandbox, a file the sandbox keeps
from it: the checkout's ``.git/config`` (the CI token of actions/checkout sits there), a
neighbour's file in a batch folder, or a FIFO that blocks the read for good. Each submission
here only raises; the secrets are made up.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

TOKEN = "AUTHORIZATION: basic SECRET-TOKEN-5c1e"
NEIGHBOUR_SECRET = "NEIGHBOUR-LINE-9b2d"

# Raises from line ``line`` of code compiled under the name ``target`` (a path relative to the
# submission's folder), as a traceback through that file would say.
IMPERSONATOR = '''\
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def attention(Q, K, V):
    exec(compile("\\n" * ({line} - 1) + "raise RuntimeError('see the line')", os.path.join(HERE, {target!r}), "exec"))
'''

CORRECT = '''\
import numpy as np


def attention(Q, K, V):
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return (weights / weights.sum(axis=-1, keepdims=True)) @ V
'''


def _grade(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "grader", "--no-cache", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env={**os.environ, "PYTHONPATH": str(ROOT)})


def _all_outputs(tmp_path: Path, *args: str) -> str:
    """Everything the run printed and wrote: the text report, JSON, HTML, Markdown, GitHub."""
    out = tmp_path / "out"
    out.mkdir()
    done = _grade("--audience", "reviewer", "-v", *args, "-o", f"json={out / 'r.json'}", "-o", f"html={out / 'r.html'}", "-o", f"markdown={out / 'r.md'}", cwd=tmp_path)
    github = _grade("--format", "github", *args, cwd=tmp_path)
    assert done.returncode == 1 and github.returncode == 1, done.stderr + github.stderr
    return done.stdout + done.stderr + github.stdout + "".join(f.read_text() for f in sorted(out.iterdir()))


def test_a_line_of_the_checkouts_git_config_is_never_shown(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    (checkout / ".git").mkdir(parents=True)
    (checkout / ".git" / "config").write_text(f'[core]\n\tbare = false\n[http "https://github.com/"]\n\textraheader = {TOKEN}\n')
    (checkout / "attention.py").write_text(IMPERSONATOR.format(line=4, target=".git/config"))
    shown = _all_outputs(tmp_path, "--candidate", str(checkout))
    assert "crash" in shown and ".git/config" in shown  # located where the worker said...
    assert "SECRET-TOKEN" not in shown and "extraheader" not in shown  # ...but never read there


def test_a_line_of_a_neighbours_file_is_never_shown(tmp_path: Path) -> None:
    batch = tmp_path / "batch"
    batch.mkdir()
    (batch / "a_victim.py").write_text(CORRECT.replace("import numpy as np\n", f"import numpy as np\nSECRET = {NEIGHBOUR_SECRET!r}\n"))
    (batch / "b_thief.py").write_text(IMPERSONATOR.format(line=2, target="a_victim.py"))
    shown = _all_outputs(tmp_path, str(batch))
    assert "b_thief.py" in shown and "crash" in shown
    assert NEIGHBOUR_SECRET not in shown


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_an_exception_named_after_a_fifo_neither_blocks_nor_loses_the_batch(tmp_path: Path) -> None:
    """The submission puts its own text for the FIFO into linecache, so the worker never opens
    it either; a read by the grader would block every report of the batch."""
    batch = tmp_path / "batch"
    (batch / "cand").mkdir(parents=True)
    os.mkfifo(batch / "cand" / "notes.py")
    (batch / "cand" / "attention.py").write_text(
        "import linecache, os\n\nHERE = os.path.dirname(os.path.abspath(__file__))\n"
        "NAME = os.path.join(HERE, 'notes.py')\n"
        "linecache.cache[NAME] = (1, None, ['boom\\n'], NAME)\n\n"
        "def attention(Q, K, V):\n"
        "    exec(compile(\"raise RuntimeError('from the FIFO')\", NAME, 'exec'))\n"
    )
    (batch / "good.py").write_text(CORRECT)
    done = _grade("--jobs", "2", "--format", "json", str(batch), cwd=tmp_path, timeout=90)
    reports = {Path(s["path"]).relative_to(batch).parts[0]: s for s in json.loads(done.stdout)["submissions"]}
    assert reports["good.py"]["passed"] and not reports["cand"]["passed"]
    (crash,) = [d for d in reports["cand"]["diagnoses"] if d["name"] == "crash"]
    assert crash["location"]["file"].endswith("notes.py") and crash["location"]["observed"] is True


def test_an_exception_in_a_helper_module_names_that_file(tmp_path: Path) -> None:
    """Raised in ops.py, not in the graded attention.py: "at line 3" alone would send the
    candidate to line 3 of the wrong file."""
    checkout = tmp_path / "checkout"
    (checkout / "pkg").mkdir(parents=True)
    (checkout / "pkg" / "ops.py").write_text("def split(x):\n    # three axes only\n    batch, seq, dim = x.shape\n    return batch, seq, dim\n")
    (checkout / "pkg" / "attention.py").write_text(CORRECT.replace("def attention(Q, K, V):\n", "def attention(Q, K, V):\n    from pkg.ops import split\n\n    split(Q)\n"))
    done = _grade("--format", "json", "--candidate", str(checkout), cwd=tmp_path)
    (report,) = json.loads(done.stdout)["submissions"]
    (crash,) = [d for d in report["diagnoses"] if d["name"] == "crash"]
    assert "at pkg/ops.py, line 3" in crash["message"]
    assert crash["location"]["file"].endswith("pkg/ops.py") and crash["location"]["code"] == "batch, seq, dim = x.shape"
    # Every report that gives the line gives the file with it.
    markdown = _grade("--format", "markdown", "--candidate", "checkout", cwd=tmp_path).stdout
    github = _grade("--format", "github", "--candidate", "checkout", cwd=tmp_path).stdout
    assert "**E103 crash** (checkout/pkg/ops.py, line 3)" in markdown
    assert "Code: checkout/pkg/ops.py, line 3: batch, seq, dim = x.shape" in github
