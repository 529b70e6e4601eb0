"""Name -> task class (a :class:`~posbench.registry.Registry`, as the encodings'). Task modules register
themselves on import, found by :meth:`~posbench.registry.Registry.discover`; nothing dispatches on names."""

from __future__ import annotations

import dataclasses

from posbench import metrics
from posbench.guidance import KINDS
from posbench.registry import Registry
from posbench.sizes import SIZES
from posbench.tasks.base import Task

PLUGIN_GROUP = "posbench.tasks"  # an installed package's modules named here register tasks too
_REGISTRY = Registry("task", PLUGIN_GROUP)


def register(name: str):
    """Class decorator registering a task class under ``name``, which becomes its ``name``. Its metrics must be
    defined in :mod:`posbench.metrics` and its ``kind`` be one of :data:`posbench.guidance.KINDS` (what
    ``advise --task`` and the guidance rows speak to), so a task that would be judged by nothing is refused here."""

    def add(cls: type[Task]) -> type[Task]:
        for metric in cls.metrics:
            metrics.get(metric)
        if cls.kind not in KINDS:
            raise ValueError(f"task {name!r}: kind {cls.kind!r} is not allowed; allowed: {', '.join(KINDS)}")
        _REGISTRY.add(name, cls)
        cls.name = name
        return cls

    return add


def discover() -> None:
    """Import every module of :mod:`posbench.tasks` and of the plugins (:data:`PLUGIN_GROUP`): each registers its
    tasks."""
    _REGISTRY.discover("posbench.tasks")


def names() -> list[str]:
    """All registered task names, sorted."""
    return _REGISTRY.names()


def get(name: str, **options) -> Task:
    """Task ``name`` with its defaults changed by ``options``; bad names and options fail with the allowed values."""
    cls = _REGISTRY.entry(name)
    allowed = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ValueError(f"task {name!r} has no option {unknown[0]!r}; allowed: {', '.join(allowed)}")
    task = cls(**options)
    for field in ("train_length", "steps", "batch_size"):
        if getattr(task, field) <= 0:
            raise ValueError(f"task {name!r}: {field} must be positive, got {getattr(task, field)}")
    return task


def default_axes(task: str, size: str) -> tuple[int | None, int | None]:
    """A task's training length and a size's model width (``None`` for a name the registries lack): the
    cell every grid arm trains, and that a record path names no folder for."""
    return get(task).train_length if task in _REGISTRY else None, SIZES.get(size, {}).get("d_model")
