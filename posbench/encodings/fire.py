"""FIRE (Li et al. 2024): the logit bias is a small MLP of the log distance, normalised by the
query's own position, ``B[h, i, j] = f_θ(ψ(i − j) / ψ(max(L, i)))_h`` with ``ψ(x) = log(c·x + 1)``.

Because the normaliser depends on ``i``, the bias is *not* a function of ``i − j`` alone: FIRE has no
``(h, 2L − 1)`` table and goes through attention's general-bias path. Learned: the MLP (1 → hidden →
heads, ReLU), ``c`` and the threshold ``L`` (both used as absolute values, so they stay positive);
bidirectional models read ``|i − j|``.

The MLP acts on each pair's feature alone, so it runs once per pair a query can see (causal: the lower
triangle) rather than over all ``q × k``, in slices that keep its hidden layer in cache and write into
buffers made once, and the bias is gathered contiguous, ``-inf`` at future keys included, so that every
layer's attention reads the one mask as it is: the MLP's cost grows with the pairs a query sees, not with
``q × k``, and no layer copies the bias.
"""

from __future__ import annotations

import torch
from torch import nn

from posbench.encodings.base import PositionalEncoding
from posbench.encodings.registry import register
from posbench.positions import Positions

MLP_SLICE = 8192  # pairs per MLP call: its (hidden, slice) layer stays in a core's cache, not in memory


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

    @property
    def hides_future_keys(self) -> bool:
        """Causal, the bias is ``-inf`` at keys after the query (:meth:`attention_bias`)."""
        return self.causal

    def attention_bias(self, query: Positions, key: Positions) -> torch.Tensor:
        """The MLP runs once per pair a query can see (causal: keys up to its own token, the lower
        triangle; else every pair) and the ``(h, q, k)`` bias is gathered from its outputs, contiguous so
        that attention reads it without copying, with ``-inf`` already at the keys after the query
        (:attr:`hides_future_keys`): no masked copy of the bias. Queries are the last ``len(query)`` keys."""
        q_len, k_len = len(query), len(key)
        last_key = k_len - q_len if self.causal else k_len  # row r sees keys up to r + last_key (or all)
        features = self.features(query, key).flatten()  # (q·k,)
        if last_key >= k_len - 1:  # every query sees every key (a decode step, bidirectional)
            return self.mlp_over_slices(features, hidden_key=False).view(self.n_heads, q_len, k_len)  # (h, q, k)
        index_dtype = torch.int32 if q_len * k_len < 2**31 else torch.long  # half the memory of int64 indices
        rows, cols = torch.tril_indices(q_len, k_len, last_key, device=key.ids.device, dtype=index_dtype)
        taken = features[rows * k_len + cols]  # (pairs,)
        del features, rows, cols  # not held while the MLP runs
        values = self.mlp_over_slices(taken, hidden_key=True)  # (h, pairs + 1)
        index = self.pair_index(q_len, k_len, last_key, key.ids.device, index_dtype)  # (q, k)
        return values.index_select(1, index.flatten()).view(self.n_heads, q_len, k_len)  # (h, q, k)

    def features(self, query: Positions, key: Positions) -> torch.Tensor:
        """``ψ(i − j) / ψ(max(L, i))`` of every query and key ``(q, k)``: in [0, 1] up to the threshold. On the
        whole grid by broadcasting (a few passes over ``q·k``) rather than per pair of the causal half
        (gathers of ids by pair, slower); the distance is integer arithmetic, free under the FLOP convention."""
        c = self.c.abs()
        distance = query.ids[:, None] - key.ids[None, :]  # (q, k) integer
        distance = (distance.abs() if not self.causal else distance.clamp(min=0)).to(c.dtype)
        normaliser = torch.log1p(c * torch.maximum(query.ids.to(c.dtype), self.threshold.abs()))  # (q,)
        return torch.log1p(c * distance) / normaliser[:, None]  # (q, k)

    def mlp_over_slices(self, features: torch.Tensor, hidden_key: bool) -> torch.Tensor:
        """``(pairs,)`` -> ``(h, pairs)``, and a last column of ``-inf`` if ``hidden_key`` (what the keys after a
        query gather). Without autograd, :data:`MLP_SLICE` pairs at a time: each slice's hidden layer
        ``(hidden, slice)`` is written into one buffer, which stays in a core's cache, and its output into
        its columns of the result, by ``addmm`` with ``out=``. Over all pairs at once the hidden layer is
        hundreds of MB, and new tensors per slice would cost a page fault per 4 KiB on first touch (the
        slices' ``cat``, ReLU and bias copies). Under autograd in one call: the backward keeps every hidden layer
        anyway, and slices would add up their weight gradients (adds the FLOP count would have to follow)."""
        first, second = self.mlp[0], self.mlp[2]  # Linear(1, hidden), ReLU, Linear(hidden, h)
        if torch.is_grad_enabled():  # addmm's out= records no gradient
            columns = [self.mlp(features[:, None]).T]  # (h, pairs)
            if hidden_key:
                columns.append(features.new_full((self.n_heads, 1), float("-inf")))
            return torch.cat(columns, dim=1)  # joined and transposed in one copy
        pairs = len(features)
        values = features.new_empty(self.n_heads, pairs + hidden_key)  # (h, pairs [+ 1])
        values[:, pairs:] = float("-inf")
        hidden = features.new_empty(self.hidden, min(pairs, MLP_SLICE))  # (hidden, slice)
        for start in range(0, pairs, MLP_SLICE):
            part = features[None, start:start + MLP_SLICE]  # (1, slice)
            layer = hidden[:, :part.shape[1]]
            torch.addmm(first.bias[:, None], first.weight, part, out=layer).relu_()
            torch.addmm(second.bias[:, None], second.weight, layer, out=values[:, start:start + part.shape[1]])
        return values

    @staticmethod
    def pair_index(q_len: int, k_len: int, last_key: int, device, dtype: torch.dtype) -> torch.Tensor:
        """``(q, k)`` position in ``tril_indices(q, k, last_key)``'s row-major pairs of each query and key;
        keys past a row's last one point past every pair, at :meth:`mlp_over_slices`' ``-inf`` column."""
        r = torch.arange(q_len, device=device, dtype=dtype)[:, None]  # (q, 1)
        seen = (r + last_key + 1).clamp(max=k_len)  # (q, 1) keys row r sees
        start = seen.cumsum(0, dtype=dtype) - seen  # (q, 1) where row r's pairs begin
        key = torch.arange(k_len, device=device, dtype=dtype)  # (k,)
        return torch.where(key < seen, start + key, start[-1] + seen[-1])  # (q, k)

    @staticmethod
    def pairs(q_len: int, k_len: int, causal: bool) -> int:
        """Pairs the MLP runs on: the queries (the last ``q_len`` keys) each up to their own token when causal."""
        return q_len * k_len - (q_len * (q_len - 1) // 2 if causal else 0)

    def bias_flops(self, q_len: int, k_len: int, mode: str) -> int:
        """The MLP's two matmuls (``2·hidden`` and ``2·hidden·h``) per pair it runs on (:meth:`pairs`); the
        features are free under the convention (integer distances, multiplies by the scalar ``c``, a
        division). The backward: twice the matmuls, and two multiplies per query and key and one per
        query (``c``'s gradient through the distance, the division's through its normaliser, and ``c``'s
        through the normaliser). The gathers of pairs and of ``(h, q, k)`` are free."""
        matmuls = 2 * self.hidden * (1 + self.n_heads) * self.pairs(q_len, k_len, self.causal)
        return matmuls if mode == "infer" else 3 * matmuls + 2 * q_len * k_len + q_len

    def bias_build_elements(self, q_len: int, k_len: int, training: bool = False) -> int:
        """At the build's peak, while the MLP runs: the features of the pairs it runs on (:meth:`pairs`; the
        grid of every query and key they were taken from is freed by then, and is smaller than the output
        from 2 heads on), its output ``(h, pairs)`` with the ``-inf`` column, and one slice's hidden layer; in
        training (one call, :meth:`mlp_over_slices`) the pairs' features and the hidden layer before and after
        the ReLU over every pair. Not counted: the pair indices and the ``(q, k)`` tensors of the features that
        training keeps."""
        pairs = self.pairs(q_len, k_len, self.causal)
        if training:
            return pairs * (1 + 2 * self.hidden)
        hidden_column = pairs < q_len * k_len
        return pairs * (1 + self.n_heads) + self.n_heads * hidden_column + min(pairs, MLP_SLICE) * self.hidden


register("fire")(Fire)
