"""Stick-breaking attention (Tan et al. 2024): no position encoding, attention weights from a stick-breaking
process instead of softmax, which orders the keys by nearness to the query.

For query ``i``, the keys from the nearest back: key ``j`` takes ``β_ij = σ(q_i·k_j/√d)`` of the stick
that the keys between it and the query left, ``A_ij = β_ij ∏_{j<t<i} (1 − β_it)``; what no key takes goes
to the query's own value. The weights are :func:`posbench.attention.stick_breaking`'s (the
``contextual_logits`` path, from the ``attention`` trait); this class only declares them.

Follows the reference, shawntan/stickbreaking-attention ``stickbreaking_attention/sb_ref.py`` (Apache-2.0
licence) as its tests call it: causal with ``attend_current=False`` (a query's own key is hidden) and the
remainder ``1 − Σ_j A_ij`` times the query's value added. A bidirectional model runs it unmasked: the stick
breaks from the last token back, over every key. The project's code is its own.
"""

from __future__ import annotations

from posbench.encodings.contextual import ContextualEncoding
from posbench.encodings.registry import register


class StickBreaking(ContextualEncoding):
    """No parameters; the weights come from the layer's own logits."""

    attention = "stick_breaking"
    content_reads = "qk"

    def content_flops(self, batch_size, q_len, k_len, mode):
        """Per layer: one add per logit (``z + Σ log σ(−z)``) and, per query and value dimension, the
        remainder's multiply and add. Training adds, per logit, the exponential's gradient (a multiply) and
        two accumulated gradients: of the logits (read directly and through ``log σ(−z)``) and of the weights
        (read by the values' matmul and the remainder's sum); per query and dimension, the remainder
        product's two gradients and the accumulated gradient of the values (the query's own among them)."""
        logits = batch_size * self.n_heads * q_len * k_len
        values = batch_size * q_len * self.d_model  # (B, h, q, d_head)
        forward = logits + 2 * values
        if mode == "infer":
            return self.n_layers * forward
        return self.n_layers * (forward + 3 * logits + 3 * values)


register("stick_breaking")(StickBreaking)
