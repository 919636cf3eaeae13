"""``record``: a frozen dataclass whose methods are shared by every record, not compiled per class.

``dataclass(frozen=True)`` writes six methods per class as source text and compiles each one when
the class is created (``__init__``, ``__setattr__``, ``__delattr__``, ``__eq__``, ``__hash__``,
``__repr__``; Python 3.11 compiles them one at a time): about 1.5 ms a class. A cold ``grade``
creates some sixty classes before it prints its report, so that was a fifth of its time beyond
importing numpy. A record is still a dataclass (``fields``, ``replace``, ``asdict`` and type
checkers treat it as ``@dataclass(frozen=True)``), but dataclasses only collects its fields; the
methods are the functions below, which read each class's plan of its fields.

The behaviour is the dataclass's: the same constructor (positional or keyword arguments,
defaults, ``default_factory``, fields with ``init=False``, ``__post_init__``), no assignment or
deletion after it (FrozenInstanceError), equal when of the same class with equal compared
fields, a hash of those fields, ``Name(field=value, ...)``. tests/test_record.py holds each
against a dataclass. What differs: a constructor call with keywords or defaults costs about a
microsecond more (one with every field by position costs the same), and ``inspect.signature``
of a record shows ``(*args, **kwargs)``.
"""

from __future__ import annotations

import reprlib
from dataclasses import MISSING, Field, FrozenInstanceError, dataclass, field, fields
from typing import TYPE_CHECKING, Any, Callable, TypeVar, overload

T = TypeVar("T")

if TYPE_CHECKING:
    from typing_extensions import dataclass_transform
else:  # only type checkers read it (typing has it from Python 3.11)

    def dataclass_transform(**_: Any) -> Callable[[T], T]:
        return lambda decorated: decorated


class _Plan:
    """What the shared methods need to know of one record class, worked out once."""

    __slots__ = ("name", "init", "position", "fill", "required", "late", "post_init", "compared", "shown")

    def __init__(self, cls: type) -> None:
        every = fields(cls)
        self.name = cls.__qualname__
        self.init = tuple(f.name for f in every if f.init)
        self.position = {name: i for i, name in enumerate(self.init)}
        # For each constructor argument: its name, default and default factory (either MISSING).
        self.fill = tuple((f.name, f.default, f.default_factory) for f in every if f.init)
        self.required = sum(1 for _, default, factory in self.fill if default is MISSING and factory is MISSING)
        # Fields outside the constructor that still get a value there, as dataclasses does.
        self.late = tuple((f.name, f.default, f.default_factory) for f in every if not f.init and (f.default is not MISSING or f.default_factory is not MISSING))
        self.post_init = hasattr(cls, "__post_init__")
        self.compared = tuple(f.name for f in every if f.compare)
        self.shown = tuple(f.name for f in every if f.repr)


def _init(self: Any, *args: Any, **kwargs: Any) -> None:
    plan: _Plan = self.__record_plan__
    # Straight into the instance's dict (what object.__setattr__ does, one call for all): every
    # field given by position is the common call, and the cheapest.
    if kwargs or len(args) != len(plan.init):
        args = _bind(plan, args, kwargs)
    self.__dict__.update(zip(plan.init, args))
    for name, default, factory in plan.late:
        self.__dict__[name] = default if factory is MISSING else factory()
    if plan.post_init:
        self.__post_init__()


def _bind(plan: _Plan, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    """Every constructor argument in field order, from positions, keywords and defaults; or the
    TypeError Python raises for the same call of a generated constructor."""
    names = plan.init
    if len(args) > len(names):
        least = plan.required + 1
        takes = f"from {least} to {len(names) + 1} positional arguments" if least <= len(names) else f"{least} positional argument{'s' if least > 1 else ''}"
        raise TypeError(f"{plan.name}.__init__() takes {takes} but {len(args) + 1} were given")
    for name in kwargs:
        position = plan.position.get(name)
        if position is None:
            raise TypeError(f"{plan.name}.__init__() got an unexpected keyword argument {name!r}")
        if position < len(args):
            raise TypeError(f"{plan.name}.__init__() got multiple values for argument {name!r}")
    values = list(args)
    missing = []
    for name, default, factory in plan.fill[len(args):]:
        if name in kwargs:
            values.append(kwargs[name])
        elif default is not MISSING:
            values.append(default)
        elif factory is not MISSING:
            values.append(factory())
        else:
            missing.append(name)
    if missing:
        raise TypeError(f"{plan.name}.__init__() missing {len(missing)} required positional argument{'s' if len(missing) > 1 else ''}: {_listed(missing)}")
    return tuple(values)


def _listed(names: list[str]) -> str:
    """'a', 'a' and 'b', 'a', 'b', and 'c': as Python words a missing-arguments error."""
    quoted = [repr(n) for n in names]
    if len(quoted) <= 2:
        return " and ".join(quoted)
    return ", ".join(quoted[:-1]) + ", and " + quoted[-1]


def _setattr(self: Any, name: str, value: object) -> None:
    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def _delattr(self: Any, name: str) -> None:
    raise FrozenInstanceError(f"cannot delete field {name!r}")


def _eq(self: Any, other: object) -> bool:
    names: tuple[str, ...] = self.__record_plan__.compared
    if other.__class__ is not self.__class__:
        return NotImplemented
    return tuple(getattr(self, n) for n in names) == tuple(getattr(other, n) for n in names)


def _hash(self: Any) -> int:
    return hash(tuple(getattr(self, n) for n in self.__record_plan__.compared))


@reprlib.recursive_repr()
def _repr(self: Any) -> str:
    plan = self.__record_plan__
    shown = ", ".join(f"{n}={getattr(self, n)!r}" for n in plan.shown)
    return f"{plan.name}({shown})"


_SHARED = {"__init__": _init, "__setattr__": _setattr, "__delattr__": _delattr, "__repr__": _repr}


def _finish(cls: type[T], eq: bool) -> type[T]:
    # Nothing is generated: no __init__, no repr, no comparison, not frozen (the guards below are).
    made = dataclass(init=False, repr=False, eq=False)(cls)
    own = made.__dict__
    made.__record_plan__ = _Plan(made)  # type: ignore[attr-defined]
    for name, method in _SHARED.items():
        if name not in own:
            setattr(made, name, method)
    if eq and "__eq__" not in own:
        made.__eq__ = _eq  # type: ignore[method-assign]
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
