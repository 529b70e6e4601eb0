"""Tasks that tell positional encodings apart, one module each, behind one registry.

A task is one file: a module of this package that registers its class (``@register("name")``) is found and
imported here (no list names it); a package of one's own adds tasks through the entry-point group
``posbench.tasks``, as encodings join through ``posbench.encodings``.

>>> from posbench import tasks
>>> task = tasks.get("reverse")
>>> task.eval_lengths()
[16, 20, 24, 32, 64, 128]
"""

from posbench.tasks.base import IGNORE, Batch, Task
from posbench.tasks.registry import PLUGIN_GROUP, default_axes, discover, get, names, register

discover()

__all__ = ["IGNORE", "PLUGIN_GROUP", "Batch", "Task", "default_axes", "get", "names", "register"]
