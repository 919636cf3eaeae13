"""The HTML page (``-o html=FILE``): one self-contained file for a person to read, offline or as
an e-mail attachment.

The page holds a table of every submission (candidate, verdict, score, bugs named, time), then a
section per submission: the named bugs in words with their line, the source around that line
(the line highlighted) and the fix; the attention weights as heat maps, the submission's beside
the reference's; the checks; what the submission printed. Everything is inline: the style, the
SVG of the heat maps and a few lines of script that sort the table when a header is clicked
(with scripts off the table reads the same, in the order given). A Content-Security-Policy
allows nothing from the network and no script but that one, by its hash, so even a mistake in
escaping could not run a candidate's script or fetch anything.

Templates are jinja2 files in ``grader/report/templates/`` (package data), autoescaped. On top of
the HTML escaping, every value a template prints goes through ``untrusted.lines`` (the
environment's ``finalize``), and names through ``untrusted.line``: a candidate's control
characters are shown as ``\\x1b``, never written raw; and ``untrusted.no_commands``, so the page
holds no workflow command a CI runner would act on when it is printed.

A batch may have fifty thousand submissions, so the reporter never keeps their Reports: each
section is rendered as its report arrives and spooled to a temporary file; only the small
:class:`grader.report.summary.Row` stays for the table. ``finish`` writes the head and the
table, then copies the sections after them. Heat maps are the heavy part of a section: at most
MAX_HEATMAPS per section, each cut to MAX_SIZE rows and columns, and only in the first
HEATMAP_SECTIONS sections of a page.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import math
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np

from grader import __version__
from grader.checks.base import CaseResult
from grader.diagnosis.model import Diagnosis, Location
from grader.diagnosis.registry import BY_NAME
from grader.fsutil import read_regular
from grader.probes import FRESH_PREFIX
from grader.report import untrusted
from grader.report.audience import is_for_candidate, shown_to
from grader.report.base import RunInfo
from grader.report.fixtext import is_code
from grader.report.model import Report
from grader.report.spool import spool
from grader.report.summary import Row, RunSummary

if TYPE_CHECKING:
    import jinja2

MAX_HEATMAPS = 2  # per section: the most telling failed weights comparisons
HEATMAP_SECTIONS = 1000  # sections of a page that get heat maps (about 20 KB each)
MAX_SIZE = 16  # rows and columns of a heat map
SIDE = 240  # pixels of a heat map's longer side: cells of 15 to 28 pixels
CONTEXT = 3  # source lines shown before and after the offending one
MAX_SOURCE_BYTES = 256 * 1024  # a located file is at most 100 KB (grader.diagnosis.locate)
MAX_LINE_CHARS = 240
OUTPUT_LINES = 40
OUTPUT_CHARS = 8000

# Weights 0..1 in ten shades of blue, light to dark, by the square root of the weight: a row of
# nine keys has weights near 0.1, which a linear scale would leave all but white. Marks of their
# own for what no softmax gives.
SHADES = ("#f7fbff", "#e3eef9", "#cfe1f2", "#b5d4e9", "#93c3df", "#6daed5", "#4b97c9", "#2f7ebc", "#1864aa", "#0a4a90")
NEGATIVE, ABOVE_ONE, NOT_FINITE = "#e8590c", "#c2255c", "#212529"
MARKS = {"negative": NEGATIVE, "above_one": ABOVE_ONE, "not_finite": NOT_FINITE}  # for the legend


@functools.cache
def _environment() -> jinja2.Environment:
    # Imported here: every `grade` run imports the reporters' registry, few ask for a page.
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("grader.report", "templates"),
        autoescape=True,
        finalize=_inert,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["line"] = lambda text: untrusted.no_commands(untrusted.line(text))
    env.filters["code_spans"] = _code_spans
    return env


def _code_spans(text: str) -> Any:
    """Prose with `code` between backticks (a rule's texts, a fix): every part made inert and
    escaped, the backticked parts set as code. Unpaired backticks leave the text as it is."""
    from markupsafe import Markup, escape  # jinja2's own dependency

    parts = _inert(text).split("`")
    if len(parts) % 2 == 0:
        return escape("`".join(parts))
    return Markup("").join(escape(part) if i % 2 == 0 else Markup("<code>%s</code>") % part for i, part in enumerate(parts))


def _inert(value: Any) -> Any:
    """Every value a template prints: text with its control characters shown and no workflow
    command in it (a page may go to stdout under GitHub Actions), then autoescaping does the
    HTML (its entities hold one ``#`` after a ``&`` and no ``:``, so they make no command);
    our own markup (the script) as it is."""
    if not isinstance(value, str) or hasattr(value, "__html__"):  # markupsafe's mark of markup
        return value
    return untrusted.no_commands(untrusted.lines(value))


@functools.cache
def _script() -> tuple[str, str]:
    """The table's sort script and its hash for the page's Content-Security-Policy."""
    env = _environment()
    assert env.loader is not None
    source = env.loader.get_source(env, "sort.js")[0]
    digest = base64.b64encode(hashlib.sha256(source.encode("utf-8")).digest()).decode("ascii")
    return source, f"'sha256-{digest}'"


@dataclass(frozen=True)
class ExcerptLine:
    number: int
    text: str
    hit: bool


def source_excerpt(location: Location) -> list[ExcerptLine] | None:
    """The lines around the located one, read now from its file; None when the file is gone,
    too large, a notebook (its lines are numbered per cell), or no longer has the located line
    where it was (changed since it was graded: a cached result)."""
    if location.cell is not None or location.observed:
        return None
    try:
        # The candidate's file: it may be gone, a FIFO or a link put in its place since.
        data = read_regular(Path(location.file), MAX_SOURCE_BYTES, follow=False)
    except OSError:
        return None
    if len(data) > MAX_SOURCE_BYTES:
        return None
    lines = data.decode("utf-8", errors="replace").splitlines()  # as grader.diagnosis.locate counts
    if not 1 <= location.line <= len(lines) or lines[location.line - 1].strip()[: len(location.code)] != location.code:
        return None
    first, last = max(1, location.line - CONTEXT), min(len(lines), location.line + CONTEXT)
    return [ExcerptLine(n, lines[n - 1][:MAX_LINE_CHARS].rstrip(), n == location.line) for n in range(first, last + 1)]


def _shade(value: float) -> str:
    if not math.isfinite(value):
        return NOT_FINITE
    if value < -1e-9:
        return NEGATIVE
    if value > 1.0 + 1e-9:
        return ABOVE_ONE
    return SHADES[min(len(SHADES) - 1, int(math.sqrt(max(0.0, value)) * len(SHADES)))]


@dataclass(frozen=True)
class Matrix:
    """A weight matrix as the SVG draws it: each cell's position, colour and value."""

    width: int
    height: int
    cell: int
    cells: tuple[tuple[int, int, str, str], ...]  # (x, y, fill, value)


def matrix(weights: np.ndarray) -> Matrix:
    cut = np.asarray(weights[:MAX_SIZE, :MAX_SIZE], dtype=np.float64)
    rows, cols = cut.shape
    cell = max(15, min(28, SIDE // max(rows, cols, 1)))
    cells = tuple((c * cell, r * cell, _shade(float(v)), f"{float(v):.3g}") for (r, c), v in np.ndenumerate(cut))
    return Matrix(cols * cell, rows * cell, cell, cells)


def telling_failures(report: Report, limit: int = MAX_HEATMAPS) -> list[CaseResult]:
    """The failed weights comparisons that show most, best first: a stored case before a fresh
    one (the same picture on every run), one sequence that fits uncut, the largest difference;
    one per case. Only those with the submission's matrix (a candidate's page has none)."""
    found: list[tuple[tuple[bool, bool, bool, float], int, CaseResult]] = []
    for check in report.checks:
        for case in check.cases:
            if case.what != "weights" or case.passed or case.actual is None or case.actual.ndim < 2 or case.actual.dtype.kind not in "fiu":
                continue
            if case.expected is not None and case.expected.shape != case.actual.shape:
                continue
            fits = max(case.actual.shape[-2:]) <= MAX_SIZE
            diff = case.mismatch.max_abs if case.mismatch is not None and math.isfinite(case.mismatch.max_abs) else math.inf
            found.append(((not case.case.startswith(FRESH_PREFIX), case.actual.ndim == 2, fits, diff), -len(found), case))
    chosen: list[CaseResult] = []
    for _, _, case in sorted(found, key=lambda f: (f[0], f[1]), reverse=True):
        if all(c.case != case.case for c in chosen):
            chosen.append(case)
    return chosen[:limit]


def heatmap(case: CaseResult) -> dict[str, Any]:
    assert case.actual is not None
    lead = (0,) * (case.actual.ndim - 2)
    tq, tk = case.actual.shape[-2:]
    cut = f"; the first {min(tq, MAX_SIZE)} of {tq} rows and {min(tk, MAX_SIZE)} of {tk} columns" if tq > MAX_SIZE or tk > MAX_SIZE else ""
    return {
        "probe": case.probe + (f"[{', '.join('0' for _ in lead)}]" if lead else ""),
        "cut": cut,
        "mine": matrix(case.actual[lead]),
        "reference": matrix(case.expected[lead]) if case.expected is not None else None,
    }


def _bug(d: Diagnosis, candidate: bool) -> dict[str, Any]:
    rule = BY_NAME.get(d.name)
    title = rule.title if rule is not None else d.name
    where = None
    if d.location is not None:
        where = f"cell {d.location.cell}, line {d.location.line}" if d.location.cell else f"line {d.location.line}"
    return {
        "code": d.code,
        "name": d.name,
        "severity": d.severity,
        "title": title,
        "summary": rule.summary if rule is not None else "",
        "why": rule.why if rule is not None else "",
        "measured": None if candidate or d.message == title else d.message,
        "location": d.location,
        "where": where,
        "excerpt": source_excerpt(d.location) if d.location is not None else None,
        "fix": d.fix,
        "fix_is_code": is_code(d.fix),
    }


def _output(report: Report) -> dict[str, Any] | None:
    out = report.output
    if out.total_bytes == 0:
        return None
    lines = untrusted.lines(out.text[:OUTPUT_CHARS]).split("\n")
    if lines and not lines[-1]:
        lines.pop()
    note = f"printed {out.total_bytes} bytes"
    if is_for_candidate(report):
        note += " (not shown here: it was printed on the grader's inputs)"
    elif out.truncated_bytes or len(lines) > OUTPUT_LINES or len(out.text) > OUTPUT_CHARS:
        note += f"; the first {min(len(lines), OUTPUT_LINES)} lines are shown"
    return {"note": note, "text": "\n".join(lines[:OUTPUT_LINES])}


def section_context(index: int, report: Report, heatmaps: bool) -> dict[str, Any]:
    """What the section template shows of one submission (already filtered for its audience)."""
    row = Row.of(report)
    candidate = is_for_candidate(report)
    return {
        "index": index,
        "row": row,
        "report": report,
        "bugs": [_bug(d, candidate) for d in (*report.errors, *report.warnings)],
        "heatmaps": [heatmap(c) for c in telling_failures(report)] if heatmaps else [],
        "heatmaps_left_out": not heatmaps and bool(telling_failures(report, 1)),
        "output": _output(report),
        "candidate_view": candidate,
    }


def verdict_class(verdict: str) -> str:
    return {"passed": "pass", "failed": "fail"}.get(verdict, "error")


class HtmlReporter:
    """Renders each submission's section as it arrives into a spool; ``finish`` writes the page."""

    streaming = False

    def __init__(self, stream: IO[str], info: RunInfo) -> None:
        self.stream = stream
        self.info = info
        self.rows: list[Row] = []
        self.spool = spool(beside=stream)  # on the page's own disk: the sections are most of it
        self.section = _environment().get_template("section.html.j2")

    def add(self, report: Report) -> None:
        report = shown_to(report, self.info.audience)
        self.rows.append(Row.of(report))
        index = len(self.rows)
        context = section_context(index, report, heatmaps=index <= HEATMAP_SECTIONS)
        for chunk in self.section.generate(**context, verdict_class=verdict_class, shades=SHADES, marks=MARKS):
            self.spool.write(chunk)

    def finish(self) -> None:
        env = _environment()
        script, script_hash = _script()
        summary = RunSummary.of(self.rows)
        head = env.get_template("page_start.html.j2").generate(
            info=self.info, rows=self.rows, summary=summary, version=__version__, script_hash=script_hash,
            verdict_class=verdict_class, heatmap_sections=HEATMAP_SECTIONS,
        )
        for chunk in head:
            self.stream.write(chunk)
        self.spool.seek(0)
        shutil.copyfileobj(self.spool, self.stream)
        self.spool.close()
        from markupsafe import Markup  # jinja2's own dependency

        for chunk in env.get_template("page_end.html.j2").generate(script=Markup(script)):
            self.stream.write(chunk)
