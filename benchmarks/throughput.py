"""Throughput of `grade`, measured against same-run baselines.

    python benchmarks/throughput.py            # the full run (about four minutes on 2 cores)
    python benchmarks/throughput.py --quick    # fewer pytest runs and repetitions

1. Batch: a corpus of 200 submissions (half correct, half with assorted bugs, built from
   tests/corpus/ in a temporary folder) graded by ``grade --no-cache --format json -o json=FILE``
   in one process, default --jobs, three times (the median counts), against a loop running one
   ``pytest`` process per submission over the same files (each with a tiny test that imports the
   submission and compares it with a reference), a third of the loop after each timed batch.
   Target: 20x faster. The batch's CPU time (grader, fork server and workers) is printed too:
   it moves less than the wall time with the load of this shared machine.
2. Cold start: ``grade --no-cache SUB`` (the full terminal report) on one correct and on one buggy
   submission, each against ``python -c "import numpy"``, all interleaved, medians compared.
   Target: within 3x.

The slow examples of the corpus (a submission that never returns, a memory bomb) are left out:
they cost their time limit on either side and measure nothing but the limit. This machine's
figures move by a tenth from one minute to the next (it is shared); the ratios, measured in the
same run, move less.
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
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "corpus"
SLOW = {"timeout.py", "memory-limit.py"}
SETTLE_S = 0.5
TEST_FILE = '''\
import importlib.util
import pathlib

import numpy as np


def load():
    path = pathlib.Path(__file__).with_name("submission.py")
    spec = importlib.util.spec_from_file_location("submission", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.attention


def reference(Q, K, V):
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return (weights / weights.sum(axis=-1, keepdims=True)) @ V


def test_attention():
    attention = load()
    rng = np.random.default_rng(0)
    for shape_q, shape_k, d_v in [((3, 4), (5, 4), 7), ((2, 3, 4), (2, 5, 4), 6), ((4, 4, 4), (4, 4, 4), 4), ((2, 2, 3, 8), (2, 2, 5, 8), 8)]:
        Q, K = rng.standard_normal(shape_q), rng.standard_normal(shape_k)
        V = rng.standard_normal(shape_k[:-1] + (d_v,))
        np.testing.assert_allclose(attention(Q, K, V), reference(Q, K, V), rtol=1e-4, atol=1e-6)
'''


def numpy_only(path: Path) -> bool:
    """The batch measured here is NumPy's: a torch or JAX file costs the framework's import on
    both sides and measures that import, not the grader."""
    source = path.read_text()
    return not any(f"import {name}" in source or f"from {name}" in source for name in ("torch", "jax"))


def build_corpus(folder: Path, count: int) -> list[Path]:
    correct = sorted(p for p in (CORPUS / "correct").glob("*.py") if numpy_only(p))
    buggy = sorted(p for p in (CORPUS / "buggy").glob("*.py") if p.name not in SLOW and numpy_only(p))
    files = []
    for i in range(count):
        source = (correct if i % 2 == 0 else buggy)[(i // 2) % len(correct if i % 2 == 0 else buggy)]
        target = folder / f"sub_{i:03d}_{source.stem}.py"
        # A distinct first line: every file is its own submission, as in a real batch.
        target.write_text(f"# submission {i}\n" + source.read_text())
        files.append(target)
    return files


def run(cmd: list[str], env: dict[str, str], cwd: Path | None = None) -> float:
    started = time.perf_counter()
    subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, timeout=600)
    return time.perf_counter() - started


def settled(measure: Callable[[list[str], dict[str, str]], float], cmd: list[str], env: dict[str, str]) -> float:
    """``measure`` after a pause: the kernel tears a finished worker's namespaces down in the
    background, and that work must not land on the next measurement (whichever side it is)."""
    time.sleep(SETTLE_S)
    return measure(cmd, env)


def pytest_loop(files: list[Path], work: Path, env: dict[str, str], first: int = 0) -> list[float]:
    # Plain pytest: installed plugins (hypothesis's costs about a second here) are not loaded, so
    # the baseline is as fast as pytest gets.
    env = {**env, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    times = []
    for i, file in enumerate(files, start=first):
        folder = work / f"pytest_{i:03d}"
        folder.mkdir()
        shutil.copy(file, folder / "submission.py")
        (folder / "test_submission.py").write_text(TEST_FILE)
        times.append(run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(folder / "test_submission.py")], env, cwd=folder))
    return times


def import_profile(file: Path, env: dict[str, str]) -> list[tuple[str, float]]:
    """Where a cold `grade` spends its import time: ``-X importtime`` summed by top package (the
    grader's own modules one by one), largest first, in milliseconds."""
    result = subprocess.run([sys.executable, "-X", "importtime", "-m", "grader", "--no-cache", str(file)], env=env, capture_output=True, text=True, timeout=120)
    totals: dict[str, float] = {}
    for line in result.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        own, _cumulative, name = line.split("|")
        try:
            micros = float(own.split(":")[-1])
        except ValueError:
            continue  # the header line
        name = name.strip()
        key = name if name.startswith("grader") else name.split(".")[0]
        totals[key] = totals.get(key, 0.0) + micros / 1000
    return sorted(totals.items(), key=lambda item: -item[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=200, help="submissions in the batch (default 200)")
    parser.add_argument("--pytest-runs", type=int, default=None, help="pytest runs to time (default: all; their mean counts for each submission)")
    parser.add_argument("--batches", type=int, default=3, help="timed batch runs; the median counts (default 3)")
    parser.add_argument("--repeat", type=int, default=9, help="repetitions of the cold-start measurements (default 9)")
    parser.add_argument("--quick", action="store_true", help="40 pytest runs and 5 repetitions")
    parser.add_argument("--profile", action="store_true", help="also show where a cold start spends its import time")
    args = parser.parse_args()
    if args.quick:
        args.pytest_runs = args.pytest_runs or 40
        args.repeat = 5
    # As installed: bytecode is cached (pip compiles it at install), so PYTHONDONTWRITEBYTECODE
    # would only measure compiling the grader's sources on every start.
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "GITHUB_ACTIONS", "PYTHONDONTWRITEBYTECODE")}
    env["PYTHONPATH"] = str(ROOT)
    jobs = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    with tempfile.TemporaryDirectory(prefix="grader-bench-") as tmp:
        work = Path(tmp)
        corpus = work / "corpus"
        corpus.mkdir()
        files = build_corpus(corpus, args.count)
        grade = [sys.executable, "-m", "grader", "--no-cache"]

        # Batch: the grader over the whole folder, once to warm the disk cache, then timed, each
        # timed run followed by its share of the pytest loop: the speed of this (shared) machine
        # drifts over minutes, and both sides then sample the same minutes.
        run([*grade, "--quiet", str(corpus)], env)
        out = work / "batch.json"
        sampled = files if args.pytest_runs is None else files[:: max(1, len(files) // args.pytest_runs)][: args.pytest_runs]
        share = -(-len(sampled) // args.batches)  # ceiling
        batch_times: list[float] = []
        batch_cpu: list[tuple[float, float]] = []
        pytest_times: list[float] = []
        for turn in range(args.batches):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            batch_times.append(run([*grade, "--quiet", "--format", "json", "--output", f"json={out}", str(corpus)], env))
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            # CPU time of the whole run (grader, fork server, workers: every process is reaped by
            # its parent), less sensitive than the wall time to what else the machine runs.
            batch_cpu.append((after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime))
            pytest_times += pytest_loop(sampled[turn * share : (turn + 1) * share], work, env, first=turn * share)
        batch_s = statistics.median(batch_times)
        summary = json.loads(out.read_text())["summary"]
        pytest_total = statistics.mean(pytest_times) * len(files)

        # Cold start: a new process each time, interleaved with the numpy baseline.
        subjects = {"correct": corpus / files[0].name, "buggy": ROOT / "submissions_example" / "seed_buggy.py"}
        numpy_times: list[float] = []
        cold: dict[str, list[float]] = {name: [] for name in subjects}
        for _ in range(args.repeat):
            numpy_times.append(settled(run, [sys.executable, "-c", "import numpy"], env))
            for name, path in subjects.items():
                cold[name].append(settled(run, [*grade, str(path)], env))
        profile = import_profile(subjects["buggy"], env) if args.profile else []

    n = len(files)
    numpy_med = statistics.median(numpy_times)
    batch_ratio = pytest_total / batch_s
    print(f"machine: {jobs} CPUs, Python {sys.version.split()[0]}")
    print(f"batch of {n} submissions ({summary['passed']} passed, {summary['failed']} failed), --jobs {jobs}, JSON report to stdout and a file:")
    print(f"  grade:           {batch_s:7.2f} s  {n / batch_s:7.1f} submissions/s  {1000 * batch_s / n:7.1f} ms/submission"
          + (f"  (median of {len(batch_times)}: {', '.join(f'{t:.2f}' for t in batch_times)} s)" if len(batch_times) > 1 else ""))
    user = statistics.median(u for u, _ in batch_cpu)
    system = statistics.median(k for _, k in batch_cpu)
    print(f"  grade CPU time:  {user + system:7.2f} s  ({1000 * user / n:.1f} ms user + {1000 * system / n:.1f} ms system per submission, {(user + system) / batch_s:.2f} CPUs busy)")
    print(f"  pytest per file: {pytest_total:7.2f} s  {n / pytest_total:7.1f} submissions/s  {1000 * pytest_total / n:7.1f} ms/submission"
          + (f"  (mean of {len(pytest_times)} runs, times {n})" if len(pytest_times) != n else ""))
    print(f"  ratio:           {batch_ratio:7.1f}x faster  (target >= 20x: {'met' if batch_ratio >= 20 else 'MISSED'})")
    print(f"cold start, median of {args.repeat}:")
    print(f"  python -c 'import numpy':     {1000 * numpy_med:6.0f} ms")
    for name, times in cold.items():
        ratio = statistics.median(times) / numpy_med
        print(f"  grade one {name + ' submission:':<19}{1000 * statistics.median(times):6.0f} ms  {ratio:5.2f}x  (target <= 3x: {'met' if ratio <= 3 else 'MISSED'})")
    if profile:
        print("cold start imports (python -X importtime, own time summed by package, ms):")
        for name, ms in profile[:15]:
            print(f"  {ms:6.1f}  {name}")
        print(f"  {sum(ms for _, ms in profile):6.1f}  all imports")


if __name__ == "__main__":
    main()
