"""Name -> task class. Task modules register themselves on import; nothing dispatches on names."""

from __future__ import annotations

import dataclasses

from posbench import metrics
from posbench.model import SIZES
from posbench.tasks.base import Task

_REGISTRY: dict[str, type[Task]] = {}


def register(cls: type[Task]) -> type[Task]:
    """Class decorator: register ``cls`` under ``cls.name``; its metrics must be defined in :mod:`posbench.metrics`."""
    if cls.name in _REGISTRY:
        raise ValueError(f"task {cls.name!r} is registered twice")
    for name in cls.metrics:
        metrics.get(name)
    _REGISTRY[cls.name] = cls
    return cls


def names() -> list[str]:
    """All registered task names, sorted."""
    return sorted(_REGISTRY)


def get(name: str, **options) -> Task:
    """Task ``name`` with its defaults changed by ``options``; bad names and options fail with the allowed values."""
    if name not in _REGISTRY:
        raise ValueError(f"unknown task {name!r}; allowed: {', '.join(names())}")
    cls = _REGISTRY[name]
    allowed = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ValueError(f"task {name!r} has no option {unknown[0]!r}; allowed: {', '.join(allowed)}")
    task = cls(**options)
    for field in ("train_length", "steps", "batch_size"):
        if getattr(task, field) <= 0:
            raise ValueError(f"task {name!r}: {field} must be positive, got {getattr(task, field)}")
    return task


def default_shape(task: str, size: str) -> tuple[int | None, int | None]:
    """A task's training length and a size's model width (``None`` for a name the registries lack): the
    cell every grid arm trains, and that a record path names no folder for."""
    return get(task).train_length if task in _REGISTRY else None, SIZES.get(size, {}).get("d_model")
