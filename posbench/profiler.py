"""``torch.profiler.profile`` without the two lines Kineto prints on every use.

Kineto, the library behind ``torch.profiler``, marks each trace's start and stop with a log line on the
process's stderr (``USDT:… SyncActivityProfilerHandler.cpp:52] profiler_start``), at every log level
that still shows its errors (``KINETO_LOG_LEVEL`` 6 would hide those too). :func:`profiling` catches
file descriptor 2 only while the profiler starts and stops, and writes back every line caught there
but those marks: an error Kineto or anything else prints then still reaches the terminal, and
nothing the profiled code prints is held back.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

import torch

MARK = b"USDT:"  # what Kineto's start and stop marks begin with


@contextmanager
def profiling(activities: list[torch.profiler.ProfilerActivity]) -> Iterator[torch.profiler.profile]:
    """A started ``torch.profiler.profile(activities=activities)``, stopped on leaving, less Kineto's marks."""
    profiler = torch.profiler.profile(activities=activities)
    with _without_marks():
        profiler.__enter__()
    try:
        yield profiler
    finally:
        with _without_marks():
            profiler.__exit__(*sys.exc_info())


@contextmanager
def _without_marks() -> Iterator[None]:
    """Within: what is written to file descriptor 2 goes to a temporary file; on leaving, its lines but
    Kineto's marks are written to the real one."""
    sys.stderr.flush()
    real = os.dup(2)
    try:
        with tempfile.TemporaryFile() as caught:
            os.dup2(caught.fileno(), 2)
            try:
                yield
            finally:
                sys.stderr.flush()
                os.dup2(real, 2)
                caught.seek(0)
                kept = [line for line in caught.read().splitlines(keepends=True) if not line.startswith(MARK)]
                os.write(2, b"".join(kept))
    finally:
        os.close(real)
