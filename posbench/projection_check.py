"""The projection's check on this machine: the cost model of :mod:`posbench.projection`, given this CPU's
measured GEMM rate and memory bandwidth and a fitted per-operation overhead, predicts the measured
forward latencies of posbench's own model (``cost.csv`` of a run's tables, size ``base``).

The rates are measured here, now (:func:`measure_rates`: a square fp32 matmul and a copy of a buffer
larger than the caches, at the threads the cells ran with), each the fastest of many short calls: what
the machine can do, which the roofline asks for. On a machine shared with other jobs a median, or a few
long calls, carries the load of the moment into the rate; the fastest of hundreds of millisecond calls is one
that found the cores free.
The overhead is fitted on the shortest length measured only (least squares of the measured minus the
roofline time over the operations' launches), so the longer lengths the check judges are predicted, not
fitted. The check passes when every encoding's predicted prefill at L >= :data:`JUDGED_FROM` lies within
:data:`BOUNDS` of the measured one. The reference tables' latencies are medians taken while the machine
was quieter; the header of the check says the load when it ran.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch

from posbench import projection
from posbench.bench.base import matmul_step
from posbench.devices import FLOAT32
from posbench.machine import cpu_model
from posbench.records import write_atomically

SIZE = "base"
JUDGED_FROM = 1024  # the check judges lengths >= this; the shortest length measured fits the overhead
BOUNDS = (0.5, 2.0)  # predicted / measured
GEMM_SIZE, GEMM_REPEATS = 512, 400  # a square fp32 matmul of 2·n³ FLOPs: about 1 ms
COPY_BYTES, COPY_REPEATS = 64 * 2**20, 100  # read and written: 128 MiB, beyond the caches; about 2 ms


@dataclass(frozen=True)
class Measured:
    gemm_flops: float
    bandwidth: float
    threads: int


def _fastest_seconds(step, repeats: int) -> float:
    step()  # warm-up
    samples = []
    for _ in range(repeats):
        began = time.perf_counter()
        step()
        samples.append(time.perf_counter() - began)
    return min(samples)


def measure_rates(threads: int) -> Measured:
    """This CPU's fp32 GEMM rate (FLOP/s) and copy bandwidth (bytes read + written per second) at ``threads``."""
    torch.set_num_threads(threads)
    matmul, matmul_flops = matmul_step(GEMM_SIZE)
    source, target = torch.ones(COPY_BYTES // 4), torch.empty(COPY_BYTES // 4)
    copy_s = _fastest_seconds(lambda: target.copy_(source), COPY_REPEATS)
    return Measured(matmul_flops / _fastest_seconds(matmul, GEMM_REPEATS), 2 * COPY_BYTES / copy_s, threads)


def measured_cells(tables: Path) -> pd.DataFrame:
    """The ``base`` forward latencies of ``cost.csv``: encoding, seq_len, threads, latency_median_ms."""
    cost = pd.read_csv(Path(tables) / "cost.csv")
    chosen = cost[(cost["status"] == "ok") & (cost["size"] == SIZE) & (cost["mode"] == "infer")
                  & (cost["batch"] == 1) & (cost["dtype"] == FLOAT32)]
    if chosen.empty:
        raise ValueError(f"{tables}/cost.csv has no ok {SIZE} infer cell at batch 1 in {FLOAT32}")
    return chosen[["encoding", "seq_len", "threads", "latency_median_ms"]].reset_index(drop=True)


def roofline(cells: pd.DataFrame, rates: projection.Rates) -> pd.DataFrame:
    """Each cell's roofline seconds without overhead and its launches."""
    arch = projection.posbench_architecture(SIZE)
    rows = []
    for cell in cells.itertuples(index=False):
        work = projection.position_work(cell.encoding, arch, int(cell.seq_len))
        ops = projection.prefill_ops(arch, work, int(cell.seq_len), FLOAT32)
        rows.append({"roofline_ms": projection.roofline_seconds(ops, rates)["total"] * 1e3,
                     "launches": projection.launches(ops)})
    return pd.concat([cells, pd.DataFrame(rows)], axis=1)


def fit_overhead(cells: pd.DataFrame) -> float:
    """Seconds per operation: least squares of (measured − roofline) over launches at the shortest length,
    not below 0."""
    shortest = cells[cells["seq_len"] == cells["seq_len"].min()]
    residual_s = (shortest["latency_median_ms"] - shortest["roofline_ms"]) / 1e3
    return max(0.0, float((residual_s * shortest["launches"]).sum() / (shortest["launches"] ** 2).sum()))


def check(tables: Path, measured: Measured) -> tuple[pd.DataFrame, float]:
    """Predicted against measured, per cell, and the fitted overhead (seconds per operation)."""
    cells = roofline(measured_cells(tables), projection.Rates(measured.gemm_flops, measured.bandwidth))
    overhead = fit_overhead(cells)
    cells["predicted_ms"] = cells["roofline_ms"] + cells["launches"] * overhead * 1e3
    cells["ratio"] = cells["predicted_ms"] / cells["latency_median_ms"]
    cells["judged"] = cells["seq_len"] >= JUDGED_FROM
    cells["within"] = cells["ratio"].between(*BOUNDS)
    cells["label"] = projection.PROJECTED
    return cells.rename(columns={"latency_median_ms": "measured_ms"}), overhead


def passes(cells: pd.DataFrame) -> bool:
    return bool(cells.loc[cells["judged"], "within"].all())


def report(cells: pd.DataFrame, overhead: float, measured: Measured, tables: Path) -> str:
    """The text of the check: the rates, the fit, then predicted / measured per encoding and length."""
    judged = cells[cells["judged"]]
    off = judged[~judged["within"]]
    worst = judged.loc[(judged["ratio"].apply(lambda r: max(r, 1 / r))).idxmax()]
    ratios = cells.pivot_table(index="encoding", columns="seq_len", values="ratio")
    lines = [
        f"posbench projection check ({projection.PROJECTED} against measured) — {cpu_model()}, "
        f"{measured.threads} threads, torch {torch.__version__}, load average "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end; a machine shared with other jobs "
        f"(the measured tables' too: {tables})",
        f"rates measured here: fp32 GEMM {GEMM_SIZE}x{GEMM_SIZE} {measured.gemm_flops / 1e9:.1f} GFLOP/s (fastest of "
        f"{GEMM_REPEATS}), copy {COPY_BYTES // 2**20} MiB {measured.bandwidth / 1e9:.1f} GB/s read + written (fastest "
        f"of {COPY_REPEATS}); per-operation overhead "
        f"fitted at L={cells['seq_len'].min()}: {overhead * 1e6:.1f} µs",
        f"pass when predicted/measured lies in [{BOUNDS[0]:g}, {BOUNDS[1]:g}] for every encoding at L >= "
        f"{JUDGED_FROM}: {'PASS' if passes(cells) else 'FAIL'}"
        f" ({len(judged) - len(off)} of {len(judged)} cells within; the furthest: {worst.encoding} at "
        f"L={worst.seq_len}, {worst.ratio:.2f})",
        where_off(cells),
        "",
        "predicted / measured (prefill, one forward):",
        ratios.to_string(float_format=lambda x: f"{x:.2f}"),
        "",
        "per cell (ms):",
        cells[["encoding", "seq_len", "measured_ms", "roofline_ms", "launches", "predicted_ms", "ratio"]]
        .to_string(index=False, float_format=lambda x: f"{x:.3g}"),
    ]
    if not off.empty:
        lines += ["", "off: " + "; ".join(f"{c.encoding} L={c.seq_len} {c.ratio:.2f}" for c in off.itertuples())]
    return "\n".join(lines) + "\n"


def where_off(cells: pd.DataFrame) -> str:
    """Where the prediction is off, in words: its median ratio over the judged cells and by length."""
    judged = cells[cells["judged"]]
    by_length = judged.groupby("seq_len")["ratio"].median()
    median = judged["ratio"].median()
    direction = "under" if median < 1 else "over"
    width = projection.posbench_architecture(SIZE).hidden_size
    reason = (f" (the roofline credits every matmul of d={width} and the attention with the square matmul's "
              "rate; at the shortest length the fitted overhead takes up the difference)" if median < 1 else "")
    return (f"where it is off: the median ratio at L >= {JUDGED_FROM} is {median:.2f} ("
            + ", ".join(f"L={length}: {ratio:.2f}" for length, ratio in by_length.items())
            + f"): the roofline {direction}-predicts, the forward running at {median:.0%} of the speed the "
            f"measured rates allow{reason}")


def write(tables: Path, out: Path, threads: int | None = None) -> tuple[list[Path], bool]:
    """Run the check on ``tables`` and write ``check.csv`` and ``check.txt`` to ``out`` (atomically)."""
    cells = measured_cells(tables)
    measured = measure_rates(threads or int(cells["threads"].iloc[0]))
    result, overhead = check(tables, measured)
    text = report(result, overhead, measured, tables)
    out.mkdir(parents=True, exist_ok=True)
    frame = result.assign(gemm_gflops=measured.gemm_flops / 1e9, bandwidth_gbs=measured.bandwidth / 1e9,
                          op_overhead_us=overhead * 1e6)
    written = [write_atomically(out / "check.csv", lambda file: frame.to_csv(file, index=False)),
               write_atomically(out / "check.txt", lambda file: file.write(text.encode()))]
    print(text, end="")
    return written, passes(result)
