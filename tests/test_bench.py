"""The bench: every registered encoding is timed against a declared target or left out for a declared
reason; its parts' rows are the numbers they say (timings are never asserted); the train part's steps are
fit's, its FLOPs the analytic train count, its breakdown whole; and the speed-up the train part led to leaves
training bit for bit as it was."""

import argparse
import concurrent.futures
import io
import json
import multiprocessing
import os
import signal
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import yaml

from posbench import encodings, measure, model
from posbench.__main__ import main
from posbench.bench import (
    attention_paths,
    base,
    decode_overhead,
    encoding_overhead,
    longest_length,
    machine_limit,
    suite,
    targets,
    train_throughput,
    transformers_peer,
    x_transformers_peer,
)
from posbench.cli import bench as bench_cli
from posbench.flops import analytic_flops
from posbench.sizes import non_embedding_params
from posbench.train import TrainConfig, deterministic, fit, initial_model, resolve

ROOT = Path(__file__).resolve().parents[1]


# ----- what is timed, against which target -------------------------------------------------------
def test_every_registered_encoding_is_declared_timed_or_not():
    missing = sorted(set(encodings.names()) - set(targets.DECLARED))
    assert not missing, f"declare a target or the reason it is not timed in posbench/bench/targets.py: {missing}"
    assert sorted(targets.DECLARED) == encodings.names()  # and nothing the registry lacks
    reasons = {name: row for name, row in targets.DECLARED.items() if isinstance(row, str)}
    assert all(reason.strip() for reason in reasons.values())
    timed = targets.timed()
    assert len(timed) == 21 and len(reasons) == 15 and set(timed) | set(reasons) == set(encodings.names())
    assert next(iter(timed)) == "none" and timed["none"] == targets.REFERENCE
    assert (timed["rope"].overhead, timed["alibi"].overhead, timed["fire"].overhead) == (1.05, 1.25, 2.0)
    assert (timed["rope"].decode, timed["alibi"].decode, timed["fire"].decode) == (1.10, 1.10, 2.0)
    assert timed["pope"] == targets.Targets(2.0, 1.5)
    assert timed["irope"] == timed["rnope_swa"] == targets.Targets(1.25, 1.10)
    assert targets.notes() == ["not timed: " + "; ".join(f"{name} ({reasons[name]})" for name in sorted(reasons))]


def test_every_timed_encoding_builds_as_the_bench_model():
    for name in targets.timed():
        tokens = torch.randint(0, 256, (1, 16))
        assert base.posbench_model(name, 16)(tokens).shape == (1, 16, 256), name


def test_an_encoding_the_table_does_not_know_is_timed_without_a_target(monkeypatch):
    registered = encodings.names()
    monkeypatch.setattr(encodings, "names", lambda: sorted([*registered, "plugin_bias"]))
    timed = targets.timed()
    assert list(timed)[-1] == "plugin_bias" and timed["plugin_bias"] == targets.Targets(None, None)
    assert targets.notes()[-1] == ("no declared target (timed, not judged; add it to posbench.bench.targets): "
                                   "plugin_bias")


def test_the_suite_runs_every_part_by_its_name():
    assert tuple(suite.PART_FUNCTIONS) == base.PARTS == base.BenchOptions().parts


def test_overhead_judges_each_timed_encoding_by_its_declared_target(monkeypatch, tmp_path):
    monkeypatch.setattr(encoding_overhead, "SEQ_LEN", 16)
    monkeypatch.setattr(targets, "timed", lambda: {"none": targets.REFERENCE, "rope": targets.VECTOR_OR_ROTATION,
                                                   "fire": targets.UNDECLARED})
    result = encoding_overhead.run(base.BenchOptions(parts=("overhead",), rounds=2, warmup=0), tmp_path)
    judged = {row.item: row for row in result.rows if row.metric == "paired ratio"}
    assert {item: row.target for item, row in judged.items()} == {"none": "", "rope": "<= 1.05", "fire": ""}
    assert judged["rope"].meets == (judged["rope"].value <= 1.05) and judged["fire"].meets is None
    rope, none = result.samples["rope"], result.samples["none"]
    assert judged["rope"].value == base.median([a / b for a, b in zip(rope, none)])
    ratio = next(row for row in result.rows if row.item == "rope" and row.metric == "ratio")
    assert ratio.value == base.median(rope) / base.median(none) and ratio.target == ""
    assert result.notes[-1:] == targets.notes()  # after any profile of a miss


# ----- a part over fresh processes -------------------------------------------------------------------
def test_across_processes_judges_the_median_and_shows_each_run():
    def run(ratio, path, samples):
        rows = [base.Row("decode", "rope C=1024", "paired ratio", ratio, "x", "<= 1.1", ratio <= 1.1),
                base.Row("decode", "rope C=1024", "path", path)]
        return base.PartResult("decode", rows, ["a note"], {"rope": samples})

    result = suite.across_processes({1: run(1.109, "relative", [1.0]), 2: run(1.05, "other", [2.0]),
                                     3: run(1.07, "x", [3.0])})
    rows = {row.metric: row for row in result.rows}
    assert result.title == "decode; each figure the median of 3 fresh processes" and result.notes == ["a note"]
    judged = rows["paired ratio"]
    assert (judged.value, judged.target, judged.meets) == (1.07, "<= 1.1", True)
    assert rows["paired ratio per process"].value == "1.109 1.050 1.070"
    assert rows["path"].value == "relative | other | x" and rows["path"].meets is None  # each, as they differ
    assert result.samples == {"process 1: rope": [1.0], "process 2: rope": [2.0], "process 3: rope": [3.0]}
    assert suite.across_processes({1: run(1.2, "", []), 2: run(1.11, "", [])}).rows[0].meets is False
    assert base.rejudged(">= 2", 2.0) is True and base.rejudged("", 9.0) is None


def test_across_processes_keeps_the_rows_only_some_runs_gave():
    """The scale part stops where each process's own time estimate says: a length one process reached and another
    did not is kept in its place, its median over the runs that gave it, each run's value beside it; the longest length
    is one a process reached (the lower middle one); a note is named by the process that gave it (process 1
    died here: the others keep their numbers)."""
    def run(latencies, stopped):
        rows = [base.Row("scale", f"rope L={n}", "latency", ms, "ms") for n, ms in latencies.items()]
        return base.PartResult("scale", rows + [base.Row("scale", "rope", "longest L", max(latencies), "tokens"),
                                                base.Row("scale", "rope", "stopped", stopped)])

    runs = {2: run({1024: 10.0}, "L=2048: not run"), 3: run({1024: 12.0, 2048: 40.0}, "done")}
    runs[2].notes, runs[3].notes = ["missed its target: profile in p2", "timed: rope", "timed: rope"], ["timed: rope"]
    result = suite.across_processes(runs)
    assert result.notes == ["process 2: missed its target: profile in p2", "timed: rope"]
    assert [(row.item, row.metric, row.value) for row in result.rows] == [
        ("rope L=1024", "latency", 11.0), ("rope L=2048", "latency", 40.0),
        ("rope L=2048", "latency per process", "— 40.000"), ("rope", "longest L", 1024),
        ("rope", "stopped", "L=2048: not run | done")]
    runs[2].rows.append(runs[2].rows[0])
    with pytest.raises(ValueError, match=r"^bench part scale gave 'rope L=1024' 'latency' twice in one process$"):
        suite.across_processes(runs)


def test_a_killed_process_leaves_the_others_figures(tmp_path):
    """A process killed mid-part (the kernel's out-of-memory killer) ends its pool, not the bench: the figures
    are the other processes' and a note says which died."""
    options = base.BenchOptions(parts=("decode",), rounds=1, warmup=0, decode_contexts=(256,), processes=2,
                                threads=1)
    with concurrent.futures.ThreadPoolExecutor(1) as thread:
        running = thread.submit(suite.run_part, "decode", options, tmp_path)
        while not multiprocessing.active_children():
            time.sleep(0.01)
        os.kill(multiprocessing.active_children()[0].pid, signal.SIGKILL)
        result = running.result(timeout=600)
    assert result.title.endswith("the median of 1 fresh processes")
    assert result.notes[-1].startswith("process 1 of 2 died before it returned")
    assert result.samples and all(name.startswith("process 2: ") for name in result.samples)
    assert next(row for row in result.rows if row.metric == "paired ratio per process").value.count(" ") == 0


def test_each_finished_part_is_written_before_the_next_runs(tmp_path, monkeypatch):
    """A bench stopped in its second part keeps the first's rows, table and samples."""
    def first(options, out):
        rows = [base.Row("overhead", "rope", "paired ratio", 1.02, "x")]
        return base.PartResult("overhead", rows, [], {"rope": [3.5]})

    def second(options, out):
        raise KeyboardInterrupt

    monkeypatch.setitem(suite.PART_FUNCTIONS, "overhead", first)
    monkeypatch.setitem(suite.PART_FUNCTIONS, "decode", second)
    with pytest.raises(KeyboardInterrupt):
        suite.run_bench(base.BenchOptions(parts=("overhead", "decode"), threads=1), tmp_path)
    assert (tmp_path / "bench.csv").read_text().splitlines()[1] == "overhead,rope,paired ratio,1.02,x,,"
    assert "\n\noverhead\n" in (tmp_path / "bench.txt").read_text()
    assert json.loads((tmp_path / "samples.json").read_text())["samples_ms"] == {"overhead": {"rope": [3.5]}}


def test_a_part_runs_in_fresh_processes_and_reports_their_median(tmp_path):
    """Each process times every encoding against none (its own models, nothing shared): the judged figure is
    the median of the processes' paired ratios, each of which stands beside it."""
    options = base.BenchOptions(parts=("decode",), rounds=1, warmup=0, decode_contexts=(1024,), processes=2,
                                threads=1)
    result = suite.run_part("decode", options, tmp_path)
    rows = {(row.item, row.metric): row for row in result.rows}
    each = [float(v) for v in rows["alibi C=1024", "paired ratio per process"].value.split()]
    assert len(each) == 2 and rows["alibi C=1024", "paired ratio"].value == pytest.approx(sum(each) / 2, abs=1e-3)
    assert rows["alibi C=1024", "paired ratio"].target == "<= 1.1"
    assert {"process 1: alibi@1024", "process 2: alibi@1024"} <= set(result.samples)


# ----- shared helpers, scale, the command line -----------------------------------------------------
def test_alternate_rotates_the_order_and_counts_calls():
    calls = []
    steps = {name: (lambda name=name: calls.append(name)) for name in "abc"}
    samples = measure.alternate(steps, rounds=3, warmup=2)
    assert calls == list("aabbcc") + list("abc") + list("bca") + list("cab")
    assert {name: len(s) for name, s in samples.items()} == {"a": 3, "b": 3, "c": 3}


def test_text_table_pivots_rows_with_targets():
    result = base.PartResult("overhead", [base.Row("overhead", "rope", "median", 12.345, "ms"),
                                          base.Row("overhead", "rope", "ratio", 1.07, "x", "<= 1.05", False)])
    lines = suite.text_table(result).splitlines()
    assert lines[0] == "overhead"
    assert lines[1].split() == ["median", "ratio", "target", "met"]
    assert lines[2].split() == ["rope", "12.3", "ms", "1.07", "<=", "1.05", "NO"]


def test_scale_point_reports_path_memory_and_latency():
    sections = {}
    longest_length.scale_point({"encoding": "alibi", "seq_len": 32, "threads": 1, "point_seconds": 0.0}, sections)
    assert sections["path"] == "relative"
    assert sections["peak_mib"] >= sections["baseline_mib"] > 0
    assert sections["latency_n"] == 0 and sections["latency_ms"] == sections["first_call_ms"] > 0


@pytest.mark.parametrize("argv,message", [
    (["--parts", "overhead,speed"],
     "'speed' is not allowed; allowed: one or more of paths, overhead, peer, limit, scale, decode, decode_peer, "
     "train, comma-separated"),
    (["--scale-max-len", "3000"], "'3000' is not allowed; allowed: a power of two >= 1024"),
    (["--rounds", "0"], "'0' is not allowed; allowed: a positive integer"),
    (["--train-sizes", "tiny,huge"], "argument --train-sizes: 'huge' is not allowed; allowed: one or more of micro"),
    (["--train-tasks", "lm_poetry"], "argument --train-tasks: 'lm_poetry' is not allowed; allowed: one or more of")])
def test_bench_arguments_fail_in_one_line(argv, message, capsys):
    with pytest.raises(SystemExit) as stop:
        main(["bench", *argv])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_decode_part_times_each_encoding_against_none_at_each_context(monkeypatch, tmp_path):
    monkeypatch.setattr(targets, "timed", lambda: {"none": targets.REFERENCE, "alibi": targets.LOGIT_BIAS})
    monkeypatch.setattr(decode_overhead, "JUDGED_FROM", 32)  # 16 cached tokens: reported, not judged
    options = base.BenchOptions(parts=("decode",), rounds=2, warmup=0, decode_contexts=(16, 32))
    result = decode_overhead.run(options, tmp_path)
    ratios = {row.item: row.value for row in result.rows if row.metric == "ratio"}
    assert set(ratios) == {"none C=16", "alibi C=16", "none C=32", "alibi C=32"}
    assert ratios["none C=16"] == ratios["none C=32"] == 1.0 and ratios["alibi C=32"] > 0
    assert {name: len(s) for name, s in result.samples.items()} == {  # none alternated with each encoding alone
        "none@16/alibi": 2, "alibi@16": 2, "none@32/alibi": 2, "alibi@32": 2}
    rows = {(row.item, row.metric): row for row in result.rows}
    judged, reported = rows["alibi C=32", "paired ratio"], rows["alibi C=16", "paired ratio"]
    assert judged.target == "<= 1.1" and judged.meets == (judged.value <= 1.10)
    assert reported.target == "" and reported.meets is None
    extra = rows["alibi C=16", "extra per layer"]
    alibi, none = result.samples["alibi@16"], result.samples["none@16/alibi"]
    assert extra.unit == "µs" and extra.value == (base.median(alibi) - base.median(none)) * 1000 / base.BASE["n_layers"]


def test_train_tasks_are_the_default_sweeps():
    sweep = yaml.safe_load((ROOT / "config.yaml").read_text())["train"]["tasks"]
    assert base.BenchOptions.train_tasks == tuple(sweep)


@pytest.mark.parametrize("task", ["reverse", "long_range"])
def test_train_steps_are_fits_bit_for_bit(task):
    job = resolve(TrainConfig(task=task, encoding="sinusoidal", steps=5, batch_size=8))
    with deterministic(threads=1):
        steps = train_throughput.TimedSteps(job)
        for _ in range(job.steps):
            steps()
        fitted_model = initial_model(job)
        fitted = fit(fitted_model, job, io.StringIO(), "test")
    assert steps.losses == fitted.losses
    assert all(a.equal(b) for a, b in zip(steps.trainer.model.parameters(), fitted_model.parameters()))


def event(name, parent=None):
    return SimpleNamespace(name=name, cpu_parent=parent)


@pytest.mark.parametrize("chain, expected", [
    (["aten::mm", "MmBackward0", "autograd::engine::evaluate_function: MmBackward0", "backward", "step"], "matmul"),
    (["aten::t", "aten::linear", "forward", "step"], "matmul"),
    (["aten::empty", "aten::_scaled_dot_product_flash_attention_for_cpu", "aten::scaled_dot_product_attention",
      "forward", "step"], "attention"),
    (["aten::bmm", "aten::_scaled_dot_product_attention_math", "aten::scaled_dot_product_attention", "step"],
     "attention"),
    (["aten::mul_", "aten::_foreach_mul_", "Optimizer.step#AdamW.step", "optimizer", "step"], "optimizer"),
    (["aten::linalg_vector_norm", "optimizer", "step"], "optimizer"),
    (["aten::randint", "data", "step"], "data"),
    (["aten::gelu_backward", "GeluBackward0", "backward", "step"], "other ops"),
    (["aten::add", "forward", "step"], "other ops"),
    (["forward", "step"], "python"),
    (["step"], "python"),
])
def test_category_follows_the_callers(chain, expected):
    leaf = None
    for name in reversed(chain):
        leaf = event(name, leaf)
    assert train_throughput.category(leaf) == expected


TRAIN_ITEMS = [f"{task}/sinusoidal@{size}" for task in ("reverse", "long_range") for size in ("micro", "tiny")]


@pytest.fixture(scope="module")
def train_part(tmp_path_factory):
    options = base.BenchOptions(parts=("train",), train_tasks=("reverse", "long_range"), train_sizes=("micro", "tiny"),
                                 train_steps=2, train_warmup=1, train_profile_steps=2)
    result = train_throughput.run(options, tmp_path_factory.mktemp("bench"))
    return result, {(row.item, row.metric): row for row in result.rows}


@pytest.mark.parametrize("size", ["micro", "tiny"])
def test_train_part_flops_are_the_analytic_train_count_at_each_size(train_part, size):
    result, rows = train_part
    name = f"reverse/sinusoidal@{size}"
    job = resolve(TrainConfig(task="reverse", encoding="sinusoidal", size=size))
    expected = sum(analytic_flops(job.model, job.batch_size, 32, "train").values())
    assert rows[name, "N"].value == non_embedding_params(size)
    assert rows[name, "B×L"].value == f"{job.batch_size}×32"
    assert rows[name, "GFLOP/step"].value == expected / 1e9
    per_step = [expected / ms * 1e3 for ms in result.samples[name]]
    assert rows[name, "GFLOP/s"].value == pytest.approx(base.median(per_step) / 1e9, rel=1e-12)
    assert rows[name, "s/seed"].value == pytest.approx(job.steps * base.median(result.samples[name]) / 1e3, rel=1e-12)


def test_train_part_times_each_task_and_encoding_at_each_size(train_part):
    result, _ = train_part
    assert [name for name in result.samples if name != "matmul"] == [
        "reverse/sinusoidal@micro", "reverse/sinusoidal@tiny", "long_range/sinusoidal@micro",
        "long_range/sinusoidal@tiny"]


def test_train_part_shares_are_of_the_matmul_rate(train_part):
    result, rows = train_part
    matmul = rows[f"matmul {train_throughput.TRAIN_MATMUL_SIZE}³, 1 thread", "GFLOP/s"].value
    assert matmul == pytest.approx(2 * 1024**3 / base.median(result.samples["matmul"]) / 1e6, rel=1e-12)
    for name in TRAIN_ITEMS:
        share = rows[name, "of matmul"]
        assert share.value == pytest.approx(100 * rows[name, "GFLOP/s"].value / matmul, rel=1e-12)
        assert len(result.samples[name]) == 2
    reverse = [rows["reverse/sinusoidal@tiny", "GFLOP/step"].value * 1e9 / ms / (2 * 1024**3 / mm)
               for ms, mm in zip(result.samples["reverse/sinusoidal@tiny"], result.samples["matmul"])]
    assert rows["reverse/sinusoidal@tiny", "paired"].value == pytest.approx(100 * base.median(reverse), rel=1e-12)


def test_train_target_is_judged_at_tiny_only(train_part):
    _, rows = train_part
    for name in TRAIN_ITEMS:
        share = rows[name, "of matmul"]
        judged = (">= 40", share.value >= 40) if name.endswith("@tiny") else ("", None)
        assert (share.target, share.meets) == judged


def test_train_part_breakdown_sums_to_100(train_part):
    _, rows = train_part
    for name in TRAIN_ITEMS:
        shares = [rows[name, category].value for category in train_throughput.BREAKDOWN]
        assert sum(shares) == pytest.approx(100, abs=1e-9)
        assert all(share >= 0 for share in shares)
        assert rows[name, "matmul"].value > 0 and rows[name, "attention"].value > 0


def parse(argv):
    parser = argparse.ArgumentParser()
    bench_cli.add_arguments(parser)
    return bench_cli.options_from(parser.parse_args(argv))


def test_cli_train_options():
    options = parse(["--parts", "train", "--train-steps", "7", "--train-encodings", "sinusoidal,rope",
                     "--train-tasks", "lm_prose,scan", "--train-sizes", "micro,small"])
    assert (options.parts, options.train_steps, options.train_encodings) == (("train",), 7, ("sinusoidal", "rope"))
    assert (options.train_tasks, options.train_sizes) == (("lm_prose", "scan"), ("micro", "small"))
    assert parse([]).train_sizes == ("tiny",)
    quick = parse(["--quick"])
    assert quick.train_steps < base.BenchOptions.train_steps


def permuted_forward(self, x, encoding, positions, mask, causal, layer, cache=None):
    """``SelfAttention.forward`` before the train part's speed-up: q, k, v split from a permuted view, whose
    backward copies."""
    B, L, width = x.shape
    qkv = self.qkv(x).view(B, L, 3, self.n_heads, width // self.n_heads)
    q, k, v = qkv.permute(2, 0, 3, 1, 4)  # 3 × (B, h, L, d_head)
    q, k = encoding.rotate(q, k, positions)
    if cache is not None:
        k, v = cache.extend(layer, k, v)
    y = model.attend(q, k, v, mask, causal)
    return self.out(y.transpose(1, 2).reshape(B, L, width))


def fitted(config):
    job = resolve(config)
    with deterministic(threads=1):
        trained = initial_model(job)
        result = fit(trained, job, io.StringIO(), "test")
    return result, [p.detach().clone() for p in trained.parameters()]


@pytest.mark.parametrize("task, encoding, options", [
    ("lm_prose", "sinusoidal", {}), ("lm_prose", "rope", {}),  # a default task at its own batch and length
    ("reverse", "alibi", {"train_length": 6}), ("reverse", "t5", {"train_length": 6})])  # the mask paths
def test_split_qkv_trains_bit_for_bit_as_the_permuted_split(task, encoding, options, monkeypatch):
    config = TrainConfig(task=task, encoding=encoding, steps=8, log_every=2, task_options=options)
    now, now_params = fitted(config)
    monkeypatch.setattr(model.SelfAttention, "forward", permuted_forward)
    before, before_params = fitted(config)
    assert now.losses == before.losses and now.curve == before.curve
    assert all(a.equal(b) for a, b in zip(now_params, before_params))


# ----- decode overhead and its transformers peer (decode, decode_peer) --------------------------------
def test_self_timed_steps_keep_their_own_milliseconds_in_rotating_order():
    order = []
    steps = {name: (lambda name=name, ms=ms: order.append(name) or ms) for name, ms in (("a", 1.5), ("b", 7.0))}
    samples = measure.alternate(steps, rounds=3, warmup=1, self_timed=True)
    assert samples == {"a": [1.5] * 3, "b": [7.0] * 3}
    assert order == ["a", "b", "a", "b", "b", "a", "a", "b"]  # warm-up, then the order rotating each round


def test_decode_part_rows_for_every_encoding_against_none(tmp_path, monkeypatch):
    monkeypatch.setattr(decode_overhead, "JUDGED_FROM", 16)
    options = base.BenchOptions(parts=("decode",), rounds=2, warmup=1, decode_contexts=(16,))
    result = decode_overhead.run(options, tmp_path)
    rows = {(row.item, row.metric): row for row in result.rows}
    for name, target in targets.timed().items():
        if name == "none":
            continue
        ratio, judged = rows[f"{name} C=16", "ratio"], rows[f"{name} C=16", "paired ratio"]
        samples, none = result.samples[f"{name}@16"], result.samples[f"none@16/{name}"]
        assert len(samples) == 2 and ratio.value == base.median(samples) / base.median(none)
        assert judged.target == ("" if target.decode is None else f"<= {target.decode:g}") and ratio.target == ""
    assert rows["none C=16", "ratio"].value == 1.0
    assert f"{torch.get_num_threads()} threads" in result.title


def test_peer_part_judges_the_paired_ratio_of_each_encoding(tmp_path, monkeypatch):
    pytest.importorskip("x_transformers")
    monkeypatch.setattr(x_transformers_peer, "SEQ_LEN", 16)
    monkeypatch.setattr(x_transformers_peer, "PEER_TARGETS", {"rope": 1.0, "alibi": 0.5})
    result = x_transformers_peer.run(base.BenchOptions(parts=("peer",), rounds=3, warmup=0), tmp_path)
    rows = {(row.item, row.metric): row for row in result.rows}
    for name, target in (("rope", "<= 1"), ("alibi", "<= 0.5")):
        ours, theirs = result.samples[f"{name}/posbench"], result.samples[f"{name}/x-transformers"]
        judged, ratio = rows[name, "paired ratio"], rows[name, "ratio"]
        assert judged.value == base.median([a / b for a, b in zip(ours, theirs)]) and judged.target == target
        assert judged.meets == (judged.value <= float(target.split()[1]))
        assert ratio.value == base.median(ours) / base.median(theirs) and ratio.target == ""


def test_a_generation_step_times_the_tokens_after_the_prefill_and_refuses_early_stops():
    ours = base.posbench_model("rope", 24)
    prompt = torch.randint(0, 256, (1, 16))
    step = transformers_peer.generation_step(ours, lambda p: model.generate(ours, p, 4), prompt, 4)
    assert step() > 0
    short = transformers_peer.generation_step(ours, lambda p: model.generate(ours, p, 3), prompt, 4)
    with pytest.raises(RuntimeError, match="generate ran 3 forwards for 3 tokens; expected 4 of each"):
        short()


def test_decode_peer_skips_in_one_line_without_transformers(tmp_path, monkeypatch):
    def absent(name):
        raise transformers_peer.PackageNotFoundError(name)

    monkeypatch.setattr(transformers_peer, "version", absent)
    result = transformers_peer.run(base.BenchOptions(parts=("decode_peer",)), tmp_path)
    assert result.rows == [] and result.notes == [
        "skipped: transformers is not installed (pip install 'posbench[bench]')"]


def test_decode_peers_have_posbench_parameters_but_for_the_stated_differences():
    pytest.importorskip("transformers")
    d, layers = base.BASE["d_model"], base.BASE["n_layers"]
    for encoding, extra in (("learned", layers * 9 * d),  # GPT-2's biases: qkv 3d, out d, MLP 4d and d
                            ("rope", layers * (3 * d * 683 - 8 * d * d) - (2 * layers + 1) * d)):  # SwiGLU; RMSNorm
        ours = model.count_params(base.posbench_model(encoding, 40))["total"]
        theirs = sum(p.numel() for p in transformers_peer.transformers_model(encoding, 40).parameters())
        assert theirs - ours == extra and abs(extra) / ours < 0.01


def test_decode_peer_part_rows(tmp_path):
    pytest.importorskip("transformers")
    options = base.BenchOptions(parts=("decode_peer",), rounds=2, warmup=1, decode_contexts=(16,),
                                decode_new_tokens=3)
    result = transformers_peer.run(options, tmp_path)
    rows = {(row.item, row.metric): row for row in result.rows}
    for item, name in (("learned vs GPT-2 C=16", "learned"), ("rope vs Llama C=16", "rope")):
        ours, theirs = result.samples[f"{name}/posbench@16"], result.samples[f"{name}/transformers@16"]
        assert len(ours) == len(theirs) == 2
        assert rows[item, "ratio"].value == base.median(ours) / base.median(theirs)
        assert rows[item, "paired ratio"].value == base.paired_ratio(ours, theirs)
        assert rows[item, "paired ratio"].target == "<= 1" and abs(rows[item, "params diff"].value) < 1
    assert "DynamicCache" in " ".join(result.notes)


def test_cli_decode_options():
    options = parse(["--parts", "decode,decode_peer", "--decode-contexts", "256,1024", "--decode-new-tokens", "5",
                     "--processes", "5"])
    assert (options.parts, options.decode_contexts, options.decode_new_tokens, options.processes) == (
        ("decode", "decode_peer"), (256, 1024), 5, 5)
    assert parse([]).processes == 1
    with pytest.raises(SystemExit):
        parse(["--decode-contexts", "256,x"])


# ----- --device: cpu or cuda ---------------------------------------------------------------------------
def test_device_argument_picks_the_parts_that_run_there():
    assert (parse([]).device, parse([]).parts) == ("cpu", base.PARTS)
    assert (parse(["--device", "cuda:1"]).device, parse(["--device", "cuda:1"]).parts) == ("cuda:1", base.CUDA_PARTS)
    assert parse(["--device", "cuda", "--parts", "decode,overhead"]).parts == ("decode", "overhead")


@pytest.mark.parametrize("argv,code,message", [
    (["--device", "tpu"], 2, "argument --device: 'tpu' is not allowed; allowed: cpu, cuda, cuda:N"),
    (["--device", "cuda", "--parts", "overhead,scale"], 2,
     "argument --parts: 'scale' is not allowed with --device cuda; allowed: paths, overhead, limit, decode"),
    pytest.param(["--device", "cuda:0"], 1, "argument --device: no CUDA device visible",
                 marks=pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")),
])
def test_bench_refuses_a_device_in_one_line_and_writes_nothing(argv, code, message, tmp_path, capsys):
    out = tmp_path / "bench"
    try:
        returned = main(["bench", "--out", str(out), *argv])
    except SystemExit as stop:
        returned = stop.code
    err = capsys.readouterr().err
    assert returned == code and message in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


@pytest.mark.parametrize("part", [encoding_overhead, decode_overhead, attention_paths, machine_limit])
def test_device_parts_place_every_model_input_and_cache_on_the_device(part, monkeypatch, tmp_path):
    """The meta device stands in for a GPU: a model, token or cache left on the host makes the forward fail."""
    monkeypatch.setattr(encoding_overhead, "SEQ_LEN", 16)
    monkeypatch.setattr(targets, "timed", lambda: {"none": targets.REFERENCE, "alibi": targets.LOGIT_BIAS,
                                                   "rope": targets.VECTOR_OR_ROTATION})
    options = base.BenchOptions(rounds=1, warmup=0, decode_contexts=(16,), limit_rounds=1, limit_batch=1,
                                device="meta")
    result = part.run(options, tmp_path)
    assert "meta" in result.title and result.rows
    model_ = base.posbench_model("alibi", 16, device="meta")
    assert {t.device.type for t in (*model_.parameters(), *model_.buffers())} == {"meta"}
    with torch.inference_mode():
        assert base.forward_step(model_, 1, 16)().device.type == "meta"
