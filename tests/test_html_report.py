"""The HTML page: self-contained, readable with scripts off, rendered by a real browser (Debian's
chromium, headless) with every submission shown, and inert whatever a candidate names a folder
or prints.

The browser tests skip only where chromium is missing and GRADER_REQUIRE_BROWSER is not set;
CI installs chromium and sets it (.ci/run), so there they cannot skip silently.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import EXAMPLES
from grader.cli import cli
from grader.diagnosis.model import Location
from grader.report import html
from grader.report.registry import RunInfo, make_reporter
from grader.report.summary import Row

NAMES = ("seed_buggy.py", "correct.py", "load_error.py")
PAYLOAD = "document.body.setAttribute('data-pwned','{}')"
ALLOWED_TAGS = {
    "html", "head", "meta", "title", "style", "body", "main", "header", "footer", "section", "h1", "h2", "h3", "h4",
    "p", "ul", "ol", "li", "span", "strong", "a", "code", "pre", "table", "thead", "tbody", "tr", "th", "td", "br",
    "details", "summary", "figure", "figcaption", "div", "svg", "rect", "script", "button",
}


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), env={"GITHUB_ACTIONS": None, "CI": "true"})  # type: ignore[dict-item]
    return result.exit_code, result.stdout, result.stderr


class Page(HTMLParser):
    """A page's elements: (tag, attributes) in document order, the text of each element with an
    id, the ids in order."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.ids: list[str] = []
        self.texts: dict[str, list[str]] = {}
        self.open: list[tuple[str, str | None]] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        self.elements.append((tag, found))
        ident = found.get("id")
        if ident:
            self.ids.append(ident)
            self.texts[ident] = []
        if tag not in ("meta", "br"):  # the void elements of these pages
            self.open.append((tag, ident))

    def handle_endtag(self, tag: str) -> None:
        while self.open:
            if self.open.pop()[0] == tag:
                break

    def handle_data(self, data: str) -> None:
        for _, ident in self.open:
            if ident:
                self.texts[ident].append(data)

    def text(self, ident: str) -> str:
        return "".join(self.texts[ident])

    def tags(self, name: str) -> list[dict[str, str | None]]:
        return [attrs for tag, attrs in self.elements if tag == name]


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("GRADER_REQUIRE_BROWSER"):
            pytest.fail("GRADER_REQUIRE_BROWSER is set, and no chromium is installed")
        pytest.skip("chromium is not installed (CI installs it; GRADER_REQUIRE_BROWSER=1 fails instead)")
    return found


def browse(page: Path, profile: Path, *args: str) -> str:
    """Chromium, headless, on ``page``: what it prints (the DOM after the scripts ran, for
    --dump-dom)."""
    command = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", f"--user-data-dir={profile}", *args, page.as_uri()]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("html") / "report.html"
    code, _, err = invoke("-q", "-o", f"html={out}", *(str(EXAMPLES / name) for name in NAMES))
    assert code == 1, err
    return out


def test_page_is_self_contained(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    parsed = Page(text)
    assert {tag for tag, _ in parsed.elements} <= ALLOWED_TAGS
    assert len(parsed.tags("script")) == 1 and parsed.tags("script")[0].get("src") is None
    for _, attrs in parsed.elements:
        assert "src" not in attrs
        assert (attrs.get("href") or "#").startswith("#")  # links only within the page
    assert "url(" not in text and "@import" not in text
    policy = next(m for m in parsed.tags("meta") if m.get("http-equiv") == "Content-Security-Policy")
    assert "default-src 'none'" in (policy.get("content") or "") and "'sha256-" in (policy.get("content") or "")


def test_table_and_sections_read_with_scripts_off(page: Path) -> None:
    parsed = Page(page.read_text(encoding="utf-8"))
    assert [i for i in parsed.ids if re.fullmatch(r"s\d+", i)] == ["s1", "s2", "s3"]
    assert [parsed.text(f"s{n}-name") for n in (1, 2, 3)] == ["seed_buggy", "correct", "load_error"]
    table = parsed.text("results")
    assert all(name in table for name in ("seed_buggy", "correct", "load_error"))
    assert [a.get("href") for a in parsed.tags("a")] == ["#s1", "#s2", "#s3"]
    buggy = parsed.text("s1")
    assert "Scores divided by d_k instead of sqrt(d_k)" in buggy and "np.sqrt(d_k)" in buggy
    assert "scores = Q @ K.T / Q.shape[-1]" in buggy
    assert "load-error" in parsed.text("s3") or "fails to import" in parsed.text("s3")


def test_offending_line_highlighted_and_heat_maps_drawn(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    section = text[text.index('id="s1"') : text.index('id="s2"')]
    hit = re.findall(r'<span class="ln hit"><span class="no">(\d+)</span>([^<]*)</span>', section)
    assert ("12", "    scores = Q @ K.T / Q.shape[-1]") in hit
    assert section.count('<svg class="matrix"') == 2 * html.MAX_HEATMAPS  # submission and reference, twice
    assert section.count("<rect ") > 50
    passed = text[text.index('id="s2"') : text.index('id="s3"')]
    assert '<svg class="matrix"' not in passed  # nothing failed, nothing to draw


def test_chromium_renders_every_submission(page: Path, tmp_path: Path) -> None:
    dom = browse(page, tmp_path / "profile", "--dump-dom")
    parsed = Page(dom)
    assert {"results", "s1", "s2", "s3"} <= set(parsed.ids)
    for n, name in enumerate(("seed_buggy", "correct", "load_error"), start=1):
        assert parsed.text(f"s{n}-name") == name
        assert name in parsed.text("results")
    body_rows = re.findall(r"<tr>", dom[dom.index("<tbody>") : dom.index("</tbody>")])
    assert len(body_rows) == 3
    # The sort script ran (the Content-Security-Policy allows it by its hash): headers are buttons.
    assert len(parsed.tags("button")) == 6


def test_clicking_a_header_sorts_the_table(page: Path, tmp_path: Path) -> None:
    # The page's own policy admits its own script only: this copy admits a test's click too.
    text = page.read_text(encoding="utf-8")
    text = re.sub(r"script-src [^;]+;", "script-src 'unsafe-inline';", text)
    click = "<script>document.querySelectorAll('#results th button')[3].click();</script>"
    copy = tmp_path / "sorted.html"
    copy.write_text(text.replace("</body>", click + "</body>"), encoding="utf-8")
    dom = browse(copy, tmp_path / "profile", "--dump-dom")
    table = dom[dom.index("<tbody>") : dom.index("</tbody>")]
    order = re.findall(r'href="#s(\d)"', table)
    assert order == ["3", "1", "2"]  # by score: 0, 5, 15
    assert 'aria-sort="ascending"' in dom


def test_screenshot_shows_a_page(page: Path, tmp_path: Path) -> None:
    shot = tmp_path / "page.png"
    browse(page, tmp_path / "profile", f"--screenshot={shot}", "--window-size=1200,1600")
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 30_000  # a blank page is a few KB


@pytest.fixture(scope="module")
def hostile_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A batch whose folder name, file name, source and printed output hold markup and controls."""
    root = tmp_path_factory.mktemp("hostile")
    source = (
        "import numpy as np\n\n"
        f'print("</script><script>{PAYLOAD.format("print")}</script>\\x1b[31m\\x07 \\u202e<img src=x onerror=\\"{PAYLOAD.format("img")}\\">")\n'
        'print("::error::forged\\n##[add-mask]x")\n\n\n'
        "def softmax(x):\n"
        "    e = np.exp(x - x.max(axis=-1, keepdims=True))\n"
        "    return e / e.sum(axis=-1, keepdims=True)\n\n\n"
        "def attention(Q, K, V):\n"
        f"    # <script>{PAYLOAD.format('source')}</script> \x1b[2J\n"
        f'    scores = Q @ K.T / Q.shape[-1]  # "><img src=x onerror="{PAYLOAD.format("line")}">\n'
        "    return softmax(scores) @ V\n"
    )
    folder = root / f'"><img src=x onerror="{PAYLOAD.format("folder")}">\x1b[31m'
    folder.mkdir()
    (folder / "attention.py").write_text(source)
    (root / f"<script>{PAYLOAD.format('stem')}<.py").write_text(source)
    out = tmp_path_factory.mktemp("hostile-out") / "report.html"
    code, _, err = invoke("-q", "--no-cache", "-o", f"html={out}", str(root))
    assert code == 1, err
    return out


def test_hostile_names_and_output_stay_inert(hostile_page: Path) -> None:
    text = hostile_page.read_text(encoding="utf-8")
    parsed = Page(text)
    assert {tag for tag, _ in parsed.elements} <= ALLOWED_TAGS  # no img, no second script
    assert len(parsed.tags("script")) == 1
    assert not [name for _, attrs in parsed.elements for name in attrs if name.startswith("on")]
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f\u202e]", text)  # controls only as escapes
    shown = parsed.text("s1") + parsed.text("s2")
    for where in ("folder", "stem", "line", "source", "print", "img"):
        assert f"data-pwned','{where}')" in shown, where  # shown as text
    assert "\\x1b[31m" in shown and "\\u202e" in shown and "\\x07" in shown
    # no workflow command for a CI runner that prints the page, wherever a line starts
    assert "##[" not in text and not [line for line in text.splitlines() if line.lstrip().startswith("::")]
    assert "error:\u2060:forged" in shown


def test_hostile_page_runs_nothing_in_chromium(hostile_page: Path, tmp_path: Path) -> None:
    dom = browse(hostile_page, tmp_path / "profile", "--dump-dom")
    parsed = Page(dom)
    assert not [attrs for _, attrs in parsed.elements if "data-pwned" in attrs]
    assert not parsed.tags("img") and len(parsed.tags("script")) == 1
    assert re.search(r"<title>Attention grader: 0 of 2 passed</title>", dom)
    assert {"s1", "s2"} <= set(parsed.ids)


def test_candidate_view_draws_no_heat_map_and_no_figures(grade_path) -> None:  # type: ignore[no-untyped-def]
    buffer = io.StringIO()
    reporter = make_reporter("html", buffer, RunInfo("attention-default", 15.0, audience="candidate"))
    reporter.add(grade_path(EXAMPLES / "seed_buggy.py"))
    reporter.finish()
    text = buffer.getvalue()
    assert '<svg class="matrix"' not in text and "Measured" not in text and "max abs diff" not in text
    assert "Scores divided by d_k instead of sqrt(d_k)" in text and "np.sqrt(d_k)" in text


def test_reporter_keeps_rows_only_and_caps_heat_maps(grade_path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(html, "HEATMAP_SECTIONS", 1)
    buffer = io.StringIO()
    reporter = html.HtmlReporter(buffer, RunInfo("attention-default", 15.0))
    for _ in range(2):
        reporter.add(grade_path(EXAMPLES / "seed_buggy.py"))
    assert all(isinstance(row, Row) for row in reporter.rows) and not hasattr(reporter, "reports")
    reporter.finish()
    text = buffer.getvalue()
    second = text[text.index('id="s2"') :]
    assert '<svg class="matrix"' in text[: text.index('id="s2"')] and '<svg class="matrix"' not in second
    assert "Heat maps are left out" in second


def test_source_excerpt_is_guarded(tmp_path: Path) -> None:
    source = tmp_path / "sub.py"
    source.write_text("".join(f"x{n} = {n}\n" for n in range(1, 21)))
    excerpt = html.source_excerpt(Location(str(source), 10, "x10 = 10"))
    assert excerpt is not None and [(e.number, e.hit) for e in excerpt if e.hit] == [(10, True)]
    assert [e.number for e in excerpt] == list(range(7, 14))
    assert html.source_excerpt(Location(str(source), 10, "changed since")) is None  # a stale cached location
    assert html.source_excerpt(Location(str(tmp_path / "gone.py"), 1, "x")) is None
    assert html.source_excerpt(Location(str(source), 99, "x")) is None
    huge = tmp_path / "huge.py"
    huge.write_bytes(b"x = 1\n" * (html.MAX_SOURCE_BYTES // 6 + 10))
    assert html.source_excerpt(Location(str(huge), 1, "x = 1")) is None
    fifo = tmp_path / "fifo.py"
    os.mkfifo(fifo)
    assert html.source_excerpt(Location(str(fifo), 1, "x")) is None  # not read, never waited on
    link = tmp_path / "link.py"
    link.symlink_to(source)
    assert html.source_excerpt(Location(str(link), 10, "x10 = 10")) is None  # not followed
    assert html.source_excerpt(Location(str(source), 1, "x1 = 1", cell=2)) is None  # a notebook's cell


def test_backticks_of_the_grader_s_prose_become_code_and_a_candidate_s_stay_text(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    section = text[text.index('id="s1"') : text.index('id="s2"')]
    assert "`" not in re.sub(r"<pre.*?</pre>", "", section, flags=re.S)  # no backtick shown literally
    assert "<code>" in section
    # Escaped first, then set as code: markup between backticks stays text.
    assert str(html._code_spans("a `<b>x</b>` & `y`")) == "a <code>&lt;b&gt;x&lt;/b&gt;</code> &amp; <code>y</code>"
    assert str(html._code_spans("one ` alone <i>")) == "one ` alone &lt;i&gt;"
