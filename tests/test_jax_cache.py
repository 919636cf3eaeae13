"""The JAX compile cache of a batch (grader.jax_cache, grader.sandbox.compile_cache): filled by the grader alone, read
but never written by the workers, offered only where Landlock makes it read-only, and the same
verdicts with it as without.

The hostile submission here is bounded by itself (a few file operations, see
tests/hostile_framework/jax_cache_planter.py).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

from conftest import error_names
from grader.api import Prepared
from grader.discover import Rule, discover
from grader.pipeline import run
from grader.report.model import Report
from grader import jax_cache
from grader.sandbox.forkserver import FORK_SERVER_LAYER, ForkServers
from grader.sandbox.isolation import Layer
from grader.jax_cache import JaxCompileCache, call_shapes
from grader.sandbox.compile_cache import LAYER, open_compile_cache
from grader.sandbox.policy import SandboxSettings, request_meta

HOSTILE_FRAMEWORK = Path(__file__).resolve().parent / "hostile_framework"
REQUIRE_FRAMEWORKS = os.environ.get("GRADER_REQUIRE_FRAMEWORKS") == "1"

CORRECT = '''import jax
import jax.numpy as jnp


def attention(q, k, v):
    scores = jnp.matmul(q, jnp.swapaxes(k, -1, -2)) / jnp.sqrt(q.shape[-1])
    return jnp.matmul(jax.nn.softmax(scores, axis=-1), v)
'''
# Written unlike any of the cache's styles: found in it only operation by operation, if at all.
CORRECT_OTHER = '''import jax.numpy as jnp


def attention(Q, K, V):
    logits = jnp.einsum("...id,...jd->...ij", Q, K) / jnp.sqrt(jnp.float64(K.shape[-1]))
    logits = logits - logits.max(axis=-1, keepdims=True)
    w = jnp.exp(logits)
    return jnp.einsum("...ij,...jd->...id", w / w.sum(axis=-1, keepdims=True), V)
'''
SEED_BUGS = '''import jax
import jax.numpy as jnp


def attention(q, k, v):
    return jax.nn.softmax(q @ k.T / k.shape[-1], axis=-1) @ v
'''


def _needs_jax() -> None:
    try:
        import jax  # noqa: F401
    except ImportError:
        if REQUIRE_FRAMEWORKS:
            pytest.fail("jax is not installed but GRADER_REQUIRE_FRAMEWORKS=1")
        pytest.skip("jax is not installed")


def _entry(report: Report) -> Layer | None:
    return next((layer for layer in report.sandbox if layer.name == LAYER), None)


def _seen(report: Report) -> tuple[object, ...]:
    """Everything of a report that must not depend on the cache."""
    return (
        report.passed,
        report.score,
        [(c.id, c.passed, c.points, c.summary) for c in report.checks],
        [(d.name, d.severity, d.message) for d in report.diagnoses],
        [(layer.name, layer.active) for layer in report.sandbox if layer.name not in (LAYER, FORK_SERVER_LAYER)],
    )


# ---------------------------------------------------------------------------------------------
# Without JAX: who gets the folder, and when it is filled.


def test_a_worker_without_landlock_does_not_use_the_cache() -> None:
    layers = [Layer("mount-namespace", True, ""), Layer("landlock-fs", False, "kernel too old")]
    entry = open_compile_cache("/nonexistent/cache", layers)
    assert entry is not None and not entry.active and "could write" in entry.detail
    assert open_compile_cache(None, layers) is None  # none offered: no entry at all


def test_the_folder_is_one_more_read_only_path_of_the_worker(tmp_path: Path) -> None:
    submission = tmp_path / "sub.py"
    submission.write_text("def attention(Q, K, V):\n    return V\n")
    folder = tmp_path / "cache"
    folder.mkdir()
    meta = request_meta(submission.resolve(), str(tmp_path / "work"), SandboxSettings(compiled=str(folder)))
    assert meta["compiled"] == str(folder) and str(folder) in meta["readable"]
    assert request_meta(submission.resolve(), str(tmp_path / "work"), SandboxSettings())["compiled"] is None


def test_the_cache_is_filled_once_on_the_third_request_and_removed_at_the_end(monkeypatch: pytest.MonkeyPatch, prepared: Prepared) -> None:
    fills: list[int] = []
    made = tempfile.mkdtemp(prefix="grader-jax-cache-test-")

    def fake_fill(shapes: list[Any]) -> tuple[str | None, str]:
        fills.append(len(shapes))
        return made, ""

    monkeypatch.setattr(jax_cache, "_filled", fake_fill)
    cache = JaxCompileCache()
    assert [cache.folder(prepared.probes) for _ in range(4)] == [None, None, made, made]
    assert fills == [len(call_shapes(prepared.probes))]
    cache.close()
    assert not os.path.exists(made)
    assert cache.folder(prepared.probes) is None and fills == [len(call_shapes(prepared.probes))]  # never again


def test_the_shapes_are_all_the_filling_process_learns(prepared: Prepared) -> None:
    shapes = call_shapes(prepared.probes)
    assert shapes and len(set(shapes)) == len(shapes)
    for shape in shapes:
        assert all(isinstance(n, int) for part in (shape.q, shape.k, shape.v) for n in part)


def test_a_filling_that_writes_nothing_offers_no_folder_and_leaves_none() -> None:
    before = set(Path(tempfile.gettempdir()).glob("grader-jax-*"))
    folder, why = jax_cache._filled([])
    assert folder is None and why.startswith("the filling process failed")
    assert set(Path(tempfile.gettempdir()).glob("grader-jax-*")) == before


# ---------------------------------------------------------------------------------------------
# With JAX: a batch that reads it.


def _batch(tmp_path: Path, prepared: Prepared, servers: ForkServers) -> dict[str, Report]:
    files = {"a_correct.py": CORRECT, "b_other.py": CORRECT_OTHER, "c_seed_bugs.py": SEED_BUGS}
    for name, source in files.items():
        (tmp_path / name).write_text(source)
    planter = tmp_path / "d_planter.py"
    planter.write_text((HOSTILE_FRAMEWORK / "jax_cache_planter.py").read_text())
    later = tmp_path / "e_after_the_planter.py"
    later.write_text(CORRECT)
    submissions = discover([tmp_path], Rule(function=prepared.function))
    return {Path(report.path).name: report for _, report in run(submissions, prepared, jobs=2, forkserver=servers)}


@pytest.mark.framework
def test_a_batch_reads_the_cache_it_cannot_write_and_grades_as_without(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prepared: Prepared) -> None:
    _needs_jax()
    with ForkServers.start() as servers:
        monkeypatch.setattr(jax_cache, "FILL_AFTER", 10**6)  # never filled
        (tmp_path / "without").mkdir()
        without = _batch(tmp_path / "without", prepared, servers)
        monkeypatch.setattr(jax_cache, "FILL_AFTER", 1)  # filled for the first JAX submission
        (tmp_path / "with").mkdir()
        cached = _batch(tmp_path / "with", prepared, servers)
    assert all(_entry(report) is None for report in without.values())
    assert sorted(cached) == sorted(without)
    for name, report in cached.items():
        assert _seen(report) == _seen(without[name]), name
    assert cached["a_correct.py"].passed and cached["b_other.py"].passed and cached["e_after_the_planter.py"].passed
    assert {"scale-by-dk", "batch-transpose"} <= set(error_names(cached["c_seed_bugs.py"]))
    landlock = any(layer.name == "landlock-fs" and layer.active for layer in cached["a_correct.py"].sandbox)
    planted = cached["d_planter.py"].output.text
    if landlock:
        for report in cached.values():
            entry = _entry(report)
            assert entry is not None and entry.active, (report.path, entry)
            assert report.output.text == "" or report is cached["d_planter.py"]  # JAX says nothing of the cache
        assert planted.startswith("cache: ") and "entries" in planted, planted
        assert "done" not in planted and planted.count("refused") == 5, planted
    else:
        entry = _entry(cached["a_correct.py"])
        assert entry is not None and not entry.active
        assert planted.startswith("cache: none offered")
    assert cached["d_planter.py"].passed
