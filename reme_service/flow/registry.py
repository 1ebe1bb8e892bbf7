"""Explicit name → class registries. Duplicates are refused; unknown names list the valid choices."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Generic, TypeVar

from reme_service.errors import UnknownNameError

T = TypeVar("T")


class Registry(Generic[T]):
    def __init__(self, kind: str, items: Iterable[tuple[str, T]] = ()) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}
        for name, item in items:
            self.add(name, item)

    def add(self, name: str, item: T) -> None:
        if name in self._items:
            raise ValueError(f"duplicate {self.kind} {name!r}")
        self._items[name] = item

    def get(self, name: str) -> T:
        try:
            return self._items[name]
        except KeyError:
            raise UnknownNameError(self.kind, name, self._items) from None

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def names(self) -> list[str]:
        return sorted(self._items)
