"""What grading needs once per run, loaded and verified before the first submission runs: the
suite, its references (checked by checksum), the probes built from them, the worker's limits."""

from __future__ import annotations

from dataclasses import dataclass, replace

from grader.probes import Probe, build_probes
from grader.refdata import ReferenceSet, load_default_suite, load_references
from grader.sandbox.policy import SandboxSettings
from grader.sandbox.runner import WorkerLimits
from grader.suite import Suite


@dataclass(frozen=True)
class Options:
    """What a caller may change of the suite's settings for one run."""

    function: str | None = None  # overrides the suite's function name
    timeout_s: float | None = None  # overrides the suite's limits
    memory_mb: int | None = None
    strict_sandbox: bool = False  # refuse to run a submission without network, filesystem and process isolation
    framework: str | None = None  # overrides the suite's framework: auto, numpy, torch or jax


@dataclass(frozen=True)
class Prepared:
    """What grading needs once per run: the suite, its verified references and the probes."""

    suite: Suite
    refs: ReferenceSet
    probes: list[Probe]
    function: str
    limits: WorkerLimits
    sandbox: SandboxSettings = SandboxSettings()
    framework: str = "auto"


def prepare(suite: Suite | None = None, options: Options | None = None) -> Prepared:
    """Load and verify everything before the first submission runs.

    Raises SuiteError or ReferenceDataError (exit code 2) when the suite or references are bad.
    """
    options = options or Options()
    suite = suite or load_default_suite()
    refs = load_references(suite)
    limits = WorkerLimits(
        timeout_s=options.timeout_s if options.timeout_s is not None else suite.limits.timeout_s,
        memory_mb=options.memory_mb if options.memory_mb is not None else suite.limits.memory_mb,
        output_bytes=suite.limits.output_bytes,
    )
    # The references in use are hidden from the worker wherever the suite keeps them.
    sandbox = SandboxSettings(strict=options.strict_sandbox, hidden=(str(refs.directory),))
    function = options.function or suite.function
    # The checks and the diagnoses read the suite: each names the function actually graded.
    suite = replace(suite, function=function)
    return Prepared(suite, refs, build_probes(suite, refs), function, limits, sandbox, options.framework or suite.framework)
