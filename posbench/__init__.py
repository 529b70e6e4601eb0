"""posbench: every Transformer positional encoding through one harness."""

from posbench import encodings
from posbench.cache import KVCache
from posbench.flops import count_flops
from posbench.model import ModelConfig, Transformer, build_model, count_params, generate
from posbench.sizes import SIZES

__all__ = ["SIZES", "KVCache", "ModelConfig", "Transformer", "build_model", "count_params", "count_flops",
           "encodings", "generate"]
