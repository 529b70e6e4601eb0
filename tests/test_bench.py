"""The bench's P8 train part: its steps are fit's, its FLOPs the analytic train count, its breakdown
whole; and the speed-up it led to leaves training bit for bit as it was."""

import argparse
import io
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import yaml

from posbench import bench, model
from posbench.cli import bench as bench_cli
from posbench.flops import analytic_flops
from posbench.train import TrainConfig, deterministic, fit, initial_model, resolve

ROOT = Path(__file__).resolve().parents[1]


def test_train_tasks_are_the_default_sweeps():
    sweep = yaml.safe_load((ROOT / "config.yaml").read_text())["train"]["tasks"]
    assert bench.TRAIN_TASKS == tuple(sweep)


@pytest.mark.parametrize("task", ["reverse", "long_range"])
def test_train_steps_are_fits_bit_for_bit(task):
    job = resolve(TrainConfig(task=task, encoding="sinusoidal", steps=5, batch_size=8))
    with deterministic(threads=1):
        steps = bench.TrainSteps(job)
        for _ in range(job.steps):
            steps()
        fitted_model = initial_model(job)
        fitted = fit(fitted_model, job, io.StringIO(), "test")
    assert steps.losses == fitted.losses
    assert all(a.equal(b) for a, b in zip(steps.model.parameters(), fitted_model.parameters()))


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
    assert bench.category(leaf) == expected


@pytest.fixture(scope="module")
def train_part(tmp_path_factory):
    options = bench.BenchOptions(parts=("train",), train_tasks=("reverse", "long_range"), train_steps=2,
                                 train_warmup=1, train_profile_steps=2)
    result = bench.part_train(options, tmp_path_factory.mktemp("bench"))
    return result, {(row.item, row.metric): row for row in result.rows}


def test_train_part_flops_are_the_analytic_train_count(train_part):
    result, rows = train_part
    job = resolve(TrainConfig(task="reverse", encoding="sinusoidal"))
    expected = sum(analytic_flops(job.model, job.batch_size, 32, "train").values())
    assert rows["reverse/sinusoidal", "B×L"].value == f"{job.batch_size}×32"
    assert rows["reverse/sinusoidal", "GFLOP/step"].value == expected / 1e9
    per_step = [expected / ms * 1e3 for ms in result.samples["reverse/sinusoidal"]]
    assert rows["reverse/sinusoidal", "GFLOP/s"].value == pytest.approx(bench.median(per_step) / 1e9, rel=1e-12)


def test_train_part_shares_are_of_the_matmul_rate(train_part):
    result, rows = train_part
    matmul = rows[f"matmul {bench.TRAIN_MATMUL_SIZE}³, 1 thread", "GFLOP/s"].value
    assert matmul == pytest.approx(2 * 1024**3 / bench.median(result.samples["matmul"]) / 1e6, rel=1e-12)
    for name in ("reverse/sinusoidal", "long_range/sinusoidal"):
        share = rows[name, "of matmul"]
        assert share.value == pytest.approx(100 * rows[name, "GFLOP/s"].value / matmul, rel=1e-12)
        assert (share.target, share.meets) == (">= 40", share.value >= 40)
        assert len(result.samples[name]) == 2
    reverse = [rows["reverse/sinusoidal", "GFLOP/step"].value * 1e9 / ms / (2 * 1024**3 / mm)
               for ms, mm in zip(result.samples["reverse/sinusoidal"], result.samples["matmul"])]
    assert rows["reverse/sinusoidal", "paired"].value == pytest.approx(100 * bench.median(reverse), rel=1e-12)


def test_train_part_breakdown_sums_to_100(train_part):
    _, rows = train_part
    for name in ("reverse/sinusoidal", "long_range/sinusoidal"):
        shares = [rows[name, category].value for category in bench.BREAKDOWN]
        assert sum(shares) == pytest.approx(100, abs=1e-9)
        assert all(share >= 0 for share in shares)
        assert rows[name, "matmul"].value > 0 and rows[name, "attention"].value > 0


def parse(argv):
    parser = argparse.ArgumentParser()
    bench_cli.add_arguments(parser)
    return bench_cli.options_from(parser.parse_args(argv))


def test_cli_train_options():
    options = parse(["--parts", "train", "--train-steps", "7", "--train-encodings", "sinusoidal,rope"])
    assert (options.parts, options.train_steps, options.train_encodings) == (("train",), 7, ("sinusoidal", "rope"))
    quick = parse(["--quick"])
    assert quick.train_steps < bench.BenchOptions.train_steps


def permuted_forward(self, x, encoding, positions, mask, causal, cache=None):
    """``SelfAttention.forward`` before P8: q, k, v split from a permuted view, whose backward copies."""
    B, L, width = x.shape
    qkv = self.qkv(x).view(B, L, 3, self.n_heads, width // self.n_heads)
    q, k, v = qkv.permute(2, 0, 3, 1, 4)  # 3 × (B, h, L, d_head)
    q, k = encoding.rotate(q, k, positions)
    if cache is not None:
        k, v = cache[0].extend(cache[1], k, v)
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


# ----- P7: decode overhead and its transformers peer -------------------------------------------------
def test_self_timed_steps_keep_their_own_milliseconds_in_rotating_order():
    order = []
    steps = {name: (lambda name=name, ms=ms: order.append(name) or ms) for name, ms in (("a", 1.5), ("b", 7.0))}
    samples = bench.alternate(steps, rounds=3, warmup=1, self_timed=True)
    assert samples == {"a": [1.5] * 3, "b": [7.0] * 3}
    assert order == ["a", "b", "a", "b", "b", "a", "a", "b"]  # warm-up, then the order rotating each round


def test_decode_part_rows_for_every_encoding_against_none(tmp_path):
    options = bench.BenchOptions(parts=("decode",), rounds=2, warmup=1, decode_contexts=(16,))
    result = bench.part_decode(options, tmp_path)
    rows = {(row.item, row.metric): row for row in result.rows}
    for name, target in bench.DECODE_TARGETS.items():
        ratio = rows[f"{name} C=16", "ratio"]
        samples, none = result.samples[f"{name}@16"], result.samples["none@16"]
        assert len(samples) == 2 and ratio.value == bench.median(samples) / bench.median(none)
        assert ratio.target == ("" if target is None else f"<= {target:g}")
    assert rows["none C=16", "ratio"].value == 1.0
    assert f"{torch.get_num_threads()} threads" in result.title


def test_a_generation_step_times_the_tokens_after_the_prefill_and_refuses_early_stops():
    ours = bench.posbench_model("rope", 24)
    prompt = torch.randint(0, 256, (1, 16))
    step = bench.generation_step(ours, lambda p: model.generate(ours, p, 4), prompt, 4)
    assert step() > 0
    short = bench.generation_step(ours, lambda p: model.generate(ours, p, 3), prompt, 4)
    with pytest.raises(RuntimeError, match="generate ran 3 forwards for 3 tokens; expected 4 of each"):
        short()


def test_decode_peer_skips_in_one_line_without_transformers(tmp_path, monkeypatch):
    def absent(name):
        raise bench.PackageNotFoundError(name)

    monkeypatch.setattr(bench, "version", absent)
    result = bench.part_decode_peer(bench.BenchOptions(parts=("decode_peer",)), tmp_path)
    assert result.rows == [] and result.notes == [
        "skipped: transformers is not installed (pip install 'posbench[bench]')"]


def test_decode_peers_have_posbench_parameters_but_for_the_stated_differences():
    pytest.importorskip("transformers")
    d, layers = bench.BASE["d_model"], bench.BASE["n_layers"]
    for encoding, extra in (("learned", layers * 9 * d),  # GPT-2's biases: qkv 3d, out d, MLP 4d and d
                            ("rope", layers * (3 * d * 683 - 8 * d * d) - (2 * layers + 1) * d)):  # SwiGLU; RMSNorm
        ours = model.count_params(bench.posbench_model(encoding, 40))["total"]
        theirs = sum(p.numel() for p in bench.transformers_model(encoding, 40).parameters())
        assert theirs - ours == extra and abs(extra) / ours < 0.01


def test_decode_peer_part_rows(tmp_path):
    pytest.importorskip("transformers")
    options = bench.BenchOptions(parts=("decode_peer",), rounds=2, warmup=1, decode_contexts=(16,),
                                 decode_new_tokens=3)
    result = bench.part_decode_peer(options, tmp_path)
    rows = {(row.item, row.metric): row for row in result.rows}
    for item, name in (("learned vs GPT-2 C=16", "learned"), ("rope vs Llama C=16", "rope")):
        ours, theirs = result.samples[f"{name}/posbench@16"], result.samples[f"{name}/transformers@16"]
        assert len(ours) == len(theirs) == 2
        assert rows[item, "ratio"].value == bench.median(ours) / bench.median(theirs)
        assert rows[item, "paired ratio"].value == bench.paired_ratio(ours, theirs)
        assert rows[item, "ratio"].target == "<= 1" and abs(rows[item, "params diff"].value) < 1
    assert "DynamicCache" in " ".join(result.notes)


def test_cli_decode_options():
    options = parse(["--parts", "decode,decode_peer", "--decode-contexts", "256,1024", "--decode-new-tokens", "5"])
    assert (options.parts, options.decode_contexts, options.decode_new_tokens) == (
        ("decode", "decode_peer"), (256, 1024), 5)
    with pytest.raises(SystemExit):
        parse(["--decode-contexts", "256,x"])
