"""The ``scale`` part: the longest power-of-two length (up to 32k) each timed encoding
(:func:`posbench.bench.targets.timed`) reaches at batch 1 on :data:`~posbench.bench.base.BASE`, with
its peak memory and latency. Each point runs in its own process, so an out-of-memory kill cannot end
the bench. The guidance about very long sequences needs every encoding to get there."""

from __future__ import annotations

import time
from pathlib import Path

import torch

from posbench import attention, measure
from posbench.bench import targets
from posbench.bench.base import BASE, BenchOptions, PartResult, Row, forward_step, median, posbench_model, verdict
from posbench.devices import CPU

SCALE_TARGET = 32768


def run(options: BenchOptions, out: Path) -> PartResult:
    result = PartResult(f"scale: longest L (powers of two to {max(options.scale_lengths)}) at batch 1, "
                        f"d={BASE['d_model']}, {BASE['n_layers']} layers, one process per point")
    for name in targets.timed():
        reached, last_s, failure = None, 0.0, "reached the largest length asked for"
        for seq_len in options.scale_lengths:
            estimate_s = last_s * (seq_len / reached) ** 2 if reached else 0.0
            if estimate_s > options.scale_budget_seconds:
                failure = (f"L={seq_len}: not run, estimated {estimate_s:.0f} s > budget "
                           f"{options.scale_budget_seconds:g} s")
                break
            outcome = measure.run_isolated(scale_point, {
                "encoding": name, "seq_len": seq_len, "threads": options.threads,
                "point_seconds": options.scale_point_seconds})
            if outcome.status != "ok":
                failure = f"L={seq_len}: {outcome.status}: {outcome.reason}"
                break
            point = outcome.sections
            reached, last_s = seq_len, point["latency_ms"] / 1e3
            result.rows += [Row("scale", f"{name} L={seq_len}", "latency", point["latency_ms"], "ms"),
                            Row("scale", f"{name} L={seq_len}", "peak RSS", point["peak_mib"], "MiB"),
                            Row("scale", f"{name} L={seq_len}", "path", point["path"])]
        judged = max(options.scale_lengths) >= SCALE_TARGET  # a shortened run reaches no verdict
        target, meets = verdict(reached or 0, SCALE_TARGET if judged else None, at_most=False)
        result.rows += [Row("scale", name, "longest L", reached or 0, "tokens", target, meets),
                        Row("scale", name, "stopped", failure)]
    result.notes += targets.notes()
    return result


def scale_point(payload: dict, sections: dict) -> None:
    """The isolated ``scale`` measurement (run by :func:`posbench.measure.run_isolated`): one memory pass
    (also the first, untimed-for-the-median warm call), then timed forwards while under the budget;
    when even one forward exceeds it, the memory pass's own time is the latency (``latency_n`` 0)."""
    torch.set_num_threads(payload["threads"])
    seq_len = payload["seq_len"]
    model = posbench_model(payload["encoding"], seq_len=seq_len)
    step = forward_step(model, 1, seq_len)
    sections["path"] = attention.layer_paths(model, seq_len, seq_len)
    _, time_step = measure.make_timer(torch.device(CPU))
    with torch.inference_mode():
        with measure.CpuMemoryMonitor() as memory:
            first_ms = time_step(step)
        sections.update(peak_mib=memory.result()["peak_mib"], baseline_mib=memory.result()["baseline_mib"])
        samples, began = [], time.perf_counter()
        while first_ms / 1e3 < payload["point_seconds"] and (not samples or time.perf_counter() - began
                                                              < payload["point_seconds"]):
            samples.append(time_step(step))
    sections.update(latency_ms=median(samples) if samples else first_ms, latency_n=len(samples),
                    first_call_ms=first_ms)
