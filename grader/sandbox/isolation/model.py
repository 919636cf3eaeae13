"""What the isolation layers take and report: the worker's Policy in, one Layer per layer out,
and the three guarantees strict mode asks of them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Layer:
    """One isolation layer of a worker, and whether it is in force."""

    name: str  # "rlimits", "no-new-privs", "landlock-fs", ...
    active: bool
    detail: str  # why inactive, or what it does


# The layers apply_isolation(only=...) can select; the rest (single-threaded, user-namespace,
# pid-namespace) are preconditions or means, reported but not selected.
LAYER_NAMES: tuple[str, ...] = (
    "session",
    "network-namespace",
    "ipc-namespace",
    "mount-namespace",
    "rlimits",
    "unprivileged-user",
    "keyring",
    "parent-death-signal",
    "no-new-privs",
    "landlock-fs",
    "landlock-net",
    "landlock-signal",
)


# The three guarantees the strict mode insists on, each with the one layer that gives it in full.
# The alternatives are weaker: Landlock's TCP rules leave UDP open; a mount namespace hides the
# references but lets the submission write to /tmp; the subreaper fallback loses a setsid escaper
# when its supervisor is killed.
GUARANTEES: dict[str, str] = {
    "network": "network-namespace",
    "filesystem": "landlock-fs",
    "process": "pid-namespace",
}


def missing_guarantees(layers: Iterable[Layer]) -> list[str]:
    """The guarantees of GUARANTEES whose layer is not active in ``layers``."""
    active = {layer.name for layer in layers if layer.active}
    return [guarantee for guarantee, name in GUARANTEES.items() if name not in active]


def why_missing(layers: Iterable[Layer]) -> str:
    """One line: each missing guarantee with its layer and the reason that layer gave."""
    by_name = {layer.name: layer for layer in layers}
    reasons = []
    for guarantee in missing_guarantees(by_name.values()):
        name = GUARANTEES[guarantee]
        reasons.append(f"{guarantee} ({name}: {by_name[name].detail if name in by_name else 'not reported'})")
    return "; ".join(reasons)


@dataclass(frozen=True)
class Policy:
    """What one worker may read and write, and its resource limits."""

    workdir: str  # the worker's private temp folder: the only writable place
    readable: tuple[str, ...]  # folders/files the worker may read and execute
    hidden: tuple[str, ...]  # never readable, even below a readable folder
    cpu_seconds: int  # CPU budget of the submission, counted from apply_isolation()
    memory_bytes: int  # RLIMIT_AS: address space, not resident memory
    file_bytes: int  # RLIMIT_FSIZE: largest file the process may write
    open_files: int  # RLIMIT_NOFILE
    processes: int  # RLIMIT_NPROC: only enforced for a non-root uid
    # Covered by the mount namespace only (a checkout's .git/): a Landlock carve-out would leave
    # the checkout's own folder unlistable, and its helper modules unimportable.
    masked: tuple[str, ...] = ()


def _failed(name: str, exc: BaseException) -> Layer:
    return Layer(name, False, f"{type(exc).__name__}: {exc}")
