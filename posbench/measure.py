"""Measurement you can trust: a stopwatch, memory peaks and an out-of-memory that becomes a record.

* Latency: warm-up, then at least ``min_repeats`` timed calls *and* at least ``min_seconds`` of them
  (several steps: in alternation, round by round, :func:`alternate`); CUDA
  timed with events and a synchronize per call, other devices with ``time.perf_counter`` around a
  synchronize. The raw samples are kept beside median, p90, mean, stdev, CV and IQR.
* CPU memory: the kernel's resident high-water mark (``VmHWM``), reset at the start of the measured
  work by writing ``5`` to ``/proc/self/clear_refs`` so it covers that work only; a thread reading
  ``/proc/self/statm`` every millisecond cross-checks it and stands in where the reset is refused.
  Without ``/proc`` (macOS) only ``ru_maxrss`` is left: the peak of the whole process, in bytes
  there and KiB on Linux.
* CUDA memory: the torch allocator's peaks after ``reset_peak_memory_stats``, and NVML's figure for
  this process on the device whose UUID torch reports (indices are useless for matching:
  ``CUDA_VISIBLE_DEVICES`` and SLURM renumber devices, NVML does not).
* Faults: :func:`run_isolated` runs the measurement in a fresh Python process, so an allocation
  that fails *and* a kill by the kernel's out-of-memory killer both come back as ``oom``.

All memory figures are MiB (2**20 bytes); latencies are milliseconds.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from posbench import records
from posbench.devices import CPU, MPS, on_cuda
from posbench.faults import interrupts_held

MIB = 2**20
RSS_SAMPLE_INTERVAL_S = 0.001
_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def mib(n_bytes: float) -> float:
    return round(n_bytes / MIB, 3)


# ----- latency -------------------------------------------------------------------------------
def latency_stats(samples_ms: list[float]) -> dict:
    """Summary of timed calls: median, p90 (linear interpolation), mean, sample stdev, CV, IQR."""
    if not samples_ms:
        raise ValueError("latency_stats needs at least one sample")
    x = np.asarray(samples_ms, dtype=np.float64)
    p25, median, p75, p90 = np.percentile(x, [25, 50, 75, 90])
    mean = float(x.mean())
    stdev = float(x.std(ddof=1)) if x.size > 1 else 0.0
    return {
        "n": int(x.size), "median_ms": float(median), "p90_ms": float(p90), "mean_ms": mean,
        "stdev_ms": stdev, "cv": stdev / mean if mean > 0 else 0.0, "iqr_ms": float(p75 - p25),
        "min_ms": float(x.min()), "max_ms": float(x.max()), "samples_ms": x.tolist(),
    }


def synchronize(device: torch.device) -> None:
    """Wait for queued work on an asynchronous device; a no-op on CPU."""
    if on_cuda(device):
        torch.cuda.synchronize(device)
    elif device.type == MPS:
        torch.mps.synchronize()


def make_timer(device: torch.device) -> tuple[str, Callable[[Callable[[], object]], float]]:
    """``(timer name, time(step) -> milliseconds)`` for ``device``."""
    if on_cuda(device):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

        def time_cuda(step):
            start.record()
            step()
            end.record()
            end.synchronize()
            return start.elapsed_time(end)

        return "cuda_event", time_cuda

    def time_wall(step):
        synchronize(device)
        began = time.perf_counter()
        step()
        synchronize(device)
        return (time.perf_counter() - began) * 1e3

    return "perf_counter", time_wall


def alternate(steps: dict[str, Callable[[], object]], rounds: int, warmup: int, grad: bool = False,
              self_timed: bool = False, *, min_seconds: float = 0.0,
              device: torch.device | None = None) -> dict[str, list[float]]:
    """Milliseconds per call of each step, timed in alternation so a change of load hits them all:
    ``warmup`` untimed calls of each, then rounds calling each once, in an order that rotates by one
    every round — at least ``rounds`` rounds, and more until every step's timed calls add up to
    ``min_seconds``. Every step gets the same number of samples, one per round, so the per-round
    ratio of two steps is paired. Timed with ``device``'s timer (:func:`make_timer`; default CPU).
    In inference mode unless ``grad`` (training steps). ``self_timed``: each step returns its own
    milliseconds (a part of the call), which are kept instead."""
    _, time_call = make_timer(device or torch.device(CPU))
    time_step = (lambda step: step()) if self_timed else time_call
    names = list(steps)
    with contextlib.nullcontext() if grad else torch.inference_mode():
        for name in names:
            for _ in range(warmup):
                steps[name]()
        samples: dict[str, list[float]] = {name: [] for name in names}
        r = 0
        while names and (r < rounds or min(sum(s) for s in samples.values()) < min_seconds * 1e3):
            for name in names[r % len(names):] + names[: r % len(names)]:
                samples[name].append(time_step(steps[name]))
            r += 1
    return samples


# ----- CPU memory ----------------------------------------------------------------------------
def current_rss_bytes() -> int | None:
    """Resident memory now (``/proc/self/statm``), or ``None`` without ``/proc``."""
    try:
        return int(Path("/proc/self/statm").read_text().split()[1]) * _PAGE_BYTES
    except OSError:
        return None


def ru_maxrss_bytes() -> int:
    """Peak resident memory of this process's whole life; ``ru_maxrss`` is bytes on macOS, KiB elsewhere."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def reset_rss_high_water_mark() -> bool:
    """Restart the kernel's ``VmHWM`` from the current RSS (Linux >= 4.0); ``False`` if refused."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def rss_high_water_mark_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise OSError("/proc/self/status has no VmHWM")


class CpuMemoryMonitor:
    """Peak resident memory over a ``with`` block, and how far it rose above the RSS at entry.

    The headline ``peak_mib`` is the kernel's high-water mark reset at entry; the 1 ms sampling thread
    gives ``sampled_peak_mib`` as a cross-check and the fallback. Each of them, and the RSS at entry, is
    a lower bound of the block's peak, and ``peak_mib`` is the largest: the kernel moves the mark when
    memory is unmapped, not when the allocator hands pages back by ``madvise``, so a block whose RSS rose
    and fell that way can read a mark under its entry RSS (863.22 against 863.31 MiB once, in a test
    process). The thread only runs in the memory pass, never while latency is timed.
    """

    def __enter__(self) -> CpuMemoryMonitor:
        self.baseline = current_rss_bytes()
        self.samples: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self.hwm_reset = self.baseline is not None and reset_rss_high_water_mark()
        self._began = time.perf_counter()
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.is_set():
            rss = current_rss_bytes()
            if rss is None:
                return
            self.samples.append(rss)
            time.sleep(RSS_SAMPLE_INTERVAL_S)

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.elapsed_s = time.perf_counter() - self._began
        self.high_water_mark = rss_high_water_mark_bytes() if self.hwm_reset else None
        self.ru_maxrss = ru_maxrss_bytes()

    def result(self) -> dict:
        sampled_peak = max(self.samples, default=None)
        if self.hwm_reset:
            method, peak = "VmHWM reset via /proc/self/clear_refs at start", self.high_water_mark
        elif sampled_peak is not None:
            method, peak = f"/proc/self/statm sampled every {RSS_SAMPLE_INTERVAL_S * 1e3:g} ms", sampled_peak
        else:
            method, peak = "ru_maxrss (peak of the whole process, build included)", self.ru_maxrss
        baseline = self.baseline if self.baseline is not None else 0
        peak = max(peak, sampled_peak or 0, baseline)  # each a lower bound of the block's peak
        return {
            "method": method,
            "baseline_mib": mib(baseline),
            "peak_mib": mib(peak),
            "above_baseline_mib": mib(peak - baseline),
            "sampled_peak_mib": None if sampled_peak is None else mib(sampled_peak),
            "samples": len(self.samples),
            "sample_interval_ms": self.elapsed_s * 1e3 / len(self.samples) if self.samples else None,
            "ru_maxrss_mib": mib(self.ru_maxrss),
        }


# ----- CUDA memory ---------------------------------------------------------------------------
class CudaAllocatorMonitor:
    """The torch caching allocator's peaks over a ``with`` block, reset at entry."""

    def __init__(self, device: torch.device):
        self.device = device

    def __enter__(self) -> CudaAllocatorMonitor:
        torch.cuda.synchronize(self.device)
        self.baseline = torch.cuda.memory_allocated(self.device)
        torch.cuda.reset_peak_memory_stats(self.device)
        return self

    def __exit__(self, *exc) -> None:
        torch.cuda.synchronize(self.device)
        self.peak_allocated = torch.cuda.max_memory_allocated(self.device)
        self.peak_reserved = torch.cuda.max_memory_reserved(self.device)

    def result(self) -> dict:
        return {"baseline_allocated_mib": mib(self.baseline),
                "peak_allocated_mib": mib(self.peak_allocated),
                "above_baseline_allocated_mib": mib(self.peak_allocated - self.baseline),
                "peak_reserved_mib": mib(self.peak_reserved)}


def normalize_uuid(uuid) -> str:
    """``GPU-8d4d…`` / ``MIG-8d4d…`` (NVML, str or bytes) and ``8d4d…`` (torch) -> ``8d4d…``."""
    text = uuid.decode() if isinstance(uuid, bytes) else str(uuid)
    text = text.strip().lower()
    return text.removeprefix("gpu-").removeprefix("mig-")


def torch_device_uuid(device: torch.device) -> str:
    return normalize_uuid(torch.cuda.get_device_properties(device).uuid)


class Nvml:
    """NVML for one device, found by UUID; every failure becomes ``available: False`` and a reason.

    ``nvml`` is the ``pynvml`` module (from ``nvidia-ml-py``), replaceable in tests.
    """

    def __init__(self, device_uuid: str, nvml=None):
        self.device_uuid = normalize_uuid(device_uuid)
        self.handle, self.reason = None, ""
        try:
            self.nvml = nvml or importlib.import_module("pynvml")
            self.nvml.nvmlInit()
        except Exception as error:  # noqa: BLE001 - ImportError, NVMLError_LibraryNotFound, driver errors
            self.reason = f"NVML unavailable: {type(error).__name__}: {error}"
            return
        try:
            self.handle = self._find_device()
        except self.nvml.NVMLError as error:
            self.reason = f"NVML error while looking up devices: {error}"
        if self.handle is None and not self.reason:
            self.reason = f"no NVML device has UUID {self.device_uuid}"

    def _find_device(self):
        """By UUID (a whole GPU, or a MIG instance); else a scan that skips the devices this process
        may not read (a cgroup-restricted device raises NO_PERMISSION, which must not end the lookup)."""
        by_uuid = getattr(self.nvml, "nvmlDeviceGetHandleByUUID", None)
        for prefix in ("GPU-", "MIG-") if by_uuid else ():
            try:
                return by_uuid(prefix + self.device_uuid)
            except self.nvml.NVMLError:
                continue
        for index in range(self.nvml.nvmlDeviceGetCount()):
            try:
                handle = self.nvml.nvmlDeviceGetHandleByIndex(index)
                if normalize_uuid(self.nvml.nvmlDeviceGetUUID(handle)) == self.device_uuid:
                    return handle
            except self.nvml.NVMLError:
                continue
        return None

    def read(self, call, *args):
        """``call(*args)`` on NVML, or ``(None, reason)`` when it fails: one failed figure, not a failed cell."""
        try:
            return call(*args), ""
        except self.nvml.NVMLError as error:
            return None, f"{getattr(call, '__name__', 'NVML call')}: {error}"

    @property
    def available(self) -> bool:
        return self.handle is not None

    def driver_version(self) -> str | None:
        if not self.available:
            return None
        version, _ = self.read(self.nvml.nvmlSystemGetDriverVersion)
        return version.decode() if isinstance(version, bytes) else version

    def process_bytes(self, pid: int | None = None) -> int | None:
        """GPU memory NVML charges to process ``pid`` (default: this one) on the device; ``None`` if unlisted.

        Containers often hide it: NVML lists host PIDs, and ``usedGpuMemory`` can be unavailable.
        """
        pid = os.getpid() if pid is None else pid
        processes, _ = self.read(self.nvml.nvmlDeviceGetComputeRunningProcesses, self.handle)
        for process in processes or ():
            if process.pid == pid:
                return process.usedGpuMemory
        return None

    def device_used_bytes(self) -> int | None:
        """Memory in use on the whole device, every process included (``None`` if NVML refuses)."""
        info, _ = self.read(self.nvml.nvmlDeviceGetMemoryInfo, self.handle)
        return None if info is None else info.used

    def clocks_and_power(self) -> dict:
        """SM and memory clocks (MHz) now and at most, and the power limit (W), each ``None`` if NVML refuses it."""
        nvml, handle = self.nvml, self.handle
        if not self.available:
            return {}
        readings = {"sm_clock_mhz": (nvml.nvmlDeviceGetClockInfo, handle, nvml.NVML_CLOCK_SM),
                    "sm_clock_max_mhz": (nvml.nvmlDeviceGetMaxClockInfo, handle, nvml.NVML_CLOCK_SM),
                    "memory_clock_mhz": (nvml.nvmlDeviceGetClockInfo, handle, nvml.NVML_CLOCK_MEM),
                    "power_limit_w": (nvml.nvmlDeviceGetPowerManagementLimit, handle)}
        values = {name: self.read(*call)[0] for name, call in readings.items()}
        if values["power_limit_w"] is not None:
            values["power_limit_w"] /= 1000  # NVML gives milliwatts
        return values

    def close(self) -> None:
        if self.available:
            self.nvml.nvmlShutdown()


def nvml_memory(nvml: Nvml, context_bytes: int | None) -> dict:
    """NVML's view after the measured work, beside the idle context read before the model existed.

    The caching allocator keeps what it reserved, so the process figure read after the work holds
    the pass's peak reservation (plus kernels and library workspaces loaded on first use).
    """
    if not nvml.available:
        return {"available": False, "reason": nvml.reason}
    process = nvml.process_bytes()
    return {
        "available": True,
        "reason": ("" if process is not None
                   else f"process {os.getpid()} is not in NVML's list (container PID namespace?)"),
        "device_uuid": nvml.device_uuid,
        "context_mib": None if context_bytes is None else mib(context_bytes),
        "process_mib": None if process is None else mib(process),
        "above_context_mib": None if process is None or context_bytes is None else mib(process - context_bytes),
        "device_used_mib": None if (used := nvml.device_used_bytes()) is None else mib(used),
    }


# ----- faults --------------------------------------------------------------------------------
_OOM_MESSAGES = ("out of memory", "can't allocate memory", "cannot allocate memory",  # CUDA, MPS, the CPU allocator
                 "cublas_status_alloc_failed", "cudnn_status_alloc_failed",  # cuBLAS / cuDNN workspaces
                 "cudnn_status_not_enough_memory")


def is_out_of_memory(error: BaseException) -> bool:
    """CUDA/MPS ``OutOfMemoryError``, Python's ``MemoryError``, the CPU allocator's ENOMEM and the
    allocation failures cuBLAS and cuDNN report as plain ``RuntimeError``."""
    if isinstance(error, (MemoryError, torch.OutOfMemoryError)):
        return True
    return isinstance(error, RuntimeError) and any(m in str(error).lower() for m in _OOM_MESSAGES)


def first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}".strip()


@dataclass
class ChildOutcome:
    """What came back from an isolated measurement: a status, why, and the sections it finished."""

    status: str  # ok | oom | error
    reason: str = ""
    sections: dict = field(default_factory=dict)


def run_isolated(target: Callable[[dict, dict], None], payload: dict) -> ChildOutcome:
    """Run ``target(payload, sections)`` in a fresh Python process; ``payload`` must be JSON.

    ``target`` is a module-level function, found again in the child by its module and name
    (:func:`target_name`). It fills ``sections`` as it goes; whatever it finished comes back even
    when it fails. A failed allocation comes back as ``oom`` from the child itself; a child killed by
    SIGKILL — what the kernel's out-of-memory killer sends, and it cannot be caught — is reported
    ``oom`` by us.

    The child runs in its own process group, so a Ctrl-C at the terminal reaches only this process,
    which reports it once and ends the child (on any exception while it runs) rather than the child
    printing a traceback of its own. A stop signal is held while the child starts: one inside ``Popen``
    would leave a child without a handle to end it, outliving the run and its payload's folder.
    """
    name = target_name(target)
    with tempfile.TemporaryDirectory(prefix="posbench-") as folder:
        payload_path, outcome_path = Path(folder) / "payload.json", Path(folder) / "outcome.json"
        payload_path.write_text(json.dumps(payload))
        child = None
        try:
            with interrupts_held():  # a signal held here is raised on leaving, once the handle exists
                child = subprocess.Popen([sys.executable, "-m", "posbench.measure", name, str(payload_path),
                                          str(outcome_path)], process_group=0)
            code = child.wait()
        finally:
            if child is not None and child.poll() is None:
                child.kill()
                child.wait()
        if outcome_path.exists():
            return ChildOutcome(**json.loads(outcome_path.read_text()))
    if code == -signal.SIGKILL:
        return ChildOutcome("oom", "the measurement process was killed by SIGKILL, the signal of the "
                                   "kernel's out-of-memory killer (a SIGKILL from elsewhere looks the same)")
    if code < 0:
        return ChildOutcome("error", f"the measurement process died of {signal.Signals(-code).name}")
    return ChildOutcome("error", f"the measurement process exited with code {code} and left no outcome")


def target_name(function: Callable) -> str:
    """``"module:name"`` of a module-level function: what the child imports, derived rather than written
    out, so a moved or renamed function cannot leave a stale string behind."""
    module, name = getattr(function, "__module__", None), getattr(function, "__qualname__", "")
    if module in (None, "__main__") or getattr(sys.modules.get(module), name, None) is not function:
        raise ValueError(f"run_isolated needs a module-level function of an importable module, got {function!r}")
    return f"{module}:{name}"


def _child_main(target: str, payload_path: str, outcome_path: str) -> int:
    """The isolated process: run the target, classify what went wrong, write the outcome atomically."""
    module, function = target.split(":")
    measure = getattr(importlib.import_module(module), function)
    sections: dict = {}
    try:
        measure(json.loads(Path(payload_path).read_text()), sections)
        outcome = ChildOutcome("ok", "", sections)
    except Exception as error:  # noqa: BLE001 - any failure is classified and becomes the outcome
        if is_out_of_memory(error):
            outcome = ChildOutcome("oom", first_line(error), sections)
        else:
            traceback.print_exc()
            outcome = ChildOutcome("error", first_line(error), sections)
    records.write_json(outcome_path, outcome.__dict__)
    return 0


if __name__ == "__main__":
    sys.exit(_child_main(*sys.argv[1:]))
