"""The one attention function every encoding goes through, and the mask paths that feed it.

Attention is always ``torch.nn.functional.scaled_dot_product_attention`` (never
``nn.MultiheadAttention``, whose fused paths hide work from FLOP counters), except one query against
keys wider than the values (a PoPE decode step: two plain matmuls, see :func:`attend`). What differs between
encodings is only how their logit bias reaches it; :func:`choose_path` names the path:

``is_causal``        no bias, causal: SDPA's own causal kernel.
``unmasked``         no bias, not causal: one plain SDPA call.
``relative``         a bias that depends on ``j − i`` alone (ALiBi, T5) on contiguous positions: the
                     encoding gives a ``(h, 2L − 1)`` table and every block's mask is a strided *view*
                     of it, so no ``(h, L, L)`` tensor ever exists. A view with rows ``i`` and columns
                     ``j`` reading ``table[j − i]`` needs a negative stride, so each block's queries run
                     in reverse order (``table[r + j]``, strides ``(1, 1)``) and the output is flipped back.
``general_dense``    any other bias (one that depends on more than ``j − i``, or positions that are not
                     contiguous) whose full ``(h, L, L)`` float mask fits in ``max_mask_bytes``: the
                     mask is built once per forward pass and shared by the layers.
``general_blocked``  a general bias whose full mask would not fit: each block of queries gets only its
                     own slice, from the encoding's bias hook on that block's positions, per layer.
``contextual_bias``  the fourth hook, a softmax encoding whose bias is computed from the layer's input (FoX):
                     per layer and block of queries, the encoding's ``content_bias`` ``(B, h, q, k)``
                     (per sequence of the batch, so per layer: no mask is shared) reaches SDPA as its mask.
``contextual_logits`` the fourth hook otherwise: a bias that reads the layer's own logits (CoPE) or weights
                     other than softmax (stick-breaking). Per layer and block of queries the logits
                     ``q·kᵀ/√d`` are materialised (``-inf`` where hidden), the encoding's bias added, and
                     softmax or stick-breaking (:func:`stick_breaking`) turns them into weights for ``v``.
``carried``          a decode step (one causal query after a cache) of an encoding whose cached keys each token
                     rewrites (PaTH: the keys carried through the new token's ``H``): the encoding rewrites
                     the cached keys in place (``carry_keys``), after which its logits are the plain ``q·kᵀ``,
                     so the step is one SDPA call with no mask and no materialised logits
                     (:class:`CarriedKeysMask`).
``window``           a decode step (one query, causal, contiguous positions) of a local layer, a bias that is
                     0 on a window or chunk of keys ending at the query and ``-inf`` before it (the
                     encoding's ``decode_window``): the query attends those last keys of the cache alone,
                     unmasked (:class:`WindowMask`); chosen before ``flex`` and the relative and general paths.
``flex``             any other bias on a CUDA device: FlexAttention (compiled) adds it inside the kernel
                     through a ``score_mod`` that reads the ``(h, 2L − 1)`` table (relative) or the
                     ``(h, L, L)`` bias (general), causality as a block mask, so no mask is copied per
                     block of queries and the fused kernel keeps its memory (a CPU-tuned block path
                     would issue L/256 launches, each copying its slice). Forced on CPU it runs
                     uncompiled, which the tests use to check it against the reference softmax.

The bias is built once per forward pass, as a model in use would: nothing is cached across calls,
so a latency figure includes the encoding's own work. The two contextual paths are chosen by the
encoding's traits (``hook``, ``reads``, ``attention``), never by its name; the three other hooks' paths
do not change when it is absent (``choose_path`` asks for it first, in one comparison).

Masked paths run queries in blocks of ``block_size`` when causal, and a block attends only to the
keys up to its last query (later keys are all masked): like SDPA's ``is_causal`` kernel, they skip
the upper triangle, so the executed attention matmuls are ``≈ L²/2 + L·block/2`` per head, not L²
(``configured(block_size=L)`` gives one call over all keys, as :mod:`posbench.flops` counts).
A mask must reach SDPA with 4 dimensions: a 3-D ``(h, L, L)`` one sends the CPU kernel to a much
slower path. ``python -m posbench bench --parts paths [--flex]`` times every path and block size
(and FlexAttention with an ALiBi ``score_mod``), which is how ``block_size`` and the choice of
SDPA over FlexAttention on CPU were made.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import warnings
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from posbench.devices import CPU, converted, on_cuda
from posbench.encodings.base import LayerInput, PositionalEncoding
from posbench.positions import Positions

PATHS = ("is_causal", "unmasked", "relative", "general_dense", "general_blocked", "flex", "contextual_bias",
         "contextual_logits", "carried", "window")
FORCEABLE_PATHS = ("relative", "general_dense", "general_blocked", "flex")
MASK_PATHS = ("relative", "general_dense", "general_blocked")  # the SDPA paths with a float mask
CONTEXTUAL_PATHS = ("contextual_bias", "contextual_logits")  # the fourth hook's, per layer


@dataclass(frozen=True)
class AttentionSettings:
    """Knobs of the mask paths; change them with :func:`configured`."""

    block_size: int = 256  # queries per SDPA call when causal (`bench --parts paths` compares 64…1024)
    max_mask_bytes: int = 256 * 2**20  # the most memory one mask (full or per block) may take
    force_path: str | None = None  # a biased encoding runs this path instead of the chosen one
    flex_on_cuda: bool = True  # biased encodings on a CUDA device take the flex path

    def __post_init__(self):
        if self.force_path not in (None, *FORCEABLE_PATHS):
            raise ValueError(f"force_path {self.force_path!r}; allowed: {', '.join(FORCEABLE_PATHS)}")
        if self.block_size < 1 or self.max_mask_bytes < 1:
            raise ValueError(f"block_size and max_mask_bytes must be positive, got "
                             f"{self.block_size}, {self.max_mask_bytes}")


SETTINGS = AttentionSettings()


@contextlib.contextmanager
def configured(**changes):
    """``with configured(force_path="general_blocked", block_size=16): …`` — settings for the block only."""
    global SETTINGS
    previous = SETTINGS
    SETTINGS = dataclasses.replace(SETTINGS, **changes)
    try:
        yield SETTINGS
    finally:
        SETTINGS = previous


def bias_kind(encoding) -> str | None:
    """``"relative"`` (a bias of ``j − i`` alone: the encoding implements ``relative_bias``),
    ``"general"`` (any other logit bias: it implements ``attention_bias``) or ``None`` (neither). A layer of
    a pattern may rotate q and k and mask too (a window), so this reads the hooks, not ``hook``.
    Read from the class, never by computing a bias: this runs inside every forward pass."""
    if type(encoding).relative_bias is not PositionalEncoding.relative_bias:
        return "relative"
    if type(encoding).attention_bias is not PositionalEncoding.attention_bias:
        return "general"
    return None


def choose_path(encoding, q_len: int, k_len: int, causal: bool, dtype: torch.dtype = torch.float32,
                contiguous: bool = True, device: torch.device | str = CPU) -> str:
    """The attention path (one of :data:`PATHS`) a model with ``encoding`` runs at these lengths on
    ``device``; ``contiguous``: the positions are ``0 … L−1`` (or a cache's offset on), not arbitrary ids.

    This is the function the model itself uses, so profiling can record which path ran.
    """
    if encoding.hook == "contextual":
        return contextual_path(encoding, q_len, k_len, causal)
    kind = bias_kind(encoding)
    if kind is None:
        return "is_causal" if causal else "unmasked"
    if SETTINGS.force_path is not None:
        if SETTINGS.force_path == "relative" and (kind != "relative" or not contiguous):
            raise ValueError(f"force_path 'relative' needs a bias that depends on j − i alone, on contiguous "
                             f"positions; {type(encoding).__name__} has a general bias or the positions are not")
        return SETTINGS.force_path
    if q_len == 1 and causal and contiguous and decodes_in_window(encoding):
        return "window"
    if SETTINGS.flex_on_cuda and on_cuda(device):
        return "flex"
    if kind == "relative" and contiguous:
        return "relative"
    full_mask_bytes = encoding.n_heads * q_len * k_len * torch.finfo(dtype).bits // 8
    return "general_dense" if full_mask_bytes <= SETTINGS.max_mask_bytes else "general_blocked"


def decodes_in_window(encoding) -> bool:
    """Whether the encoding's bias is a local window (it implements ``decode_window``): read from the class."""
    return type(encoding).decode_window is not PositionalEncoding.decode_window


def layer_paths(model, q_len: int, k_len: int, dtype: torch.dtype = torch.float32,
                device: torch.device | str = CPU) -> str:
    """The paths ``model``'s layers run (:func:`choose_path` of each distinct layer encoding), comma-joined in
    layer order: one name, unless a layer pattern's layers differ (``general_dense,is_causal``)."""
    paths = (choose_path(encoding, q_len, k_len, model.cfg.causal, dtype, device=device)
             for encoding in model.layer_encodings)
    return ",".join(dict.fromkeys(paths))


def contextual_path(encoding, q_len: int, k_len: int, causal: bool) -> str:
    """A softmax over logits plus a bias from the layer's input goes through SDPA with the bias as its mask;
    a bias that reads the logits themselves, or weights that are not a softmax, need the logits materialised,
    unless the encoding carries its cached keys (a decode step of one causal query after a cache): then the
    plain logits are its own."""
    if causal and q_len == 1 and k_len > 1 and carries_keys(encoding):
        return "carried"
    if encoding.reads == "input" and encoding.attention == "softmax":
        return "contextual_bias"
    return "contextual_logits"


def carries_keys(encoding) -> bool:
    """Whether the encoding rewrites a decode step's cached keys so that the plain logits are its own (it
    implements ``carry_keys``): read from the class."""
    return type(encoding).carry_keys is not PositionalEncoding.carry_keys


def mask_future(bias: torch.Tensor, q_start: int, nearest_first: bool = False) -> torch.Tensor:
    """``bias (h, q, k)`` for query tokens ``q_start …`` -> the same with ``-inf`` where key > query; keys in token
    order, or last token first (``nearest_first``, stick-breaking's order: column ``c`` is key ``k − 1 − c``). A bias
    that every head shares (a view with stride 0 over heads: a chunk mask) is masked once and stays a view.
    ``torch.where`` writes the masked bias in one pass, where ``masked_fill`` would copy the bias and then mask the
    copy (FIRE gathers its ``-inf`` with its bias and skips this: ``hides_future_keys``)."""
    if bias.shape[0] > 1 and bias.stride(0) == 0:
        return mask_future(bias[:1], q_start, nearest_first).expand_as(bias)
    i = torch.arange(q_start, q_start + bias.shape[-2], device=bias.device)
    j = torch.arange(bias.shape[-1], device=bias.device)
    if nearest_first:
        j = j.flip(0)
    return torch.where(j[None, :] > i[:, None], float("-inf"), bias)  # (h, q, k)


class Mask:
    """One forward pass's logit mask: which blocks of queries to run, each block's mask, and the
    block-by-block attention. Queries are the last ``len(query)`` of the ``len(key)`` tokens
    (a cache holds the others); causality is by token order."""

    path: str

    def __init__(self, encoding, query: Positions, key: Positions, causal: bool, dtype: torch.dtype):
        self.encoding, self.query, self.key, self.causal = encoding, query, key, causal
        self.q_len, self.k_len = len(query), len(key)
        self.first_query = self.k_len - self.q_len  # token index of the first query among the keys
        self.rows = mask_rows(self.path, encoding.n_heads, self.q_len, self.k_len, causal, dtype)

    def blocks(self):
        """``(start, stop, key_stop)`` per block of queries; ``key_stop`` ends the keys it may see."""
        for start in range(0, self.q_len, self.rows):
            stop = min(start + self.rows, self.q_len)
            yield start, stop, self.first_query + stop if self.causal else self.k_len

    def block_mask(self, start: int, stop: int, key_stop: int, dtype: torch.dtype) -> torch.Tensor:
        """``(1, h, stop − start, key_stop)`` float mask of one block, causal ``-inf`` included."""
        raise NotImplementedError

    def attend(self, q, k, v, layer: LayerInput | None = None) -> torch.Tensor:
        """``q (B, h, q_len, d)``, ``k, v (B, h, k_len, d)`` -> ``(B, h, q_len, d)``, block by block; ``layer``:
        what the fourth hook reads (the other paths ignore it)."""
        return joined([masked_sdpa(q[..., start:stop, :], k, v, self.block_mask(start, stop, key_stop, q.dtype))
                       for start, stop, key_stop in self.blocks()])

    def general_block(self, start: int, stop: int, key_stop: int, dtype: torch.dtype) -> torch.Tensor:
        """The encoding's bias hook on one block's query and key positions, causal ``-inf`` included."""
        bias = self.encoding.attention_bias(self.query[start:stop], self.key[:key_stop]).to(dtype)  # (h, q, k)
        masked = self.causal and not self.encoding.hides_future_keys
        return (mask_future(bias, self.first_query + start) if masked else bias)[None]


def mask_rows(path: str, n_heads: int, q_len: int, k_len: int, causal: bool, dtype: torch.dtype) -> int:
    """Queries per SDPA call on a mask path: ``block_size`` when causal, else all of them; on the
    ``general_blocked`` path no more than a slice of ``max_mask_bytes`` holds (at least one)."""
    rows = SETTINGS.block_size if causal else q_len
    if path == "general_blocked":
        row_bytes = n_heads * k_len * torch.finfo(dtype).bits // 8
        rows = max(1, min(rows, SETTINGS.max_mask_bytes // row_bytes))
    return rows


def masked_sdpa(q_block, k, v, mask) -> torch.Tensor:
    """SDPA of a block of queries against the first ``mask.shape[-1]`` keys (all of them: no slicing, which is
    a dispatch of its own per layer in a decode step)."""
    key_stop = mask.shape[-1]
    if key_stop < k.shape[-2]:
        k, v = k[..., :key_stop, :], v[..., :key_stop, :]
    return F.scaled_dot_product_attention(q_block, k, v, attn_mask=mask)


def joined(blocks: list[torch.Tensor]) -> torch.Tensor:
    """The blocks' outputs ``(B, h, rows, d)`` joined along the queries; one block (a decode step's) as it is,
    not copied by ``torch.cat``."""
    return blocks[0] if len(blocks) == 1 else torch.cat(blocks, dim=-2)


class GeneralDenseMask(Mask):
    """A general bias built whole once per forward pass; blocks are slices of it."""

    path = "general_dense"

    def __init__(self, encoding, query, key, causal, dtype):
        super().__init__(encoding, query, key, causal, dtype)
        self.full = self.general_block(0, self.q_len, self.k_len, dtype)  # (1, h, q, k)

    def block_mask(self, start, stop, key_stop, dtype):
        return converted(self.full[:, :, start:stop, :key_stop], dtype)


class GeneralBlockedMask(Mask):
    """A general bias too large to hold whole: each block's slice is built when the block runs."""

    path = "general_blocked"

    def block_mask(self, start, stop, key_stop, dtype):
        return self.general_block(start, stop, key_stop, dtype)


class RelativeMask(Mask):
    """Block masks are views of one ``(h, 2k − 1)`` table, with the block's queries reversed. A decode step's
    one query is the last token: its offsets are ``1 − k … 0``, none of them a future key, so the table is
    those ``k`` columns, already the step's mask row (no reversal, no ``-inf``), built once for all layers."""

    path = "relative"

    def __init__(self, encoding, query, key, causal, dtype):
        super().__init__(encoding, query, key, causal, dtype)
        k_len, decoding = self.k_len, self.q_len == 1
        offsets = torch.arange(1 - k_len, 1 if decoding else k_len, device=key.ids.device)  # j − i
        table = encoding.relative_bias(offsets, k_len - 1).to(dtype)  # (h, 2k − 1 or k), column k − 1 is offset 0
        if causal and not decoding:  # offsets j − i > 0 are future keys
            table = table.masked_fill(offsets > 0, float("-inf"))
        self.table = table.contiguous()
        self.decode_row = self.table[None, :, None, :] if decoding else None  # (1, h, 1, k): every layer's mask

    def block_mask(self, start, stop, key_stop, dtype):
        """Rows in *reverse* query order: row r is query i = s − 1 − r (s: token index of
        ``stop``), so ``table[j − i + k − 1] = table[r + j + k − s]``, a view with strides (1, 1)."""
        table = converted(self.table, dtype)
        offset = table.storage_offset() + self.k_len - (self.first_query + stop)
        return table.as_strided((1, table.shape[0], stop - start, key_stop), (0, table.stride(0), 1, 1), offset)

    def attend(self, q, k, v, layer=None):
        """Reverses the queries once (not per block: each op is a thread-pool round trip): rows
        ``q_len − stop … q_len − start`` of the reversed queries are one block, in the order its
        mask wants, and the reversed outputs, last block first, flip back in one go. One query has no order
        to reverse: it meets its row as it is."""
        if self.q_len == 1:
            return masked_sdpa(q, k, v, converted(self.decode_row, q.dtype))
        reversed_queries = q.flip(-2)  # (B, h, q_len, d)
        q_len = self.q_len
        blocks = [masked_sdpa(reversed_queries[..., q_len - stop:q_len - start, :], k, v,
                              self.block_mask(start, stop, key_stop, q.dtype))
                  for start, stop, key_stop in reversed(list(self.blocks()))]
        return torch.cat(blocks, dim=-2).flip(-2)


class WindowMask(Mask):
    """A decode step of local attention: the one query, the last token, attends the keys its window or chunk
    holds (the encoding's ``decode_window``), the last ones of the cache, unmasked. The keys before them would
    get −inf, so this is the masked step up to rounding, at the window's cost instead of the whole cache's."""

    path = "window"

    def __init__(self, encoding, query, key, causal, dtype):
        super().__init__(encoding, query, key, causal, dtype)
        self.seen = min(self.k_len, encoding.decode_window(query.max_position))

    def attend(self, q, k, v, layer=None):
        return F.scaled_dot_product_attention(q, k[..., -self.seen:, :], v[..., -self.seen:, :])  # (B, h, 1, d)


class CarriedKeysMask(Mask):
    """A decode step of an encoding that carries its cached keys (PaTH): the encoding rewrites them in the cache,
    in place, through the new token (:meth:`~posbench.encodings.base.PositionalEncoding.carry_keys`), and the one
    query attends every key by SDPA, unmasked: the cached keys are then what its logits need, and its own key
    is last, as it is: the step neither materialises the logits nor builds the carried keys as a new tensor and
    copies them into a new buffer."""

    path = "carried"

    def attend(self, q, k, v, layer=None):
        self.encoding.carry_keys(k, layer)  # k (B, h, T + 1, d): the first T rewritten in the cache's buffer
        return F.scaled_dot_product_attention(q, k, v)  # (B, h, 1, d)


class FlexMask(Mask):
    """The bias added inside FlexAttention's kernel by a ``score_mod``; causality as a block mask."""

    path = "flex"

    def __init__(self, encoding, query, key, causal, dtype):
        from torch.nn.attention.flex_attention import create_block_mask

        super().__init__(encoding, query, key, causal, dtype)
        k_len, first = self.k_len, self.first_query
        if bias_kind(encoding) == "relative" and query.contiguous and key.contiguous:
            offsets = torch.arange(1 - k_len, k_len, device=key.ids.device)  # j − i
            table = encoding.relative_bias(offsets, k_len - 1).to(dtype)  # (h, 2k − 1)
            self.score_mod = lambda score, b, h, q, kv: score + table[h, kv - q - first + k_len - 1]
        else:
            bias = encoding.attention_bias(query, key)  # (h, q, k)
            if bias.stride(0) == 0:  # a bias every head shares (a chunk mask): held once, not once per head
                shared = bias[0].to(dtype)  # (q, k)
                self.score_mod = lambda score, b, h, q, kv: score + shared[q, kv]
            else:
                bias = bias.to(dtype)
                self.score_mod = lambda score, b, h, q, kv: score + bias[h, q, kv]
        self.block_mask = None
        if causal:
            self.block_mask = create_block_mask(lambda b, h, q, kv: q + first >= kv, None, None, self.q_len, k_len,
                                                device=str(key.ids.device))

    def attend(self, q, k, v, layer=None):
        run = compiled_flex() if q.is_cuda else eager_flex
        return run(q, k, v, score_mod=self.score_mod, block_mask=self.block_mask)


@functools.cache
def compiled_flex():
    """FlexAttention compiled once per process, where it runs for real (CUDA)."""
    from torch.nn.attention.flex_attention import flex_attention

    return torch.compile(flex_attention, dynamic=False)


def eager_flex(*args, **kwargs):
    """FlexAttention uncompiled: off CUDA, for checking it against the reference (it warns that this is slow)."""
    from torch.nn.attention.flex_attention import flex_attention

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return flex_attention(*args, **kwargs)


class ContextualMask(Mask):
    """The fourth hook: built once per forward pass like the others, but the bias is the encoding's
    :meth:`~posbench.encodings.base.PositionalEncoding.content_bias`, made in each layer from that layer's
    content (:meth:`~posbench.encodings.base.PositionalEncoding.content`) block by block of queries."""

    def attend(self, q, k, v, layer=None):
        content = self.encoding.content(q, k, layer)
        return joined([self.attend_block(q, k, v, content, start, stop, key_stop)
                       for start, stop, key_stop in self.blocks()])

    def attend_block(self, q, k, v, content, start, stop, key_stop) -> torch.Tensor:
        """``(B, h, stop − start, d)``: queries ``start … stop`` against the first ``key_stop`` keys."""
        raise NotImplementedError


class ContextualBiasMask(ContextualMask):
    """A bias from the layer's input (FoX), per sequence: SDPA's fused kernel adds it as the block's mask."""

    path = "contextual_bias"

    def attend_block(self, q, k, v, content, start, stop, key_stop):
        bias = self.encoding.content_bias(content, None, start, stop, key_stop)  # (B, h, rows, keys)
        mask = mask_future(bias, self.first_query + start) if self.causal else bias
        return masked_sdpa(q[..., start:stop, :], k, v, mask.to(q.dtype))


class ContextualLogitsMask(ContextualMask):
    """Logits materialised per block: the encoding's bias may read them (CoPE's gates), and the weights
    are softmax or stick-breaking's (the encoding's ``attention`` trait). Stick-breaking hides a query's
    own key too (it gets the stick's remainder, :func:`stick_breaking`)."""

    path = "contextual_logits"

    def attend(self, q, k, v, layer=None):
        return super().attend(q * q.shape[-1] ** -0.5, k, v, layer)  # the 1/√d scale once, not per block

    def attend_block(self, q, k, v, content, start, stop, key_stop):
        keys, values = k[..., :key_stop, :], v[..., :key_stop, :]
        breaking = self.encoding.attention == "stick_breaking"
        # Stick-breaking sums from the last key back: keys and values flipped (the last first) copy less than
        # the logits flipped before and after the sum when the block has more queries than a head has dimensions
        nearest_first = breaking and stop - start > q.shape[-1]
        if nearest_first:
            keys, values = keys.flip(-2), values.flip(-2)
        logits = q[..., start:stop, :] @ keys.transpose(-1, -2)  # (B, h, rows, keys), q scaled by attend
        if self.causal:  # -inf on future keys (stick-breaking: and on the query's own)
            logits = mask_future(logits, self.first_query + start - breaking, nearest_first)
        bias = self.encoding.content_bias(content, logits, start, stop, key_stop)
        if bias is not None:  # logits are this block's own (the mask's or the matmul's): added in place if no grad
            assert not nearest_first, "a bias is made of logits in token order"
            in_place = not torch.is_grad_enabled() and torch.result_type(logits, bias) == logits.dtype
            logits = logits.add_(bias) if in_place else logits + bias
        if breaking:
            own = v[..., self.first_query + start:self.first_query + stop, :]  # (B, h, rows, d) the queries' values
            return stick_breaking(logits, values, own, nearest_first)
        return torch.softmax(logits, dim=-1) @ values


NEGLIGIBLE_LOG_WEIGHT = -87.0  # e^−87 ≈ 1.6e−38: float32's smallest normal number is 1.2e−38
# A few float32 ulps (2^−23 each) above e^−87: a log weight clamped at −87 lands under it however ``exp`` rounds;
# one above −87 in float32 (≥ −86.9999924, so a weight ≥ e^−87·(1 + 7.6e−6)) lands over it
NEGLIGIBLE_WEIGHT = math.exp(NEGLIGIBLE_LOG_WEIGHT) * (1 + 2**-20)


def stick_breaking(logits: torch.Tensor, values: torch.Tensor, own: torch.Tensor,
                   nearest_first: bool = False) -> torch.Tensor:
    """Stick-breaking attention (Tan et al. 2024): ``logits (B, h, q, k)`` (``-inf``: hidden) -> ``(B, h, q, d)``;
    the keys of ``logits`` and ``values (B, h, k, d)`` in token order, or the last first (``nearest_first``).

    Key ``j`` takes ``β_ij = σ(z_ij)`` of what the keys after it, up to the query, left:
    ``A_ij = β_ij ∏_{j<t} (1 − β_it)``, in log space ``z_ij + Σ_{t≥j} log σ(−z_it)`` (as
    ``log σ(z) = z + log σ(−z)``: one add per logit): a cumulative sum from the last key, over logits flipped
    before and after it in token order (two copies of the block). What no key takes, ``1 − Σ_j A_ij``, goes to the
    query's own value ``own (B, h, q, d)``, as the reference's tests do (``sb_ref.py`` with
    ``attend_current=False``). A hidden key has ``z = -inf``: weight 0, and ``log σ(+inf) = 0`` in the sums.
    Weights at or below ``e^−87`` (:data:`NEGLIGIBLE_LOG_WEIGHT`, near float32's smallest normal number) are
    0: far keys reach them after a few hundred broken sticks. ``exp`` is given no argument under −87: on a CPU,
    an argument whose result is subnormal, or ``-inf`` (hidden keys), takes a slow path that costs many times an
    argument in range, so the log weights are clamped at −87 and the weights at e^−87 set to 0 after it
    (:data:`NEGLIGIBLE_WEIGHT`; in float32 the same zeros as a ``-inf`` before ``exp``, the others bit-identical).
    Where no gradient is recorded, the passes after the sum write into the tensor it made (the same values)."""
    shares = F.logsigmoid(-logits)  # (B, h, q, k): log(1 − β), what each key leaves of the stick
    left = shares.cumsum(-1) if nearest_first else shares.flip(-1).cumsum(-1).flip(-1)  # Σ_{t≥j} log σ(−z_it)
    if torch.is_grad_enabled():  # autograd keeps exp's result and clamp's input: new tensors
        weights = F.threshold((logits + left).clamp(min=NEGLIGIBLE_LOG_WEIGHT).exp(), NEGLIGIBLE_WEIGHT, 0.0)
    else:
        weights = F.threshold_(left.add_(logits).clamp_(min=NEGLIGIBLE_LOG_WEIGHT).exp_(), NEGLIGIBLE_WEIGHT, 0.0)
    remainder = 1 - weights.sum(-1, keepdim=True)  # (B, h, q, 1)
    return weights @ values + remainder * own


MASKS = {mask.path: mask for mask in (GeneralDenseMask, GeneralBlockedMask, RelativeMask, WindowMask, FlexMask,
                                      ContextualBiasMask, ContextualLogitsMask, CarriedKeysMask)}


def build_mask(encoding, query: Positions, key: Positions, causal: bool,
               dtype: torch.dtype = torch.float32) -> Mask | None:
    """The mask for one forward pass of queries at ``query`` against keys at ``key``, or ``None``
    when the encoding adds no bias."""
    contiguous = query.contiguous and key.contiguous
    path = choose_path(encoding, len(query), len(key), causal, dtype, contiguous, key.ids.device)
    mask = MASKS.get(path)
    return None if mask is None else mask(encoding, query, key, causal, dtype)


def attended_value_width(query_key_width: int, value_width: int, q_len: int) -> int:
    """The width values are attended at: the queries' and keys' when those are wider (PoPE) and more than one
    query attends, so SDPA's fused CPU kernel, which takes one head width, runs (its math path, which takes
    two, ran a 1024-token causal layer 3× slower); one query (a decode step) meets the values as they are
    (:func:`attend`), not copied into a wider tensor."""
    return query_key_width if q_len > 1 else value_width


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: Mask | None, causal: bool,
           layer: LayerInput | None = None) -> torch.Tensor:
    """``q (B, h, q_len, d_head)``, ``k, v (B, h, k_len, d_head)`` and a :class:`Mask` (or ``None``
    for no bias) -> ``(B, h, q_len, d_head)``; ``layer``: what the fourth hook reads of the layer. Queries and
    keys wider than the values (PoPE's) meet values padded with zeros to their width where more than one query
    attends (:func:`attended_value_width`)."""
    d_head = v.shape[-1]
    if q.shape[-1] != d_head and q.shape[-2] == 1 and mask is None:
        # One query against wider keys: SDPA's math path would scale every cached key (a pass over the cache);
        # its two matmuls and softmax here scale the one query instead, so the cache is read once.
        return ((q / math.sqrt(q.shape[-1])) @ k.transpose(-1, -2)).softmax(-1) @ v  # (B, h, 1, d_head)
    if attended_value_width(q.shape[-1], d_head, q.shape[-2]) != d_head:
        padded = torch.cat([v, v.new_zeros(*v.shape[:-1], q.shape[-1] - d_head)], dim=-1)  # (B, h, k_len, d_qk)
        return attend(q, k, padded, mask, causal, layer)[..., :d_head]
    if mask is None:
        q_len, k_len = q.shape[-2], k.shape[-2]
        if causal and q_len == 1:  # one query after a cache (a decode step) sees every key: no mask to build
            return F.scaled_dot_product_attention(q, k, v)
        if causal and q_len != k_len:  # queries after a cache: SDPA's is_causal aligns top-left, they sit bottom-right
            sees = torch.ones(q_len, k_len, dtype=torch.bool, device=q.device).tril(k_len - q_len)
            return F.scaled_dot_product_attention(q, k, v, attn_mask=sees)
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return mask.attend(q, k, v, layer)
