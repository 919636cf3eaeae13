"""Batches of PyTorch and JAX submissions, measured against same-run pytest baselines.

    python benchmarks/frameworks.py                  # both frameworks, the full run
    python benchmarks/frameworks.py --quick          # fewer pytest runs, one timed batch each
    python benchmarks/frameworks.py --framework torch

For each framework: 40 submissions written in that framework (half correct, half with the seed's
bugs: dividing by d_k instead of its square root, and ``.T`` on a batched key tensor), in several
styles, in a temporary folder. They are graded by ``grade --no-cache --quiet --format json -o
json=FILE`` in one process, default --jobs (the workers are forked from the framework's fork
server; from the third JAX submission on, JAX workers read the batch's compile cache, whose
filling counts in the batch's time), against one ``python -m pytest`` run per submission of a ten-test module written in the
same framework (each test loads the submission and compares it with a reference implementation
in that framework). The pytest loop is sampled after each timed batch, so both sides share the
minutes of this (shared) machine; its mean counts for every submission.

Targets: torch at least 20x faster than the loop, JAX at least 10x.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COUNT = 40
TARGETS = {"torch": 20.0, "jax": 10.0}

# Correct submissions, one style each.
TORCH_CORRECT = [
    '''import math
import torch


def attention(q, k, v):
    d_k = q.size(-1)
    scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d_k)
    return torch.matmul(torch.softmax(scores, dim=-1), v)
''',
    '''import torch


def attention(Q, K, V):
    scores = Q @ K.mT * Q.shape[-1] ** -0.5
    return scores.softmax(dim=-1) @ V
''',
    '''import math
import torch
import torch.nn.functional as F


def attention(query, key, value):
    scores = torch.einsum("...qd,...kd->...qk", query, key) / math.sqrt(query.shape[-1])
    return torch.einsum("...qk,...kd->...qd", F.softmax(scores, dim=-1), value)
''',
    '''import math
import torch
from torch import nn


class ScaledDotProductAttention(nn.Module):
    def forward(self, q, k, v):
        scores = q @ k.transpose(-1, -2) / math.sqrt(k.size(-1))
        return torch.softmax(scores, dim=-1) @ v


attention = ScaledDotProductAttention()
''',
    '''import torch


def attention(Q, K, V):
    d_k = Q.shape[-1]
    scores = torch.matmul(Q, K.transpose(-2, -1)) / d_k ** 0.5
    scores = scores - scores.max(dim=-1, keepdim=True).values
    weights = torch.exp(scores)
    weights = weights / weights.sum(dim=-1, keepdim=True)
    return torch.matmul(weights, V)
''',
]

# The seed's bugs: ``.T`` on a batched key (it reverses every axis) and a division by d_k.
TORCH_BUGGY = [
    '''import torch


def attention(q, k, v):
    d_k = q.size(-1)
    scores = q @ k.T / d_k
    return torch.softmax(scores, dim=-1) @ v
''',
    '''import torch
import torch.nn.functional as F


def attention(Q, K, V):
    scores = torch.matmul(Q, K.T) / Q.shape[-1]
    return torch.matmul(F.softmax(scores, dim=-1), V)
''',
    '''import torch
from torch import nn


class Attention(nn.Module):
    def forward(self, query, key, value):
        d_k = key.size(-1)
        weights = (query @ key.T / d_k).softmax(dim=-1)
        return weights @ value


attention = Attention()
''',
    '''import torch


def attention(Q, K, V):
    d_k = Q.shape[-1]
    scores = torch.matmul(Q, K.T) / d_k
    scores = scores - scores.max(dim=-1, keepdim=True).values
    weights = scores.exp()
    return torch.matmul(weights / weights.sum(dim=-1, keepdim=True), V)
''',
    '''import torch


def attention(q, k, v):
    scale = 1.0 / q.shape[-1]
    return torch.softmax(torch.matmul(q, k.T) * scale, dim=-1) @ v
''',
]

JAX_CORRECT = [
    '''import jax
import jax.numpy as jnp


def attention(q, k, v):
    d_k = q.shape[-1]
    scores = jnp.matmul(q, jnp.swapaxes(k, -2, -1)) / jnp.sqrt(d_k)
    return jnp.matmul(jax.nn.softmax(scores, axis=-1), v)
''',
    '''import jax.numpy as jnp
from jax.nn import softmax


def attention(Q, K, V):
    scores = Q @ K.swapaxes(-1, -2) * Q.shape[-1] ** -0.5
    return softmax(scores, axis=-1) @ V
''',
    '''import math

import jax
import jax.numpy as jnp


def attention(query, key, value):
    scores = jnp.einsum("...qd,...kd->...qk", query, key) / math.sqrt(query.shape[-1])
    return jnp.einsum("...qk,...kd->...qd", jax.nn.softmax(scores, axis=-1), value)
''',
    '''import jax.numpy as jnp


def attention(Q, K, V):
    scores = Q @ jnp.swapaxes(K, -1, -2) / jnp.sqrt(Q.shape[-1])
    scores = scores - scores.max(axis=-1, keepdims=True)
    weights = jnp.exp(scores)
    return (weights / weights.sum(axis=-1, keepdims=True)) @ V
''',
    '''import jax
import jax.numpy as jnp


def attention(q, k, v):
    kt = jnp.moveaxis(k, -1, -2)
    return jax.nn.softmax(q @ kt / jnp.sqrt(k.shape[-1]), axis=-1) @ v
''',
]

JAX_BUGGY = [
    '''import jax
import jax.numpy as jnp


def attention(q, k, v):
    d_k = q.shape[-1]
    scores = q @ k.T / d_k
    return jax.nn.softmax(scores, axis=-1) @ v
''',
    '''import jax.numpy as jnp
from jax.nn import softmax


def attention(Q, K, V):
    return jnp.matmul(softmax(jnp.matmul(Q, K.T) / Q.shape[-1], axis=-1), V)
''',
    '''import jax.numpy as jnp


def attention(Q, K, V):
    d_k = Q.shape[-1]
    scores = Q @ K.T / d_k
    scores = scores - scores.max(axis=-1, keepdims=True)
    weights = jnp.exp(scores)
    return (weights / weights.sum(axis=-1, keepdims=True)) @ V
''',
    '''import jax
import jax.numpy as jnp


def attention(query, key, value):
    scale = 1.0 / query.shape[-1]
    return jax.nn.softmax(query @ jnp.transpose(key) * scale, axis=-1) @ value
''',
    '''import jax
import jax.numpy as jnp


def attention(q, k, v):
    weights = jax.nn.softmax(jnp.matmul(q, k.T) / k.shape[-1], axis=-1)
    return jnp.matmul(weights, v)
''',
]

SOURCES = {"torch": (TORCH_CORRECT, TORCH_BUGGY), "jax": (JAX_CORRECT, JAX_BUGGY)}

# The baseline: ten tests a course would write, in the submission's framework.
TEST_HEAD = {
    "torch": '''import importlib.util
import pathlib

import numpy as np
import torch


def reference(Q, K, V):
    scores = torch.matmul(Q, K.transpose(-2, -1)) / Q.shape[-1] ** 0.5
    return torch.matmul(torch.softmax(scores, dim=-1), V)


def tensor(array):
    return torch.from_numpy(array)


def plain(value):
    return value.detach().numpy()
''',
    "jax": '''import importlib.util
import pathlib

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp


def reference(Q, K, V):
    scores = jnp.matmul(Q, jnp.swapaxes(K, -1, -2)) / jnp.sqrt(Q.shape[-1])
    return jnp.matmul(jax.nn.softmax(scores, axis=-1), V)


def tensor(array):
    return jnp.asarray(array)


def plain(value):
    return np.asarray(value)
''',
}
TEST_BODY = '''

def load():
    path = pathlib.Path(__file__).with_name("submission.py")
    spec = importlib.util.spec_from_file_location("submission", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.attention


def inputs(shape_q, shape_k, d_v, seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    Q, K = rng.standard_normal(shape_q) * scale, rng.standard_normal(shape_k) * scale
    V = rng.standard_normal(shape_k[:-1] + (d_v,))
    return tensor(Q), tensor(K), tensor(V)


def check(shape_q, shape_k, d_v, **kw):
    Q, K, V = inputs(shape_q, shape_k, d_v, **kw)
    np.testing.assert_allclose(plain(load()(Q, K, V)), plain(reference(Q, K, V)), rtol=1e-6, atol=1e-8)


def test_single_query():
    check((1, 4), (5, 4), 7)


def test_small():
    check((3, 4), (5, 4), 7)


def test_head_dim_64():
    check((6, 64), (9, 64), 16)


def test_self_attention():
    check((7, 16), (7, 16), 16)


def test_cross_attention():
    check((11, 32), (6, 32), 10)


def test_batched():
    check((2, 3, 4), (2, 5, 4), 6)


def test_batched_square():
    check((4, 4, 4), (4, 4, 4), 4)


def test_multihead():
    check((2, 3, 5, 8), (2, 3, 6, 8), 7)


def test_large_values():
    check((5, 8), (7, 8), 3, scale=30.0)


def test_output_shape():
    Q, K, V = inputs((2, 4, 6), (2, 9, 6), 5)
    assert tuple(load()(Q, K, V).shape) == (2, 4, 5)
'''


def build_batch(folder: Path, framework: str, count: int) -> list[Path]:
    correct, buggy = SOURCES[framework]
    files = []
    for i in range(count):
        styles = correct if i % 2 == 0 else buggy
        target = folder / f"sub_{i:03d}_{'correct' if i % 2 == 0 else 'buggy'}.py"
        # A distinct first line: every file is its own submission, as in a real batch.
        target.write_text(f"# submission {i}\n" + styles[(i // 2) % len(styles)])
        files.append(target)
    return files


def run(cmd: list[str], env: dict[str, str], cwd: Path | None = None) -> float:
    started = time.perf_counter()
    subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, timeout=1800)
    return time.perf_counter() - started


def pytest_loop(files: list[Path], work: Path, framework: str, env: dict[str, str]) -> list[float]:
    # Plain pytest: installed plugins (hypothesis's costs about a second here) are not loaded, so
    # the baseline is as fast as pytest gets.
    env = {**env, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "JAX_PLATFORMS": "cpu"}
    times = []
    for file in files:
        folder = Path(tempfile.mkdtemp(prefix=f"pytest_{file.stem}_", dir=work))
        shutil.copy(file, folder / "submission.py")
        (folder / "test_submission.py").write_text(TEST_HEAD[framework] + TEST_BODY)
        times.append(run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(folder / "test_submission.py")], env, cwd=folder))
    return times


@dataclass(frozen=True)
class Measured:
    count: int
    batch_times: list[float]  # each timed batch run, seconds
    cpu_s: float  # the median batch's CPU time: grader, fork servers and workers
    pytest_s: float  # the loop's mean run, times the batch's size
    pytest_runs: int
    passed: int
    failed: int
    forked: int  # submissions whose worker was forked from the framework's server
    cached: int  # JAX submissions whose worker read the batch's compile cache

    @property
    def batch_s(self) -> float:
        return statistics.median(self.batch_times)


def measure(framework: str, work: Path, env: dict[str, str], batches: int, pytest_runs: int | None) -> Measured:
    corpus = work / f"{framework}_batch"
    corpus.mkdir()
    files = build_batch(corpus, framework, COUNT)
    grade = [sys.executable, "-m", "grader", "--no-cache", "--quiet", "--format", "json"]
    out = work / f"{framework}.json"
    run([*grade, *map(str, files[:2])], env)  # warms the disk cache: the framework's files
    sampled = files if pytest_runs is None else files[:: max(1, len(files) // pytest_runs)][:pytest_runs]
    share = -(-len(sampled) // batches)  # ceiling
    batch_times: list[float] = []
    batch_cpu: list[float] = []
    pytest_times: list[float] = []
    for turn in range(batches):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        batch_times.append(run([*grade, "--output", f"json={out}", str(corpus)], env))
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        # CPU time of the whole run: grader, fork servers and workers (each is reaped by its parent).
        batch_cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        pytest_times += pytest_loop(sampled[turn * share : (turn + 1) * share], work, framework, env)
    doc = json.loads(out.read_text())
    forked = sum(any(layer["name"] == "fork-server" and layer["active"] for layer in sub["sandbox"]) for sub in doc["submissions"])
    cached = sum(any(layer["name"] == "compile-cache" and layer["active"] for layer in sub["sandbox"]) for sub in doc["submissions"])
    return Measured(
        count=len(files),
        batch_times=batch_times,
        cpu_s=statistics.median(batch_cpu),
        pytest_s=statistics.mean(pytest_times) * len(files),
        pytest_runs=len(pytest_times),
        passed=doc["summary"]["passed"],
        failed=doc["summary"]["failed"],
        forked=forked,
        cached=cached,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--framework", choices=("torch", "jax", "both"), default="both")
    parser.add_argument("--batches", type=int, default=3, help="timed batch runs per framework; the median counts (default 3)")
    parser.add_argument("--pytest-runs", type=int, default=None, help="pytest runs to time per framework (default: all 40)")
    parser.add_argument("--quick", action="store_true", help="one timed batch and 8 pytest runs per framework")
    args = parser.parse_args()
    if args.quick:
        args.batches = 1
        args.pytest_runs = args.pytest_runs or 8
    frameworks = ["torch", "jax"] if args.framework == "both" else [args.framework]
    # As installed: bytecode is cached (pip compiles it at install).
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "GITHUB_ACTIONS", "PYTHONDONTWRITEBYTECODE")}
    env["PYTHONPATH"] = str(ROOT)
    jobs = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    print(f"machine: {jobs} CPUs, Python {sys.version.split()[0]}")
    with tempfile.TemporaryDirectory(prefix="grader-bench-frameworks-") as tmp:
        for framework in frameworks:
            got = measure(framework, Path(tmp), env, args.batches, args.pytest_runs)
            n, ratio, target = got.count, got.pytest_s / got.batch_s, TARGETS[framework]
            times = got.batch_times
            print(f"{framework}: batch of {n} submissions ({got.passed} passed, {got.failed} failed; {got.forked} forked from the {framework} server"
                  + (f", {got.cached} read the batch's compile cache" if framework == "jax" else "") + f"), --jobs {jobs}:")
            print(f"  grade:           {got.batch_s:7.2f} s  {1000 * got.batch_s / n:7.1f} ms/submission"
                  + (f"  (median of {len(times)}: {', '.join(f'{t:.2f}' for t in times)} s)" if len(times) > 1 else ""))
            print(f"  grade CPU time:  {got.cpu_s:7.2f} s  ({1000 * got.cpu_s / n:.0f} ms per submission, {got.cpu_s / got.batch_s:.2f} CPUs busy)")
            print(f"  pytest per file: {got.pytest_s:7.2f} s  {1000 * got.pytest_s / n:7.1f} ms/submission  (ten tests; mean of {got.pytest_runs} runs, times {n})")
            print(f"  ratio:           {ratio:7.1f}x faster  (target >= {target:g}x: {'met' if ratio >= target else 'MISSED'})")

if __name__ == "__main__":
    main()
