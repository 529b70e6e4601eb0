"""NoPE: no position signal. A causal mask alone still leaks position (Haviv et al., 2022)."""

from posbench.encodings.base import PositionalEncoding
from posbench.encodings.registry import register

register("none")(PositionalEncoding)
