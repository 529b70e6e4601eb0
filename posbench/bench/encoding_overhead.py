"""The ``overhead`` part: the forward latency of each timed encoding (:func:`posbench.bench.targets.timed`)
against ``none``'s on the same causal decoder (:data:`~posbench.bench.base.BASE`, L =
:data:`~posbench.bench.base.SEQ_LEN`, batch 1, fp32, inference mode). A benchmark of positional
encodings must not blame an encoding for a slow implementation: this is the check that it does not."""

from __future__ import annotations

from pathlib import Path

import torch

from posbench import attention, measure
from posbench.bench import targets
from posbench.bench.base import BASE, SEQ_LEN, BenchOptions, PartResult, Row, against_none, forward_step, posbench_model
from posbench.measure import alternate


def run(options: BenchOptions, out: Path) -> PartResult:
    result = PartResult(f"overhead: forward latency / none (causal, d={BASE['d_model']}, {BASE['n_layers']} "
                        f"layers, {BASE['n_heads']} heads, L={SEQ_LEN}, batch 1, fp32, {options.device})")
    timed = targets.timed()
    models = {name: posbench_model(name, device=options.device) for name in timed}
    steps = {name: forward_step(model, 1, SEQ_LEN) for name, model in models.items()}
    result.samples = alternate(steps, options.rounds, options.warmup, device=torch.device(options.device))
    for name, samples in result.samples.items():
        path = attention.layer_paths(models[name], SEQ_LEN, SEQ_LEN, device=options.device)
        against_none(out, result, ("overhead", name), result.samples, steps, name, timed[name].overhead,
                     extra=[Row("overhead", name, "p90", measure.latency_stats(samples)["p90_ms"], "ms"),
                            Row("overhead", name, "path", path)], device=options.device)
    result.notes += targets.notes()
    return result
