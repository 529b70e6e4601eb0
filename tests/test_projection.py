"""The projected cost model: its FLOPs, parameters and KV cache against hand computations at named architectures,
term for term equal to posbench's own analytic counts at posbench's own architecture, a roofline on planted devices,
the CPU check's fit, and one-line errors for a bad architecture, device or config key."""

import json
from pathlib import Path

import pandas as pd
import pytest

from posbench import flops, projection, projection_check
from posbench.__main__ import main
from posbench.devices import BFLOAT16, FLOAT32
from posbench.model import ModelConfig, count_params, meta_model

ROOT = Path(__file__).resolve().parents[1]
REFERENCE_TABLES = ROOT / "results/reference/default/tables"
LLAMA_3_8B = projection.ARCHITECTURES["llama-3-8b"]


def test_llama_3_8b_prefill_and_decode_flops_per_token_follow_the_written_formula():
    d, n, q, kv, ff, vocab, L = 4096, 32, 32 * 128, 8 * 128, 14336, 128256, 8192
    per_token_layer = (2 * d * (q + 2 * kv) + 2 * q * d  # q, k, v and output projections
                       + 2 * 3 * d * ff + ff  # SwiGLU: gate, up, down; the gate × up product
                       + 2 * d)  # two residual adds
    head = 2 * d * vocab
    prefill = n * per_token_layer * L + n * 4 * (L * (L + 1) // 2) * q + head * L  # causal logits: L(L+1)/2
    decode = n * per_token_layer + n * 4 * (L + 1) * q + head
    work = projection.position_work("none", LLAMA_3_8B, L)
    assert projection.total_flops(projection.prefill_ops(LLAMA_3_8B, work, L)) == prefill
    assert projection.total_flops(projection.decode_ops(LLAMA_3_8B, work, L)) == decode
    row = projection.project(LLAMA_3_8B, "none", L, projection.DEVICES["h100"])
    assert row.prefill_flops_per_token == prefill / L
    assert row.decode_flops_per_token == decode
    # rope adds 3 FLOPs per rotated element of q (32 heads) and k (8 kv heads) per layer
    rope = projection.position_work("rope", LLAMA_3_8B, L)
    assert projection.total_flops(projection.prefill_ops(LLAMA_3_8B, rope, L)) - prefill == n * 3 * L * (q + kv)


def test_llama_3_8b_kv_cache_at_128k_is_the_hand_computation_with_grouped_query_attention():
    work = projection.position_work("rope", LLAMA_3_8B, 131072)
    kv_bytes = 2 * 32 * 8 * 128 * 131072 * 2  # k and v, layers, kv heads, head_dim, tokens, bf16
    assert projection.kv_cache_bytes(LLAMA_3_8B, work, 131072) == kv_bytes == 16 * 2**30
    assert projection.kv_cache_bytes(LLAMA_3_8B, work, 131072, FLOAT32) == 2 * kv_bytes


@pytest.mark.parametrize(("arch", "expected"), [("llama-3-8b", 8_030_261_248), ("qwen2.5-7b", 7_615_616_512)])
def test_parameters_of_named_architectures_are_the_published_counts(arch, expected):
    # Llama-3-8B: untied 128256 × 4096 embedding and head, 32 × (attention 41,943,040 + SwiGLU 176,160,768
    # + norms 8,192), final norm 4,096. Qwen2.5-7B adds q, k, v biases (3584 + 2 × 512 per layer).
    arch = projection.ARCHITECTURES[arch]
    assert projection.parameters(arch, projection.position_work("rope", arch, 4096)) == expected


@pytest.mark.parametrize("name", projection.projected_encodings())
def test_posbench_architecture_matches_posbench_counts_term_for_term(name):
    arch = projection.posbench_architecture("base")
    for length in (256, 1000):
        cfg = ModelConfig.from_size("base", max_len=length, encoding=name, causal=True)
        work = projection.position_work(name, arch, length)
        assert (projection.total_flops(projection.prefill_ops(arch, work, length, FLOAT32))
                == sum(flops.analytic_flops(cfg, 1, length, causal_half=True).values()))
        assert (projection.total_flops(projection.decode_ops(arch, work, length, FLOAT32))
                == sum(flops.decode_flops(cfg, 1, length).values()))
        assert projection.parameters(arch, work) == count_params(meta_model(cfg))["total"]


def test_what_each_encoding_materialises_follows_its_traits():
    context, heads = 131072, 32
    bytes_of = {name: projection.position_bytes(LLAMA_3_8B, projection.position_work(name, LLAMA_3_8B, context),
                                                context) for name in ("none", "t5", "fire", "alibi", "rope")}
    assert bytes_of["none"] == 0
    assert bytes_of["fire"] == heads * context**2 * 2  # a trained bias: (h, L, L) in bf16
    assert bytes_of["t5"] == heads * context**2 * 2 + (2 * 128 + 1) * 8  # and its bucket of each offset, int64
    assert bytes_of["alibi"] == (heads + heads * (2 * context - 1)) * 2  # slopes and its penalty table
    assert bytes_of["rope"] == context * 64 * 2 * 2  # angle turns: (L, d_head / 2, 2)


def test_roofline_of_planted_operations_and_a_planted_device():
    rates = projection.Rates(flops=1e12, bandwidth=1e9, op_overhead_s=1e-3)
    ops = [projection.Op("compute-bound", flops=2 * 10**12, bytes=10**9),  # 2 s against 1 s of memory
           projection.Op("memory-bound", flops=10**6, bytes=3 * 10**9, times=2, launches=2)]  # 2 × 3 s
    assert projection.roofline_seconds(ops, rates) == pytest.approx(
        {"compute": 2.0, "memory": 6.0, "overhead": 5e-3, "total": 8.005})
    # a device whose memory is free: the prefill takes its FLOPs over the peak, and nothing else
    planted = projection.Device("planted", "planted", {BFLOAT16: 1e12}, bandwidth=1e30, memory=1e9, source="test")
    row = projection.project(LLAMA_3_8B, "rope", 4096, planted)
    assert row.prefill_ms == pytest.approx(row.prefill_flops_per_token * 4096 / 1e12 * 1e3, rel=1e-12)
    assert row.prefill_bound == "compute" and not row.fits  # 16 GB of weights in 1 GB


def test_a_config_json_reads_as_its_architecture_and_bad_keys_are_one_line_errors():
    config = {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
              "intermediate_size": 14336, "vocab_size": 128256, "tie_word_embeddings": False}
    arch = projection.architecture_from_hf_config(config, "llama-3-8b")
    assert (arch.head_dim, arch.num_key_value_heads) == (128, 8)
    assert projection.parameters(arch, projection.position_work("rope", arch, 8)) == 8_030_261_248
    with pytest.raises(ValueError, match="config has no 'vocab_size'; needs: hidden_size"):
        projection.architecture_from_hf_config({k: v for k, v in config.items() if k != "vocab_size"})
    with pytest.raises(ValueError, match="'num_key_value_heads' is 5; allowed: a divisor of num_attention_heads"):
        projection.architecture_from_hf_config({**config, "num_key_value_heads": 5})


@pytest.mark.parametrize(("argv", "message"), [
    (["--shape", "gpt-5"], "argument --shape: 'gpt-5' is not allowed; allowed: one of llama-3-8b, llama-3-70b"),
    (["--device", "tpu"], "argument --device: 'tpu' is not allowed; allowed: one of h100, h200, a100, l4"),
    (["--hf-config", "CONFIG"], "argument --hf-config: config has no 'num_hidden_layers'; needs: hidden_size"),
])
def test_cli_refuses_bad_input_in_one_line(argv, message, tmp_path, capsys):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"hidden_size": 64}))
    argv = [str(config) if arg == "CONFIG" else arg for arg in argv]
    try:
        code = main(["project", *argv])
    except SystemExit as exit_:
        code = exit_.code
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1


def test_cli_prints_one_projected_row_per_encoding(capsys):
    assert main(["project", "--shape", "llama-3-8b", "--context", "131072", "--device", "h100"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("PROJECTED")
    rows = {line.split()[0]: line.split() for line in lines[2:]}
    assert set(rows) == set(projection.projected_encodings())
    assert rows["t5"][9] == "NO" and rows["rope"][9] == "yes"  # the (h, L, L) bias does not fit in 80 GB


def test_cpu_check_fits_the_overhead_at_the_shortest_length_and_judges_the_rest():
    # rates no CPU reaches: the roofline is near zero, so the overhead must take up the measured time
    measured = projection_check.Measured(gemm_flops=1e15, bandwidth=1e13, threads=2)
    cells, overhead = projection_check.check(REFERENCE_TABLES, measured)
    assert sorted(cells["seq_len"].unique()) == [256, 1024, 4096] and len(cells) == 24
    shortest = cells[cells["seq_len"] == 256]
    # least squares over launches: the residuals of the fitted length are orthogonal to the launches
    assert overhead > 0
    assert ((shortest["measured_ms"] - shortest["predicted_ms"]) * shortest["launches"]).sum() == pytest.approx(
        0, abs=1e-6)
    assert cells["ratio"].tolist() == pytest.approx((cells["predicted_ms"] / cells["measured_ms"]).tolist())
    assert set(cells.loc[cells["judged"], "seq_len"]) == {1024, 4096}
    assert projection_check.passes(cells) == bool(cells.loc[cells["judged"], "ratio"].between(0.5, 2).all())
    assert not projection_check.passes(pd.DataFrame({"judged": [True, False], "within": [False, True]}))


def test_cpu_check_fits_no_negative_overhead_where_the_roofline_alone_is_slower_than_measured():
    crawling = projection_check.Measured(gemm_flops=1e6, bandwidth=1e6, threads=2)
    cells, overhead = projection_check.check(REFERENCE_TABLES, crawling)
    assert overhead == 0.0 and cells["predicted_ms"].tolist() == pytest.approx(cells["roofline_ms"].tolist())


def test_the_table_the_report_reads_holds_every_architecture_device_context_and_encoding(tmp_path):
    from posbench.report import projection as page

    frame = pd.read_csv(projection.write_table(tmp_path))
    assert len(frame) == (len(projection.ARCHITECTURES) * len(projection.DEVICES) * len(projection.CONTEXTS)
                          * len(projection.projected_encodings()))
    assert frame["label"].eq(projection.PROJECTED).all() and list(frame.columns) == projection.Projection.columns()
    focus = frame[(frame["shape"] == "llama-3-8b") & (frame["device"] == "h100")]
    rope = focus[(focus["encoding"] == "rope") & (focus["context"] == 131072)].iloc[0]
    assert rope["kv_cache_bytes"] == 16 * 2**30 and rope["fits"]
    cells = {row[0][0][0]: [cell[0][0] for cell in row] for row in page.focus_rows(focus)}
    assert set(cells) == set(projection.projected_encodings())
    assert cells["rope"][3] == f"{rope['decode_ms_per_token']:.3g}"  # decode at 128k
    assert cells["t5"][-1].endswith("(does not fit)") and not cells["rope"][-1].endswith("(does not fit)")
