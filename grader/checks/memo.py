"""Values computed from one probe alone, shared by every submission of a run.

A batch grades every submission on the same probe objects, so whatever depends on a probe only
(the reference's answer to it, a tolerance threshold, the catalogue's predictions) needs
computing once per run, not once per submission. Entries are keyed by the owner's id and keep
the owner itself, so the id cannot be reused by another object while the entry lives. The store
is bounded: past its limit it starts afresh. Safe to share between the batch's threads: a race
at worst computes an entry twice.
"""

from __future__ import annotations

from typing import Callable, Generic, Hashable, TypeVar

T = TypeVar("T")


class OwnerMemo(Generic[T]):
    # Not functools.lru_cache or a WeakKeyDictionary: both hash the owner, and a probe (a frozen
    # dataclass of arrays) cannot be hashed.
    def __init__(self, limit: int = 20_000) -> None:
        self._store: dict[tuple[Hashable, ...], tuple[object, T]] = {}
        self._limit = limit

    def get(self, owner: object, key: tuple[Hashable, ...], compute: Callable[[], T]) -> T:
        """The value stored for ``owner`` and ``key``, computed by ``compute`` the first time."""
        full = (id(owner), *key)
        hit = self._store.get(full)
        if hit is not None and hit[0] is owner:
            return hit[1]
        value = compute()
        if len(self._store) >= self._limit:
            self._store.clear()
        self._store[full] = (owner, value)
        return value

    def clear(self) -> None:
        self._store.clear()
