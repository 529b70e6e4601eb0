"""The named model sizes, defined here only: the model builds them, the task registry reads a size's width
(a task's default axes), and the command line, workflow and report list them. A module of its own so that
reading a size's numbers needs neither torch nor the model.

The verdicts across sizes use a ladder of sizes drawn by one rule (:func:`ladder_shape`), so that a trend
over them is a trend in size and not in the model's proportions: the width doubles from one rung to the
next, the depth follows the width (``n_layers = d_model / 32``, at least 2: the fewest layers that can form
an induction head, which the retrieval and copying tasks need) and the heads stay at 4, so every rung
splits attention into the same number of patterns. Non-embedding parameters then grow about 8× a rung
(:func:`non_embedding_params`: 12·d²·L). ``tiny`` and ``small`` are rungs of it; ``micro``, below tiny, is the
rule's model at width 40, so that the three sizes a CPU can train span 20×: the smallest width at which every
deciding comparison's arms are built as declared, naive concat's included (at half the adding arm's width,
their parameter totals within the 5 % a matched comparison allows: at width 32 the embeddings' share makes
them differ by 5.1 %). The ``ladder*`` rungs are for a cluster.
"""

# d_ff defaults to 4 × the model width (posbench.model.ModelConfig).
LADDER_HEADS = 4
LADDER_MIN_LAYERS = 2
LADDER_WIDTH_PER_LAYER = 32


def ladder_shape(d_model: int) -> dict[str, int]:
    """The ladder's model at width ``d_model``: depth ``d_model / 32`` (at least 2) and 4 heads."""
    return dict(d_model=d_model, n_layers=max(LADDER_MIN_LAYERS, d_model // LADDER_WIDTH_PER_LAYER),
                n_heads=LADDER_HEADS)


LADDER = {"micro": ladder_shape(40), "tiny": ladder_shape(64), "small": ladder_shape(128),
          "ladder256": ladder_shape(256), "ladder512": ladder_shape(512), "ladder768": ladder_shape(768)}

SIZES: dict[str, dict[str, int]] = {
    **LADDER,
    "base": dict(d_model=256, n_layers=4, n_heads=8),
    "medium": dict(d_model=512, n_layers=6, n_heads=8),
    "large": dict(d_model=768, n_layers=12, n_heads=12),
}


def non_embedding_params(size: str) -> int:
    """The parameters of ``size``'s blocks, without embeddings, output head, norms and biases: per layer
    4·d² for attention's projections and 8·d² for the feed-forward (d_ff = 4·d), so 12·d²·L (Kaplan et
    al.'s N). What the verdicts across sizes are plotted against: it does not depend on the encoding nor
    on a task's vocabulary."""
    shape = SIZES[size]
    return 12 * shape["d_model"] ** 2 * shape["n_layers"]
