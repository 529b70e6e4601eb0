"""The ``limit`` part: this machine's fp32 matmul rate and the FLOP/s a model forward achieves (the
``medium`` size, L = :data:`~posbench.bench.base.SEQ_LEN`, ``none``), FLOPs from
:func:`posbench.flops.analytic_flops`, measured in the same rounds. It says how far the harness is
from what the machine can do, so a latency can be read as the model's cost rather than ours."""

from __future__ import annotations

from pathlib import Path

import torch

from posbench.bench.base import (
    SEQ_LEN,
    BenchOptions,
    PartResult,
    Row,
    forward_step,
    matmul_step,
    median,
    save_profile,
    verdict,
)
from posbench.flops import analytic_flops
from posbench.measure import alternate
from posbench.model import ModelConfig, build_model

LIMIT_TARGET = 0.5  # the model forward's FLOP/s as a share of the matmul's
MATMUL_SIZE = 2048  # square fp32 matmul for the machine's rate: 2·n³ FLOPs


def run(options: BenchOptions, out: Path) -> PartResult:
    cfg = ModelConfig.from_size("medium", max_len=SEQ_LEN, encoding="none", causal=True)
    batch = options.limit_batch
    result = PartResult(f"limit: fp32 matmul rate vs the model's achieved FLOP/s (d={cfg.d_model}, "
                        f"{cfg.n_layers} layers, {cfg.n_heads} heads, L={SEQ_LEN}, batch {batch}, none, "
                        f"{options.device})")
    torch.manual_seed(0)
    model = build_model(cfg).eval().to(options.device)
    matmul, matmul_flops = matmul_step(MATMUL_SIZE, options.device)
    steps = {"matmul": matmul, "model": forward_step(model, batch, SEQ_LEN)}
    result.samples = alternate(steps, options.limit_rounds, warmup=1, device=torch.device(options.device))
    matmul_rate = matmul_flops / median(result.samples["matmul"]) * 1e3  # FLOP/s
    flops = sum(analytic_flops(cfg, batch, SEQ_LEN).values())
    executed = sum(analytic_flops(cfg, batch, SEQ_LEN, causal_half=True).values())
    model_s = median(result.samples["model"]) / 1e3
    share = flops / model_s / matmul_rate
    target, meets = verdict(share, LIMIT_TARGET, at_most=False)
    result.rows += [
        Row("limit", f"matmul {MATMUL_SIZE}x{MATMUL_SIZE}", "GFLOP/s", matmul_rate / 1e9, "GFLOP/s"),
        Row("limit", "model forward", "median", model_s * 1e3, "ms"),
        Row("limit", "model forward", "GFLOP", flops / 1e9, "GFLOP"),
        Row("limit", "model forward", "GFLOP/s", flops / model_s / 1e9, "GFLOP/s"),
        Row("limit", "model forward", "share", share, "of matmul", target, meets),
        Row("limit", "model forward, causal half", "GFLOP/s", executed / model_s / 1e9, "GFLOP/s"),
        Row("limit", "model forward, causal half", "share", executed / model_s / matmul_rate, "of matmul"),
    ]
    result.notes.append("FLOPs: posbench.flops.analytic_flops (2·m·n·k per matmul, all L×L logits even when "
                        "causal); 'causal half' counts the L(L+1)/2 logits a causal kernel computes")
    if meets is False:
        save_profile(out, result, "limit_model", {"model": steps["model"]}, options.device)
    return result
