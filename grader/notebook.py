"""Jupyter notebooks as submissions: their code cells turned into one Python source.

The grader reads the notebook's JSON (plain data, nothing runs here) and joins its code cells
into one source text, which the worker then executes like a file. IPython-only syntax is left out
line for line, so every remaining line keeps its place:

* a cell starting with a cell magic that runs its body as Python (``%%time``, ``%%timeit``,
  ``%%capture``) keeps its body, the magic's line becoming ``pass``; a cell of any other cell
  magic (``%%bash``, ``%%writefile``, ``%%html``, ...) is another language and is left out whole;
* a line magic (``%matplotlib inline``) and a shell line (``!pip install torch``) become
  ``pass`` at the same indentation; an assignment from either keeps its name bound, to what
  IPython would give when nothing is known (``files = !ls`` becomes ``files = []``, a shell's
  list of lines; ``t = %time f()`` becomes ``t = None``).

A line map turns a line of the joined source back into "cell N, line M", where N counts every
cell of the notebook from 1 (markdown cells too: it is the cell's position as one scrolls the
notebook) and M counts the lines of that cell from 1.

The notebook is hostile input like any submission: a file that is too large, not UTF-8, not JSON
or not shaped like a notebook is reported as that submission's ``load-error``, in one line.
"""

from __future__ import annotations

import itertools
import json
import posixpath
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

from grader.fsutil import read_regular
from grader.observation import ErrorInfo, Observation, WorkerRun

MAX_NOTEBOOK_BYTES = 32 * 1024 * 1024  # outputs (images) make notebooks large; code never is
MAX_SOURCE_CHARS = 2 * 1024 * 1024

_SYNTAX_WHERE = re.compile(r"\(([^()]+), line (\d+)\)$")
_MAGIC_LINE = re.compile(r"^(\s*)(?:[%!]|([\w.]+)\s*=\s*([%!]))")
# IPython's help: ``?np.swapaxes``, ``np.swapaxes?``, ``np.einsum??``, ``np.*sum*?`` on a line of
# their own. Never Python (no ``?`` is), and the whole line is a name: no comment or string in it.
_HELP_LINE = re.compile(r"^(\s*)(?:\?{1,2}[\w.*]+|[\w.*]+\?{1,2})\s*$")
# What can change where a statement ends, outside strings: a quote, a comment, a run of brackets
# or of backslashes (taken whole, so that a line of them is read at the regex's speed); and inside
# a string of each kind of quotes, an escape or the closing quotes (a backslash that ends the line
# carries a string on to the next one).
_CODE_MARK = re.compile(r"""[#'"]|[()\[\]{}]+|\\+""")
_STRING_END = {quotes: re.compile(r"\\.|\\$|" + quotes) for quotes in ("'", '"', "'''", '"""')}
# Cell magics whose body is Python that IPython runs (timed, or with its output captured).
PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture"})


class NotebookError(ValueError):
    """The file cannot be read as a notebook; str() is one line."""


@dataclass(frozen=True)
class NotebookSource:
    """The joined source of a notebook's code cells and where each of its lines came from."""

    source: str
    line_map: tuple[tuple[int, int], ...]  # for line i + 1 of ``source``: (cell, line in cell)
    code_cells: int

    def locate(self, line: int | None) -> tuple[int | None, int | None]:
        """(cell, line in cell) for a line of the joined source; (None, line) when unknown."""
        if line is None or not 1 <= line <= len(self.line_map):
            return None, line
        return self.line_map[line - 1]


def _cell_text(cell: dict[str, Any], key: str) -> str:
    raw = cell.get(key, "")
    if isinstance(raw, list):
        if not all(isinstance(part, str) for part in raw):
            raise NotebookError("a code cell's source is not text")
        return "".join(raw)
    if isinstance(raw, str):
        return raw
    raise NotebookError("a code cell's source is not text")


def _cells(doc: Any) -> list[tuple[str, str]]:
    """(cell type, source) for every cell, from nbformat 4 (``cells``) or 3 (``worksheets``)."""
    if not isinstance(doc, dict):
        raise NotebookError("not a notebook: the JSON document is not an object")
    if isinstance(doc.get("cells"), list):
        raw_cells, key = doc["cells"], "source"
    elif isinstance(doc.get("worksheets"), list):  # nbformat 3
        raw_cells, key = [], "input"
        for worksheet in doc["worksheets"]:
            if not isinstance(worksheet, dict) or not isinstance(worksheet.get("cells", []), list):
                raise NotebookError("not a notebook: a worksheet is not an object with a 'cells' list")
            raw_cells += worksheet.get("cells", [])
    else:
        raise NotebookError("not a notebook: no 'cells' list")
    cells = []
    for cell in raw_cells:
        if not isinstance(cell, dict) or not isinstance(cell.get("cell_type"), str):
            raise NotebookError("not a notebook: a cell is not an object with a cell_type")
        cell_type = cell["cell_type"]
        cells.append((cell_type, _cell_text(cell, key) if cell_type == "code" else ""))
    return cells


def _clean_line(line: str) -> str:
    help_line = _HELP_LINE.match(line)
    if help_line is not None:
        return f"{help_line.group(1)}pass"
    match = _MAGIC_LINE.match(line)
    if match is None:
        return line
    indent, target, kind = match.groups()
    if target is None:
        return f"{indent}pass"
    return f"{indent}{target} = {'[]' if kind == '!' else 'None'}"


def _cell_magic(text: str) -> str | None:
    """The name of the cell magic ``text`` starts with (``time`` for ``%%time -n 1``), or None."""
    first = text.lstrip().split("\n", 1)[0]
    if not first.startswith("%%"):
        return None
    return first[2:].split(maxsplit=1)[0] if first[2:].strip() else ""


def _lines(text: str) -> list[str]:
    """The lines of a cell as Python's tokenizer sees them: ended by \\n, \\r\\n or \\r only
    (``str.splitlines`` also splits at a form feed or U+2028, which may sit inside a string)."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return lines[:-1] if lines and lines[-1] == "" else lines


def _statement_starts(lines: list[str]) -> list[bool]:
    """For each line of a cell, whether a statement may start there: it is not inside a string,
    inside brackets, or after a backslash that continues the line above.

    This is what Python's tokenizer says of valid code (tests/test_notebook.py compares the two
    over the grader's own source), read here in one pass because the tokenizer cannot promise
    linear time on hostile text: Python 3.10 and 3.11 take quadratic time on a run of spaces
    before a character no token starts with (``$``), 3.12.0 to 3.12.3 on any long line, and a cell
    may hold megabytes. Where the code is broken (an unclosed one-line string ends at its line,
    stray closing brackets are not counted) Python reports the error when the worker loads it."""
    starts: list[bool] = []
    string: str | None = None  # the closing quotes of a string that runs on past its line
    depth = 0  # open brackets
    joined = False  # the line above ended with a backslash outside a string
    for line in lines:
        starts.append(string is None and depth == 0 and not joined)
        joined, pos = False, 0
        while True:
            if string is not None:
                end = _STRING_END[string].search(line, pos)
                if end is None:  # a triple-quoted string runs on; a one-line one was never closed
                    string = string if len(string) == 3 else None
                    break
                if end.group() == "\\":  # a backslash ending the line: the string goes on
                    break
                pos = end.end()
                string = None if end.group() == string else string
                continue
            mark = _CODE_MARK.search(line, pos)
            if mark is None or mark.group() == "#":
                break
            char, pos = mark.group(), mark.end()
            if char[0] == "\\":
                joined = pos == len(line)  # elsewhere a stray backslash: a syntax error
            elif char[0] in "()[]{}":
                closing = char.count(")") + char.count("]") + char.count("}")
                depth = max(0, depth + len(char) - 2 * closing)  # never below zero: stray closers are broken code
            else:
                string = char * 3 if line.startswith(char * 3, mark.start()) else char
                pos = mark.start() + len(string)
    return starts


def _clean_cell(lines: list[str], clean: Callable[[str], str]) -> list[str]:
    """The lines of a cell with ``clean`` applied to those that start a statement, and only to
    those: IPython takes a line for a magic or a shell command only there, so a ``!= 2)`` inside
    brackets, a ``% 3`` after a backslash or a ``%s`` inside a docstring stays Python."""
    # Every magic, shell and help line holds a %, a ! or a ?: the others are not even looked at.
    return [clean(line) if start and ("%" in line or "!" in line or "?" in line) else line for line, start in zip(lines, _statement_starts(lines))]


def convert(doc: Any) -> NotebookSource:
    """Join the code cells of a parsed notebook document. Raises NotebookError."""
    lines: list[str] = []
    line_map: list[tuple[int, int]] = []
    code_cells = kept = 0
    too_large = NotebookError(f"the code cells hold more than {MAX_SOURCE_CHARS // (1024 * 1024)} MB of text")
    for number, (cell_type, text) in enumerate(_cells(doc), start=1):
        if cell_type != "code":
            continue
        code_cells += 1
        magic = _cell_magic(text)
        if magic is not None and magic not in PYTHON_CELL_MAGICS:
            continue  # another language (bash, html) or a file written (writefile): left out whole
        kept += len(text)
        if kept > MAX_SOURCE_CHARS:  # refused before it is read, not after 32 MB were cleaned
            raise too_large
        cell_lines = _lines(text)

        def clean(line: str, timed: bool = magic is not None) -> str:
            if timed and line.lstrip().startswith("%%"):  # the %%time line of a cell that runs Python
                return f"{line[: len(line) - len(line.lstrip())]}pass"
            return _clean_line(line)

        lines += _clean_cell(cell_lines, clean)
        line_map += zip(itertools.repeat(number), range(1, len(cell_lines) + 1))
        lines.append("")  # a blank line between cells, as if each cell ended a block
        line_map.append((number, len(cell_lines) + 1))
    source = "\n".join(lines) + "\n"
    if len(source) > MAX_SOURCE_CHARS:  # grown by the cells' separators and the names magics bind
        raise too_large
    return NotebookSource(source, tuple(line_map), code_cells)


def read_notebook(path: Path) -> NotebookSource:
    """Read and convert a notebook file. Raises NotebookError (one line) for anything that is not a
    readable notebook."""
    try:
        size = path.stat().st_size
        if size > MAX_NOTEBOOK_BYTES:
            raise NotebookError(f"the notebook is {size // (1024 * 1024)} MB; at most {MAX_NOTEBOOK_BYTES // (1024 * 1024)} MB is read")
        data = read_regular(path, MAX_NOTEBOOK_BYTES)
    except OSError as exc:
        raise NotebookError(f"cannot read the notebook: {exc.strerror}") from None
    if len(data) > MAX_NOTEBOOK_BYTES:  # grew since its size was read
        raise NotebookError(f"the notebook is over {MAX_NOTEBOOK_BYTES // (1024 * 1024)} MB; at most that is read")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise NotebookError(f"the notebook is not UTF-8 text (byte {exc.start})") from None
    try:
        doc = json.loads(text)
    except RecursionError:
        raise NotebookError("the notebook's JSON is nested too deeply") from None
    except json.JSONDecodeError as exc:
        raise NotebookError(f"the notebook is not valid JSON at line {exc.lineno}: {exc.msg}") from None
    except ValueError as exc:  # numbers too long to convert, and the like
        raise NotebookError(f"the notebook is not valid JSON: {exc}") from None
    source = convert(doc)
    if source.code_cells == 0:
        raise NotebookError("the notebook has no code cells")
    return source


def _remap_error(error: ErrorInfo, notebook: NotebookSource, name: str) -> ErrorInfo:
    def cell_line(file: object, line: int | None) -> tuple[int | None, int | None]:
        # Tracebacks name the file relative to the candidate's folder, syntax errors by base name.
        same = isinstance(file, str) and (file == name or posixpath.basename(file) == posixpath.basename(name))
        return notebook.locate(line) if same else (None, line)

    frames = []
    for frame in error.frames:
        cell, line = cell_line(frame.get("file"), frame.get("line"))
        frames.append({**frame, "line": line, **({"cell": cell} if cell is not None else {})})
    cell, line = cell_line(error.file, error.line)
    message = error.message
    # str(SyntaxError) ends with "(FILE, line N)" in the joined source: say cell and line instead.
    found = _SYNTAX_WHERE.search(message)
    if found and cell_line(found.group(1), int(found.group(2)))[0] is not None:
        at_cell, at_line = cell_line(found.group(1), int(found.group(2)))
        message = message[: found.start()] + f"(cell {at_cell}, line {at_line})"
    return replace(error, line=line, cell=cell, frames=tuple(frames), message=message)


def remap_run(run: WorkerRun, notebook: NotebookSource, name: str) -> WorkerRun:
    """Turn the worker's line numbers in the joined source (file ``name``) into cell and line."""
    load = run.load
    if load is not None and load.error is not None:
        load = replace(load, error=_remap_error(load.error, notebook, name))
    observations = {key: _remap_observation(obs, notebook, name) for key, obs in run.observations.items()}
    return replace(run, load=load, observations=observations)


def _remap_observation(obs: Observation, notebook: NotebookSource, name: str) -> Observation:
    """A call's exception, and the exception of its backward (a gradient probe), as cell and line."""
    if obs.error is not None:
        obs = replace(obs, error=_remap_error(obs.error, notebook, name))
    if obs.gradients is not None and obs.gradients.error is not None:
        obs = replace(obs, gradients=replace(obs.gradients, error=_remap_error(obs.gradients.error, notebook, name)))
    return obs
