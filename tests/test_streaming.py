"""Reports streamed to their sinks: in the order of the submissions, written as they arrive,
nothing kept once written, report files renamed into place only when complete."""

from __future__ import annotations

import gc
import io
import json
import os
import weakref
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from conftest import EXAMPLES
from grader.errors import OutputError
from grader.report.base import RunInfo
from grader.report.files import OutputSpec, ReportFile
from grader.report.jsonfmt import JsonReporter, header_dict, report_dict, summary_dict
from grader.report.junit import JunitReporter
from grader.report.model import Report
from grader.report.sinks import InOrder, open_sinks

INFO = RunInfo("attention-default", 15.0, discovered=3, suite_fingerprint="f" * 64)


@pytest.fixture(scope="module")
def reports(grade_path) -> list[Report]:  # type: ignore[no-untyped-def]
    return [grade_path(EXAMPLES / name) for name in ("seed_buggy.py", "correct.py", "load_error.py")]


def numbered(reports: list[Report], count: int) -> list[Report]:
    """``count`` distinct reports (copies of ``reports`` under other paths)."""
    return [replace(reports[i % len(reports)], path=f"sub_{i:03d}.py") for i in range(count)]


def arrays_of(report: Report) -> list[np.ndarray]:
    return [a for c in report.checks for case in c.cases for a in (case.actual, case.expected) if a is not None]


class Recorder:
    streaming = False

    def __init__(self) -> None:
        self.paths: list[str] = []

    def add(self, report: Report) -> None:
        self.paths.append(report.path)

    def finish(self) -> None:
        pass


def test_in_order_releases_each_report_once_its_predecessors_are_out(reports: list[Report]) -> None:
    subs = numbered(reports, 6)
    order = InOrder()
    out: list[str] = []
    for index in (2, 0, 1, 5, 3):
        order.put(index, subs[index])
        out += [r.path for r in order.ready()]
    assert out == ["sub_000.py", "sub_001.py", "sub_002.py", "sub_003.py"]
    # 4 was never graded (an interrupted run): the rest goes out past the gap.
    assert [r.path for r in order.rest()] == ["sub_005.py"]
    with pytest.raises(ValueError, match="given twice"):
        order.put(1, subs[1])


def test_in_order_keeps_few_in_memory_and_spills_the_rest_exactly(reports: list[Report]) -> None:
    """Behind a slow submission the others wait on disk, pickled: they come back whole, arrays and all."""
    subs = numbered(reports, 40)
    assert arrays_of(subs[0]), "the buggy report holds the arrays of its comparisons"
    order = InOrder(held=4)
    for index in range(1, 40):  # 0 is the slow one
        order.put(index, subs[index])
        assert list(order.ready()) == []
    assert len(order.held) == 4 and len(order.spilled) == 35 and order.most_held == 39
    order.put(0, subs[0])
    back = list(order.ready())
    assert [r.path for r in back] == [r.path for r in subs]
    for original, again in zip(subs, back):
        assert report_dict(again) == report_dict(original)
        assert all(np.array_equal(a, b, equal_nan=True) for a, b in zip(arrays_of(original), arrays_of(again)))
    assert not order.held and not order.spilled
    order.close()


def test_json_is_written_as_reports_arrive_and_equals_the_whole_document(reports: list[Report]) -> None:
    stream = io.StringIO()
    reporter = JsonReporter(stream, INFO)
    assert stream.getvalue() == ""  # nothing before the first report (a failed start writes nothing)
    reporter.add(reports[0])
    first = stream.getvalue()
    assert first.startswith("{\n") and reports[0].path in first
    for report in reports[1:]:
        reporter.add(report)
    reporter.finish()
    whole = {**header_dict(INFO), "submissions": [report_dict(r) for r in reports], "summary": summary_dict(reports)}
    assert stream.getvalue() == json.dumps(whole, indent=2, ensure_ascii=True) + "\n"
    doc = json.loads(stream.getvalue())
    assert doc["run"] == {"discovered": 3, "shard": None} and doc["suite"]["fingerprint"] == "f" * 64
    empty = io.StringIO()
    JsonReporter(empty, INFO).finish()
    assert json.loads(empty.getvalue())["submissions"] == [] and json.loads(empty.getvalue())["summary"]["total"] == 0


def test_junit_spools_the_suites_and_puts_the_totals_first(reports: list[Report], tmp_path: Path) -> None:
    file = ReportFile(tmp_path / "report.xml")
    reporter = JunitReporter(file.stream, INFO)
    for report in reports:
        reporter.add(report)
    # The spool is anonymous (never in any folder); only the report's temporary file is there.
    assert [p.name.startswith(".report.xml.") for p in tmp_path.iterdir()] == [True]
    reporter.finish()
    file.commit()
    text = (tmp_path / "report.xml").read_text()
    assert text.startswith('<?xml version="1.0" encoding="utf-8"?>\n<testsuites name="grader attention-default" tests=')
    root = ET.fromstring(text)
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == [r.path for r in reports]
    for key in ("tests", "failures", "errors", "skipped"):
        assert root.get(key) == str(sum(int(s.get(key, "0")) for s in suites))
    stream = io.StringIO()
    JunitReporter(stream, INFO).finish()
    assert ET.fromstring(stream.getvalue().split("\n", 1)[1]).get("tests") == "0"


@pytest.mark.parametrize("make", [JsonReporter, JunitReporter])
def test_a_document_reporter_keeps_no_report(reports: list[Report], make) -> None:  # type: ignore[no-untyped-def]
    """Once added, a report (and the arrays behind its checks) can be freed."""
    reporter = make(io.StringIO(), INFO)
    report = replace(reports[0], path="fresh.py")  # a report only this test holds
    gone = weakref.ref(report)
    reporter.add(report)
    del report
    gc.collect()
    assert gone() is None
    reporter.finish()


def test_sinks_hand_every_report_in_order_and_keep_none(reports: list[Report], tmp_path: Path) -> None:
    subs = numbered(reports, 7)
    specs = [OutputSpec("json", tmp_path / "r.json"), OutputSpec("junit", tmp_path / "r.xml")]  # type: ignore[arg-type]
    stdout, stderr = io.StringIO(), io.StringIO()
    recorder = Recorder()
    with open_sinks("json", specs, INFO, stdout, stderr, more=[recorder]) as sinks:
        refs = []
        for index in (3, 1, 0, 2, 6, 5, 4):
            report = replace(subs[index])
            refs.append(weakref.ref(report))
            sinks.add(index, report)
            del report
        gc.collect()
        assert all(ref() is None for ref in refs)
        assert not (tmp_path / "r.json").exists()  # not before the end: written to a temporary file
        sinks.finish_stdout()
        sinks.finish()
    expected = [r.path for r in subs]
    assert recorder.paths == expected
    assert [s["path"] for s in json.loads(stdout.getvalue())["submissions"]] == expected
    assert json.loads((tmp_path / "r.json").read_text()) == json.loads(stdout.getvalue())
    assert [s.get("name") for s in ET.parse(tmp_path / "r.xml").getroot().findall("testsuite")] == expected
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json", "r.xml"]


def test_a_failed_run_leaves_the_previous_report_and_no_temporary_file(reports: list[Report], tmp_path: Path) -> None:
    target = tmp_path / "r.json"
    target.write_text("the previous report")
    with pytest.raises(KeyboardInterrupt):
        with open_sinks("text", [OutputSpec("json", target)], INFO, io.StringIO(), io.StringIO()) as sinks:
            sinks.add(0, reports[0])
            raise KeyboardInterrupt  # Ctrl-C while the files are written
    assert target.read_text() == "the previous report"
    assert os.listdir(tmp_path) == ["r.json"]


def test_a_full_disk_mid_run_names_the_report_file(reports: list[Report], tmp_path: Path) -> None:
    class Full(io.StringIO):
        def write(self, text: str) -> int:
            raise OSError(28, "No space left on device")

    target = tmp_path / "r.json"
    with pytest.raises(OutputError, match=r"r\.json: no space left on the device"):
        with open_sinks("text", [OutputSpec("json", target)], INFO, io.StringIO(), io.StringIO()) as sinks:
            sinks.files[0].stream = Full()  # the disk fills up under the report file
            sinks.later[0].reporter.stream = sinks.files[0].stream  # type: ignore[union-attr]
            sinks.add(0, reports[0])
    assert os.listdir(tmp_path) == []


def test_annotations_of_a_text_run_wait_for_the_end(reports: list[Report], tmp_path: Path) -> None:
    """Under GitHub Actions the text report runs under stop-commands: the annotations may only
    reach stdout once ``finish`` runs (after the runner reads commands again); the job summary
    is appended to its file."""
    summary = tmp_path / "summary.md"
    summary.write_text("earlier steps\n")
    stdout = io.StringIO()
    with open_sinks("json", [], INFO, io.StringIO(), io.StringIO(), annotations=True, job_summary=summary):
        pass  # a document on stdout: annotations go to stderr (covered by test_batch)
    with open_sinks("text", [], INFO, stdout, io.StringIO(), annotations=True, job_summary=summary) as sinks:
        sinks.add(0, reports[0])
        assert "::error" not in stdout.getvalue()
        sinks.finish_stdout()
        before = stdout.getvalue()
        sinks.finish()
    after = stdout.getvalue()[len(before) :]
    assert "::error" not in before and after.count("::error ") == len(reports[0].errors)
    assert summary.read_text().startswith("earlier steps\n") and "Attention grader" in summary.read_text()


def test_the_tally_gives_the_summary_of_the_rows_without_keeping_them(reports: list[Report]) -> None:
    from grader.report.sinks import Tally
    from grader.report.summary import RunSummary

    subs = [replace(r, duration_s=d) for r, d in zip(numbered(reports, 9), (0.3, 0.1, 0.5, 0.3, 0.9, 0.2, 0.3, 0.05, 0.7))]
    subs[4] = replace(subs[4], extra={**subs[4].extra, "cached": True})  # a cached one is never the slowest
    tally = Tally()
    for report in subs:
        tally.add(report)
    assert tally.summary() == RunSummary.of(subs)
    assert tally.summary().slowest[0] == ("sub_008.py", 0.7)
