"""The stopwatch, the memory monitors, NVML matched by UUID, and faults turned into outcomes."""

import math
import os
import signal
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from posbench import faults, measure

CPU = torch.device("cpu")


# ----- latency statistics ----------------------------------------------------------------------
def test_latency_stats_of_known_samples():
    stats = measure.latency_stats([float(x) for x in range(10, 0, -1)])  # 10 … 1, order must not matter
    assert stats["n"] == 10
    assert stats["median_ms"] == pytest.approx(5.5)
    assert stats["p90_ms"] == pytest.approx(9.1)  # rank 0.9 · 9 = 8.1 -> 9 + 0.1 · (10 − 9)
    assert stats["iqr_ms"] == pytest.approx(7.75 - 3.25)
    assert stats["mean_ms"] == pytest.approx(5.5)
    assert stats["stdev_ms"] == pytest.approx(math.sqrt(82.5 / 9))  # sample stdev, n − 1
    assert stats["cv"] == pytest.approx(math.sqrt(82.5 / 9) / 5.5)
    assert (stats["min_ms"], stats["max_ms"]) == (1.0, 10.0)
    assert stats["samples_ms"] == [float(x) for x in range(10, 0, -1)]  # raw samples kept, in order


def test_latency_stats_of_skewed_samples():
    """One slow call among fast ones: the median stays with the fast calls, the mean does not.
    Symmetric samples cannot tell the two apart; these can."""
    samples = [3.0, 100.0, 1.0, 2.0]
    stats = measure.latency_stats(samples)
    assert stats["median_ms"] == pytest.approx(2.5)  # not the mean, 26.5
    assert stats["mean_ms"] == pytest.approx(26.5)
    assert stats["p90_ms"] == pytest.approx(70.9)  # rank 0.9 · 3 = 2.7 -> 3 + 0.7 · (100 − 3)
    assert stats["iqr_ms"] == pytest.approx(27.25 - 1.75)  # ranks 2.25 and 0.75
    stdev = math.sqrt((25.5**2 + 24.5**2 + 23.5**2 + 73.5**2) / 3)  # sample stdev, n − 1
    assert stats["stdev_ms"] == pytest.approx(stdev)
    assert stats["cv"] == pytest.approx(stdev / 26.5)
    assert (stats["n"], stats["min_ms"], stats["max_ms"]) == (4, 1.0, 100.0)
    x = np.array(samples)  # the same figures from numpy, as a second reference
    assert stats["median_ms"] == pytest.approx(np.median(x))
    assert stats["p90_ms"] == pytest.approx(np.percentile(x, 90))
    assert stats["iqr_ms"] == pytest.approx(np.percentile(x, 75) - np.percentile(x, 25))
    assert stats["cv"] == pytest.approx(x.std(ddof=1) / x.mean())


def test_latency_stats_of_one_sample_and_of_none():
    one = measure.latency_stats([4.0])
    assert (one["median_ms"], one["p90_ms"], one["stdev_ms"], one["cv"], one["iqr_ms"]) == (4.0, 4.0, 0.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="at least one sample"):
        measure.latency_stats([])


@pytest.mark.parametrize("samples, stdev, cv", [
    ([1.0, 3.0], math.sqrt(2), math.sqrt(2) / 2),  # two samples have a spread
    ([0.2, 0.4], math.sqrt(0.02), math.sqrt(0.02) / 0.3),  # sub-millisecond calls: CV is still stdev / mean
    ([0.0, 0.0], 0.0, 0.0),  # a clock too coarse to see the call: no spread, not a division by zero
])
def test_latency_spread_of_small_samples(samples, stdev, cv):
    stats = measure.latency_stats(samples)
    assert stats["stdev_ms"] == pytest.approx(stdev) and stats["cv"] == pytest.approx(cv)


def test_mib_is_rounded_to_a_thousandth():
    assert measure.mib(1.23456 * measure.MIB) == 1.235 and measure.mib(3 * measure.MIB) == 3.0


def test_wall_timer_reads_milliseconds_between_two_clock_reads(monkeypatch):
    ticks = iter([10.0, 10.004, 20.0, 20.25])  # seconds, as time.perf_counter gives them
    monkeypatch.setattr(measure, "time", SimpleNamespace(perf_counter=lambda: next(ticks)))
    name, time_step = measure.make_timer(CPU)
    calls = []
    assert name == "perf_counter"
    assert time_step(lambda: calls.append(1)) == pytest.approx(4.0)
    assert time_step(lambda: calls.append(1)) == pytest.approx(250.0)
    assert len(calls) == 2


def test_alternate_goes_on_until_every_step_has_its_seconds_with_one_sample_each_round():
    calls = []
    steps = {"a": lambda: calls.append("a") or time.sleep(0.002), "b": lambda: calls.append("b") or time.sleep(0.005)}
    samples = measure.alternate(steps, rounds=2, warmup=1, min_seconds=0.02)
    n = len(samples["a"])
    assert len(samples["b"]) == n and 2 <= n <= 10  # a sleeps >= 2 ms: 10 of its samples make 20 ms
    sums = [sum(timed) for timed in samples.values()]
    assert min(sums) >= 20 > min(sum(timed[:-1]) for timed in samples.values())  # the first round that has them
    assert calls[:4] == ["a", "b", "a", "b"] and calls[4:6] == ["b", "a"]  # warm-up, then the order rotates
    assert measure.alternate({}, rounds=3, warmup=0) == {}


# ----- CPU memory ------------------------------------------------------------------------------
@pytest.mark.parametrize("platform, factor", [("linux", 1024), ("darwin", 1)])
def test_ru_maxrss_units(monkeypatch, platform, factor):
    monkeypatch.setattr(measure.sys, "platform", platform)
    monkeypatch.setattr(measure.resource, "getrusage", lambda who: SimpleNamespace(ru_maxrss=3000))
    assert measure.ru_maxrss_bytes() == 3000 * factor


def _hold_200_mib():
    block = torch.ones(200 * measure.MIB // 4)  # float32, every page touched
    time.sleep(0.05)  # long enough for the 1 ms sampler to see it
    del block


@pytest.mark.parametrize("high_water_mark", [True, False], ids=["VmHWM", "sampled"])
def test_cpu_monitor_sees_a_200_mib_peak(monkeypatch, high_water_mark):
    if not high_water_mark:
        monkeypatch.setattr(measure, "reset_rss_high_water_mark", lambda: False)
    with measure.CpuMemoryMonitor() as monitor:
        _hold_200_mib()
    result = monitor.result()
    assert ("VmHWM" in result["method"]) == high_water_mark
    assert 195 <= result["above_baseline_mib"] <= 240
    assert result["peak_mib"] == pytest.approx(result["baseline_mib"] + result["above_baseline_mib"], abs=1e-2)
    assert result["samples"] > 10 and 195 <= result["sampled_peak_mib"] - result["baseline_mib"] <= 240


def test_cpu_monitor_without_proc_falls_back_to_ru_maxrss(monkeypatch):
    """macOS: no /proc, so no baseline, no samples, no reset; the whole process's peak is all there is."""
    monkeypatch.setattr(measure, "current_rss_bytes", lambda: None)
    monkeypatch.setattr(measure, "ru_maxrss_bytes", lambda: 300 * measure.MIB)
    monkeypatch.setattr(measure, "rss_high_water_mark_bytes", lambda: pytest.fail("VmHWM read without a reset"))
    with measure.CpuMemoryMonitor() as monitor:
        time.sleep(0.01)
    assert monitor.result() == {
        "method": "ru_maxrss (peak of the whole process, build included)", "baseline_mib": 0.0, "peak_mib": 300.0,
        "above_baseline_mib": 300.0, "sampled_peak_mib": None, "samples": 0, "sample_interval_ms": None,
        "ru_maxrss_mib": 300.0}


def test_cpu_monitor_sampling_only_reports_its_interval(monkeypatch):
    monkeypatch.setattr(measure, "reset_rss_high_water_mark", lambda: False)
    with measure.CpuMemoryMonitor() as monitor:
        time.sleep(0.05)
    result = monitor.result()
    assert result["method"] == "/proc/self/statm sampled every 1 ms"
    assert result["sample_interval_ms"] == pytest.approx(monitor.elapsed_s * 1e3 / result["samples"])
    assert 50 <= monitor.elapsed_s * 1e3 < 1000 and result["sample_interval_ms"] >= 1.0
    assert result["peak_mib"] == result["sampled_peak_mib"]


def test_cpu_monitor_peak_is_at_least_each_of_its_lower_bounds(monkeypatch):
    """A high-water mark read under the entry RSS or a sample (RSS handed back by madvise, which the kernel's
    mark does not see) gives way to the larger: the block's peak is at least each of them."""
    rss = iter([500 * measure.MIB] + [520 * measure.MIB] * 10_000)  # the entry, then every sample
    monkeypatch.setattr(measure, "current_rss_bytes", lambda: next(rss))
    monkeypatch.setattr(measure, "reset_rss_high_water_mark", lambda: True)
    monkeypatch.setattr(measure, "rss_high_water_mark_bytes", lambda: 499 * measure.MIB)
    with measure.CpuMemoryMonitor() as monitor:
        time.sleep(0.01)
    result = monitor.result()
    assert (result["baseline_mib"], result["peak_mib"], result["above_baseline_mib"]) == (500.0, 520.0, 20.0)
    monkeypatch.setattr(measure, "rss_high_water_mark_bytes", lambda: 600 * measure.MIB)
    with measure.CpuMemoryMonitor() as monitor:
        pass
    assert monitor.result()["peak_mib"] == 600.0


def test_rss_high_water_mark_reads_kib(monkeypatch):
    status = "Name:\tpython\nVmPeak:\t  9000 kB\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\n"
    monkeypatch.setattr(measure, "Path", lambda path: SimpleNamespace(read_text=lambda: status))
    assert measure.rss_high_water_mark_bytes() == 2048 * 1024


def test_refused_high_water_mark_reset_says_so(monkeypatch):
    def refuse(text):
        raise PermissionError("clear_refs")

    monkeypatch.setattr(measure, "Path", lambda path: SimpleNamespace(write_text=refuse))
    assert measure.reset_rss_high_water_mark() is False


def test_cpu_monitor_of_idle_work_stays_near_baseline():
    with measure.CpuMemoryMonitor() as monitor:
        time.sleep(0.02)
    assert monitor.result()["above_baseline_mib"] < 10


# ----- NVML, matched by UUID ------------------------------------------------------------------
class FakeNvml:
    """Two GPUs as NVML numbers them; this process holds memory on both, different amounts."""

    class NVMLError(Exception):
        pass

    def __init__(self, init_error=None):
        self.init_error = init_error
        self.devices = [
            {"uuid": "GPU-aaaa0000-0000", "procs": {os.getpid(): 111 * measure.MIB, 1: 5 * measure.MIB}, "used": 900},
            {"uuid": b"GPU-BBBB1111-1111", "procs": {os.getpid(): 222 * measure.MIB}, "used": 800},
        ]
        self.shut_down = False

    def nvmlInit(self):
        if self.init_error:
            raise self.init_error

    def nvmlShutdown(self):
        self.shut_down = True

    def nvmlDeviceGetCount(self):
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, index):
        return self.devices[index]

    def nvmlDeviceGetUUID(self, handle):
        return handle["uuid"]

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        return [SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, used in handle["procs"].items()]

    def nvmlDeviceGetMemoryInfo(self, handle):
        return SimpleNamespace(used=handle["used"] * measure.MIB)

    def nvmlSystemGetDriverVersion(self):
        return "550.54.15"


def test_nvml_matches_the_device_by_uuid_not_index():
    # torch calls it device 0 (CUDA_VISIBLE_DEVICES=1), NVML calls it device 1
    fake = FakeNvml()
    nvml = measure.Nvml("bbbb1111-1111", nvml=fake)
    assert nvml.available and nvml.reason == "" and nvml.driver_version() == "550.54.15"
    assert nvml.process_bytes() == 222 * measure.MIB
    memory = measure.nvml_memory(nvml, context_bytes=200 * measure.MIB)
    assert memory == {"available": True, "reason": "", "device_uuid": "bbbb1111-1111", "context_mib": 200.0,
                      "process_mib": 222.0, "above_context_mib": 22.0, "device_used_mib": 800.0}
    nvml.close()
    assert fake.shut_down


def test_nvml_process_missing_from_its_list():
    fake = FakeNvml()
    fake.devices[0]["procs"] = {1: 5 * measure.MIB}  # e.g. host PIDs seen from inside a container
    memory = measure.nvml_memory(measure.Nvml("GPU-AAAA0000-0000", nvml=fake), context_bytes=None)
    assert memory["available"] and memory["process_mib"] is None and memory["above_context_mib"] is None
    assert "not in NVML's list" in memory["reason"] and memory["device_used_mib"] == 900.0


def test_nvml_other_process_bytes_driver_bytes_and_no_context():
    fake = FakeNvml()
    fake.nvmlSystemGetDriverVersion = lambda: b"535.104.05"  # older bindings return bytes
    nvml = measure.Nvml("aaaa0000-0000", nvml=fake)
    assert nvml.driver_version() == "535.104.05"
    assert nvml.process_bytes(1) == 5 * measure.MIB and nvml.process_bytes(2) is None
    memory = measure.nvml_memory(nvml, context_bytes=None)  # no idle context read: no difference to report
    assert memory["process_mib"] == 111.0 and memory["context_mib"] is None and memory["above_context_mib"] is None


def test_nvml_error_while_looking_up_devices():
    fake = FakeNvml()

    def broken():
        raise FakeNvml.NVMLError("GPU is lost")

    fake.nvmlDeviceGetCount = broken
    nvml = measure.Nvml("aaaa0000-0000", nvml=fake)
    assert not nvml.available and nvml.reason == "NVML error while looking up devices: GPU is lost"


def test_nvml_skips_a_device_it_may_not_read_and_finds_the_next():
    """A cgroup-restricted GPU raises NO_PERMISSION during the scan; the lookup goes on to the others."""
    fake = FakeNvml()
    by_index = fake.nvmlDeviceGetHandleByIndex

    def restricted(index):
        if index == 0:
            raise FakeNvml.NVMLError("Insufficient Permissions")
        return by_index(index)

    fake.nvmlDeviceGetHandleByIndex = restricted
    nvml = measure.Nvml("bbbb1111-1111", nvml=fake)
    assert nvml.available and nvml.process_bytes() == 222 * measure.MIB


def test_nvml_finds_a_mig_instance_by_its_uuid_without_scanning():
    fake = FakeNvml()
    mig = {"uuid": "MIG-cccc2222-2222", "procs": {os.getpid(): 33 * measure.MIB}, "used": 40}
    asked = []

    def by_uuid(uuid):
        asked.append(uuid)
        if uuid != mig["uuid"]:
            raise FakeNvml.NVMLError("Not Found")
        return mig

    def no_scan():
        raise AssertionError("the lookup by UUID should have found it")

    fake.nvmlDeviceGetHandleByUUID, fake.nvmlDeviceGetCount = by_uuid, no_scan
    nvml = measure.Nvml("cccc2222-2222", nvml=fake)  # torch's form of a MIG instance's UUID
    assert asked == ["GPU-cccc2222-2222", "MIG-cccc2222-2222"]
    assert nvml.available and measure.nvml_memory(nvml, None)["process_mib"] == 33.0


def test_an_nvml_call_that_fails_after_the_lookup_costs_only_its_figure():
    fake = FakeNvml()

    def lost(handle):
        raise FakeNvml.NVMLError("GPU is lost")

    fake.nvmlDeviceGetMemoryInfo = fake.nvmlDeviceGetComputeRunningProcesses = lost
    fake.nvmlSystemGetDriverVersion = lambda: (_ for _ in ()).throw(FakeNvml.NVMLError("Unknown Error"))
    nvml = measure.Nvml("aaaa0000-0000", nvml=fake)
    memory = measure.nvml_memory(nvml, context_bytes=None)
    assert memory["available"] and memory["process_mib"] is None and memory["device_used_mib"] is None
    assert nvml.driver_version() is None


def test_nvml_unknown_uuid_and_missing_library():
    assert measure.Nvml("cccc", nvml=FakeNvml()).reason == "no NVML device has UUID cccc"
    pynvml = pytest.importorskip("pynvml")
    missing = measure.Nvml("aaaa", nvml=FakeNvml(init_error=pynvml.NVMLError_LibraryNotFound()))
    assert not missing.available
    assert measure.nvml_memory(missing, None) == {
        "available": False, "reason": "NVML unavailable: NVMLError_LibraryNotFound: NVML Shared Library Not Found"}


def test_real_pynvml_without_a_driver_is_unavailable_not_a_crash():
    pynvml = pytest.importorskip("pynvml")
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        pass
    else:
        pynvml.nvmlShutdown()
        pytest.skip("this machine has a working NVML")
    nvml = measure.Nvml("aaaa")
    assert not nvml.available and nvml.reason.startswith("NVML unavailable: NVMLError")


# ----- faults ----------------------------------------------------------------------------------
@pytest.mark.parametrize("error, oom", [
    (MemoryError(), True),
    (torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"), True),
    (RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 4294967296 bytes."), True),
    (RuntimeError("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"), True),
    (RuntimeError("cuDNN error: CUDNN_STATUS_ALLOC_FAILED"), True),
    (RuntimeError("cuDNN error: CUDNN_STATUS_NOT_SUPPORTED"), False),
    (RuntimeError("mat1 and mat2 shapes cannot be multiplied"), False),
    (ValueError("out of memory"), False),  # only runtime errors carry allocator messages
])
def test_is_out_of_memory(error, oom):
    assert measure.is_out_of_memory(error) is oom


# Targets for run_isolated: run in a child that imports this file (PYTHONPATH set below).
def finish_one_section_then_fail(payload, sections):
    sections["first"] = payload["value"]
    raise KeyError("second")


def finish_one_section_then_get_killed(payload, sections):
    sections["first"] = payload["value"]
    os.kill(os.getpid(), signal.SIGKILL)  # what the kernel's OOM killer does


def get_terminated(payload, sections):
    os.kill(os.getpid(), signal.SIGTERM)  # e.g. a scheduler's time limit


def exit_without_an_outcome(payload, sections):
    os._exit(3)


def exit_0_without_an_outcome(payload, sections):
    sys.exit(0)  # SystemExit is no Exception: the child ends before it writes an outcome


@pytest.fixture
def importable_tests(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")]))


def test_run_isolated_error_keeps_finished_sections(importable_tests, capfd):
    outcome = measure.run_isolated(finish_one_section_then_fail, {"value": 7})
    assert outcome == measure.ChildOutcome("error", "KeyError: 'second'", {"first": 7})
    assert "Traceback" in capfd.readouterr().err  # the child's traceback reaches the log


def test_run_isolated_sigkill_is_oom(importable_tests):
    outcome = measure.run_isolated(finish_one_section_then_get_killed, {"value": 7})
    assert outcome.status == "oom" and "SIGKILL" in outcome.reason
    assert outcome.sections == {}  # a killed process sends nothing back


def sleep_a_minute(payload, sections):
    time.sleep(60)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_signal_while_the_child_starts_ends_the_child_too(importable_tests, monkeypatch, signum):
    """The signal arrives inside ``Popen``, after the fork and before the handle returns (a Ctrl-C at that
    moment once left a child that outlived the run and read a payload already removed): the run stops with
    Interrupted just after, and the child is ended and reaped, not left running."""
    started = []
    real_popen = measure.subprocess.Popen

    def popen_then_signal(*args, **kwargs):
        started.append(real_popen(*args, **kwargs))
        os.kill(os.getpid(), signum)  # delivered before Popen returns its handle
        return started[0]

    monkeypatch.setattr(measure.subprocess, "Popen", popen_then_signal)
    with faults.signals_interrupt(), pytest.raises(faults.Interrupted) as stop:
        measure.run_isolated(sleep_a_minute, {})
    assert stop.value.signum == signum
    assert started[0].returncode == -signal.SIGKILL  # ended and reaped within the second, not after its minute


def test_run_isolated_derives_the_target_and_refuses_what_a_child_cannot_import():
    assert measure.target_name(finish_one_section_then_fail) == f"{__name__}:finish_one_section_then_fail"
    assert measure.target_name(measure.latency_stats) == "posbench.measure:latency_stats"

    def nested(payload, sections):
        pass

    for unreachable in (nested, lambda payload, sections: None):
        with pytest.raises(ValueError, match="module-level function"):
            measure.run_isolated(unreachable, {})
@pytest.mark.parametrize("target, reason", [
    ("get_terminated", "the measurement process died of SIGTERM"),
    ("exit_without_an_outcome", "the measurement process exited with code 3 and left no outcome"),
    ("exit_0_without_an_outcome", "the measurement process exited with code 0 and left no outcome"),
])
def test_run_isolated_other_deaths_are_errors_not_oom(importable_tests, target, reason):
    assert measure.run_isolated(globals()[target], {}) == measure.ChildOutcome("error", reason)


def test_nvml_clocks_and_power_each_guarded():
    fake = FakeNvml()
    fake.NVML_CLOCK_SM, fake.NVML_CLOCK_MEM = 1, 2
    fake.nvmlDeviceGetClockInfo = lambda handle, kind: {1: 1410, 2: 1593}[kind]
    fake.nvmlDeviceGetPowerManagementLimit = lambda handle: 400_000  # milliwatts

    def refused(handle, kind):
        raise FakeNvml.NVMLError("Not Supported")

    fake.nvmlDeviceGetMaxClockInfo = refused
    values = measure.Nvml("aaaa0000-0000", nvml=fake).clocks_and_power()
    assert values == {"sm_clock_mhz": 1410, "sm_clock_max_mhz": None, "memory_clock_mhz": 1593, "power_limit_w": 400.0}
    assert measure.Nvml("cccc", nvml=fake).clocks_and_power() == {}
