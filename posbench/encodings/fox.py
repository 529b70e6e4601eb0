"""FoX, the Forgetting Transformer (Lin et al., ICLR 2025): a forget gate per token and head, computed from
the layer's input, makes the logit bias the sum of log gates between key and query, a data-dependent ALiBi.

Per layer, head and token ``t``: ``f_t = σ(w·x_t + b)`` (a linear map of the layer's normalised input),
``λ_t = Σ_{s≤t} log f_s``, and the bias of query ``i`` and key ``j ≤ i`` is ``λ_i − λ_j = Σ_{j<s≤i} log f_s``:
every token between them multiplies the key's weight by its gate. No other position signal.

Follows the reference, zhixuan-lin/forgetting-transformer (MIT licence): ``fgate_proj = nn.Linear(hidden,
heads, bias=True)`` with PyTorch's default initialisation, ``log_fgate = logsigmoid(fgate_proj(x))``, and
its test's plain attention (``decay_bias = log_lambda[..., -M:, None] − log_lambda[..., None, :]``); also
x-transformers' ``DataDependentAlibi`` (MIT), whose second set of gates, summed in reverse, gives the keys
after the query in a bidirectional model (``λ'_j − λ'_i``). The project's code is its own.

Decoding keeps ``λ`` of every cached token per layer in the cache's ``states`` (as the reference's
``FgateDynamicCache`` keeps the log gates): a new token's ``λ`` continues from the last cached one.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from posbench.encodings.contextual import ContextualEncoding
from posbench.encodings.registry import register


class Fox(ContextualEncoding):
    """The forget gates of each layer: ``n_heads`` (causal), twice as many (bidirectional: the keys after)."""

    trained_positions = True
    content_reads = "input"

    def __init__(self, d_model: int, n_heads: int, max_len: int, causal: bool = False, *, n_layers: int = 1):
        super().__init__(d_model, n_heads, max_len, causal, n_layers=n_layers)
        self.directions = 1 if causal else 2
        self.gates = nn.ModuleList(nn.Linear(d_model, self.directions * n_heads) for _ in range(n_layers))

    def content(self, q, k, layer):
        """``λ`` of the queries and of the keys ``(B, h, q_len)``, ``(B, h, k_len)``; bidirectional, each
        direction's ``(B, 2h, L)``. With a cache, the keys' are the cached ones then the new tokens'."""
        log_gates = F.logsigmoid(self.gates[layer.index](layer.inputs)).transpose(1, 2)  # (B, h·directions, L)
        decay = log_gates.cumsum(-1)
        if layer.cache is not None:
            past = layer.cache.states[layer.index].get("fox")  # (B, h, T), T = 0 after truncate(0)
            if past is not None and past.shape[-1]:
                decay = decay + past[..., -1:]  # continue from the last cached token
            decay = layer.cache.extend_state(layer.index, "fox", decay)  # (B, h, T + L)
        return decay[..., decay.shape[-1] - q.shape[-2]:], decay

    def content_bias(self, content, logits, start, stop, keys):
        queries, key_decay = content[0][..., start:stop, None], content[1][..., None, :keys]
        if self.causal:
            return queries - key_decay  # (B, h, rows, keys): Σ_{j<s≤i} log f_s
        h = self.n_heads
        before = queries[:, :h] - key_decay[:, :h]  # keys up to the query: the forward gates
        after = key_decay[:, h:] - queries[:, h:]  # keys after it: the reverse gates, Σ_{i<s≤j} log f'_s
        j = torch.arange(keys, device=before.device)
        return torch.where(j > torch.arange(start, stop, device=before.device)[:, None], after, before)

    def content_flops(self, batch_size, q_len, k_len, mode):
        """Per layer: the gates' linear map (``2·B·L·d·gates``), per logit one subtraction per direction and
        the mask's add inside SDPA; with a cache, one add per new ``λ``. Training adds the map's two
        gradients, the accumulated gradient of the layer's input (read by q/k/v and by the gates) and of
        ``λ`` (read as queries and as keys; bidirectional, each of those in two halves too: three adds)."""
        gates, tokens = self.directions * self.n_heads, batch_size * q_len
        logits = batch_size * self.n_heads * q_len * k_len
        linear = 2 * tokens * self.d_model * gates
        forward = linear + (self.directions + 1) * logits + (batch_size * gates * q_len if k_len > q_len else 0)
        if mode == "infer":
            return self.n_layers * forward
        accumulated = (2 * self.directions - 1) * batch_size * gates * q_len
        return self.n_layers * (forward + 2 * linear + tokens * self.d_model + accumulated)


register("fox")(Fox)
