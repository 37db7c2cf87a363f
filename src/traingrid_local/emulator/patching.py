"""The one way the emulator changes moto, and anything else beyond its own objects.

Every adaptation goes through ``PATCHES``, and so does every process-wide change a session
makes (the environment, ``traingrid.clock.now``, ``sys.stdout``, log levels, warnings filters,
the emulator's training times and flags). ``PATCHES``

- refuses to start on another moto than the one the adaptations were written for, and says so;
- fails at once, naming it, when a target an adaptation replaces is missing (or one it adds
  already exists): moto changed under it;
- records the original of everything it changes and puts every original back, newest first,
  when the emulator closes, so a process may open and close emulators one after another and
  moto, and the process, are left as they were.

A replacement gets what it replaces through its factory: ``PATCHES.wrap(Cls, "name",
lambda previous: new)``. ``previous`` is the attribute as stored (a function, or a
classmethod, staticmethod or property object), so a replacement of a replacement calls the
one below it.
"""

from __future__ import annotations

import inspect
import logging
import warnings
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

import moto

# The moto release the adaptations were written against (pyproject.toml pins it; tested).
PINNED_MOTO_VERSION = "5.2.5"
_ABSENT = object()


class PatchError(RuntimeError):
    """moto is not what the emulator's adaptations were written for."""


@dataclass(frozen=True)
class Change:
    target: Any  # the class, module or table changed
    name: Any  # the attribute, or the keys of the table
    what: str
    undo: Callable[[], None]


def _name(owner: Any) -> str:
    return str(getattr(owner, "__qualname__", None) or getattr(owner, "__name__", repr(owner)))


class Patches:
    def __init__(self, version: str = PINNED_MOTO_VERSION) -> None:
        self.version = version
        self._changes: list[Change] = []

    @property
    def applied(self) -> list[Change]:
        """What is changed now, oldest first."""
        return list(self._changes)

    def check_version(self) -> None:
        if moto.__version__ != self.version:
            raise PatchError(
                f"the emulator adapts moto {self.version}, but moto {moto.__version__} is "
                f"installed: install the pinned version (make install) or update the "
                f"adaptations in traingrid_local/emulator for this one")

    def _fail(self, owner: Any, name: str, problem: str) -> PatchError:
        return PatchError(
            f"{getattr(owner, '__module__', '')}.{_name(owner)}.{name} {problem} "
            f"(moto {moto.__version__}; the emulator adapts moto {self.version})")

    def wrap(self, owner: Any, name: str, factory: Callable[[Any], Any]) -> Any:
        """Replace ``owner.name`` by ``factory(previous)``; the replacement."""
        try:
            previous = inspect.getattr_static(owner, name)
        except AttributeError:
            raise self._fail(owner, name, "is missing") from None
        own = owner.__dict__.get(name, _ABSENT)  # inherited attributes are deleted on undo
        replacement = factory(previous)
        setattr(owner, name, replacement)
        self._changes.append(Change(
            owner, name, f"{_name(owner)}.{name}",
            lambda: delattr(owner, name) if own is _ABSENT else setattr(owner, name, own)))
        return replacement

    def replace(self, owner: Any, name: str, new: Any) -> Any:
        """Replace ``owner.name`` by ``new``, which does not need what it replaces."""
        return self.wrap(owner, name, lambda _previous: new)

    def swap(self, owner: Any, name: str, new: Any) -> Any:
        """Replace a process-wide value that others replace too (``sys.stdout``) by ``new``.
        Undo puts back what it replaced only while ``owner.name`` still holds ``new``: a
        replacement made meanwhile stays, for its owner to undo."""
        previous = owner.__dict__.get(name, _ABSENT)
        if previous is _ABSENT:
            raise self._fail(owner, name, "is missing")
        setattr(owner, name, new)

        def undo() -> None:
            if owner.__dict__.get(name) is new:
                setattr(owner, name, previous)

        self._changes.append(Change(owner, name, f"{_name(owner)}.{name}", undo))
        return new

    def add(self, owner: Any, name: str, value: Any) -> None:
        """Give ``owner`` an attribute moto does not have (yet: if it has, we must look)."""
        if hasattr(owner, name):
            raise self._fail(owner, name, "exists now: moto implements it; drop ours")
        setattr(owner, name, value)
        self._changes.append(Change(owner, name, f"{_name(owner)}.{name}",
                                    lambda: delattr(owner, name)))

    def update(self, mapping: MutableMapping[Any, Any], items: dict[Any, Any], what: str) -> None:
        """Add or change entries of one of moto's tables."""
        saved = {key: mapping.get(key, _ABSENT) for key in items}
        mapping.update(items)

        def undo() -> None:
            for key, value in saved.items():
                if value is _ABSENT:
                    mapping.pop(key, None)
                else:
                    mapping[key] = value

        self._changes.append(Change(mapping, tuple(items), what, undo))

    def log_level(self, logger_name: str, level: int) -> None:
        """Set a logger's level; undo puts back the level it had."""
        logger = logging.getLogger(logger_name)
        previous = logger.level
        logger.setLevel(level)
        self._changes.append(Change(logger, "level", f"the level of logger {logger_name}",
                                    lambda: logger.setLevel(previous)))

    def ignore_warnings(self, message: str) -> None:
        """Ignore the warnings whose message matches ``message`` (a regular expression); undo
        takes the filter out again (from the filters in force then: pytest gives each test a
        copy), unless it was there before."""
        before = list(warnings.filters)
        warnings.filterwarnings("ignore", message=message)
        added = warnings.filters[0]

        def undo() -> None:
            current = list(warnings.filters)
            if added not in before and added in current:
                current.remove(added)
                warnings.filters = current  # a new list, as catch_warnings sets one

        self._changes.append(Change(warnings, "filters", f"warnings filter {message!r}", undo))

    def event_handler(self, session: Any, event: str, handler: Callable[..., Any],
                      unique_id: str) -> None:
        """Register ``handler`` for a botocore session's ``event``; undo unregisters it."""
        session.register(event, handler, unique_id=unique_id)
        self._changes.append(Change(
            session, (), f"botocore handler {unique_id} on {event}",
            lambda: session.unregister(event, unique_id=unique_id)))

    def undo_all(self) -> None:
        while self._changes:
            self._changes.pop().undo()


PATCHES = Patches()


def original_function(previous: Any) -> Callable[..., Any]:
    """The function under a stored attribute: a classmethod's or staticmethod's own."""
    return previous.__func__ if isinstance(previous, classmethod | staticmethod) else previous
