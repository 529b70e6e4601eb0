"""Name -> encoding class. Families register themselves on import; nothing dispatches on names:
code that needs to know what an encoding is reads its :func:`traits`."""

from __future__ import annotations

import functools
from typing import Callable

from posbench.encodings.base import PositionalEncoding, Traits

_REGISTRY: dict[str, Callable[..., PositionalEncoding]] = {}


def register(name: str, **preset_options):
    """Class decorator (or plain call) registering ``name``; ``preset_options`` fix family options."""

    def add(factory: Callable[..., PositionalEncoding]):
        if name in _REGISTRY:
            raise ValueError(f"encoding {name!r} is registered twice")
        _REGISTRY[name] = functools.partial(factory, **preset_options)
        return factory

    return add


def names() -> list[str]:
    """All registered encoding names, sorted."""
    return sorted(_REGISTRY)


def build(name: str, *, d_model: int, n_heads: int, max_len: int, causal: bool = False,
          **family_options) -> PositionalEncoding:
    """Build encoding ``name``; unknown names and unknown options fail with the allowed values."""
    if name not in _REGISTRY:
        raise ValueError(f"unknown encoding {name!r}; allowed: {', '.join(names())}")
    try:
        return _REGISTRY[name](d_model=d_model, n_heads=n_heads, max_len=max_len, causal=causal,
                               **family_options)
    except TypeError as error:  # an option the family does not take
        raise ValueError(f"encoding {name!r}: {error}") from None


@functools.cache
def traits(name: str) -> Traits:
    """The declared :class:`~posbench.encodings.base.Traits` of encoding ``name`` (from a tiny instance:
    width 16, 2 heads of 8, which every family accepts)."""
    return build(name, d_model=16, n_heads=2, max_len=4).traits
