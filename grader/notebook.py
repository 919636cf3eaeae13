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

import json
import posixpath
import re
import tokenize
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

from grader.fsutil import read_regular
from grader.observation import ErrorInfo, Observation, WorkerRun

MAX_NOTEBOOK_BYTES = 32 * 1024 * 1024  # outputs (images) make notebooks large; code never is
MAX_SOURCE_CHARS = 2 * 1024 * 1024

_SYNTAX_WHERE = re.compile(r"\(([^()]+), line (\d+)\)$")
_MAGIC_LINE = re.compile(r"^(\s*)(?:[%!]|([\w.]+)\s*=\s*([%!]))")
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
        raw_cells, key = [c for w in doc["worksheets"] if isinstance(w, dict) for c in (w.get("cells") or [])], "input"
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


def _clean_cell(lines: list[str], clean: Callable[[str], str]) -> list[str]:
    """The lines of a cell with ``clean`` applied to those that start a statement, and only to
    those: IPython takes a line for a magic or a shell command only there, so a ``!= 2)`` inside
    brackets, a ``% 3`` after a backslash or a ``%s`` inside a docstring stays Python.

    Python's own tokenizer says where statements start. It reads the cell one line at a time,
    and each line is cleaned as it is handed over, so the cell is read once, however long its
    statements. Where the tokenizer gives up (broken code), it starts again at the next line;
    Python reports the error itself when the worker loads the notebook."""
    out: list[str] = []
    continued = False  # is the next line inside a statement begun above it?
    depth = 0  # open brackets

    def readline() -> str:
        nonlocal continued
        if len(out) == len(lines):
            return ""
        line = lines[len(out)]
        out.append(line if continued else clean(line))
        continued = True  # until the tokenizer ends the statement
        return out[-1] + "\n"

    while len(out) < len(lines):
        continued, depth = False, 0
        try:
            for token in tokenize.generate_tokens(readline):
                if token.type == tokenize.OP and token.string in "([{":
                    depth += 1
                elif token.type == tokenize.OP and token.string in ")]}":
                    depth = max(0, depth - 1)
                elif token.type == tokenize.NEWLINE or (token.type == tokenize.NL and depth == 0):
                    continued = False
        except (tokenize.TokenError, SyntaxError):
            continue
    return out


def convert(doc: Any) -> NotebookSource:
    """Join the code cells of a parsed notebook document. Raises NotebookError."""
    lines: list[str] = []
    line_map: list[tuple[int, int]] = []
    code_cells = 0
    for number, (cell_type, text) in enumerate(_cells(doc), start=1):
        if cell_type != "code":
            continue
        code_cells += 1
        magic = _cell_magic(text)
        if magic is not None and magic not in PYTHON_CELL_MAGICS:
            continue  # another language (bash, html) or a file written (writefile): left out whole
        cell_lines = _lines(text)

        def clean(line: str, timed: bool = magic is not None) -> str:
            if timed and line.lstrip().startswith("%%"):  # the %%time line of a cell that runs Python
                return f"{line[: len(line) - len(line.lstrip())]}pass"
            return _clean_line(line)

        lines += _clean_cell(cell_lines, clean)
        line_map += [(number, index) for index in range(1, len(cell_lines) + 1)]
        lines.append("")  # a blank line between cells, as if each cell ended a block
        line_map.append((number, len(cell_lines) + 1))
    source = "\n".join(lines) + "\n"
    if len(source) > MAX_SOURCE_CHARS:
        raise NotebookError(f"the code cells hold more than {MAX_SOURCE_CHARS // (1024 * 1024)} MB of text")
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
