"""Positional encodings behind one interface (:class:`PositionalEncoding`) and one registry.

A user's own encoding joins without a fork: a package that declares an entry point in the group
``posbench.encodings`` (any name, pointing at the module that calls :func:`register`) is imported
here, so its encodings reach ``train``, ``profile`` and the workflow like the built-in ones.

>>> from posbench import encodings
>>> enc = encodings.build("alibi", d_model=256, n_heads=8, max_len=1024)
>>> enc.attention_bias(enc.positions(4), enc.positions(4)).shape
torch.Size([8, 4, 4])
"""

# Importing a family module registers its encodings.
from posbench.encodings import (  # noqa: F401
    absolute,
    alibi,
    cope,
    fire,
    fox,
    grid,
    kerple,
    layer_pattern,
    none,
    p_rope,
    path,
    per_modality,
    pope,
    rope,
    stick_breaking,
    t5,
)
from posbench.encodings.base import PositionalEncoding, Traits
from posbench.encodings.hf_config import from_hf_config, hf_encoding_options
from posbench.encodings.registry import build, names, register, takes, traits

PLUGIN_GROUP = "posbench.encodings"


def _load_plugins() -> None:
    """Import every module named by an entry point of :data:`PLUGIN_GROUP` (it registers itself)."""
    from importlib.metadata import entry_points

    for entry in entry_points(group=PLUGIN_GROUP):
        entry.load()


_load_plugins()

__all__ = ["PositionalEncoding", "Traits", "build", "from_hf_config", "hf_encoding_options", "names", "register",
           "takes", "traits"]
