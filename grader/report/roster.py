"""A course's roster, read for ``--roster FILE.csv`` and joined into the CSV gradebook.

The roster is a CSV file in UTF-8 (a byte-order mark, as spreadsheets write one, is allowed)
whose first line is a header. The candidate id is the column named ``candidate`` or, failing
that, ``id`` (the name compared without case or surrounding spaces); a roster with neither has
its id in the first column. Every other column (name, e-mail, student id, ...) is carried into
the gradebook as it is. An id is matched exactly against the gradebook's ``candidate``: a
checkout's folder name, or a submission file's stem.

A bad roster is the user's input error, found before anything is graded: a missing or
unreadable file, not UTF-8, no header, an empty or repeated column name, a column that the
gradebook writes itself, a row with more or fewer fields than the header, an empty or repeated
id. Each is one line naming the file and the line (UsageError, exit 2). Blank lines are skipped.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path

from grader.errors import UsageError

ID_COLUMNS = ("candidate", "id")
MAX_BYTES = 64 * 1024 * 1024  # a roster of a million students is a few tens of MB


@dataclass(frozen=True)
class Roster:
    """The roster's columns besides the id, and its rows by id, in the file's order."""

    path: str
    id_column: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, tuple[str, ...]], ...]  # (id, the values of ``columns``)

    def by_id(self) -> dict[str, tuple[str, ...]]:
        return dict(self.rows)


def load_roster(path: Path, reserved: tuple[str, ...] = ()) -> Roster:
    """Read and validate the roster at ``path``. ``reserved`` are the gradebook's own column
    names, which no roster column may repeat (one ending with ``:`` is a prefix). Raises UsageError."""
    where = f"--roster {path}"
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raise UsageError(f"{where}: no such file") from None
    except IsADirectoryError:
        raise UsageError(f"{where}: is a folder, not a CSV file") from None
    except OSError as exc:
        raise UsageError(f"{where}: cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_BYTES:
        raise UsageError(f"{where}: larger than {MAX_BYTES // (1024 * 1024)} MB; is it a roster?")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise UsageError(f"{where}: line {line}: not UTF-8 (save the roster as CSV UTF-8)") from None
    return parse_roster(text, str(path), reserved)


def _reserved(name: str, reserved: tuple[str, ...]) -> bool:
    """Whether ``name`` is a gradebook column: one of ``reserved``, or starts with one of them
    that ends with a colon (a prefix such as ``points:``)."""
    folded = name.casefold()
    return any(folded.startswith(r.casefold()) if r.endswith(":") else folded == r.casefold() for r in reserved)


def parse_roster(text: str, path: str, reserved: tuple[str, ...] = ()) -> Roster:
    """The roster in ``text`` (read from ``path``, named in errors). Raises UsageError."""
    where = f"--roster {path}"
    # newline="": the csv module's own rule for line ends, so a quoted field may hold one.
    reader = csv.reader(io.StringIO(text.removeprefix("\ufeff"), newline=""), strict=True)
    try:
        header = next((row for row in reader if any(cell.strip() for cell in row)), None)
        if header is None:
            raise UsageError(f"{where}: empty; expected a header line such as candidate,name,email")
        names = [name.strip() for name in header]
        header_line = reader.line_num
        for index, name in enumerate(names, start=1):
            if not name:
                raise UsageError(f"{where}: line {header_line}: column {index} of the header has no name")
        folded = [name.casefold() for name in names]
        seen_names: set[str] = set()  # a set, not a scan of the names before: a header may be wide
        for name, key in zip(names, folded):
            if key in seen_names:
                raise UsageError(f"{where}: line {header_line}: the column '{name}' appears twice in the header")
            seen_names.add(key)
        id_index = next((folded.index(key) for key in ID_COLUMNS if key in folded), 0)
        columns = tuple(name for i, name in enumerate(names) if i != id_index)
        clash = next((name for name in columns if _reserved(name, reserved)), None)
        if clash is not None:
            raise UsageError(f"{where}: line {header_line}: the column '{clash}' is one the gradebook writes itself; rename it")
        rows: list[tuple[str, tuple[str, ...]]] = []
        seen: dict[str, int] = {}
        for row in reader:
            if not any(cell.strip() for cell in row):
                continue
            line = reader.line_num
            if len(row) != len(names):
                raise UsageError(f"{where}: line {line}: {len(row)} fields where the header has {len(names)}")
            ident = row[id_index].strip()
            if not ident:
                raise UsageError(f"{where}: line {line}: no candidate id in the column '{names[id_index]}'")
            if ident in seen:
                raise UsageError(f"{where}: line {line}: the candidate id '{ident}' is also on line {seen[ident]}")
            seen[ident] = line
            rows.append((ident, tuple(cell for i, cell in enumerate(row) if i != id_index)))
    except csv.Error as exc:
        raise UsageError(f"{where}: line {reader.line_num}: not valid CSV: {exc}") from None
    return Roster(path=path, id_column=names[id_index], columns=columns, rows=tuple(rows))
