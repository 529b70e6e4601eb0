"""Is the harness fast enough that latency differences are the encoding's, not ours? Measured here.

Parts (``python -m posbench bench --parts …``), all on the setting of issue 6 unless said:

``paths``     one attention call (ALiBi bias, causal, 8 heads, d_head 32) on each mask path, plus
              FlexAttention with a ``score_mod`` when asked (``--flex``: ``torch.compile``).
``overhead``  P1: forward latency of each encoding / ``none`` (causal decoder, d = 256, 4 layers,
              8 heads, L = 1024, batch 1, fp32, inference mode).
``peer``      P2: posbench / x-transformers at the same configuration and parameter count.
``limit``     P3: this machine's fp32 matmul rate and the model's achieved FLOP/s (d = 512, the
              ``medium`` size, L = 1024, batch 8, ``none``), FLOPs from :func:`posbench.flops.analytic_flops`.
``scale``     P6: the longest power-of-two length up to 32k each encoding reaches at batch 1,
              d = 256, with peak memory and latency; each point in its own process, so an
              out-of-memory kill cannot end the bench.
``decode``    P7: per-token generation latency with a KV cache (one token against a cache of C tokens,
              C = 1024 and 4096) of each encoding / ``none``'s, same model as P1.
``decode_peer`` P7 peer: posbench's ``generate`` / Hugging Face transformers' ``generate`` per generated token
              (prefill excluded) for ``learned`` (GPT-2) and ``rope`` (Llama), same size, randomly initialised.
``train``     P8: training throughput of the default sweep's tasks at the ``tiny`` size: steps exactly as
              :func:`posbench.train.fit` runs them (one thread, deterministic kernels, as the train jobs),
              their achieved FLOP/s (:func:`posbench.flops.analytic_flops`, ``mode="train"``) against
              one thread's 1024³ fp32 matmul in the same rounds, and a ``torch.profiler`` breakdown of
              where a step's time goes.

Contenders of a part are timed in alternation, round by round (the order rotating), so a load
change on a shared machine hits all of them; each reports the median and the ratio of medians.
A contender that misses its target is profiled (``torch.profiler``) and the table saved beside
the results, so the note can say what limits it, measured.
"""

from __future__ import annotations

import csv
import json
import os
import platform
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch.profiler import record_function

from posbench import attention, encodings, measure, train
from posbench.devices import CPU
from posbench.flops import analytic_flops
from posbench.measure import alternate
from posbench.model import ModelConfig, build_model, count_params
from posbench.positions import Positions
from posbench.profile import decode_step
from posbench.records import cpu_model
from posbench.tasks.base import IGNORE

PARTS = ("paths", "overhead", "peer", "limit", "scale", "decode", "decode_peer", "train")
OVERHEAD_TARGETS = {  # forward latency / NoPE's: the rotary family within 5 %, logit biases 25 %, FIRE's MLP 2×
    "none": None, "sinusoidal": 1.05, "learned": 1.05, "rope": 1.05, "rope_p50": 1.05, "xpos": 1.05, "mrope": 1.05,
    "alibi": 1.25, "t5": 1.25, "kerple": 1.25, "fire": 2.0}
DECODE_TARGETS = {name: (None if name == "none" else 2.0 if name == "fire" else 1.10) for name in OVERHEAD_TARGETS}
DECODE_CONTEXTS = (1024, 4096)
DECODE_PEER_TARGET = 1.0  # posbench's per-token latency / transformers'
PEER_TARGETS = {"none": 1.0, "learned": 1.0, "rope": 1.0, "alibi": 0.5, "t5": 0.5}
LIMIT_TARGET = 0.5
SCALE_TARGET = 32768
BASE = dict(d_model=256, n_layers=4, n_heads=8)  # the P1, P2 and P6 model (= SIZES["base"])
SEQ_LEN = 1024
MATMUL_SIZE = 2048  # square fp32 matmul for the machine's rate: 2·n³ FLOPs
TRAIN_TASKS = ("lm_prose", "passkey")  # config.yaml train.tasks
TRAIN_ENCODINGS = tuple(n for n in encodings.names() if encodings.traits(n).axes != "2d")  # every task takes these
TRAIN_MATMUL_SIZE = 1024  # P8's peak: one thread's 1024³ fp32 matmul
TRAIN_TARGET = 40.0  # P8: % of the matmul rate a tiny model's training step achieves


@dataclass(frozen=True)
class BenchOptions:
    parts: tuple[str, ...] = PARTS
    rounds: int = 30  # timed rounds of alternation (P1, P2, paths)
    warmup: int = 3
    limit_rounds: int = 5  # P3 rounds: one model forward and one matmul each
    limit_batch: int = 8
    scale_lengths: tuple[int, ...] = tuple(2**p for p in range(10, 16))  # 1k … 32k
    scale_point_seconds: float = 3.0  # extra timed forwards per P6 point while under this
    scale_budget_seconds: float = 150.0  # don't try a length whose forward is estimated longer
    threads: int = 2
    flex: bool = False
    decode_contexts: tuple[int, ...] = DECODE_CONTEXTS
    decode_new_tokens: int = 32  # P7 peer: tokens each generate call produces after the prompt
    train_tasks: tuple[str, ...] = TRAIN_TASKS
    train_encodings: tuple[str, ...] = ("sinusoidal",)
    train_steps: int = 30  # P8 timed rounds: one training step of each task and one matmul each
    train_warmup: int = 3
    train_profile_steps: int = 5  # P8 steps per task under torch.profiler, after the timed ones


@dataclass
class Row:
    """One measured figure; ``target`` is a comparison like ``<= 1.05`` and ``meets`` its verdict."""

    part: str
    item: str
    metric: str
    value: object
    unit: str = ""
    target: str = ""
    meets: bool | None = None


@dataclass
class PartResult:
    title: str
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    samples: dict[str, list[float]] = field(default_factory=dict)


# ----- timing ------------------------------------------------------------------------------------
def median(samples: list[float]) -> float:
    return measure.latency_stats(samples)["median_ms"]


def paired_ratio(numerator: list[float], denominator: list[float]) -> float:
    """Median over rounds of the per-round ratio: the pair saw the same load."""
    return median([a / b for a, b in zip(numerator, denominator)])


def verdict(value: float, target: float | None, at_most: bool) -> tuple[str, bool | None]:
    if target is None:
        return "", None
    return (f"<= {target:g}", value <= target) if at_most else (f">= {target:g}", value >= target)


def profile_table(step: Callable[[], object], rows: int = 12) -> str:
    """Self CPU time per operator over one call of ``step``: what limits it, measured."""
    with torch.inference_mode(), torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        step()
    return prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows)


# ----- models --------------------------------------------------------------------------------------
def posbench_model(encoding: str, seq_len: int = SEQ_LEN) -> torch.nn.Module:
    torch.manual_seed(0)
    cfg = ModelConfig(**BASE, max_len=seq_len, encoding=encoding, causal=True)
    return build_model(cfg).eval()


def forward_step(model: torch.nn.Module, batch: int, seq_len: int) -> Callable[[], object]:
    tokens = torch.randint(0, 256, (batch, seq_len))
    return lambda: model(tokens)


def matmul_step(size: int) -> tuple[Callable[[], object], int]:
    """A square fp32 matmul of ``size`` (what the machine's rate is measured with) and its FLOPs, 2·n³."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    return lambda: a @ b, 2 * size**3


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


LLAMA_INTERMEDIATE = round(8 * BASE["d_model"] / 3)  # SwiGLU's three d×683 matrices ≈ posbench's two d×4d
DECODE_PEERS = {"learned": "GPT-2", "rope": "Llama"}  # posbench encoding -> the transformers model with its positions


def transformers_model(encoding: str, max_len: int) -> torch.nn.Module:
    """The P7 peer at posbench's base configuration (width, layers, heads, vocabulary 256, ``max_len``
    positions), randomly initialised from its config (nothing downloaded), output head untied as
    posbench's, SDPA attention, no dropout. ``learned``: GPT-2 (a learned position table; exact GELU,
    d_ff = 4d; its projections carry biases, posbench's do not). ``rope``: Llama (RoPE over the whole
    head, base 10 000; RMSNorm without bias; SwiGLU of :data:`LLAMA_INTERMEDIATE`, about 4d's two
    matrices in three)."""
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    d, layers, heads = BASE["d_model"], BASE["n_layers"], BASE["n_heads"]
    tokens = dict(vocab_size=256, tie_word_embeddings=False, bos_token_id=None, eos_token_id=None, pad_token_id=None,
                  attn_implementation="sdpa")
    torch.manual_seed(0)
    if encoding == "learned":
        config = GPT2Config(n_embd=d, n_layer=layers, n_head=heads, n_inner=4 * d, n_positions=max_len,
                            activation_function="gelu", resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, **tokens)
        return GPT2LMHeadModel(config).eval()
    if encoding == "rope":
        config = LlamaConfig(hidden_size=d, num_hidden_layers=layers, num_attention_heads=heads,
                             num_key_value_heads=heads, intermediate_size=LLAMA_INTERMEDIATE,
                             max_position_embeddings=max_len, rope_theta=10_000.0, attention_bias=False,
                             mlp_bias=False, **tokens)
        return LlamaForCausalLM(config).eval()
    raise ValueError(f"no transformers peer for {encoding!r}; allowed: {', '.join(DECODE_PEERS)}")


def generation_step(model: torch.nn.Module, generate: Callable[[torch.Tensor], torch.Tensor], prompt: torch.Tensor,
                    new_tokens: int) -> Callable[[], float]:
    """One ``generate(prompt)`` call per step, returning its per-token decode milliseconds: from the end
    of the first forward (the prefill, which also gives the first token) to the end of the last, over
    the ``new_tokens - 1`` forwards between — the loop's whole cost per token (forward, cache update,
    choosing the token) without the prefill. Checks that it ran exactly ``new_tokens`` forwards and
    made ``new_tokens`` tokens (no early stop)."""
    if new_tokens < 2:
        raise ValueError(f"new_tokens must be at least 2 (one after the prefill's), got {new_tokens}")
    stamps: list[float] = []
    model.register_forward_hook(lambda *_: stamps.append(time.perf_counter()))

    def step() -> float:
        stamps.clear()
        tokens = generate(prompt)
        if len(stamps) != new_tokens or tokens.shape[1] != prompt.shape[1] + new_tokens:
            raise RuntimeError(f"generate ran {len(stamps)} forwards for {tokens.shape[1] - prompt.shape[1]} "
                               f"tokens; expected {new_tokens} of each")
        return (stamps[-1] - stamps[0]) * 1e3 / (new_tokens - 1)

    return step


def transformers_generate(model: torch.nn.Module, new_tokens: int) -> Callable[[torch.Tensor], torch.Tensor]:
    """transformers' ``generate`` as a user calls it: greedy, its default cache, exactly ``new_tokens``."""
    from transformers import GenerationConfig

    config = GenerationConfig(max_new_tokens=new_tokens, do_sample=False, num_beams=1, use_cache=True,
                              eos_token_id=None, pad_token_id=None)  # no end-of-sequence token: never stops early
    return lambda prompt: model.generate(prompt, attention_mask=torch.ones_like(prompt), generation_config=config)


# ----- parts ---------------------------------------------------------------------------------------
PATH_BLOCK_SIZES = (64, 128, 256, 512, SEQ_LEN)


def part_paths(options: BenchOptions, out: Path) -> PartResult:
    """One attention call on each path and block size, the same q, k, v and ALiBi bias."""
    d_head = BASE["d_model"] // BASE["n_heads"]
    result = PartResult(f"paths: one attention call, ALiBi, causal, B=1, h={BASE['n_heads']}, L={SEQ_LEN}, "
                        f"d_head={d_head}, fp32 (blocks of b queries; b={SEQ_LEN}: one call over all keys)")
    encoding = posbench_model("alibi").encoding
    q, k, v = (torch.randn(1, BASE["n_heads"], SEQ_LEN, d_head) for _ in range(3))
    steps = {"is_causal (no bias)": lambda: attention.attend(q, k, v, None, True)}
    variants = [(path, attention.SETTINGS.block_size) for path in attention.MASK_PATHS]
    variants += [("general_dense", SEQ_LEN)] + [("relative", b) for b in PATH_BLOCK_SIZES
                                                if b != attention.SETTINGS.block_size]
    positions = Positions.arange(SEQ_LEN)
    for path, block_size in variants:
        with attention.configured(force_path=path, block_size=block_size):
            mask = attention.build_mask(encoding, positions, positions, True)
        steps[f"{path}, b={block_size}"] = lambda mask=mask: attention.attend(q, k, v, mask, True)
    if options.flex:
        compile_s, steps["flex (compiled)"] = flex_step(encoding, q, k, v)
        result.notes.append(f"FlexAttention compiled in {compile_s:.1f} s (not in the median)")
    result.samples = alternate(steps, options.rounds, options.warmup)
    reference = median(result.samples["is_causal (no bias)"])
    for name, samples in result.samples.items():
        result.rows += [Row("paths", name, "median", median(samples), "ms"),
                        Row("paths", name, "vs is_causal", median(samples) / reference, "x")]
    result.notes.append(f"the model's path for ALiBi/T5: {attention.choose_path(encoding, SEQ_LEN, SEQ_LEN, True)}, "
                        f"b={attention.SETTINGS.block_size}")
    return result


def flex_step(encoding, q, k, v) -> tuple[float, Callable[[], object]]:
    """FlexAttention with ALiBi as a ``score_mod`` and a causal block mask, compiled (seconds, step)."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    slopes = encoding.slopes

    def alibi(score, batch, head, query, key):
        return score - slopes[head] * (query - key).abs()

    began = time.perf_counter()
    block_mask = create_block_mask(lambda b, h, query, key: query >= key, None, None, q.shape[-2], k.shape[-2],
                                   device=str(q.device))
    compiled = torch.compile(flex_attention)

    def step():
        return compiled(q, k, v, score_mod=alibi, block_mask=block_mask)

    with torch.inference_mode():
        step()
    return time.perf_counter() - began, step


def part_overhead(options: BenchOptions, out: Path) -> PartResult:
    result = PartResult(f"P1 overhead: forward latency / none (causal, d={BASE['d_model']}, "
                        f"{BASE['n_layers']} layers, {BASE['n_heads']} heads, L={SEQ_LEN}, batch 1, fp32)")
    models = {name: posbench_model(name) for name in OVERHEAD_TARGETS}
    steps = {name: forward_step(model, 1, SEQ_LEN) for name, model in models.items()}
    result.samples = alternate(steps, options.rounds, options.warmup)
    for name, samples in result.samples.items():
        path = attention.choose_path(models[name].encoding, SEQ_LEN, SEQ_LEN, True)
        against_none(out, result, ("overhead", name), result.samples, steps, name, OVERHEAD_TARGETS[name],
                     extra=[Row("overhead", name, "p90", measure.latency_stats(samples)["p90_ms"], "ms"),
                            Row("overhead", name, "path", path)])
    return result


def against_none(out: Path, result: PartResult, where: tuple[str, str], samples: dict[str, list[float]],
                 steps: dict[str, Callable[[], object]], name: str, target_value: float | None,
                 extra: list[Row] = ()) -> None:
    """Rows of contender ``name`` against ``none``, timed in the same rounds: its median (then ``extra``),
    the paired ratio and the ratio of medians, judged against ``target_value``; a miss is profiled
    beside ``none``. ``where`` is the rows' (part, item)."""
    part, item = where
    timed, none = samples[name], samples["none"]
    ratio = median(timed) / median(none)
    target, meets = verdict(ratio, target_value, at_most=True)
    result.rows += [Row(part, item, "median", median(timed), "ms"), *extra,
                    Row(part, item, "paired ratio", paired_ratio(timed, none), "x"),
                    Row(part, item, "ratio", ratio, "x", target, meets)]
    if meets is False:
        label = f"{part}_{name}" + (f"_{item.rsplit('=', 1)[1]}" if "=" in item else "")
        save_profile(out, result, label, {name: steps[name], "none": steps["none"]})


def part_peer(options: BenchOptions, out: Path) -> PartResult:
    result = PartResult("P2 peer: posbench / x-transformers, same configuration (ratio of forward latencies)")
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
        ratio = median(ours) / median(theirs)
        target, meets = verdict(ratio, target_value, at_most=True)
        result.rows += [Row("peer", name, "posbench", median(ours), "ms"),
                        Row("peer", name, "x-transformers", median(theirs), "ms"),
                        Row("peer", name, "params diff",
                            100 * (params[name][1] - params[name][0]) / params[name][0], "%"),
                        Row("peer", name, "paired ratio", paired_ratio(ours, theirs), "x"),
                        Row("peer", name, "ratio", ratio, "x", target, meets)]
        if meets is False:
            save_profile(out, result, f"peer_{name}", {key: steps[f"{name}/{key}"]
                                                        for key in ("posbench", "x-transformers")})
    result.notes.append(f"x-transformers runs {', '.join(sorted(X_TRANSFORMERS_NO_FLASH))} without its SDPA "
                        f"path (it refuses attn_flash with T5 relative bias)")
    return result


def part_limit(options: BenchOptions, out: Path) -> PartResult:
    cfg = ModelConfig.from_size("medium", max_len=SEQ_LEN, encoding="none", causal=True)
    batch = options.limit_batch
    result = PartResult(f"P3 limit: fp32 matmul rate vs the model's achieved FLOP/s (d={cfg.d_model}, "
                        f"{cfg.n_layers} layers, {cfg.n_heads} heads, L={SEQ_LEN}, batch {batch}, none)")
    torch.manual_seed(0)
    model = build_model(cfg).eval()
    matmul, matmul_flops = matmul_step(MATMUL_SIZE)
    steps = {"matmul": matmul, "model": forward_step(model, batch, SEQ_LEN)}
    result.samples = alternate(steps, options.limit_rounds, warmup=1)
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
        save_profile(out, result, "limit_model", {"model": steps["model"]})
    return result


def part_scale(options: BenchOptions, out: Path) -> PartResult:
    result = PartResult(f"P6 scale: longest L (powers of two to {max(options.scale_lengths)}) at batch 1, "
                        f"d={BASE['d_model']}, {BASE['n_layers']} layers, one process per point")
    for name in OVERHEAD_TARGETS:
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
    return result


def scale_point(payload: dict, sections: dict) -> None:
    """The isolated P6 measurement (run by :func:`posbench.measure.run_isolated`): one memory pass
    (also the first, untimed-for-the-median warm call), then timed forwards while under the budget;
    when even one forward exceeds it, the memory pass's own time is the latency (``latency_n`` 0)."""
    torch.set_num_threads(payload["threads"])
    seq_len = payload["seq_len"]
    model = posbench_model(payload["encoding"], seq_len=seq_len)
    step = forward_step(model, 1, seq_len)
    sections["path"] = attention.choose_path(model.encoding, seq_len, seq_len, True)
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


def part_decode(options: BenchOptions, out: Path) -> PartResult:
    """P7: one generated token against a KV cache of C tokens, each encoding against NoPE, alternated."""
    result = PartResult(f"P7 decode: per-token latency with a KV cache / none (d={BASE['d_model']}, "
                        f"{BASE['n_layers']} layers, {BASE['n_heads']} heads, batch 1, fp32, "
                        f"{torch.get_num_threads()} threads, "
                        f"contexts {', '.join(map(str, options.decode_contexts))})")
    for context in options.decode_contexts:
        models = {name: posbench_model(name, context + 1) for name in DECODE_TARGETS}
        prompt = torch.randint(0, 256, (1, context), generator=torch.Generator().manual_seed(0))
        steps = {name: decode_step(model, prompt) for name, model in models.items()}
        samples = alternate(steps, options.rounds, options.warmup)
        result.samples.update({f"{name}@{context}": s for name, s in samples.items()})
        for name in samples:
            against_none(out, result, ("decode", f"{name} C={context}"), samples, steps, name, DECODE_TARGETS[name])
    return result


def part_decode_peer(options: BenchOptions, out: Path) -> PartResult:
    """P7 peer: per generated token inside each library's ``generate`` after a prompt of C tokens,
    posbench / transformers for GPT-2 (``learned``) and Llama (``rope``), the four alternated."""
    new_tokens = options.decode_new_tokens
    result = PartResult(f"P7 peer: per-token latency in generate, posbench / transformers (greedy, batch 1, fp32, "
                        f"{torch.get_num_threads()} threads, {new_tokens} new tokens after a prompt of C, "
                        f"prefill excluded; d={BASE['d_model']}, {BASE['n_layers']} layers, {BASE['n_heads']} heads, "
                        f"vocabulary 256)")
    try:
        result.title += f", transformers {version('transformers')}"
    except PackageNotFoundError:
        result.notes.append("skipped: transformers is not installed (pip install 'posbench[bench]')")
        return result
    from posbench.model import generate

    for context in options.decode_contexts:
        prompt = torch.randint(0, 256, (1, context), generator=torch.Generator().manual_seed(0))
        steps, params, caches = {}, {}, {}
        for name in DECODE_PEERS:
            ours, theirs = posbench_model(name, context + new_tokens), transformers_model(name, context + new_tokens)
            steps[f"{name}/posbench"] = generation_step(ours, lambda p, m=ours: generate(m, p, new_tokens),
                                                        prompt, new_tokens)
            steps[f"{name}/transformers"] = generation_step(theirs, transformers_generate(theirs, new_tokens),
                                                            prompt, new_tokens)
            params[name] = (count_params(ours)["total"], sum(p.numel() for p in theirs.parameters()))
            caches[name] = default_cache(theirs)
        samples = alternate(steps, options.rounds, options.warmup, self_timed=True)
        result.samples.update({f"{key}@{context}": s for key, s in samples.items()})
        for name, peer in DECODE_PEERS.items():
            ours, theirs = samples[f"{name}/posbench"], samples[f"{name}/transformers"]
            ratio = median(ours) / median(theirs)
            target, meets = verdict(ratio, DECODE_PEER_TARGET, at_most=True)
            item = f"{name} vs {peer} C={context}"
            result.rows += [Row("decode_peer", item, "posbench", median(ours), "ms"),
                            Row("decode_peer", item, "transformers", median(theirs), "ms"),
                            Row("decode_peer", item, "params", params[name][0]),
                            Row("decode_peer", item, "params diff",
                                100 * (params[name][1] - params[name][0]) / params[name][0], "%"),
                            Row("decode_peer", item, "paired ratio", paired_ratio(ours, theirs), "x"),
                            Row("decode_peer", item, "ratio", ratio, "x", target, meets)]
            if meets is False:
                save_profile(out, result, f"decode_peer_{name}_{context}",
                             {key: steps[f"{name}/{key}"] for key in ("posbench", "transformers")})
    result.notes += [
        f"ms: per generated token, the median over {options.rounds} rounds (after {options.warmup} warm-up) of "
        f"(end of the last forward - end of the first) / {new_tokens - 1} inside one generate call; each round calls "
        "the four contenders once, the order rotating; paired ratio: the median of each round's ratio",
        f"transformers: randomly initialised from GPT2Config / LlamaConfig (no download), generate with "
        f"do_sample=False, use_cache=True, its default cache ({', '.join(sorted(set(caches.values())))}), no "
        "end-of-sequence token; SDPA attention in both libraries; untied output heads in both",
        f"params diff (transformers - posbench): GPT-2's projections carry biases (9·d per layer); Llama has "
        f"SwiGLU of 3·d·{LLAMA_INTERMEDIATE} per layer for posbench's 2·d·4d GELU MLP and RMSNorm without "
        "bias; the position tables (learned) are equal",
    ]
    return result


def default_cache(model: torch.nn.Module) -> str:
    """The cache class transformers' ``generate`` uses by default for ``model`` (read from one call)."""
    prompt = torch.ones(1, 2, dtype=torch.long)
    with torch.inference_mode():
        out = model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=1, do_sample=False,
                             return_dict_in_generate=True)
    cache = out.cache if "cache" in out else out.past_key_values  # renamed in transformers 5
    return type(cache).__name__


class TrainSteps:
    """The body of :func:`posbench.train.fit`'s loop, one step per call: the job's batch stream, the
    loss, gradient clipping, AdamW and its schedule, from :func:`posbench.train.initial_model` (the
    tests check the losses equal ``fit``'s bit for bit). Its phases are ``torch.profiler`` ranges
    (:data:`PHASES`); each call's batch length is kept for its FLOPs."""

    def __init__(self, job: train.Job):
        config = job.config
        self.job, self.model = job, train.initial_model(job)
        self.optimizer, self.schedule = train.make_optimizer(self.model, job.lr, config.weight_decay, job.steps,
                                                             config.warmup_fraction)
        self.rng = np.random.default_rng(config.seed)
        self.losses: list[float] = []
        self.lengths: list[int] = []

    def __call__(self) -> None:
        job = self.job
        with record_function("step"):
            with record_function("data"):
                batch = job.task.train_batch(self.rng, job.batch_size)
            with record_function("forward"):
                logits, targets = train.scored_logits(self.model, batch, job.config.dtype)
                loss = F.cross_entropy(logits, targets, ignore_index=IGNORE)
                if not torch.isfinite(loss):
                    raise RuntimeError(f"{job.task.name}: non-finite loss at step {len(self.losses) + 1}")
            with record_function("optimizer"):
                self.optimizer.zero_grad(set_to_none=True)
            with record_function("backward"):
                loss.backward()
            with record_function("optimizer"):
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), job.config.grad_clip)
                self.optimizer.step()
                self.schedule.step()
            self.losses.append(loss.item())
            self.lengths.append(batch.inputs.shape[1])

    def flops(self, length: int) -> int:
        """Analytic FLOPs of one training step on a batch of ``length`` positions (forward + backward)."""
        return sum(analytic_flops(self.model, self.job.batch_size, length, "train").values())


PHASES = ("step", "data", "forward", "optimizer", "backward")  # TrainSteps' profiler ranges
BREAKDOWN = ("matmul", "attention", "other ops", "python", "optimizer", "data")
MATMUL_OPS = re.compile(r"^aten::(mm|addmm|bmm|linear|matmul)$|\b(Mm|Addmm|Bmm)Backward")
ATTENTION_OPS = re.compile(r"scaled_dot_product|ScaledDotProduct")


def category(event) -> str:
    """Where a profiler event's self time goes (:data:`BREAKDOWN`), from it and its callers: inside the
    ``data`` or ``optimizer`` range; else inside an SDPA call or its backward; else inside a matmul or
    its backward; else a ``TrainSteps`` range's own time (Python between ops); else any other op."""
    names = []
    while event is not None:
        names.append(event.name)
        event = event.cpu_parent
    for label in ("data", "optimizer"):
        if label in names:
            return label
    if any(ATTENTION_OPS.search(name) for name in names):
        return "attention"
    if any(MATMUL_OPS.search(name) for name in names):
        return "matmul"
    return "python" if names[0] in PHASES else "other ops"


def breakdown(step: Callable[[], object], steps: int) -> dict[str, float]:
    """Percent of ``steps`` calls' time per :data:`BREAKDOWN` category (self CPU time, one thread: the
    self times of a step's events add up to the step's time)."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step()
    spent = dict.fromkeys(BREAKDOWN, 0.0)
    for event in prof.events():
        spent[category(event)] += event.self_cpu_time_total
    total = sum(spent.values())
    return {name: 100 * value / total for name, value in spent.items()}


def part_train(options: BenchOptions, out: Path) -> PartResult:
    """P8: training steps of every task, each encoding, alternated with one thread's matmul."""
    result = PartResult(f"P8 train: steps as posbench.train.fit runs them (tiny, fp32, 1 thread, deterministic), "
                        f"achieved FLOP/s vs one thread's {TRAIN_MATMUL_SIZE}³ matmul, where the time goes")
    jobs = {f"{task}/{encoding}": train.resolve(train.TrainConfig(task=task, encoding=encoding))
            for task in options.train_tasks for encoding in options.train_encodings}
    with train.deterministic(threads=1):
        stepper = {name: TrainSteps(job) for name, job in jobs.items()}
        matmul, matmul_flops = matmul_step(TRAIN_MATMUL_SIZE)
        result.samples = alternate({"matmul": matmul, **stepper}, options.train_steps, options.train_warmup,
                                   grad=True)
        shares = {name: breakdown(steps, options.train_profile_steps) for name, steps in stepper.items()}
    matmul_rate = matmul_flops / median(result.samples["matmul"]) * 1e3  # FLOP/s
    for name, steps in stepper.items():
        samples = result.samples[name]
        lengths = steps.lengths[options.train_warmup:][:len(samples)]  # the timed steps'
        flops = [steps.flops(length) for length in lengths]
        rates = [f / ms * 1e3 for f, ms in zip(flops, samples)]  # per step: lengths may differ
        rate, share = median(rates), 100 * median(rates) / matmul_rate
        paired = 100 * median([r * ms / matmul_flops / 1e3 for r, ms in zip(rates, result.samples["matmul"])])
        target, meets = verdict(share, TRAIN_TARGET, at_most=False)
        shape = f"{jobs[name].batch_size}×{min(lengths)}" + (f"–{max(lengths)}" if max(lengths) > min(lengths) else "")
        result.rows += [Row("train", name, "B×L", shape),
                        Row("train", name, "GFLOP/step", sum(flops) / len(flops) / 1e9, "GFLOP"),
                        Row("train", name, "median", median(samples), "ms"),
                        Row("train", name, "GFLOP/s", rate / 1e9, "GFLOP/s"),
                        *(Row("train", name, category_name, value, "%")
                          for category_name, value in shares[name].items()),
                        Row("train", name, "paired", paired, "%"),
                        Row("train", name, "of matmul", share, "%", target, meets)]
    result.rows.append(Row("train", f"matmul {TRAIN_MATMUL_SIZE}³, 1 thread", "GFLOP/s", matmul_rate / 1e9, "GFLOP/s"))
    result.notes += [
        "FLOPs: posbench.flops.analytic_flops(mode='train'): forward + backward matmuls (2·m·n·k; backward 2×), "
        "all L×L logits even when causal, the encoding's and the residuals' adds; not the optimizer, softmax, "
        "norms, GELU or the loss. GFLOP/s: the median over timed steps of each step's FLOPs / its time; "
        "of matmul: that / the matmul's median rate; paired: the median over rounds of the step's rate / the "
        "same round's matmul rate",
        f"{options.train_steps} timed rounds after {options.train_warmup} warm-up; each round one step of every "
        f"task and one matmul, the order rotating",
        f"breakdown (% of a step, torch.profiler self CPU time over {options.train_profile_steps} steps): matmul = "
        "mm/addmm/bmm/linear and their backward; attention = SDPA and its backward; other ops = elementwise, "
        "norms, GELU, loss, embedding, copies; python = between ops in fit's loop and modules; optimizer = "
        "zero_grad, clipping, AdamW, schedule; data = the task's train_batch",
    ]
    return result


PART_FUNCTIONS = {"paths": part_paths, "overhead": part_overhead, "peer": part_peer,
                  "limit": part_limit, "scale": part_scale, "decode": part_decode,
                  "decode_peer": part_decode_peer, "train": part_train}


# ----- output --------------------------------------------------------------------------------------
def save_profile(out: Path, result: PartResult, name: str, steps: dict[str, Callable[[], object]]) -> None:
    """Profile one call of each step (the contender, and what it is compared with) into one file."""
    path = out / f"profile_{name}.txt"
    path.write_text("\n\n".join(f"{label}:\n{profile_table(step)}" for label, step in steps.items()))
    result.notes.append(f"missed its target: profile in {path}")


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


def environment() -> dict:
    return {"torch": torch.__version__, "threads": torch.get_num_threads(), "cpu": cpu_model(),
            "machine": platform.machine(), "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "load_average": os.getloadavg(), "time": time.strftime("%Y-%m-%d %H:%M:%S %z")}


def run_bench(options: BenchOptions, out: Path) -> list[PartResult]:
    """Run the chosen parts, writing ``bench.csv``, ``bench.txt`` and ``samples.json`` to ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(options.threads)
    start = environment()
    results = []
    for part in options.parts:
        results.append(PART_FUNCTIONS[part](options, out))
        print(text_table(results[-1]) + "\n", flush=True)
    end = environment()
    with (out / "bench.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(Row.__dataclass_fields__))
        writer.writeheader()
        writer.writerows(asdict(row) for result in results for row in result.rows)
    header = (f"posbench bench — {start['cpu']} ({start['cpu_capability']}), torch {start['torch']}, "
              f"{start['threads']} threads; load average {_load(start)} at start, {_load(end)} at end "
              f"({start['time']} → {end['time']})")
    (out / "bench.txt").write_text("\n\n".join([header, *map(text_table, results)]) + "\n")
    (out / "samples.json").write_text(json.dumps(
        {"options": asdict(options), "environment": {"start": start, "end": end},
         "samples_ms": {result.title: result.samples for result in results}}, indent=1))
    return results


def _load(env: dict) -> str:
    return " ".join(f"{x:.2f}" for x in env["load_average"])
