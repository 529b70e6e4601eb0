"""``flip_flop``: the flip-flop language (Liu et al. 2023): read back the last bit written, across
instructions that only distract.

Sequence (token ids): ``length`` instructions, each an opcode and a bit::

    w 1   i 0   i 1   r 1   w 0   i 1   r 0   …   r b

``w b`` writes ``b``, ``i b`` is ignored, ``r b`` reads: ``b`` must be the last written bit. As in
the paper's FFL(p), an example starts with a write and ends with a read; the instructions between
are ignores with probability ``p_ignore`` (0.8, the paper's default) and writes or reads with half
the rest each; the bits of writes and ignores are fair coins. Only the bits after ``r`` are scored
(the paper's deterministic positions): exact match needs every read of the sequence right, token
accuracy is per read (chance: the majority bit's share, about 1/2). A read must look past every
ignore since the last write, however far back it is: the attention glitch the paper names.

Trained on 32 instructions (64 tokens, to fit a ``tiny`` model's short run on one core; the paper
trains on 512 tokens with larger models) and evaluated to 8× it. 600 steps, the sequence tasks'
default budget, untuned.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from posbench.tasks.base import IGNORE
from posbench.tasks.registry import register
from posbench.tasks.sequence import SequenceTask

OPCODES = ("w", "r", "i")  # token ids 2, 3, 4, after the bits 0 and 1


@register("flip_flop")
@dataclass(frozen=True)
class FlipFlop(SequenceTask):
    """Token ids: bits ``0``, ``1``, opcodes ``w``, ``r``, ``i``, padding."""

    kind = "structured"

    train_length: int = 32
    min_length: int = 2
    p_ignore: float = 0.8

    def __post_init__(self):
        if not 0 <= self.p_ignore < 1:
            raise ValueError(f"flip_flop: p_ignore must be in [0, 1), got {self.p_ignore}")
        if not 2 <= self.min_length <= self.train_length:
            raise ValueError(f"flip_flop: min_length must be 2 … train_length ({self.train_length}), "
                             f"got {self.min_length}")

    @staticmethod
    def opcode(name: str) -> int:
        return 2 + OPCODES.index(name)

    @property
    def vocab_size(self) -> int:
        return 2 + len(OPCODES) + 1

    def sequence_length(self, length: int) -> int:
        return 2 * length - 1  # the last bit is only a target

    def valid_length(self, length: int) -> int:
        return max(length, 2)

    def example(self, rng: np.random.Generator, length: int) -> tuple[np.ndarray, np.ndarray]:
        p_other = (1 - self.p_ignore) / 2
        middle = rng.choice(["w", "r", "i"], size=length - 2, p=[p_other, p_other, self.p_ignore])
        opcodes = np.array(["w", *middle, "r"])
        bits = rng.integers(0, 2, size=length)
        written = np.where(opcodes == "w", bits, -1)
        last_written = np.maximum.accumulate(np.where(written >= 0, np.arange(length), 0))  # index of the last write
        bits = np.where(opcodes == "r", bits[last_written], bits)
        sequence = np.stack([[self.opcode(op) for op in opcodes], bits], axis=1).ravel()  # (2 · length,)
        scored = np.zeros(2 * length, dtype=bool)
        scored[1::2] = opcodes == "r"  # the bits of reads
        targets = np.where(scored[1:], sequence[1:], IGNORE)
        return sequence[:-1], targets
