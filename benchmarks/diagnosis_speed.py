"""How long the diagnosis engine takes per submission (the worker's time is not counted).

Runs every submission of the test corpus and the examples once in a worker, then times
``diagnose`` on the recorded observations, several times each, and prints the median and the
worst per submission; and the median of the grader's whole judgement of it (framework detection,
checks, diagnosis and locating: the CPU a batch spends per submission besides the worker's).
Run from the repository root:

    python benchmarks/diagnosis_speed.py
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grader.api import Prepared, prepare  # noqa: E402
from grader.checks import run_checks  # noqa: E402
from grader.diagnosis.engine import diagnose  # noqa: E402
from grader.diagnosis.attach import attach_locations  # noqa: E402
from grader.observation import WorkerRun  # noqa: E402
from grader.sandbox.runner import run_submission  # noqa: E402
from grader.submission import prepare_submission  # noqa: E402

SKIP = {"timeout.py", "memory-limit.py", "memory_limit.py"}
REPEATS = 5


def main() -> None:
    prepared = prepare()
    paths = sorted((ROOT / "tests" / "corpus").rglob("*.py")) + sorted((ROOT / "submissions_example").glob("*.py"))
    paths = [p for p in paths if p.name not in SKIP and p.name != "softmax_helper.py"]
    rows = []
    for path in paths:
        run = run_submission(path, prepared.function, prepared.probes, prepared.limits)
        checks = run_checks(prepared.suite, prepared.refs, run, prepared.probes)
        times, whole = [], []
        for _ in range(REPEATS):
            started = time.perf_counter()
            found = diagnose(prepared.suite, prepared.probes, run, checks)
            times.append(time.perf_counter() - started)
            whole.append(_judgement(prepared, path, run))
        rows.append((max(times), statistics.median(times), path.relative_to(ROOT), [d.name for d in found], statistics.median(whole)))
    for worst, median, path, names, _ in sorted(rows, reverse=True):
        print(f"{median * 1000:7.1f} ms median {worst * 1000:7.1f} ms worst  {path}  {names}")
    medians = [r[1] for r in rows]
    print(f"\n{len(rows)} submissions: median {statistics.median(medians) * 1000:.1f} ms, worst median {max(medians) * 1000:.1f} ms")
    judged = [r[4] for r in rows]
    print(f"whole judgement: median {statistics.median(judged) * 1000:.1f} ms, mean {statistics.mean(judged) * 1000:.1f} ms, worst median {max(judged) * 1000:.1f} ms")


def _judgement(prepared: Prepared, path: Path, run: WorkerRun) -> float:
    """Seconds of the grader's own work on one recorded run, as grade_file does it."""
    started = time.perf_counter()
    prepare_submission(path, prepared.framework)
    checks = run_checks(prepared.suite, prepared.refs, run, prepared.probes)
    attach_locations(path, diagnose(prepared.suite, prepared.probes, run, checks), prepared.function)
    return time.perf_counter() - started


if __name__ == "__main__":
    main()
