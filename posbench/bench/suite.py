"""The bench's parts by name, and the run that writes them: ``bench.csv`` (one row per figure),
``bench.txt`` (a table per part) and ``samples.json`` (every timed sample, the options and the machine
at start and end), with the profiles of missed targets beside them."""

from __future__ import annotations

import csv
import io
import json
import multiprocessing
import os
import platform
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import asdict, replace
from pathlib import Path

import torch

from posbench.bench import (
    attention_paths,
    decode_overhead,
    encoding_overhead,
    longest_length,
    machine_limit,
    train_throughput,
    transformers_peer,
    x_transformers_peer,
)
from posbench.bench.base import BenchOptions, PartResult, Row, rejudged
from posbench.devices import on_cuda
from posbench.machine import cpu_model
from posbench.records import write_atomically

PART_FUNCTIONS = {"paths": attention_paths.run, "overhead": encoding_overhead.run, "peer": x_transformers_peer.run,
                  "limit": machine_limit.run, "scale": longest_length.run, "decode": decode_overhead.run,
                  "decode_peer": transformers_peer.run, "train": train_throughput.run}  # one for each of PARTS


def format_value(value) -> str:
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"
    return str(value)


def text_table(result: PartResult) -> str:
    """Items as rows, metrics as columns; the targeted metric's target and verdict at the end."""
    items, metrics, cells, verdicts = [], [], {}, {}
    for row in result.rows:
        items += [row.item] if row.item not in items else []
        metrics += [row.metric] if row.metric not in metrics else []
        unit = f" {row.unit}" if row.unit in ("ms", "MiB", "%") else ""
        cells[row.item, row.metric] = format_value(row.value) + unit
        if row.target:
            verdicts[row.item] = (row.target, "yes" if row.meets else "NO")
    header = ["", *metrics, *(["target", "met"] if verdicts else [])]
    lines = [[item, *(cells.get((item, m), "") for m in metrics), *(verdicts.get(item, ("", "")) if verdicts else [])]
             for item in items]
    widths = [max(len(str(line[c])) for line in [header, *lines]) for c in range(len(header))]

    def render(line):
        return "  ".join(str(cell).ljust(width) for cell, width in zip(line, widths)).rstrip()

    return "\n".join([result.title, render(header), *map(render, lines), *(f"  note: {n}" for n in result.notes)])


def environment(device: str) -> dict:
    gpu = torch.cuda.get_device_name(torch.device(device)) if on_cuda(device) else None
    return {"device": device, "gpu": gpu, "torch": torch.__version__, "threads": torch.get_num_threads(),
            "cpu": cpu_model(),
            "machine": platform.machine(), "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "load_average": os.getloadavg(), "time": time.strftime("%Y-%m-%d %H:%M:%S %z")}


def run_bench(options: BenchOptions, out: Path) -> list[PartResult]:
    """Run the chosen parts, writing ``bench.csv``, ``bench.txt`` and ``samples.json`` to ``out`` after each one
    (atomically: a bench stopped in a part keeps the parts before it)."""
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(options.threads)
    start = environment(options.device)
    results = []
    for part in options.parts:
        results.append(run_part(part, options, out))
        print(text_table(results[-1]) + "\n", flush=True)
        write_results(options, results, start, environment(options.device), out)
    return results


def write_results(options: BenchOptions, results: list[PartResult], start: dict, end: dict, out: Path) -> None:
    """The parts run so far as ``bench.csv`` (a row per figure), ``bench.txt`` (the tables under the machine and
    its load) and ``samples.json`` (every raw sample, the options and both environments)."""
    table = io.StringIO()
    writer = csv.DictWriter(table, fieldnames=list(Row.__dataclass_fields__))
    writer.writeheader()
    writer.writerows(asdict(row) for result in results for row in result.rows)
    on = f"{start['device']} ({start['gpu']}), host " if start["gpu"] else ""
    header = (f"posbench bench — {on}{start['cpu']} ({start['cpu_capability']}), torch {start['torch']}, "
              f"{start['threads']} threads; load average {_load(start)} at start, {_load(end)} at end "
              f"({start['time']} → {end['time']})")
    samples = {"options": asdict(options), "environment": {"start": start, "end": end},
               "samples_ms": {result.title: result.samples for result in results}}
    texts = {"bench.csv": table.getvalue(), "bench.txt": "\n\n".join([header, *map(text_table, results)]) + "\n",
             "samples.json": json.dumps(samples, indent=1)}
    for name, text in texts.items():
        write_atomically(out / name, lambda file, text=text: file.write(text.encode()))


def run_part(part: str, options: BenchOptions, out: Path) -> PartResult:
    """One part in this process or, with ``options.processes`` > 1, once in each of that many fresh processes
    (spawned one after another, each writing its profiles to ``out/<part>-process-<k>``), every figure the
    median of theirs (:func:`across_processes`). A process places its models in memory once, and where they land
    can move a cell's figure from one process to the next by more than a target's margin: the rounds within one
    process cannot average that out, a median over fresh processes can."""
    if options.processes == 1:
        return PART_FUNCTIONS[part](options, out)
    runs, lost = {}, []
    for k in range(1, options.processes + 1):
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
            try:
                runs[k] = pool.submit(_in_fresh_process, part, options, out / f"{part}-process-{k}").result()
            except BrokenProcessPool:  # killed (out of memory, a signal): the others still give the figures
                lost.append(k)
    if not runs:
        raise RuntimeError(f"every one of the {options.processes} processes of bench part {part} died")
    result = across_processes(runs)
    if lost:
        result.notes.append(f"process {', '.join(map(str, lost))} of {options.processes} died before it returned "
                            f"(killed or out of memory): each figure is the median of the other {len(runs)}")
    return result


def _in_fresh_process(part: str, options: BenchOptions, out: Path) -> PartResult:
    torch.set_num_threads(options.threads)
    out.mkdir(parents=True, exist_ok=True)
    return PART_FUNCTIONS[part](options, out)


def across_processes(runs: dict[int, PartResult]) -> PartResult:
    """The runs of one part, by process number, as one result: each numeric figure the median over the runs that
    gave it (a count's, a length's, the lower middle one: a length some run reached), a target judged on that
    median, and beside every judged or paired ratio, or a figure some run did not give (``scale`` stops where a
    process's own time estimate says), its value in each run (``—``: none); other rows (a path's name) as every
    run gave them, or each run's where they differ; a note some runs gave, with their numbers. Samples are kept
    per run."""
    by_key = {k: _rows_by_key(run) for k, run in runs.items()}
    result = PartResult(f"{next(iter(runs.values())).title}; each figure the median of {len(runs)} fresh processes")
    for key in _row_order(runs.values()):
        rows = [by_key[k].get(key) for k in runs]
        first = next(row for row in rows if row is not None)
        values = [row.value for row in rows if row is not None]
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            same = len({str(v) for v in values}) == 1 and len(values) == len(runs)
            result.rows.append(first if same else replace(first, value=_per_run(rows, str, " | "), meets=None))
            continue
        value = (statistics.median_low if all(isinstance(v, int) for v in values) else statistics.median)(values)
        result.rows.append(replace(first, value=value, meets=rejudged(first.target, value)))
        if first.target or first.metric == "paired ratio" or len(values) < len(runs):
            result.rows.append(Row(first.part, first.item, f"{first.metric} per process",
                                   _per_run(rows, lambda v: f"{v:.3f}")))
    result.samples = {f"process {k}: {name}": samples for k, run in runs.items()
                      for name, samples in run.samples.items()}
    result.notes = [note if len(given) == len(runs) else f"process {', '.join(map(str, given))}: {note}"
                    for note, given in _notes_by_run(runs).items()]
    return result


def _rows_by_key(run: PartResult) -> dict[tuple[str, str, str], Row]:
    """One run's rows by (part, item, metric); a key twice in one run is a bench bug, never merged away."""
    rows = {}
    for row in run.rows:
        if _key(row) in rows:
            raise ValueError(f"bench part {row.part} gave {row.item!r} {row.metric!r} twice in one process")
        rows[_key(row)] = row
    return rows


def _notes_by_run(runs: dict[int, PartResult]) -> dict[str, list[int]]:
    """Each note once, with the processes that gave it: a run's "missed its target" beside a median that meets
    it must say whose it was."""
    given: dict[str, list[int]] = {}
    for k, run in runs.items():
        for note in dict.fromkeys(run.notes):
            given.setdefault(note, []).append(k)
    return given


def _key(row: Row) -> tuple[str, str, str]:
    return row.part, row.item, row.metric


def _row_order(runs) -> list[tuple[str, str, str]]:
    """Every run's row keys, once each, in the runs' order: a row only a later run gave comes after the row
    before it there."""
    order: list[tuple[str, str, str]] = []
    for run in runs:
        at = 0
        for row in run.rows:
            if _key(row) in order:
                at = order.index(_key(row)) + 1
            else:
                order.insert(at, _key(row))
                at += 1
    return order


def _per_run(rows: list[Row | None], shown, separator: str = " ") -> str:
    """Each run's value of one row, ``—`` where a run did not give it."""
    return separator.join("—" if row is None else shown(row.value) for row in rows)


def _load(env: dict) -> str:
    return " ".join(f"{x:.2f}" for x in env["load_average"])
