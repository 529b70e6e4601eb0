"""``python -m posbench profile``: one record per cell, every status path exercised for real."""

import copy
import functools
import json
import os
import resource
import signal
import subprocess
import sys
from dataclasses import asdict

import jsonschema
import pytest
import torch

from posbench import aggregate, machine, measure, profile, records
from posbench.__main__ import main
from posbench.devices import TORCH_DTYPES
from posbench.flops import count_flops
from posbench.model import build_model
from posbench.profile import ProfileConfig, check

QUICK = ["--size", "tiny", "--seq-len", "64", "--warmup", "1", "--min-repeats", "3", "--min-seconds", "0",
         "--threads", "1"]


def profile_cli(out, *arguments):
    return main(["profile", *arguments, "--out", str(out)])


@pytest.fixture(scope="module")
def rope_record(tmp_path_factory):
    """One real ``ok`` run, shared by the tests that read it."""
    out = tmp_path_factory.mktemp("profile") / "rope.json"
    assert profile_cli(out, "--encoding", "rope", *QUICK) == 0
    return records.read_record(out)


def test_ok_record_measures_the_cell(rope_record):
    record = rope_record
    assert record["status"] == "ok" and record["reason"] == ""
    assert record["config"] == {"encoding": "rope", "size": "tiny", "seq_len": 64, "max_len": 64, "device": "cpu",
                                "batch": 1, "dtype": "float32", "mode": "infer", "threads": 1, "warmup": 1,
                                "min_repeats": 3, "min_seconds": 0.0, "seed": 0}
    assert record["params"] == {"total": 131712, "position": 0, "rest": 131712}  # tiny: d 64, 2 layers, vocab 256
    assert record["model"] == {"d_model": 64, "width": 64, "n_layers": 2, "n_heads": 4, "d_ff": 256}
    flops = record["flops"]
    # per layer: projections 8w²L + feed-forward 16w²L + scores and values 4L²w + rotation 6Lw
    # + residual adds 2Lw = 7 372 800; two layers plus the head 2LwV
    assert flops["analytic"] == 2 * 7_372_800 + 2 * 64 * 64 * 256 == sum(flops["terms"].values())
    assert flops["fvcore"] == flops["torch"] == flops["analytic"] > flops["analytic_causal_half"]
    latency = record["latency"]
    assert latency["n"] == 3 == len(latency["samples_ms"]) and latency["timer"] == "perf_counter"
    assert latency["min_ms"] <= latency["median_ms"] <= latency["p90_ms"] <= latency["max_ms"]
    assert record["attention"]["path"] == "is_causal"
    assert record["attention"]["sdpa_kernels"] and all(
        name.startswith(profile.SDPA_KERNEL_PREFIX) for name in record["attention"]["sdpa_kernels"])
    assert record["hardware"]["torch_threads"] == 1 == record["environment"]["torch_threads"]
    cpu = record["memory"]["cpu"]
    assert cpu["peak_mib"] >= cpu["baseline_mib"] > 0 and cpu["ru_maxrss_mib"] > 0
    assert record["memory"]["cuda"] is None and record["memory"]["nvml"] is None


def test_train_mode_times_a_training_step(tmp_path):
    out = tmp_path / "t5.json"
    assert profile_cli(out, "--encoding", "t5", "--mode", "train", "--batch", "2", *QUICK) == 0
    record = records.read_record(out)
    assert record["status"] == "ok" and record["config"]["mode"] == "train"
    assert record["params"]["position"] == 32 * 4  # 32 buckets × 4 heads
    assert record["latency"]["n"] == 3 and record["attention"]["sdpa_kernels"]


def _cell(mode):
    return ProfileConfig(encoding="alibi", size="tiny", seq_len=16, batch=2, mode=mode)


def test_train_step_updates_every_weight_and_infer_step_none():
    torch.manual_seed(0)
    model = build_model(profile.model_config(_cell("train")))
    before = [p.detach().clone() for p in model.parameters()]
    profile.make_step(model, _cell("train"))()
    assert model.training and all(not torch.equal(a, p) for a, p in zip(before, model.parameters()))

    before = [p.detach().clone() for p in model.parameters()]
    logits = profile.make_step(model, _cell("infer"))()
    assert not model.training and logits.is_inference() and logits.shape == (2, 16, 256)
    assert all(torch.equal(a, p) for a, p in zip(before, model.parameters()))


def test_model_section_states_the_width_the_layers_run_at():
    config = ProfileConfig(encoding="sinusoidal_concat", size="tiny", seq_len=16)
    naive_concat = build_model(profile.model_config(config))
    assert profile.model_shape(naive_concat) == {"d_model": 64, "width": 128, "n_layers": 2, "n_heads": 4, "d_ff": 512}


def test_cost_row_takes_the_model_from_the_record(rope_record):
    row = aggregate.cost_row({**rope_record, "model": {**rope_record["model"], "width": 128, "d_ff": 512}})
    assert [row[key] for key in ("d_model", "width", "n_layers", "n_heads", "d_ff")] == [64, 128, 2, 4, 512]
    assert row["params_position"] == 0 and row["attention_path"] == "is_causal"


def test_same_cell_same_config_hash(rope_record):
    again = copy.deepcopy(rope_record["config"])
    assert records.config_hash(again) == rope_record["config_hash"]
    again["seq_len"] = 65
    assert records.config_hash(again) != rope_record["config_hash"]


# ----- schema ----------------------------------------------------------------------------------
def test_record_round_trip_and_schema_rejections(rope_record, tmp_path):
    path = records.write_record(tmp_path / "copy.json", rope_record)
    assert records.read_record(path) == rope_record
    for broken in (
        {k: v for k, v in rope_record.items() if k != "latency"},  # ok needs every section
        {**rope_record, "latency": {**rope_record["latency"], "median_ms": -1.0}},
        {**rope_record, "memory": {**rope_record["memory"], "unit": "MB"}},
        {**rope_record, "config": {**rope_record["config"], "device": "tpu"}},
    ):
        with pytest.raises(jsonschema.ValidationError):
            records.write_record(tmp_path / "broken.json", broken)
    assert not (tmp_path / "broken.json").exists()
    oom = {k: v for k, v in rope_record.items() if k not in ("latency", "flops", "attention")}
    assert records.validate({**oom, "status": "oom", "reason": "out of memory"})  # partial sections are fine


# ----- statuses other than ok --------------------------------------------------------------------
def test_a_device_this_machine_lacks_fails_the_job_and_writes_no_manifest(tmp_path):
    """The cell's record says why (skipped), but the job fails and leaves no manifest: a rerun retries it."""
    device = f"cuda:{torch.cuda.device_count()}" if torch.cuda.is_available() else "cuda"
    out, manifest = tmp_path / "skip.json", tmp_path / "batch.json"
    assert profile_cli(out, "--encoding", "rope", *QUICK, "--device", device, "--manifest", str(manifest)) == 1
    record = records.read_record(out)
    assert record["status"] == "skipped" and ("CUDA" in record["reason"])
    assert "latency" not in record and record["config"]["device"] == device and not manifest.exists()


def test_preflight_passes_the_cpu_and_stops_a_missing_gpu_in_one_line(tmp_path, capsys):
    assert main(["preflight", "--device", "cpu", "--out", str(tmp_path / "cpu.json")]) == 0
    note = json.loads((tmp_path / "cpu.json").read_text())
    assert note["device"] == "cpu" and note["matmul"] is True and note["name"]
    device = f"cuda:{torch.cuda.device_count()}" if torch.cuda.is_available() else "cuda"
    capsys.readouterr()
    assert main(["preflight", "--device", device, "--out", str(tmp_path / "gpu.json")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"posbench preflight: error: {device}: ") and "CUDA" in err[0]
    assert not (tmp_path / "gpu.json").exists()


def test_a_real_out_of_memory_becomes_an_oom_record(tmp_path, monkeypatch):
    """The measurement process gets a 2.5 GiB address-space limit; the batch's embeddings alone take 4 GiB.
    (Its estimate, 44 GiB, would keep it from running on a machine with less; here the allocation must fail.)"""
    out = tmp_path / "oom.json"
    limit = int(2.5 * 2**30)

    def limit_memory():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    monkeypatch.setattr(measure.subprocess, "Popen", functools.partial(subprocess.Popen, preexec_fn=limit_memory))
    monkeypatch.setattr("posbench.footprint.device_memory", lambda device: None)  # as if the device were unseen
    assert profile_cli(out, "--encoding", "none", "--size", "tiny", "--seq-len", "1024", "--batch", "16384",
                       "--threads", "1") == 0
    record = records.read_record(out)
    assert record["status"] == "oom" and "allocate" in record["reason"], record["reason"]
    assert record["params"]["total"] == 131712  # what finished before the failure is kept


def test_a_cell_no_machine_holds_is_recorded_oom_from_its_estimate_without_running(tmp_path, monkeypatch):
    """10⁹ tokens: terabytes by the analytic count (posbench.footprint); the record says so, no child starts."""
    monkeypatch.setattr(measure, "run_isolated", lambda *args: pytest.fail("a cell that cannot fit was run"))
    out, manifest = tmp_path / "huge.json", tmp_path / "manifest.json"
    assert profile_cli(out, "--encoding", "rope", "--size", "tiny", "--seq-len", "1000000000",
                       "--manifest", str(manifest)) == 0
    record = records.read_record(out)
    assert record["status"] == "oom" and "params" not in record
    assert record["reason"].startswith("not run: 1000000000 tokens of rope at size tiny (infer, float32, batch 1) "
                                       "need an estimated 2.62 TiB (activations 2.56 TiB, weights 59.6 GiB), more "
                                       "than cpu holds (")
    assert json.loads(manifest.read_text())["records"][0]["status"] == "oom"


# ----- bad arguments: one line, exit 2, nothing written ----------------------------------------
@pytest.mark.parametrize("arguments, names", [
    (["--encoding", "rotary", "--size", "tiny", "--seq-len", "64"], ["--encoding", "rope", "alibi"]),
    (["--encoding", "rope", "--size", "huge", "--seq-len", "64"], ["--size", "tiny", "large"]),
    (["--encoding", "rope", "--size", "tiny", "--seq-len", "64", "--device", "tpu"], ["--device", "cuda:N", "mps"]),
    (["--encoding", "rope", "--size", "tiny", "--seq-len", "64", "--device", "cuda:x"], ["--device", "cuda:N"]),
    (["--encoding", "rope", "--size", "tiny", "--seq-len", "0"], ["--seq-len", "positive integer"]),
    (["--encoding", "rope", "--size", "tiny", "--seq-len", "-8"], ["--seq-len", "positive integer"]),
    (["--encoding", "rope", "--size", "tiny", "--seq-len", "64", "--batch", "0"], ["--batch", "positive integer"]),
    (["--encoding", "rope", "--size", "tiny", "--seq-len", "64", "--dtype", "float8"], ["--dtype", "bfloat16"]),
    (["--encoding", "learned", "--size", "tiny", "--seq-len", "2048", "--max-len", "1024"],
     ["--seq-len", "--max-len", "1 to 1024"]),
])
def test_bad_argument_is_one_line_and_exit_2(tmp_path, capsys, arguments, names):
    out = tmp_path / "never.json"
    try:
        code = profile_cli(out, *arguments)
    except SystemExit as exit_:
        code = exit_.code
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("posbench profile: error: "), err
    assert all(name in err for name in names), err
    assert not out.exists() and not list(tmp_path.iterdir())


def test_learned_within_its_table_is_accepted():
    assert profile.length_problem(ProfileConfig(encoding="learned", size="tiny", seq_len=1024)) is None


@pytest.mark.parametrize("change, message", [
    ({"encoding": "rotary"}, "encoding 'rotary' is not allowed; allowed: alibi, alibi_randomized, cope, fire,"),
    ({"device": "tpu"}, "device 'tpu' is not allowed; allowed: cpu, cuda, cuda:N, mps"),
    ({"seq_len": 0}, "seq_len 0 is not allowed; allowed: a positive integer"),
    ({"batch": 1.5}, "batch 1.5 is not allowed; allowed: a positive integer"),
    ({"warmup": -1}, "warmup -1 is not allowed; allowed: an integer >= 0"),
    ({"threads": 0}, "threads 0 is not allowed; allowed: a positive integer or None"),
    ({"min_seconds": float("nan")}, "min_seconds nan is not allowed; allowed: a number >= 0"),
    ({"encoding": "learned", "seq_len": 65, "max_len": 64}, "allowed: 1 to 64, or a larger --max-len"),
])
def test_check_names_the_bad_field_in_one_line(change, message):
    with pytest.raises(ValueError) as error:
        check(ProfileConfig(**{"encoding": "rope", "size": "tiny", "seq_len": 64, **change}))
    assert message in str(error.value) and "\n" not in str(error.value)


def test_the_record_config_is_the_one_the_command_line_always_wrote():
    """Existing records keep their hash: a config's record config is the cell dict of before, max_len filled
    in, and no encoding_options unless given."""
    config = ProfileConfig(encoding="rope", size="tiny", seq_len=64, threads=1, warmup=1, min_repeats=3,
                           min_seconds=0.0)
    assert config.record_config() == {"encoding": "rope", "size": "tiny", "seq_len": 64, "max_len": 64, "device": "cpu",
                              "batch": 1, "dtype": "float32", "mode": "infer", "threads": 1, "warmup": 1,
                              "min_repeats": 3, "min_seconds": 0.0, "seed": 0}
    assert records.config_hash(config.record_config()) == "2294ab5153703de0"  # what the old CLI wrote


# ----- atomic writes ---------------------------------------------------------------------------
KILLED_DURING_WRITE = """
import importlib.util, os, signal, sys
spec = importlib.util.spec_from_file_location("records", sys.argv[2])  # records.py alone: no torch, quick
records = importlib.util.module_from_spec(spec)
spec.loader.exec_module(records)
record = records.read_record(sys.argv[1])
record["reason"] = "the new version"
os.fsync = lambda fd: os.kill(os.getpid(), signal.SIGKILL)  # die after the data, before the rename
records.write_record(sys.argv[1], record)
"""


def test_a_job_killed_while_writing_leaves_the_old_record_whole(rope_record, tmp_path):
    path = records.write_record(tmp_path / "cell.json", rope_record)
    before = path.read_bytes()
    done = subprocess.run([sys.executable, "-c", KILLED_DURING_WRITE, str(path), records.__file__])
    assert done.returncode == -signal.SIGKILL
    assert path.read_bytes() == before  # never a partial file at the record's path
    leftovers = [p.name for p in tmp_path.iterdir() if p.name != "cell.json"]
    assert len(leftovers) == 1 and leftovers[0].startswith(".cell.json.") and leftovers[0].endswith(".tmp")


def test_an_interrupted_write_leaves_no_file(rope_record, tmp_path, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        records.write_record(tmp_path / "cell.json", rope_record)
    assert list(tmp_path.iterdir()) == []


def test_a_failing_writer_leaves_the_old_file_and_no_temporary(tmp_path):
    path = records.write_atomically(tmp_path / "table.csv", lambda file: file.write(b"old\n"))

    def half_then_fail(file):
        file.write(b"half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        records.write_atomically(path, half_then_fail)
    assert path.read_bytes() == b"old\n" and list(tmp_path.iterdir()) == [path]


def test_the_flop_counters_never_run_a_long_cell_at_full_length(monkeypatch):
    """A cell longer than COUNTED_UP_TO is counted at short lengths only, with the full-length counts."""
    from posbench import flops

    lengths = []
    example_inputs = flops._example_inputs
    monkeypatch.setattr(flops, "_example_inputs", lambda model, batch, seq_len: (
        lengths.append(seq_len), example_inputs(model, batch, seq_len))[1])
    config = ProfileConfig(encoding="t5", size="tiny", seq_len=2 * profile.COUNTED_UP_TO + 3, min_repeats=1,
                           min_seconds=0.0, warmup=0, mode="train")
    sections = {}
    profile.measure_cell(asdict(config), sections)
    assert lengths == [64, 128, 192, 256] == list(sections["flops"]["counted_at"])
    monkeypatch.setattr(flops, "_example_inputs", example_inputs)
    direct = count_flops(build_model(profile.model_config(config)), 1, config.seq_len, "train")
    assert (sections["flops"]["torch"], sections["flops"]["analytic"]) == (direct.torch, direct.analytic)


def test_a_failing_flop_pass_leaves_the_measured_cell_intact(monkeypatch):
    """The counters' extra pass runs last; its failure (an OOM at long lengths) costs only the library
    counts: latency and memory stay, the analytic count stands, the reason is kept."""
    def out_of_memory(*args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 64.00 GiB")

    monkeypatch.setattr(profile, "count_flops", out_of_memory)
    config = ProfileConfig(encoding="alibi", size="tiny", seq_len=32, min_repeats=1, min_seconds=0.0, warmup=0)
    sections = {}
    profile.measure_cell(asdict(config), sections)
    flops = sections["flops"]
    assert "latency" not in sections and sections["memory"]["cpu"]["peak_mib"] > 0  # latency: its own process
    assert flops["fvcore"] is None and flops["torch"] is None
    assert flops["counters_failed"] == "OutOfMemoryError: CUDA out of memory. Tried to allocate 64.00 GiB"
    assert flops["analytic"] == count_flops(build_model(profile.model_config(config)), 1, 32).analytic
    timing = {}
    profile.time_cells({"configs": [asdict(config)]}, timing)
    record = machine.new_record("profile", config.record_config(), "ok", "")
    record.update(sections, latency=timing["latency"]["0"])
    records.validate(record)


def test_a_host_kill_of_a_cuda_cell_is_an_error_retried_not_a_gpu_oom():
    killed = measure.ChildOutcome("oom", "the measurement process was killed by SIGKILL, …", {"params": {}})
    on_gpu = profile.host_kill_is_not_a_gpu_oom(ProfileConfig(encoding="rope", size="tiny", seq_len=8,
                                                              device="cuda"), killed)
    assert on_gpu.status == "error" and on_gpu.reason.startswith("killed by the host") and on_gpu.sections == {
        "params": {}}
    on_cpu = ProfileConfig(encoding="rope", size="tiny", seq_len=8)
    assert profile.host_kill_is_not_a_gpu_oom(on_cpu, killed) is killed
    allocator = measure.ChildOutcome("oom", "OutOfMemoryError: CUDA out of memory")  # the GPU's own: a result
    assert profile.host_kill_is_not_a_gpu_oom(ProfileConfig(encoding="rope", size="tiny", seq_len=8,
                                                            device="cuda"), allocator) is allocator


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_training_cells_below_float32_are_mixed_precision_with_float32_master_weights(dtype):
    config = ProfileConfig(encoding="rope", size="tiny", seq_len=16, mode="train", dtype=dtype)
    model = build_model(profile.model_config(config)).to(dtype=profile.weight_dtype(config))
    computed = []
    model.blocks[0].ff.up.register_forward_hook(lambda module, inputs, output: computed.append(output.dtype))
    before = [p.detach().clone() for p in model.parameters()]
    step = profile.make_step(model, config)
    step()
    step()
    assert computed == [TORCH_DTYPES[dtype]] * 2
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    assert any(not torch.equal(p, q) for p, q in zip(model.parameters(), before))  # it trained
    inference = ProfileConfig(encoding="rope", size="tiny", seq_len=16, dtype=dtype)
    assert profile.weight_dtype(inference) == TORCH_DTYPES[dtype]


# ----- decode: one token against a KV cache -------------------------------------------------------
@pytest.mark.parametrize("encoding", ["rope", "alibi", "learned"])
def test_a_decode_step_is_the_next_token_of_the_full_forward_at_a_fixed_context(encoding):
    """Each step feeds the prompt's tokens in turn, its last first, after the same 40 cached tokens."""
    config = ProfileConfig(encoding=encoding, size="tiny", seq_len=40, mode="decode")
    assert config.max_len == 41  # the generated token's position needs a row too
    model = build_model(profile.model_config(config))
    step = profile.make_step(model, config)
    prompt = torch.randint(model.cfg.vocab_size, (1, 41), generator=torch.Generator().manual_seed(0))[:, :-1]
    for token in (39, 0, 1):
        with torch.no_grad():
            expected = model(torch.cat([prompt, prompt[:, token:token + 1]], dim=1))[:, -1]
        torch.testing.assert_close(step()[:, -1], expected, atol=1e-5, rtol=0)
        assert len(step.cache) == 40


def test_a_path_decode_step_keeps_its_carried_keys_and_goes_back_to_the_prefill_every_context_steps():
    """PaTH's cache is cut back with its keys as carried (each step carries them in place, so later steps see a
    context of 12 keys, not the prompt's), and every 12 steps goes back to the prefill: steps 0 and 12 are the full
    forward's next token; the keys stay normal numbers."""
    config = ProfileConfig(encoding="path", size="tiny", seq_len=12, mode="decode")
    model = build_model(profile.model_config(config))
    step = profile.make_step(model, config)
    prompt = torch.randint(model.cfg.vocab_size, (1, 13), generator=torch.Generator().manual_seed(0))[:, :-1]
    with torch.no_grad():
        expected = model(torch.cat([prompt, prompt[:, -1:]], dim=1))[:, -1]
    logits = [step()[:, -1] for _ in range(13)]
    torch.testing.assert_close(logits[0], expected, atol=1e-5, rtol=0)
    torch.testing.assert_close(logits[12], expected, atol=1e-5, rtol=0)
    assert not torch.allclose(logits[1], logits[0], atol=1e-3)  # another token, other keys
    assert len(step.cache) == 12 and step.cache.rewritten
    tiny = torch.finfo(torch.float32).tiny
    assert all(bool((keys.abs().amax(-1) > tiny).all()) for keys in step.cache.keys)


def test_a_decode_cell_records_latency_cache_memory_path_and_analytic_flops(tmp_path):
    out = tmp_path / "decode.json"
    assert profile_cli(out, "--encoding", "alibi", *QUICK, "--mode", "decode") == 0
    record = records.read_record(out)  # the schema holds decode records
    tiny = {"n_layers": 2, "n_heads": 4, "width": 64}
    assert record["status"] == "ok" and record["latency"]["n"] >= 3 and record["attention"]["path"] == "relative"
    assert record["kv_cache_mib"] == measure.mib(2 * tiny["n_layers"] * 65 * tiny["width"] * 4)  # k, v; 64 + 1 tokens
    flops = record["flops"]
    assert flops["mode"] == "decode" and flops["torch"] is None and flops["analytic"] == sum(flops["terms"].values())
    keys = 65
    assert flops["terms"]["attention_scores"] == tiny["n_layers"] * 2 * keys * tiny["width"]
    per_token = profile.analytic_flops(build_model(profile.model_config(ProfileConfig(
        encoding="alibi", size="tiny", seq_len=1))), 1, 1)
    for term in ("projections", "ffn", "residual", "head", "rotation", "position_input"):
        assert flops["terms"][term] == per_token[term]


# ----- a job's encodings: memory alone, latency in alternation --------------------------------------
THREE = ("none", "rope", "alibi")
ALTERNATED = ["--size", "tiny", "--seq-len", "16", "--warmup", "1", "--min-repeats", "4", "--min-seconds", "0",
              "--threads", "1"]


def run_three(folder):
    return main(["profile", "--encoding", *THREE, *ALTERNATED, "--out", str(folder / "{encoding}.json"),
                 "--manifest", str(folder / "batch.json")])


@pytest.fixture(scope="module")
def three(tmp_path_factory):
    """One real job of three encodings at one length."""
    folder = tmp_path_factory.mktemp("three")
    assert run_three(folder) == 0
    return folder


def test_a_job_of_three_encodings_times_them_in_alternation_after_a_memory_pass_each(three):
    found = {name: records.read_record(three / f"{name}.json") for name in THREE}
    assert {record["status"] for record in found.values()} == {"ok"}
    latencies = {name: record["latency"] for name, record in found.items()}
    # one sample per cell per round: equal counts, at least min_repeats, each its own samples
    assert {(lat["n"], lat["rounds"], len(lat["samples_ms"])) for lat in latencies.values()} == {(4, 4, 4)}
    assert len({tuple(lat["samples_ms"]) for lat in latencies.values()}) == 3
    for name, lat in latencies.items():
        assert lat["alternated_with"] == [other for other in THREE if other != name] and "alone_because" not in lat
        assert lat["median_ms"] == measure.latency_stats(lat["samples_ms"])["median_ms"]
    # the three timed in one process; each memory pass in a fresh process of its own, none of them that one
    timing_pids = {lat["pid"] for lat in latencies.values()}
    memory_pids = {record["memory"]["pid"] for record in found.values()}
    assert len(timing_pids) == 1 and len(memory_pids) == 3 and not timing_pids & memory_pids
    assert {record["attention"]["path"] for record in found.values()} == {"is_causal", "relative"}
    manifest = json.loads((three / "batch.json").read_text())
    assert [entry["action"] for entry in manifest["records"]] == ["wrote"] * 3


def test_a_rerun_keeps_finished_cells_and_times_only_the_missing_ones_together(three, tmp_path):
    for name in THREE:
        (tmp_path / f"{name}.json").write_bytes((three / f"{name}.json").read_bytes())
    kept = {name: (tmp_path / f"{name}.json").read_bytes() for name in ("none", "alibi")}
    (tmp_path / "rope.json").unlink()
    assert run_three(tmp_path) == 0
    assert {name: (tmp_path / f"{name}.json").read_bytes() for name in ("none", "alibi")} == kept
    actions = [entry["action"] for entry in json.loads((tmp_path / "batch.json").read_text())["records"]]
    assert actions == ["kept", "wrote", "kept"]
    rope = records.read_record(tmp_path / "rope.json")
    assert rope["status"] == "ok" and rope["latency"]["alternated_with"] == [] and rope["latency"]["n"] == 4


def test_a_cell_whose_memory_pass_fails_keeps_its_status_and_the_rest_are_timed_together(monkeypatch):
    real = measure.run_isolated

    def rope_runs_out(target, payload):
        if target is profile.measure_cell and payload["encoding"] == "rope":
            return measure.ChildOutcome("oom", "OutOfMemoryError: injected", {"params": {"total": 1}})
        return real(target, payload)

    monkeypatch.setattr(measure, "run_isolated", rope_runs_out)
    configs = [ProfileConfig(encoding=name, size="tiny", seq_len=16, warmup=0, min_repeats=3, min_seconds=0.0,
                             threads=1) for name in THREE]
    none, rope, alibi = profile.profile_together(configs)
    assert (rope["status"], rope["reason"], "latency" in rope) == ("oom", "OutOfMemoryError: injected", False)
    assert none["latency"]["alternated_with"] == ["alibi"] and alibi["latency"]["alternated_with"] == ["none"]
    assert none["latency"]["n"] == alibi["latency"]["n"] == 3 and none["status"] == alibi["status"] == "ok"


def test_a_failed_timing_process_loses_no_cell_each_is_timed_alone(monkeypatch):
    """The shared timing process left one cell out (an OOM with every model resident): that cell is timed
    again alone; when the whole process dies, every cell is; a cell that fails alone takes that status."""
    configs = [ProfileConfig(encoding=name, size="tiny", seq_len=16) for name in THREE]
    calls = []

    def timing(latency_of, failed=None, status="ok", reason=""):
        sections = {"latency": {str(i): {"n": 1, "alternated_with": []} for i in latency_of}, "failed": failed or {}}
        return measure.ChildOutcome(status, reason, sections)

    def fake(target, payload):
        calls.append([config["encoding"] for config in payload["configs"]])
        if len(calls) == 1:  # together: rope failed to warm up beside the others
            return timing([0, 2], failed={"1": "OutOfMemoryError: beside the others"})
        return timing([0])  # alone: fits

    monkeypatch.setattr(measure, "run_isolated", fake)
    found = profile.time_latencies(configs)
    assert calls == [list(THREE), ["rope"]] and [outcome.status for outcome in found] == ["ok"] * 3
    assert found[1].sections["latency"]["alone_because"] == "OutOfMemoryError: beside the others"

    calls.clear()
    outcomes = iter([measure.ChildOutcome("oom", "the measurement process was killed by SIGKILL"),
                     timing([0]), timing([0]), measure.ChildOutcome("error", "ValueError: boom")])
    monkeypatch.setattr(measure, "run_isolated", lambda target, payload: calls.append(1) or next(outcomes))
    found = profile.time_latencies(configs)
    assert len(calls) == 4 and [outcome.status for outcome in found] == ["ok", "ok", "error"]
    assert found[0].sections["latency"]["alone_because"].startswith("oom: the measurement process was killed")
    assert found[2].reason == "ValueError: boom"
