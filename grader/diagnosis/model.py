"""A diagnosis: one named mistake with the evidence that shows it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from grader.diagnosis.registry import BY_NAME, Severity


@dataclass(frozen=True)
class Location:
    """Where in the submission the mistake most likely is (found after the evidence named it)."""

    file: str
    line: int
    code: str
    cell: int | None = None  # for notebooks: the code cell, counting from 1
    # ``code`` as the worker read it, through the sandbox: another of the candidate's files,
    # which the grader never opens (a report shows no lines around it).
    observed: bool = False

    @property
    def where(self) -> str:
        """'line 7'; 'cell 3, line 2' in a notebook; 'src/pkg/ops.py, line 5' in another of the
        candidate's files than the graded one (a report otherwise reads it as the graded file's)."""
        if self.cell is not None:
            return f"cell {self.cell}, line {self.line}"
        return f"{self.file}, line {self.line}" if self.observed else f"line {self.line}"


@dataclass(frozen=True)
class Diagnosis:
    """A named mistake found in a submission, with its evidence, the fix and where it is."""

    code: str
    name: str
    severity: Severity
    message: str  # short, with the measured figures
    fix: str
    evidence: dict[str, Any] = field(default_factory=dict)
    checks: tuple[str, ...] = ()  # the failed checks this explains
    location: Location | None = None

    @classmethod
    def of(cls, name: str, message: str, evidence: dict[str, Any] | None = None, checks: tuple[str, ...] = (), severity: Severity | None = None) -> Diagnosis:
        rule = BY_NAME[name]
        return cls(
            code=rule.code,
            name=rule.name,
            severity=severity or rule.severity,
            message=message,
            fix=rule.fix,
            evidence=evidence or {},
            checks=checks,
        )
