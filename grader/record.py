"""``record``: a frozen dataclass whose comparison, hash and repr are shared, not generated.

``dataclass(frozen=True)`` writes six methods per class as source text and compiles each one when
the class is created: ``__init__``, ``__setattr__``, ``__delattr__``, ``__eq__``, ``__hash__`` and
``__repr__`` (Python 3.11 compiles them one at a time). That is about 1.5 ms a class, and a cold
``grade`` creates some sixty classes before it can print its report: a fifth of its time beyond
importing numpy. ``record`` lets dataclasses write the first three (the constructor must assign
each field, and frozen must stay frozen) and gives every record the same three functions below,
which read the field names the class keeps. Behaviour is the dataclass's: equal when of the same
class with equal compared fields, a hash of those fields, ``Name(field=value, ...)``.
"""

from __future__ import annotations

import reprlib
from dataclasses import Field, dataclass, field, fields
from typing import TYPE_CHECKING, Any, Callable, TypeVar, overload

T = TypeVar("T")

if TYPE_CHECKING:
    from typing_extensions import dataclass_transform
else:  # only type checkers read it (typing has it from Python 3.11)

    def dataclass_transform(**_: Any) -> Callable[[T], T]:
        return lambda decorated: decorated

# Set on each class: the names its equality and hash use, and those its repr shows.
_COMPARED = "__record_compared__"
_SHOWN = "__record_shown__"


def _eq(self: Any, other: object) -> bool:
    if other.__class__ is not self.__class__:
        return NotImplemented
    names = getattr(self, _COMPARED)
    return tuple(getattr(self, n) for n in names) == tuple(getattr(other, n) for n in names)


def _hash(self: Any) -> int:
    return hash(tuple(getattr(self, n) for n in getattr(self, _COMPARED)))


@reprlib.recursive_repr()
def _repr(self: Any) -> str:
    shown = ", ".join(f"{n}={getattr(self, n)!r}" for n in getattr(self, _SHOWN))
    return f"{self.__class__.__qualname__}({shown})"


def _finish(cls: type[T], eq: bool) -> type[T]:
    made = dataclass(frozen=True, eq=False, repr=False)(cls)
    own = made.__dict__
    every = fields(made)  # type: ignore[arg-type]  # made is a dataclass by now
    setattr(made, _COMPARED, tuple(f.name for f in every if f.compare))
    setattr(made, _SHOWN, tuple(f.name for f in every if f.repr))
    if "__repr__" not in own:
        made.__repr__ = _repr  # type: ignore[method-assign]
    if eq and "__eq__" not in own:
        made.__eq__ = _eq  # type: ignore[method-assign]
        if "__hash__" not in own:
            made.__hash__ = _hash  # type: ignore[method-assign]
    return made


@overload
def record(cls: type[T], /) -> type[T]: ...
@overload
def record(*, eq: bool = True) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform(frozen_default=True, field_specifiers=(field, Field))
def record(cls: type[T] | None = None, /, *, eq: bool = True) -> type[T] | Callable[[type[T]], type[T]]:
    """As ``@dataclass(frozen=True)``; ``@record(eq=False)`` compares by identity instead."""
    if cls is None:
        return lambda c: _finish(c, eq)
    return _finish(cls, eq)
