"""A RoPE built from a transformers config: planted configs of both formats, each against Hugging Face's
formulas (written out in tests/test_encodings.py), and the config mistakes refused in one line."""

import json
import math

import pytest
import torch
from test_encodings import hf_inv_freq, hf_rotate, rotate, to_neighbours

from posbench.__main__ import main
from posbench.encodings import from_hf_config, hf_encoding_options
from posbench.profile import ProfileConfig
from posbench.train import TrainConfig, resolve

# Llama 3.1's RoPE (rope_theta, rope_scaling and lengths as its config.json has them) on a narrower model:
# 8 heads of 32 instead of 32 of 128, so the test turns 16 pairs.
LLAMA_31 = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 128256,
            "hidden_size": 256, "intermediate_size": 1024, "num_attention_heads": 8, "num_key_value_heads": 2,
            "max_position_embeddings": 131072, "rope_theta": 500000.0,
            "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                             "original_max_position_embeddings": 8192, "rope_type": "llama3"}}

# Phi-3-mini-128k's layout: "type": "longrope", no factor, original_max_position_embeddings at the top level
# (4,096 of 131,072); 4 heads of 32 here, so 16 factors a set (Phi-3's own 96-wide heads have 48).
PHI_3 = {"architectures": ["Phi3ForCausalLM"], "hidden_size": 128, "num_attention_heads": 4,
         "max_position_embeddings": 131072, "original_max_position_embeddings": 4096, "rope_theta": 10000.0,
         "rope_scaling": {"type": "longrope",
                          "short_factor": [1.0 + 0.05 * i for i in range(16)],
                          "long_factor": [1.0 + 2.0 * i for i in range(16)]},
         "partial_rotary_factor": 1.0}

# transformers 5: rope_parameters with rope_theta (and here partial_rotary_factor) inside.
V5_YARN = {"hidden_size": 128, "num_attention_heads": 4, "max_position_embeddings": 131072,
           "rope_parameters": {"rope_type": "yarn", "rope_theta": 1000000.0, "factor": 4.0,
                               "original_max_position_embeddings": 32768, "partial_rotary_factor": 0.5}}

# transformers 5, per layer type (Gemma 3's pattern: a linear-scaled global RoPE, a plain local one).
V5_PER_LAYER = {"hidden_size": 128, "num_attention_heads": 4, "head_dim": 64, "max_position_embeddings": 131072,
                "layer_types": ["sliding_attention"] * 5 + ["full_attention"],
                "rope_parameters": {"full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
                                    "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}}

# Gemma 4's global layers: rope_type proportional, a quarter of the full-width ladder: p-RoPE.
V5_PROPORTIONAL = {"hidden_size": 128, "num_attention_heads": 2, "max_position_embeddings": 8192,
                   "rope_parameters": {"full_attention": {"rope_type": "proportional", "rope_theta": 1000000.0,
                                                          "partial_rotary_factor": 0.25}}}


def test_llama_31_config_is_rope_at_base_500k_with_llama3_scaling(float64):
    assert hf_encoding_options(LLAMA_31) == ("rope", {"base": 500000.0, "scaling": LLAMA_31["rope_scaling"]})
    enc = from_hf_config(LLAMA_31, max_len=64)
    assert (enc.d_model, enc.n_heads, enc.rotated, enc.max_len) == (256, 8, 32, 64)
    inv, factor = hf_inv_freq(32, 500000.0, LLAMA_31["rope_scaling"])
    torch.testing.assert_close(enc.angles.inv_freq, inv, atol=0, rtol=1e-12)
    x = torch.randn(2, 80, 32)
    torch.testing.assert_close(rotate(enc, to_neighbours(x), torch.arange(80)),
                               to_neighbours(hf_rotate(x, torch.arange(80), inv, factor)), atol=1e-9, rtol=0)


@pytest.mark.parametrize("length", [100, 4096, 4097])
def test_phi_3_config_is_longrope_with_the_factor_and_attention_factor_hf_derives(length, float64):
    """factor 131072 / 4096 = 32, attention factor sqrt(1 + ln 32 / ln 4096) = sqrt(17/12); short factors
    up to 4,096 positions, long ones from 4,097 on."""
    name, options = hf_encoding_options(PHI_3)
    scaling = options["scaling"]
    assert name == "rope" and set(options) == {"scaling"}
    assert (scaling["rope_type"], scaling["factor"], scaling["original_max_position_embeddings"]) == (
        "longrope", 32.0, 4096)
    enc = from_hf_config(PHI_3, max_len=128)
    assert enc.angles.attention_factor == pytest.approx(math.sqrt(17 / 12), rel=1e-12)
    inv, factor = hf_inv_freq(32, 10000.0, scaling, seq_len=length)
    x = torch.randn(1, length, 32)
    torch.testing.assert_close(rotate(enc, to_neighbours(x), torch.arange(length)),
                               to_neighbours(hf_rotate(x, torch.arange(length), inv, factor)), atol=1e-8, rtol=0)


def test_transformers_5_rope_parameters_carry_the_base_and_the_rotated_part(float64):
    name, options = hf_encoding_options(V5_YARN)
    assert name == "rope" and options == {
        "base": 1000000.0, "rotary_fraction": 0.5,
        "scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}}
    enc = from_hf_config(V5_YARN, max_len=16)
    inv, factor = hf_inv_freq(16, 1000000.0, options["scaling"])  # half of a 32-wide head turns
    assert enc.rotated == 16 and enc.angles.attention_factor == pytest.approx(factor)
    torch.testing.assert_close(enc.angles.inv_freq, inv, atol=0, rtol=1e-12)


def test_a_config_without_rope_keys_is_plain_rope_and_head_dim_sets_the_width():
    assert hf_encoding_options({"hidden_size": 64, "num_attention_heads": 4}) == ("rope", {})
    enc = from_hf_config({"hidden_size": 64, "num_attention_heads": 4, "head_dim": 32, "rope_scaling": None},
                         max_len=8)
    assert (enc.d_model, enc.n_heads, enc.rotated, enc.max_len) == (128, 4, 32, 8)


def test_per_layer_rope_parameters_are_read_for_the_layer_type_given_and_refused_without_one():
    assert hf_encoding_options(V5_PER_LAYER, "sliding_attention") == ("rope", {})
    assert hf_encoding_options(V5_PER_LAYER, "full_attention") == (
        "rope", {"base": 1000000.0, "scaling": {"rope_type": "linear", "factor": 8.0}})
    with pytest.raises(ValueError) as several:
        hf_encoding_options(V5_PER_LAYER)
    assert str(several.value) == ("rope_parameters is per layer type (full_attention, sliding_attention); one "
                                  "encoding serves every layer here: choose one (layer_type, --hf-layer-type)")
    with pytest.raises(ValueError) as unknown:
        hf_encoding_options(V5_PER_LAYER, "chunked_attention")
    assert str(unknown.value) == ("layer type 'chunked_attention' is not in rope_parameters; allowed: "
                                  "full_attention, sliding_attention")
    with pytest.raises(ValueError, match=r"^layer type 'full_attention' given, but rope_parameters is one set"):
        hf_encoding_options(V5_YARN, "full_attention")
    assert from_hf_config(V5_PER_LAYER, layer_type="full_attention", max_len=8).d_model == 4 * 64


def test_proportional_rope_is_p_rope_over_the_full_head(float64):
    """HF's _compute_proportional_rope_parameters: int(0.25 · 64 // 2) = 8 pairs at
    base^(-2i/64), the other 24 frequencies 0 (unturned)."""
    assert hf_encoding_options(V5_PROPORTIONAL) == ("p_rope", {"base": 1000000.0, "kept_fraction": 0.25})
    enc = from_hf_config(V5_PROPORTIONAL, max_len=8)
    hf = torch.cat([1.0 / 1000000.0 ** (torch.arange(0, 16, 2, dtype=torch.float64) / 64), torch.zeros(24)])
    torch.testing.assert_close(enc.angles.inv_freq, hf[:8], atol=0, rtol=1e-12)
    assert enc.rotated == 16 and not hf[8:].any()


@pytest.mark.parametrize("config,message", [
    ({"rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096, "mscale": 0.7}},
     "rope_scaling key 'mscale' is not allowed for rope_type 'yarn'; allowed: attention_factor, beta_fast, "
     "beta_slow, factor, original_max_position_embeddings, partial_rotary_factor, rope_theta, rope_type"),
    ({"rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 1e4, "theta_scale": 2}}},
     "rope_parameters.full_attention key 'theta_scale' is not allowed for rope_type 'default'; allowed: "
     "partial_rotary_factor, rope_theta, rope_type"),
    ({"rope_scaling": {"type": "su", "short_factor": [1.0], "long_factor": [1.0]}},
     "rope_scaling.rope_type 'su' is not allowed; allowed: default, proportional, linear, dynamic, yarn, llama3, "
     "longrope"),
    ({"rope_theta": 1e4, "rope_local_base_freq": 1e4},
     "config key 'rope_local_base_freq' is not read here; allowed rotary keys: partial_rotary_factor, "
     "rope_parameters, rope_scaling, rope_theta"),
    ({"rope_parameters": {"rope_theta": 1e4}, "rope_scaling": {"rope_type": "linear", "factor": 2.0}},
     "config has both rope_parameters and rope_scaling; allowed: one of them (transformers 5 writes "
     "rope_parameters, 4 rope_scaling)"),
    ({"rope_scaling": {"rope_type": "longrope", "short_factor": [1.0], "long_factor": [1.0]}},
     "rope_scaling (longrope) needs original_max_position_embeddings, in it or at the top level; allowed there: "
     "original_max_position_embeddings, max_position_embeddings"),
    ([1, 2], "a transformers config is a JSON object, got list")])
def test_config_mistakes_are_refused_in_one_line_naming_the_key(config, message):
    with pytest.raises(ValueError) as error:
        hf_encoding_options(config)
    assert str(error.value) == message


def test_factors_that_do_not_fit_the_heads_are_refused_when_built():
    with pytest.raises(ValueError, match=r"^scaling \(longrope\) short_factor has 16 values; a rotated width of "
                                         r"64 needs 32, one per frequency pair$"):
        from_hf_config({**PHI_3, "hidden_size": 256}, max_len=8)


# ----- the command line ----------------------------------------------------------------------------

def write(tmp_path, config, name="config.json"):
    path = tmp_path / name
    path.write_text(config if isinstance(config, str) else json.dumps(config))
    return path


def test_train_takes_the_rope_of_a_config_and_records_its_options(tmp_path, capsys):
    """small: 4 heads of 32, as PHI_3's, so its 16 factors a set fit; tiny's heads of 16 would need 8."""
    out = tmp_path / "record.json"
    args = ["train", "--task", "copy", "--size", "small", "--hf-config", str(write(tmp_path, PHI_3)), "--steps", "2",
            "--batch-size", "4", "--log-every", "1", "--out", str(out)]
    assert main(args) == 0
    record = json.loads(out.read_text())
    _, options = hf_encoding_options(PHI_3)
    assert record["encoding"] == "rope" and record["config"]["encoding_options"] == options
    assert record["model"]["encoding_options"] == options
    args[4] = "tiny"
    assert main(args) == 2  # heads of 16: 8 pairs
    assert capsys.readouterr().err.endswith("error: scaling (longrope) short_factor has 16 values; a rotated width "
                                            "of 16 needs 8, one per frequency pair\n")


def test_profile_takes_the_rope_of_a_config_and_records_its_options(tmp_path):
    out = tmp_path / "record.json"
    path = write(tmp_path, V5_PER_LAYER)
    assert main(["profile", "--hf-config", str(path), "--hf-layer-type", "full_attention", "--size", "tiny",
                 "--seq-len", "16", "--warmup", "0", "--min-repeats", "1", "--min-seconds", "0",
                 "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    assert record["config"]["encoding"] == "rope"
    assert record["config"]["encoding_options"] == {"base": 1000000.0,
                                                    "scaling": {"rope_type": "linear", "factor": 8.0}}


def test_records_without_options_keep_the_config_they_had():
    """No encoding_options in a record's config unless given: records written before keep their config_hash."""
    assert "encoding_options" not in ProfileConfig(encoding="rope", size="tiny", seq_len=16).record_config()
    assert "encoding_options" not in resolve(TrainConfig(task="copy", encoding="rope")).record_config()
    given = resolve(TrainConfig(task="copy", encoding="rope", encoding_options={"base": 500.0}))
    assert given.record_config()["encoding_options"] == {"base": 500.0} and given.model.encoding_options == {
        "base": 500.0}


@pytest.mark.parametrize("command", ["train", "profile"])
@pytest.mark.parametrize("content,allowed", [
    (None, "a readable JSON file holding one object"),
    ("{not json", "a readable JSON file holding one object"),
    ("[1, 2]", "a readable JSON file holding one object")])
def test_a_bad_config_file_is_one_line_and_exit_2(command, content, allowed, tmp_path, capsys):
    path = tmp_path / "missing.json" if content is None else write(tmp_path, content)
    cell = ["--task", "copy"] if command == "train" else ["--size", "tiny", "--seq-len", "8"]
    with pytest.raises(SystemExit) as stop:
        main([command, *cell, "--hf-config", str(path), "--out", str(tmp_path / "out.json")])
    assert stop.value.code == 2
    assert capsys.readouterr().err == (f"posbench {command}: error: argument --hf-config: {str(path)!r} is not "
                                       f"allowed; allowed: {allowed}\n")
    assert not (tmp_path / "out.json").exists()


@pytest.mark.parametrize("command", ["train", "profile"])
def test_a_config_this_cannot_read_is_one_line_and_exit_2(command, tmp_path, capsys):
    path = write(tmp_path, V5_PER_LAYER)
    cell = ["--task", "copy"] if command == "train" else ["--size", "tiny", "--seq-len", "8"]
    assert main([command, *cell, "--hf-config", str(path), "--out", str(tmp_path / "out.json")]) == 2
    assert capsys.readouterr().err == (
        f"posbench {command}: error: argument --hf-config: rope_parameters is per layer type (full_attention, "
        f"sliding_attention); one encoding serves every layer here: choose one (layer_type, --hf-layer-type)\n")
    assert not (tmp_path / "out.json").exists()


def test_encoding_and_hf_config_exclude_each_other_and_a_layer_type_needs_a_config(tmp_path, capsys):
    path = write(tmp_path, LLAMA_31)
    with pytest.raises(SystemExit) as stop:
        main(["train", "--task", "copy", "--encoding", "rope", "--hf-config", str(path), "--out", "x.json"])
    assert stop.value.code == 2 and "not allowed with argument" in capsys.readouterr().err
    assert main(["train", "--task", "copy", "--encoding", "rope", "--hf-layer-type", "full_attention",
                 "--out", str(tmp_path / "out.json")]) == 2
    assert capsys.readouterr().err == ("posbench train: error: argument --hf-layer-type: applies only with "
                                       "--hf-config\n")
