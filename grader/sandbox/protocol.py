"""The framed message format between the grader and the worker.

A message is a JSON header plus raw array bytes, never pickle: a value the submission returns
cannot run code in the grader when it is read. Every field is validated on the way in, because the
bytes come from a process running untrusted code, which may write anything to its pipes.

Frame layout (all integers little-endian)::

    u32 frame length | b"GRD1" | u32 header length | header (UTF-8 JSON) | array bytes

and the header is ``{"meta": {...}, "arrays": [{"name", "dtype", "shape", "offset", "nbytes"}]}``.
"""

from __future__ import annotations

from dataclasses import dataclass
import json
import math
import struct
from typing import Any

import numpy as np


MAGIC = b"GRD1"
# Array dtypes that may cross the boundary. Anything else (object, structured, datetime, ...) is
# refused: it either cannot be compared as numbers or could carry Python objects.
ALLOWED_DTYPES = frozenset(
    f"{order}{kind}{size}"
    for order in "<|"
    for kind, sizes in (("f", (2, 4, 8)), ("i", (1, 2, 4, 8)), ("u", (1, 2, 4, 8)), ("c", (8, 16)), ("b", (1,)))
    for size in sizes
)
MAX_DIMS = 8
# The worker's own headers stay far below these (its texts are clipped before they are sent); a
# submission that writes frames itself may send anything, and parsing must stay cheap and total.
MAX_HEADER_BYTES = 4 << 20
MAX_INT_DIGITS = 32


class ProtocolError(ValueError):
    """The peer sent bytes that are not a valid message."""


def _dtype_name(array: np.ndarray) -> str:
    dtype = array.dtype.newbyteorder("<") if array.dtype.byteorder == ">" else array.dtype
    return str(dtype.str)


@dataclass(frozen=True)
class EncodedArrays:
    """Arrays already laid out for a frame: encode once, send in many frames."""

    entries: list[dict[str, Any]]
    data: bytes


def encode_arrays(arrays: dict[str, np.ndarray]) -> EncodedArrays:
    entries = []
    chunks = []
    offset = 0
    for name, array in arrays.items():
        data = np.ascontiguousarray(array)
        if data.dtype.byteorder == ">":
            data = data.astype(data.dtype.newbyteorder("<"))
        raw = data.tobytes()
        entries.append({"name": name, "dtype": _dtype_name(data), "shape": list(data.shape), "offset": offset, "nbytes": len(raw)})
        chunks.append(raw)
        offset += len(raw)
    return EncodedArrays(entries, b"".join(chunks))


def encode(meta: dict[str, Any], arrays: dict[str, np.ndarray] | EncodedArrays | None = None) -> bytes:
    """One frame holding ``meta`` (JSON-able) and ``arrays`` (numeric numpy arrays)."""
    laid_out = arrays if isinstance(arrays, EncodedArrays) else encode_arrays(arrays or {})
    header = json.dumps({"meta": meta, "arrays": laid_out.entries}, allow_nan=True).encode("utf-8")
    body = MAGIC + struct.pack("<I", len(header)) + header + laid_out.data
    return struct.pack("<I", len(body)) + body


def decode(body: bytes | bytearray | memoryview, max_elements: int = 50_000_000, copy: bool = True) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Parse one frame body (without its length prefix). Raises ProtocolError on anything odd.
    ``copy=False``: the arrays are views of ``body`` (kept alive by them) instead of copies."""
    if len(body) < 8 or body[:4] != MAGIC:
        raise ProtocolError("bad magic")
    (header_len,) = struct.unpack_from("<I", body, 4)
    if header_len > len(body) - 8:
        raise ProtocolError("header longer than frame")
    if header_len > MAX_HEADER_BYTES:
        raise ProtocolError(f"header of {header_len} bytes exceeds the cap of {MAX_HEADER_BYTES}")
    try:
        header = json.loads(bytes(body[8 : 8 + header_len]).decode("utf-8"), parse_int=_bounded_int)
    except (UnicodeDecodeError, ValueError) as exc:
        raise ProtocolError(f"bad header: {str(exc)[:200]}") from None
    except RecursionError:
        raise ProtocolError("bad header: nested too deeply") from None
    if not isinstance(header, dict) or not isinstance(header.get("meta"), dict) or not isinstance(header.get("arrays"), list):
        raise ProtocolError("bad header structure")
    data = memoryview(body)[8 + header_len :]
    arrays: dict[str, np.ndarray] = {}
    for entry in header["arrays"]:
        arrays_entry = _check_entry(entry, len(data), max_elements)
        name, dtype, shape, offset, nbytes = arrays_entry
        if name in arrays:
            raise ProtocolError(f"array {name!r} sent twice")
        flat = np.frombuffer(data[offset : offset + nbytes], dtype=np.dtype(dtype))
        arrays[name] = flat.reshape(shape).copy() if copy else flat.reshape(shape)
    return header["meta"], arrays


def _bounded_int(text: str) -> int:
    """An integer of the header; a longer one than any count or size is refused before Python
    converts it (a number of thousands of digits costs quadratic time)."""
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ProtocolError(f"an integer of {len(text)} digits")
    return int(text)


def _check_entry(entry: Any, available: int, max_elements: int) -> tuple[str, str, tuple[int, ...], int, int]:
    if not isinstance(entry, dict):
        raise ProtocolError("array entry is not a mapping")
    name, dtype, shape = entry.get("name"), entry.get("dtype"), entry.get("shape")
    offset, nbytes = entry.get("offset"), entry.get("nbytes")
    if not isinstance(name, str) or len(name) > 200:
        raise ProtocolError("bad array name")
    if dtype not in ALLOWED_DTYPES:
        raise ProtocolError(f"dtype {str(dtype)[:40]!r} not allowed")
    if not isinstance(shape, list) or len(shape) > MAX_DIMS or not all(type(n) is int and n >= 0 for n in shape):
        raise ProtocolError("bad array shape")
    if type(offset) is not int or type(nbytes) is not int or offset < 0 or nbytes < 0:
        raise ProtocolError("bad array extent")
    count = math.prod(shape)
    if count > max_elements:
        raise ProtocolError(f"array of {count} elements exceeds the cap of {max_elements}")
    if count * np.dtype(dtype).itemsize != nbytes or offset + nbytes > available:
        raise ProtocolError("array size does not match its shape")
    return name, dtype, tuple(shape), offset, nbytes
