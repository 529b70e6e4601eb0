"""posbench: every Transformer positional encoding through one harness."""

from posbench import encodings
from posbench.flops import count_flops
from posbench.model import SIZES, KVCache, ModelConfig, Transformer, build_model, count_params, generate

__all__ = ["SIZES", "KVCache", "ModelConfig", "Transformer", "build_model", "count_params", "count_flops",
           "encodings", "generate"]
