"""Positional encodings behind one interface (:class:`PositionalEncoding`) and one registry.

An encoding is one file: a module of this package that calls :func:`register` is found and imported here
(no list names it). A user's own encoding joins without a fork: a package that declares an entry point in the
group ``posbench.encodings`` (any name, pointing at the module that calls :func:`register`) is imported here
too, so its encodings reach ``train``, ``profile`` and the workflow like the built-in ones.

>>> from posbench import encodings
>>> enc = encodings.build("alibi", d_model=256, n_heads=8, max_len=1024)
>>> enc.attention_bias(enc.positions(4), enc.positions(4)).shape
torch.Size([8, 4, 4])
"""

from posbench.encodings.base import PositionalEncoding, Traits
from posbench.encodings.hf_config import from_hf_config, hf_encoding_options
from posbench.encodings.registry import PLUGIN_GROUP, build, discover, names, register, takes, traits

discover()

__all__ = ["PLUGIN_GROUP", "PositionalEncoding", "Traits", "build", "from_hf_config", "hf_encoding_options", "names",
           "register", "takes", "traits"]
