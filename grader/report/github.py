"""GitHub Actions workflow commands: one annotation per diagnosis, at the line it points to.

``::error file=PATH,line=N,title=TITLE::MESSAGE`` (``::warning`` for a warning). Without a
location the annotation names the file only. Escaping follows the runner's rules: in the message
``%``, ``\\r`` and ``\\n`` become ``%25``, ``%0D`` and ``%0A``; in a property value ``:`` and
``,`` are escaped too (``%3A``, ``%2C``), since they separate properties. Before that, what came
from a submission is made inert (grader.report.untrusted): its control characters are shown as
escapes, each on one line (the message's only line break, as ``%0A``, is the one before the
fix), and no ``##[`` or ``::`` is left in it, so every line written is exactly one command of
ours.
"""

from __future__ import annotations

import os
from typing import IO

from grader.diagnosis.model import Diagnosis
from grader.report import untrusted
from grader.report.base import RunInfo
from grader.report.model import Report


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _file_of(report: Report, d: Diagnosis | None) -> str:
    """The annotated file: the diagnosis' own file when it names one, else the submission. Both
    are paths as `grade` was given them (relative to the folder it ran in, which in a CI step is
    the repository's root, as GitHub wants them)."""
    if d is not None and d.location is not None and d.location.file:
        return os.path.normpath(d.location.file)
    return os.path.normpath(report.path)


def command(kind: str, properties: dict[str, str | int], message: str) -> str:
    props = ",".join(f"{key}={escape_property(_inert(str(value)))}" for key, value in properties.items())
    return f"::{kind} {props}::{escape_data(untrusted.no_commands(untrusted.lines(message)))}"


def _inert(text: str) -> str:
    return untrusted.no_commands(untrusted.line(text))


def annotation_lines(report: Report) -> list[str]:
    lines = []
    if report.error is not None:
        lines.append(command("error", {"file": _file_of(report, None), "title": "not graded"}, _inert(report.error)))
    for d in report.diagnoses:
        props: dict[str, str | int] = {"file": _file_of(report, d)}
        if d.location is not None:
            props["line"] = d.location.line
        props["title"] = f"{d.code} {d.name}"
        lines.append(command("error" if d.severity == "error" else "warning", props, f"{_inert(d.message)}\nFix: {_inert(d.fix)}"))
    return lines


class GithubReporter:
    streaming = True

    def __init__(self, stream: IO[str], info: RunInfo) -> None:
        self.stream = stream

    def add(self, report: Report) -> None:
        for line in annotation_lines(report):
            self.stream.write(line + "\n")
        self.stream.flush()

    def finish(self) -> None:
        pass
