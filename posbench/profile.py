"""Measure the cost of cells: latency, memory, FLOPs and parameters of one model on one device.

A cell is encoding × size × sequence length × device (× batch, dtype, mode), given as a
:class:`ProfileConfig`. :func:`profile_together` returns the ``profile`` records (see
``schemas/profile.schema.json``) of cells that differ only in their encoding — one (device, mode,
size, length), as a workflow job measures them — in two steps:

1. each cell alone in a fresh process (:func:`measure_cell` through :func:`posbench.measure.run_isolated`):
   build the model (fixed seed), a memory pass (the first thing after the build, so nothing earlier
   has inflated the baseline), one profiled step to see which attention kernel ran, and the FLOP
   counts. An out-of-memory — even a kill by the kernel — becomes an ``oom`` record, and no cell's
   memory figures carry another's;
2. the latency of every cell whose step 1 succeeded, in *one* fresh process (:func:`time_cells`):
   all models built, each warmed up, then timed in alternation round by round with a rotating order
   (:func:`posbench.measure.alternate`), so a change of load on the machine hits every encoding alike
   and the per-round ratios of two records are paired. Each record keeps its own samples and stats
   and names the encodings it was timed with (``latency.alternated_with``).

A cell that fails to build or warm up beside the others (an out-of-memory with every model
resident, say), or every cell when the shared process dies, is timed again alone in a fresh
process (``latency.alone_because`` says why); only when that fails too does the cell's record take
the latency pass's status (``oom`` or ``error``), its other sections kept. ``skipped`` on a device
this machine lacks; ``oom`` without being run when its analytic memory (:mod:`posbench.footprint`) is more
than its device holds, the estimate as the reason.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import socket
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import TextIO

import torch

from posbench import encodings, footprint, machine, measure, records
from posbench.attention import layer_paths
from posbench.cache import KVCache
from posbench.devices import ANY_DEVICE, CPU, FLOAT32, TORCH_DTYPES, autocast, missing_device, on_cuda
from posbench.flops import analytic_flops, count_flops, decode_flops
from posbench.model import ModelConfig, build_model, count_params
from posbench.profiler import profiling
from posbench.sizes import SIZES

MODES = ("infer", "train", "decode")
MEMORY_PASS_STEPS = 2  # the first step allocates caches and optimizer state, the second is steady
COUNTED_UP_TO = 256  # the FLOP counters never run a cell's model longer than this (flops.count_flops)


@dataclass(frozen=True)
class ProfileConfig:
    """One cell; ``asdict`` of it is the record's ``config``, hashed into ``config_hash``."""

    encoding: str
    size: str
    seq_len: int
    max_len: int | None = None  # positions the encoding is built for (rows of a learned table); None: seq_len
    device: str = CPU
    batch: int = 1
    dtype: str = FLOAT32
    mode: str = "infer"  # infer: a forward in inference mode; train: forward + backward + AdamW step;
    # decode: one new token against a KV cache holding seq_len tokens (generation's per-token cost)
    threads: int | None = None  # torch CPU threads; None: torch's default
    warmup: int = 3
    min_repeats: int = 10
    min_seconds: float = 1.0
    seed: int = 0
    # the encoding's family options (e.g. from --hf-config); None: its defaults. Not hashed: a dict is not hashable
    encoding_options: dict | None = field(default=None, hash=False)

    def __post_init__(self):
        if self.max_len is None:  # the record states the table size actually built
            object.__setattr__(self, "max_len", self.positions_needed)

    @property
    def positions_needed(self) -> int:
        """Positions a cell uses: ``seq_len``, and in decode mode the generated token's one more."""
        return self.seq_len + (self.mode == "decode")

    def record_config(self) -> dict:
        """The record's ``config``: ``asdict`` less ``encoding_options`` while unset, so records written
        before the field existed keep their ``config_hash``."""
        return records.config_fields(self, ("encoding_options",))


def check(config: ProfileConfig) -> None:
    """A one-line ``ValueError`` naming the bad field and the allowed values, before any work is done."""
    choices = {"encoding": encodings.names(), "size": tuple(SIZES), "dtype": tuple(TORCH_DTYPES), "mode": MODES}
    for name, allowed in choices.items():
        _require(getattr(config, name) in allowed, config, name, ", ".join(allowed))
    _require(config.device in ANY_DEVICE, config, "device", ANY_DEVICE.allowed)
    for name in ("seq_len", "max_len", "batch", "min_repeats"):
        _require(_is_integer(getattr(config, name), 1), config, name, "a positive integer")
    for name in ("warmup", "seed"):
        _require(_is_integer(getattr(config, name), 0), config, name, "an integer >= 0")
    _require(config.threads is None or _is_integer(config.threads, 1), config, "threads",
             "a positive integer or None")
    seconds = config.min_seconds
    _require(isinstance(seconds, (int, float)) and math.isfinite(seconds) and seconds >= 0, config, "min_seconds",
             "a number >= 0")
    problem = length_problem(config)
    if problem:
        raise ValueError(problem)


def _is_integer(value, minimum: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def _require(ok, config: ProfileConfig, name: str, allowed: str) -> None:
    if not ok:
        raise ValueError(f"{name} {getattr(config, name)!r} is not allowed; allowed: {allowed}")


def model_config(config: ProfileConfig) -> ModelConfig:
    return ModelConfig.from_size(config.size, encoding=config.encoding, max_len=config.max_len,
                                 encoding_options=config.encoding_options or {})


def length_problem(config: ProfileConfig) -> str | None:
    """Why the encoding cannot take ``seq_len`` positions (a bounded table too short), or ``None``.

    Reads the encoding's declared ``max_positions``, so no encoding name is special-cased here.
    """
    try:
        encoding = footprint.encoding_of(model_config(config))  # never a table of max_len rows in memory
    except ValueError as error:
        return f"argument {'--hf-config' if config.encoding_options else '--encoding'}: {error}"
    limit, needed = encoding.max_positions, config.positions_needed
    if limit is not None and needed > limit:
        return (f"argument --seq-len: {needed} positions but {config.encoding}'s table has {limit} rows "
                f"(--max-len {config.max_len}); allowed: 1 to {limit}, or a larger --max-len")
    return None


def memory_problem(config: ProfileConfig) -> str | None:
    """Why the cell cannot fit on its device: its analytic memory (:func:`posbench.footprint.cell_memory`)
    is more than the device holds; ``None`` when it fits, or when this machine cannot see the device."""
    capacity = footprint.device_memory(config.device)
    if capacity is None:
        return None
    terms = footprint.cell_memory(model_config(config), config.batch, config.seq_len, config.mode,
                                  TORCH_DTYPES[config.dtype], config.device)
    if sum(terms.values()) <= capacity:
        return None
    return (f"{config.seq_len} tokens of {config.encoding} at size {config.size} ({config.mode}, {config.dtype}, "
            f"batch {config.batch}) need an estimated {footprint.described(terms)}, more than {config.device} "
            f"holds ({footprint.human(capacity)})")


def not_run(config: ProfileConfig) -> measure.ChildOutcome | None:
    """The outcome of a cell that is not measured: ``skipped`` on a device this machine lacks, ``oom``
    when its estimate is more than its device holds (:func:`memory_problem`); ``None``: measure it."""
    reason = missing_device(config.device)
    if reason:
        return measure.ChildOutcome("skipped", reason)
    too_large = memory_problem(config)
    return measure.ChildOutcome("oom", f"not run: {too_large}") if too_large else None


def profile(config: ProfileConfig, log: TextIO | None = None) -> dict:
    """One cell's record, measured as :func:`profile_together` measures a group (its latency alone)."""
    return profile_together([config], log)[0]


def profile_together(configs: list[ProfileConfig], log: TextIO | None = None) -> list[dict]:
    """The records of ``configs``, cells that differ only in their encoding, in their order: each cell's
    memory, attention path and FLOPs in its own fresh process, then the latencies of those that passed
    timed together in alternation (see the module's doc).

    Sets torch's thread count in this process to the cells' ``threads`` (when given), so each record's
    environment reports the setting it was measured with. A one-line summary per cell goes to ``log``
    (default: the current ``sys.stderr``).
    """
    for config in configs:
        check(config)
    shared = {key: value for key, value in asdict(configs[0]).items() if key != "encoding"}
    if any({key: value for key, value in asdict(c).items() if key != "encoding"} != shared for c in configs):
        raise ValueError("cells measured together must differ in their encoding only")
    if configs[0].threads:
        torch.set_num_threads(configs[0].threads)
    outcomes = [not_run(config)
                or host_kill_is_not_a_gpu_oom(config, measure.run_isolated(measure_cell, asdict(config)))
                for config in configs]
    passed = [i for i, outcome in enumerate(outcomes) if outcome.status == "ok"]
    for i, latency in zip(passed, time_latencies([configs[i] for i in passed])):
        if latency.status == "ok":
            outcomes[i].sections.update(latency.sections)
        else:
            outcomes[i] = measure.ChildOutcome(latency.status, f"latency pass: {latency.reason}", outcomes[i].sections)
    found = []
    for config, outcome in zip(configs, outcomes):
        record = machine.new_record("profile", config.record_config(), outcome.status, outcome.reason)
        record.update(outcome.sections)
        print(summary(record), file=log or sys.stderr)
        found.append(record)
    return found


def profile_by_length(configs: list[ProfileConfig], log: TextIO | None = None) -> Iterator[tuple[int, dict]]:
    """:func:`profile_together` over the cells of each length (in their order), yielding each cell's
    position in ``configs`` and record as its length is done: a batch writes them before the next length
    is measured, so a run stopped there keeps them."""
    groups: dict[int, list[int]] = {}
    for position, config in enumerate(configs):
        groups.setdefault(config.seq_len, []).append(position)
    for positions in groups.values():
        yield from zip(positions, profile_together([configs[position] for position in positions], log))


def time_latencies(configs: list[ProfileConfig]) -> list[measure.ChildOutcome]:
    """Each cell's ``latency`` section (as ``sections``), timed together in one fresh process; a cell
    left out there (it failed beside the others, or the process died) is timed alone in another."""
    if not configs:
        return []
    together = measure.run_isolated(time_cells, {"configs": [asdict(config) for config in configs]})
    timed = together.sections.get("latency", {}) if together.status == "ok" else {}
    found = []
    for i, config in enumerate(configs):
        if str(i) in timed:
            found.append(measure.ChildOutcome("ok", "", {"latency": timed[str(i)]}))
            continue
        why = together.sections.get("failed", {}).get(str(i)) or f"{together.status}: {together.reason}"
        alone = together if len(configs) == 1 else measure.run_isolated(time_cells, {"configs": [asdict(config)]})
        alone = host_kill_is_not_a_gpu_oom(config, alone)
        latency = alone.sections.get("latency", {}).get("0") if alone.status == "ok" else None
        if latency is None:
            reason = alone.sections.get("failed", {}).get("0") or alone.reason
            found.append(measure.ChildOutcome("error" if alone.status == "ok" else alone.status, reason))
        else:
            found.append(measure.ChildOutcome("ok", "", {"latency": {**latency, "alone_because": why}}))
    return found


def preflight(device: str) -> dict:
    """Can a job use ``device``? Torch sees it, a small matmul runs on it and (CUDA) NVML finds it by
    UUID. A ``RuntimeError`` with a one-line reason when not: a device the config names must be
    there, and the workflow checks each one once before any profile job is started on it."""
    reason = missing_device(device)
    if reason:
        raise RuntimeError(f"{device}: {reason}")
    target = torch.device(device)
    a = torch.randn(64, 64, device=target)
    product = float((a @ a).sum())  # runs the kernel and reads the result back
    measure.synchronize(target)
    found = {"device": device, "torch": torch.__version__, "matmul": math.isfinite(product),
             "name": torch.cuda.get_device_properties(target).name if on_cuda(target) else machine.cpu_model()}
    if on_cuda(target):
        nvml = measure.Nvml(measure.torch_device_uuid(target))
        if not nvml.available:
            raise RuntimeError(f"{device}: torch sees {found['name']} but NVML does not ({nvml.reason}); "
                               f"its memory could not be measured")
        found.update(uuid=nvml.device_uuid, driver=nvml.driver_version())
        nvml.close()
    return found


def host_kill_is_not_a_gpu_oom(config: ProfileConfig, outcome: measure.ChildOutcome) -> measure.ChildOutcome:
    """A CUDA cell's process killed by SIGKILL ran out of *host* memory (a job's memory limit, the
    kernel's OOM killer), not of GPU memory: an ``error`` that a rerun retries (with more memory),
    never an ``oom`` kept as the GPU's limit. On CPU the same kill is the cell's own out-of-memory."""
    if on_cuda(config.device) and outcome.status == "oom" and "SIGKILL" in outcome.reason:
        return measure.ChildOutcome("error", "killed by the host (SIGKILL: a job memory limit or the kernel's "
                                             "OOM killer), not a GPU out-of-memory; retried", outcome.sections)
    return outcome


def summary(record: dict) -> str:
    cell, status = record["config"], record["status"]
    text = f"profile {cell['encoding']} {cell['size']} L={cell['seq_len']} {cell['device']} {cell['mode']}: {status}"
    if status == "ok":
        latency, cpu = record["latency"], record["memory"]["cpu"]
        text += (f", median {latency['median_ms']:.3f} ms (CV {latency['cv']:.3f}, n={latency['n']}, "
                 f"alternated with {len(latency.get('alternated_with', []))}),"
                 f" CPU peak {cpu['peak_mib']:.1f} MiB (+{cpu['above_baseline_mib']:.1f} above baseline)")
    return text + (f" — {record['reason']}" if record["reason"] else "")


# ----- the isolated children ------------------------------------------------------------------
def measure_cell(payload: dict, sections: dict) -> None:
    """Measure everything of the cell ``payload`` (a config as a dict) but its latency, in this fresh
    process, filling ``sections`` as each part finishes."""
    config = ProfileConfig(**payload)
    if config.threads:
        torch.set_num_threads(config.threads)
    device = torch.device(config.device)
    if on_cuda(device):  # events, streams and the context on the device named, not device 0
        torch.cuda.set_device(device)
    nvml, context = _open_nvml(device)
    torch.manual_seed(config.seed)
    model = build_model(model_config(config)).to(device=device, dtype=weight_dtype(config))
    sections["params"] = count_params(model)
    sections["model"] = model_shape(model)
    sections["hardware"] = hardware(device, nvml)
    step = make_step(model, config)
    sections["memory"] = {**measure_memory(step, device, nvml, context), "pid": os.getpid()}
    sections["attention"] = attention_used(model, step, config)
    sections["flops"] = flop_counts(model, config)
    if config.mode == "decode":
        sections["kv_cache_mib"] = measure.mib(step.cache.nbytes())
    if nvml:
        nvml.close()


def time_cells(payload: dict, sections: dict) -> None:
    """Time the cells ``payload["configs"]`` (one device, mode, size, length) in this fresh process:
    build and warm up each (``warmup`` timed-and-discarded steps), then alternate them round by round,
    the order rotating (:func:`posbench.measure.alternate`), for at least ``min_repeats`` rounds and
    until every cell's timed steps add up to ``min_seconds`` — today's per-cell minimums, met by each
    cell, with one sample per cell per round. ``sections["latency"]`` maps each timed cell's index
    (a string) to its section; a cell that fails to build or warm up is left out, its first line in
    ``sections["failed"]``."""
    configs = [ProfileConfig(**config) for config in payload["configs"]]
    first = configs[0]
    if first.threads:
        torch.set_num_threads(first.threads)
    device = torch.device(first.device)
    if on_cuda(device):
        torch.cuda.set_device(device)
    timer, time_step = measure.make_timer(device)
    steps, sections["failed"] = {}, {}
    for i, config in enumerate(configs):
        try:
            torch.manual_seed(config.seed)
            model = build_model(model_config(config)).to(device=device, dtype=weight_dtype(config))
            step = make_step(model, config)
            for _ in range(config.warmup):
                time_step(step)
            steps[str(i)] = step
        except Exception as error:  # noqa: BLE001 - this cell is timed again alone; the others go on
            sections["failed"][str(i)] = measure.first_line(error)
            model = step = None
            if on_cuda(device):
                torch.cuda.empty_cache()
    began = time.perf_counter()
    samples = measure.alternate(steps, first.min_repeats, warmup=0, grad=True, min_seconds=first.min_seconds,
                                device=device)  # grad: each step sets its own mode (inference or training)
    total_s = time.perf_counter() - began
    sections["latency"] = {key: {"unit": "ms", "timer": timer, "warmup": first.warmup, "total_s": total_s,
                                 **measure.latency_stats(timed), "rounds": len(timed),
                                 "alternated_with": [configs[int(other)].encoding for other in steps if other != key],
                                 "pid": os.getpid()}
                           for key, timed in samples.items()}


def model_shape(model) -> dict:
    """The model as built: ``width`` is what the layers run at (d + d_p for a naive concat), ``d_model``
    the size's nominal width."""
    cfg = model.cfg
    return {"d_model": cfg.d_model, "width": model.width, "n_layers": cfg.n_layers, "n_heads": cfg.n_heads,
            "d_ff": model.d_ff}


def _open_nvml(device: torch.device) -> tuple[measure.Nvml | None, int | None]:
    """On CUDA: NVML for the device and this process's idle context (CUDA initialised, no model)."""
    if not on_cuda(device):
        return None, None
    torch.zeros(1, device=device)  # creates the context
    torch.cuda.synchronize(device)
    nvml = measure.Nvml(measure.torch_device_uuid(device))
    return nvml, nvml.process_bytes() if nvml.available else None


def weight_dtype(config: ProfileConfig) -> torch.dtype:
    """Inference runs in ``dtype``; training keeps float32 master weights (and AdamW state) and runs
    the forward under autocast to ``dtype``, as mixed-precision training does — so its memory and
    time are what a user's bf16/fp16 training costs, not those of pure low-precision AdamW."""
    return torch.float32 if config.mode == "train" else TORCH_DTYPES[config.dtype]


def make_step(model: torch.nn.Module, config: ProfileConfig):
    """One unit of timed work on fixed random tokens: a forward in inference mode, or a training step
    (mixed precision below float32: autocast, and fp16's gradients scaled as torch.amp does)."""
    device = next(model.parameters()).device
    generator = torch.Generator().manual_seed(config.seed)
    vocab = model.cfg.vocab_size
    tokens = torch.randint(vocab, (config.batch, config.seq_len + 1), generator=generator).to(device)
    inputs, targets = tokens[:, :-1], tokens[:, 1:]  # (B, L) each

    if config.mode == "decode":
        return decode_step(model, inputs)

    if config.mode == "infer":
        model.eval()

        def forward():
            with torch.inference_mode():
                return model(inputs)

        return forward

    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    scaler = torch.amp.GradScaler(device.type, enabled=TORCH_DTYPES[config.dtype] == torch.float16)

    def train_step():
        optimizer.zero_grad(set_to_none=True)
        with autocast(device, config.dtype):
            logits = model(inputs)  # (B, L, vocab)
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()

    return train_step


def decode_step(model: torch.nn.Module, prompt: torch.Tensor):
    """Generation's unit of work: the prompt ``(B, L)`` is prefilled into a KV cache once (untimed); a step feeds
    one token at position L (the prompt's tokens in turn, its last first) and then cuts the cache back to the L
    prompt tokens, so every timed step sees the same context length and does the same work.

    A cache whose keys each token rewrites (its encoding ``rewrites_cache``: PaTH carries every cached key through
    the token's ``H``, in place) is cut back with its keys as carried: a context of L keys, though not the
    prompt's. Every L steps it goes back to the prefill's keys and states, before keys carried on and on shrink
    towards subnormal numbers, whose arithmetic is far slower on a CPU. So the first step, and every L-th after
    it, is the full forward's next token for every encoding; the copy back is one step in L (none in a bench of
    fewer rounds)."""
    model.eval()
    length = prompt.shape[1]
    cache = KVCache.empty(model.cfg.n_layers, reserve=length + 1)  # the prompt and the step's token
    with torch.inference_mode():
        model(prompt, cache=cache)
    rewrites = model.encoding.rewrites_cache
    prefill = CacheContents.of(cache) if rewrites else None
    steps = itertools.count()

    def step():
        count = next(steps)
        if rewrites and count and count % length == 0:
            prefill.restore(cache)
        token = prompt.narrow(1, (count - 1) % length, 1)  # (B, 1)
        with torch.inference_mode():
            logits = model(token, cache=cache)  # (B, 1, vocab)
        cache.truncate(length, carried=rewrites)
        return logits

    step.cache = cache
    return step


@dataclass(frozen=True)
class CacheContents:
    """A copy of a cache's keys and states, to put back into it in place."""

    keys: list[torch.Tensor | None]
    states: list[dict[str, torch.Tensor]]

    @classmethod
    def of(cls, cache: KVCache) -> CacheContents:
        with torch.inference_mode():
            return cls([None if k is None else k.clone() for k in cache.keys],
                       [{name: t.clone() for name, t in state.items()} for state in cache.states])

    def restore(self, cache: KVCache) -> None:
        with torch.inference_mode():
            for cached, saved in zip(cache.keys, self.keys):
                if saved is not None:
                    cached.copy_(saved)
        cache.states = [dict(state) for state in self.states]  # the encoding replaces a state, never writes into it


def measure_memory(step, device: torch.device, nvml: measure.Nvml | None, context: int | None) -> dict:
    """The memory pass: ``MEMORY_PASS_STEPS`` steps watched by the CPU (and CUDA) monitors."""
    cuda = measure.CudaAllocatorMonitor(device) if on_cuda(device) else None
    with measure.CpuMemoryMonitor() as cpu, cuda or contextlib.nullcontext():
        for _ in range(MEMORY_PASS_STEPS):
            step()
        measure.synchronize(device)
    return {"unit": "MiB", "steps": MEMORY_PASS_STEPS, "cpu": cpu.result(),
            "cuda": cuda.result() if cuda else None,
            "nvml": measure.nvml_memory(nvml, context) if nvml else None}


def hardware(device: torch.device, nvml: measure.Nvml | None) -> dict:
    """What the cell ran on, as this process sees it (its thread count, its GPU), and the settings that
    move a GPU's numbers: TF32 and matmul precision, the SDPA backends enabled, cuDNN, the allocator's
    configuration, clocks and power limit (where NVML gives them), the host and the SLURM job."""
    info = {"device": str(device), "cpu": machine.cpu_model(), "torch_threads": torch.get_num_threads(),
            "host": socket.gethostname(), "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
            "float32_matmul_precision": torch.get_float32_matmul_precision()}
    if on_cuda(device):
        props = torch.cuda.get_device_properties(device)
        info.update(gpu=props.name, gpu_uuid=measure.torch_device_uuid(device),
                    gpu_capability=f"{props.major}.{props.minor}", gpu_memory_mib=measure.mib(props.total_memory),
                    gpu_driver=nvml.driver_version() if nvml else None, cuda=torch.version.cuda,
                    cuda_visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"), **cuda_settings(),
                    **(nvml.clocks_and_power() if nvml else {}))
    return info


def cuda_settings() -> dict:
    """The torch switches that change what a CUDA kernel computes or which one runs."""
    backends = torch.backends
    return {"tf32_matmul": backends.cuda.matmul.allow_tf32, "tf32_cudnn": backends.cudnn.allow_tf32,
            "sdpa_enabled": {"flash": backends.cuda.flash_sdp_enabled(),
                             "mem_efficient": backends.cuda.mem_efficient_sdp_enabled(),
                             "cudnn": backends.cuda.cudnn_sdp_enabled(), "math": backends.cuda.math_sdp_enabled()},
            "cudnn_version": backends.cudnn.version(),
            "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF")}


SDPA_KERNEL_PREFIX = "aten::_scaled_dot_product_"


def attention_used(model, step, config: ProfileConfig) -> dict:
    """Which attention code ran: the model's path (:func:`posbench.attention.choose_path`, the function the
    model itself calls; each distinct path of a layer pattern's layers, :func:`~posbench.attention.layer_paths`)
    and the SDPA kernels seen in one profiled step.

    ``sdpa_backend`` is the kernel names without prefix and ``_backward`` suffix, e.g.
    ``flash_attention_for_cpu`` (CPU flash), ``attention_math`` (the unfused fallback),
    ``efficient_attention`` / ``flash_attention`` / ``cudnn_attention`` (CUDA).
    """
    with profiling([torch.profiler.ProfilerActivity.CPU]) as profiler:
        step()
    kernels = sorted({event.name for event in profiler.events() if event.name.startswith(SDPA_KERNEL_PREFIX)})
    backends = sorted({name.removeprefix(SDPA_KERNEL_PREFIX).removesuffix("_backward") for name in kernels})
    param = next(model.parameters())
    q_len, k_len = (1, config.seq_len + 1) if config.mode == "decode" else (config.seq_len, config.seq_len)
    path = layer_paths(model, q_len, k_len, param.dtype, param.device)
    return {"path": path, "sdpa_kernels": kernels, "sdpa_backend": ",".join(backends)}


def flop_counts(model, config: ProfileConfig) -> dict:
    """Analytic, fvcore (``None`` in train mode) and torch-counter FLOPs, reconciled in :mod:`posbench.flops`.

    The counters run the model again (with a backward in train mode), at most at
    :data:`COUNTED_UP_TO` tokens: a longer cell's counts are extended exactly from short lengths, so
    counting never needs the memory of a full-size pass. Latency and memory are measured by then, so
    a failure here must not turn the cell into one: the analytic count (from a model on the meta
    device, no memory) stands, the library counts are ``None`` and ``counters_failed`` says why."""
    if config.mode == "decode":
        terms = decode_flops(model, config.batch, config.seq_len)
        return {"mode": "decode", "batch_size": config.batch, "seq_len": config.seq_len,
                "analytic": sum(terms.values()), "analytic_causal_half": sum(terms.values()), "fvcore": None,
                "torch": None, "terms": terms, "counters_failed": "the library counters run in infer and train modes"}
    try:
        counts = count_flops(model, config.batch, config.seq_len, mode=config.mode, max_run_len=COUNTED_UP_TO)
        return counts.as_dict()
    except Exception as error:  # noqa: BLE001 - any failure of the extra pass costs only its figures
        failed = measure.first_line(error)
    terms = analytic_flops(model_config(config), config.batch, config.seq_len, config.mode)
    half = analytic_flops(model_config(config), config.batch, config.seq_len, config.mode, causal_half=True)
    return {"mode": config.mode, "batch_size": config.batch, "seq_len": config.seq_len,
            "analytic": sum(terms.values()), "analytic_causal_half": sum(half.values()), "fvcore": None,
            "torch": None, "terms": terms, "counters_failed": failed}
