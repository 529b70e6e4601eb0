"""Projected cost of each encoding at the architectures people deploy, on GPUs this project has never had: a
cost model of its own (not posbench's training model), labelled "projected" wherever it is printed.

What it reads
-------------
* A decoder's architecture as a transformers ``config.json`` gives it (:class:`Architecture`): ``hidden_size``,
  ``num_hidden_layers``, ``num_attention_heads``, ``num_key_value_heads`` (grouped-query attention),
  ``head_dim``, ``intermediate_size``, ``vocab_size``, ``tie_word_embeddings``. Named architectures
  (:data:`ARCHITECTURES`) carry the values of the models' ``config.json`` on the Hugging Face hub (each
  one's address in its ``source``); ``--hf-config`` reads any other.
* What an encoding adds, from the registry alone (:func:`position_work`): the encoding is built on the
  meta device at the architecture's width, heads and context, and its :class:`~posbench.encodings.base.Traits`
  and hooks say the rest — the widths (a naive concat widens the residual stream), the dimensions its
  rotation multiplies (its ``rotation_flops``: a partial rotation's whole head), its own parameters, the
  tables it holds (its buffers: a sinusoid table, rotation angles, ALiBi's penalties, T5's bucket of each
  offset, integers at their own width) and its logit bias. A logit bias with trained
  parameters (T5, FIRE, KERPLE) is materialised as one ``(h, L_q, L_k)`` tensor per forward, shared by
  the layers (as T5 implementations do, and as a kernel must for a learned function); a fixed one
  (ALiBi) is applied inside the attention kernel from per-head slopes (flash-attention's
  ``alibi_slopes``). The building cost of a bias is the encoding's own :meth:`bias_flops`.
* A device (:data:`DEVICES`): dense peak FLOP/s per dtype and memory bandwidth, from the vendor's
  datasheet (addresses in :data:`DEVICES`, one table).

What it computes
----------------
* FLOPs under :mod:`posbench.flops`' convention (2 per multiply-add; the encoding's adds, the residual
  adds and a gated FFN's product 1 per element; attention over the ``L(L+1)/2`` logits a causal kernel
  computes, the bias add over all ``L²``, as :func:`posbench.flops.analytic_flops` with
  ``causal_half``): on posbench's own architecture the count equals that function's, term by term
  (``tests/test_projection.py``). Prefill counts the head at every token, as posbench's forward does.
* Memory: weights, the KV cache (``2 · layers · kv_heads · head_dim · context · bytes``) and every
  position tensor the encoding materialises at the context (its tables and, for a materialised bias,
  the ``(h, L, L)`` tensor of a prefill).
* Time: a roofline per operation, ``max(FLOPs / peak, bytes / bandwidth)``, summed, plus a
  per-operation overhead term (kernel launches or the framework's dispatch, times the number of
  operations). Bytes are what an operation must read and write at least: weights once, activations in
  and out, the KV cache and a materialised bias where read. Datasheet devices get no overhead unless
  one is given (none has been measured here); this machine's is fitted (:mod:`posbench.projection_check`).

A projection is an upper bound on speed: real kernels reach a fraction of peak, and that fraction is
what the CPU check (:mod:`posbench.projection_check`) measures for this machine.

Training
--------
The GPU-hours of a training run of posbench's own model (a ``posbench.sizes.SIZES`` size on a task,
:func:`project_training`, :func:`training_gpu_hours`): the run's steps (its tokens over the task's batch
of training sequences) times :func:`posbench.flops.analytic_flops` ``mode="train"`` of a step (forward and
backward, the count the bench's train part credits), over the device's dense peak at an achieved share of
it, :data:`TRAIN_EFFICIENCY` unless given. That share is an assumption, not a measurement: a run of a small
model reaches far less of a GPU's peak than a large one, whose matmuls fill the device.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, fields, replace
from pathlib import Path

import pandas as pd
import torch

from posbench import attention, encodings, train
from posbench.devices import BFLOAT16, FLOAT32, TORCH_DTYPES
from posbench.flops import analytic_flops
from posbench.model import ModelConfig
from posbench.records import write_atomically
from posbench.sizes import SIZES

HF = "https://huggingface.co/{}/blob/main/config.json"
PROJECTED = "projected"
CONTEXTS = (1024, 4096, 16384, 32768, 131072)  # the contexts the tables project (up to 128k)
TABLE = "projection.csv"  # beside the judge step's tables
TRAIN_EFFICIENCY = 0.4  # the share of the dense peak a training run is assumed to reach (an assumption)
TRAIN_TASK = "lm_prose"  # the task a projected training run trains on unless another is named


# ----- architectures ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Architecture:
    """A decoder's architecture, by transformers' config keys; ``gated_ffn``: a SwiGLU (gate, up, down)
    feed-forward; ``norm_weights``: parameters per channel of a norm (RMSNorm 1, LayerNorm 2);
    ``attention_bias``: biases on the q, k, v projections (Qwen2)."""

    name: str
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    tie_word_embeddings: bool = False
    gated_ffn: bool = True
    norm_weights: int = 1
    attention_bias: bool = False
    source: str = ""


def _hub(name: str, repo: str, **config) -> Architecture:
    return Architecture(name=name, source=HF.format(repo), **config)


ARCHITECTURES: dict[str, Architecture] = {arch.name: arch for arch in (
    _hub("llama-3-8b", "meta-llama/Meta-Llama-3-8B", hidden_size=4096, num_hidden_layers=32, num_attention_heads=32,
         num_key_value_heads=8, head_dim=128, intermediate_size=14336, vocab_size=128256),
    _hub("llama-3-70b", "meta-llama/Meta-Llama-3-70B", hidden_size=8192, num_hidden_layers=80,
         num_attention_heads=64, num_key_value_heads=8, head_dim=128, intermediate_size=28672, vocab_size=128256),
    _hub("qwen2.5-7b", "Qwen/Qwen2.5-7B", hidden_size=3584, num_hidden_layers=28, num_attention_heads=28,
         num_key_value_heads=4, head_dim=128, intermediate_size=18944, vocab_size=152064, attention_bias=True),
    _hub("mistral-7b", "mistralai/Mistral-7B-v0.3", hidden_size=4096, num_hidden_layers=32, num_attention_heads=32,
         num_key_value_heads=8, head_dim=128, intermediate_size=14336, vocab_size=32768),
)}  # head_dim: hidden_size / num_attention_heads where the config has no head_dim key
REQUIRED_KEYS = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size")


def posbench_architecture(size: str) -> Architecture:
    """posbench's own model of ``size`` as a :class:`Architecture` (LayerNorm, a two-matrix FFN, no GQA):
    what the CPU check projects, and what the FLOP count is checked against."""
    cfg = ModelConfig.from_size(size)
    return Architecture(name=f"posbench-{size}", hidden_size=cfg.d_model, num_hidden_layers=cfg.n_layers,
                 num_attention_heads=cfg.n_heads, num_key_value_heads=cfg.n_heads,
                 head_dim=cfg.d_model // cfg.n_heads, intermediate_size=cfg.d_ff or 4 * cfg.d_model,
                 vocab_size=cfg.vocab_size, gated_ffn=False, norm_weights=2, source="posbench.sizes.SIZES")


def named_architecture(name: str) -> Architecture:
    if name in ARCHITECTURES:
        return ARCHITECTURES[name]
    if name.removeprefix("posbench-") in SIZES:
        return posbench_architecture(name.removeprefix("posbench-"))
    allowed = [*ARCHITECTURES, *(f"posbench-{size}" for size in SIZES)]
    raise ValueError(f"unknown architecture {name!r}; allowed: {', '.join(allowed)}")


def architecture_from_hf_config(config: dict, name: str = "hf-config") -> Architecture:
    """The :class:`Architecture` a transformers ``config.json`` describes (a multimodal one's ``text_config``);
    a missing or bad key is a one-line ``ValueError`` naming it."""
    config = config.get("text_config") or config
    missing = [key for key in REQUIRED_KEYS if key not in config]
    if missing:
        raise ValueError(f"config has no {missing[0]!r}; needs: {', '.join(REQUIRED_KEYS)} "
                         "(and optionally num_key_value_heads, head_dim, tie_word_embeddings)")
    values = {key: config[key] for key in REQUIRED_KEYS}
    values["num_key_value_heads"] = config.get("num_key_value_heads") or values["num_attention_heads"]
    _require_positive_integers(values)
    heads = values["num_attention_heads"]
    values["head_dim"] = config.get("head_dim") or values["hidden_size"] // heads
    _require_positive_integers(values)
    if heads % values["num_key_value_heads"]:
        raise ValueError(f"config key 'num_key_value_heads' is {values['num_key_value_heads']}; allowed: a divisor "
                         f"of num_attention_heads ({heads})")
    return Architecture(name=name, tie_word_embeddings=bool(config.get("tie_word_embeddings", False)),
                 attention_bias=bool(config.get("attention_bias", False)), source="--hf-config", **values)


def _require_positive_integers(values: dict) -> None:
    for key, value in values.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"config key {key!r} is {value!r}; allowed: a positive integer")


# ----- devices -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Device:
    """A GPU by its datasheet: dense peak FLOP/s per dtype (tensor cores for bfloat16, without the 2:4
    sparsity the headline figures assume), memory bandwidth and size (bytes)."""

    name: str
    label: str
    peak_flops: dict[str, float]
    bandwidth: float  # bytes/s
    memory: float  # bytes
    source: str


DEVICES: dict[str, Device] = {device.name: device for device in (
    Device("h100", "H100 SXM", {BFLOAT16: 989e12, FLOAT32: 67e12}, 3.35e12, 80e9,
           "https://www.nvidia.com/en-us/data-center/h100/ (datasheet: BF16 1,979 TFLOPS with sparsity)"),
    Device("h200", "H200 SXM", {BFLOAT16: 989e12, FLOAT32: 67e12}, 4.8e12, 141e9,
           "https://www.nvidia.com/en-us/data-center/h200/ (datasheet: BF16 1,979 TFLOPS with sparsity)"),
    Device("a100", "A100 80GB SXM", {BFLOAT16: 312e12, FLOAT32: 19.5e12}, 2.039e12, 80e9,
           "https://www.nvidia.com/en-us/data-center/a100/ (datasheet: BF16 312 TFLOPS dense, 624 sparse)"),
    Device("l4", "L4", {BFLOAT16: 121e12, FLOAT32: 30.3e12}, 300e9, 24e9,
           "https://www.nvidia.com/en-us/data-center/l4/ (datasheet: BF16 242 TFLOPS with sparsity)"),
)}


def named_device(name: str) -> Device:
    if name not in DEVICES:
        raise ValueError(f"unknown device {name!r}; allowed: {', '.join(DEVICES)}")
    return DEVICES[name]


# ----- what an encoding adds ---------------------------------------------------------------------
@dataclass(frozen=True)
class PositionWork:
    """An encoding built at an architecture and context (on the meta device), as the cost model reads it."""

    name: str
    encoding: torch.nn.Module
    width: int  # residual stream (d + d_p for a naive concat)
    token_width: int  # the token embedding's
    parameters: int  # the encoding's own
    table_elements: int  # the float tensors it holds (buffers) at the context, stored in the model's dtype
    index_bytes: int  # the integer tensors it holds (T5's bucket of each offset), at their own width
    materialised_bias: bool  # a trained logit bias: an (h, L_q, L_k) tensor per forward
    adds_input: bool  # E + P at the input

    @property
    def has_bias(self) -> bool:
        return attention.bias_kind(self.encoding) is not None

    def rotated(self, arch: Architecture) -> tuple[int, int]:
        """Dimensions turned per token in q (all heads) and k (the kv heads only): what the encoding's rotation
        multiplies, 3 FLOPs an element (RoPE's family: the whole head, its passing pairs turned by 1)."""
        q = self.encoding.rotation_flops(1, 1, "infer") // (2 * 3)
        return q, q * arch.num_key_value_heads // arch.num_attention_heads

    def bias_flops(self, q_len: int, k_len: int) -> int:
        return self.encoding.bias_flops(q_len, k_len, "infer")


def projected_encodings() -> list[str]:
    """The registered encodings of a sequence that a deployment would pick: 1-D, evaluated as themselves
    (a randomized one evaluates as its base encoding), and of the kinds this cost model counts: one encoding
    in every layer, queries and keys at the model's width, no position from content. Left out, so never
    projected with a wrong count: the fourth hook's (cope, fox, stick_breaking, path), layer patterns (irope,
    rnope_swa) and PoPE's doubled q/k width; their costs are posbench's measured ones (bench, profile)."""
    return [name for name in encodings.names() if modelled(name)]


def modelled(name: str) -> bool:
    traits = encodings.traits(name)
    if traits.axes != "1d" or traits.randomized or traits.hook == "contextual":
        return False
    with torch.device("meta"):
        encoding = encodings.build(name, d_model=64, n_heads=4, max_len=8)
    return len(set(encoding.layers(4))) == 1 and encoding.query_key_width == 64


@functools.lru_cache(maxsize=1024)
def position_work(name: str, arch: Architecture, context: int) -> PositionWork:
    """``name`` built on the meta device at ``arch``'s width and heads for ``context`` positions (once per
    process: a table projects it on every device)."""
    with torch.device("meta"):
        encoding = encodings.build(name, d_model=arch.hidden_size, n_heads=arch.num_attention_heads,
                                   max_len=context, causal=True)
    traits = encoding.traits
    return PositionWork(name=name, encoding=encoding, width=encoding.model_width, token_width=encoding.token_width,
                        parameters=sum(p.numel() for p in encoding.parameters()),
                        table_elements=sum(b.numel() for b in encoding.buffers() if b.is_floating_point()),
                        index_bytes=sum(b.numel() * b.element_size() for b in encoding.buffers()
                                        if not b.is_floating_point()),
                        materialised_bias=traits.hook == "logits" and traits.trained,
                        adds_input=traits.combine == "add")


def widened(arch: Architecture, width: int) -> Architecture:
    """The architecture whose residual stream is ``width`` (a naive concat's d + d_p): head width and
    feed-forward grow with it, as posbench's model builds them."""
    if width == arch.hidden_size:
        return arch
    return replace(arch, hidden_size=width, head_dim=arch.head_dim * width // arch.hidden_size,
                   intermediate_size=arch.intermediate_size * width // arch.hidden_size)


# ----- operations --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Op:
    """One operation of a forward: its FLOPs, the bytes it must move, how many times it runs (layers)
    and how many kernels it launches each time."""

    name: str
    flops: int
    bytes: int
    times: int = 1
    launches: int = 1


def operations(arch: Architecture, work: PositionWork, new_tokens: int, keys: int, pairs: int,
               dtype: str = BFLOAT16) -> list[Op]:
    """The operations of one forward of ``new_tokens`` tokens (batch 1) whose attention sees ``keys``
    keys and computes ``pairs`` logits per head: a prefill of L (keys L, pairs L(L+1)/2) or a decode
    step against a cache of C (1 token, keys and pairs C + 1)."""
    s = TORCH_DTYPES[dtype].itemsize
    arch = widened(arch, work.width)
    d, n, h, ff = arch.hidden_size, arch.num_hidden_layers, arch.num_attention_heads, arch.intermediate_size
    q_dim, kv_dim = h * arch.head_dim, arch.num_key_value_heads * arch.head_dim
    T = new_tokens
    ffn_matrices = 3 if arch.gated_ffn else 2
    rotated_q, rotated_k = work.rotated(arch)
    bias_read = h * T * keys if work.materialised_bias else 0
    ops = [
        Op("embedding", 0, s * T * 2 * work.token_width),
        Op("position_input", T * d if work.adds_input else 0, s * 3 * T * d if work.adds_input else 0,
           launches=int(work.adds_input)),
        Op("bias_build", work.bias_flops(T, keys), s * bias_read, launches=int(work.materialised_bias)),
        Op("norms", 0, s * 2 * 2 * T * d, n, 2),
        Op("projections", 2 * T * d * (q_dim + 2 * kv_dim) + 2 * T * q_dim * d,
           s * (d * (2 * q_dim + 2 * kv_dim) + T * (2 * d + 2 * q_dim + 2 * kv_dim)), n, 4),
        Op("rotation", 3 * T * (rotated_q + rotated_k), s * 3 * T * (rotated_q + rotated_k), n,
           6 if rotated_q else 0),
        Op("attention", 4 * pairs * q_dim + (h * T * keys if work.has_bias else 0),
           s * (2 * T * q_dim + 2 * keys * kv_dim + bias_read), n),
        Op("ffn", 2 * T * d * ff * ffn_matrices + (T * ff if arch.gated_ffn else 0),
           s * (ffn_matrices * d * ff + T * (2 * d + (ffn_matrices + 1) * ff)), n, ffn_matrices + 1 + arch.gated_ffn),
        Op("residual", 2 * T * d, s * 6 * T * d, n, 2),
        Op("head", 2 * T * d * arch.vocab_size, s * (arch.vocab_size * d + T * (arch.vocab_size + 2 * d)),
           launches=2),
    ]
    return [op for op in ops if op.flops or op.bytes]


def prefill_ops(arch: Architecture, work: PositionWork, length: int, dtype: str = BFLOAT16) -> list[Op]:
    return operations(arch, work, length, length, length * (length + 1) // 2, dtype)


def decode_ops(arch: Architecture, work: PositionWork, context: int, dtype: str = BFLOAT16) -> list[Op]:
    return operations(arch, work, 1, context + 1, context + 1, dtype)


def total_flops(ops: list[Op]) -> int:
    return sum(op.flops * op.times for op in ops)


@dataclass(frozen=True)
class Rates:
    """What a machine does per second: dense FLOP/s, bytes/s, and seconds of overhead per operation."""

    flops: float
    bandwidth: float
    op_overhead_s: float = 0.0

    @classmethod
    def of(cls, device: Device, dtype: str, op_overhead_s: float | None = None) -> Rates:
        """A datasheet device's peaks; no overhead unless one is given (none has been measured on these)."""
        return cls(device.peak_flops[dtype], device.bandwidth, op_overhead_s or 0.0)


def roofline_seconds(ops: list[Op], rates: Rates) -> dict[str, float]:
    """``compute`` and ``memory``: the seconds of the operations limited by each; ``overhead``: launches ×
    the per-operation term; ``total``: their sum."""
    compute = memory = 0.0
    for op in ops:
        flop_s, byte_s = op.flops / rates.flops, op.bytes / rates.bandwidth
        if flop_s >= byte_s:
            compute += op.times * flop_s
        else:
            memory += op.times * byte_s
    overhead = launches(ops) * rates.op_overhead_s
    return {"compute": compute, "memory": memory, "overhead": overhead, "total": compute + memory + overhead}


def launches(ops: list[Op]) -> int:
    return sum(op.times * op.launches for op in ops)


# ----- parameters and memory ---------------------------------------------------------------------
def parameters(arch: Architecture, work: PositionWork) -> int:
    """Every parameter of the decoder with this encoding (embedding at the token width, the rest at
    the residual width)."""
    wide = widened(arch, work.width)
    d, ff = wide.hidden_size, wide.intermediate_size
    q_dim, kv_dim = wide.num_attention_heads * wide.head_dim, wide.num_key_value_heads * wide.head_dim
    attention_weights = d * (2 * q_dim + 2 * kv_dim) + (q_dim + 2 * kv_dim if wide.attention_bias else 0)
    ffn = (3 if wide.gated_ffn else 2) * d * ff
    layer = attention_weights + ffn + 2 * wide.norm_weights * d
    embedding = arch.vocab_size * work.token_width
    head = 0 if arch.tie_word_embeddings else arch.vocab_size * d
    return embedding + wide.num_hidden_layers * layer + wide.norm_weights * d + head + work.parameters


def kv_cache_bytes(arch: Architecture, work: PositionWork, context: int, dtype: str = BFLOAT16) -> int:
    wide = widened(arch, work.width)
    return (2 * wide.num_hidden_layers * wide.num_key_value_heads * wide.head_dim * context
            * TORCH_DTYPES[dtype].itemsize)


def position_bytes(arch: Architecture, work: PositionWork, context: int, dtype: str = BFLOAT16) -> int:
    """The position tensors the encoding materialises at ``context``: its tables, and a materialised
    bias's ``(h, L, L)`` tensor in a prefill of ``context`` tokens."""
    bias = arch.num_attention_heads * context * context if work.materialised_bias else 0
    return (work.table_elements + bias) * TORCH_DTYPES[dtype].itemsize + work.index_bytes


# ----- one projection ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Projection:
    """One encoding at one architecture, context and device: the row of the tables and of ``projection.csv``."""

    shape: str  # the architecture's name (the column committed projection.csv tables have)
    device: str
    dtype: str
    context: int
    encoding: str
    params: int
    params_position: int
    prefill_flops_per_token: float
    decode_flops_per_token: float
    weights_bytes: int
    kv_cache_bytes: int
    position_bytes: int
    total_bytes: int
    fits: bool
    prefill_ms: float
    prefill_us_per_token: float
    prefill_bound: str
    decode_ms_per_token: float
    decode_bound: str
    launches_prefill: int
    op_overhead_us: float
    label: str = PROJECTED

    @classmethod
    def columns(cls) -> list[str]:
        return [field.name for field in fields(cls)]


def project(arch: Architecture, name: str, context: int, device: Device, dtype: str = BFLOAT16,
            op_overhead_s: float | None = None) -> Projection:
    """The projection of encoding ``name`` at ``arch`` with ``context`` tokens on ``device``."""
    work = position_work(name, arch, context)
    rates = Rates.of(device, dtype, op_overhead_s)
    prefill, decode = prefill_ops(arch, work, context, dtype), decode_ops(arch, work, context, dtype)
    prefill_s, decode_s = roofline_seconds(prefill, rates), roofline_seconds(decode, rates)
    memory = (parameters(arch, work) * TORCH_DTYPES[dtype].itemsize, kv_cache_bytes(arch, work, context, dtype),
              position_bytes(arch, work, context, dtype))
    return Projection(
        shape=arch.name, device=device.name, dtype=dtype, context=context, encoding=name,
        params=parameters(arch, work), params_position=work.parameters,
        prefill_flops_per_token=total_flops(prefill) / context, decode_flops_per_token=total_flops(decode),
        weights_bytes=memory[0], kv_cache_bytes=memory[1], position_bytes=memory[2], total_bytes=sum(memory),
        fits=sum(memory) <= device.memory, prefill_ms=prefill_s["total"] * 1e3,
        prefill_us_per_token=prefill_s["total"] / context * 1e6, prefill_bound=bound(prefill_s),
        decode_ms_per_token=decode_s["total"] * 1e3, decode_bound=bound(decode_s),
        launches_prefill=launches(prefill), op_overhead_us=rates.op_overhead_s * 1e6)


def bound(seconds: dict[str, float]) -> str:
    """What most of the time goes to: compute, memory or overhead."""
    return max(("compute", "memory", "overhead"), key=seconds.__getitem__)


def project_all(arch: Architecture, context: int, device: Device, dtype: str = BFLOAT16,
                names: list[str] | None = None, op_overhead_s: float | None = None) -> tuple[list[Projection],
                                                                                              list[str]]:
    """Every encoding of ``names`` (default :func:`projected_encodings`) projected, and a line for each
    that could not be built at this architecture."""
    rows, skipped = [], []
    for name in names or projected_encodings():
        try:
            rows.append(project(arch, name, context, device, dtype, op_overhead_s))
        except (ValueError, RuntimeError, NotImplementedError) as error:
            skipped.append(f"{name} ({str(error).splitlines()[0]})")
    return rows, skipped


def gib(n_bytes: float) -> str:
    return f"{n_bytes / 2**30:.3g}"


def table(rows: list[Projection]) -> str:
    """A text table, one line per encoding."""
    header = ["encoding", "params", "pos params", "prefill GFLOP/tok", "decode GFLOP/tok", "weights GiB",
              "KV GiB", "position GiB", "total GiB", "fits", "prefill ms", "µs/tok", "prefill bound",
              "decode ms/tok", "decode bound"]
    lines = [[r.encoding, f"{r.params / 1e9:.4g}B", f"{r.params_position:,}",
              f"{r.prefill_flops_per_token / 1e9:.4g}", f"{r.decode_flops_per_token / 1e9:.4g}",
              gib(r.weights_bytes), gib(r.kv_cache_bytes), gib(r.position_bytes), gib(r.total_bytes),
              "yes" if r.fits else "NO", f"{r.prefill_ms:.4g}", f"{r.prefill_us_per_token:.3g}", r.prefill_bound,
              f"{r.decode_ms_per_token:.3g}", r.decode_bound] for r in rows]
    return aligned([header, *lines])


def aligned(lines: list[list[str]]) -> str:
    """Rows of cells as left-aligned columns."""
    widths = [max(len(line[c]) for line in lines) for c in range(len(lines[0]))]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip() for line in lines)


def heading(arch: Architecture, context: int, device: Device, dtype: str, op_overhead_s: float | None) -> str:
    rates = Rates.of(device, dtype, op_overhead_s)
    overhead = (f"{rates.op_overhead_s * 1e6:g} µs per operation" if rates.op_overhead_s else
                "no per-operation overhead (none measured for this device; --op-overhead-us sets one)")
    return (f"{PROJECTED.upper()} — not measured. {arch.name} ({arch.num_hidden_layers} layers, d="
            f"{arch.hidden_size}, {arch.num_attention_heads} heads / {arch.num_key_value_heads} kv heads of "
            f"{arch.head_dim}, FFN {arch.intermediate_size}, vocab {arch.vocab_size}; {arch.source}) at "
            f"{context:,} tokens, batch 1, {dtype}, on {device.label}: roofline from the datasheet's dense "
            f"{rates.flops / 1e12:g} TFLOP/s and {device.bandwidth / 1e12:g} TB/s ({device.source}), {overhead}. "
            f"Prefill: the whole context in one forward (µs/tok: its time per token); decode: one token against "
            f"a KV cache of the context; position: the tensors the encoding materialises (a trained logit bias "
            f"as (h, L, L)).")


def grid(architectures: list[Architecture] | None = None, devices: list[Device] | None = None,
         contexts: tuple[int, ...] = CONTEXTS, dtype: str = BFLOAT16) -> list[Projection]:
    """Every named architecture × device × context × encoding: the table the report and ``advise`` read."""
    rows = []
    for arch in architectures or list(ARCHITECTURES.values()):
        for device in devices or list(DEVICES.values()):
            for context in contexts:
                rows += project_all(arch, context, device, dtype)[0]
    return rows


def write_table(folder: str | Path) -> Path:
    """``projection.csv`` under ``folder`` (atomically): :func:`grid`, one row per architecture, device, context and
    encoding, every row labelled projected — what the report's page reads."""
    frame = pd.DataFrame([{column: getattr(row, column) for column in Projection.columns()} for row in grid()])
    return write_atomically(Path(folder) / TABLE, functools.partial(frame.to_csv, index=False))


# ----- training ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class TrainingProjection:
    """One training run of posbench's model at a size, with one encoding on a task, on a device: its steps
    (the tokens asked for, rounded up to whole steps of ``batch_size`` sequences of ``seq_len``), its
    FLOPs, and its GPU-hours at the dense peak and at ``efficiency`` of it."""

    shape: str
    device: str
    dtype: str
    task: str
    encoding: str
    batch_size: int
    seq_len: int
    steps: int
    tokens: int
    flops: int
    peak_flops: float
    gpu_hours_at_peak: float
    efficiency: float
    gpu_hours: float
    label: str = PROJECTED


def project_training(size: str, name: str, tokens: float, device: Device, dtype: str = BFLOAT16,
                     efficiency: float = TRAIN_EFFICIENCY, task: str = TRAIN_TASK) -> TrainingProjection:
    """The projected training run of encoding ``name`` at posbench size ``size`` on ``tokens`` tokens of
    ``task`` (its batch and training length, as :func:`posbench.train.resolve` makes the job); a bad
    argument is a one-line ``ValueError`` naming it."""
    check_training_run(tokens, efficiency)
    job = train.resolve(train.TrainConfig(task=task, encoding=name, size=size))
    seq_len = job.task.sequence_length(job.task.train_length)
    steps = math.ceil(tokens / (job.batch_size * seq_len))
    flops = steps * sum(analytic_flops(job.model, job.batch_size, seq_len, "train").values())
    peak = device.peak_flops[dtype]
    return TrainingProjection(
        shape=f"posbench-{size}", device=device.name, dtype=dtype, task=task, encoding=name,
        batch_size=job.batch_size, seq_len=seq_len, steps=steps, tokens=steps * job.batch_size * seq_len,
        flops=flops, peak_flops=peak, gpu_hours_at_peak=flops / peak / 3600, efficiency=efficiency,
        gpu_hours=flops / (peak * efficiency) / 3600)


def check_training_run(tokens: float, efficiency: float, runs: int = 1) -> None:
    """A one-line ``ValueError`` naming ``tokens``, ``efficiency`` or ``runs`` where it cannot describe runs."""
    if not (isinstance(tokens, (int, float)) and math.isfinite(tokens) and tokens > 0):
        raise ValueError(f"tokens is {tokens!r}; allowed: a number > 0")
    if not (isinstance(efficiency, (int, float)) and 0 < efficiency <= 1):
        raise ValueError(f"efficiency is {efficiency!r}; allowed: a number in (0, 1]")
    if not isinstance(runs, int) or isinstance(runs, bool) or runs < 1:
        raise ValueError(f"runs is {runs!r}; allowed: a positive integer")


def project_training_all(size: str, tokens: float, device: Device, dtype: str = BFLOAT16,
                         efficiency: float = TRAIN_EFFICIENCY, task: str = TRAIN_TASK,
                         names: list[str] | None = None) -> tuple[list[TrainingProjection], list[str]]:
    """Every encoding of ``names`` (default :func:`projected_encodings`) in a projected training run, and a
    line for each that cannot train on ``task`` at ``size``."""
    check_training_run(tokens, efficiency)
    rows, skipped = [], []
    for name in names or projected_encodings():
        try:
            rows.append(project_training(size, name, tokens, device, dtype, efficiency, task))
        except (ValueError, RuntimeError, NotImplementedError) as error:
            skipped.append(f"{name} ({str(error).splitlines()[0]})")
    return rows, skipped


def training_gpu_hours(size: str, tokens: float, runs: int, device: str, encoding: str = "rope",
                       efficiency: float = TRAIN_EFFICIENCY, task: str = TRAIN_TASK, dtype: str = BFLOAT16) -> float:
    """Projected GPU-hours of ``runs`` training runs (seeds, say) of ``encoding`` at posbench size ``size``,
    each on ``tokens`` tokens of ``task``, on the named ``device`` at ``efficiency`` of its dense peak: what a
    preset's budget is planned with (projected, not measured)."""
    check_training_run(tokens, efficiency, runs)
    return runs * project_training(size, encoding, tokens, named_device(device), dtype, efficiency, task).gpu_hours


def training_heading(rows: list[TrainingProjection], device: Device) -> str:
    """What the training table projects and what it assumes (``rows`` share a size, task, device and run)."""
    first = rows[0]
    return (f"{PROJECTED.upper()} — not measured. Training {first.shape} on {first.task} (batch {first.batch_size} × "
            f"{first.seq_len} tokens): {first.tokens:,} tokens, {first.steps:,} steps, {first.dtype} on "
            f"{device.label}. FLOPs: posbench.flops.analytic_flops(mode='train') per step (forward + backward, no "
            f"optimizer) × steps. GPU-h at peak: FLOPs / the datasheet's dense {first.peak_flops / 1e12:g} TFLOP/s "
            f"({device.source}); GPU-h: at {first.efficiency:g} of that peak, an assumed share "
            f"(--train-efficiency), not a measured one.")


def training_table(rows: list[TrainingProjection]) -> str:
    """A text table, one line per encoding."""
    header = ["encoding", "GFLOP/token", "PFLOP", "GPU-h at peak", f"GPU-h at {rows[0].efficiency:g}"]
    lines = [[r.encoding, f"{r.flops / r.tokens / 1e9:.4g}", f"{r.flops / 1e15:.4g}", f"{r.gpu_hours_at_peak:.3g}",
              f"{r.gpu_hours:.3g}"] for r in rows]
    return aligned([header, *lines])
