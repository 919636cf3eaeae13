"""The JUnit XML report, for CI test reporters (GitLab, Jenkins, GitHub test-report actions).

One ``<testsuite>`` per submission, one ``<testcase>`` per check (classname: the suite and the
submission, name: the check). A failed check carries, in the
``message`` attribute, the message of the diagnoses that explain it (the check's own summary when
none does) and, in the body, the full explanation: each diagnosis with its evidence, why it
matters and the fix, then every comparison of the check. An error diagnosis that no check owns
gets a test case of its own; a submission that could not be graded at all is one ``<error>``.

XML 1.0 cannot hold most control characters, lone surrogates or U+FFFE/U+FFFF even escaped, and a
submission's messages and output may contain anything. ``xml_text`` replaces each such character
with a visible ``\\xNN``-style escape (the idea of pytest's ``bin_xml_escape``) before the standard
library escapes ``<``, ``&`` and quotes; so are the controls XML allows but a reader should not
get raw (C1, DEL, carriage return, bidi overrides: see grader.report.untrusted). An attribute
(a name, a message) is one line: a newline in it is shown as ``\\n``. The written document has
no workflow command on any line (``untrusted.xml_document``).
"""

from __future__ import annotations

import re
import shutil
import xml.etree.ElementTree as ET
from typing import IO

from grader.checks.base import CheckResult
from grader.diagnosis.model import Diagnosis
from grader.diagnosis.registry import BY_NAME
from grader.report import untrusted
from grader.report.audience import shown_to
from grader.report.base import RunInfo
from grader.report.model import NOT_GRADED, UNREACHED, Report
from grader.report.spool import spool

# What XML 1.0 cannot hold once untrusted.lines has escaped the controls: U+FFFE and U+FFFF.
_ILLEGAL = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _escape_char(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def xml_text(text: str) -> str:
    """``text`` with newlines and tabs kept and every other control character, and every
    character XML 1.0 cannot hold, replaced by a visible escape."""
    return _ILLEGAL.sub(_escape_char, untrusted.lines(text))


def xml_attribute(text: str) -> str:
    """As ``xml_text``, on one line."""
    return _ILLEGAL.sub(_escape_char, untrusted.line(text))


def _el(parent: ET.Element, tag: str, text: str | None = None, **attrs: str) -> ET.Element:
    node = ET.SubElement(parent, tag, {k: xml_attribute(v) for k, v in attrs.items()})
    if text is not None:
        node.text = xml_text(text)
    return node


def explanation(d: Diagnosis) -> str:
    """The diagnosis in labelled lines; each piece of it on one line (``untrusted.line``), so a
    newline in a message or a file name cannot add a line of its own."""
    one = untrusted.line
    lines = [one(f"{d.code} {d.name} ({d.severity})"), f"Measured: {one(d.message)}"]
    if d.location is not None:
        lines.append(one(f"Where: {d.location.file} line {d.location.line}: {d.location.code.strip()}"))
    rule = BY_NAME.get(d.name)
    if rule is not None:
        lines.append(f"Why: {rule.why}")
    lines.append(f"Fix: {one(d.fix)}")
    if d.evidence:
        lines.append(one("Evidence: " + ", ".join(f"{k}={v}" for k, v in d.evidence.items())))
    return "\n".join(lines)


def _check_body(check: CheckResult, diagnoses: list[Diagnosis]) -> str:
    one = untrusted.line
    blocks = [explanation(d) + "\n" for d in diagnoses]
    blocks.append(one(f"{check.id}: {check.summary}"))
    blocks.extend(one(f"  {c.case} {c.what}: {'ok' if c.passed else 'FAIL'}: {c.summary}") for c in check.cases)
    return "\n".join(blocks)


def suite_element(report: Report, info: RunInfo) -> ET.Element:
    suite = ET.Element("testsuite")
    # The submission in the classname too: CI reporters key a test by classname and name, and
    # every submission has the same checks (escaped by _el, like every attribute).
    classname = f"grader.{info.suite_name}.{report.path}"
    failures = errors = skipped = tests = 0
    props = _el(suite, "properties")
    for name, value in (("score", f"{report.score:g}"), ("max_score", f"{report.max_score:g}"), ("worker_status", report.worker_status)):
        _el(props, "property", name=name, value=value)
    if report.extra.get(NOT_GRADED) == UNREACHED:  # an interrupted run never came to it
        case = _el(suite, "testcase", classname=classname, name="grade", time="0")
        _el(case, "skipped", message=report.error or "")
        tests, skipped = 1, 1
    elif report.error is not None:
        case = _el(suite, "testcase", classname=classname, name="grade", time="0")
        _el(case, "error", untrusted.line(report.error), message=report.error, type="not-graded")
        tests, errors = 1, 1
    for check in report.checks:
        tests += 1
        case = _el(suite, "testcase", classname=classname, name=check.id, time="0")
        owned = [d for d in report.diagnoses if check.id in d.checks]
        if check.outcome == "skipped":
            skipped += 1
            _el(case, "skipped", message=check.summary)
        elif check.outcome in ("failed", "error"):
            failures += 1
            message = "; ".join(f"{d.name}: {d.message}" for d in owned) or check.summary
            _el(case, "failure", _check_body(check, owned), message=message, type=", ".join(d.code for d in owned) or check.outcome)
    checked = {c.id for c in report.checks}
    for d in report.diagnoses:
        if d.severity == "error" and not checked.intersection(d.checks):
            tests += 1
            failures += 1
            case = _el(suite, "testcase", classname=classname, name=f"diagnosis {d.name}", time="0")
            _el(case, "failure", explanation(d), message=d.message, type=d.code)
    warnings = [explanation(d) for d in report.diagnoses if d.severity == "warning"]
    if report.output.total_bytes or warnings:
        _el(suite, "system-out", "\n\n".join([*warnings, report.output.text]))
    suite.set("name", xml_attribute(report.path))
    for key, count in (("tests", tests), ("failures", failures), ("errors", errors), ("skipped", skipped)):
        suite.set(key, str(count))
    suite.set("time", f"{report.duration_s:.3f}")
    # Attributes go first in the output for readability; ElementTree keeps insertion order.
    suite.attrib = {k: suite.attrib[k] for k in ("name", "tests", "failures", "errors", "skipped", "time")}
    return suite


class JunitReporter:
    """Writes each submission's ``<testsuite>`` as its report arrives, into a spool (an anonymous
    temporary file beside the report file, see grader.report.files.spool): the root
    ``<testsuites>`` carries the totals, known only at the end, and readers want them there. In
    ``finish`` the root goes out, then the spooled suites are copied after it. Nothing of a
    report is kept but its counts."""

    streaming = False
    lists_every_submission = True  # an interrupted run's unreached ones too, as skipped

    def __init__(self, stream: IO[str], info: RunInfo) -> None:
        self.stream = stream
        self.info = info
        self.totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        self.time = 0.0
        self.suites = 0
        self._spool: IO[str] | None = None

    def add(self, report: Report) -> None:
        report = shown_to(report, self.info.audience)  # --audience candidate: nothing of the suite's answers
        suite = suite_element(report, self.info)
        for key in self.totals:
            self.totals[key] += int(suite.get(key, "0"))
        self.time += report.duration_s
        ET.indent(suite, level=1)  # laid out as ET.indent lays out the whole document
        if self._spool is None:
            self._spool = spool(self.stream)
        self._spool.write("  " + untrusted.xml_document(ET.tostring(suite, encoding="unicode")) + "\n")
        self.suites += 1

    def finish(self) -> None:
        root = ET.Element("testsuites", {"name": xml_attribute(f"grader {self.info.suite_name}")})
        for key, value in self.totals.items():
            root.set(key, str(value))
        root.set("time", f"{self.time:.3f}")
        self.stream.write('<?xml version="1.0" encoding="utf-8"?>\n')
        empty = untrusted.xml_document(ET.tostring(root, encoding="unicode"))  # <testsuites ... />
        if self._spool is None:
            self.stream.write(empty + "\n")
            return
        assert empty.endswith(" />")
        self.stream.write(empty[: -len(" />")] + ">\n")
        self._spool.seek(0)
        shutil.copyfileobj(self._spool, self.stream)
        self._spool.close()
        self._spool = None
        self.stream.write("</testsuites>\n")
