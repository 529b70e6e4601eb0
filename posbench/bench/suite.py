"""The bench's parts by name, and the run that writes them: ``bench.csv`` (one row per figure),
``bench.txt`` (a table per part) and ``samples.json`` (every timed sample, the options and the machine
at start and end), with the profiles of missed targets beside them."""

from __future__ import annotations

import csv
import json
import os
import platform
import time
from dataclasses import asdict
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
from posbench.bench.base import BenchOptions, PartResult, Row
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
        results.append(PART_FUNCTIONS[part](options, out))
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


def _load(env: dict) -> str:
    return " ".join(f"{x:.2f}" for x in env["load_average"])
