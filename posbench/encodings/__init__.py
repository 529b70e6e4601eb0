"""Positional encodings behind one interface (:class:`PositionalEncoding`) and one registry.

>>> from posbench import encodings
>>> enc = encodings.build("alibi", d_model=256, n_heads=8, max_len=1024)
>>> enc.attention_bias(enc.positions(4), enc.positions(4)).shape
torch.Size([8, 4, 4])
"""

from posbench.encodings.base import PositionalEncoding, Traits
from posbench.encodings.registry import build, names, register, traits

# Importing a family module registers its encodings.
from posbench.encodings import absolute, alibi, fire, grid, kerple, none, rope, t5  # noqa: E402,F401

__all__ = ["PositionalEncoding", "Traits", "build", "names", "register", "traits"]
