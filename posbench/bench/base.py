"""What every part of the bench shares: its options, its rows, how samples become verdicts, and the
model most parts time (:data:`BASE` at :data:`SEQ_LEN`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from posbench import measure
from posbench.devices import CPU, TRAINING_DEVICES, on_cuda
from posbench.model import ModelConfig, build_model
from posbench.profiler import profiling
from posbench.records import write_atomically

BASE = dict(d_model=256, n_layers=4, n_heads=8)  # the overhead, peer, scale and decode model (= SIZES["base"])
SEQ_LEN = 1024
# The parts by name, in the order a run takes them; suite.PART_FUNCTIONS holds each one's function.
PARTS = ("paths", "overhead", "peer", "limit", "scale", "decode", "decode_peer", "train")
# ``--device``: cpu or cuda[:N], as training takes. On CUDA the parts that time posbench's own model and
# attention run (their models, inputs and caches placed on the device, timed with CUDA events, a
# synchronize closing every timed call: posbench.measure.make_timer); the others measure the host (scale's
# resident memory, train's training loop) or a peer library on the CPU.
BENCH_DEVICES = TRAINING_DEVICES
CUDA_PARTS = ("paths", "overhead", "limit", "decode")


@dataclass(frozen=True)
class BenchOptions:
    parts: tuple[str, ...] = PARTS
    device: str = CPU
    rounds: int = 30  # timed rounds of alternation (overhead, peer, paths)
    warmup: int = 3
    limit_rounds: int = 5  # limit's rounds: one model forward and one matmul each
    limit_batch: int = 8
    scale_lengths: tuple[int, ...] = tuple(2**p for p in range(10, 16))  # 1k … 32k
    scale_point_seconds: float = 3.0  # extra timed forwards per scale point while under this
    scale_budget_seconds: float = 150.0  # don't try a length whose forward is estimated longer
    threads: int = 2
    processes: int = 1  # fresh processes each part runs in, its figures their median (1: this process)
    flex: bool = False
    decode_contexts: tuple[int, ...] = (256, 1024, 4096)  # decode: tokens in the KV cache (judged from 1,024 on)
    decode_new_tokens: int = 32  # decode_peer: tokens each generate call produces after the prompt
    train_tasks: tuple[str, ...] = ("lm_prose", "passkey", "mosaic_qa")  # config.yaml train.tasks
    train_encodings: tuple[str, ...] = ("sinusoidal",)
    train_sizes: tuple[str, ...] = ("tiny",)  # posbench.sizes.SIZES: each task/encoding is timed at each
    train_steps: int = 30  # train's timed rounds: one training step of each task and one matmul each
    train_warmup: int = 3
    train_profile_steps: int = 5  # train's steps per task under torch.profiler, after the timed ones


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


def rejudged(target: str, value: float) -> bool | None:
    """The verdict of ``target`` (``<= 1.1``, ``>= 2``; blank: none) on another ``value``."""
    if not target:
        return None
    comparison, bound = target.split()
    return verdict(value, float(bound), at_most=comparison == "<=")[1]


def ratio_rows(part: str, item: str, ours: list[float], theirs: list[float], target_value: float | None) -> list[Row]:
    """The ratio of medians, shown, and the paired ratio, judged against ``target_value`` (at most): the
    two were timed round by round, so each round's pair saw the same load, and a drift of the machine's
    speed between rounds cancels in the paired ratio where it moves the medians apart."""
    paired = paired_ratio(ours, theirs)
    target, meets = verdict(paired, target_value, at_most=True)
    return [Row(part, item, "ratio", median(ours) / median(theirs), "x"),
            Row(part, item, "paired ratio", paired, "x", target, meets)]


def profile_table(step: Callable[[], object], device: str = CPU, rows: int = 12) -> str:
    """Self time per operator over one call of ``step`` (on CUDA the kernels' device time, the call
    synchronized before the profile closes): what limits it, measured."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    if on_cuda(device):
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.inference_mode(), profiling(activities) as prof:
        step()
        measure.synchronize(torch.device(device))
    sort_by = "self_device_time_total" if on_cuda(device) else "self_cpu_time_total"
    return prof.key_averages().table(sort_by=sort_by, row_limit=rows)


def save_profile(out: Path, result: PartResult, name: str, steps: dict[str, Callable[[], object]],
                 device: str = CPU) -> None:
    """Profile one call of each step (the contender, and what it is compared with) into one file."""
    path = out / f"profile_{name}.txt"
    text = "\n\n".join(f"{label}:\n{profile_table(step, device)}" for label, step in steps.items())
    write_atomically(path, lambda file: file.write(text.encode()))
    result.notes.append(f"missed its target: profile in {path}")


def against_none(out: Path, result: PartResult, where: tuple[str, str], samples: dict[str, list[float]],
                 steps: dict[str, Callable[[], object]], name: str, target_value: float | None,
                 extra: list[Row] = (), device: str = CPU) -> None:
    """Rows of contender ``name`` against ``none``, timed in the same rounds: its median (then ``extra``),
    the ratio of medians and the paired ratio, judged against ``target_value`` (:func:`ratio_rows`); a miss
    is profiled beside ``none``. ``where`` is the rows' (part, item)."""
    part, item = where
    timed, none = samples[name], samples["none"]
    ratios = ratio_rows(part, item, timed, none, target_value)
    result.rows += [Row(part, item, "median", median(timed), "ms"), *extra, *ratios]
    if ratios[-1].meets is False:
        label = f"{part}_{name}" + (f"_{item.rsplit('=', 1)[1]}" if "=" in item else "")
        save_profile(out, result, label, {name: steps[name], "none": steps["none"]}, device)


# ----- models and steps --------------------------------------------------------------------------
def posbench_model(encoding: str, seq_len: int = SEQ_LEN, device: str = CPU) -> torch.nn.Module:
    """The bench's model with ``encoding``, built (seed 0) on the CPU and placed on ``device``."""
    torch.manual_seed(0)
    cfg = ModelConfig(**BASE, max_len=seq_len, encoding=encoding, causal=True)
    return build_model(cfg).eval().to(device)


def forward_step(model: torch.nn.Module, batch: int, seq_len: int) -> Callable[[], object]:
    """A forward of fixed random tokens, drawn on the host and placed where the model is."""
    tokens = torch.randint(0, 256, (batch, seq_len)).to(next(model.parameters()).device)  # (B, L)
    return lambda: model(tokens)


def matmul_step(size: int, device: str = CPU) -> tuple[Callable[[], object], int]:
    """A square fp32 matmul of ``size`` on ``device`` (what the machine's rate is measured with) and its
    FLOPs, 2·n³."""
    a, b = (torch.randn(size, size).to(device) for _ in range(2))
    return lambda: a @ b, 2 * size**3
