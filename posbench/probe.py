"""Does adding lose information? Read token identity and position back out of the input vectors.

The article (sections 三 and 四) argues that ``X = E + P`` loses nothing a network needs, because
token and position information stay separable ("正交性假设"). This module measures it, for adding
versus concatenating, as the width shrinks:

* **Input vectors.** ``encoding.inject`` is affine in the token embedding for every input encoding,
  so each combination is an addition in model space: ``x(t, pos) = e_t + p_pos`` with
  ``e_t = inject(E_t, 0) − inject(0, 0)`` and ``p_pos = inject(0, pos)``. For a concat, ``e_t = [E_t; 0]``
  and ``p_pos = [0; P_pos]`` — orthogonal by construction; when adding they share all d dimensions.
* **Embeddings.** ``random``: Gaussian rows scaled so that their mean squared norm equals the
  position vectors' over positions ``0 … L−1`` (a learned table is at its initialisation, itself
  Gaussian). ``trained``: a short ``lm_prose`` run at this width (one layer by default), on
  ``device`` in ``dtype``'s precision as ``posbench train`` runs (a device this machine lacks gives a
  ``skipped`` record); the record states its steps, seed and held-out bits per character. The
  probes themselves run on the CPU.
* **Probes.** A linear probe (multinomial logistic regression) and a one-hidden-layer MLP, fitted
  by L-BFGS on z-scored inputs, stopped at the round with the lowest validation cross-entropy, to
  recover the token and, separately, the exact position. The (token, position) pairs are uniform
  over the ``V × L`` grid, and the held-out pairs are combinations the probe never saw: every
  distinct point is trivially recoverable by a lookup table, so what is measured is whether the
  token (position) can be read off its own component in new combinations.
  Held-out accuracy sits beside chance (1/V, 1/L), and the held-out cross-entropy gives the
  mutual-information lower bound ``I(X; Y) ≥ H(Y) − CE`` in bits, with ``H(Y) = log2 V`` (``log2 L``)
  for the uniform grid (clipped at 0; chance is 0 bits). Because a test pair's token was seen at
  other positions only, a probe that memorised which positions went with which token is pushed
  below chance, never above it.
* **Geometry.** Principal angles between the top-k principal subspaces of the (centred) token and
  position vectors, k the fewest components holding ``variance_kept`` (90 %) of each one's variance
  (with more tokens than dimensions the full span is all of ℝᵈ and says nothing), their mean
  squared cosine (the subspace overlap, 0 orthogonal … 1 identical), and the share of the position
  signal's energy inside the token subspace beside what a random subspace of that size would hold
  (k_token / width).
"""

from __future__ import annotations

import copy
import math
import sys
import time
from dataclasses import dataclass, replace
from functools import cache
from typing import TextIO

import torch
import torch.nn.functional as F
from torch import nn

from posbench import encodings, machine, records
from posbench.devices import CPU, FLOAT32, check_training, missing_device
from posbench.encodings.absolute import AbsoluteEncoding
from posbench.evaluation import evaluate
from posbench.positions import Positions
from posbench.train import RUN_FIELDS, TrainConfig, deterministic, fit, initial_model, resolve

TARGETS = ("token", "position")
PROBES = ("linear", "mlp")
EMBEDDINGS = ("random", "trained")
TRAINING_TASK = "lm_prose"
RANDOM_EMBEDDING = ("Gaussian N(0, s^2 I) rows, s^2 = mean over positions 0..L-1 of |P_pos|^2 / token width, "
                    "so E|E_t|^2 equals the position vectors' mean squared norm")
ROUND = 20  # L-BFGS iterations between validation checks
L2_PENALTY = 1e-4  # on every probe parameter; keeps separable problems from running off to infinite weights
SPLIT = ("distinct (token, position) pairs uniform over the V x L grid (all of it when it holds at most max_pairs); "
         "no held-out pair was seen in training")


class TrainingFailed(RuntimeError):
    """The language model for trained embeddings diverged; the message becomes the record's reason."""


@cache
def probe_encodings() -> tuple[str, ...]:
    """The encodings that put a position vector into the input (added or concatenated), 1-D only."""
    def is_input_1d(name: str) -> bool:
        traits = encodings.traits(name)
        return traits.hook == "input" and traits.axes == "1d"

    return tuple(name for name in encodings.names() if is_input_1d(name))


@dataclass(frozen=True)
class ProbeConfig:
    """One probe cell. ``vocab`` is the token count of random embeddings; trained ones use lm_prose's."""

    encoding: str
    d_model: int
    vocab: int | None = 64
    seq_len: int = 64
    seed: int = 0
    embedding: str = "random"
    train_steps: int = 300  # trained embeddings: optimizer steps of the lm_prose run
    train_layers: int = 1
    max_pairs: int = 4096
    test_fraction: float = 0.25
    validation_fraction: float = 0.2  # of the pairs the test split leaves; picks the probe's stopping round
    probe_iterations: int = 200
    mlp_hidden: int = 128
    variance_kept: float = 0.9
    threads: int = 1
    device: str = CPU  # trained embeddings: where the lm_prose run trains (devices.TRAINING_DEVICES)
    dtype: str = FLOAT32  # and in which precision (devices.TRAINING_DTYPES), as in posbench train


def check(config: ProbeConfig) -> None:
    """A ``ValueError`` naming the bad field and the allowed values, before any work is done."""
    if config.encoding not in probe_encodings():
        raise ValueError(f"encoding {config.encoding!r} puts no vector into the input; allowed: "
                         f"{', '.join(probe_encodings())}")
    if config.embedding not in EMBEDDINGS:
        raise ValueError(f"embedding {config.embedding!r}; allowed: {', '.join(EMBEDDINGS)}")
    if config.embedding == "trained" and config.vocab is not None:
        raise ValueError(f"vocab applies to random embeddings; trained ones use {TRAINING_TASK}'s vocabulary")
    if config.embedding == "random" and (config.vocab is None or config.vocab < 2):
        raise ValueError(f"vocab must be >= 2 for random embeddings, got {config.vocab}")
    check_training(config.device, config.dtype)
    if config.embedding == "random" and (config.device, config.dtype) != (CPU, FLOAT32):
        raise ValueError(f"device {config.device!r} and dtype {config.dtype!r} apply to trained embeddings (the "
                         f"{TRAINING_TASK} run); allowed with random ones: {CPU}, {FLOAT32}")
    if config.seq_len < 2:
        raise ValueError(f"seq_len must be >= 2 (position is the target), got {config.seq_len}")
    if config.d_model % 4:
        raise ValueError(f"d_model must be a positive multiple of 4 (sinusoids need an even width, also at d/2), "
                         f"got {config.d_model}")
    for name in ("d_model", "train_steps", "train_layers", "max_pairs", "probe_iterations", "mlp_hidden", "threads"):
        if getattr(config, name) <= 0:
            raise ValueError(f"{name} must be positive, got {getattr(config, name)}")
    if config.seed < 0:
        raise ValueError(f"seed must be >= 0, got {config.seed}")
    for name in ("test_fraction", "validation_fraction", "variance_kept"):
        if not 0 < getattr(config, name) < 1:
            raise ValueError(f"{name} must lie strictly between 0 and 1, got {getattr(config, name)}")


# ----- input vectors ------------------------------------------------------------------------------

@dataclass
class InputVectors:
    """The two parts of every input in model space: ``x(t, pos) = tokens[t] + positions[pos]``."""

    tokens: torch.Tensor  # (V, W)
    positions: torch.Tensor  # (L, W)

    def inputs(self, pairs: torch.Tensor) -> torch.Tensor:
        """``(N, 2)`` (token, position) pairs -> ``(N, W)`` input vectors."""
        return self.tokens[pairs[:, 0]] + self.positions[pairs[:, 1]]


def model_space(encoding: AbsoluteEncoding, embedding: torch.Tensor, seq_len: int) -> InputVectors:
    """Split what ``encoding.inject`` makes of (token, position) into its token and position parts.

    ``inject`` is affine in the token embedding (add, concat, concat_fixed), so
    ``inject(E_t, pos) = [inject(E_t, 0) − inject(0, 0)] + inject(0, pos)``.
    """
    with torch.no_grad():
        first = Positions.from_ids(torch.zeros(len(embedding), dtype=torch.long))  # every token at position 0
        tokens = encoding.inject(embedding[None], first) - encoding.inject(torch.zeros_like(embedding)[None], first)
        zero = torch.zeros(1, seq_len, encoding.token_width)
        positions = encoding.inject(zero, Positions.arange(seq_len))
    return InputVectors(tokens[0], positions[0])  # (V, W), (L, W)


def random_embedding(encoding: AbsoluteEncoding, vocab: int, seq_len: int) -> torch.Tensor:
    """``(V, token_width)`` Gaussian rows whose mean squared norm equals the position vectors'."""
    with torch.no_grad():
        mean_square = encoding.table(seq_len).pow(2).sum(-1).mean()  # over positions 0 … L−1
    scale = (mean_square / encoding.token_width).sqrt()
    return torch.randn(vocab, encoding.token_width) * scale


def train_lm(config: ProbeConfig, log: TextIO) -> tuple[nn.Module, dict]:
    """A short lm_prose run at ``d_model`` (``train_layers`` layers); returns the model and what it did.

    The job of ``posbench train`` (optimizer, schedule, batches, loop and evaluation) with the model
    changed to this width and depth, which ``train``'s named sizes do not offer.
    """
    job = resolve(TrainConfig(task=TRAINING_TASK, encoding=config.encoding, seed=config.seed,
                              steps=config.train_steps, task_options={"train_length": config.seq_len},
                              device=config.device, dtype=config.dtype))
    job = replace(job, model=job.model.replace(d_model=config.d_model, n_layers=config.train_layers,
                                               max_len=config.seq_len))
    label = f"probe {config.encoding} d={config.d_model} seed {config.seed}"
    started = time.perf_counter()
    model = initial_model(job)
    fitted = fit(model, job, log, label)
    if fitted.status != "ok":
        raise TrainingFailed(f"{fitted.reason} of the {TRAINING_TASK} run")
    tail = fitted.losses[-max(1, job.steps // 10):]
    held_out = evaluate(model, job.task, config.seq_len, config.dtype).metrics
    print(f"[{label}] trained {TRAINING_TASK} {job.steps} steps: "
          f"held-out {held_out['bits_per_char']:.3f} bits/char, {time.perf_counter() - started:.1f}s", file=log)
    training = {"task": TRAINING_TASK, "steps": job.steps, "seed": config.seed, "n_layers": config.train_layers,
                "n_heads": job.model.n_heads, "batch_size": job.batch_size, "lr": job.lr,
                "train_length": config.seq_len, "final_loss": sum(tail) / len(tail),
                "held_out_bits_per_char": held_out["bits_per_char"], "seconds": time.perf_counter() - started}
    return model.cpu(), training  # the probes run on the CPU


# ----- probes -------------------------------------------------------------------------------------

def split_pairs(vocab: int, seq_len: int, max_pairs: int, test_fraction: float, validation_fraction: float,
                generator: torch.Generator) -> dict[str, torch.Tensor]:
    """Distinct (token, position) pairs uniform over the grid, split three ways with no pair in two splits.

    Returns ``{"train", "validation", "test"}``, each ``(N, 2)`` (token, position); validation is
    ``validation_fraction`` of what the test split leaves.
    """
    chosen = torch.randperm(vocab * seq_len, generator=generator)[:max_pairs]
    pairs = torch.stack([chosen // seq_len, chosen % seq_len], dim=1)  # (N, 2) token, position
    n_test = max(1, round(len(pairs) * test_fraction))
    n_validation = max(1, round((len(pairs) - n_test) * validation_fraction))
    test, validation, train = pairs.split([n_test, n_validation, len(pairs) - n_test - n_validation])
    return {"train": train, "validation": validation, "test": test}


def make_probe(kind: str, width: int, n_classes: int, hidden: int) -> nn.Module:
    if kind == "linear":
        return nn.Linear(width, n_classes)  # multinomial logistic regression
    return nn.Sequential(nn.Linear(width, hidden), nn.ReLU(), nn.Linear(hidden, n_classes))


def fit_probe(kind: str, x: torch.Tensor, y: torch.Tensor, n_classes: int,
              validation: tuple[torch.Tensor, torch.Tensor] | None = None, iterations: int = 200,
              hidden: int = 128) -> nn.Module:
    """Fit ``x (N, W)`` -> labels ``y (N,)`` by L-BFGS on cross-entropy plus a small L2 penalty.

    L-BFGS drives the (convex) linear probe to its optimum in tens of iterations, where Adam at a
    fixed budget stops far from it on badly conditioned inputs and would measure the optimizer, not
    the information. With ``validation = (x_v, y_v)`` the parameters kept are those of the round
    (``ROUND`` iterations) with the lowest validation cross-entropy: early stopping, so an
    over-confident probe does not understate the information bound.
    """
    probe = make_probe(kind, x.shape[1], n_classes, hidden)
    optimizer = torch.optim.LBFGS(probe.parameters(), lr=1.0, max_iter=ROUND, history_size=20,
                                  line_search_fn="strong_wolfe")

    def closure():
        optimizer.zero_grad(set_to_none=True)
        penalty = sum(p.pow(2).sum() for p in probe.parameters())
        loss = F.cross_entropy(probe(x), y) + L2_PENALTY * penalty
        loss.backward()
        return loss

    best, kept = math.inf, None
    for _ in range(max(1, iterations // ROUND)):
        optimizer.step(closure)
        if validation is None:
            continue
        with torch.no_grad():
            loss = F.cross_entropy(probe(validation[0]), validation[1]).item()
        if loss < best:
            best, kept = loss, copy.deepcopy(probe.state_dict())
    if kept is not None:
        probe.load_state_dict(kept)
    return probe.eval()


def score(probe: nn.Module, x: torch.Tensor, y: torch.Tensor, n_classes: int) -> dict:
    """Held-out accuracy and cross-entropy, with chance and the bound I(X; Y) >= H(Y) − CE, in bits."""
    with torch.no_grad():
        logits = probe(x)  # (N, n_classes)
        ce_bits = F.cross_entropy(logits, y).item() / math.log(2)
        accuracy = (logits.argmax(-1) == y).double().mean().item()
    entropy_bits = math.log2(n_classes)  # labels uniform over the grid
    return {"accuracy": accuracy, "chance_accuracy": 1 / n_classes, "ce_bits": ce_bits, "entropy_bits": entropy_bits,
            "mi_lower_bound_bits": max(0.0, entropy_bits - ce_bits), "chance_mi_bits": 0.0}


def standardise(train: torch.Tensor, *others: torch.Tensor) -> list[torch.Tensor]:
    """Z-score every feature on the training inputs: an invertible affine map (a constant feature is
    only centred), so no probe gains or loses capacity — it only makes the fit well conditioned."""
    mean, std = train.mean(0), train.std(0)
    scale = torch.where(std > 1e-8 * std.max(), std, torch.ones_like(std))
    return [(x - mean) / scale for x in (train, *others)]


def recovery(vectors: InputVectors, splits: dict[str, torch.Tensor], seed: int = 0, iterations: int = 200,
             hidden: int = 128) -> list[dict]:
    """Every probe on every target: one dict per (target, probe) with its scores on the test pairs."""
    x_train, x_validation, x_test = standardise(*(vectors.inputs(splits[s]) for s in ("train", "validation", "test")))
    classes = {"token": len(vectors.tokens), "position": len(vectors.positions)}
    results = []
    for column, target in enumerate(TARGETS):
        labels = {name: pairs[:, column] for name, pairs in splits.items()}
        for kind in PROBES:
            torch.manual_seed(seed)
            probe = fit_probe(kind, x_train, labels["train"], classes[target], (x_validation, labels["validation"]),
                              iterations, hidden)
            results.append({"target": target, "probe": kind,
                            **score(probe, x_test, labels["test"], classes[target])})
    return results


# ----- geometry -----------------------------------------------------------------------------------

def principal_basis(vectors: torch.Tensor, variance_kept: float) -> torch.Tensor:
    """``(N, W)`` -> ``(W, k)`` orthonormal basis of the fewest principal directions holding ``variance_kept``."""
    centred = (vectors - vectors.mean(0)).double()
    _, singular, directions = torch.linalg.svd(centred, full_matrices=False)  # directions (r, W)
    share = singular.pow(2).cumsum(0) / singular.pow(2).sum()
    k = int((share < variance_kept - 1e-12).sum()) + 1
    return directions[:k].T


def principal_angles(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Angles (radians, ascending) between the spans of orthonormal bases ``a (W, k_a)`` and ``b (W, k_b)``."""
    cosines = torch.linalg.svdvals(a.T.double() @ b.double()).clamp(0.0, 1.0)  # (min(k_a, k_b),) descending
    return torch.arccos(cosines)


def geometry(vectors: InputVectors, variance_kept: float = 0.9) -> dict:
    """How the token and position parts of the input share the model's dimensions."""
    token_basis = principal_basis(vectors.tokens, variance_kept)  # (W, k_t)
    position_basis = principal_basis(vectors.positions, variance_kept)  # (W, k_p)
    angles = principal_angles(token_basis, position_basis)
    centred = (vectors.positions - vectors.positions.mean(0)).double()  # (L, W)
    inside = ((centred @ token_basis).pow(2).sum() / centred.pow(2).sum()).clamp(max=1.0)  # rounding
    width = vectors.tokens.shape[1]
    return {"variance_kept": variance_kept, "width": width,
            "k_token": token_basis.shape[1], "k_position": position_basis.shape[1],
            "principal_angles_deg": [math.degrees(a) for a in angles.tolist()],
            "subspace_overlap": angles.cos().pow(2).mean().item(),
            "position_energy_in_token_subspace": inside.item(),
            "random_subspace_energy": token_basis.shape[1] / width}


# ----- one cell -----------------------------------------------------------------------------------

def input_vectors(config: ProbeConfig, log: TextIO) -> tuple[AbsoluteEncoding, InputVectors, dict]:
    """The encoding, the input vectors in model space, and how the embeddings were made."""
    torch.manual_seed(config.seed)
    if config.embedding == "trained":
        model, training = train_lm(config, log)
        encoding, embedding = model.encoding, model.embed.weight.detach()
        description = (f"token embeddings (and a learned encoding's table) of a {training['n_layers']}-layer "
                       f"{TRAINING_TASK} model after {training['steps']} steps, seed {training['seed']}")
    else:
        encoding = encodings.build(config.encoding, d_model=config.d_model, n_heads=1, max_len=config.seq_len)
        embedding = random_embedding(encoding, config.vocab, config.seq_len)
        training, description = None, RANDOM_EMBEDDING
    vectors = model_space(encoding, embedding, config.seq_len)
    norms = {"token_rms_norm": _rms_norm(embedding), "position_rms_norm": _rms_norm(encoding.table(config.seq_len))}
    return encoding, vectors, {"kind": config.embedding, "description": description, **norms, "training": training}


def _rms_norm(rows: torch.Tensor) -> float:
    return rows.detach().pow(2).sum(-1).mean().sqrt().item()


def probe(config: ProbeConfig, log: TextIO | None = None) -> dict:
    """Run one cell and return its ``probe`` record (``error`` with the reason if the LM run diverged)."""
    check(config)
    log = log or sys.stderr
    missing = missing_device(config.device)
    if missing:
        return _record(config, "skipped", missing, time.perf_counter())
    with deterministic(config.threads, config.device):
        started = time.perf_counter()
        try:
            encoding, vectors, embedding = input_vectors(config, log)
        except TrainingFailed as error:
            return _record(config, "diverged", str(error), started)
        made = time.perf_counter()
        vocab = len(vectors.tokens)
        splits = split_pairs(vocab, config.seq_len, config.max_pairs, config.test_fraction,
                             config.validation_fraction, torch.Generator().manual_seed(config.seed))
        results = recovery(vectors, splits, config.seed, config.probe_iterations, config.mlp_hidden)
        shape = geometry(vectors, config.variance_kept)
    for r in results:
        print(f"[probe {config.encoding} d={config.d_model} {config.embedding}] {r['target']:8s} {r['probe']:6s} "
              f"accuracy {r['accuracy']:.3f} (chance {r['chance_accuracy']:.3f}), "
              f"I >= {r['mi_lower_bound_bits']:.2f} of {r['entropy_bits']:.2f} bits", file=log)
    record = _record(config, "ok", "", started)
    record.update({
        "family": type(encoding).__name__.lower(), "combine": encoding.combine, "vocab": vocab,
        "width": vectors.tokens.shape[1], "token_width": encoding.token_width, "position_width": encoding.d_pos,
        "embedding": embedding,
        "pairs": {"grid": vocab * config.seq_len, **{name: len(pairs) for name, pairs in splits.items()},
                  "split": SPLIT},
        "recovery": results, "geometry": shape,
        "wall_time_s": {"vectors": made - started, "probes": time.perf_counter() - made,
                        "total": time.perf_counter() - started},
    })
    return record


def record_config(config: ProbeConfig) -> dict:
    """The record's ``config``: every field, ``device`` and ``dtype`` only when not cpu / float32."""
    return records.config_fields(config, RUN_FIELDS)


def _record(config: ProbeConfig, status: str, reason: str, started: float) -> dict:
    record = machine.new_record("probe", record_config(config), status, reason)
    record.update({"encoding": config.encoding, "d_model": config.d_model, "seq_len": config.seq_len,
                   "seed": config.seed, "recovery": [], "wall_time_s": {"total": time.perf_counter() - started}})
    return record
