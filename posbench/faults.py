"""Faults around a measurement rather than in its arguments: an output that cannot be written, a signal.

Every command checks its outputs before any work (:func:`check_writable`: the folder is created and a
temporary file made there and removed), so a path that cannot take the result is refused in one line
before anything is measured. A write that fails later (a full disk, an I/O error) is a
:class:`WriteError` naming the path: :func:`posbench.records.write_atomically` has left the previous
file as it was and no temporary file behind. SIGINT and SIGTERM raise :class:`Interrupted`
(:func:`signals_interrupt`), so a run stops between two Python statements, the atomic writer removes
its temporary file, and the command says what it kept and exits ``128 + signal``, as a shell reports
a process a signal ended.
"""

from __future__ import annotations

import os
import signal
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class WriteError(OSError):
    """A file could not be written; the message names the path and the reason in one line."""

    def __init__(self, path: str | os.PathLike, reason: str, errno: int | None = None):
        super().__init__(f"cannot write {path}: {reason}")
        self.errno = errno


def failed_write(path: Path, folder: Path, error: OSError) -> WriteError:
    """``error``, met writing ``path`` in ``folder``, as a :class:`WriteError`: a file where the folder (or
    one above it) should be is named, since the error itself only says "File exists" or "Not a directory";
    a file already at ``path`` is said to be unchanged."""
    for candidate in (folder, *folder.parents):
        if candidate.exists():
            if not candidate.is_dir():
                return WriteError(path, f"{candidate} is a file, not a folder", error.errno)
            break
    unchanged = "; the file there is unchanged" if path.is_file() else ""
    return WriteError(path, f"{error.strerror or error}{unchanged}", error.errno)


def check_writable(path: str | os.PathLike, *, folder: bool = False) -> None:
    """Raise :class:`WriteError` unless a file can be written at ``path`` (``folder``: in the folder ``path``).

    The folder is created (as a write would create it) and a temporary file made in it and removed:
    what decides is the file system itself (permissions, read-only mounts, a file in the way), not a
    guess from mode bits. A file's path that is an existing folder is refused too: no file can replace it.
    """
    path = Path(path)
    where = path if folder else path.parent
    if not folder and path.is_dir():
        raise WriteError(path, "it is a folder")
    try:
        where.mkdir(parents=True, exist_ok=True)
        descriptor, probe = tempfile.mkstemp(dir=where, prefix=".posbench-probe.", suffix=".tmp")
    except OSError as error:
        raise failed_write(path, where, error) from None
    os.close(descriptor)
    os.unlink(probe)


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM stopped the run. A ``KeyboardInterrupt``, so code that handles ``Exception``
    (a failed cell becomes an ``error`` record) lets it through, and subprocesses are ended as on Ctrl-C."""

    def __init__(self, signum: int, detail: str = ""):
        super().__init__(signum, detail)
        self.signum = signum
        self.detail = detail

    @property
    def exit_status(self) -> int:
        return 128 + self.signum

    def __str__(self) -> str:
        return f"interrupted by {signal.Signals(self.signum).name}" + (f": {self.detail}" if self.detail else "")


def _raise_interrupted(signum: int, frame) -> None:
    raise Interrupted(signum)


@contextmanager
def interrupts_held() -> Iterator[None]:
    """Within: a SIGINT or SIGTERM is noted, not acted on; on leaving, the handlers before are restored and the
    noted signal raised again, so it stops the run just after. For a step that a stop must not cut in two:
    starting a child process, whose handle the caller needs to end it."""
    noted = []
    previous = {signum: signal.signal(signum, lambda signum, frame: noted.append(signum))
                for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for signum in dict.fromkeys(noted):
            signal.raise_signal(signum)


@contextmanager
def signals_interrupt() -> Iterator[None]:
    """Within: SIGINT and SIGTERM raise :class:`Interrupted` in the main thread (SIGTERM would otherwise end
    the process at once, a temporary file left behind); the previous handlers are restored after."""
    previous = {signum: signal.signal(signum, _raise_interrupted) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
