"""Tasks that tell positional encodings apart, one module each, behind one registry.

>>> from posbench import tasks
>>> task = tasks.get("reverse")
>>> task.eval_lengths()
[16, 20, 24, 32, 64, 128]
"""

from posbench.tasks.base import IGNORE, Batch, Task
from posbench.tasks.registry import default_shape, get, names, register

# isort: split
# Importing a task module registers it.
from posbench.tasks import (  # noqa: F401
    babi,
    bucket_sort,
    code_brackets,
    copy,
    counting,
    digits_2d,
    duplicate_string,
    dyck,
    flip_flop,
    index_lookup,
    lm_code,
    lm_prose,
    lm_prose_long,
    long_range,
    missing_duplicate_string,
    mlm_prose,
    mosaic_qa,
    mosaic_resolution,
    multikey_niah,
    odds_first,
    passkey,
    reverse,
    scan,
    selective_copy,
    table_lookup,
    text_order,
    text_source,
    variable_tracking,
)

__all__ = ["IGNORE", "Batch", "Task", "default_shape", "get", "names", "register"]
