"""Notebook conversion: code cells joined, IPython syntax left out line for line, cells located,
hostile files refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grader.notebook import MAX_NOTEBOOK_BYTES, NotebookError, convert, read_notebook


def doc(*cells: tuple[str, str]) -> dict:  # type: ignore[type-arg]
    return {"cells": [{"cell_type": kind, "source": text, "metadata": {}} for kind, text in cells], "nbformat": 4}


def test_code_cells_are_joined_and_magics_become_pass() -> None:
    nb = convert(doc(("markdown", "# title"), ("code", "%matplotlib inline\nimport numpy as np\nif True:\n    !ls\nfiles = !ls"), ("code", "%%bash\necho hi"), ("code", "x = 1")))
    lines = nb.source.splitlines()
    assert lines[:5] == ["pass", "import numpy as np", "if True:", "    pass", "files = []"]  # the name stays bound
    assert "echo hi" not in nb.source
    assert nb.code_cells == 3
    compile(nb.source, "nb.ipynb", "exec")


def test_help_lines_become_pass_and_questions_in_code_stay() -> None:
    """IPython's ?name, name? and name?? are help, never Python; a ? in a comment or a string is
    neither."""
    cell = "?np.swapaxes\nnp.swapaxes?\n  np.einsum??\nnp.*sum*?\nx = 1  # why?\ns = 'what?'\nt = (1,\n?x)"
    lines = convert(doc(("code", cell))).source.splitlines()
    assert lines[:7] == ["pass", "pass", "  pass", "pass", "x = 1  # why?", "s = 'what?'", "t = (1,"]
    assert lines[7] == "?x)"  # inside brackets: Python's to report


CONTINUED = [
    # (a cell that runs in IPython as written, a name it must define and its value)
    ("ok = (len('ab')\n!= 3)", "ok", True),
    ("rest = (7\n% 3)", "rest", 1),
    ("total = 1 + \\\n!= 0" , None, None),  # a syntax error in IPython too: left for Python to report
    ("doc = '''Usage:\n%s rows\n!cmd\n'''", "doc", "Usage:\n%s rows\n!cmd\n"),
    ("text = 'a\fb\u2028c'", "text", "a\fb\u2028c"),
    ("text = 'a\x85b'", "text", "a\x85b"),
]


@pytest.mark.parametrize(("cell", "name", "value"), CONTINUED, ids=["neq", "modulo", "backslash", "docstring", "line-separators", "nel"])
def test_lines_that_continue_a_statement_are_python_not_magics(cell: str, name: str | None, value: object) -> None:
    """IPython takes a line for a magic or a shell command only where a statement starts, and
    splits a cell where Python's tokenizer does (not at a form feed or U+2028 in a string)."""
    nb = convert(doc(("code", cell), ("code", "%matplotlib inline\nafter = !ls")))
    assert nb.source.rstrip("\n").split("\n")[-2:] == ["pass", "after = []"]  # magics still cleaned
    if name is None:
        with pytest.raises(SyntaxError):
            compile(nb.source, "nb.ipynb", "exec")
        return
    namespace: dict[str, object] = {}
    exec(compile(nb.source, "nb.ipynb", "exec"), namespace)
    assert namespace[name] == value


@pytest.mark.parametrize("magic", ["%%time", "%%timeit -n 1 -r 1", "%%capture out"])
def test_a_cell_magic_that_runs_python_keeps_its_body(magic: str) -> None:
    """Colab's %%time above the cell that defines the function: the function is defined."""
    nb = convert(doc(("code", "import numpy as np"), ("code", f"{magic}\ndef attention(Q, K, V):\n    return V")))
    namespace: dict[str, object] = {}
    exec(compile(nb.source, "nb.ipynb", "exec"), namespace)
    assert callable(namespace["attention"])
    assert nb.locate(nb.source.splitlines().index("def attention(Q, K, V):") + 1) == (2, 2)


@pytest.mark.parametrize("magic", ["%%bash", "%%writefile sdpa.py", "%%html"])
def test_a_cell_magic_of_another_language_is_left_out(magic: str) -> None:
    nb = convert(doc(("code", f"{magic}\necho hi > /tmp/x")))
    assert "echo" not in nb.source


def test_line_map_gives_cell_and_line() -> None:
    nb = convert(doc(("markdown", "text"), ("code", "a = 1\nb = 2"), ("markdown", "more"), ("code", "c = 3\nd = 4\ne = 5")))
    lines = nb.source.splitlines()
    target = lines.index("e = 5") + 1
    assert nb.locate(target) == (4, 3)  # the fourth cell of the notebook, its third line
    assert nb.locate(lines.index("b = 2") + 1) == (2, 2)
    assert nb.locate(None) == (None, None) and nb.locate(10_000) == (None, 10_000)


def test_source_as_one_string_and_nbformat_3() -> None:
    v3 = {"worksheets": [{"cells": [{"cell_type": "code", "input": ["x = 1\n", "y = 2"]}]}], "nbformat": 3}
    assert convert(v3).source.splitlines()[:2] == ["x = 1", "y = 2"]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"{not json", "not valid JSON at line 1"),
        (b"\xff\xfe\x00\x01", "not UTF-8"),
        (b"[1, 2]", "not a notebook"),
        (b'{"cells": "nope"}', "not a notebook"),
        (b'{"cells": [{"cell_type": "code", "source": [1, 2]}]}', "not text"),
        (b'{"cells": [{"cell_type": "markdown", "source": "hi"}]}', "no code cells"),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    ],
)
def test_hostile_notebooks_are_one_line_errors(tmp_path: Path, data: bytes, message: str) -> None:
    path = tmp_path / "nb.ipynb"
    path.write_bytes(data)
    with pytest.raises(NotebookError) as info:
        read_notebook(path)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_huge_notebook_is_refused_without_reading_it(tmp_path: Path) -> None:
    path = tmp_path / "big.ipynb"
    with path.open("wb") as handle:
        handle.truncate(MAX_NOTEBOOK_BYTES + 1)  # sparse: no disk used
    with pytest.raises(NotebookError, match="at most 32 MB is read"):
        read_notebook(path)


def test_real_notebook_file(tmp_path: Path) -> None:
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps(doc(("code", ["import numpy as np\n", "def attention(Q, K, V):\n", "    return V"]))))
    nb = read_notebook(path)
    assert "def attention(Q, K, V):" in nb.source


def test_a_backward_s_exception_is_given_as_cell_and_line_too() -> None:
    """A gradient probe's backward that raises (a custom autograd function) points at its cell,
    like a forward call's exception."""
    from grader.notebook import remap_run
    from grader.observation import CapturedOutput, ErrorInfo, Gradients, LoadInfo, Observation, WorkerRun

    nb = convert(doc(("markdown", "# t"), ("code", "import torch"), ("code", "def attention(q, k, v):\n    return q\n\ndef backward(ctx, g):\n    raise RuntimeError('no')")))
    joined = nb.source.splitlines().index("    raise RuntimeError('no')") + 1
    error = ErrorInfo("RuntimeError", "no", line=joined, file="task.ipynb", frames=({"file": "task.ipynb", "line": joined},))
    obs = Observation("small/gradients", 0, "returned", 0.01, gradients=Gradients(status="failed", error=error))
    run = WorkerRun("completed", LoadInfo(ok=True), {("small/gradients", 0): obs}, CapturedOutput("", 0, 0), 0.1)
    mapped = remap_run(run, nb, "task.ipynb").observations[("small/gradients", 0)].gradients
    assert mapped is not None and mapped.error is not None
    assert (mapped.error.cell, mapped.error.line, mapped.error.frames[0]["cell"]) == (3, 5, 3)


@pytest.mark.parametrize(
    "worksheets",
    [[{"cells": [{"cell_type": "code", "input": "x = 1"}]}, {"cells": 5}], [{"cells": "x = 1"}], [{"cells": {"a": 1}}], [5], ["cells"]],
    ids=["cells-a-number", "cells-a-string", "cells-an-object", "worksheet-a-number", "worksheet-a-string"],
)
def test_a_v3_worksheet_that_is_not_shaped_like_one_is_a_notebook_error(worksheets: list[object]) -> None:
    with pytest.raises(NotebookError, match="^not a notebook: a worksheet is not an object with a 'cells' list$"):
        convert({"worksheets": worksheets, "nbformat": 3})


def test_a_v3_worksheet_without_cells_adds_none() -> None:
    v3 = {"worksheets": [{"cells": [{"cell_type": "code", "input": "x = 1"}]}, {"metadata": {}}], "nbformat": 3}
    assert convert(v3).code_cells == 1


def tokenizer_starts(lines: list[str]) -> list[bool]:
    """Where Python's tokenizer ends a logical line: after a NEWLINE, or a blank or comment-only
    line outside brackets (the rule the notebook's one-pass reading must agree with)."""
    import io
    import tokenize

    starts = {1}
    depth = 0
    for token in tokenize.generate_tokens(io.StringIO("".join(line + "\n" for line in lines)).readline):
        if token.type == tokenize.OP and token.string in "([{":
            depth += 1
        elif token.type == tokenize.OP and token.string in ")]}":
            depth -= 1
        elif token.type == tokenize.NEWLINE or (token.type == tokenize.NL and depth == 0):
            starts.add(token.end[0] + 1)
    return [number in starts for number in range(1, len(lines) + 1)]


TRICKY = [
    "s = 'it\\'s' + \"a \\\"b\\\"\"  # 'comment\nx = (1,\n  # ) in a comment\n  2)\n",
    "doc = '''one ''' + '''two\n''' + \"\"\"three \\\"\"\" still\nin\"\"\"\ny = 1\n",
    "t = 'a\\\nb'\nu = r'\\\\'\nv = b'''\\''''\nw = ''\nz = ''''''\n",
    "total = 1 + \\\n    2\nif total:\n\n    pass\nd = {'k': [1,\n\n 2]}\n",
    "f = f'{x!r:>{width}}' + rb'\\d' + Rb\"\\w\"\ng = [f'''\n{1}\n''']\n",
]


def test_statement_starts_agree_with_python_s_tokenizer_on_real_code() -> None:
    """Over every module of the grader (docstrings, continued calls, comments, escapes) and some
    tricky lines, a statement starts where Python's tokenizer says it does."""
    from conftest import ROOT
    from grader.notebook import _lines, _statement_starts

    texts = [path.read_text(encoding="utf-8") for path in sorted((ROOT / "grader").rglob("*.py"))] + TRICKY
    assert len(texts) > 50
    for text in texts:
        lines = _lines(text)
        assert _statement_starts(lines) == tokenizer_starts(lines), text[:200]


# Cells the tokenizer takes quadratic time on (Python 3.11: 25 s for 8,000 spaces before a $, 35 s for 9,000);
# each is read in one pass now, with the magic after it still cleaned.
HOSTILE = {
    "spaces-before-dollar": "y = 1" + " " * 9_000 + "$",
    "tabs-before-quote": "y = 1" + "\t" * 9_000 + "'x",
    "spaces-before-backslash": "y = 1" + " " * 9_000 + "\\x",
}
# The child converts each cell and prints its last line; a hang guard far above what it costs.
CHILD = """
import json, sys
from grader.notebook import convert
for text in json.loads(sys.stdin.read()):
    print(convert({"cells": [{"cell_type": "code", "source": text + "\\n%matplotlib inline"}]}).source.splitlines()[-2])
"""


def test_cells_the_tokenizer_takes_quadratic_time_on_are_read_in_one_pass() -> None:
    import subprocess
    import sys

    from conftest import ROOT

    done = subprocess.run(
        [sys.executable, "-c", CHILD], input=json.dumps(list(HOSTILE.values())), capture_output=True, text=True, timeout=10, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["pass"] * len(HOSTILE)


def test_code_cells_over_the_size_limit_are_refused_before_they_are_read() -> None:
    with pytest.raises(NotebookError, match="more than 2 MB of text"):
        convert(doc(("code", "x = 1\n" * 200_000), ("code", "y = 2\n" * 200_000)))
    assert convert(doc(("code", "%%bash\n" + "echo\n" * 500_000), ("code", "x = 1"))).code_cells == 2  # left out: not counted
