"""Train one (task, encoding, size, seed) cell and evaluate it at the training length and beyond.

One loop (:func:`fit`) serves every task and every caller (this module's :func:`train`, the probe's
short language model), and its one step (:meth:`Trainer.step`) is the step ``posbench bench`` times
(its ``train`` part): a batch is ``inputs`` and ``targets`` (see :mod:`posbench.tasks.base`), the loss is
cross-entropy over the scored targets. AdamW with linear warm-up and cosine decay to
10 % of the peak, gradient clipping, weight decay on the linear layers' matrices only (so rows of a
learned position table that no training sequence reaches keep their initial values — the record
checks this). Seeds fix the initialisation and the training data; evaluation data is fixed per
length. On CPU with ``torch.use_deterministic_algorithms`` the same seed gives the same numbers; on
CUDA cuBLAS gets a fixed workspace and cuDNN no autotuning so that they can repeat too, on one GPU
model and software stack (not across them).

``device`` and ``dtype`` say where and in which precision a job runs (:mod:`posbench.devices`).
``bfloat16`` is mixed precision: the weights and AdamW's state stay float32 (the master copy), the
forward runs under ``torch.autocast`` to bfloat16, and the loss is taken in float32; evaluation runs
in the same regime. float16 is not offered: without loss scaling its gradients underflow. A device
this machine lacks gives a ``skipped`` record with the reason, as ``posbench profile`` does.

:func:`posbench.evaluation.evaluate` scores every evaluation sequence (an *item*) on its own as well as
the whole set, so that intervals can include the evaluation set's own sampling error; the metrics are
those of :mod:`posbench.metrics`, each test entry beside its chance level
(:meth:`posbench.tasks.Task.chance`). A causal character LM (``task.sliding_window``) is also scored at
every length on sliding windows (:func:`posbench.evaluation.evaluate_sliding`, stride a quarter of the
length, see :mod:`posbench.tasks.corpus`): the entry's ``sliding`` beside the non-overlapping headline;
its windows keep no items.

While it trains, :func:`fit` draws a held-out loss curve on a small fixed validation set (see
:func:`posbench.evaluation.validation_set`); the record keeps it, the final validation metrics at the
training length, and whether the loss was still falling at the end (:mod:`posbench.loss_trend`).
Validation, never test, is where budgets and learning rates are chosen. Evaluating reads no training
randomness: the curve's set is drawn before the loop from the task's own validation generator, and the
model is evaluated in eval mode (where randomized positions draw nothing), so a run's training steps
are the same with or without it.

:func:`train` returns a complete ``train`` record (see ``schemas/train.schema.json``) with its items
as :class:`posbench.records.Items`; a run that diverges returns one with ``status: diverged`` and the reason.
"""

from __future__ import annotations

import copy
import os
import sys
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TextIO

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.profiler import record_function

from posbench import encodings, machine, records, schedule, tasks
from posbench.checkpoints import checkpoint_summary, last_checkpoint, position_tables, positions_beyond_training
from posbench.devices import CPU, FLOAT32, check_training, missing_device, on_cuda
from posbench.encodings.rope import RopeScaling
from posbench.eval_scaling import check_eval_scaling
from posbench.evaluation import (
    evaluate,
    evaluate_sliding,
    held_out_loss,
    item_table,
    scored_logits,
    sliding_summary,
    validation_set,
)
from posbench.loss_trend import annealed_trend, trend
from posbench.model import ModelConfig, build_model, count_params
from posbench.sizes import SIZES
from posbench.tasks.base import IGNORE

RUN_FIELDS = ("device", "dtype")  # recorded only when not cpu / float32: older records keep their hash
CURVE_POINTS = 50  # validation-curve points per run: every steps // 50 steps, and at the last


@dataclass(frozen=True)
class TrainConfig:
    """One training job. ``None`` fields take the task's defaults."""

    task: str
    encoding: str
    size: str = "tiny"
    d_model: int | None = None  # the size's width unless set: a width sweep (a concatenating encoding's E width)
    seed: int = 0
    steps: int | None = None
    batch_size: int | None = None
    lr: float | None = None
    task_options: dict = field(default_factory=dict)  # e.g. train_length, data (see the task's fields)
    warmup_fraction: float = 0.1
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    threads: int = 1
    log_every: int = 100
    device: str = CPU  # devices.TRAINING_DEVICES: cpu, cuda or cuda:N
    dtype: str = FLOAT32  # or bfloat16: autocast with float32 weights (see the module's docstring)
    eval_scaling: tuple[str, ...] = ()  # training-free RoPE scalings also evaluated after training, e.g. yarn:4
    encoding_options: dict | None = None  # the encoding's family options (e.g. from --hf-config); None: its defaults
    checkpoints: tuple[int, ...] = ()  # budgets of annealed checkpoints, the last = steps: warmup–stable–decay
    decay_fraction: float = 0.2  # with checkpoints: each one's decay branch, a share of its budget (schedule.py)


@dataclass(frozen=True)
class Job:
    """A config resolved against its task: everything :func:`train` needs, checked."""

    config: TrainConfig
    task: tasks.Task
    model: ModelConfig
    steps: int
    batch_size: int
    lr: float
    checkpoints: schedule.Checkpoints | None = None  # None: one cosine run

    def record_config(self) -> dict:
        recorded = records.config_fields(self.config, (*RUN_FIELDS, "eval_scaling", "d_model", "encoding_options",
                                                       "checkpoints", "decay_fraction"))
        for name in ("eval_scaling", "checkpoints"):
            if name in recorded:
                recorded[name] = list(recorded[name])  # JSON has arrays, not tuples
        return {**recorded, "steps": self.steps, "batch_size": self.batch_size, "lr": self.lr,
                "train_length": self.task.train_length, "task_options": self.task.options(),
                "eval_lengths": self.task.eval_lengths(), "max_len": self.model.max_len}


def resolve(config: TrainConfig) -> Job:
    """Check a config and fill in the task's defaults; a ``ValueError`` names the bad field and the allowed values."""
    if config.size not in SIZES:
        raise ValueError(f"unknown size {config.size!r}; allowed: {', '.join(SIZES)}")
    if config.encoding not in encodings.names():
        raise ValueError(f"unknown encoding {config.encoding!r}; allowed: {', '.join(encodings.names())}")
    if config.seed < 0:
        raise ValueError(f"seed must be >= 0, got {config.seed}")
    check_training(config.device, config.dtype)
    for name in ("d_model", "steps", "batch_size", "lr", "threads", "log_every"):
        value = getattr(config, name)
        if value is not None and value <= 0:
            raise ValueError(f"{name} must be positive, got {value}")
    task = tasks.get(config.task, **config.task_options)
    model = model_config(task, config.encoding, config.size, config.d_model, config.encoding_options)
    check_eval_scaling(config.encoding, config.eval_scaling, task.sequence_length(task.train_length))
    steps, plan = config.steps or task.steps, None
    if config.checkpoints:
        plan = schedule.Checkpoints(tuple(config.checkpoints), config.decay_fraction, config.warmup_fraction)
        if config.steps is not None and config.steps != plan.budgets[-1]:
            raise ValueError(f"checkpoints {list(plan.budgets)}: the last must be the run's steps ({config.steps})")
        steps = plan.budgets[-1]
    return Job(config, task, model, steps, config.batch_size or task.batch_size, config.lr or task.lr, plan)


def model_config(task: tasks.Task, encoding: str, size: str, d_model: int | None = None,
                 encoding_options: dict | None = None) -> ModelConfig:
    """The model for ``task``: its vocabulary/classes/patches, and positions for its longest evaluation.

    ``d_model`` replaces the size's width (depth and heads stay the size's): the axis of a
    parameter-budget sweep. A 2-D encoding gets the task's grid; a 1-D encoding reads the grid row by
    row (flattened). A 2-D encoding on a task without a grid is an error rather than an arbitrary
    square grid. ``encoding_options`` go to the encoding's family, checked here by building it: a bad
    one is a ``ValueError`` before any training.
    """
    options = dict(task.model_options())
    grid = options.pop("grid", None)
    max_len = max(task.sequence_length(n) for n in task.eval_lengths())
    if encodings.takes(encoding, "trained_length"):  # a layer pattern scales its window and temperature to it
        encoding_options = {"trained_length": task.sequence_length(task.train_length), **(encoding_options or {})}
    if d_model is not None:
        options["d_model"] = d_model
    cfg = ModelConfig.from_size(size, max_len=max_len, encoding=encoding, encoding_options=encoding_options or {},
                                **options)
    if encoding_options or d_model is not None:
        built = encodings.build(encoding, d_model=cfg.d_model, n_heads=cfg.n_heads, max_len=cfg.max_len,
                                **(encoding_options or {}))
        if d_model is not None:
            check_width(size, built.model_width)
    reads_grid = encodings.traits(encoding).axes == "2d"
    if reads_grid and grid is None:
        grid_tasks = [n for n in tasks.names() if "grid" in tasks.get(n).model_options()]
        raise ValueError(f"encoding {encoding!r} needs a task on a grid; tasks with a grid: {', '.join(grid_tasks)}")
    return cfg.replace(encoding_options={**cfg.encoding_options, "grid": grid}) if reads_grid else cfg


def check_width(size: str, d_model: int) -> None:
    """A one-line ``ValueError`` unless ``d_model``, the width the blocks run at (a naive concat's E and P
    together), splits into the size's heads with an even head width (rotary encodings turn pairs of a head's
    dimensions)."""
    heads = SIZES[size]["n_heads"]
    if d_model <= 0 or d_model % (2 * heads):
        raise ValueError(f"d_model {d_model} does not fit size {size!r}: allowed: a positive multiple of "
                         f"{2 * heads} (its {heads} heads, each an even width)")


@contextmanager
def deterministic(threads: int, device: str = CPU):
    """Deterministic kernels and a fixed thread count for the duration of a job.

    On CUDA, cuBLAS is deterministic only with a fixed workspace, read from the environment when its
    first handle is made: so it is set here, before the job touches the device (a value already set
    is kept). cuDNN's autotuner would pick kernels by timing, so it is off."""
    if on_cuda(device):
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    previous = torch.are_deterministic_algorithms_enabled(), torch.get_num_threads(), torch.backends.cudnn.benchmark
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(threads)
    torch.backends.cudnn.benchmark = False
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(previous[0])
        torch.set_num_threads(previous[1])
        torch.backends.cudnn.benchmark = previous[2]


def make_optimizer(model: nn.Module, lr: float, weight_decay: float) -> torch.optim.AdamW:
    """AdamW with weight decay on the linear layers' matrices only; the rate is set per step (:class:`Trainer`)."""
    decayed = {id(m.weight) for m in model.modules() if isinstance(m, nn.Linear)}
    groups = [
        {"params": [p for p in model.parameters() if id(p) in decayed], "weight_decay": weight_decay},
        {"params": [p for p in model.parameters() if id(p) not in decayed], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.98))


def rate_factor(job: Job) -> Callable[[int], float]:
    """The rate factor of each optimizer step (0-based) of the job's main run: cosine, or with
    checkpoints the trunk and then the last budget's decay (:mod:`posbench.schedule`)."""
    plan = job.checkpoints
    if plan is None:
        return schedule.cosine(job.steps, job.config.warmup_fraction)
    last = plan.budgets[-1]
    return lambda step: (plan.trunk_factor(step) if step < plan.trunk_steps(last)
                         else plan.decay_factor(last, step - plan.trunk_steps(last)))


@dataclass(frozen=True)
class Fitted:
    """What a training run did: every step's loss, the logged curve, and whether it finished."""

    losses: list[float]  # each step's batch loss, up to where the run stopped
    curve: list[dict]  # every log_every steps and at the last: step, mean loss since the previous point, lr
    validation_curve: list[dict]  # every max(1, steps // CURVE_POINTS) steps and at the last: step, held-out loss
    status: str  # "ok", or "diverged" when a non-finite loss stopped the run (a result, not retried)
    reason: str
    seconds: float  # the whole loop, the validation curve and earlier checkpoints' branches included
    validation_seconds: float  # of which drawing the validation curve
    annealed: list[dict] = field(default_factory=list)  # each earlier checkpoint's branch (decay_branch)


def initial_model(job: Job) -> nn.Module:
    """The job's model at initialisation, on its device; the seed fixes its weights (drawn on the CPU,
    so they are the same on every device)."""
    torch.manual_seed(job.config.seed)
    return build_model(job.model).to(job.config.device)


STEP_RANGES = ("step", "data", "forward", "optimizer", "backward")  # Trainer.step's torch.profiler ranges


class Diverged(RuntimeError):
    """A training step's loss was not finite; the message says which step and the loss."""


class Trainer:
    """A job's training state (the model, AdamW, the rate factor per step, the seeded batch stream) and
    its one training step: the step :func:`fit` loops over, and the one ``posbench bench`` times (``train``),
    so the bench measures the step training takes."""

    def __init__(self, model: nn.Module, job: Job):
        self.model, self.job, self.steps_taken = model, job, 0
        self.optimizer = make_optimizer(model, job.lr, job.config.weight_decay)
        self.factor = rate_factor(job)
        self.rng = np.random.default_rng(job.config.seed)

    def branch(self, factor: Callable[[int], float]) -> Trainer:
        """A copy of this trainer (weights, AdamW's state, the batch stream where it is) that goes on at
        the rate ``factor`` gives; this one is left as it was: a decay branch off the trunk."""
        twin = copy.copy(self)
        twin.model, twin.optimizer = copy.deepcopy((self.model, self.optimizer))
        twin.rng, twin.factor = copy.deepcopy(self.rng), factor
        return twin

    def step(self) -> tuple[float, tasks.Batch]:
        """One optimizer step on the next training batch: forward, cross-entropy over the scored targets,
        backward, gradient clipping, AdamW at this step's rate. Returns the batch's loss and the batch; a
        non-finite loss raises :class:`Diverged` before anything is updated. Its phases are
        ``torch.profiler`` ranges (:data:`STEP_RANGES`): the bench's breakdown of where a step's time goes."""
        config = self.job.config
        rate = self.job.lr * self.factor(self.steps_taken)
        self.steps_taken += 1
        with record_function("step"):
            with record_function("data"):
                batch = self.job.task.train_batch(self.rng, self.job.batch_size)
            with record_function("forward"):
                logits, targets = scored_logits(self.model, batch, config.dtype)
                loss = F.cross_entropy(logits, targets, ignore_index=IGNORE)
            if not torch.isfinite(loss):
                raise Diverged(f"non-finite loss ({loss.item()}) at step {self.steps_taken}")
            with record_function("optimizer"):
                self.optimizer.zero_grad(set_to_none=True)
            with record_function("backward"):
                loss.backward()
            with record_function("optimizer"):
                nn.utils.clip_grad_norm_(self.model.parameters(), config.grad_clip)
                for group in self.optimizer.param_groups:
                    group["lr"] = rate
                self.optimizer.step()
            return loss.item(), batch


Annealer = Callable[[nn.Module, int], dict]  # (an annealed model, its budget) -> what the record keeps of it


def fit(model: nn.Module, job: Job, log: TextIO, label: str, anneal: Annealer | None = None) -> Fitted:
    """Train ``model`` (from :func:`initial_model`) on ``job``: the one training loop.

    The seed fixes the batches. A point of the curve, and a progress line ``[label] step …`` on
    ``log``, every ``log_every`` steps and at the last; a point of the validation curve every
    ``max(1, steps // CURVE_POINTS)`` steps and at the last. A non-finite loss stops the run: status
    ``diverged``. With checkpoints (``job.checkpoints``), each budget but the last gets its decay
    branch where it leaves the trunk, and ``anneal`` is called on the branch's model (the last
    budget's model is ``model`` itself when this returns); ``Fitted.annealed`` keeps what it returned.
    """
    config = job.config
    trainer = Trainer(model, job)
    held_out = validation_set(job.task, job.batch_size)
    every = max(1, job.steps // CURVE_POINTS)
    branches = ({job.checkpoints.trunk_steps(b): b for b in job.checkpoints.budgets[:-1]}
                if job.checkpoints else {})
    losses, curve, validation_curve, annealed, validation_seconds = [], [], [], [], 0.0
    started = time.perf_counter()
    for step in range(1, job.steps + 1):
        try:
            losses.append(trainer.step()[0])
            if step in branches:
                annealed.append(decay_branch(trainer, branches[step], anneal, log, label))
        except Diverged as stopped:
            return Fitted(losses, curve, validation_curve, "diverged", str(stopped), time.perf_counter() - started,
                          validation_seconds, annealed)
        if step % config.log_every == 0 or step == job.steps:
            since = curve[-1]["step"] if curve else 0
            window = losses[since:]
            curve.append({"step": step, "loss": sum(window) / len(window),
                          "lr": trainer.optimizer.param_groups[0]["lr"]})
            print(f"[{label}] step {step}/{job.steps} loss {curve[-1]['loss']:.4f} "
                  f"{time.perf_counter() - started:.1f}s", file=log, flush=True)
        if step % every == 0 or step == job.steps:
            before = time.perf_counter()
            validation_curve.append({"step": step, "loss": held_out_loss(model, held_out, config.dtype)})
            validation_seconds += time.perf_counter() - before
    return Fitted(losses, curve, validation_curve, "ok", "", time.perf_counter() - started, validation_seconds,
                  annealed)


def decay_branch(trunk: Trainer, budget: int, anneal: Annealer | None, log: TextIO, label: str) -> dict:
    """Anneal a copy of the trunk to ``budget`` steps (its decay branch, :mod:`posbench.schedule`) and
    return what ``anneal`` keeps of it; the trunk goes on untouched. A branch that diverges raises."""
    plan, start = trunk.job.checkpoints, trunk.steps_taken
    branch = trunk.branch(lambda step: plan.decay_factor(budget, step - start))
    started = time.perf_counter()
    for _ in range(plan.decay_steps(budget)):
        branch.step()
    kept = anneal(branch.model, budget) if anneal else {}
    print(f"[{label}] checkpoint {budget}: annealed over {plan.decay_steps(budget)} steps from step {start} "
          f"{time.perf_counter() - started:.1f}s", file=log, flush=True)
    return {"steps": budget, "trunk_steps": start, "decay_steps": plan.decay_steps(budget),
            "seconds": time.perf_counter() - started, **kept}


def scaled_evaluations(model: nn.Module, task: tasks.Task, label: str, dtype: str = FLOAT32) -> dict:
    """The trained model evaluated at every length with its RoPE frequencies scaled by ``label`` (e.g.
    ``yarn:4``), no retraining: the context-extension methods people apply to a trained model. The
    training length is the scaling's original context. Per-item results are kept for the plain
    evaluation only."""
    plain = model.encoding
    model.encoding = plain.rescaled(RopeScaling.from_label(label, task.sequence_length(task.train_length)))
    try:
        return {n: evaluate(model, task, n, dtype) for n in task.eval_lengths()}
    finally:
        model.encoding = plain


def train(config: TrainConfig, log: TextIO | None = None) -> dict:
    """Run one job and return its record (status ``ok``, or ``error`` with the reason).

    Progress lines go to ``log`` (default: the current ``sys.stderr``)."""
    job = resolve(config)
    missing = missing_device(config.device)
    if missing:
        return _skipped(job, missing)
    with deterministic(config.threads, config.device):
        return _run(job, log or sys.stderr)


def _skipped(job: Job, reason: str) -> dict:
    """The record of a job not run: its config and the reason, no measurements."""
    record = machine.new_record("train", job.record_config(), "skipped", reason)
    record.update({"task": job.task.name, "encoding": job.config.encoding, "seed": job.config.seed,
                   "metrics": list(job.task.metrics), "loss_curve": [], "eval": [],
                   "validation_curve": [], "undertrained": None, "validation": None,
                   "wall_time_s": {"train": 0.0, "eval": 0.0, "total": 0.0}})
    return record


def _run(job: Job, log: TextIO) -> dict:
    config, task = job.config, job.task
    model = initial_model(job)
    initial = {name: p.detach().clone() for name, p in position_tables(model).items()}
    started = time.perf_counter()
    fitted = fit(model, job, log, f"train {task.name}/{config.encoding} seed {config.seed}",
                 lambda annealed, budget: checkpoint_summary(annealed, task, config.dtype))
    finished = fitted.status == "ok"
    evaluations = {n: evaluate(model, task, n, config.dtype) for n in task.eval_lengths()} if finished else {}
    before_sliding = time.perf_counter()
    sliding = ({n: sliding_summary(n, evaluate_sliding(model, task, n, config.dtype)) for n in evaluations}
               if task.sliding_window else {})
    sliding_seconds = time.perf_counter() - before_sliding
    validation = (evaluate(model, task, task.train_length, config.dtype, "validation", decode=False).metrics
                  if finished else None)
    checkpoints = (fitted.annealed + [last_checkpoint(job.checkpoints, task, validation, evaluations)]
                   if job.checkpoints and finished else [])
    chances = {n: task.chance(n) for n in evaluations}
    scaled = ({label: scaled_evaluations(model, task, label, config.dtype) for label in config.eval_scaling}
              if evaluations else {})
    total_seconds = time.perf_counter() - started
    record = machine.new_record("train", job.record_config(), fitted.status, fitted.reason)
    record.update({
        "task": task.name, "encoding": config.encoding, "seed": config.seed,
        "metrics": list(task.metrics),
        "params": count_params(model),
        "model": {"width": model.width, "n_layers": job.model.n_layers, "n_heads": job.model.n_heads,
                  "max_len": job.model.max_len, "encoding_options": dict(job.model.encoding_options)},
        "positions_beyond_training": positions_beyond_training(
            model, initial, task.sequence_length(task.train_length)),
        "loss_curve": fitted.curve,
        "validation_curve": fitted.validation_curve,
        "undertrained": (None if not finished else trend(fitted.validation_curve, job.steps) if not job.checkpoints
                         else annealed_trend(checkpoints)),
        "validation": validation,
        "eval": [{"length": n, "factor": n / task.train_length, "positions": task.sequence_length(n),
                  "chance": chances[n], **evaluation.summary(), **({"sliding": sliding[n]} if n in sliding else {})}
                 for n, evaluation in evaluations.items()]
                + [{"length": n, "factor": n / task.train_length, "positions": task.sequence_length(n),
                    "eval_scaling": label, "chance": chances[n], **evaluation.summary()}
                   for label, by_length in scaled.items() for n, evaluation in by_length.items()],
        "wall_time_s": {"train": fitted.seconds, "validation_curve": fitted.validation_seconds,
                        "eval": total_seconds - fitted.seconds, "total": total_seconds,
                        **({"sliding": sliding_seconds} if sliding else {})},
    })
    if job.checkpoints:
        record["checkpoints"] = checkpoints
    if evaluations:
        record["items"] = item_table(evaluations)
    return record
