"""The ``decode`` part: per-token generation latency with a KV cache (one token against a cache of
C tokens) of each timed encoding (:func:`posbench.bench.targets.timed`) against ``none``'s, on
:data:`~posbench.bench.base.BASE`. Generation is where a deployed model spends its time, and where a
bias against every cached key costs most.

The target holds from :data:`JUDGED_FROM` cached tokens on; at shorter contexts a step is so short that the
ratio is reported, not judged, beside each encoding's extra time per layer per step (its own work, which
the ratio divides by a step that shrinks with the context).

Each encoding is alternated with ``none`` alone, step for step, its own model and ``none``'s the only two
live: with every encoding's model in one rotation (24 models, 33 MB of cache each at 4,096 tokens) a step
found the caches in whatever state the step before it left, and encodings that add nothing to a decode step
(``learned``: one embedding row) measured slower than none. ``none``'s samples are kept per
pair (``none@C/<encoding>``); its row is the median of them all."""

from __future__ import annotations

from pathlib import Path

import torch

from posbench.bench import targets
from posbench.bench.base import BASE, BenchOptions, PartResult, Row, against_none, median, posbench_model
from posbench.measure import alternate
from posbench.profile import decode_step

JUDGED_FROM = 1024  # cached tokens from which decode's target holds


def run(options: BenchOptions, out: Path) -> PartResult:
    """One generated token against a KV cache of C tokens, each encoding against NoPE, alternated."""
    result = PartResult(f"decode: per-token latency with a KV cache / none (d={BASE['d_model']}, "
                        f"{BASE['n_layers']} layers, {BASE['n_heads']} heads, batch 1, fp32, {options.device}, "
                        f"{torch.get_num_threads()} threads, "
                        f"contexts {', '.join(map(str, options.decode_contexts))})")
    timed = targets.timed()
    for context in options.decode_contexts:
        prompt = torch.randint(0, 256, (1, context), generator=torch.Generator().manual_seed(0))  # (1, C)
        none, none_samples, first_row = step_after(prompt, "none", options.device), [], len(result.rows)
        for name in (n for n in timed if n != "none"):
            steps = {"none": none, name: step_after(prompt, name, options.device)}
            samples = alternate(steps, options.rounds, options.warmup, device=torch.device(options.device))
            result.samples.update({f"{name}@{context}": samples[name], f"none@{context}/{name}": samples["none"]})
            none_samples += samples["none"]
            item = f"{name} C={context}"
            extra = [Row("decode", item, "extra per layer", per_layer_us(samples[name], samples["none"]), "µs")]
            against_none(out, result, ("decode", item), samples, steps, name,
                         timed[name].decode if context >= JUDGED_FROM else None, extra, device=options.device)
        result.rows[first_row:first_row] = [Row("decode", f"none C={context}", "median", median(none_samples), "ms"),
                                            Row("decode", f"none C={context}", "ratio", 1.0, "x")]
    result.notes += targets.notes()
    return result


def step_after(prompt: torch.Tensor, encoding: str, device: str):
    """A decode step of the bench's model with ``encoding`` after ``prompt (1, C)`` prefilled on ``device``."""
    return decode_step(posbench_model(encoding, prompt.shape[1] + 1, device), prompt.to(device))


def per_layer_us(timed: list[float], none: list[float]) -> float:
    """The encoding's extra time per layer per step, µs: the medians' difference (ms) over the layers."""
    return (median(timed) - median(none)) * 1000 / BASE["n_layers"]
