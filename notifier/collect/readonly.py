"""A public, read-only view of a private attribute, for the broker's and the collector's state.

``port = ReadOnly[int]("_port", "The listening port.")`` in a class body reads ``self._port``
and, like a property without a setter, refuses assignment.
"""

from __future__ import annotations

from typing import Generic, Never, NoReturn, TypeVar, cast, overload

T = TypeVar("T")


class ReadOnly(Generic[T]):
    """Reads ``attribute`` of the instance; assigning raises AttributeError, as for a property."""

    def __init__(self, attribute: str, doc: str | None = None) -> None:
        self.attribute = attribute
        self.__doc__ = doc

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, instance: None, owner: type) -> ReadOnly[T]: ...

    @overload
    def __get__(self, instance: object, owner: type) -> T: ...

    def __get__(self, instance: object | None, owner: type) -> ReadOnly[T] | T:
        if instance is None:
            return self
        return cast(T, getattr(instance, self.attribute))

    def __set__(self, instance: object, value: Never) -> NoReturn:
        raise AttributeError(f"{type(instance).__name__}.{self.name} is read-only")
