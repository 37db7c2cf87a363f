"""State the emulator keeps on moto's objects, typed.

An adaptation often needs state of its own on one of moto's objects (a Batch job's simulated
life, the files on an FSx file system, an S3 object's declared size). moto's classes declare
no such attribute, so the state lives in the object's ``__dict__`` under a name, where tests
and moto's own ``gen_response_object`` see it as an attribute; an :class:`Attached` names it
once, with its type, and reads and writes it::

    SIMULATED: Attached[SimulatedJob] = Attached("simulated")
    SIMULATED.set(job, SimulatedJob(...))
    SIMULATED.get(job)  # SimulatedJob | None: None on a job moto made on its own
"""

from __future__ import annotations

from typing import Generic, TypeVar

T = TypeVar("T")


class Attached(Generic[T]):
    def __init__(self, name: str) -> None:
        self.name = name

    def get(self, owner: object) -> T | None:
        """The state, or None if this object has none (moto made it without us)."""
        found: T | None = vars(owner).get(self.name)
        return found

    def of(self, owner: object) -> T:
        """The state of an object the emulator has given it to (KeyError if not)."""
        found: T = vars(owner)[self.name]
        return found

    def set(self, owner: object, value: T) -> T:
        vars(owner)[self.name] = value
        return value

    def on(self, owner: object) -> bool:
        return self.name in vars(owner)
