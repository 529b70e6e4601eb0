"""Several cells per process: a record per cell, a manifest last, finished records kept on a rerun."""

import json

import pytest

from posbench import measuring_code, records
from posbench.__main__ import main

TRAIN = ["train", "--task", "copy", "--encoding", "alibi", "--train-length", "3", "--log-every", "100"]


def run_train(tmp_path, *args):
    return main([*TRAIN, "--out", str(tmp_path / "seed{seed}.json"), "--manifest", str(tmp_path / "batch.json"),
                 *args])


def test_several_seeds_write_a_record_each_and_a_manifest(tmp_path):
    assert run_train(tmp_path, "--steps", "2", "--seed", "0", "1", "2") == 0
    manifest = json.loads((tmp_path / "batch.json").read_text())
    assert [entry["record"] for entry in manifest["records"]] == [str(tmp_path / f"seed{s}.json") for s in (0, 1, 2)]
    assert {entry["action"] for entry in manifest["records"]} == {"wrote"}
    for entry in manifest["records"]:  # a cell's wall time covers its training
        assert entry["seconds"] >= records.read_record(entry["record"])["wall_time_s"]["total"] > 0
    assert [records.read_record(tmp_path / f"seed{s}.json")["config"]["seed"] for s in (0, 1, 2)] == [0, 1, 2]
    for s in (0, 1, 2):  # each with its items beside it
        records.read_items(tmp_path / f"seed{s}.json", records.read_record(tmp_path / f"seed{s}.json"))


def test_a_rerun_keeps_finished_records_byte_for_byte_and_measures_the_rest(tmp_path, capsys):
    assert run_train(tmp_path, "--steps", "2", "--seed", "0") == 0
    before = (tmp_path / "seed0.json").read_bytes()
    (tmp_path / "seed1.json").write_text('{"kind": "train", "status": "o')  # a torn file is no record
    assert run_train(tmp_path, "--steps", "2", "--seed", "0", "1") == 0
    assert (tmp_path / "seed0.json").read_bytes() == before
    actions = [entry["action"] for entry in json.loads((tmp_path / "batch.json").read_text())["records"]]
    assert actions == ["kept", "wrote"] and records.read_record(tmp_path / "seed1.json")["status"] == "ok"
    assert "[1/2] kept" in capsys.readouterr().err


def test_a_record_of_another_config_is_measured_again(tmp_path):
    assert run_train(tmp_path, "--steps", "2", "--seed", "0") == 0
    assert run_train(tmp_path, "--steps", "3", "--seed", "0") == 0
    assert records.read_record(tmp_path / "seed0.json")["config"]["steps"] == 3


def test_a_record_of_the_same_code_hash_from_another_commit_is_kept(tmp_path):
    """A docs-only commit changes ``git_commit`` but not ``code_hash``: the record stands, byte for byte."""
    assert run_train(tmp_path, "--steps", "2", "--seed", "0") == 0
    record = records.read_record(tmp_path / "seed0.json")
    assert record["environment"]["code_hash"] == measuring_code.code_hash()
    record["environment"]["git_commit"] = "0" * 40
    records.write_record(tmp_path / "seed0.json", record)
    before = (tmp_path / "seed0.json").read_bytes()
    assert run_train(tmp_path, "--steps", "2", "--seed", "0") == 0
    assert (tmp_path / "seed0.json").read_bytes() == before
    assert json.loads((tmp_path / "batch.json").read_text())["records"][0]["action"] == "kept"


def older_record(record):
    """A record written before ``code_hash`` (schema version 1), of the same commit and packages."""
    record["schema_version"] = 1
    del record["environment"]["code_hash"]


@pytest.mark.parametrize("spoil", [
    lambda record: record["environment"].update(code_hash="0" * 64),
    older_record,
    lambda record: record["environment"]["packages"].update(torch="1.0.0"),
    lambda record: record.update(status="error", reason="diverged"),
    lambda record: record.update(status="skipped", reason="no CUDA device visible"),
], ids=["other-code-hash", "no-code-hash", "other-torch", "error", "skipped"])
def test_a_record_of_other_code_or_without_a_result_is_measured_again(tmp_path, spoil):
    assert run_train(tmp_path, "--steps", "2", "--seed", "0") == 0
    record = records.read_record(tmp_path / "seed0.json")
    spoil(record)
    records.write_record(tmp_path / "seed0.json", record)
    assert run_train(tmp_path, "--steps", "2", "--seed", "0") == 0
    assert records.read_record(tmp_path / "seed0.json") != record
    assert json.loads((tmp_path / "batch.json").read_text())["records"][0]["action"] == "wrote"
    assert records.read_record(tmp_path / "seed0.json")["environment"]["code_hash"] == measuring_code.code_hash()


@pytest.mark.parametrize("spoil", [
    lambda items, other: items.unlink(),
    lambda items, other: items.write_bytes(other.read_bytes()),
], ids=["missing", "another-record's"])
def test_a_record_without_its_own_items_is_measured_again(tmp_path, spoil):
    assert run_train(tmp_path, "--steps", "2", "--seed", "0", "1") == 0
    spoil(records.items_path(tmp_path / "seed0.json"), records.items_path(tmp_path / "seed1.json"))
    with pytest.raises(ValueError, match="seed0.items.npz"):
        records.read_items(tmp_path / "seed0.json", records.read_record(tmp_path / "seed0.json"))
    assert run_train(tmp_path, "--steps", "2", "--seed", "0", "1") == 0
    actions = [entry["action"] for entry in json.loads((tmp_path / "batch.json").read_text())["records"]]
    assert actions == ["wrote", "kept"]
    records.read_items(tmp_path / "seed0.json", records.read_record(tmp_path / "seed0.json"))


@pytest.mark.parametrize("out, message", [
    ("r.json", "argument --out: 'r.json' gives several cells one path; with several values it must contain {seed}"),
    ("r{step}.json", "argument --out: 'r{step}.json' is not a path template; allowed fields: {seed}"),
    ("r{seed.x}.json", "argument --out: 'r{seed.x}.json' is not a path template; allowed fields: {seed}"),
])
def test_an_out_template_that_cannot_name_each_cell_exits_2_with_one_line(tmp_path, capsys, out, message):
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(tmp_path)
        assert main([*TRAIN, "--steps", "2", "--seed", "0", "1", "--out", out]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and message in err and not list(tmp_path.iterdir())


def test_profile_batches_lengths_and_times_the_encodings_of_each_length_together(tmp_path):
    """Two lengths of one encoding: each length a group of its own, its latency timed with nobody's."""
    out = tmp_path / "L{seq_len}.json"
    assert main(["profile", "--encoding", "rope", "--size", "tiny", "--seq-len", "8", "16", "--min-repeats", "1",
                 "--min-seconds", "0", "--warmup", "0", "--out", str(out), "--manifest", str(tmp_path / "b.json")]) == 0
    found = [records.read_record(tmp_path / f"L{L}.json") for L in (8, 16)]
    assert [record["config"]["seq_len"] for record in found] == [8, 16]
    assert [record["latency"]["alternated_with"] for record in found] == [[], []]
    assert [e["status"] for e in json.loads((tmp_path / "b.json").read_text())["records"]] == ["ok", "ok"]


def test_several_encodings_need_an_out_that_names_each(tmp_path, capsys):
    assert main(["profile", "--encoding", "rope", "alibi", "--size", "tiny", "--seq-len", "8",
                 "--out", str(tmp_path / "L{seq_len}.json")]) == 2
    assert "with several values it must contain {encoding}" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_probe_batches_widths_and_seeds(tmp_path):
    out = tmp_path / "d{d_model}" / "seed{seed}.json"
    assert main(["probe", "--encoding", "sinusoidal", "--d-model", "8", "16", "--seed", "0", "1", "--vocab", "4",
                 "--seq-len", "4", "--out", str(out)]) == 0
    cells = sorted((r["d_model"], r["seed"]) for r in map(records.read_record, tmp_path.rglob("seed*.json")))
    assert cells == [(8, 0), (8, 1), (16, 0), (16, 1)]


def test_a_failed_cell_fails_the_job_and_leaves_no_manifest_until_a_rerun_measures_it(tmp_path, capsys):
    """A cell that fails is an ``error`` record; the job exits 1 without a manifest, so the workflow
    retries it; the rerun keeps the finished seed and measures the failed one."""
    from posbench import batch
    from posbench.train import TrainConfig, resolve, train

    def cell(seed, fails):
        config = TrainConfig(task="copy", encoding="alibi", seed=seed, steps=2, task_options={"train_length": 3})
        recorded = resolve(config).record_config()

        def measure():
            record = train(config)
            return {**record, "status": "error", "reason": "the node went away"} if fails else record

        return batch.Cell(tmp_path / f"seed{seed}.json", recorded, measure)

    manifest = tmp_path / "batch.json"
    assert batch.run_cells("train", [cell(0, False), cell(1, True)], manifest) == 1
    assert not manifest.exists() and records.read_record(tmp_path / "seed1.json")["status"] == "error"
    assert "no manifest: 1 cell(s) skipped or failed" in capsys.readouterr().err
    assert batch.run_cells("train", [cell(0, False), cell(1, False)], manifest) == 0
    actions = [entry["action"] for entry in json.loads(manifest.read_text())["records"]]
    assert actions == ["kept", "wrote"]


def test_a_diverged_run_is_a_result_kept_on_a_rerun(tmp_path):
    """A non-finite loss gives ``diverged`` (exit 0, a manifest), and a rerun keeps it rather than retrying."""
    assert run_train(tmp_path, "--steps", "3", "--seed", "0", "--lr", "1e30") == 0
    record = records.read_record(tmp_path / "seed0.json")
    assert record["status"] == "diverged" and "non-finite loss" in record["reason"]
    assert run_train(tmp_path, "--steps", "3", "--seed", "0", "--lr", "1e30") == 0
    assert json.loads((tmp_path / "batch.json").read_text())["records"][0]["action"] == "kept"
