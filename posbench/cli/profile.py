"""``python -m posbench profile``: measure cells and write one JSON record per cell.

A cell is encoding × size × sequence length × device (× batch, dtype, mode); one call may give
several lengths (:mod:`posbench.batch`: a length whose record is already there, for the same config,
is kept). The parent process checks the arguments (bad ones: one line on stderr, exit 2, nothing
written), writes ``skipped`` for a device this machine lacks, and otherwise runs each cell's
:func:`measure_cell` in a fresh process (:func:`posbench.measure.run_isolated`), so an
out-of-memory — even a kill by the kernel — becomes an ``oom`` record and no cell's memory figures
carry another's. ``ok``, ``oom`` and ``skipped`` exit 0; ``error`` writes its record and exits 1.

Inside the child, in this order: build the model (fixed seed), a memory pass (the first thing
after the build, so nothing earlier has inflated the baseline), the latency pass, one profiled
step to see which attention kernel ran, and the FLOP counts.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
from pathlib import Path

import torch

from posbench import batch, encodings, measure, records
from posbench.attention import choose_path
from posbench.flops import count_flops
from posbench.model import SIZES, ModelConfig, build_model, count_params

HELP = ("Measure cells (encoding, size, one or more lengths, device): latency, memory, FLOPs, parameters "
        "-> a JSON record per cell.")
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
MODES = ("infer", "train")
DEVICE_PATTERN = re.compile(r"cpu|mps|cuda(:\d+)?")
DEVICE_ALLOWED = "cpu, cuda, cuda:N, mps"
MEMORY_PASS_STEPS = 2  # the first step allocates caches and optimizer state, the second is steady


def _positive_int(text: str) -> int:
    if not re.fullmatch(r"\+?\d+", text.strip()) or int(text) <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not allowed; allowed: a positive integer")
    return int(text)


def _non_negative_int(text: str) -> int:
    if not re.fullmatch(r"\+?\d+", text.strip()):
        raise argparse.ArgumentTypeError(f"{text!r} is not allowed; allowed: an integer >= 0")
    return int(text)


def _non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:  # also rejects nan
        raise argparse.ArgumentTypeError(f"{text!r} is not allowed; allowed: a number >= 0")
    return value


def _device(text: str) -> str:
    if not DEVICE_PATTERN.fullmatch(text):
        raise argparse.ArgumentTypeError(f"unknown device {text!r}; allowed: {DEVICE_ALLOWED}")
    return text


def add_arguments(parser: argparse.ArgumentParser) -> None:
    cell = parser.add_argument_group("the cell")
    cell.add_argument("--encoding", required=True, choices=encodings.names(), metavar="E",
                      help=f"one of: {', '.join(encodings.names())}")
    cell.add_argument("--size", required=True, choices=list(SIZES), metavar="S", help=f"one of: {', '.join(SIZES)}")
    cell.add_argument("--seq-len", required=True, type=_positive_int, nargs="+", metavar="L",
                      help="tokens per sequence; several lengths are measured one after another")
    cell.add_argument("--device", default="cpu", type=_device, metavar="D",
                      help=f"{DEVICE_ALLOWED}; one this machine lacks gives a 'skipped' record (default cpu)")
    cell.add_argument("--batch", default=1, type=_positive_int, metavar="B", help="sequences per step (default 1)")
    cell.add_argument("--dtype", default="float32", choices=list(DTYPES), help="weights and activations (default float32)")
    cell.add_argument("--mode", default="infer", choices=MODES,
                      help="infer: a forward pass in inference mode; train: forward + backward + AdamW step")
    cell.add_argument("--max-len", type=_positive_int, metavar="N",
                      help="positions the encoding is built for, i.e. rows of a learned table (default: --seq-len)")
    timing = parser.add_argument_group("timing")
    timing.add_argument("--threads", type=_positive_int, metavar="N", help="torch CPU threads (default: torch's)")
    timing.add_argument("--warmup", default=3, type=_non_negative_int, metavar="N", help="untimed steps first (default 3)")
    timing.add_argument("--min-repeats", default=10, type=_positive_int, metavar="N", help="timed steps at least (default 10)")
    timing.add_argument("--min-seconds", default=1.0, type=_non_negative_float, metavar="S",
                        help="and timed for at least this long (default 1.0)")
    timing.add_argument("--seed", default=0, type=_non_negative_int, help="weights and inputs (default 0)")
    parser.add_argument("--out", required=True, metavar="PATH.json",
                        help="where each record goes (written atomically); with several lengths it contains {seq_len}")
    parser.add_argument("--manifest", type=Path, metavar="PATH.json",
                        help="written last: the records of this run and their status (a workflow job's output)")
    parser.epilog = ("Status ok, oom (a failed allocation or a kill of the measuring process) and skipped (a device "
                     "this machine lacks) exit 0; error writes its record and exits 1; a bad argument writes "
                     "nothing and exits 2.")


def cell_config(args: argparse.Namespace, seq_len: int) -> dict:
    """The inputs that define a cell: the record's ``config``, hashed into ``config_hash``."""
    return {"encoding": args.encoding, "size": args.size, "seq_len": seq_len,
            "max_len": args.max_len or seq_len, "device": args.device, "batch": args.batch,
            "dtype": args.dtype, "mode": args.mode, "threads": args.threads, "warmup": args.warmup,
            "min_repeats": args.min_repeats, "min_seconds": args.min_seconds, "seed": args.seed}


def model_config(cell: dict) -> ModelConfig:
    return ModelConfig.from_size(cell["size"], encoding=cell["encoding"], max_len=cell["max_len"])


def length_problem(cell: dict) -> str | None:
    """Why the encoding cannot take ``seq_len`` positions (a bounded table too short), or ``None``.

    Reads the encoding's declared ``max_positions``, so no encoding name is special-cased here.
    """
    cfg = model_config(cell)
    try:
        encoding = encodings.build(cfg.encoding, d_model=cfg.d_model, n_heads=cfg.n_heads,
                                   max_len=cfg.max_len, causal=cfg.causal)
    except ValueError as error:
        return f"argument --encoding: {error}"
    limit = encoding.max_positions
    if limit is not None and cell["seq_len"] > limit:
        return (f"argument --seq-len: {cell['seq_len']} positions but {cell['encoding']}'s table has {limit} rows "
                f"(--max-len {cell['max_len']}); allowed: 1 to {limit}, or a larger --max-len")
    return None


def missing_device(device: str) -> str | None:
    """Why this machine cannot run on ``device``, or ``None`` when it can."""
    kind, _, index = device.partition(":")
    if kind == "cuda":
        if not torch.cuda.is_available():
            return f"no CUDA device visible (torch {torch.__version__}, built for CUDA {torch.version.cuda})"
        if index and int(index) >= torch.cuda.device_count():
            return f"{device} does not exist: {torch.cuda.device_count()} CUDA device(s) visible"
    if kind == "mps" and not (hasattr(torch.backends, "mps") and torch.backends.mps.is_available()):
        return f"MPS is not available (torch {torch.__version__} on {sys.platform})"
    return None


def run(args: argparse.Namespace) -> int:
    cells = [cell_config(args, seq_len) for seq_len in dict.fromkeys(args.seq_len)]
    try:
        problem = next(filter(None, map(length_problem, cells)), None)
        paths = batch.record_paths(args.out, [{"seq_len": cell["seq_len"]} for cell in cells])
    except batch.OutTemplateError as error:
        problem = str(error)
    if problem:
        sys.stderr.write(f"posbench profile: error: {problem}\n")
        return 2
    if args.threads:
        torch.set_num_threads(args.threads)  # the record's environment reports the measured setting
    return batch.run_cells("profile", [batch.Cell(path, cell, lambda cell=cell: profile(cell))
                                       for path, cell in zip(paths, cells)], args.manifest)


def profile(cell: dict) -> dict:
    """One cell's record: ``skipped`` on a device this machine lacks, else measured in a fresh process."""
    reason = missing_device(cell["device"])
    if reason:
        outcome = measure.ChildOutcome("skipped", reason)
    else:
        outcome = measure.run_isolated("posbench.cli.profile:measure_cell", cell)
    record = records.new_record("profile", cell, outcome.status, outcome.reason)
    record.update(outcome.sections)
    print(summary(record), file=sys.stderr)
    return record


def summary(record: dict) -> str:
    cell, status = record["config"], record["status"]
    text = f"profile {cell['encoding']} {cell['size']} L={cell['seq_len']} {cell['device']} {cell['mode']}: {status}"
    if status == "ok":
        latency, cpu = record["latency"], record["memory"]["cpu"]
        text += (f", median {latency['median_ms']:.3f} ms (CV {latency['cv']:.3f}, n={latency['n']}),"
                 f" CPU peak {cpu['peak_mib']:.1f} MiB (+{cpu['above_baseline_mib']:.1f} above baseline)")
    return text + (f" — {record['reason']}" if record["reason"] else "")


# ----- the isolated child --------------------------------------------------------------------
def measure_cell(cell: dict, sections: dict) -> None:
    """Measure ``cell`` in this (fresh) process, filling ``sections`` as each part finishes."""
    if cell["threads"]:
        torch.set_num_threads(cell["threads"])
    device = torch.device(cell["device"])
    nvml, context = _open_nvml(device)
    torch.manual_seed(cell["seed"])
    model = build_model(model_config(cell)).to(device=device, dtype=DTYPES[cell["dtype"]])
    sections["params"] = count_params(model)
    sections["hardware"] = hardware(device, nvml)
    step = make_step(model, cell)
    sections["memory"] = measure_memory(step, device, nvml, context)
    sections["latency"] = measure.measure_latency(step, device, warmup=cell["warmup"],
                                                  min_repeats=cell["min_repeats"],
                                                  min_seconds=cell["min_seconds"])
    sections["attention"] = attention_used(model, step, cell["seq_len"])
    sections["flops"] = flop_counts(model, cell)
    if nvml:
        nvml.close()


def _open_nvml(device: torch.device) -> tuple[measure.Nvml | None, int | None]:
    """On CUDA: NVML for the device and this process's idle context (CUDA initialised, no model)."""
    if device.type != "cuda":
        return None, None
    torch.zeros(1, device=device)  # creates the context
    torch.cuda.synchronize(device)
    nvml = measure.Nvml(measure.torch_device_uuid(device))
    return nvml, nvml.process_bytes() if nvml.available else None


def make_step(model: torch.nn.Module, cell: dict):
    """One unit of timed work on fixed random tokens: a forward in inference mode, or a training step."""
    device = next(model.parameters()).device
    generator = torch.Generator().manual_seed(cell["seed"])
    vocab = model.cfg.vocab_size
    tokens = torch.randint(vocab, (cell["batch"], cell["seq_len"] + 1), generator=generator).to(device)
    inputs, targets = tokens[:, :-1], tokens[:, 1:]  # (B, L) each

    if cell["mode"] == "infer":
        model.eval()

        def forward():
            with torch.inference_mode():
                return model(inputs)

        return forward

    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def train_step():
        optimizer.zero_grad(set_to_none=True)
        logits = model(inputs)  # (B, L, vocab)
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())
        loss.backward()
        optimizer.step()

    return train_step


def measure_memory(step, device: torch.device, nvml: measure.Nvml | None, context: int | None) -> dict:
    """The memory pass: ``MEMORY_PASS_STEPS`` steps watched by the CPU (and CUDA) monitors."""
    cuda = measure.CudaAllocatorMonitor(device) if device.type == "cuda" else None
    with measure.CpuMemoryMonitor() as cpu, cuda or contextlib.nullcontext():
        for _ in range(MEMORY_PASS_STEPS):
            step()
        measure.synchronize(device)
    return {"unit": "MiB", "steps": MEMORY_PASS_STEPS, "cpu": cpu.result(),
            "cuda": cuda.result() if cuda else None,
            "nvml": measure.nvml_memory(nvml, context) if nvml else None}


def hardware(device: torch.device, nvml: measure.Nvml | None) -> dict:
    """What the cell ran on, as this process sees it (its thread count, its GPU)."""
    info = {"device": str(device), "cpu": records.cpu_model(), "torch_threads": torch.get_num_threads()}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info.update(gpu=props.name, gpu_uuid=measure.torch_device_uuid(device),
                    gpu_capability=f"{props.major}.{props.minor}", gpu_memory_mib=measure.mib(props.total_memory),
                    gpu_driver=nvml.driver_version() if nvml else None, cuda=torch.version.cuda,
                    cuda_visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"))
    return info


SDPA_KERNEL_PREFIX = "aten::_scaled_dot_product_"


def attention_used(model, step, seq_len: int) -> dict:
    """Which attention code ran: the model's path (:func:`posbench.attention.choose_path`, the function the
    model itself calls) and the SDPA kernels seen in one profiled step.

    ``sdpa_backend`` is the kernel names without prefix and ``_backward`` suffix, e.g.
    ``flash_attention_for_cpu`` (CPU flash), ``attention_math`` (the unfused fallback),
    ``efficient_attention`` / ``flash_attention`` / ``cudnn_attention`` (CUDA).
    """
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profiler:
        step()
    kernels = sorted({event.name for event in profiler.events() if event.name.startswith(SDPA_KERNEL_PREFIX)})
    backends = sorted({name.removeprefix(SDPA_KERNEL_PREFIX).removesuffix("_backward") for name in kernels})
    dtype = next(model.parameters()).dtype
    path = choose_path(model.encoding, seq_len, seq_len, model.cfg.causal, dtype)
    return {"path": path, "sdpa_kernels": kernels, "sdpa_backend": ",".join(backends)}


def flop_counts(model, cell: dict) -> dict:
    """Analytic, fvcore (``None`` in train mode) and torch-counter FLOPs, reconciled in :mod:`posbench.flops`."""
    return count_flops(model, cell["batch"], cell["seq_len"], mode=cell["mode"]).as_dict()
