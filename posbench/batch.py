"""Several cells in one process, so Python's and torch's start-up is paid once per job, not per cell.

Snakemake deletes every declared output of a job it did not see finish. A batch job therefore
declares only its *manifest*, written last; each cell's record is its own atomic file beside it.
After a kill, the rerun keeps every record that its cell would write now — same config hash, same
measuring code and package versions (:func:`code_identity`), and a result (``ok``, ``oom`` or
``diverged``) — byte for byte, and measures only the rest: a changed config (more steps, say), other
measuring code or package versions, a record older than ``code_hash``, a ``skipped`` or ``error``
cell, or a record whose per-item results (the file beside it) are missing or not its own is measured
again.

The measuring code is named by :func:`posbench.measuring_code.code_hash`, a hash of the package's sources
less the report, not by the git commit: a commit that touches only docs, tests, the report or the
rules under ``workflow/`` leaves every record standing, so a reference sweep survives it instead of
being measured again; an edit to any other ``*.py`` or ``*.json`` of the package, committed or not,
has its records measured again.

A SIGINT or SIGTERM stops the batch between records (:func:`run_cells`): every finished record stands,
none is half-written, no manifest is written, and the command says how many it kept; the rerun
measures the rest.

Failures fail: a cell that is ``skipped`` (its device is missing) or ``error`` still writes its
record (the reason is kept), but the batch then writes no manifest and exits 1, so the workflow
job fails and a rerun tries those cells again. ``ok``, ``oom`` and ``diverged`` are results: exit 0.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import jsonschema

from posbench import machine, records
from posbench.faults import Interrupted


@dataclass(frozen=True)
class Cell:
    """One measurement: where its record goes, the config it records, and how to measure it."""

    out: Path
    config: dict  # the record's ``config``: a kept record must carry the same hash
    measure: Callable[[], dict] | None = None  # -> the record; None: measured together (run_cells)


class OutTemplateError(ValueError):
    """``--out`` does not give each cell of the batch its own path."""


def record_paths(template: str, values: list[dict]) -> list[Path]:
    """``template`` formatted with each cell's ``values`` (``{seed}``, ``{seq_len}``, …); one path per cell."""
    try:
        paths = [Path(template.format(**cell)) for cell in values]
    except (KeyError, IndexError, ValueError, AttributeError, TypeError) as error:
        allowed = ", ".join("{" + key + "}" for key in values[0])
        raise OutTemplateError(f"argument --out: {template!r} is not a path template; allowed fields: {allowed}, "
                               f"and {{{{ }}}} for a literal brace ({type(error).__name__}: {error})") from None
    if len(set(paths)) < len(paths):
        several = [key for key in values[0] if len({str(cell[key]) for cell in values}) > 1]
        needed = " and ".join("{" + key + "}" for key in several)
        raise OutTemplateError(f"argument --out: {template!r} gives several cells one path; "
                               f"with several values it must contain {needed}")
    return paths


KEPT_STATUSES = ("ok", "oom", "diverged")  # results; a skipped or failed cell is tried again


def kept_record(cell: Cell, code: dict) -> dict | None:
    """The record already at ``cell.out`` if it is whole, valid, with the items it names, of this very
    config, measured by this ``code`` (:func:`code_identity`) and a result; else ``None``."""
    try:
        record = records.read_record(cell.out)
        if "items" in record:
            records.read_items(cell.out, record)
    except (OSError, ValueError, jsonschema.ValidationError):
        return None
    same = record["config_hash"] == records.config_hash(cell.config) and code_identity(record["environment"]) == code
    return record if same and record["status"] in KEPT_STATUSES else None


def code_identity(environment: dict) -> dict:
    """What must not have changed for a record to stand: the measuring code (``code_hash``, see
    :func:`posbench.measuring_code.code_hash`) and the locked package versions (``packages``), since either can
    change a figure. The git commit is left out: it also changes with docs and the report, which measure
    nothing. A record without ``code_hash`` (schema version 1) has ``None`` here, which no current
    environment matches, so it is measured again."""
    return {"code_hash": environment.get("code_hash"), "packages": environment["packages"]}


def run_cells(command: str, cells: list[Cell], manifest: Path | None = None,
              together: Callable[[list[Cell]], Iterable[tuple[int, dict]]] | None = None) -> int:
    """Measure each cell not already recorded, write its record, then the manifest; the exit status.

    Each cell is measured by its own ``measure`` and its record written at once; with ``together``,
    the cells not kept are measured by one call ``together(cells)``, which yields ``(position in
    cells, record)`` as it finishes each (profile times the encodings of a length in alternation, and
    yields them when their length is done), each record written as it comes — a rerun then keeps what
    an earlier run finished and measures only the rest, together.

    A signal (:class:`~posbench.faults.Interrupted`, or Ctrl-C's ``KeyboardInterrupt``) stops the batch
    between records: the records finished stand, none is half-written, and it is raised again as
    ``Interrupted`` saying how many of the batch's records are kept and where.

    The manifest lists the cells in order and gives each cell's wall time in this process
    (``seconds``; cells measured together share theirs evenly), so a job's wall time minus their sum is
    what the job spent outside its cells: start-up, argument checks, the manifest."""
    entries: dict[int, dict] = {}  # by the cell's position, as each is done
    code = code_identity(machine.environment())
    try:
        measure_cells(command, cells, together, code, entries)
    except KeyboardInterrupt as stop:
        kept = sum(kept_record(cell, code) is not None for cell in cells)  # what a rerun keeps
        folder = Path(os.path.commonpath([cell.out.parent for cell in cells]))
        raise Interrupted(getattr(stop, "signum", signal.SIGINT),
                          f"kept {kept} of {len(cells)} records under {folder}; rerun to finish the rest") from None
    entries = [entries[index] for index in range(len(cells))]
    counts = {status: sum(e["status"] == status for e in entries) for status in records.STATUSES}
    failed = counts["skipped"] + counts["error"]
    if manifest and not failed:
        records.write_json(manifest, {"kind": "batch", "command": command, "records": entries})
    written = (f"; manifest {manifest}" if manifest and not failed else
               f"; no manifest: {failed} cell(s) skipped or failed, a rerun tries them again" if manifest else "")
    print(f"posbench {command}: {len(entries)} cells ("
          + ", ".join(f"{n} {status}" for status, n in counts.items() if n)
          + f"), {sum(e['action'] == 'kept' for e in entries)} kept from an earlier run{written}", file=sys.stderr)
    return 1 if failed else 0


def measure_cells(command: str, cells: list[Cell], together: Callable[[list[Cell]], Iterable[tuple[int, dict]]] | None,
                  code: dict, entries: dict[int, dict]) -> None:
    """Keep (a record of this ``code``, :func:`kept_record`) or measure each of ``cells`` (see :func:`run_cells`),
    writing each new record at once and adding each cell's manifest entry to ``entries`` (by position) as it
    is done, with a progress line."""

    def done(index: int, record: dict, action: str, seconds: float) -> None:
        reason = f" — {record['reason']}" if record["reason"] else ""
        print(f"posbench {command} [{len(entries) + 1}/{len(cells)}] {action} {cells[index].out}: "
              f"{record['status']}{reason}", file=sys.stderr, flush=True)
        entries[index] = {"record": str(cells[index].out), "status": record["status"],
                          "config_hash": record["config_hash"], "action": action, "seconds": seconds}

    if together is None:
        for index, cell in enumerate(cells):
            started = time.perf_counter()
            record = kept_record(cell, code)
            action = "kept" if record else "wrote"
            if record is None:
                record = cell.measure()
                records.write_record(cell.out, record)
            done(index, record, action, time.perf_counter() - started)
        return
    started = time.perf_counter()
    missing = []
    for index, cell in enumerate(cells):
        record = kept_record(cell, code)
        if record:
            done(index, record, "kept", 0.0)
        else:
            missing.append(index)
    if not missing:
        return
    for position, record in together([cells[index] for index in missing]):
        records.write_record(cells[missing[position]].out, record)
        done(missing[position], record, "wrote", 0.0)
    share = (time.perf_counter() - started) / len(missing)
    for index in missing:
        entries[index]["seconds"] = share
