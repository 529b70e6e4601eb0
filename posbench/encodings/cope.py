"""CoPE, contextual position encoding (Golovneva et al. 2024): a key's position is a count of the keys
between it and the query that the query's gates let through, and the logit bias reads a learned logit per
integer position, interpolated at that count.

For query ``i`` and key ``j``: gates ``g_it = σ(q_i·k_t/√d)``, position ``p_ij = Σ_{t=j}^{i} g_it`` (causal:
keys after the query have gate 0), clamped at ``npos − 1``; logits of every integer position
``z_i[p] = q_i·e[p]/√d`` from a learned table ``e (d_head, npos)`` shared by the heads, one per layer;
bias ``z_i[⌊p⌋] + (p − ⌊p⌋)·(z_i[⌈p⌉] − z_i[⌊p⌋])``, added to the logits ``q_i·k_j/√d`` themselves.

Follows the reference, facebookresearch/RAM ``projects/cope/src/cope/context_position.py`` (MIT licence;
its default ``npos = block size + 1``; gates from the same ``q·k`` as the logits), also x-transformers'
``CoPE`` (MIT): the project's code is its own. Unlike the reference's zeros, the table starts
``N(0, 0.02²)``, like T5's bias: near no position signal, but not exactly NoPE. A bidirectional model
runs the reference unmasked: counts run from the key to the end of the sequence.
"""

from __future__ import annotations

import torch
from torch import nn

from posbench.encodings.contextual import ContextualEncoding
from posbench.encodings.registry import register

# Elementwise FLOPs per logit: z⌈p⌉ − z⌊p⌋, its product with p − ⌊p⌋ (``frac``, one unary op: free like
# floor), the add of z⌊p⌋, the bias add. Without a gradient the subtraction is made once per query and position
# (the steps, :meth:`Cope._interpolated`), not per logit
FORWARD_PER_LOGIT = 4


class Cope(ContextualEncoding):
    """Family option: ``npos`` (default ``max_len + 1``, the reference's: every count a sequence reaches)."""

    trained_positions = True
    content_reads = "qk"

    def __init__(self, d_model: int, n_heads: int, max_len: int, causal: bool = False, *, n_layers: int = 1,
                 npos: int | None = None):
        super().__init__(d_model, n_heads, max_len, causal, n_layers=n_layers)
        self.npos = npos or max_len + 1
        self.embeddings = nn.ParameterList(nn.Parameter(0.02 * torch.randn(self.d_head, self.npos))
                                           for _ in range(n_layers))  # (d_head, npos) per layer

    def content(self, q, k, layer):
        """The queries (scaled by the path) and the layer's table: each block makes its position logits."""
        return q, self.embeddings[layer.index]

    def positions_read(self, keys: int) -> int:
        """Integer positions a block against ``keys`` keys can read: a count never exceeds the keys it sums."""
        return min(self.npos, keys + 1)

    def content_bias(self, content, logits, start, stop, keys):
        """Counts of the block's gates from each key to the query, the position logits interpolated at them.
        The block's logits of the integer positions ``q·e`` are made here, of the positions it can read
        only: never a ``(B, h, L, npos)`` tensor (npos = L + 1 by default)."""
        q, table = content
        positions = self.positions_read(keys)
        at = q[..., start:stop, :] @ table[:, :positions]  # (B, h, rows, positions)
        gates = torch.sigmoid(logits)  # (B, h, rows, keys), 0 on hidden keys
        counts = gates.flip(-1).cumsum(-1).flip(-1)  # p_ij = Σ_{t≥j} g_it (not in place: CUDA autocast sums in fp32)
        if positions == self.npos:  # a count may pass the table: clamp (else it cannot, and the pass is saved)
            counts = counts.clamp(max=self.npos - 1)
        below = counts.long()  # ⌊p⌋ (p >= 0); no gradient through the indices, as in the reference
        if torch.is_grad_enabled():
            above = (below + 1).clamp_(max=positions - 1)  # the ceiling where p is not whole (else its weight is 0)
            low, high = at.gather(-1, below), at.gather(-1, above)
            return low + counts.frac() * (high - low)  # (B, h, rows, keys): p − ⌊p⌋ of high, the rest of low
        return self._interpolated(at, counts, below)

    @staticmethod
    def _interpolated(at: torch.Tensor, counts: torch.Tensor, below: torch.Tensor) -> torch.Tensor:
        """The bias where no gradient is recorded, the same values in fewer passes: each position's step to the
        next, ``z[p + 1] − z[p]`` (0 after the last: ``high − low`` where the ceiling is clamped), made per
        query and gathered once, and the products and sums written into the tensors already made. Training
        keeps the two gathers: the steps would sum each position logit's gradient in another order. The steps
        are of the product's type (float32 counts under CUDA autocast: bf16 ``at`` would round the products)."""
        steps = torch.empty_like(at, dtype=torch.result_type(at, counts))  # (B, h, rows, positions)
        torch.sub(at[..., 1:], at[..., :-1], out=steps[..., :-1])
        steps[..., -1] = 0
        return steps.gather(-1, below).mul_(counts.frac_()).add_(at.gather(-1, below))  # (B, h, rows, keys)

    def bias_build_elements(self, q_len, k_len, training=False):
        """Per logit of a block: training keeps the gates, the counts' fractions, the two gathered logits and
        their difference (5), and per query its position logits; without a gradient, at the gathers, the gates,
        the counts, one int64 index (two elements), the gathered step and position logit (6), and per query its
        position logits and their steps."""
        positions = self.positions_read(k_len)
        if training:
            return self.n_heads * q_len * (k_len * 5 + positions)
        return self.n_heads * q_len * (k_len * 6 + 2 * positions)

    def content_flops(self, batch_size, q_len, k_len, mode):
        """Per layer: the position logits ``q·e`` (a matmul, ``2·B·h·q·d_head·positions``, the positions the
        keys can reach, :meth:`positions_read`: one block, as the counters run attention) and
        :data:`FORWARD_PER_LOGIT` per logit (inference: the steps' subtraction per query and position instead
        of per logit; the same count where every position is reachable, ``positions = keys + 1``). Training
        adds the matmul's two gradients; per logit the product's two gradients and two accumulation adds (the
        logits feed the gates and the sum, ``z⌊p⌋`` the difference and the sum); per query the accumulated
        gradients of its position logits (read by both gathers) and of its scaled query (read by the logits and
        ``q·e``, ``d_head``)."""
        logits, queries = batch_size * self.n_heads * q_len * k_len, batch_size * self.n_heads * q_len
        positions = self.positions_read(k_len)
        matmul = 2 * queries * self.d_head * positions
        if mode == "infer":  # the steps between the query's positions, then 3 per logit
            return self.n_layers * (matmul + queries * (positions - 1) + (FORWARD_PER_LOGIT - 1) * logits)
        forward = matmul + FORWARD_PER_LOGIT * logits
        return self.n_layers * (forward + 2 * matmul + 4 * logits + queries * (positions + self.d_head))


register("cope")(Cope)
