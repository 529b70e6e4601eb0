"""The key/value cache of token-by-token generation: every layer's keys, values and contextual states for the
tokens a model has seen, in buffers that grow by doubling.

It sits below the encodings and the model (it needs only :mod:`posbench.positions`): an encoding's fourth hook
extends the cache's per-layer states (:class:`~posbench.encodings.base.LayerInput`), and the model appends keys
and values to it, so both read it from here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from posbench.positions import Positions


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
    tokens (what a caller knows it will need: :func:`posbench.model.generate` its prompt and new tokens), grown
    by doubling beyond (:func:`appended`), so a generated token writes only its own entries: appending by
    ``torch.cat`` would copy every cached key and value of every layer at every step. ``keys``, ``values``
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
