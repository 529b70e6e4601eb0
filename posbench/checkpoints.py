"""What a train record keeps of a trained model beyond its evaluation: how its per-position parameters met
positions no training sequence reached (:func:`positions_beyond_training`), and each annealed checkpoint of a
warmup–stable–decay run (:mod:`posbench.schedule`) with its metrics (:func:`checkpoint_summary`,
:func:`last_checkpoint`)."""

from __future__ import annotations

import torch
from torch import nn

from posbench import schedule, tasks
from posbench.devices import FLOAT32
from posbench.evaluation import Evaluation, evaluate


def position_tables(model: nn.Module) -> dict[str, torch.Tensor]:
    """Parameters of a bounded encoding with one row per position, e.g. a learned table."""
    if not model.encoding.traits.bounded:
        return {}
    return {name: p for name, p in model.encoding.named_parameters() if p.dim() and p.shape[0] == model.cfg.max_len}


def positions_beyond_training(model: nn.Module, initial: dict[str, torch.Tensor], trained_positions: int) -> dict:
    """How this encoding met positions no training sequence reached, checked on the trained weights."""
    tables = position_tables(model)
    report = {"max_len": model.cfg.max_len, "trained_positions": trained_positions, "tables": {}}
    for name, table in tables.items():
        same = (table.detach() == initial[name]).all(dim=1)  # (max_len,) row still at its initial value
        report["tables"][name] = {"rows": table.shape[0], "rows_beyond_training": table.shape[0] - trained_positions,
                                  "rows_beyond_training_unchanged": int(same[trained_positions:].sum()),
                                  "rows_within_training_changed": int((~same[:trained_positions]).sum())}
    if tables:
        report["handling"] = (f"table sized for the longest evaluation ({model.cfg.max_len} rows); rows at positions "
                              f">= {trained_positions} got no gradient and keep their random initialisation")
    else:
        report["handling"] = ("no per-position parameters: positions beyond training come from the encoding's "
                              "own rule (computed sinusoids/angles, relative distances or none)")
    return report


def checkpoint_summary(model: nn.Module, task: tasks.Task, dtype: str = FLOAT32) -> dict:
    """What a record keeps of an annealed checkpoint: the validation metrics at the training length
    and the test metrics at every evaluation length (no items: those are the last checkpoint's)."""
    return {"validation": evaluate(model, task, task.train_length, dtype, "validation", decode=False).metrics,
            "eval": [{"length": n, "factor": n / task.train_length,
                      "metrics": evaluate(model, task, n, dtype, decode=False).metrics} for n in task.eval_lengths()]}


def last_checkpoint(plan: schedule.Checkpoints, task: tasks.Task, validation: dict,
                    evaluations: dict[int, Evaluation]) -> dict:
    """The last budget's checkpoint (the run's steps): the trained model itself, as :func:`checkpoint_summary`
    keeps it."""
    budget = plan.budgets[-1]
    return {"steps": budget, "trunk_steps": plan.trunk_steps(budget), "decay_steps": plan.decay_steps(budget),
            "validation": validation,
            "eval": [{"length": n, "factor": n / task.train_length, "metrics": e.metrics}
                     for n, e in evaluations.items()]}
