"""Errors a user can fix, kept apart from bugs.

A :class:`UserError` carries one line that says what is wrong and what to do.
The command line prints it (once, from one rank) and exits with status 2 and
no traceback. Anything else is a bug: it is printed with its traceback and,
under MPI, the job is aborted so no rank is left waiting.
"""

from __future__ import annotations

EXIT_USER_ERROR = 2


class UserError(Exception):
    """Bad input that the user can correct; the message is one line."""

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(str(message).split()))


def require(condition: bool, message: str) -> None:
    """Raise :class:`UserError` with ``message`` unless ``condition`` holds."""
    if not condition:
        raise UserError(message)


class RankError(UserError):
    """A user-fixable problem found by one rank in the middle of a run.

    The other ranks may be inside MPI calls, so the command line prints the
    message and aborts the whole job instead of exiting this rank alone.
    """

    def __init__(self, rank: int, message: str) -> None:
        super().__init__(f"rank {rank}: {message}")
        self.rank = rank


class InjectedFailure(RuntimeError):
    """Raised by ``--fail-at`` to test what a failing rank does to a job.

    A bug on purpose: the command line aborts the job as for any bug, but
    prints no traceback for it.
    """
