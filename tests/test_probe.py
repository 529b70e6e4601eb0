"""The information-recovery probe on cases with known answers, the record it writes, and its CLI."""

import io
import math
import re

import pytest
import torch
from helpers import probe_records

import posbench.train
from posbench import encodings, records
from posbench.__main__ import main
from posbench.aggregate import probe_rows
from posbench.positions import Positions
from posbench.probe import (
    InputVectors,
    ProbeConfig,
    check,
    fit_probe,
    geometry,
    model_space,
    principal_angles,
    principal_basis,
    probe,
    random_embedding,
    record_config,
    recovery,
    score,
    split_pairs,
)
from posbench.workflow import ConfigError
from posbench.workflow_config import validate_config

torch.set_num_threads(1)
VOCAB, LENGTH = 12, 10


def splits(vocab: int = VOCAB, length: int = LENGTH, seed: int = 0) -> dict:
    return split_pairs(vocab, length, max_pairs=vocab * length, test_fraction=0.25, validation_fraction=0.2,
                       generator=torch.Generator().manual_seed(seed))


def by_key(results: list[dict]) -> dict:
    return {(r["target"], r["probe"]): r for r in results}


def test_split_covers_the_grid_once_with_no_pair_in_two_splits():
    parts = splits()
    pairs = torch.cat(list(parts.values()))
    assert len(pairs) == VOCAB * LENGTH == len({tuple(p) for p in pairs.tolist()})
    assert (len(parts["test"]), len(parts["validation"])) == (30, 18)


def test_token_and_position_in_orthogonal_subspaces_are_both_recovered_perfectly():
    width = VOCAB + LENGTH + 4
    rotation, _ = torch.linalg.qr(torch.randn(width, width, generator=torch.Generator().manual_seed(0)))
    basis = rotation.T  # rows: an orthonormal basis in no particular alignment with the coordinates
    vectors = InputVectors(tokens=3 * basis[:VOCAB], positions=2 * basis[VOCAB:VOCAB + LENGTH])  # orthogonal spans
    results = by_key(recovery(vectors, splits(), iterations=60, hidden=32))
    for key, result in results.items():
        assert result["accuracy"] == 1.0, key
        assert result["mi_lower_bound_bits"] > 0.9 * result["entropy_bits"], key
    assert results["token", "linear"]["entropy_bits"] == pytest.approx(math.log2(VOCAB))
    assert results["position", "mlp"]["chance_accuracy"] == pytest.approx(1 / LENGTH)


def test_position_vectors_all_zero_leave_position_at_chance_and_token_intact():
    tokens = torch.randn(VOCAB, 16, generator=torch.Generator().manual_seed(1))
    vectors = InputVectors(tokens=tokens, positions=torch.zeros(LENGTH, 16))
    results = by_key(recovery(vectors, splits(), iterations=60, hidden=32))
    for kind in ("linear", "mlp"):
        position = results["position", kind]
        assert position["accuracy"] <= position["chance_accuracy"] + 0.1  # no probe beats chance…
        assert position["mi_lower_bound_bits"] < 0.05  # …nor finds information
        assert results["token", kind]["accuracy"] == 1.0


def test_probe_on_a_separable_toy_problem_is_exactly_right():
    generator = torch.Generator().manual_seed(2)
    centres = 4 * torch.randn(3, 5, generator=generator)
    labels = torch.arange(3).repeat_interleave(40)  # (120,)
    x = centres[labels] + 0.1 * torch.randn(120, 5, generator=generator)
    for kind in ("linear", "mlp"):
        fitted = fit_probe(kind, x[::2], labels[::2], 3, iterations=40, hidden=16)
        assert score(fitted, x[1::2], labels[1::2], 3)["accuracy"] == 1.0


def test_principal_angles_of_identical_subspaces_are_zero_and_of_orthogonal_ones_right():
    basis, _ = torch.linalg.qr(torch.randn(8, 5, generator=torch.Generator().manual_seed(3), dtype=torch.float64))
    assert principal_angles(basis[:, :3], basis[:, :3]) == pytest.approx([0.0] * 3, abs=1e-6)
    rotated = basis[:, :3] @ torch.linalg.qr(torch.randn(3, 3, dtype=torch.float64))[0]  # same span, other basis
    assert principal_angles(basis[:, :3], rotated) == pytest.approx([0.0] * 3, abs=1e-6)
    assert principal_angles(basis[:, :3], basis[:, 3:]) == pytest.approx([math.pi / 2] * 2, abs=1e-9)


def test_principal_basis_keeps_the_fewest_directions_holding_the_variance():
    coordinates = torch.zeros(4, 6)
    coordinates[:, 0] = torch.tensor([3.0, -3.0, 3.0, -3.0])  # variance 9: 90 % of the total
    coordinates[:, 1] = torch.tensor([1.0, 1.0, -1.0, -1.0])  # variance 1: the other 10 %
    assert principal_basis(coordinates, 0.9).shape == (6, 1)
    assert principal_basis(coordinates, 0.95).shape == (6, 2)


def test_geometry_of_a_concat_is_orthogonal_and_of_shared_dimensions_overlapping():
    encoding = encodings.build("sinusoidal_concat", d_model=16, n_heads=1, max_len=LENGTH)
    torch.manual_seed(0)
    concat = geometry(model_space(encoding, random_embedding(encoding, VOCAB, LENGTH), LENGTH))
    assert concat["principal_angles_deg"] == pytest.approx([90.0] * len(concat["principal_angles_deg"]))
    assert concat["position_energy_in_token_subspace"] == pytest.approx(0.0, abs=1e-12)
    positions = torch.randn(LENGTH, 8)
    shared = geometry(InputVectors(tokens=positions.repeat(2, 1), positions=positions))  # the same span
    assert shared["subspace_overlap"] == pytest.approx(1.0)
    assert shared["position_energy_in_token_subspace"] > 0.9


@pytest.mark.parametrize("name", ["sinusoidal", "learned_concat", "sinusoidal_concat_fixed"])
def test_model_space_parts_add_up_to_what_inject_makes(name):
    encoding = encodings.build(name, d_model=16, n_heads=1, max_len=LENGTH)
    embedding = random_embedding(encoding, VOCAB, LENGTH)  # (V, token_width)
    vectors = model_space(encoding, embedding, LENGTH)
    pairs = splits()["test"]
    with torch.no_grad():
        injected = encoding.inject(embedding[pairs[:, 0]][None], Positions.from_ids(pairs[:, 1]))[0]  # (N, model_width)
    torch.testing.assert_close(vectors.inputs(pairs), injected)
    assert vectors.tokens.shape == (VOCAB, encoding.model_width)


def test_random_embeddings_match_the_position_vectors_in_norm():
    encoding = encodings.build("sinusoidal_concat_fixed", d_model=64, n_heads=1, max_len=LENGTH)
    torch.manual_seed(0)
    embedding = random_embedding(encoding, 4000, LENGTH)  # many rows: the mean is close to its expectation
    position_norm = encoding.table(LENGTH).pow(2).sum(-1).mean()  # 16 sin² + cos² pairs: exactly 16
    assert position_norm == pytest.approx(16.0)
    assert embedding.pow(2).sum(-1).mean() == pytest.approx(16.0, rel=0.02)


def test_record_is_valid_and_aggregates_to_one_row_per_target_and_probe():
    record = probe(ProbeConfig(encoding="learned_concat_fixed", d_model=8, vocab=6, seq_len=4, probe_iterations=20,
                               mlp_hidden=8))
    records.validate(record)
    assert (record["combine"], record["width"], record["token_width"], record["position_width"]) == (
        "concat_fixed", 8, 4, 4)
    assert record["pairs"]["grid"] == 24 and record["embedding"]["training"] is None
    rows = probe_rows(record)
    assert [(r["target"], r["probe"]) for r in rows] == [("token", "linear"), ("token", "mlp"),
                                                         ("position", "linear"), ("position", "mlp")]
    assert {r["chance"] for r in rows} == {1 / 6, 1 / 4} and {r["d_model"] for r in rows} == {8}
    assert {(r["device"], r["dtype"]) for r in rows} == {("cpu", "float32")}


def test_a_diverging_language_model_gives_a_diverged_record(monkeypatch):
    """The trained embeddings come from train's own loop: a non-finite loss there stops the probe cell."""
    real = posbench.train.scored_logits

    def poisoned(*args):
        logits, targets = real(*args)
        return logits * math.nan, targets

    monkeypatch.setattr(posbench.train, "scored_logits", poisoned)
    record = probe(ProbeConfig(encoding="sinusoidal", d_model=8, vocab=None, embedding="trained", seq_len=8),
                   log=io.StringIO())
    assert record["status"] == "diverged" and record["reason"] == "non-finite loss (nan) at step 1 of the lm_prose run"
    assert record["recovery"] == []


@pytest.mark.parametrize("change, words", [
    ({"encoding": "rope"}, "allowed: learned, learned_concat"),
    ({"d_model": 18}, "d_model must be a positive multiple of 4"),
    ({"embedding": "trained"}, "vocab applies to random embeddings"),
    ({"vocab": 1}, "vocab must be >= 2"),
    ({"variance_kept": 1.0}, "variance_kept must lie strictly between 0 and 1"),
])
def test_bad_config_names_the_field(change, words):
    with pytest.raises(ValueError, match=words):
        check(ProbeConfig(**{"encoding": "sinusoidal", "d_model": 16, **change}))


@pytest.mark.parametrize("arguments, words", [
    (["--encoding", "alibi", "--d-model", "16"], "argument --encoding: invalid choice: 'alibi'"),
    (["--encoding", "learned", "--d-model", "x"], "argument --d-model: 'x' is not allowed"),
    (["--encoding", "learned", "--d-model", "18"], "d_model must be a positive multiple of 4"),
    (["--encoding", "learned", "--d-model", "16", "--embedding", "trained", "--vocab", "10"],
     "vocab applies to random embeddings"),
    (["--encoding", "learned", "--d-model", "16", "--seq-len", "1"], "argument --seq-len: '1' is not allowed"),
    (["--encoding", "learned", "--d-model", "16", "--embedding", "trained", "--device", "tpu"],
     "argument --device: 'tpu' is not allowed; allowed: cpu, cuda, cuda:N"),
    (["--encoding", "learned", "--d-model", "16", "--embedding", "trained", "--dtype", "float16"],
     "argument --dtype: invalid choice: 'float16'"),
    (["--encoding", "learned", "--d-model", "16", "--device", "cuda"],
     "device 'cuda' and dtype 'float32' apply to trained embeddings (the lm_prose run); allowed with random ones: "
     "cpu, float32"),
])
def test_cli_bad_arguments_give_one_line_and_exit_2(tmp_path, capsys, arguments, words):
    out = tmp_path / "probe.json"
    try:
        code = main(["probe", *arguments, "--out", str(out)])
    except SystemExit as error:  # argparse's own checks
        code = error.code
    stderr = capsys.readouterr().err
    assert code == 2
    assert words in stderr and len(stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_workflow_fans_probe_cells_out_and_an_empty_probe_section_adds_none():
    base = {"machine": "laptop", "train": {"tasks": {"reverse": ["rope"]}, "seeds": [0]}}
    assert probe_records(validate_config(base)) == []
    cfg = validate_config({**base, "probe": {"encodings": ["sinusoidal_concat"], "random_widths": [16, 32],
                                             "trained_widths": [16], "seeds": [0, 1]}})
    paths = probe_records(cfg)
    assert len(paths) == 2 * 2 + 1 * 2
    assert "results/records/laptop/probe/cpu/random/sinusoidal_concat/V64/L64/d32/seed1.json" in paths
    assert "results/records/laptop/probe/cpu/trained/sinusoidal_concat/lm_prose/L64/d16/seed0.json" in paths


@pytest.mark.parametrize("section, words", [
    ({"encodings": ["rope"]}, "'probe.encodings[0]': unknown 'rope'; allowed: learned"),
    ({"random_widths": [18]}, "'probe.random_widths[0]': 18 is not a multiple of 4"),
])
def test_workflow_refuses_a_bad_probe_section_in_one_line(section, words):
    with pytest.raises(ConfigError, match=re.escape(words)):
        validate_config({"probe": {"random_widths": [16], **section}})


def test_trained_embeddings_in_bfloat16_and_the_default_config_hash():
    """The lm_prose run takes train's device and dtype; cpu / float32 stay out of the record's config, so
    records written before keep their hash."""
    config = ProbeConfig(encoding="sinusoidal", d_model=16, vocab=None, embedding="trained")
    assert records.config_hash(record_config(config)) == "0a0d5636eeef0f4b"  # as before --device existed
    cell = ProbeConfig(encoding="sinusoidal", d_model=8, vocab=None, embedding="trained", seq_len=8, train_steps=5,
                       probe_iterations=20, mlp_hidden=8, dtype="bfloat16")
    record = records.validate(probe(cell, log=io.StringIO()))
    assert record["status"] == "ok" and record["config"] == {**record_config(config), "d_model": 8, "seq_len": 8,
                                                             "train_steps": 5, "probe_iterations": 20,
                                                             "mlp_hidden": 8, "dtype": "bfloat16"}
    assert {(row["device"], row["dtype"]) for row in probe_rows(record)} == {("cpu", "bfloat16")}
    assert record["embedding"]["training"]["steps"] == 5
    assert math.isfinite(record["embedding"]["training"]["held_out_bits_per_char"])


def test_trained_embeddings_on_a_cuda_device_this_machine_lacks_are_skipped(tmp_path):
    device = f"cuda:{torch.cuda.device_count()}" if torch.cuda.is_available() else "cuda"
    out = tmp_path / "probe.json"
    assert main(["probe", "--encoding", "sinusoidal", "--d-model", "8", "--embedding", "trained",
                 "--device", device, "--out", str(out)]) == 1  # skipped fails the job
    record = records.read_record(out)
    assert record["status"] == "skipped" and "CUDA" in record["reason"] and "\n" not in record["reason"]
    assert record["config"]["device"] == device and record["recovery"] == []
