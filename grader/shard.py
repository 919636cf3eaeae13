"""``--shard I/N``: the I-th of N slices of the submissions found, for a CI matrix of N jobs.

The slices depend only on the submissions' labels (the paths as ``grade`` was given them), never
on the order they were found in: the labels are sorted, and slice I takes every N-th of them,
starting with the I-th. So every job of the matrix, running the same command on the same folder,
cuts the same slices; together they hold every submission exactly once; and their sizes differ
by at most one. Within a slice the submissions keep the order of discovery, and each report
carries its place among all the submissions found (``extra.index`` in the JSON report), by
which ``grade merge`` puts the shards back together in the order of one run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from grader.errors import UsageError

_FORM = re.compile(r"([0-9]+)/([0-9]+)")  # ASCII digits, no spaces: what a CI matrix writes
MAX_SHARDS = 10_000


@dataclass(frozen=True)
class Shard:
    number: int  # 1-based
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        """``I/N`` with 1 <= I <= N. Raises UsageError for anything else."""
        match = _FORM.fullmatch(text)
        if match is None:
            raise UsageError(f"--shard {text!r}: expected I/N, for example 2/4 (the 2nd of 4 slices; I counts from 1)")
        number, count = int(match.group(1)), int(match.group(2))
        if not 1 <= count <= MAX_SHARDS:
            raise UsageError(f"--shard {text!r}: N must be between 1 and {MAX_SHARDS}")
        if not 1 <= number <= count:
            raise UsageError(f"--shard {text!r}: I must be between 1 and N ({count}); I counts from 1")
        return cls(number, count)

    def __str__(self) -> str:
        return f"{self.number}/{self.count}"

    def select(self, labels: list[str]) -> list[int]:
        """The positions in ``labels`` (the submissions found, in discovery order) that this
        slice grades, in discovery order. (Two equal labels name the same path given twice:
        which of the two a slice takes makes no difference.)"""
        ranked = sorted(range(len(labels)), key=lambda i: labels[i])
        return sorted(ranked[self.number - 1 :: self.count])
