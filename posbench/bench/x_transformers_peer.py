"""The ``peer`` part: posbench's forward against x-transformers' at the same configuration (width,
depth, heads, feed-forward size, parameters within 1 %, its SDPA path wherever it allows it) for the
encodings both libraries have. A second implementation of the same model says whether posbench's own
cost is in line with a library people use."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import torch

from posbench.bench.base import (
    BASE,
    SEQ_LEN,
    BenchOptions,
    PartResult,
    Row,
    forward_step,
    median,
    posbench_model,
    ratio_rows,
    save_profile,
)
from posbench.measure import alternate
from posbench.model import count_params

PEER_TARGETS = {"none": 1.0, "learned": 1.0, "rope": 1.0, "alibi": 0.5, "t5": 0.5}  # posbench / x-transformers
X_TRANSFORMERS_OPTIONS = {  # encoding -> (wrapper options, attention-layer options)
    "none": ({"use_abs_pos_emb": False}, {}),
    "learned": ({"use_abs_pos_emb": True}, {}),
    "rope": ({"use_abs_pos_emb": False},
             {"rotary_pos_emb": True, "rotary_emb_dim": BASE["d_model"] // BASE["n_heads"]}),
    "alibi": ({"use_abs_pos_emb": False}, {"alibi_pos_bias": True}),
    "t5": ({"use_abs_pos_emb": False}, {"rel_pos_bias": True}),
}
X_TRANSFORMERS_NO_FLASH = {"t5"}  # x-transformers refuses its SDPA path with T5 relative bias


def x_transformers_model(encoding: str) -> torch.nn.Module:
    """The peer at posbench's configuration: no biases in projections or feed-forward, d_ff = 4d,
    head dim d/h, its SDPA path on wherever it allows it, rotary over the whole head dimension."""
    from x_transformers import Decoder, TransformerWrapper

    wrapper_options, layer_options = X_TRANSFORMERS_OPTIONS[encoding]
    torch.manual_seed(0)
    layers = Decoder(dim=BASE["d_model"], depth=BASE["n_layers"], heads=BASE["n_heads"],
                     attn_dim_head=BASE["d_model"] // BASE["n_heads"], ff_mult=4, ff_no_bias=True,
                     attn_flash=encoding not in X_TRANSFORMERS_NO_FLASH, **layer_options)
    return TransformerWrapper(num_tokens=256, max_seq_len=SEQ_LEN, attn_layers=layers, **wrapper_options).eval()


def run(options: BenchOptions, out: Path) -> PartResult:
    result = PartResult("peer: posbench / x-transformers, same configuration (ratio of forward latencies)")
    try:
        result.title += f", x-transformers {version('x-transformers')}"
    except PackageNotFoundError:
        result.notes.append("skipped: x-transformers is not installed (pip install 'posbench[bench]')")
        return result
    steps, params = {}, {}
    for name in PEER_TARGETS:
        ours, theirs = posbench_model(name), x_transformers_model(name)
        steps[f"{name}/posbench"] = forward_step(ours, 1, SEQ_LEN)
        steps[f"{name}/x-transformers"] = forward_step(theirs, 1, SEQ_LEN)
        params[name] = (count_params(ours)["total"], sum(p.numel() for p in theirs.parameters()))
    result.samples = alternate(steps, options.rounds, options.warmup)
    for name, target_value in PEER_TARGETS.items():
        ours, theirs = result.samples[f"{name}/posbench"], result.samples[f"{name}/x-transformers"]
        ratios = ratio_rows("peer", name, ours, theirs, target_value)
        result.rows += [Row("peer", name, "posbench", median(ours), "ms"),
                        Row("peer", name, "x-transformers", median(theirs), "ms"),
                        Row("peer", name, "params diff",
                            100 * (params[name][1] - params[name][0]) / params[name][0], "%"),
                        *ratios]
        if ratios[-1].meets is False:
            save_profile(out, result, f"peer_{name}", {key: steps[f"{name}/{key}"]
                                                        for key in ("posbench", "x-transformers")})
    result.notes.append(f"x-transformers runs {', '.join(sorted(X_TRANSFORMERS_NO_FLASH))} without its SDPA "
                        f"path (it refuses attn_flash with T5 relative bias)")
    return result
