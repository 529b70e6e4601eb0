"""A pre-LayerNorm Transformer whose position handling is entirely its encoding's four hooks.

The model never asks which encoding it has: it calls ``inject`` on the token embeddings,
``rotate`` on queries and keys, and turns ``attention_bias`` into a logit mask once per forward pass
(:mod:`posbench.attention` picks how; the bias is shared by all layers, as in T5), each with the
same :class:`~posbench.positions.Positions` value: the batch's own, or the encoding's plain ones. A layer
runs the query/key, logit and content hooks of the encoding :meth:`~posbench.encodings.PositionalEncoding.layers`
gives it (the same one in every layer, except for a layer pattern such as iRoPE's), and hands attention its own
input, index and the cache (a :class:`~posbench.encodings.base.LayerInput`): the fourth hook, position from
content, reads them there (:mod:`posbench.encodings.contextual`).
Widths come from the encoding, so a naive concat really runs the whole network at width d + d_p.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import torch
from torch import nn

from posbench import encodings
from posbench.attention import attend, build_mask
from posbench.encodings.base import LayerInput
from posbench.positions import Positions

# Named sizes, defined here only. d_ff defaults to 4 × the model width.
SIZES: dict[str, dict[str, int]] = {
    "tiny": dict(d_model=64, n_layers=2, n_heads=4),
    "small": dict(d_model=128, n_layers=4, n_heads=4),
    "base": dict(d_model=256, n_layers=4, n_heads=8),
    "medium": dict(d_model=512, n_layers=6, n_heads=8),
    "large": dict(d_model=768, n_layers=12, n_heads=12),
}


@dataclass(frozen=True)
class ModelConfig:
    """Everything that defines a model. ``encoding_options`` go to the encoding's family."""

    vocab_size: int = 256
    d_model: int = 256
    n_layers: int = 4
    n_heads: int = 8
    d_ff: int | None = None  # None: 4 × model width
    max_len: int = 1024  # longest sequence the run uses, evaluation included
    encoding: str = "sinusoidal"
    encoding_options: dict = field(default_factory=dict)
    causal: bool = True  # causal LM; False: bidirectional
    n_classes: int | None = None  # set: classify the mean-pooled sequence instead of per-token logits
    patch_dim: int | None = None  # set: inputs are float patches (B, L, patch_dim) instead of token ids

    @classmethod
    def from_size(cls, size: str, **overrides) -> ModelConfig:
        if size not in SIZES:
            raise ValueError(f"unknown size {size!r}; allowed: {', '.join(SIZES)}")
        return cls(**{**SIZES[size], **overrides})

    def replace(self, **changes) -> ModelConfig:
        return dataclasses.replace(self, **changes)


def appended(cached: torch.Tensor | None, room: torch.Tensor | None, new: torch.Tensor, dim: int,
             reserve: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """``cached`` (the first T entries of ``room`` along ``dim``) followed by ``new``, written in place into
    ``room`` while it has space, else into a fresh buffer: of ``reserve`` entries where they suffice, else of
    the next power of two above the length needed (so a step's append copies only the new entries, and
    growing past a reservation costs a copy once per doubling). Returns (the T + L entries, a view of the
    buffer; the buffer)."""
    dim %= new.dim()
    held = 0 if cached is None else cached.shape[dim]
    needed = held + new.shape[dim]
    if not fits(room, cached, new, dim, needed):
        needed = int(needed)  # a traced shape is a tensor
        shape = list(new.shape)
        shape[dim] = reserve if needed <= reserve else 1 << needed.bit_length()
        room = new.new_empty(shape)
        if cached is not None:
            room.narrow(dim, 0, held).copy_(cached)
    room.narrow(dim, held, new.shape[dim]).copy_(new)
    return room.narrow(dim, 0, needed), room


def fits(room: torch.Tensor | None, cached: torch.Tensor | None, new: torch.Tensor, dim: int, needed: int) -> bool:
    """Whether ``room`` can take ``needed`` entries along ``dim`` of tensors shaped like ``new`` elsewhere,
    and ``cached`` (if any) is its own first entries (not a tensor someone put in the cache by hand)."""
    if room is None or room.shape[dim] < needed:
        return False
    same_elsewhere = all(a == b for i, (a, b) in enumerate(zip(room.shape, new.shape)) if i != dim)
    return same_elsewhere and (cached is None or cached.data_ptr() == room.data_ptr())


@dataclass
class KVCache:
    """Keys and values of every layer for the tokens a model has seen, and those tokens' positions,
    for token-by-token generation. The model updates it in place: each call appends its tokens.

    Preallocated, as serving stacks do: each layer's keys, values and states live in a buffer of ``reserve``
    tokens (what a caller knows it will need: :func:`generate` its prompt and new tokens), grown by doubling
    beyond (:func:`appended`), so a generated token writes only its own entries, where appending by
    ``torch.cat`` copied every cached key and value of every layer at every step (~a quarter of a step's
    time at 1,024 tokens, ``results/reference/bench-cpu-amd-epyc-2core/decode.txt``). ``keys``, ``values``
    and ``states`` are views of the first T entries of those buffers; :meth:`truncate` shortens the views and
    the next append overwrites what lay beyond them.

    Keys enter the cache already rotated (RoPE turns a key once, at its own position); logit biases
    are built for the new queries against every cached key from the stored key positions. Dynamic
    NTK scaling and LongRoPE are the exceptions where cached and full forwards differ: their frequencies
    follow the sequence length, and a cached key keeps the ones of the step it entered at (as in
    Hugging Face).

    A contextual encoding keeps what it derives from each token per layer in ``states`` (FoX: the
    cumulative forget gates), token axis last, so that truncating the cache truncates them too. One
    whose cached keys change as tokens arrive (PaTH, ``rewrites_cache``) replaces them (:meth:`rewrite_keys`) or
    rewrites them in place (:meth:`keys_carried`): no earlier state is kept, so such a cache refuses to be cut
    back to a shorter one.
    """

    keys: list[torch.Tensor | None]  # per layer (B, h, T, d_head); PoPE: 2 · d_head
    values: list[torch.Tensor | None]
    positions: Positions | None = None  # of the T cached tokens
    states: list[dict[str, torch.Tensor]] = field(default_factory=list)  # per layer: name -> (…, T)
    buffers: dict[tuple, torch.Tensor] = field(default_factory=dict)  # (what, layer[, name]) -> its buffer
    reserve: int = 0  # tokens each buffer is first allocated for
    rewritten: bool = False  # cached keys were changed by later tokens: no shorter cache can be recovered

    @classmethod
    def empty(cls, n_layers: int, reserve: int = 0) -> KVCache:
        return cls([None] * n_layers, [None] * n_layers, states=[{} for _ in range(n_layers)], reserve=reserve)

    def __len__(self) -> int:
        return 0 if self.positions is None else len(self.positions)

    def truncate(self, length: int, carried: bool = False) -> None:
        """Forget every token after the first ``length`` (views: nothing is copied). ``carried``: cut back a cache
        whose keys later tokens rewrote anyway, its keys as they were carried and its states whole (a rewriting
        encoding's are not per token): a cache of the same length, not of the same tokens, for timing the same
        work step after step (:func:`posbench.profile.decode_step`)."""
        if self.rewritten and not carried and 0 < length < len(self):
            raise ValueError(f"cannot truncate to {length} tokens: later tokens rewrote the cached keys "
                             f"(an encoding with rewrites_cache); allowed: 0 or {len(self)}")
        self.rewritten = self.rewritten and length > 0
        self.keys = [None if k is None else k[..., :length, :] for k in self.keys]
        self.values = [None if v is None else v[..., :length, :] for v in self.values]
        self.positions = None if self.positions is None else self.positions[:length]
        if not carried:
            self.states = [{name: t[..., :length] for name, t in state.items()} for state in self.states]

    def nbytes(self) -> int:
        """Memory the cache holds, all layers: its buffers (the views of a cache built without them)."""
        views = [t for t in (*self.keys, *self.values, *(t for s in self.states for t in s.values())) if t is not None]
        held = {t.data_ptr(): t.numel() * t.element_size() for t in self.buffers.values()}
        for t in views:
            held.setdefault(t.data_ptr(), t.numel() * t.element_size())
        return sum(held.values())

    def extend(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append one layer's new keys and values ``(B, h, L, d_head)``; all of them back ``(B, h, T + L, d_head)``."""
        self.keys[layer] = self._append(("keys", layer), self.keys[layer], k, dim=-2)
        self.values[layer] = self._append(("values", layer), self.values[layer], v, dim=-2)
        return self.keys[layer], self.values[layer]

    def rewrite_keys(self, layer: int, k: torch.Tensor) -> None:
        """Replace one layer's cached keys by ``k`` of their shape ``(B, h, T, d_head)``: the keys carried
        through the tokens that arrived since (PaTH's state)."""
        self.keys[layer] = k
        self.buffers.pop(("keys", layer), None)  # k is a tensor of its own: the next append moves it to a new buffer
        self.rewritten = True

    def keys_carried(self) -> None:
        """The cached keys were rewritten in place by a later token (PaTH's carried decode step)."""
        self.rewritten = True

    def extend_state(self, layer: int, name: str, new: torch.Tensor) -> torch.Tensor:
        """Append one layer's state of the new tokens ``(…, L)``; all of it back ``(…, T + L)``."""
        state = self.states[layer]
        state[name] = self._append(("states", layer, name), state.get(name), new, dim=-1)
        return state[name]

    def _append(self, slot: tuple, cached: torch.Tensor | None, new: torch.Tensor, dim: int) -> torch.Tensor:
        grown, self.buffers[slot] = appended(cached, self.buffers.get(slot), new, dim, self.reserve)
        return grown


class SelfAttention(nn.Module):
    def __init__(self, width: int, n_heads: int):
        super().__init__()
        if width % n_heads:
            raise ValueError(f"model width {width} is not divisible by n_heads {n_heads}")
        self.n_heads = n_heads
        self.qkv = nn.Linear(width, 3 * width, bias=False)
        self.out = nn.Linear(width, width, bias=False)

    def queries_keys_values(self, x, encoding, positions) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``x (B, L, width)`` -> q, k, v ``(B, h, L, d_head)``, q and k turned by the encoding at ``positions``."""
        B, L, width = x.shape
        qkv = self.qkv(x).view(B, L, 3, self.n_heads, width // self.n_heads)
        # split on the (B, L, 3, h, d_head) layout: backward stacks the gradients straight into it (no copy)
        q, k, v = (t.transpose(1, 2) for t in qkv.unbind(2))  # 3 × (B, h, L, d_head)
        q, k = encoding.rotate_in_place(q, k, positions)  # q and k are this projection's own
        return q, k, v

    def forward(self, x, encoding, positions, mask, causal, layer: int, cache: KVCache | None = None):
        B, L, width = x.shape
        q, k, v = self.queries_keys_values(x, encoding, positions)
        if cache is not None:
            k, v = cache.extend(layer, k, v)  # (B, h, T + L, d_head)
        y = attend(q, k, v, mask, causal, LayerInput(x, layer, cache))  # (B, h, L, d_head)
        return self.out(y.transpose(1, 2).reshape(B, L, width))


class FeedForward(nn.Module):
    def __init__(self, width: int, d_ff: int):
        super().__init__()
        self.up = nn.Linear(width, d_ff, bias=False)
        self.down = nn.Linear(d_ff, width, bias=False)

    def forward(self, x):
        return self.down(torch.nn.functional.gelu(self.up(x)))


class Block(nn.Module):
    def __init__(self, width: int, n_heads: int, d_ff: int):
        super().__init__()
        self.norm_attn = nn.LayerNorm(width)
        self.attn = SelfAttention(width, n_heads)
        self.norm_ff = nn.LayerNorm(width)
        self.ff = FeedForward(width, d_ff)

    def forward(self, x, encoding, positions, mask, causal, layer, cache=None):
        x = x + self.attn(self.norm_attn(x), encoding, positions, mask, causal, layer, cache)
        return x + self.ff(self.norm_ff(x))


class Transformer(nn.Module):
    """Token ids ``(B, L)`` (or patches ``(B, L, patch_dim)``) -> logits ``(B, L, vocab)`` or ``(B, n_classes)``."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.encoding = encodings.build(cfg.encoding, d_model=cfg.d_model, n_heads=cfg.n_heads,
                                        max_len=cfg.max_len, causal=cfg.causal, n_layers=cfg.n_layers,
                                        **cfg.encoding_options)
        width, token_width = self.encoding.model_width, self.encoding.token_width
        self.width = width
        self.d_ff = cfg.d_ff or 4 * width
        if cfg.patch_dim:
            self.embed = nn.Linear(cfg.patch_dim, token_width, bias=False)
        else:
            self.embed = nn.Embedding(cfg.vocab_size, token_width)
        self.blocks = nn.ModuleList(Block(width, cfg.n_heads, self.d_ff) for _ in range(cfg.n_layers))
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, cfg.n_classes or cfg.vocab_size, bias=False)

    def forward(self, inputs: torch.Tensor, positions: Positions | None = None,
                cache: KVCache | None = None) -> torch.Tensor:
        """``positions``: where the tokens sit (e.g. randomized ids); default the encoding's plain ones,
        after the tokens already in ``cache``. With a cache, the logits are the new tokens' and the
        cache holds them afterwards."""
        past = len(cache) if cache is not None else 0
        if positions is None:
            positions = self.encoding.positions(inputs.shape[1], inputs.device, past)  # ids (L,) or (L, axes)
        keys = positions if not past else cache.positions.then(positions)  # every token attended to
        x = self.embedded(inputs, positions)  # (B, L, width)
        layer_encodings = self.layer_encodings
        masks = {encoding: build_mask(encoding, positions, keys, self.cfg.causal, x.dtype)
                 for encoding in dict.fromkeys(layer_encodings)}  # one per distinct encoding, shared by its layers
        for layer, (block, encoding) in enumerate(zip(self.blocks, layer_encodings)):
            x = block(x, encoding, positions, masks[encoding], self.cfg.causal, layer, cache)
        positions.derived.clear()  # the layers shared what the encoding derived from the ids (a rotary table's rows)
        if cache is not None:
            cache.positions = keys
        x = self.norm(x)
        if self.cfg.n_classes:
            return self.head(x.mean(dim=1))  # (B, n_classes)
        return self.head(x)  # (B, L, vocab)

    @property
    def layer_encodings(self) -> list[encodings.PositionalEncoding]:
        """The encoding of each layer (read at every call: an evaluation may swap ``self.encoding``)."""
        return self.encoding.layers(len(self.blocks))

    def embedded(self, inputs: torch.Tensor, positions: Positions) -> torch.Tensor:
        """The residual stream entering the first block: tokens embedded, the input hook applied ``(B, L, width)``."""
        return self.encoding.inject(self.embed(inputs), positions)

    def first_queries_keys(self, inputs: torch.Tensor, positions: Positions) -> tuple[torch.Tensor, torch.Tensor]:
        """The first block's queries and keys ``(B, h, L, d_head)`` as :meth:`forward` forms them, every token at
        ``positions`` (:mod:`posbench.axis_check` reads keys at moved positions against queries at their own)."""
        block = self.blocks[0]
        q, k, _ = block.attn.queries_keys_values(block.norm_attn(self.embedded(inputs, positions)),
                                                 self.layer_encodings[0], positions)
        return q, k


def build_model(cfg: ModelConfig) -> Transformer:
    return Transformer(cfg)


@torch.no_grad()
def generate(model: Transformer, prompt: torch.Tensor, max_new_tokens: int, use_cache: bool = True) -> torch.Tensor:
    """Greedy continuation of ``prompt (B, P)`` token ids: ``(B, P + max_new_tokens)``.

    With ``use_cache`` the prompt is run once and each new token attends to the cached keys and
    values; without, every step re-runs the whole sequence (the reference the cache must equal)."""
    if model.cfg.n_classes or model.cfg.patch_dim or not model.cfg.causal:
        raise ValueError("generate needs a causal language model over token ids")
    reserve = prompt.shape[1] + max_new_tokens
    tokens, cache = prompt, (KVCache.empty(model.cfg.n_layers, reserve) if use_cache else None)
    step_inputs = prompt
    for _ in range(max_new_tokens):
        logits = model(step_inputs, cache=cache) if use_cache else model(tokens)  # (B, L, vocab)
        next_token = logits[:, -1].argmax(-1, keepdim=True)  # (B, 1)
        tokens = torch.cat([tokens, next_token], dim=1)
        step_inputs = next_token
    return tokens


def meta_model(cfg: ModelConfig) -> Transformer:
    """The model on the meta device: every parameter's shape without its memory (the large sizes cost
    nothing), for parameter and FLOP counts."""
    with torch.device("meta"):
        return build_model(cfg)


def count_params(model: Transformer) -> dict[str, int]:
    """Parameters: ``total``, ``position`` (the encoding's own) and ``rest``."""
    total = sum(p.numel() for p in model.parameters())
    position = sum(p.numel() for p in model.encoding.parameters())
    return {"total": total, "position": position, "rest": total - position}
