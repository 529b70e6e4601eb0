"""Learning-rate schedules: one run's cosine, and warmup–stable–decay with annealed checkpoints.

**Cosine** (the default): linear warm-up over ``warmup_fraction`` of the steps, then a cosine down to
10 % of the peak at the last step. A model taken from the middle of such a run has not been annealed,
so it says little about what that many steps would give.

**Warmup–stable–decay** (:class:`Checkpoints`; Hägele et al. 2024, "Scaling Laws and Compute-Optimal
Training Beyond Fixed Training Durations"): warm-up, then the peak rate held (the *trunk*); at each
checkpoint budget B a *decay branch* of ``round(decay_fraction · B)`` steps leaves the trunk at
``B - decay`` steps and takes the rate linearly to 0, so the branch's model is an annealed model of B
steps in all. Every branch starts from a copy of the trunk (weights, AdamW state, data stream) and the
trunk goes on untouched; the last branch is the trunk's own end. So the last checkpoint's model is the
one a single run of the last budget gives, and checkpoint k's the one a run declared with the first k
budgets gives (the warm-up is a share of the *first* budget, the same in both). The cost over a single
run of the last budget is the earlier branches: ``decay_fraction`` × the sum of the earlier budgets
(15 % of the last for budgets B/4, B/2, B at a fifth).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

COSINE_FLOOR = 0.1  # the cosine schedule ends at this share of the peak


def cosine(steps: int, warmup_fraction: float) -> Callable[[int], float]:
    """The rate factor of optimizer step ``step`` (0-based): linear warm-up, then cosine to
    :data:`COSINE_FLOOR` at the last step."""
    warmup = max(1, round(steps * warmup_fraction))

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = (step - warmup) / max(1, steps - warmup)
        return COSINE_FLOOR + (1 - COSINE_FLOOR) * 0.5 * (1 + math.cos(math.pi * progress))

    return factor


@dataclass(frozen=True)
class Checkpoints:
    """A warmup–stable–decay run with an annealed model at each budget of ``budgets`` (steps, increasing)."""

    budgets: tuple[int, ...]
    decay_fraction: float = 0.2
    warmup_fraction: float = 0.1

    def __post_init__(self):
        if not self.budgets or any(b <= 0 for b in self.budgets) or list(self.budgets) != sorted(set(self.budgets)):
            raise ValueError(f"checkpoints {list(self.budgets)}: allowed: positive step counts, strictly increasing")
        if not 0 < self.decay_fraction < 1:
            raise ValueError(f"decay_fraction {self.decay_fraction}: allowed: strictly between 0 and 1")
        trunks = [self.trunk_steps(b) for b in self.budgets]
        if trunks[0] <= self.warmup or trunks != sorted(set(trunks)):
            raise ValueError(f"checkpoints {list(self.budgets)}: each decay branch must leave the trunk after the "
                             f"warm-up ({self.warmup} steps) and after the previous branch left it")

    @property
    def warmup(self) -> int:
        return max(1, round(self.budgets[0] * self.warmup_fraction))

    def decay_steps(self, budget: int) -> int:
        return max(1, round(self.decay_fraction * budget))

    def trunk_steps(self, budget: int) -> int:
        """The trunk's steps when the branch of ``budget`` leaves it."""
        return budget - self.decay_steps(budget)

    def trunk_factor(self, step: int) -> float:
        """The rate factor of trunk step ``step`` (0-based): warm-up, then the peak."""
        return min(1.0, (step + 1) / self.warmup)

    def decay_factor(self, budget: int, step: int) -> float:
        """The rate factor of step ``step`` (0-based) of ``budget``'s branch: linear from the peak toward 0."""
        return 1 - step / self.decay_steps(budget)

    @property
    def total_steps(self) -> int:
        """Optimizer steps of the whole run: the last budget and every earlier branch."""
        return self.budgets[-1] + sum(self.decay_steps(b) for b in self.budgets[:-1])
