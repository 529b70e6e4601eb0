"""posbench: every Transformer positional encoding through one harness."""

from posbench import encodings
from posbench.flops import count_flops
from posbench.model import SIZES, ModelConfig, Transformer, build_model, count_params

__all__ = ["SIZES", "ModelConfig", "Transformer", "build_model", "count_params", "count_flops", "encodings"]
