"""PaTH attention (Yang et al. 2025): keys reach a query through the data-dependent Householder-like
transformations of every token between them, so position is the product of what lies in between.

Per layer, head and token ``t``: a unit vector ``w_t`` and a strength ``β_t ∈ (0, 2)`` from the layer's
normalised input, ``H_t = I − β_t w_t w_tᵀ``, and the logit of query ``i`` and key ``j ≤ i`` is
``q_iᵀ H_i H_{i−1} ⋯ H_{j+1} k_j / √d`` (the key's own ``H_j`` is not in it, the query's ``H_i`` is), softmax
as usual. No other position signal.

Follows the reference, fla-org/flash-linear-attention (MIT licence): the layer ``fla/layers/path_attn.py``
(``w_proj`` a low-rank ``d → 32 → d`` map without biases, ``w`` L2-normalised per head, ``β = 2·σ(bt_proj(x))``
from a per-head linear map with a bias: one ``w`` and ``β`` per head and token; no forget gate) and its plain-PyTorch
``naive_path_attn`` (``fla/ops/path_attn/naive.py``, called by ``tests/ops/test_path_attn.py``): the UT
transform of each chunk of 64 tokens, ``T = (I + strictly_lower(diag(β) W Wᵀ))⁻¹``, gives the chunk's
logits, its queries turned back to the chunk's first token, its keys carried to its last and the chunk's
whole product ``I − Wᵀ T diag(β) W``. The project's code is its own. ``w`` goes through the reference's
default short convolution (``use_w_shortconv``: depthwise over the last 3 tokens, causal, no bias, SiLU)
before its normalisation; decoding keeps its last 2 inputs in the cache's ``states``. Linear maps start at
PyTorch's default initialisation (the reference's model re-initialises every linear map ``N(0, 0.02²)``).

How it runs on the fourth hook (:mod:`posbench.encodings.contextual`): a ``qk`` encoding on the
``contextual_logits`` path. :meth:`Path.content` splits the layer's new tokens into chunks and keeps, per
chunk, the queries turned back to its first token, the bias inside it (both made for every chunk at once)
and the keys before it carried to it (the *key state*, what a KV cache would hold at that token: carried
chunk by chunk, the one sequential step); :meth:`Path.content_bias` gives a block of queries PaTH's logits
minus the plain ones the path made. The key states are ``O(L² d / 64)`` per layer, not
the ``O(L² d)`` of keys carried to every query. The chunk's inverse is a recursive 2 × 2 block inversion
(:func:`unit_lower_inverse`): matmuls, which the FLOP counters count, and no division. Its forward's cost against
none's is measured by ``bench --parts overhead``, not judged here.

Decoding: the cache holds the key state itself. When a token arrives, every cached key is carried through
its ``H`` (the reference's ``rank_one_update`` of ``past_k``) and its own key is appended as it is: a prompt's
chunks replace the cached keys (:meth:`~posbench.cache.KVCache.rewrite_keys`), a decode step of one token
rewrites them in place in the cache's buffer (:meth:`Path.carry_keys`, the ``carried`` attention path), after
which the plain ``q·kᵀ`` is PaTH's logit, the query's ``H_i`` being in every one of them. An earlier state
cannot be recovered from that, so such a cache cannot be truncated (``rewrites_cache``). A bidirectional model,
which the reference does not define, runs the same computation on the reversed sequence for the keys after the
query: ``q_iᵀ H_i ⋯ H_{j−1} k_j``.
Its FLOPs are not a quadratic in ``L`` (64-token chunks), so the counters run it at full length
(``quadratic_flops``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from posbench.encodings.base import LayerInput
from posbench.encodings.contextual import ContextualEncoding
from posbench.encodings.registry import register

CHUNK = 64  # tokens per UT transform, the reference's chunk size
LOW_RANK = 32  # the reference's w_proj: d -> 32 -> d
NORM_EPS = 1e-6  # the reference's l2_norm epsilon, added to the squared norm
CONV_SIZE = 3  # the reference's short convolution over w: depthwise, causal, no bias, then SiLU


@dataclass(frozen=True)
class Chunks:
    """One direction of a layer's PaTH, per chunk of its new tokens: ``starts`` (its first token among the
    queries), ``queries (B, h, m, d)`` turned back to that token, ``states (B, h, T + start, d)`` the keys
    before it carried to it (``T`` cached keys first), ``inner (B, h, m, m)`` the bias inside the chunk."""

    starts: list[int]
    queries: list[torch.Tensor]
    states: list[torch.Tensor]
    inner: list[torch.Tensor]


class Path(ContextualEncoding):
    """Per layer: ``w``'s low-rank map and short convolution, and ``β``'s map to one strength per head."""

    trained_positions = True
    content_reads = "qk"
    rewrites_cache = True
    quadratic_flops = False

    def __init__(self, d_model: int, n_heads: int, max_len: int, causal: bool = False, *, n_layers: int = 1):
        super().__init__(d_model, n_heads, max_len, causal, n_layers=n_layers)
        self.w_down = nn.ModuleList(nn.Linear(d_model, LOW_RANK, bias=False) for _ in range(n_layers))
        self.w_up = nn.ModuleList(nn.Linear(LOW_RANK, d_model, bias=False) for _ in range(n_layers))
        self.strengths = nn.ModuleList(nn.Linear(d_model, n_heads) for _ in range(n_layers))
        bound = CONV_SIZE ** -0.5  # nn.Conv1d's default initialisation at fan-in CONV_SIZE (one channel a group)
        self.conv = nn.ParameterList(nn.Parameter(torch.empty(d_model, CONV_SIZE).uniform_(-bound, bound))
                                     for _ in range(n_layers))

    def directions(self, layer: LayerInput) -> tuple[torch.Tensor, torch.Tensor]:
        """``w (B, h, L, d)`` unit vectors and ``β (B, h, L)`` in (0, 2) of the layer's input ``(B, L, d_model)``:
        ``w`` the low-rank map, then the short convolution and SiLU, then L2-normalised per head."""
        x, index = layer.inputs, layer.index
        w = F.silu(self.convolved(self.w_up[index](self.w_down[index](x)), layer))
        w = w.unflatten(-1, (self.n_heads, self.d_head)).transpose(1, 2)
        w = w * torch.rsqrt((w * w).sum(-1, keepdim=True) + NORM_EPS)
        return w, 2 * torch.sigmoid(self.strengths[index](x)).transpose(1, 2)

    def convolved(self, u: torch.Tensor, layer: LayerInput) -> torch.Tensor:
        """The causal depthwise convolution of ``u (B, L, d_model)`` over the last :data:`CONV_SIZE` tokens, as
        multiplies and adds (the counters see them; a convolution op fvcore's handles would miss). The tokens
        before the first are zeros, or with a cache the last ones it saw (its state ``path_conv``, ``(B, d, 2)``)."""
        weight, past = self.conv[layer.index], CONV_SIZE - 1  # (d_model, CONV_SIZE)
        state = None if layer.cache is None else layer.cache.states[layer.index].get("path_conv")
        if state is None or not state.shape[-1]:  # none yet, or truncated to 0
            padded = F.pad(u, (0, 0, past, 0))  # (B, past + L, d_model)
        else:
            padded = torch.cat([state.transpose(1, 2), u], dim=1)
        if layer.cache is not None:
            layer.cache.states[layer.index]["path_conv"] = padded[:, -past:].transpose(1, 2)
        length = u.shape[1]
        out = padded[:, :length] * weight[:, 0]
        for tap in range(1, CONV_SIZE):
            out = out + padded[:, tap:tap + length] * weight[:, tap]
        return out

    def content(self, q, k, layer):
        """Both directions' :class:`Chunks` (the second ``None`` when causal); with a cache, its keys become
        every key carried through the new tokens."""
        w, beta = self.directions(layer)
        forward, state = chunks(q, k, w, beta, carry=layer.cache is not None)
        if layer.cache is not None:
            layer.cache.rewrite_keys(layer.index, state)
        if self.causal:
            return forward, None
        return forward, chunks(q.flip(-2), k.flip(-2), w.flip(-2), beta.flip(-1), carry=False)[0]

    def carry_keys(self, k, layer):
        """A decode step (the ``carried`` path): the cached keys ``k[..., :-1, :]`` carried through the new token's
        ``H = I − β w wᵀ`` in place, ``k_j − β (k_j·w) w``, one batched rank-one update per head in the cache's
        buffer; the new key, last, stays as it is. Refused where autograd records: a graph cannot hold a tensor
        rewritten in place."""
        if torch.is_grad_enabled():
            raise RuntimeError("PaTH's decode step rewrites the cached keys in place; run it under torch.no_grad() "
                               "or torch.inference_mode()")
        w, beta = self.directions(layer)  # (B, h, 1, d), (B, h, 1)
        B, h, keys, d = k.shape
        cached = k[..., :-1, :].view(B * h, keys - 1, d)  # a view of the cache's buffer: the update lands there
        w = w.view(B * h, 1, d)
        cached.baddbmm_(cached @ w.mT, beta.view(B * h, 1, 1) * w, alpha=-1)  # (B·h, T, 1) @ (B·h, 1, d)
        layer.cache.keys_carried()

    def content_bias(self, content, logits, start, stop, keys):
        forward, backward = content
        bias = chunk_bias(forward, logits, start, stop, keys)
        if backward is None:
            return bias
        q_len = backward.starts[-1] + backward.queries[-1].shape[-2]  # bidirectional: one block of every query
        reverse = chunk_bias(backward, logits.flip(-2, -1), q_len - stop, q_len - start, keys)
        return bias + reverse.flip(-2, -1)

    def bias_build_elements(self, q_len, k_len, training=False):
        """Per block: the turned queries against the key states and the padded rows (two of the bias's size),
        each chunk's queries and inner bias; per layer the key states of every chunk (``h·d·Σ s``)."""
        states = sum(start * self.d_head for start in range(0, k_len, CHUNK))
        return self.n_heads * (2 * q_len * k_len + q_len * (self.d_head + min(CHUNK, q_len)) + states)

    def content_flops(self, batch_size, q_len, k_len, mode):
        """Per layer: the maps to ``w`` and ``β`` (``2·B·L·d·(2·32 + h)``), the convolution (3 multiplies and 2
        adds per element), ``w``'s normalisation (a square and a scale per element), each direction's chunks
        (:func:`chunk_flops`), the bias add per logit and, bidirectional, the two directions' sum. Training
        adds the maps' gradients; the convolution's (each multiply's two, SiLU's backward, which torch runs as
        three multiplies and a subtraction per element, and accumulation adds: the padded input read by 3
        taps, the weight by 3); the normalisation's (its two multiplies' gradients, ``rsqrt``'s per vector,
        ``w`` read three times: two adds); and one accumulation add per extra read of a tensor: the layer's
        input (read by q/k/v, ``w`` and ``β``), the scaled queries, the keys and the logits (read by the path
        and by the chunks; bidirectional once more, reversed, like ``w`` and ``β``)."""
        B, h, d = batch_size, self.n_heads, self.d_head
        reverse = 0 if self.causal else 1
        cached = k_len - q_len
        vectors, logits = B * h * q_len, B * h * q_len * k_len
        tokens = B * q_len * self.d_model
        maps = 2 * tokens * (2 * LOW_RANK + h)
        directions = maps + (2 * CONV_SIZE - 1) * tokens + 2 * vectors * d
        if self.causal and q_len == 1 and cached:  # a decode step on the carried path: β·w, k·w, the update
            return self.n_layers * (directions + vectors * d + 2 * vectors * cached * d + 3 * vectors * cached * d)
        chunked = chunk_flops(B * h, q_len, cached, d, cached > 0, mode)
        forward = directions + (1 + reverse) * (chunked + logits)
        if mode == "infer":
            return self.n_layers * forward
        convolution = (2 * CONV_SIZE + 4) * tokens + (CONV_SIZE - 1) * (B * (q_len + CONV_SIZE - 1) * self.d_model
                                                                        + CONV_SIZE * self.d_model)
        normalised = 6 * vectors * d + vectors
        extra_reads = 2 * tokens + (1 + reverse) * (vectors * d + B * h * k_len * d + logits) + reverse * (
            vectors * d + vectors)
        return self.n_layers * (forward + 2 * maps + convolution + normalised + extra_reads)


def chunks(q, k, w, beta, carry: bool):
    """:class:`Chunks` of queries ``q (B, h, Lq, d)`` (scaled) against keys ``k (B, h, T + Lq, d)`` (the first
    ``T`` cached, already carried to the first query) with ``w (B, h, Lq, d)`` and ``β (B, h, Lq)``, and with
    ``carry`` the key state after the last token, every key carried through every new token (else ``None``).
    What is local to a chunk runs for all chunks at once (:func:`ut_transform`, per :func:`chunk_groups`); only
    the key state goes chunk by chunk. Each input is split once (one read, so the backward joins the chunks'
    gradients without adding them)."""
    q_len = int(q.shape[-2])  # ints under tracing too (fvcore)
    cached = int(k.shape[-2]) - q_len
    groups = chunk_groups(q_len)
    spans = [n * m for n, m in groups]
    state, *keys = k.split([cached, *spans], dim=-2)  # (B, h, T, d): the cached keys, then each group's
    out = Chunks(list(range(0, q_len, CHUNK)), [], [], [])
    steps = []  # per chunk: the key state after it, from the state before it (None: not needed)
    for index, ((n, m), queries, own, directions, strengths) in enumerate(
            zip(groups, q.split(spans, -2), keys, w.split(spans, -2), beta.split(spans, -1))):
        carrying = carry or index < len(groups) - 1 or n > 1
        turned, inner, group_steps = ut_transform(*(t.unflatten(-2, (n, m)) for t in (queries, own, directions)),
                                                  strengths.unflatten(-1, (n, m)), carrying)
        out.queries.extend(turned.unbind(-3))
        out.inner.extend(inner.unbind(-3))
        steps.extend(group_steps)
    for index, step in enumerate(steps):
        out.states.append(state)
        if carry or index < len(steps) - 1:
            state = step(state)
    return out, state if carry else None


def chunk_groups(q_len: int) -> list[tuple[int, int]]:
    """``(chunks, tokens each)``: the whole chunks of :data:`CHUNK` tokens, then the rest as one shorter chunk."""
    whole, rest = divmod(q_len, CHUNK)
    return [(count, size) for count, size in ((whole, CHUNK), (1, rest)) if count and size]


def ut_transform(q, k, w, beta, carrying: bool):
    """``n`` chunks of ``m`` tokens at once: ``q, k, w (B, h, n, m, d)``, ``β (B, h, n, m)`` -> the queries turned
    back to their chunk's first token ``(B, h, n, m, d)``, the bias inside each chunk ``(B, h, n, m, m)`` (the
    reference's naive form) and, ``carrying``, per chunk the key state after it as a function of the state
    before it (``(…, s, d)`` -> ``(…, s + m, d)``: every key carried through the chunk's every ``H``, the chunk's
    own keys carried to its last token)."""
    n, m, d = (int(size) for size in w.shape[-3:])
    scaled = w * beta[..., None]  # β_t w_t
    inverse = unit_lower_inverse((scaled @ w.mT).tril(-1))  # T = (I + strictly_lower(β_t w_t·w_s))⁻¹
    through = (q @ w.mT).tril()  # q_i·w_t for t <= i
    reaching = inverse @ (scaled @ k.mT).tril(-1)  # (m, m): what H_t takes of key j < t, through T
    basis = inverse @ scaled  # (m, d): the chunk's product is I − wᵀ·basis
    turned, inner = q - through @ basis, -(through @ reaching)
    if not carrying:
        return turned, inner, [None] * n
    own = (k - reaching.mT @ w).unbind(-3)  # (B, h, m, d) each chunk's keys carried to its last token
    if 2 * m < d:  # a few tokens (decoding): two thin matmuls per state
        return turned, inner, [functools.partial(carry_thin, *parts) for parts in zip(basis.unbind(-3), w.unbind(-3),
                                                                                      own)]
    products = (w.mT @ basis).mT.unbind(-3)  # (B, h, d, d) each chunk's wᵀ·basis, transposed
    return turned, inner, [functools.partial(carry_dense, *parts) for parts in zip(products, own)]


def carry_thin(basis, w, own, state):
    """The state ``(…, s, d)`` through a chunk's product ``I − wᵀ·basis``, its own keys after it."""
    return torch.cat([state - (state @ basis.mT) @ w, own], dim=-2)


def carry_dense(product, own, state):
    """The same with the product ``wᵀ·basis`` formed (transposed): one ``(s, d, d)`` matmul."""
    return torch.cat([state - state @ product, own], dim=-2)


def unit_lower_inverse(strict: torch.Tensor) -> torch.Tensor:
    """``(I + strict)⁻¹`` of a strictly lower triangular ``(…, m, m)``: the 2 × 2 block inversion, inverting
    the diagonal blocks of size 1, 2, 4, … (padded to a power of two) and joining each pair by
    ``X21 = −X22 · A21 · X11``; ``2·p·(p² − 1)/3`` FLOPs for ``p`` the padded size."""
    m = int(strict.shape[-1])  # an int under tracing too (fvcore)
    padded = 1 << (m - 1).bit_length()
    strict = F.pad(strict, (0, padded - m, 0, padded - m))
    inverse = strict.new_ones(*strict.shape[:-2], padded, 1, 1)  # (…, blocks, size, size)
    size = 1
    while size < padded:
        pairs = padded // (2 * size)
        blocks = strict.unflatten(-2, (pairs, 2 * size)).unflatten(-1, (pairs, 2 * size))
        lower = blocks.diagonal(dim1=-4, dim2=-2).movedim(-1, -3)[..., size:, :size]  # (…, pairs, size, size)
        first, second = inverse[..., 0::2, :, :], inverse[..., 1::2, :, :]
        corner = -(second @ lower @ first)
        inverse = torch.cat([torch.cat([first, torch.zeros_like(first)], -1), torch.cat([corner, second], -1)], -2)
        size *= 2
    return inverse[..., 0, :m, :m]


def chunk_bias(content: Chunks, logits, start, stop, keys):
    """PaTH's logits minus the plain ones ``logits (B, h, stop − start, keys)`` for queries ``start … stop``:
    per chunk the turned queries against its key state, less the plain logits there; the chunk's own bias;
    0 on the keys after it (hidden when causal; the other direction's when not). The logits are split by
    chunk once, as :func:`chunks` splits its inputs."""
    spans = [(max(start, first), min(stop, first + queries.shape[-2]), first, queries, state, inner)
             for first, queries, state, inner in zip(content.starts, content.queries, content.states, content.inner)]
    spans = [span for span in spans if span[0] < span[1]]
    rows = []
    for plain, (lo, hi, first, queries, state, inner) in zip(logits.split([hi - lo for lo, hi, *_ in spans], -2),
                                                             spans):
        before = state.shape[-2]  # keys before the chunk: T + first
        cross = queries[..., lo - first:hi - first, :] @ state.mT - plain[..., :before]  # (B, h, rows, before)
        own = inner[..., lo - first:hi - first, :keys - before]
        after = cross.new_zeros(*cross.shape[:-1], keys - before - own.shape[-1])
        rows.append(torch.cat([cross, own, after], dim=-1))  # one copy of the row, then one of the block
    return torch.cat(rows, dim=-2)


def chunk_flops(heads: int, q_len: int, cached: int, d: int, carry: bool, mode: str) -> int:
    """FLOPs of one direction's :func:`chunks` and :func:`chunk_bias` (one block of queries, as the counters run
    attention) over ``heads = B·h`` sequences of heads (``mode="train"``: and the backward). Per chunk of ``m``
    tokens after ``s`` keys: five ``(m, m, d)`` matmuls (``βw·wᵀ``, ``q·wᵀ``, ``βw·kᵀ``, the basis, the queries'
    turn), two ``(m, m, m)``, the inverse (:func:`inverse_flops`), the state's logits ``2·m·s·d``; ``β·w``, the
    queries' turn and the plain logits' subtraction. A group of chunks that carries (:func:`chunks`) also
    carries each chunk's keys (``2·m²·d`` and ``m·d``) and forms its product (``2·m·d²``, unless thin:
    ``2·m < d``); a chunk with a state after it carries the state (``2·s·d²``, or ``4·s·m·d`` thin, and ``s·d``).
    Training: every matmul's two gradients (the inverse's first level has one), ``β·w``'s two, and an
    accumulation add per extra read: of ``w`` (two, four carrying), ``β w`` (two), ``q``, the inverse and
    ``q·wᵀ`` (one each); carrying, of the keys, the basis and the carried inner products; the state twice."""
    groups = chunk_groups(q_len)
    count = sum(n for n, _ in groups)
    total, index = 0, 0
    for group, (n, m) in enumerate(groups):
        carrying = carry or group < len(groups) - 1 or n > 1
        thin = 2 * m < d
        inverse, level_one, inverse_reads = inverse_flops(m)
        for _ in range(n):
            s = cached + index * CHUNK
            matmuls = 2 * (5 * m * m * d + 2 * m ** 3 + m * s * d) + inverse
            elementwise = 2 * m * d + m * s
            reads = 5 * m * d + 2 * m * m + inverse_reads
            if carrying:
                matmuls += 2 * m * m * d + (0 if thin else 2 * m * d * d)
                elementwise += m * d
                reads += 4 * m * d + m * m
            if carry or index < count - 1:
                matmuls += 4 * s * m * d if thin else 2 * s * d * d
                elementwise += s * d
                reads += 2 * s * d
            total += matmuls + elementwise
            if mode == "train":
                total += 2 * matmuls - level_one + 2 * m * d + reads
            index += 1
    return heads * total


def inverse_flops(m: int) -> tuple[int, int, int]:
    """:func:`unit_lower_inverse` of ``m`` rows padded to ``p``: its forward FLOPs ``2·p·(p² − 1)/3``, the
    first level's (``2·p``: its backward has one gradient, the blocks of ones are constants) and its
    backward's accumulation adds: per level after the first, the blocks read twice and each half twice
    (``2·p·size``), and the padded matrix read once per level (``p²`` each but the first)."""
    padded = 1 << (m - 1).bit_length()
    if padded == 1:
        return 0, 0, 0
    levels = padded.bit_length() - 1
    return 2 * padded * (padded ** 2 - 1) // 3, 2 * padded, 2 * padded * (padded - 2) + (levels - 1) * padded ** 2


register("path")(Path)
