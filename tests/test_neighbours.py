"""A loose file of a batch folder sees only itself: never the other candidates' files beside it.

The thief lists its folder, reads its neighbour and imports it, and would pass with the
neighbour's correct code; it only reads and prints, so it is harmless even if the sandbox failed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from conftest import ROOT
from grader.entry import load_plan
from grader.submission import framework_sources
from tests.test_hostile import MODES, _command, _env, _mode_unavailable

VICTIM = '''\
# NEIGHBOUR-SECRET-7f3a
import numpy as np


def attention(Q, K, V):
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return (weights / weights.sum(axis=-1, keepdims=True)) @ V
'''

THIEF = '''\
import importlib.util
import os

HERE = os.path.dirname(os.path.abspath(__file__))
for what, action in (
    ("listing", lambda: sorted(os.listdir(HERE))),
    ("reading", lambda: open(os.path.join(HERE, "a_victim.py")).read()),
):
    try:
        print(what, "SUCCEEDED", action())
    except OSError as exc:
        print(what, "failed", type(exc).__name__)
spec = importlib.util.spec_from_file_location("stolen", os.path.join(HERE, "a_victim.py"))
stolen = importlib.util.module_from_spec(spec)
spec.loader.exec_module(stolen)
attention = stolen.attention
'''


def test_a_loose_file_cannot_read_or_run_its_neighbour(tmp_path: Path) -> None:
    (tmp_path / "a_victim.py").write_text(VICTIM)
    (tmp_path / "b_thief.py").write_text(THIEF)
    done = subprocess.run(
        [sys.executable, "-m", "grader", "--no-cache", "--format", "json", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 1, done.stderr
    by_name = {Path(s["path"]).name: s for s in json.loads(done.stdout)["submissions"]}
    assert by_name["a_victim.py"]["passed"]
    thief = by_name["b_thief.py"]
    assert not thief["passed"]
    assert "NEIGHBOUR-SECRET" not in done.stdout and "SUCCEEDED" not in done.stdout
    assert "a_victim.py" not in json.dumps(thief["output"]), thief["output"]


@pytest.mark.parametrize("mode", MODES)
def test_a_loose_file_cannot_read_its_neighbour_as_root_or_unprivileged(mode: str) -> None:
    """The same attack through `grade` as the hostile suite runs it: with the test's privileges,
    as a plain unprivileged uid in a user namespace, and with user namespaces forbidden (where
    Landlock alone keeps the neighbours out)."""
    reason = _mode_unavailable(mode)
    if reason:
        pytest.skip(reason)
    # Not pytest's tmp_path (a 0700 folder): the unprivileged uid must be able to enter it.
    base = Path(tempfile.mkdtemp(prefix="grader-neighbours-"))
    try:
        os.chmod(base, 0o755)
        for name, text in (("a_victim.py", VICTIM), ("b_thief.py", THIEF)):
            (base / name).write_text(text)
            os.chmod(base / name, 0o644)
        done = subprocess.run(
            _command(mode, ["--no-cache", "--format", "json", str(base)], [base]),
            cwd=ROOT, capture_output=True, text=True, timeout=180, env=_env(""),
        )
    finally:
        shutil.rmtree(base, ignore_errors=True)
    assert done.returncode == 1, done.stderr[-2000:]
    by_name = {Path(s["path"]).name: s for s in json.loads(done.stdout)["submissions"]}
    thief = by_name["b_thief.py"]
    active = {layer["name"] for layer in thief["sandbox"] if layer["active"]}
    if not active & {"landlock-fs", "mount-namespace"}:
        pytest.skip(f"[{mode}] neither landlock-fs nor the mount namespace is active here")
    assert by_name["a_victim.py"]["passed"]
    assert not thief["passed"]
    assert "NEIGHBOUR-SECRET" not in done.stdout and "SUCCEEDED" not in done.stdout
    assert "listing failed" in thief["output"]["text"] and "reading failed" in thief["output"]["text"]


def test_a_single_file_still_imports_its_own_helper_module(tmp_path: Path) -> None:
    """Graded by name (not found in a folder of submissions), a file's folder is its own: the
    helper modules beside it load as before."""
    (tmp_path / "helpers.py").write_text(VICTIM.replace("def attention", "def attention_impl"))
    (tmp_path / "solution.py").write_text("from helpers import attention_impl as attention\n")
    done = subprocess.run(
        [sys.executable, "-m", "grader", "--no-cache", "--format", "json", str(tmp_path / "solution.py")],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr


CAREFUL = '''\
import numpy as np

try:
    import plotting  # the demo's charts, when the module is there
except ImportError:
    plotting = None


def attention(Q, K, V):
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return (weights / weights.sum(axis=-1, keepdims=True)) @ V
'''


def test_a_neighbour_named_like_an_import_does_not_choose_the_framework(tmp_path: Path) -> None:
    """Another candidate's plotting.py that imports torch, beside a NumPy file that tries to
    import a plotting module: the loose file's worker never sees the neighbour, so its framework
    comes from its own imports. Graded by name, its folder is its own, and the helper counts."""
    (tmp_path / "alice.py").write_text(CAREFUL)
    (tmp_path / "plotting.py").write_text("import torch\n")
    text = CAREFUL
    plan = load_plan(tmp_path / "alice.py")
    assert framework_sources(tmp_path / "alice.py", text, plan, follow=False) == set()
    assert framework_sources(tmp_path / "alice.py", text, plan) == {"torch"}
    done = subprocess.run(
        [sys.executable, "-m", "grader", "--no-cache", "--format", "json", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    by_name = {Path(s["path"]).name: s for s in json.loads(done.stdout)["submissions"]}
    assert by_name["alice.py"]["passed"] and by_name["alice.py"]["extra"]["framework"] == "numpy", by_name["alice.py"]
