"""FIRE (Li et al. 2024): the logit bias is a small MLP of the log distance, normalised by the
query's own position, ``B[h, i, j] = f_θ(ψ(i − j) / ψ(max(L, i)))_h`` with ``ψ(x) = log(c·x + 1)``.

Because the normaliser depends on ``i``, the bias is *not* a function of ``i − j`` alone: FIRE has no
``(h, 2L − 1)`` table and goes through attention's general-bias path. Learned: the MLP (1 → hidden →
heads, ReLU), ``c`` and the threshold ``L`` (both used as absolute values, so they stay positive);
bidirectional models read ``|i − j|``.

The MLP acts on each pair's feature alone, so it runs once per pair a query can see (causal: the lower
triangle) rather than over all ``q × k``, in slices that keep its hidden layer in cache, and the bias is
gathered contiguous so that every layer's attention reads the one mask as it is: P1 (``bench --parts
overhead``) had FIRE at 3.4× NoPE's forward when the MLP ran over every pair and each layer copied a
heads-innermost mask.
"""

from __future__ import annotations

import torch
from torch import nn

from posbench.encodings.base import PositionalEncoding
from posbench.encodings.registry import register
from posbench.positions import Positions

MLP_SLICE = 8192  # pairs per MLP call: its (slice, hidden) layer stays in a core's cache, not in memory


class Fire(PositionalEncoding):
    """Family options: ``hidden`` (32), ``init_c`` (0.1), ``init_threshold`` (512)."""

    hook = "logits"
    trained_positions = True

    def __init__(self, d_model: int, n_heads: int, max_len: int, causal: bool = False, *,
                 hidden: int = 32, init_c: float = 0.1, init_threshold: float = 512.0):
        super().__init__(d_model, n_heads, max_len, causal)
        self.hidden = hidden
        self.mlp = nn.Sequential(nn.Linear(1, hidden), nn.ReLU(), nn.Linear(hidden, n_heads))
        self.c = nn.Parameter(torch.tensor(init_c))
        self.threshold = nn.Parameter(torch.tensor(init_threshold))

    def attention_bias(self, query: Positions, key: Positions) -> torch.Tensor:
        """The MLP runs once per pair a query can see (causal: keys up to its own token, the lower
        triangle; else every pair) and the ``(h, q, k)`` bias is gathered from its outputs, contiguous so
        that attention reads it without copying. A key after the query (masked anyway) reads the query's
        own offset 0, as ``max(i − j, 0)`` gives on ordered ids. Queries are the last ``len(query)`` keys."""
        q_len, k_len = len(query), len(key)
        last_key = k_len - q_len if self.causal else k_len  # row r sees keys up to r + last_key (or all)
        whole_grid = last_key >= k_len - 1  # every query sees every key (a decode step, bidirectional)
        index_dtype = torch.int32 if q_len * k_len < 2**31 else torch.long  # half the memory of int64 indices
        values = self.mlp_over_slices(self.features(query, key, last_key, whole_grid, index_dtype))  # (h, pairs)
        if whole_grid:
            return values.view(self.n_heads, q_len, k_len)  # (h, q, k)
        index = self.pair_index(q_len, k_len, last_key, key.ids.device, index_dtype)  # (q, k)
        return values.index_select(1, index.flatten()).view(self.n_heads, q_len, k_len)  # (h, q, k)

    def features(self, query: Positions, key: Positions, last_key: int, whole_grid: bool,
                 index_dtype: torch.dtype) -> torch.Tensor:
        """``ψ(i − j) / ψ(max(L, i))`` of the pairs ``tril_indices(q, k, last_key)``, row-major: in [0, 1] up
        to the threshold. The whole grid broadcasts instead: no index tensors (a decode step's few ops)."""
        c = self.c.abs()
        i, j = query.ids.to(c.dtype), key.ids.to(c.dtype)  # (q,), (k,)
        normaliser = torch.log1p(c * torch.maximum(i, self.threshold.abs()))  # (q,)
        if whole_grid:
            i, j, normaliser = i[:, None], j[None, :], normaliser[:, None]  # (q, 1), (1, k), (q, 1)
        else:
            rows, cols = torch.tril_indices(len(query), len(key), last_key, device=key.ids.device, dtype=index_dtype)
            i, j, normaliser = i[rows], j[cols], normaliser[rows]  # (pairs,) each
        distance = i - j
        distance = distance.abs() if not self.causal else distance.clamp(min=0)
        return (torch.log1p(c * distance) / normaliser).flatten()  # (pairs,)

    def mlp_over_slices(self, features: torch.Tensor) -> torch.Tensor:
        """``(pairs,)`` -> ``(h, pairs)``, :data:`MLP_SLICE` pairs per call: over all pairs at once the
        hidden layer is hundreds of MB, written and read back through memory three times. Under autograd
        in one call: the backward keeps every hidden layer anyway, and slices would add up their weight
        gradients (adds the FLOP count would have to follow, in steps of the slice, not of the length)."""
        parts = (features,) if features.requires_grad else features.split(MLP_SLICE)
        return torch.cat([self.mlp(part[:, None]).T for part in parts], dim=1)  # joined and transposed in one copy

    @staticmethod
    def pair_index(q_len: int, k_len: int, last_key: int, device, dtype: torch.dtype) -> torch.Tensor:
        """``(q, k)`` position in ``tril_indices(q, k, last_key)``'s row-major pairs of each query and key;
        keys past a row's last one point at that last one (causal: the query's own token, offset 0)."""
        r = torch.arange(q_len, device=device, dtype=dtype)[:, None]  # (q, 1)
        seen = (r + last_key + 1).clamp(max=k_len)  # (q, 1) keys row r sees
        start = seen.cumsum(0, dtype=dtype) - seen  # (q, 1) where row r's pairs begin
        return start + torch.arange(k_len, device=device, dtype=dtype).clamp(max=seen - 1)  # (q, k)

    @staticmethod
    def pairs(q_len: int, k_len: int, causal: bool) -> int:
        """Pairs the MLP runs on: the queries (the last ``q_len`` keys) each up to their own token when causal."""
        return q_len * k_len - (q_len * (q_len - 1) // 2 if causal else 0)

    def bias_flops(self, q_len: int, k_len: int, mode: str) -> int:
        """Per pair the MLP runs on (:meth:`pairs`): the ``i − j`` subtraction and the MLP's two matmuls
        (``2·hidden`` and ``2·hidden·h``); multiplies by the scalar ``c`` are free under the convention. The
        backward: twice the matmuls, two multiplies per pair and one per query (``c``'s gradient through
        the distance and the normaliser). The gathers of pairs and of ``(h, q, k)`` are free."""
        pairs = self.pairs(q_len, k_len, self.causal)
        matmuls = 2 * self.hidden * (1 + self.n_heads) * pairs
        forward = pairs + matmuls
        return forward if mode == "infer" else forward + 2 * matmuls + 2 * pairs + q_len

    def bias_build_elements(self, q_len: int, k_len: int, training: bool = False) -> int:
        """At the build's peak, per pair the MLP runs on (:meth:`pairs`): its input and its output twice
        (the slices and their joined, transposed copy), with one slice's hidden layer
        before and after its ReLU; in training (one call, :meth:`mlp_over_slices`) its input and its hidden
        layer before and after the ReLU over every pair. Not counted: the pair indices (freed before the
        MLP runs) and the per-pair tensors of the features that training keeps."""
        pairs = self.pairs(q_len, k_len, self.causal)
        if training:
            return pairs * (1 + 2 * self.hidden)
        return pairs * (1 + 2 * self.n_heads) + 2 * min(pairs, MLP_SLICE) * self.hidden


register("fire")(Fire)
