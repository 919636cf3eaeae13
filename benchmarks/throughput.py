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
3. The floor of this design: 1,000 submissions (the same kind of corpus) graded by
   ``grade --no-cache --jobs 2`` as in 1., against the least a sandboxed grader must do
   (:func:`floor_main`): one process that imports numpy once and, per submission, forks a child
   that loads the file, calls it on the grader's own probes (as many calls as the worker makes)
   and sends the raw bytes back, compared with ``np.allclose``, two children at a time, each
   with the cheapest isolation: a session of its own (setsid), resource limits and, where the
   kernel permits, a network namespace of its own (unshare(CLONE_NEWNET)). Both run twice,
   interleaved (the median counts). Printed: the grader's throughput as a fraction of the
   floor's. Target: at least half.

The slow examples of the corpus (a submission that never returns, a memory bomb) are left out:
they cost their time limit on either side and measure nothing but the limit. This machine's
figures move by a tenth from one minute to the next (it is shared); the ratios, measured in the
same run, move less.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import resource
import selectors
import signal
import struct
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

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


def summary_line(summary: dict[str, int]) -> str:
    return f"{summary['passed']} passed, {summary['failed']} failed"


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


# --------------------------------------------------------------------------------------------
# The floor: the least a grader that runs each submission in a process of its own must do.

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
FLOOR_TIMEOUT_S = 10.0
FLOOR_LIMITS = ((resource.RLIMIT_AS, 1 << 30), (resource.RLIMIT_CPU, 13), (resource.RLIMIT_FSIZE, 64 << 20), (resource.RLIMIT_NOFILE, 256), (resource.RLIMIT_NPROC, 64), (resource.RLIMIT_CORE, 0))


def write_probes(path: Path) -> int:
    """The grader's probes (the default suite's, fresh ones included) and the float64 reference
    output of each, into an .npz file for the floor; returns how many calls a submission gets."""
    sys.path.insert(0, str(ROOT))
    import numpy as np

    from grader.attention import attention
    from grader.masks import masked_attention
    from grader.prepare import prepare

    arrays: dict[str, object] = {}
    calls = 0
    prepared = prepare()
    probes = [p for p in prepared.probes if p.kind in ("values", "identity")]  # not the gradients of a framework
    for i, probe in enumerate(probes):
        arrays.update({f"Q{i}": probe.Q, f"K{i}": probe.K, f"V{i}": probe.V, f"repeat{i}": np.array(probe.repeat), f"back{i}": np.array(probe.return_inputs)})
        if probe.mask is not None:
            arrays[f"M{i}"] = probe.mask
        arrays[f"E{i}"] = attention(probe.Q, probe.K, probe.V) if probe.mask is None else masked_attention(probe.Q, probe.K, probe.V, probe.mask)
        calls += probe.repeat
    tolerance = prepared.suite.tolerance
    np.savez(path, count=np.array(len(probes)), rtol=np.array(tolerance.rtol), atol=np.array(tolerance.atol), **arrays)  # type: ignore[arg-type]
    return calls


def _isolate() -> bool:
    """In the forked child: setsid, resource limits, a network namespace where permitted.
    Returns whether the network namespace was made."""
    os.setsid()
    for limit, value in FLOOR_LIMITS:
        try:
            resource.setrlimit(limit, (value, value))
        except (ValueError, OSError):
            pass
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.unshare(CLONE_NEWNET) == 0 or libc.unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0


def _frame(array: object) -> bytes:
    import numpy as np

    data = np.ascontiguousarray(array, dtype=np.float64)
    return struct.pack(f"<BB{data.ndim}Q", 0, data.ndim, *data.shape) + data.tobytes()


def _child(path: str, probes: list[dict[str, Any]], out: int) -> None:
    """Load the submission, call it on every probe, write the raw results; never returns."""
    import importlib.util

    chunks = [struct.pack("<B", _isolate())]
    try:
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        spec = importlib.util.spec_from_file_location("submission", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        function = module.attention
        for probe in probes:
            Q, K, V = (probe[k].copy() for k in "QKV")
            for _ in range(probe["repeat"]):
                try:
                    result = function(Q, K, V) if probe["M"] is None else function(Q, K, V, mask=probe["M"])
                    chunks.append(_frame(result))
                except Exception:
                    chunks.append(struct.pack("<B", 1))
            if probe["back"]:
                chunks += [_frame(Q), _frame(K), _frame(V)]
    except BaseException:  # a load error: the calls never made are missing from what is sent
        pass
    view = memoryview(b"".join(chunks))
    try:
        while view:
            view = view[os.write(out, view) :]
    finally:
        os._exit(0)


def _parse(data: bytes) -> tuple[bool, list[Any]]:
    """(network namespace made, each array the child sent or None where the call raised)."""
    import numpy as np

    netns, at, arrays = bool(data[0]), 1, []
    while at < len(data):
        if data[at]:
            arrays.append(None)
            at += 1
            continue
        ndim = data[at + 1]
        shape = struct.unpack_from(f"<{ndim}Q", data, at + 2)
        at += 2 + 8 * ndim
        count = int(np.prod(shape, dtype=np.int64))
        arrays.append(np.frombuffer(data, np.float64, count, at).reshape(shape))
        at += 8 * count
    return netns, arrays


def _judge(data: bytes, probes: list[dict[str, Any]], rtol: float, atol: float) -> tuple[bool, bool]:
    """(passed, network namespace made): every call's output close to the reference, the
    repeated calls equal, the inputs sent back unchanged."""
    import numpy as np

    if not data:
        return False, False
    netns, arrays = _parse(data)
    wanted = sum(p["repeat"] + 3 * p["back"] for p in probes)
    if len(arrays) != wanted:  # it did not load, or died on the way
        return False, netns
    at, passed = 0, True
    for probe in probes:
        outputs = arrays[at : at + probe["repeat"]]
        at += probe["repeat"]
        expected = probe["E"]
        passed = passed and all(out is not None and out.shape == expected.shape and bool(np.allclose(out, expected, rtol=rtol, atol=atol)) for out in outputs)
        passed = passed and all(np.array_equal(out, outputs[0]) for out in outputs[1:])
        if probe["back"]:
            passed = passed and all(back is not None and np.array_equal(back, probe[k]) for back, k in zip(arrays[at : at + 3], "QKV"))
            at += 3
    return passed, netns


def floor_main(probes_file: str, jobs: int, folder: str) -> None:
    """The floor process: prints {"passed", "failed", "network_namespace"} as JSON."""
    import gc
    import importlib.util  # noqa: F401  (imported once here, not in every child)

    import numpy as np

    with np.load(probes_file) as stored:
        probes = [
            {"Q": stored[f"Q{i}"], "K": stored[f"K{i}"], "V": stored[f"V{i}"], "M": stored[f"M{i}"] if f"M{i}" in stored else None, "E": stored[f"E{i}"], "repeat": int(stored[f"repeat{i}"]), "back": bool(stored[f"back{i}"])}
            for i in range(int(stored["count"]))
        ]
        rtol, atol = float(stored["rtol"]), float(stored["atol"])  # the suite's tolerance
    files = sorted(str(p) for p in Path(folder).glob("*.py"))
    gc.freeze()  # the parent's objects stay untouched in the children: fewer copy-on-write faults
    selector = selectors.DefaultSelector()
    running: dict[int, tuple[int, float, bytearray]] = {}  # read fd -> (pid, deadline, data)
    passed = failed = namespaces = 0
    queue = list(files)
    while queue or running:
        while queue and len(running) < jobs:
            path = queue.pop(0)
            read, write = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(read)
                _child(path, probes, write)
            os.close(write)
            running[read] = (pid, time.monotonic() + FLOOR_TIMEOUT_S, bytearray())
            selector.register(read, selectors.EVENT_READ)
        now = time.monotonic()
        for key, _ in selector.select(timeout=max(0.0, min(r[1] for r in running.values()) - now)):
            chunk = os.read(key.fd, 1 << 20)
            if chunk:
                running[key.fd][2].extend(chunk)
                continue
            selector.unregister(key.fd)
            os.close(key.fd)
            pid, _, data = running.pop(key.fd)
            try:
                os.killpg(pid, signal.SIGKILL)  # whatever it left running in its session
            except ProcessLookupError:
                pass
            os.waitpid(pid, 0)
            ok, netns = _judge(bytes(data), probes, rtol, atol)
            passed += ok
            failed += not ok
            namespaces += netns
        for fd, (pid, deadline, _) in list(running.items()):
            if time.monotonic() > deadline:  # too slow: the whole session goes
                try:
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                selector.unregister(fd)
                os.close(fd)
                os.waitpid(pid, 0)
                running.pop(fd)
                failed += 1
    print(json.dumps({"passed": passed, "failed": failed, "network_namespace": namespaces == passed + failed}))


def floor_run(probes_file: Path, jobs: int, folder: Path, env: dict[str, str]) -> tuple[float, dict[str, object]]:
    """The floor process's wall time (its own start, numpy's import included) and its verdicts."""
    started = time.perf_counter()
    result = subprocess.run([sys.executable, __file__, "--floor", str(probes_file), str(jobs), str(folder)], env=env, capture_output=True, text=True, timeout=600)
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"the floor failed: {result.stderr.strip()[-500:]}")
    return elapsed, json.loads(result.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=200, help="submissions in the batch (default 200)")
    parser.add_argument("--pytest-runs", type=int, default=None, help="pytest runs to time (default: all; their mean counts for each submission)")
    parser.add_argument("--batches", type=int, default=3, help="timed batch runs; the median counts (default 3)")
    parser.add_argument("--repeat", type=int, default=9, help="repetitions of the cold-start measurements (default 9)")
    parser.add_argument("--quick", action="store_true", help="40 pytest runs and 5 repetitions")
    parser.add_argument("--profile", action="store_true", help="also show where a cold start spends its import time")
    parser.add_argument("--floor-count", type=int, default=1000, help="submissions graded against the floor (default 1000; 0: no floor)")
    parser.add_argument("--floor-runs", type=int, default=2, help="timed runs of the grader and of the floor, interleaved; the median counts (default 2)")
    parser.add_argument("--floor", nargs=3, metavar=("PROBES", "JOBS", "FOLDER"), help=argparse.SUPPRESS)  # the floor process itself
    args = parser.parse_args()
    if args.floor:
        floor_main(args.floor[0], int(args.floor[1]), args.floor[2])
        return
    if args.quick:
        args.pytest_runs = args.pytest_runs or 40
        args.repeat = 5
        args.floor_runs = 1
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

        # The floor: the same kind of corpus, 1,000 submissions, two jobs on both sides.
        floor_times: list[float] = []
        floor_grade_times: list[float] = []
        floor_verdicts: dict[str, object] = {}
        floor_summary: dict[str, int] = {}
        if args.floor_count:
            big = work / "floor_corpus"
            big.mkdir()
            build_corpus(big, args.floor_count)
            probes_file = work / "probes.npz"
            calls = write_probes(probes_file)
            floor_out = work / "floor_batch.json"
            floor_cmd = [*grade, "--jobs", "2", "--quiet", "--format", "json", "--output", f"json={floor_out}", str(big)]
            run(floor_cmd, env)  # the disk cache warm for both sides
            for _ in range(args.floor_runs):
                floor_grade_times.append(settled(run, floor_cmd, env))
                time.sleep(SETTLE_S)
                elapsed, floor_verdicts = floor_run(probes_file, 2, big, env)
                floor_times.append(elapsed)
            floor_summary = json.loads(floor_out.read_text())["summary"]

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
    if floor_times:
        grade_s, floor_s = statistics.median(floor_grade_times), statistics.median(floor_times)
        fraction = floor_s / grade_s
        count = args.floor_count
        netns = "a network namespace" if floor_verdicts.get("network_namespace") else "NO network namespace (refused here)"
        print(f"floor: {count} submissions, 2 jobs, {calls} calls each; floor isolation: setsid, rlimits, {netns}; median of {len(floor_times)}:")
        print(f"  grade --jobs 2:  {grade_s:7.2f} s  {count / grade_s:7.1f} submissions/s  ({summary_line(floor_summary)})")
        print(f"  floor:           {floor_s:7.2f} s  {count / floor_s:7.1f} submissions/s  ({floor_verdicts['passed']} passed, {floor_verdicts['failed']} failed)")
        print(f"  grade / floor:   {fraction:7.2f} of the floor's throughput (floor {1 / fraction:.1f}x faster; target >= 0.5: {'met' if fraction >= 0.5 else 'MISSED'})")
    if profile:
        print("cold start imports (python -X importtime, own time summed by package, ms):")
        for name, ms in profile[:15]:
            print(f"  {ms:6.1f}  {name}")
        print(f"  {sum(ms for _, ms in profile):6.1f}  all imports")


if __name__ == "__main__":
    main()
