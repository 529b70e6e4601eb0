"""The bench's parts by name, and the run that writes them: ``bench.csv`` (one row per figure),
``bench.txt`` (a table per part) and ``samples.json`` (every timed sample, the options and the machine
at start and end), with the profiles of missed targets beside them."""

from __future__ import annotations

import csv
import json
import multiprocessing
import os
import platform
import statistics
import time
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
from posbench.records import cpu_model

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
    """Run the chosen parts, writing ``bench.csv``, ``bench.txt`` and ``samples.json`` to ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(options.threads)
    start = environment(options.device)
    results = []
    for part in options.parts:
        results.append(run_part(part, options, out))
        print(text_table(results[-1]) + "\n", flush=True)
    end = environment(options.device)
    with (out / "bench.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(Row.__dataclass_fields__))
        writer.writeheader()
        writer.writerows(asdict(row) for result in results for row in result.rows)
    on = f"{start['device']} ({start['gpu']}), host " if start["gpu"] else ""
    header = (f"posbench bench — {on}{start['cpu']} ({start['cpu_capability']}), torch {start['torch']}, "
              f"{start['threads']} threads; load average {_load(start)} at start, {_load(end)} at end "
              f"({start['time']} → {end['time']})")
    (out / "bench.txt").write_text("\n\n".join([header, *map(text_table, results)]) + "\n")
    (out / "samples.json").write_text(json.dumps(
        {"options": asdict(options), "environment": {"start": start, "end": end},
         "samples_ms": {result.title: result.samples for result in results}}, indent=1))
    return results


def run_part(part: str, options: BenchOptions, out: Path) -> PartResult:
    """One part in this process or, with ``options.processes`` > 1, once in each of that many fresh processes
    (spawned one after another, each writing its profiles to ``out/<part>-process-<k>``), every figure the
    median of theirs (:func:`across_processes`). A process places its models in memory once: on a 2-core Xeon
    one P7 cell of the same code measured 1.031 to 1.109 in eight runs, a spread wider than a target's margin
    that the rounds within one process cannot average out."""
    if options.processes == 1:
        return PART_FUNCTIONS[part](options, out)
    runs = []
    for k in range(1, options.processes + 1):
        with multiprocessing.get_context("spawn").Pool(1) as pool:
            runs.append(pool.apply(_in_fresh_process, (part, options, out / f"{part}-process-{k}")))
    return across_processes(runs)


def _in_fresh_process(part: str, options: BenchOptions, out: Path) -> PartResult:
    torch.set_num_threads(options.threads)
    out.mkdir(parents=True, exist_ok=True)
    return PART_FUNCTIONS[part](options, out)


def across_processes(runs: list[PartResult]) -> PartResult:
    """The runs of one part (the same rows in the same order) as one result: each numeric figure the median
    over the runs, a target judged on that median, and beside every judged or paired ratio its value in
    each run; other rows (a path's name) as the first run gave them. Samples are kept per run."""
    result = PartResult(f"{runs[0].title}; each figure the median of {len(runs)} fresh processes")
    for rows in zip(*(run.rows for run in runs), strict=True):
        first = rows[0]
        if len({(row.part, row.item, row.metric) for row in rows}) != 1:
            raise RuntimeError(f"the runs of {first.part} gave different rows: {sorted({row.item for row in rows})}")
        values = [row.value for row in rows]
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            result.rows.append(first)
            continue
        value = statistics.median(values)
        result.rows.append(replace(first, value=value, meets=rejudged(first.target, value)))
        if first.target or first.metric == "paired ratio":
            result.rows.append(Row(first.part, first.item, f"{first.metric} per process",
                                   " ".join(f"{v:.3f}" for v in values)))
    result.samples = {f"process {k}: {name}": samples for k, run in enumerate(runs, 1)
                      for name, samples in run.samples.items()}
    result.notes = list(dict.fromkeys(note for run in runs for note in run.notes))
    return result


def _load(env: dict) -> str:
    return " ".join(f"{x:.2f}" for x in env["load_average"])
