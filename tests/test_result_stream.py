"""The grader's side of the result pipe: frames split from the byte stream at about their size once."""

from __future__ import annotations

import struct
import tracemalloc

import numpy as np
import pytest

from grader.sandbox.protocol import ProtocolError, encode
from grader.sandbox.runner import _ResultStream

CHUNK = 1 << 16


def chunks(data: bytes, size: int = CHUNK) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


def test_frames_split_across_and_within_chunks_all_arrive_in_order() -> None:
    frames = [encode({"kind": "result", "n": n}, {"a": np.full((n + 1, 3), float(n))}) for n in range(50)]
    stream = _ResultStream(1 << 24)
    seen = []
    for piece in chunks(b"".join(frames), 777):
        stream.feed(piece)
        while (frame := stream.next_frame()) is not None:
            seen.append(frame)
    assert [meta["n"] for meta, _ in seen] == list(range(50))
    assert all(np.array_equal(arrays["a"], np.full((n + 1, 3), float(n))) for n, (_, arrays) in enumerate(seen))


def test_a_large_frame_costs_about_its_size_once() -> None:
    array = np.arange(6_000_000, dtype=np.float64)  # 48 MB
    frame = encode({"kind": "result"}, {"a": array})
    pieces = chunks(frame)
    del frame
    stream = _ResultStream(1 << 28)
    tracemalloc.start()
    try:
        for piece in pieces:
            stream.feed(piece)
        meta, arrays = stream.next_frame()  # type: ignore[misc]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert np.array_equal(arrays["a"], array)
    assert peak < 1.5 * array.nbytes, f"peak {peak / 1e6:.0f} MB for a {array.nbytes / 1e6:.0f} MB frame"


def test_a_promised_frame_costs_nothing_until_its_bytes_arrive() -> None:
    stream = _ResultStream(1 << 28)
    tracemalloc.start()
    try:
        stream.feed(struct.pack("<I", (1 << 28) - 16) + b"GRD1")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert stream.next_frame() is None
    assert peak < 1 << 20


def test_more_than_the_cap_is_refused() -> None:
    stream = _ResultStream(1000)
    stream.feed(b"\0" * 1001)
    with pytest.raises(ProtocolError, match="more than 1000 bytes"):
        stream.next_frame()
    stream = _ResultStream(1000)
    stream.feed(struct.pack("<I", 5000))
    with pytest.raises(ProtocolError, match="larger than the result cap"):
        stream.next_frame()


def test_good_frames_before_junk_in_the_same_read_are_all_taken() -> None:
    """The worker's own report, then junk the submission wrote, may arrive in one read."""
    stream = _ResultStream(1 << 20)
    stream.feed(encode({"kind": "sandbox"}) + encode({"kind": "loaded"}) + b"\xff\xff\xff\x7fGRD1 forged")
    assert stream.next_frame()[0] == {"kind": "sandbox"}  # type: ignore[index]
    assert stream.next_frame()[0] == {"kind": "loaded"}  # type: ignore[index]
    with pytest.raises(ProtocolError):
        stream.next_frame()
