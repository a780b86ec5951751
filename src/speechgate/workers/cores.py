"""The cores a gateway's local pools share, and when one job may have them all.

Every local pool pins its workers onto the same cores, so a Kokoro job is not alone while a
Piper job runs: the pools answer through a `SharedCores` they all join.
"""

from __future__ import annotations

from typing import Protocol


class CoreUser(Protocol):
    """A pool whose jobs can be widened onto every core and narrowed back."""

    @property
    def jobs(self) -> int: ...

    def narrow_all(self) -> None:
        """Put every running job back on its worker's own cores."""

    def widen_lone(self) -> None:
        """Give the one running job, if there is one, every core."""


class SharedCores:
    def __init__(self) -> None:
        self._users: list[CoreUser] = []

    def join(self, user: CoreUser) -> None:
        self._users.append(user)

    def jobs(self) -> int:
        return sum(user.jobs for user in self._users)

    def narrow_all(self) -> None:
        for user in self._users:
            user.narrow_all()

    def widen_lone(self) -> None:
        """After a job ends: if one job is left in all the pools, it gets every core."""
        if self.jobs() == 1:
            for user in self._users:
                user.widen_lone()
