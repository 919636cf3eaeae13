"""The worker-to-grader format: plain data only, every field validated."""

from __future__ import annotations

import json
import os
import pickle
import struct

import numpy as np
import pytest

from grader.sandbox.protocol import MAGIC, ProtocolError, decode, encode


def body(frame: bytes) -> bytes:
    return frame[4:]


def raw(header: dict, data: bytes = b"") -> bytes:  # type: ignore[type-arg]
    h = json.dumps(header).encode()
    return MAGIC + struct.pack("<I", len(h)) + h + data


def test_round_trip_keeps_values_dtype_and_shape() -> None:
    arrays = {"a": np.arange(24, dtype=np.float32).reshape(2, 3, 4), "b": np.array([[1.5, np.nan]]), "c": np.zeros((0, 3))}
    meta, out = decode(body(encode({"kind": "x", "n": 1}, arrays)))
    assert meta == {"kind": "x", "n": 1}
    for name, array in arrays.items():
        assert out[name].dtype == array.dtype and out[name].shape == array.shape
        np.testing.assert_array_equal(out[name], array)


def test_big_endian_arrays_arrive_as_little_endian_values() -> None:
    array = np.arange(5, dtype=">f8")
    _, out = decode(body(encode({}, {"a": array})))
    np.testing.assert_array_equal(out["a"], array)


@pytest.mark.parametrize("dtype", ["|O", "<M8[s]", "|V8", "<U4", "object"])
def test_non_numeric_dtypes_are_refused(dtype: str) -> None:
    with pytest.raises(ProtocolError, match="not allowed"):
        decode(raw({"meta": {}, "arrays": [{"name": "a", "dtype": dtype, "shape": [1], "offset": 0, "nbytes": 8}]}, b"\0" * 8))


def test_a_pickle_is_never_loaded() -> None:
    payload = pickle.dumps(np.arange(3))
    with pytest.raises(ProtocolError):
        decode(payload)


@pytest.mark.parametrize(
    "entry",
    [
        {"name": "a", "dtype": "<f8", "shape": [4], "offset": 0, "nbytes": 16},  # size mismatch
        {"name": "a", "dtype": "<f8", "shape": [2], "offset": 8, "nbytes": 16},  # past the end
        {"name": "a", "dtype": "<f8", "shape": [-2], "offset": 0, "nbytes": 16},
        {"name": "a", "dtype": "<f8", "shape": [True, 2], "offset": 0, "nbytes": 16},
        {"name": "a", "dtype": "<f8", "shape": [1] * 9, "offset": 0, "nbytes": 8},
        {"name": 5, "dtype": "<f8", "shape": [2], "offset": 0, "nbytes": 16},
    ],
)
def test_malformed_array_entries_are_refused(entry: dict) -> None:  # type: ignore[type-arg]
    with pytest.raises(ProtocolError):
        decode(raw({"meta": {}, "arrays": [entry]}, b"\0" * 16))


def test_element_cap() -> None:
    frame = encode({}, {"a": np.zeros(1000)})
    with pytest.raises(ProtocolError, match="exceeds the cap"):
        decode(body(frame), max_elements=999)


@pytest.mark.parametrize("garbage", [b"", b"GRD1", b"XXXX\0\0\0\0", MAGIC + struct.pack("<I", 99) + b"{}", raw({"meta": [], "arrays": []})])
def test_garbage_is_refused(garbage: bytes) -> None:
    with pytest.raises(ProtocolError):
        decode(garbage)


def test_decoding_without_copies_gives_views_of_the_frame() -> None:
    """The worker reads its request into one buffer and uses the arrays where they lie (each
    call gets copies of its own): the same values, no second copy of the probes."""
    arrays = {"a": np.arange(6.0).reshape(2, 3), "b": np.array([1, 2], dtype=np.int32)}
    body = bytearray(encode({"x": 1}, arrays)[4:])
    meta, views = decode(memoryview(body), copy=False)
    assert meta == {"x": 1} and all(np.array_equal(views[k], arrays[k]) for k in arrays)
    assert all(np.shares_memory(views[k], np.frombuffer(body, dtype=np.uint8)) for k in arrays)
    _, copies = decode(bytes(body))
    assert not any(np.shares_memory(copies[k], np.frombuffer(body, dtype=np.uint8)) for k in arrays)


def test_the_worker_reads_a_request_of_the_length_it_announces() -> None:
    from grader.sandbox.worker import read_request

    frame = encode({"probes": []}, {"q": np.ones((3, 3))})
    for data, complete in ((frame + b"trailing bytes are not read", True), (frame[:-5], False)):
        read_end, write_end = os.pipe()
        os.write(write_end, data)
        os.close(write_end)
        try:
            if complete:
                assert bytes(read_request(read_end)) == frame[4:]
            else:
                with pytest.raises(EOFError):
                    read_request(read_end)
        finally:
            os.close(read_end)


def header_frame(header_text: bytes) -> bytes:
    return MAGIC + struct.pack("<I", len(header_text)) + header_text


@pytest.mark.parametrize(
    "header_text",
    [
        pytest.param(b"[" * 100_000 + b"]" * 100_000, id="nested-100000-deep"),
        pytest.param(b'{"meta": {"kind": "result", "n": ' + b"9" * 4000 + b'}, "arrays": []}', id="integer-of-4000-digits"),
        pytest.param(b'{"meta": {"kind": "result", "n": -' + b"7" * 40 + b'}, "arrays": []}', id="negative-integer-of-40-digits"),
    ],
)
def test_headers_that_cost_the_parser_are_refused(header_text: bytes) -> None:
    """A submission may write its own frames: a header built to exhaust the JSON parser is a
    protocol error (a failed submission), never an exception of another kind."""
    with pytest.raises(ProtocolError):
        decode(header_frame(header_text))


def test_an_oversized_header_is_refused_before_it_is_parsed() -> None:
    from grader.sandbox.protocol import MAX_HEADER_BYTES

    padding = b" " * (MAX_HEADER_BYTES + 1)
    with pytest.raises(ProtocolError, match="exceeds the cap"):
        decode(header_frame(b'{"meta": {}, "arrays": []}' + padding))


def test_ordinary_integers_still_arrive() -> None:
    meta, _ = decode(header_frame(b'{"meta": {"n": -12, "big": 123456789012345678901234567890}, "arrays": []}'))
    assert meta == {"n": -12, "big": 123456789012345678901234567890}
