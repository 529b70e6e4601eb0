"""The interface every positional encoding implements: four hooks, one per injection point.

A Transformer can learn position at four places, and every scheme in the catalogue uses one or
more of them:

1. input           ``x = E + P`` or ``x = [E ; P]``            -> :meth:`PositionalEncoding.inject`
2. query / key     rotate ``q`` and ``k`` by their position     -> :meth:`PositionalEncoding.rotate`
3. attention logit add ``B[h, i, j]`` to ``q·k / sqrt(d_head)``  -> :meth:`PositionalEncoding.attention_bias`
4. from content    a bias computed from the layer's own ``q·k``  -> :meth:`PositionalEncoding.content` and
                   or its input, and/or attention weights other     :meth:`PositionalEncoding.content_bias`
                   than softmax                                     (:mod:`posbench.encodings.contextual`)

The first three read position ids; the fourth reads content (CoPE counts gates of ``q·k``, FoX sums
forget gates of the layer's input, stick-breaking attention replaces softmax), so it runs inside every
layer with that layer's own parameters and, when decoding, state kept in the KV cache: its design is
written in :mod:`posbench.encodings.contextual`.

Each of the first three hooks takes a :class:`~posbench.positions.Positions` value (ids, offset, axes, modality, a
host-known maximum), never bare lengths. The base class implements each hook as "leave it alone",
so a scheme overrides only the hooks it uses and the model calls all of them unconditionally. What
a scheme *is* (which hook, how it combines, its axes, whether its table is bounded or trained, what it
reads, how attention weighs) is
declared in :class:`Traits`, so no code outside an encoding's own module decides by its name.
Widths live here too, because concatenation changes them: the token embedding is
``token_width`` wide and the residual stream ``model_width``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from posbench.cache import KVCache
from posbench.positions import Positions

HOOKS = ("none", "input", "qk", "logits", "contextual")
READS = ("nothing", "positions", "qk", "input")  # what an encoding computes its signal from
ATTENTIONS = ("softmax", "stick_breaking")  # how attention turns logits into weights
COMBINES = ("none", "add", "concat", "concat_fixed")
AXES = ("1d", "2d", "multimodal")


@dataclass(frozen=True)
class Traits:
    """What an encoding is, declared by its class: the report, workflow, training and probes read this."""

    hook: str  # where position enters: none | input | qk | logits | contextual
    combine: str  # how an input encoding meets the token embedding: none | add | concat | concat_fixed
    axes: str  # 1d (a sequence) | 2d (row, column of a grid) | multimodal (text/time, row, column)
    bounded: bool  # one row per position up to max_len: a longer input is refused (a learned table)
    trained: bool  # has trained position parameters
    randomized: bool  # trained on sorted random positions (Ruoss et al. 2023)
    reads: str  # nothing | positions (the ids: hooks 1-3) | qk (the layer's logits) | input (the layer's input)
    attention: str  # softmax | stick_breaking: how the logits become attention weights

    def as_columns(self) -> dict:
        """Table columns, prefixed so they never collide with a record's own fields."""
        return {f"pe_{name}": value for name, value in self.__dict__.items()}


@dataclass(frozen=True)
class LayerInput:
    """What the fourth hook may read of one layer besides its queries and keys."""

    inputs: torch.Tensor  # (B, L, width) the layer's normalised input, its new tokens only
    index: int  # the layer's place in the stack: a contextual encoding's parameters are per layer
    cache: KVCache | None = None  # decoding: the cache, whose per-layer ``states`` the encoding extends


class PositionalEncoding(nn.Module):
    """Base class: no position information at any of the four injection points.

    Args:
        d_model: the width the user asked for (the token embedding width of an added encoding).
        n_heads: attention heads; logit biases are per head.
        max_len: the longest sequence the run will use, evaluation lengths included.
        causal: whether the model masks the future (T5 buckets differ for causal models).
    """

    hook = "none"
    axes = "1d"
    bounded = False
    trained_positions = False
    attention = "softmax"
    per_layer = False  # parameters of its own in every layer: the registry passes the model's depth, n_layers
    rewrites_cache = False  # changes cached keys as tokens arrive (PaTH): a KV cache of it cannot be cut back
    quadratic_flops = True  # its FLOPs are a quadratic in the sequence length (count_flops may extrapolate them)
    hides_future_keys = False  # causal, its attention_bias is -inf at keys after the query: attention masks nothing

    def __init__(self, d_model: int, n_heads: int, max_len: int, causal: bool = False):
        super().__init__()
        _require_positive(d_model=d_model, n_heads=n_heads, max_len=max_len)
        self.d_model = d_model
        self.n_heads = n_heads
        self.max_len = max_len
        self.causal = causal
        self.random_positions: int | None = None  # set by randomize(): draw training ids from [0, this)

    def randomize(self, max_position: int) -> None:
        """Randomized positions (Ruoss et al. 2023): in training mode, a sequence of L tokens gets a
        sorted random subset of ``0 … max_position − 1`` as its ids, so the model meets large ids
        while trained on short sequences; in evaluation the ids are the plain ``0 … L − 1``. Drawn
        with torch's global generator (on the host), so a training seed fixes them."""
        _require_positive(max_position=max_position)
        if self.axes != "1d":
            raise ValueError(f"randomized positions are for 1-D positions; this encoding's axes are {self.axes}")
        if self.max_positions is not None and max_position > self.max_positions:
            raise ValueError(f"max_position {max_position} is beyond the table's {self.max_positions} rows "
                             f"(max_len); allowed: 1 to {self.max_positions}")
        self.random_positions = max_position

    # ----- traits --------------------------------------------------------------------------
    @property
    def combine(self) -> str:
        """How the input hook combines position with the token embedding (``none`` for other hooks)."""
        return "none"

    @property
    def traits(self) -> Traits:
        return Traits(self.hook, self.combine, self.axes, self.bounded, self.trained_positions,
                      self.random_positions is not None, self.reads, self.attention)

    @property
    def reads(self) -> str:
        """What the position signal is computed from: the ids (hooks 1-3), nothing (no hook), or content."""
        return "nothing" if self.hook == "none" else "positions"

    @property
    def max_positions(self) -> int | None:
        """The most positions this encoding can take (a bounded table's rows), or ``None`` for no limit."""
        return self.max_len if self.bounded else None

    # ----- widths --------------------------------------------------------------------------
    @property
    def rotated_width(self) -> int:
        """Dimensions of q (and of k) per token that :meth:`rotate` turns, over all heads (FLOP counts)."""
        return 0

    @property
    def query_key_width(self) -> int:
        """Width of q (and of k) per token after :meth:`rotate`, over all heads: what ``q·kᵀ`` and a key cache
        cost. The model width, unless the hook widens them (PoPE's cosine and sine halves)."""
        return self.model_width

    def rotation_flops(self, batch_size: int, seq_len: int, mode: str) -> int:
        """FLOPs of :meth:`rotate` on ``seq_len`` tokens of ``batch_size`` sequences in one layer (``mode="train"``:
        and its backward), under :mod:`posbench.flops`' convention: RoPE's complex multiply per rotated pair of
        q and of k (3 FLOPs per rotated element), the gradient turned back by another."""
        return 2 * 3 * batch_size * seq_len * self.rotated_width * (2 if mode == "train" else 1)

    def layers(self, n_layers: int) -> list[PositionalEncoding]:
        """The encoding each of ``n_layers`` layers runs its query/key and logit hooks with: this one in every
        layer, unless a layer pattern (:mod:`posbench.encodings.layer_pattern`) gives some layers another."""
        return [self] * n_layers

    @property
    def token_width(self) -> int:
        """Width of the token embedding E that enters :meth:`inject`."""
        return self.d_model

    @property
    def model_width(self) -> int:
        """Width of the residual stream after :meth:`inject` (d + d_p for a naive concat)."""
        return self.d_model

    # ----- positions -----------------------------------------------------------------------
    def positions(self, seq_len: int, device: torch.device | str | None = None, offset: int = 0) -> Positions:
        """The positions of ``seq_len`` tokens after ``offset`` earlier ones (a cache): ids
        ``offset … offset + L − 1`` (in training, random ones after :meth:`randomize`); grid
        encodings give (row, column) ids."""
        if self.random_positions is None or not self.training:
            return Positions.arange(seq_len, offset, device)
        if offset:
            raise ValueError("randomized positions are drawn for whole training sequences, not after a cache")
        if seq_len > self.random_positions:
            raise ValueError(f"{seq_len} tokens but randomized positions draw from {self.random_positions} ids "
                             f"(max_position); allowed: at most {self.random_positions} tokens")
        ids = torch.randperm(self.random_positions)[:seq_len].sort().values  # (L,) on the host
        return Positions(ids.to(device), int(ids[-1]) if seq_len else 0)

    # ----- the first three hooks: from position ids -------------------------------------------
    def inject(self, tokens: torch.Tensor, positions: Positions) -> torch.Tensor:
        """Input hook: ``(B, L, token_width)`` -> ``(B, L, model_width)``."""
        return tokens

    def rotate(self, q: torch.Tensor, k: torch.Tensor, positions: Positions) -> tuple[torch.Tensor, torch.Tensor]:
        """Query/key hook: ``q, k (…, L, d_head)`` of the tokens at ``positions`` -> the same shapes.

        One call for both, because a scheme may transform them differently (xPos scales q and k
        by inverse factors)."""
        return q, k

    def rotate_in_place(self, q: torch.Tensor, k: torch.Tensor,
                        positions: Positions) -> tuple[torch.Tensor, torch.Tensor]:
        """The query/key hook as the attention calls it: ``q`` and ``k`` are its fresh projection, the
        caller's to change, so a scheme may turn them in place where no gradient is recorded
        (:class:`~posbench.encodings.rope.TurnedByRows`); by default, :meth:`rotate`. Turned in place, a
        decode step makes no new q and k per layer, and the values are bit for bit those of :meth:`rotate`."""
        return self.rotate(q, k, positions)

    def attention_bias(self, query: Positions, key: Positions) -> torch.Tensor | None:
        """Logit hook: ``(n_heads, len(query), len(key))`` float, or ``None`` when the scheme adds none.

        The default reads :meth:`relative_bias` at the offsets ``key id − query id``; a bias that
        depends on more than the offset (the query's own position, say) overrides this."""
        offsets = key.ids[None, :] - query.ids[:, None]  # (q, k)
        return self.relative_bias(offsets, max(query.max_position, key.max_position))

    def relative_bias(self, offsets: torch.Tensor, max_distance: int) -> torch.Tensor | None:
        """``(n_heads, *offsets.shape)`` bias of integer offsets ``j − i``, for a bias that depends on
        the offset alone; ``None`` otherwise (the default). ``max_distance`` bounds ``|offsets|`` on
        the host, so an encoding can pick a cached table without reading the device.

        An encoding that gives it gets :meth:`attention_bias` from it, and attention on contiguous
        positions reads one ``(h, 2L − 1)`` table as strided views, never building ``(h, L, L)``."""
        return None

    def decode_window(self, position: int) -> int | None:
        """For a bias that is 0 on a run of keys ending at the query and −inf before it (local attention): how
        many keys a query at ``position`` sees, itself included; ``None`` (the default) for any other bias. A
        decode step attends those last keys of the cache alone, unmasked, as a serving stack's window cache
        does (:class:`posbench.attention.WindowMask`): what the mask gives, up to rounding, at their cost."""
        return None

    # ----- the fourth hook: from content (its design: posbench.encodings.contextual) ---------------
    def content(self, q: torch.Tensor, k: torch.Tensor, layer: LayerInput) -> object | None:
        """Once per layer and forward pass: what the encoding derives from the layer's queries ``q (B, h,
        q_len, d_head)``, keys ``k (B, h, k_len, d_head)`` (a cache's included) and ``layer`` (its input, its
        index, the cache), for :meth:`content_bias` to read per block of queries; ``None``: nothing. On the
        ``contextual_logits`` path ``q`` comes scaled by ``1/√d_head``, as the logits are made of it."""
        return None

    def content_bias(self, content, logits: torch.Tensor | None, start: int, stop: int,
                     keys: int) -> torch.Tensor | None:
        """The bias ``(B, h, stop − start, keys)`` added to the logits of queries ``start … stop`` (of the
        layer's ``q_len``) against the first ``keys`` keys, from :meth:`content`'s result and, for an
        encoding that reads ``qk``, that block's ``logits`` (scaled by ``1/√d_head``, ``-inf`` where causal
        attention hides a key); ``None``: no bias (the default)."""
        return None

    def carry_keys(self, k: torch.Tensor, layer: LayerInput) -> None:
        """A decode step's keys ``k (B, h, T + 1, d_head)``, the cache's own (its new token's last): an encoding
        whose logit of a cached key is the plain ``q·kᵀ`` once the key is transformed by the new token (PaTH's
        ``H_i``) rewrites the first ``T`` in place and marks the cache (``KVCache.keys_carried``); attention then
        runs the ``carried`` path (:func:`posbench.attention.choose_path`). Not implemented by default: the
        encoding keeps its cached keys."""
        raise NotImplementedError

    def content_flops(self, batch_size: int, q_len: int, k_len: int, mode: str) -> int:
        """FLOPs of the fourth hook in a forward pass over all layers (``mode="train"``: and its backward),
        under :mod:`posbench.flops`' convention: whatever its path adds to the attention matmuls."""
        return 0

    def rescaled(self, scaling) -> PositionalEncoding:
        """A copy with rotary frequencies scaled (:class:`~posbench.encodings.rope.RopeScaling`); only
        rotary encodings have them."""
        raise ValueError(f"{type(self).__name__} has no rotary frequencies to scale; eval scaling applies to "
                         f"the RoPE family (rope, rope_*, p_rope*, xpos, mrope)")

    def bias_flops(self, q_len: int, k_len: int, mode: str) -> int:
        """FLOPs of building the logit bias once for a forward pass (``mode="train"``: and its backward),
        under :mod:`posbench.flops`' convention; 0 for a bias that is looked up or gathered."""
        return 0

    def bias_build_elements(self, q_len: int, k_len: int, training: bool = False) -> int:
        """Elements that building one ``(h, q_len, k_len)`` logit bias holds at its peak besides the bias
        itself (an MLP's outputs over every query and key, say), for :mod:`posbench.footprint`; ``training``:
        with what autograd keeps of them for the backward. 0 for a bias that is looked up or gathered."""
        return 0

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, n_heads={self.n_heads}, max_len={self.max_len}"


def _require_positive(**values: int) -> None:
    for name, value in values.items():
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
