"""Peak memory of the `grade` process over a small and a large batch: it must not grow with the
batch (target: the large batch's peak at most 1.5x the small one's).

    python benchmarks/memory.py                      # 1,000 and 8,000 submissions (about two minutes on 2 cores)
    python benchmarks/memory.py --counts 500 2000    # a quicker look at the trend

Each batch is a temporary folder of N small submissions, copies of submissions_example/ (half
correct, half with assorted bugs; the slow ones, a timeout and a memory bomb, left out), each
with a distinct first line so that every file is its own submission. It is graded with the cache
off, ``--jobs 2``, the one-line text report on stdout and three report files
(``-o json=... -o junit=... -o csv=...``), as a course would grade it.

What is measured is the grader's own process, not its workers or fork server: the command runs
under a small wrapper that, at exit, records ``ru_maxrss`` of ``getrusage(RUSAGE_SELF)`` (its
peak resident set) and ``VmHWM`` from ``/proc/self/status`` (the same figure, as the kernel keeps
it). A child's memory counts in neither.
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "submissions_example"
CORRECT = ("correct.py", "seed_fixed.py")
BUGGY = ("seed_buggy.py", "no_scale.py", "batch_transpose.py", "softmax_unstable.py", "bad_return.py", "input_mutated.py", "returns_weights.py", "crash.py", "load_error.py", "function_missing.py")
TARGET = 1.5

# Runs `grade` in this process and writes its peak memory (KiB) to $GRADER_PEAK_FILE at exit.
WRAPPER = """
import atexit, os, resource, sys

def record():
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    hwm = 0
    try:
        with open("/proc/self/status") as status:
            hwm = next((int(line.split()[1]) for line in status if line.startswith("VmHWM:")), 0)
    except OSError:
        pass
    with open(os.environ["GRADER_PEAK_FILE"], "w") as out:
        out.write(f"{peak} {hwm}")

atexit.register(record)
sys.argv = ["grade", *sys.argv[1:]]
from grader.cli import main
main()
"""


def build_batch(folder: Path, count: int) -> None:
    sources = {name: (EXAMPLES / name).read_text() for name in (*CORRECT, *BUGGY)}
    for i in range(count):
        names = CORRECT if i % 2 == 0 else BUGGY
        name = names[(i // 2) % len(names)]
        (folder / f"sub_{i:05d}_{name}").write_text(f"# submission {i}\n" + sources[name])


def measure(count: int, work: Path, jobs: int, env: dict[str, str]) -> dict[str, float]:
    batch = work / f"batch_{count}"
    batch.mkdir()
    build_batch(batch, count)
    peak_file = work / f"peak_{count}.txt"
    out = {fmt: work / f"report_{count}.{fmt}" for fmt in ("json", "junit", "csv")}
    cmd = [sys.executable, "-c", WRAPPER, "--no-cache", "--jobs", str(jobs), "--quiet"]
    cmd += [arg for fmt, path in out.items() for arg in ("-o", f"{fmt}={path}")]
    started = time.perf_counter()
    result = subprocess.run([*cmd, str(batch)], env={**env, "GRADER_PEAK_FILE": str(peak_file)}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=3600)
    seconds = time.perf_counter() - started
    if result.returncode not in (0, 1):
        raise SystemExit(f"grade exited {result.returncode}: {result.stderr.strip()}")
    with out["csv"].open(newline="") as handle:
        rows = sum(1 for _ in csv.DictReader(handle))
    if rows != count:
        raise SystemExit(f"the gradebook has {rows} rows for {count} submissions")
    peak, hwm = (int(x) for x in peak_file.read_text().split())
    sizes = {fmt: path.stat().st_size for fmt, path in out.items()}
    return {"peak_mb": peak / 1024, "hwm_mb": hwm / 1024, "seconds": seconds, "json_mb": sizes["json"] / 1e6, "junit_mb": sizes["junit"] / 1e6}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--counts", type=int, nargs=2, default=(1000, 8000), metavar=("SMALL", "LARGE"), help="the two batch sizes (default 1000 8000)")
    parser.add_argument("--jobs", type=int, default=2, help="--jobs of the grader (default 2)")
    parser.add_argument("--work", type=Path, default=None, help="where the batches and reports go (default: the system's temporary folder)")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY", "PYTHONDONTWRITEBYTECODE")}
    env["PYTHONPATH"] = str(ROOT)
    env["CI"] = "true"  # no progress bar
    figures = {}
    # The report files of the large batch are hundreds of megabytes: with --work on a disk where
    # the system's temporary folder is a tmpfs (which would hold them in memory).
    with tempfile.TemporaryDirectory(prefix="grader-memory-", dir=args.work) as tmp:
        for count in args.counts:
            figures[count] = measure(count, Path(tmp), args.jobs, env)
    small, large = args.counts
    print(f"machine: {os.cpu_count()} CPUs, Python {sys.version.split()[0]}; grade --no-cache --jobs {args.jobs} -q -o json -o junit -o csv")
    for count, f in figures.items():
        print(f"  {count:6d} submissions: peak RSS {f['peak_mb']:7.1f} MB (VmHWM {f['hwm_mb']:.1f} MB)  {f['seconds']:6.1f} s  {count / f['seconds']:6.1f} submissions/s  (JSON {f['json_mb']:.0f} MB, JUnit {f['junit_mb']:.0f} MB)")
    ratio = figures[large]["peak_mb"] / figures[small]["peak_mb"]
    growth = (figures[large]["peak_mb"] - figures[small]["peak_mb"]) * 1024 / (large - small)
    print(f"  ratio {large} / {small}: {ratio:.2f}x  ({growth:.1f} KB more per submission; target <= {TARGET}x: {'met' if ratio <= TARGET else 'MISSED'})")


if __name__ == "__main__":
    main()
