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
from posbench.cache import KVCache
from posbench.encodings.base import LayerInput
from posbench.positions import Positions
from posbench.sizes import SIZES


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
