"""Where and in which precision a job runs: the one vocabulary of device and dtype names.

Every command (``profile``, ``preflight``, ``train``, ``probe``, ``advise``), the workflow's config
checks, wildcards and record paths spell devices and dtypes with the constants here; the JSON and
YAML schemas, which cannot import them, are tied to them by ``tests/test_devices.py`` (as is the rule
that no other module under ``posbench/`` spells a name itself).

Devices: ``cpu``; ``cuda``, or ``cuda:N`` for the N-th visible GPU; ``mps`` (Apple silicon). Training
(``posbench train``, and the probe's language model) takes cpu and cuda: its set-up for repeatable
runs (:func:`posbench.train.deterministic`) is written for those two.

Dtypes, by torch's names: ``float32``, ``bfloat16``, ``float16``. A profile cell takes any of them
(inference runs in it; a training step is mixed precision, see :func:`posbench.profile.weight_dtype`).
Training takes float32, or bfloat16 as mixed precision (the forward autocast to it, weights and AdamW
state in float32); not float16, whose gradients underflow without the loss scaling training does not do.
"""

from __future__ import annotations

import re
import sys
from contextlib import nullcontext
from dataclasses import dataclass

import torch

CPU, CUDA, MPS = "cpu", "cuda", "mps"
FLOAT32, BFLOAT16, FLOAT16 = "float32", "bfloat16", "float16"
TORCH_DTYPES = {FLOAT32: torch.float32, BFLOAT16: torch.bfloat16, FLOAT16: torch.float16}
TRAINING_DTYPES = (FLOAT32, BFLOAT16)


@dataclass(frozen=True)
class Devices:
    """The device kinds one command takes; ``cuda`` is also taken with an index (``cuda:1``)."""

    kinds: tuple[str, ...]

    @property
    def names(self) -> tuple[str, ...]:
        """As a user reads them: ``cpu, cuda, cuda:N, mps``."""
        return tuple(name for kind in self.kinds for name in ((kind, f"{kind}:N") if kind == CUDA else (kind,)))

    @property
    def allowed(self) -> str:
        return ", ".join(self.names)

    @property
    def regex(self) -> str:
        """What a device name matches in full (a wildcard's constraint; the schemas' pattern inside ``^(…)$``)."""
        return "|".join(f"{kind}(:[0-9]+)?" if kind == CUDA else kind for kind in self.kinds)

    @property
    def pattern(self) -> re.Pattern:
        return re.compile(self.regex)

    def __contains__(self, device) -> bool:
        return isinstance(device, str) and self.pattern.fullmatch(device) is not None


ANY_DEVICE = Devices((CPU, CUDA, MPS))  # profile and preflight
TRAINING_DEVICES = Devices((CPU, CUDA))  # train, and the probe's language model


def check_training(device: str, dtype: str) -> None:
    """A one-line ``ValueError`` for a device or dtype no training run takes (whether this machine has
    the device is asked later: its absence is a ``skipped`` record, not a mistake)."""
    if device not in TRAINING_DEVICES:
        raise ValueError(f"device {device!r} is not allowed; allowed: {TRAINING_DEVICES.allowed}")
    if dtype not in TRAINING_DTYPES:
        raise ValueError(f"dtype {dtype!r} is not allowed; allowed: {', '.join(TRAINING_DTYPES)}")


def on_cuda(device: str | torch.device) -> bool:
    """Whether ``device`` (``cuda``, ``cuda:1``, a ``torch.device``) is a CUDA GPU."""
    return torch.device(device).type == CUDA


def missing_device(device: str) -> str | None:
    """Why this machine cannot run on ``device``, or ``None`` when it can."""
    kind, _, index = device.partition(":")
    if kind == CUDA:
        if not torch.cuda.is_available():
            return f"no CUDA device visible (torch {torch.__version__}, built for CUDA {torch.version.cuda})"
        if index and int(index) >= torch.cuda.device_count():
            return f"{device} does not exist: {torch.cuda.device_count()} CUDA device(s) visible"
    if kind == MPS and not (hasattr(torch.backends, MPS) and torch.backends.mps.is_available()):
        return f"MPS is not available (torch {torch.__version__} on {sys.platform})"
    return None


def present() -> tuple[list[str], list[str]]:
    """The device kinds this machine has, and each other one with why it is missing."""
    missing = {kind: missing_device(kind) for kind in ANY_DEVICE.kinds}
    return ([kind for kind, reason in missing.items() if reason is None],
            [f"{kind} ({reason})" for kind, reason in missing.items() if reason is not None])


def converted(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``x`` in ``dtype``: itself when it already is (a no-op ``.to`` is still a dispatch, per layer when decoding)."""
    return x if x.dtype == dtype else x.to(dtype)


def autocast(device: torch.device, dtype: str):
    """A forward's precision: below float32 autocast to ``dtype`` on ``device``; float32 changes nothing."""
    lower = TORCH_DTYPES[dtype]
    return torch.autocast(device.type, dtype=lower) if lower != torch.float32 else nullcontext()
