"""Name -> encoding class and preset options (a :class:`~posbench.registry.Registry`, as the tasks'). Families
register themselves on import, found by :meth:`~posbench.registry.Registry.discover`; nothing dispatches on names:
code that needs to know what an encoding is reads its :func:`traits`."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable

from posbench.encodings.base import PositionalEncoding, Traits
from posbench.registry import Registry

PLUGIN_GROUP = "posbench.encodings"  # an installed package's modules named here register encodings too
_REGISTRY = Registry("encoding", PLUGIN_GROUP)  # name -> (class or factory, preset options)
TRAINING_OPTIONS = ("randomized", "max_position")  # every encoding's, handled here: see PositionalEncoding.randomize


def register(name: str, **preset_options):
    """Class decorator (or plain call) registering ``name``; ``preset_options`` fix family options
    (or the training options every encoding takes: ``randomized``, ``max_position``)."""

    def add(factory: Callable[..., PositionalEncoding]):
        _REGISTRY.add(name, (factory, preset_options))
        return factory

    return add


def discover() -> None:
    """Import every module of :mod:`posbench.encodings` and of the plugins (:data:`PLUGIN_GROUP`): each registers
    its encodings."""
    _REGISTRY.discover("posbench.encodings")


def names() -> list[str]:
    """All registered encoding names, sorted."""
    return _REGISTRY.names()


def build(name: str, *, d_model: int, n_heads: int, max_len: int, causal: bool = False, n_layers: int = 1,
          **family_options) -> PositionalEncoding:
    """Build encoding ``name``; unknown names and unknown options fail with the allowed values.
    ``n_layers`` reaches only an encoding with parameters in every layer (``per_layer``, the fourth hook's)."""
    factory, preset = _entry(name)
    options = {**preset, **family_options}
    training = {key: options.pop(key) for key in TRAINING_OPTIONS if key in options}
    if getattr(factory, "per_layer", False):
        options["n_layers"] = n_layers
    try:
        encoding = factory(d_model=d_model, n_heads=n_heads, max_len=max_len, causal=causal, **options)
    except TypeError as error:  # an option the family does not take
        raise ValueError(f"encoding {name!r}: {error}") from None
    if training.pop("randomized", False):
        encoding.randomize(training.pop("max_position", None) or max_len)
    if training:
        raise ValueError(f"encoding {name!r}: max_position applies only with randomized=True")
    return encoding


def takes(name: str, option: str) -> bool:
    """Whether encoding ``name``'s family takes ``option`` (read from its signature; a preset may fix it)."""
    factory, _ = _entry(name)
    return option in inspect.signature(factory).parameters


def _entry(name: str) -> tuple[Callable[..., PositionalEncoding], dict]:
    return _REGISTRY.entry(name)


@functools.cache
def traits(name: str) -> Traits:
    """The declared :class:`~posbench.encodings.base.Traits` of encoding ``name`` (from a tiny instance:
    width 16, 2 heads of 8, which every family accepts)."""
    return build(name, d_model=16, n_heads=2, max_len=4).traits
