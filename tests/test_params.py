"""Exact parameter counts against hand-derived formulas, and the article's ~4× concat claim."""

import pytest

import posbench

D, H, LAYERS, VOCAB, MAX_LEN = 512, 8, 6, 256, 1024


def formula(token_width, width, position):
    """Embedding V·t; per layer 4w² (q, k, v, out) + 2·w·4w (feed-forward) + 4w (two LayerNorms);
    final LayerNorm 2w; output head w·V; plus the encoding's own parameters."""
    per_layer = 4 * width**2 + 2 * width * 4 * width + 4 * width
    return VOCAB * token_width + LAYERS * per_layer + 2 * width + width * VOCAB + position


EXPECTED = {  # name -> (token width, model width, position parameters)
    "none": (D, D, 0),
    "sinusoidal": (D, D, 0),
    "learned": (D, D, MAX_LEN * D),
    "rope": (D, D, 0),
    "alibi": (D, D, 0),
    "t5": (D, D, 32 * H),
    "sinusoidal_2d": (D, D, 0),
    "rope_2d": (D, D, 0),
    "sinusoidal_concat": (D, 2 * D, 0),
    "learned_concat": (D, 2 * D, MAX_LEN * D),
    "sinusoidal_concat_fixed": (D // 2, D, 0),
    "learned_concat_fixed": (D // 2, D, MAX_LEN * D // 2),
    "rope_theta500k": (D, D, 0),
    "rope_p50": (D, D, 0),
    "xpos": (D, D, 0),
    "mrope": (D, D, 0),
    "mrope_qwen2vl": (D, D, 0),
    "mrope_qwen3vl": (D, D, 0),
    "mrope_mosaic": (D, D, 0),
    "p_rope": (D, D, 0),
    "p_rope_25": (D, D, 0),
    "sinusoidal_randomized": (D, D, 0),
    "learned_randomized": (D, D, MAX_LEN * D),
    "rope_randomized": (D, D, 0),
    "alibi_randomized": (D, D, 0),
    "kerple": (D, D, 2 * H),  # r1, r2 per head
    "fire": (D, D, (1 * 32 + 32) + (32 * H + H) + 2),  # MLP 1 -> 32 -> H with biases; c and the threshold
    "sinusoidal_per_modality": (D, D, 0),  # sinusoidal on text, sinusoidal_2d on patches: nothing learned
    "rope_per_modality": (D, D, 0),  # rope on text, rope_2d on patches
    "pope": (D, D, H * (D // H)),  # δ: one phase shift per head and dimension, shared by the layers
    "irope": (D, D, 0),  # RoPE, chunks and a temperature: nothing learned
    "rnope_swa": (D, D, 0),
    "cope": (D, D, LAYERS * (D // H) * (MAX_LEN + 1)),  # per layer a (d_head, npos = max_len + 1) table
    "fox": (D, D, LAYERS * (D * H + H)),  # per layer a linear map to one forget gate per head, with biases
    "stick_breaking": (D, D, 0),
    "path": (D, D, LAYERS * (D * 32 + 32 * D + 3 * D + D * H + H)),  # per layer w's d -> 32 -> d, conv 3, β's
}


def build(name):
    cfg = posbench.ModelConfig(vocab_size=VOCAB, d_model=D, n_layers=LAYERS, n_heads=H,
                               max_len=MAX_LEN, encoding=name)
    return posbench.build_model(cfg)


WIDTHS = {"none": (D, D), "add": (D, D), "concat": (D, 2 * D), "concat_fixed": (D // 2, D)}  # combine -> widths


def expected(name):
    """``EXPECTED[name]``; for an encoding not listed there whose traits declare no trained position parameters,
    the widths its ``combine`` gives and no position parameters. A trained one must be listed."""
    if name in EXPECTED:
        return EXPECTED[name]
    traits = posbench.encodings.traits(name)
    if traits.trained:
        pytest.fail(f"encoding {name!r} has trained position parameters and no count in EXPECTED "
                    "(tests/test_params.py): add its (token width, model width, position parameters)")
    return (*WIDTHS[traits.combine], 0)


def test_every_expected_count_is_of_a_registered_encoding():
    assert sorted(set(EXPECTED) - set(posbench.encodings.names())) == []


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_counts_derived_from_traits_are_the_listed_ones(name):
    traits = posbench.encodings.traits(name)
    if not traits.trained:
        assert EXPECTED[name] == (*WIDTHS[traits.combine], 0)


@pytest.mark.parametrize("name", posbench.encodings.names())
def test_exact_parameter_count(name):
    token_width, width, position = expected(name)
    counts = posbench.count_params(build(name))
    assert counts == {"total": formula(token_width, width, position), "position": position,
                      "rest": formula(token_width, width, 0)}


def attention_projection_params(model):
    return sum(b.attn.qkv.weight.numel() + b.attn.out.weight.numel() for b in model.blocks)


def test_naive_concat_quadruples_attention_projections_fixed_concat_does_not():
    add = attention_projection_params(build("sinusoidal"))
    assert attention_projection_params(build("sinusoidal_concat")) == 4 * add
    assert attention_projection_params(build("sinusoidal_concat_fixed")) == add


def test_d_pos_option_sets_the_concat_width():
    cfg = posbench.ModelConfig(d_model=64, n_layers=1, n_heads=4, encoding="learned_concat",
                               encoding_options={"d_pos": 32}, max_len=10)
    model = posbench.build_model(cfg)
    assert model.width == 96 and posbench.count_params(model)["position"] == 10 * 32
