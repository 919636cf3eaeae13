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
import unicodedata
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
# Raw in a report: C0 but newline and tab, DEL, C1, bidi controls, line separators, surrogates,
# the default-ignorable and format characters (a word joiner only where no_commands puts one,
# in a `::` or a `##`), and a third combining mark in a row (of the
# combining blocks).
RAW = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff"
    "\u00ad\u034f\u0600-\u0605\u06dd\u070f\u0890\u0891\u08e2\u115f\u1160\u17b4\u17b5\u180b-\u180f"
    "\u200b-\u200d\u2061-\u206f\u3164\ufeff\uffa0\ufff0-\ufffb\U000110bd\U000110cd"
    "\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff]"
    "|(?<!\u26a0)[\ufe00-\ufe0f]"  # but the grader's own emoji, a warning sign
    "|(?<![:#])(?<!%3A)\u2060|\u2060(?![:#]|%3A)"  # an annotation's properties write ':' as %3A
    "|[\u0300-\u036f\u0483-\u0489\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]{3}"
)
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
        # The word joiner that breaks `::error` in a name stays a joiner (an HTML value is made
        # inert twice: the `line` filter, then the page's finalize), never shown as `\u2060`.
        assert "\\u2060" not in text, fmt
        if fmt in ("text", "csv", "html"):
            assert ":\u2060:error:\u2060:forged" in text, fmt


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


# A name of each class of invisible character, as it must be shown: the five "victim" files of a
# batch read the same unless the invisible characters in four of them are shown.
VICTIMS = {
    "victim.py": "victim.py",
    "vict\u200bim.py": "vict\\u200bim.py",  # zero-width space
    "victim\u2060.py": "victim\\u2060.py",  # a word joiner of the candidate's, not between a pair
    "victim\u00ad.py": "victim\\xad.py",  # soft hyphen
    "vi\u034fctim.py": "vi\\u034fctim.py",  # combining grapheme joiner
}


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("a\u200bb\u200cc\u200dd\ufeffe", "a\\u200bb\\u200cc\\u200dd\\ufeffe"),  # zero-width space, non-joiner, joiner, BOM
        ("soft\u00adhyphen cgj\u034f", "soft\\xadhyphen cgj\\u034f"),
        ("\u2061\u2062\u2063\u2064\u206f", "\\u2061\\u2062\\u2063\\u2064\\u206f"),  # invisible operators, deprecated format
        ("\u115f\u1160 \u3164 \uffa0 \u17b4", "\\u115f\\u1160 \\u3164 \\uffa0 \\u17b4"),  # Hangul fillers, Khmer vowel
        ("\u180b\u180e \ufe0f \U000e0041\U000e0101", "\\u180b\\u180e \\ufe0f \\U000e0041\\U000e0101"),  # selectors, tags
        ("\u0600 \u06dd \u070f \u08e2 \ufff9 \U000110bd \U00013430", "\\u0600 \\u06dd \\u070f \\u08e2 \\ufff9 \\U000110bd \\U00013430"),  # Cf
        ("\U0001d173 \U0001bca0 \ufff0", "\\U0001d173 \\U0001bca0 \\ufff0"),  # musical format, shorthand, unassigned ignorable
        ("Z\u0336\u0336\u0336\u0336ALGO", "Z\u0336\u0336\\u0336\\u0336ALGO"),  # a pile: two marks kept
        ("e\u0301 Vie\u0323\u0302t a\u0300\u0301\u0302", "e\u0301 Vie\u0323\u0302t a\u0300\u0301\\u0302"),  # NFD accents kept
        ("\u20dd\u20dd\u20dd", "\u20dd\u20dd\\u20dd"),  # enclosing marks pile too
    ],
    ids=["zero-width", "soft-hyphen-cgj", "invisible-operators", "fillers", "selectors-tags", "format", "astral", "pile", "nfd", "enclosing"],
)
def test_invisible_characters_are_shown_as_escapes(text: str, shown: str) -> None:
    assert untrusted.line(text) == shown
    assert untrusted.lines(text) == shown
    assert untrusted.line(shown) == shown  # shown twice, shown the same


def test_a_long_combining_pile_is_escaped() -> None:
    """Zalgo: 300 marks over one letter; in a name, a type name or printed output."""
    marks = "".join(chr(0x0300 + i % 0x34) for i in range(300))  # U+0300-0333, all Mn
    shown = untrusted.lines(f"ok\nP{marks}ASS\n")
    assert shown.startswith(f"ok\nP{marks[:2]}\\u0302\\u0303") and shown.endswith("ASS\n")
    assert shown.count("\\u03") == 298
    assert len(re.findall("[\u0300-\u036f]", shown)) == 2
    # A struck type name: every mark past the second of a run, and the invisible ones, shown.
    struck = untrusted.line("\u200bP\u0336\u0336\u0336\u2060A\u0336S\u0336S\u0336")
    assert struck == "\\u200bP\u0336\u0336\\u0336\\u2060A\u0336S\u0336S\u0336"


def test_nfd_file_names_read_as_their_nfc_form() -> None:
    """macOS writes names decomposed: each letter keeps its accents (one, or two in Vietnamese)."""
    for name in ("résumé.py", "Nguyễn_Thị_Ánh.py", "Ångström-naïve.py", "Đặng.py"):
        nfd = unicodedata.normalize("NFD", name)
        assert untrusted.line(nfd) == nfd and unicodedata.normalize("NFC", untrusted.line(nfd)) == name


# Unicode's Default_Ignorable_Code_Point (DerivedCoreProperties.txt); unicodedata does not hold it.
DEFAULT_IGNORABLE = (
    0x00AD, 0x034F, 0x061C, 0x115F, 0x1160, 0x17B4, 0x17B5, *range(0x180B, 0x1810), *range(0x200B, 0x2010),
    *range(0x202A, 0x202F), *range(0x2060, 0x2070), 0x3164, *range(0xFE00, 0xFE10), 0xFEFF, 0xFFA0,
    *range(0xFFF0, 0xFFF9), *range(0x1BCA0, 0x1BCA4), *range(0x1D173, 0x1D17B), *range(0xE0000, 0xE1000),
)


def test_what_is_escaped_matches_unicodedata() -> None:
    """Every code point escaped alone is a control, a separator, a surrogate, a format character
    or default-ignorable (or one of their ranges not yet assigned in this Python's Unicode); every
    format character and every default-ignorable one is escaped; and every combining mark is
    escaped third in a row."""
    escaped = {code for code in range(sys.maxunicode + 1) if untrusted.line(chr(code)) != chr(code)}
    ignorable = set(DEFAULT_IGNORABLE)
    for code in escaped:
        category = unicodedata.category(chr(code))
        assert category in ("Cc", "Cf", "Cs", "Zl", "Zp", "Cn") or code in ignorable, (hex(code), category)
    cf = {code for code in range(0xE0080) if unicodedata.category(chr(code)) == "Cf"}
    assert cf <= escaped and ignorable <= escaped
    assert {code for code in escaped if unicodedata.category(chr(code)) == "Cn"} <= ignorable | set(range(0x13430, 0x13440))
    assert untrusted.line(":\u2060:") == ":\u2060:" and untrusted.line("#\u2060#") == "#\u2060#"
    for code in range(sys.maxunicode + 1):
        mark = chr(code)
        if unicodedata.category(mark) in ("Mn", "Me") and code not in ignorable:
            assert untrusted.line("a" + mark * 3) == "a" + mark * 2 + f"\\u{code:04x}".replace("\\u", "\\U000" if code > 0xFFFF else "\\u"), hex(code)


def test_no_commands_after_line_keeps_its_joiner() -> None:
    """Every reporter calls `line` first, then `no_commands`; a text so made may be made inert
    again (an HTML filter's value goes through the page's finalize too): the joiner stays."""
    once = untrusted.no_commands(untrusted.line("nl\n::error::x ##[add-mask]y"))
    assert once == "nl\\n:\u2060:error:\u2060:x #\u2060#[add-mask]y"
    assert untrusted.no_commands(untrusted.lines(once)) == once == untrusted.no_commands(untrusted.line(once))
    # A candidate's own joiner elsewhere is shown, so `a\u2060b` is not `ab`.
    assert untrusted.line("a\u2060b :\u2060x") == "a\\u2060b :\\u2060x"


def test_five_victims_are_told_apart(tmp_path: Path) -> None:
    """One file passes, four that fail are named to read as it; the text report and the CSV
    show each name with its invisible characters as escapes."""
    folder = tmp_path / "victims"
    folder.mkdir()
    for name in VICTIMS:
        shutil.copy(ROOT / "submissions_example" / "correct.py" if name == "victim.py" else HERE / "printed.py", folder / name)
    gradebook = tmp_path / "gradebook.csv"
    _, out, _ = grade(folder, "-o", f"csv={gradebook}", actions=False)
    assert_inert(out)
    verdicts = sorted((line.split("  ")[1].rsplit("/", 1)[1], line.split("  ")[0]) for line in out.splitlines() if line.startswith(("PASSED  ", "FAILED  ")))
    assert verdicts == sorted((shown, "PASSED" if name == "victim.py" else "FAILED") for name, shown in VICTIMS.items())
    assert_inert(gradebook.read_text(encoding="utf-8"))
    rows = list(csv.reader(io.StringIO(gradebook.read_text(encoding="utf-8"))))[1:]
    assert sorted((row[1].rsplit("/", 1)[1], row[2]) for row in rows) == sorted((shown, "passed" if name == "victim.py" else "failed") for name, shown in VICTIMS.items())
    assert len({row[0] for row in rows}) == len(VICTIMS)  # the candidates too
