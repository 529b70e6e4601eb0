"""Name -> what it stands for, for the encodings and the tasks alike: one way to register, to list, to look
up and to find the modules that register.

A name is added by ``register(name)`` in the module that defines it (the encodings' and the tasks' own
``register`` put what they keep under the name). Nothing lists those modules: :meth:`Registry.discover`
imports every module of the package and every module an installed distribution names in the registry's
entry-point group, so a new encoding or task is one file, in the package or in a package of one's own.
"""

from __future__ import annotations

import importlib
import pkgutil
from importlib.metadata import entry_points
from typing import Any


class Registry(dict):
    """The names of one kind (``encoding``, ``task``) and what each stands for; a ``dict`` name -> entry."""

    def __init__(self, kind: str, group: str):
        super().__init__()
        self.kind = kind
        self.group = group  # the entry-point group whose modules register more names

    def add(self, name: str, entry: Any) -> None:
        """Keep ``entry`` under ``name``; a name is registered once."""
        if name in self:
            raise ValueError(f"{self.kind} {name!r} is registered twice")
        self[name] = entry

    def names(self) -> list[str]:
        """Every registered name, sorted."""
        return sorted(self)

    def entry(self, name: str) -> Any:
        """What ``name`` stands for; an unknown name fails naming every allowed one."""
        if name not in self:
            raise ValueError(f"unknown {self.kind} {name!r}; allowed: {', '.join(self.names())}")
        return self[name]

    def discover(self, package: str) -> None:
        """Import every module of ``package`` (its subpackages' too), then every module named by an entry
        point of :attr:`group`: each registers its own names on import."""
        path = importlib.import_module(package).__path__
        for module in pkgutil.walk_packages(path, prefix=f"{package}."):
            importlib.import_module(module.name)
        for entry in entry_points(group=self.group):
            entry.load()
