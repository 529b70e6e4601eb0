"""The fourth hook: position computed from content, inside every layer.

The first three hooks read position ids, so they run once per forward pass and every layer shares
their result. The schemes since 2024 compute position from what the layer sees instead:

* CoPE (``cope``) counts: key ``j``'s position for query ``i`` is a sum of gates ``σ(q_i·k_t)`` over the
  keys from ``j`` to ``i``, and the bias interpolates a learned per-position logit at that count;
  it reads the layer's own logits (``reads = "qk"``).
* FoX (``fox``) forgets: a gate per token and head from the layer's input, the bias the sum of log
  gates between key and query, a data-dependent ALiBi (``reads = "input"``).
* Stick-breaking attention (``stick_breaking``) replaces softmax: each key takes a sigmoid share of
  what the keys nearer the query left (``attention = "stick_breaking"``); no bias at all.
* PaTH (``path``) transforms: key ``j`` reaches query ``i`` through ``H_i ⋯ H_{j+1}``, Householder-like
  matrices ``I − β_t w_t w_tᵀ`` of the tokens' inputs, so its logit ``q_iᵀ H_i ⋯ H_{j+1} k_j`` replaces
  ``q·kᵀ``; it reads the logits (``reads = "qk"``): its bias is the transformed logits minus the plain ones.

The design, which every such encoding follows:

1. **Traits say what the encoding needs**, never its name: ``hook = "contextual"``; ``reads``, ``qk``
   (the block's logits) or ``input`` (the layer's normalised input); ``attention``, ``softmax`` or
   ``stick_breaking``. :func:`posbench.attention.choose_path` reads them: a softmax whose bias reads the
   input goes through SDPA with that bias as its mask (``contextual_bias``); anything else materialises
   the logits block by block of queries (``contextual_logits``), adds the bias, and turns them into
   weights with softmax or stick-breaking. The other three hooks' paths are untouched.
2. **Two methods, two granularities.** :meth:`~posbench.encodings.base.PositionalEncoding.content` runs
   once per layer and forward pass on the layer's queries, keys and :class:`~posbench.encodings.base.LayerInput`
   (its input, its index, the KV cache) and returns what the encoding derives from the whole sequence
   (FoX's cumulative gates, CoPE's logits of every integer position);
   :meth:`~posbench.encodings.base.PositionalEncoding.content_bias` turns that into the bias of one block
   of queries, reading the block's logits when it needs them. Blocks are the attention paths' own (causal:
   each up to its last query), so the bias never exists for the whole ``(B, h, L, L)`` at once.
3. **Parameters are per layer**, as in every reference: a contextual encoding declares ``per_layer`` and
   the registry passes it the model's depth (``n_layers``); ``LayerInput.index`` picks the layer's own.
4. **Decoding** keeps whatever the encoding derives per token in :class:`~posbench.cache.KVCache`'s
   per-layer ``states`` (token axis last), so a cached step equals the full forward: FoX its cumulative
   gates; CoPE and stick-breaking need only the cached keys (a query's counts run over them). PaTH's state is
   the cached keys themselves, carried through every later token: it replaces them
   (:meth:`~posbench.cache.KVCache.rewrite_keys`) and declares ``rewrites_cache``, so ``KVCache.truncate``
   refuses to cut such a cache back and the decode bench runs each step on the prefilled cache instead.
5. **FLOPs**: whatever the path adds to the attention matmuls (the bias add, the encoding's own
   arithmetic and projections, stick-breaking's remainder), over all layers, is declared by
   :meth:`~posbench.encodings.base.PositionalEncoding.content_flops`; :mod:`posbench.flops` adds it as its
   ``position_content`` term and the two library counters must agree with it.

A bidirectional model runs each reference's computation without its causal mask (FoX: x-transformers'
second set of gates for the keys after the query).

PaTH attention (Yang et al. 2025, :mod:`posbench.encodings.path`) runs on this design unchanged: its
``content`` splits the tokens into chunks of 64 in the reference's UT form and keeps, per chunk, the queries
turned back to its first token and the keys before it carried there; ``content_bias`` turns those into the block's
transformed logits minus the plain ones. Its FLOPs, chunked, are not a quadratic in the length
(``quadratic_flops``), so :func:`posbench.flops.count_flops` counts it at full length.
"""

from __future__ import annotations

from posbench.encodings.base import PositionalEncoding


class ContextualEncoding(PositionalEncoding):
    """Base of the fourth hook's encodings: its parameters are per layer, ``n_layers`` of them."""

    hook = "contextual"
    per_layer = True
    content_reads = "qk"  # what the hook computes from: qk | input (the ``reads`` trait)

    def __init__(self, d_model: int, n_heads: int, max_len: int, causal: bool = False, *, n_layers: int = 1):
        super().__init__(d_model, n_heads, max_len, causal)
        self.n_layers = n_layers

    @property
    def reads(self) -> str:
        return self.content_reads

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, n_layers={self.n_layers}, causal={self.causal}"
