"""The ``train`` part: training throughput of the default sweep's tasks at the chosen sizes (``tiny``
unless asked). Each step is :meth:`posbench.train.Trainer.step`, the one :func:`posbench.train.fit` takes
(one thread, deterministic kernels, as the train jobs); its achieved FLOP/s
(:func:`posbench.flops.analytic_flops`, ``mode="train"``) is set against one thread's 1024³ fp32 matmul in
the same rounds, and a ``torch.profiler`` breakdown says where a step's time goes: the step a sweep's train
jobs take, timed. At several sizes of the ladder (:mod:`posbench.sizes`) it says what one seed's training
costs at each and what share of the machine's matmul rate a step reaches there, so that a budget over
sizes is planned from measured steps."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import torch

from posbench import encodings, train
from posbench.bench.base import BenchOptions, PartResult, Row, matmul_step, median, verdict
from posbench.flops import analytic_flops
from posbench.measure import alternate
from posbench.profiler import profiling
from posbench.sizes import non_embedding_params

TRAIN_ENCODINGS = tuple(n for n in encodings.names() if encodings.traits(n).axes != "2d")  # every task takes these
TRAIN_MATMUL_SIZE = 1024  # train's peak: one thread's 1024³ fp32 matmul
TRAIN_TARGET = 40.0  # train: % of the matmul rate a tiny model's training step achieves
TRAIN_TARGET_SIZE = "tiny"  # the size TRAIN_TARGET is set at: the other sizes are reported, not judged
BREAKDOWN = ("matmul", "attention", "other ops", "python", "optimizer", "data")
MATMUL_OPS = re.compile(r"^aten::(mm|addmm|bmm|linear|matmul)$|\b(Mm|Addmm|Bmm)Backward")
ATTENTION_OPS = re.compile(r"scaled_dot_product|ScaledDotProduct")


class TimedSteps:
    """A job's training steps (:meth:`posbench.train.Trainer.step` from :func:`posbench.train.initial_model`),
    one per call, keeping each step's loss and its batch's length (for its FLOPs)."""

    def __init__(self, job: train.Job):
        self.job = job
        self.trainer = train.Trainer(train.initial_model(job), job)
        self.losses: list[float] = []
        self.lengths: list[int] = []

    def __call__(self) -> None:
        loss, batch = self.trainer.step()
        self.losses.append(loss)
        self.lengths.append(batch.inputs.shape[1])

    def flops(self, length: int) -> int:
        """Analytic FLOPs of one training step on a batch of ``length`` positions (forward + backward)."""
        return sum(analytic_flops(self.trainer.model, self.job.batch_size, length, "train").values())


def category(event) -> str:
    """Where a profiler event's self time goes (:data:`BREAKDOWN`), from it and its callers: inside the
    ``data`` or ``optimizer`` range; else inside an SDPA call or its backward; else inside a matmul or
    its backward; else a :data:`posbench.train.STEP_RANGES` range's own time (Python between ops); else
    any other op."""
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
    return "python" if names[0] in train.STEP_RANGES else "other ops"


def breakdown(step: Callable[[], object], steps: int) -> dict[str, float]:
    """Percent of ``steps`` calls' time per :data:`BREAKDOWN` category (self CPU time, one thread: the
    self times of a step's events add up to the step's time)."""
    with profiling([torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step()
    spent = dict.fromkeys(BREAKDOWN, 0.0)
    for event in prof.events():
        spent[category(event)] += event.self_cpu_time_total
    total = sum(spent.values())
    return {name: 100 * value / total for name, value in spent.items()}


def run(options: BenchOptions, out: Path) -> PartResult:
    """Training steps of every task, each encoding, at each size (items ``task/encoding@size``), alternated
    with one thread's matmul."""
    result = PartResult(f"train: steps as posbench.train.fit runs them ({', '.join(options.train_sizes)}, fp32, "
                        f"1 thread, deterministic), achieved FLOP/s vs one thread's {TRAIN_MATMUL_SIZE}³ matmul, "
                        f"where the time goes")
    jobs = {f"{task}/{encoding}@{size}": train.resolve(train.TrainConfig(task=task, encoding=encoding, size=size))
            for task in options.train_tasks for encoding in options.train_encodings for size in options.train_sizes}
    with train.deterministic(threads=1):
        stepper = {name: TimedSteps(job) for name, job in jobs.items()}
        matmul, matmul_flops = matmul_step(TRAIN_MATMUL_SIZE)
        result.samples = alternate({"matmul": matmul, **stepper}, options.train_steps, options.train_warmup,
                                   grad=True)
        shares = {name: breakdown(steps, options.train_profile_steps) for name, steps in stepper.items()}
    matmul_rate = matmul_flops / median(result.samples["matmul"]) * 1e3  # FLOP/s
    for name, steps in stepper.items():
        job, samples = jobs[name], result.samples[name]
        lengths = steps.lengths[options.train_warmup:][:len(samples)]  # the timed steps'
        flops = [steps.flops(length) for length in lengths]
        rates = [f / ms * 1e3 for f, ms in zip(flops, samples)]  # per step: lengths may differ
        rate, share = median(rates), 100 * median(rates) / matmul_rate
        paired = 100 * median([r * ms / matmul_flops / 1e3 for r, ms in zip(rates, result.samples["matmul"])])
        judged = TRAIN_TARGET if job.config.size == TRAIN_TARGET_SIZE else None
        target, meets = verdict(share, judged, at_most=False)
        shape = f"{job.batch_size}×{min(lengths)}" + (f"–{max(lengths)}" if max(lengths) > min(lengths) else "")
        result.rows += [Row("train", name, "N", non_embedding_params(job.config.size), "params"),
                        Row("train", name, "B×L", shape),
                        Row("train", name, "GFLOP/step", sum(flops) / len(flops) / 1e9, "GFLOP"),
                        Row("train", name, "median", median(samples), "ms"),
                        Row("train", name, "s/seed", job.steps * median(samples) / 1e3, "s"),
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
        "N: the size's non-embedding parameters (posbench.sizes.non_embedding_params); s/seed: the task's steps "
        "× the median step, one seed's training loop at this size without its evaluations and validation curve; "
        f"of matmul is judged at {TRAIN_TARGET_SIZE}, the size its target is set at, and reported at the others",
        f"{options.train_steps} timed rounds after {options.train_warmup} warm-up; each round one step of every item "
        "and one matmul, the order rotating",
        f"breakdown (% of a step, torch.profiler self CPU time over {options.train_profile_steps} steps): matmul = "
        "mm/addmm/bmm/linear and their backward; attention = SDPA and its backward; other ops = elementwise, "
        "norms, GELU, loss, embedding, copies; python = between ops in fit's loop and modules; optimizer = "
        "zero_grad, clipping, AdamW, schedule; data = the task's train_batch",
    ]
    return result
