"""Resource limits (rlimits) of the worker and everything it starts.

Applied after the setup work that allocates memory and file descriptors, before the uid change
(root may set any hard limit; afterwards it could only lower them). RLIMIT_NPROC counts every
process of the uid (65534) on the machine, so parallel workers share it; RLIMIT_CPU is per
process (each child of the submission has its own); RLIMIT_AS counts address space (about
100 MiB for Python + numpy with one OpenBLAS thread, more per thread). Memory is bounded by
RLIMIT_AS, not by a cgroup.
"""

from __future__ import annotations

import math
import os
import resource

from grader.sandbox.isolation.model import Layer, Policy
from grader.sandbox.isolation.syscalls import _status_field


def _vm_size() -> int:
    value = _status_field("VmSize")
    return int(value.split()[0]) * 1024 if value else 0


def _highest_fd() -> int:
    try:
        return max(int(n) for n in os.listdir("/proc/self/fd"))
    except (OSError, ValueError):
        return 0


def _layer_rlimits(policy: Policy, will_be_root: bool) -> Layer:
    # RLIMIT_CPU counts the CPU the process already used (interpreter start, numpy import), so
    # the budget is added to it; soft = hard makes the kernel send SIGKILL, which unlike SIGXCPU
    # cannot be caught. Every child gets a fresh CPU count of its own (RLIMIT_NPROC bounds them).
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu = int(math.ceil(usage.ru_utime + usage.ru_stime)) + max(1, policy.cpu_seconds)
    wanted = [
        ("CPU", resource.RLIMIT_CPU, cpu),
        ("AS", resource.RLIMIT_AS, policy.memory_bytes),
        ("FSIZE", resource.RLIMIT_FSIZE, policy.file_bytes),
        ("NOFILE", resource.RLIMIT_NOFILE, policy.open_files),
        ("NPROC", resource.RLIMIT_NPROC, policy.processes),
        ("CORE", resource.RLIMIT_CORE, 0),  # no core file of a process holding the inputs
    ]
    set_ok: list[str] = []
    problems: list[str] = []  # a limit that could not be set: the layer is inactive
    warnings: list[str] = []  # set, but probably not what the caller meant
    for label, which, value in wanted:
        try:
            _soft, hard = resource.getrlimit(which)
            if hard != resource.RLIM_INFINITY and value > hard and os.geteuid() != 0:
                value = hard  # an unprivileged process cannot raise its hard limit
            resource.setrlimit(which, (value, value))
            set_ok.append(f"{label}={value}")
        except (OSError, ValueError) as exc:
            problems.append(f"{label}: {exc}")
    notes = [", ".join(set_ok)]
    vm = _vm_size()
    if vm and policy.memory_bytes < vm:
        warnings.append(f"AS limit below the {vm // 2**20} MiB already mapped: every allocation will fail")
    if _highest_fd() >= policy.open_files:
        warnings.append(f"an inherited fd is above NOFILE={policy.open_files} (still usable, new fds are not)")
    if will_be_root:
        notes.append("NPROC is not enforced while uid 0 / CAP_SYS_RESOURCE")
    else:
        notes.append("NPROC counts every process of this uid on the machine, parallel workers included")
    return Layer("rlimits", not problems, "; ".join(notes + warnings + problems))
