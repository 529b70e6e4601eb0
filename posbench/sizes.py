"""The named model sizes, defined here only: the model builds them, the task registry reads a size's width
(a task's default axes), and the command line, workflow and report list them. A module of its own so that
reading a size's numbers needs neither torch nor the model."""

# d_ff defaults to 4 × the model width (posbench.model.ModelConfig).
SIZES: dict[str, dict[str, int]] = {
    "tiny": dict(d_model=64, n_layers=2, n_heads=4),
    "small": dict(d_model=128, n_layers=4, n_heads=4),
    "base": dict(d_model=256, n_layers=4, n_heads=8),
    "medium": dict(d_model=512, n_layers=6, n_heads=8),
    "large": dict(d_model=768, n_layers=12, n_heads=12),
}
