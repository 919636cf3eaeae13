"""What a submission controls is shown inert in every report, end to end.

`grade` runs as users run it (a process, under a strict UTF-8 locale, with and without
GITHUB_ACTIONS) on one batch of hostile submissions (tests/untrusted/) and hostile file and folder
names: control characters that would repaint the terminal, workflow commands, links, mentions, a
lone surrogate, a name that is not UTF-8, source that makes Python warn. Each report, on stdout,
in `-o` files and in the job summary, must show none of it raw, forge no line, and exit 1 (the
submissions failed), never 3.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
import warnings
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conftest import ROOT
from grader.frameworks import parse_quietly
from grader.report import untrusted
from grader.report.base import FORMATS
from grader.report.markdown import md, md_code

HERE = Path(__file__).parent / "untrusted"
# File names a file system allows; each a copy of a failing submission.
HOSTILE_NAMES = (
    "esc\x1b]0;owned\x07\x1b[2K.py",  # retitles the terminal, erases the line
    "nl\n::error::forged.py",  # a newline, then a workflow command
    "cr\r=HYPERLINK(1)\u202e.py",  # a carriage return, a formula, a bidi override
    "hash##[add-mask]x.py",  # the runner's other command form, found anywhere in a line
    "@octocat www.evil.example.py",  # a mention and a link in a Markdown summary
)
# Raw in a report: C0 but newline and tab, DEL, C1, bidi controls, line separators, surrogates.
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]")
ANNOTATION = re.compile(r"::(error|warning) file=[^:]*::")  # ours: properties hold no raw ':'
SUBMISSIONS = 13
# Gradescope's results.json is one submission's: a batch asking for it is a usage error, so its
# document is tested on one hostile submission (test_gradescope_document_is_inert).
BATCH_FORMATS = tuple(fmt for fmt in FORMATS if fmt != "gradescope")


@pytest.fixture(scope="module")
def batch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("untrusted") / "batch"
    folder.mkdir()
    for source in sorted(HERE.glob("*.py")):
        shutil.copy(source, folder / source.name)
    wrong = HERE / "printed.py"
    for name in HOSTILE_NAMES:
        shutil.copy(wrong, folder / name)
    shutil.copy(wrong, os.fsencode(folder) + b"/bad\xff\xfe.py")  # not UTF-8: os.fsdecode gives surrogates
    candidate = folder / "dir\x1b[31m\n::warning::folder"  # a candidate's folder
    candidate.mkdir()
    shutil.copy(wrong, candidate / "solution.py")
    two = folder / "two\x1b[2J"  # two files define attention: not graded, and the message names them
    two.mkdir()
    shutil.copy(wrong, two / "a\n::error::one.py")
    shutil.copy(wrong, two / "b##[x].py")
    assert len(list(folder.iterdir())) == SUBMISSIONS
    return folder


def grade(batch: Path, *args: str, actions: bool = True) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    env.update(PYTHONPATH=str(ROOT), CI="true", LC_ALL="C.UTF-8", PYTHONIOENCODING="utf-8:strict", PYTHONWARNINGS="always")
    if actions:
        env.update(GITHUB_ACTIONS="true", GITHUB_STEP_SUMMARY=str(batch.parent / "summary.md"))
    proc = subprocess.run([sys.executable, "-m", "grader", "--no-cache", *args, str(batch)], cwd=batch.parent, env=env, capture_output=True, timeout=300)
    assert proc.returncode == 1, proc.stderr.decode("utf-8", "backslashreplace")  # failed submissions; 3 would be ours
    return proc.returncode, proc.stdout.decode("utf-8"), proc.stderr.decode("utf-8")  # strict: valid UTF-8


def runner_lines(text: str) -> list[str]:
    """The lines as the Actions runner reads them: it ends a line at a bare carriage return too."""
    return re.split(r"\r\n|\r|\n", text)


def assert_inert(text: str, commands: set[str] = frozenset()) -> None:  # type: ignore[assignment]
    """Nothing raw, and no line that a runner reads as a command but ours (``commands``, or an
    annotation of ours when a set is given: ``{"annotations"}``)."""
    assert_shown(text)
    for line in runner_lines(text):
        assert "##[" not in line, line
        if line.lstrip().startswith("::"):
            assert line in commands or ("annotations" in commands and ANNOTATION.match(line)), line


def assert_shown(text: str) -> None:
    """A value inside a document, as a viewer shows it: no control character raw."""
    raw = RAW.search(text)
    assert raw is None, (raw.group(), text[max(raw.start() - 80, 0) : raw.end() + 20])


def assert_no_live_links(markdown: str) -> None:
    assert not re.search(r"@[A-Za-z0-9]", markdown) and "://" not in markdown and not re.search(r"\bwww\.", markdown), markdown


def assert_document(fmt: str, text: str) -> None:
    """The document parses, has every submission, and (for a person) forges no line."""
    if fmt == "json":
        doc = json.loads(text)
        assert doc["summary"]["total"] == SUBMISSIONS and doc["summary"]["passed"] == 0
        # The data stays exact: what the submission printed, escapes and all.
        printed = next(s for s in doc["submissions"] if s["path"].endswith("/printed.py"))
        assert "\r\x1b[2K\x1b[1A\x1b[32mPASSED" in printed["output"]["text"]
        assert any(s["path"].endswith("/bad\udcff\udcfe.py") for s in doc["submissions"])
    elif fmt == "gradescope":  # one submission
        doc = json.loads(text)
        assert doc["score"] < 15 and len(doc["output"].splitlines()) == 1
        for test in doc["tests"]:
            assert_shown(test["name"] + "\n" + test["output"])
            assert "\n" not in test["name"]
    elif fmt == "junit":
        root = ET.fromstring(text)
        assert len(root.findall("testsuite")) == SUBMISSIONS and root.get("tests") != "0"
        for element in root.iter():
            assert_shown("\n".join([element.text or "", *element.attrib.values()]))
            assert all("\n" not in value for value in element.attrib.values())
    elif fmt == "csv":
        lines = text.splitlines()
        assert len(lines) == SUBMISSIONS + 1 and all(line.startswith('"') for line in lines)  # no row starts in a cell
        rows = list(csv.reader(io.StringIO(text)))
        assert len(rows) == SUBMISSIONS + 1 and all(len(row) == len(rows[0]) for row in rows)
        assert rows[0][:3] == ["candidate", "path", "verdict"]
        # Nothing passed, and no cell a spreadsheet would read as a formula (candidate, path).
        assert all(row[2] in ("failed", "not graded") and row[0][:1] not in "=+-@\t\r" and row[1][:1] not in "=+-@\t\r" for row in rows[1:])
    elif fmt == "markdown":
        assert_no_live_links(text)
        rows = [line for line in text.splitlines() if line.startswith("| ")]
        assert len(rows) == SUBMISSIONS + 1  # the header and one a submission: no forged row
        headings = [line for line in text.splitlines() if line.startswith("### ")]
        assert len(headings) == SUBMISSIONS
    elif fmt == "github":
        assert all(ANNOTATION.match(line) for line in text.splitlines())
    elif fmt == "text":
        assert_verdicts(text)


def assert_verdicts(text: str) -> None:
    """Thirteen submissions failed or not graded, and nothing that looks like a verdict but them."""
    verdicts = [line for line in text.splitlines() if re.match(r"\s*(PASSED|FAILED|NOT GRADED)\b", line)]
    assert len(verdicts) == SUBMISSIONS and all(v.startswith(("FAILED  ", "NOT GRADED  ")) for v in verdicts), verdicts


@pytest.mark.parametrize("fmt", BATCH_FORMATS)
def test_stdout_is_inert_in_every_format_under_github_actions(batch: Path, fmt: str) -> None:
    _, out, err = grade(batch, "--format", fmt)
    if fmt == "text":
        # the runner's stop-commands first; after the resume, only our annotations
        lines = out.splitlines()
        assert lines[0].startswith("::stop-commands::")
        token = lines[0].split("::")[2]
        resume = lines.index(f"::{token}::")
        assert all(ANNOTATION.match(line) for line in lines[resume + 1 :]) and len(lines) > resume + SUBMISSIONS
        assert_inert(out, {lines[0], lines[resume], "annotations"})
        assert_document("text", "\n".join(lines[1:resume]))
    else:
        assert_inert(out, {"annotations"} if fmt == "github" else set())
        assert_document(fmt, out)
    # stderr: our annotations after a document, and no warning of Python's about the sources
    assert_inert(err, {"annotations"})
    assert "Warning" not in err and "attacker" not in err
    summary = (batch.parent / "summary.md").read_text(encoding="utf-8")
    assert_inert(summary)
    assert_no_live_links(summary)


def test_text_report_cannot_be_made_to_look_passed(batch: Path) -> None:
    """On a terminal (no GitHub Actions): no carriage return, cursor move or erase from a
    submission reaches it, so every verdict line is the grader's."""
    _, out, err = grade(batch, actions=False)
    assert_inert(out)
    assert_verdicts(out)
    assert "\\r\\x1b[2K\\x1b[1A\\x1b[32mPASSED" in out  # what it printed, shown, not sent
    assert "\\u202e" in out and "\\udcff" in out and "\\x9b" in out
    _, quiet, _ = grade(batch, "--quiet", actions=False)
    assert_inert(quiet)
    assert_verdicts(quiet)


def test_report_files_are_written_and_inert(batch: Path) -> None:
    """A lone surrogate and a non-UTF-8 name cost no report: every -o file is written."""
    outputs = {fmt: batch.parent / f"report-{fmt}.out" for fmt in BATCH_FORMATS}
    for path in outputs.values():
        path.unlink(missing_ok=True)
    args = [arg for fmt, path in outputs.items() for arg in ("-o", f"{fmt}={path}")]
    grade(batch, "--quiet", *args)
    for fmt, path in outputs.items():
        text = path.read_text(encoding="utf-8")
        assert_inert(text, {"annotations"} if fmt == "github" else set())
        assert_document(fmt, text)


def test_gradescope_document_is_inert(batch: Path, tmp_path: Path) -> None:
    one = tmp_path / HOSTILE_NAMES[1]  # a newline, then a workflow command, in its name
    shutil.copy(batch / HOSTILE_NAMES[1], one)
    _, out, err = grade(one, "--format", "gradescope")
    assert_inert(out)
    assert_document("gradescope", out)
    assert_inert(err, {"annotations"})


def test_python_warnings_about_a_source_are_never_printed(tmp_path: Path) -> None:
    """Compiling warns.py warns; the warning would quote its `##[stop-commands]` comment on
    stderr before the grader's own stop-commands."""
    folder = tmp_path / "one"
    folder.mkdir()
    shutil.copy(HERE / "warns.py", folder / "warns.py")
    for fmt in ("text", "json"):
        _, out, err = grade(folder, "--format", fmt)
        assert "Warning" not in err and "attacker" not in err and "##[" not in err, err
        assert_inert(err, {"annotations"})
        if fmt == "text":
            assert out.startswith("::stop-commands::")


def test_parsing_a_source_never_warns() -> None:
    source = 'PATTERN = "\\d"  # ##[stop-commands]x\nif PATTERN is 1:\n    pass\n'
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a warning would be a SyntaxError here
        parse_quietly(source, filename="warns.py")
        parse_quietly(source.encode())


@pytest.mark.parametrize(
    ("text", "one_line", "kept"),
    [
        ("\x1b[2K\rPASSED", "\\x1b[2K\\rPASSED", "\\x1b[2K\\rPASSED"),
        ("a\nb\tc", "a\\nb\\tc", "a\nb\tc"),
        ("\u202egnp.exe \u2066x\u2069", "\\u202egnp.exe \\u2066x\\u2069", "\\u202egnp.exe \\u2066x\\u2069"),
        ("c1 \x9b2J del \x7f nel \x85 sep \u2028", "c1 \\x9b2J del \\x7f nel \\x85 sep \\u2028", "c1 \\x9b2J del \\x7f nel \\x85 sep \\u2028"),
        ("lone \ud800 fs \udcff", "lone \\ud800 fs \\udcff", "lone \\ud800 fs \\udcff"),
        ("plain é 中 🙂", "plain é 中 🙂", "plain é 中 🙂"),
    ],
    ids=["cursor", "layout", "bidi", "c1-del-separators", "surrogates", "plain"],
)
def test_controls_are_shown_as_escapes(text: str, one_line: str, kept: str) -> None:
    assert untrusted.line(text) == one_line
    assert untrusted.lines(text) == kept


@pytest.mark.parametrize("text", ["::add-mask::x", "  ::error::x", "a ##[set-output]b", ":::", "###["])
def test_no_commands_however_the_text_is_wrapped(text: str) -> None:
    inert = untrusted.no_commands(text)
    assert "##" not in inert and "::" not in inert
    assert inert.replace("\u2060", "") == text  # only invisible joiners added


def test_documents_are_made_inert_without_changing_their_data() -> None:
    data = {"out": "::add-mask::x\n##[set-output name=a;]b\r::warning::c", "key ##[": ["##[x"]}
    text = untrusted.json_document(json.dumps(data, indent=2))
    assert "##[" not in text and json.loads(text) == data
    root = ET.Element("r", {"m": "##[x"})
    root.text = data["out"]
    document = untrusted.xml_document(ET.tostring(root, encoding="unicode"))
    assert_inert(document)
    again = ET.fromstring(document)
    assert again.text == data["out"] and again.get("m") == "##[x"


def test_markdown_links_and_mentions_nothing() -> None:
    text = md("see https://evil.example, www.evil.example, @octocat, a@evil.example ##[add-mask]x \x1b[2J")
    assert_no_live_links(text)
    assert "##[" not in text and "\x1b" not in text and "\\x1b" in text
    assert "&#8203;" in text  # a zero-width space: rendered, the text reads the same
    assert "##[" not in md_code("x ##[add-mask]y") and "\x1b" not in md_code("\x1b[2J")
