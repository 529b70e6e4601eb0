"""Each encoding against its definition: reference values, invariances, the article's errors."""

import math

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from posbench import encodings
from posbench.encodings import PositionalEncoding
from posbench.encodings.alibi import alibi_slopes
from posbench.encodings.grid import Rope2D, Sinusoidal2D
from posbench.encodings.t5 import relative_position_bucket
from posbench.flops import TORCH_FORMULAS
from posbench.positions import Positions

P = Positions.arange

REQUIRED = {"none", "sinusoidal", "learned", "sinusoidal_concat", "learned_concat",
            "sinusoidal_concat_fixed", "learned_concat_fixed", "rope", "alibi", "t5",
            "sinusoidal_2d", "rope_2d"}


def build(name, d_model=32, n_heads=4, max_len=64, **options):
    return encodings.build(name, d_model=d_model, n_heads=n_heads, max_len=max_len, **options)


def test_registry_lists_the_catalogue():
    assert REQUIRED <= set(encodings.names())


def test_unknown_encoding_names_the_allowed_values():
    with pytest.raises(ValueError, match=r"unknown encoding 'rotary'; allowed: .*rope"):
        build("rotary")


def test_unknown_family_option_is_an_error():
    with pytest.raises(ValueError, match="alibi"):
        build("alibi", num_buckets=8)


@pytest.mark.parametrize("name,value", [("d_model", 0), ("n_heads", -1), ("max_len", 2.5)])
def test_non_positive_sizes_are_rejected(name, value):
    with pytest.raises(ValueError, match=name):
        build("none", **{name: value})


def test_the_base_encoding_is_unmasked_by_default_as_build_is():
    assert PositionalEncoding(32, 4, 64).causal is False and build("none").causal is False
    absolute = encodings.absolute
    assert [cls(32, 4, 64, mode="add").causal for cls in (absolute.AbsoluteEncoding, absolute.Sinusoidal,
                                                           absolute.Learned)] == [False, False, False]


@pytest.mark.parametrize("name", encodings.names())
def test_every_encoding_keeps_the_causal_flag_it_was_built_with(name):
    assert build(name, causal=True).causal is True and build(name).causal is False


@pytest.mark.parametrize("name", ["none", "sinusoidal", "rope", "alibi", "t5"])
def test_a_bias_that_is_looked_up_costs_no_flops_to_build(name):
    assert build(name).bias_flops(16, 16, "infer") == 0 == build(name).bias_flops(16, 16, "train")


def test_only_rotary_encodings_can_be_rescaled():
    with pytest.raises(ValueError, match=r"^Sinusoidal has no rotary frequencies to scale; eval scaling applies "
                                         r"to the RoPE family \(rope, rope_\*, p_rope\*, xpos, mrope\)$"):
        build("sinusoidal").rescaled(None)


# ----- sinusoidal ---------------------------------------------------------------------------

def test_sinusoidal_table_is_exactly_the_formula(float64):
    d, n = 16, 50
    table = build("sinusoidal", d_model=d, max_len=n).table(n)
    for pos in (0, 1, 7, 49):
        for i in range(d // 2):
            angle = pos / 10000 ** (2 * i / d)
            assert table[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-12)
            assert table[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-12)


def test_sinusoidal_shift_is_a_block_diagonal_rotation(float64):
    """PE(pos + k) = M_k · PE(pos), M_k = diag of 2×2 rotations by k·ω_i (same M_k for every pos)."""
    d, k = 64, 13
    table = build("sinusoidal", d_model=d, max_len=300).table(300)  # (300, d)
    omega = 10000.0 ** (-torch.arange(0, d, 2) / d)  # (d/2,)
    c, s = torch.cos(k * omega), torch.sin(k * omega)
    rotation = torch.zeros(d, d)
    for i in range(d // 2):  # [sin(a+b), cos(a+b)] = [[cos b, sin b], [-sin b, cos b]] · [sin a, cos a]
        rotation[2 * i: 2 * i + 2, 2 * i: 2 * i + 2] = torch.tensor([[c[i], s[i]], [-s[i], c[i]]])
    shifted = table[: 300 - k] @ rotation.T
    assert (shifted - table[k:]).abs().max().item() < 1e-9


def test_sinusoidal_low_dimensions_turn_fastest(float64):
    """The phase advance per position of pair i is 1/10000^(2i/d): pair 0 turns fastest (period 2π),
    the last pair slowest (period ≈ 2π·10000). The article says low dimensions change slowly: backwards."""
    d = 128
    table = build("sinusoidal", d_model=d, max_len=4).table(2)
    advance = torch.atan2(table[1, 0::2], table[1, 1::2])  # phase at pos 1 minus phase at pos 0 (= 0)
    expected = 10000.0 ** (-torch.arange(0, d, 2) / d)
    assert torch.allclose(advance, expected, atol=1e-12)
    periods = 2 * math.pi / advance
    assert periods[0].item() == pytest.approx(2 * math.pi)
    assert periods[-1].item() == pytest.approx(2 * math.pi * 10000 ** ((d - 2) / d))
    assert bool((periods[1:] > periods[:-1]).all())


def test_sinusoidal_extends_beyond_its_cache(float64):
    enc = build("sinusoidal", max_len=8)
    far = enc.lookup(Positions.from_ids(torch.tensor([100])))
    assert torch.allclose(far, build("sinusoidal", max_len=128).table(101)[100:])


def test_sinusoidal_lookup_one_past_the_cache_is_the_formula(float64):
    """Ids up to ``max_len`` (one past the last cached row) are computed: still the formula."""
    enc = build("sinusoidal", d_model=8, max_len=8)
    ids = torch.tensor([3, 8, 0])
    angle = ids.double()[:, None] * 10000.0 ** (-torch.arange(0, 8, 2) / 8)  # (3, 4)
    expected = torch.stack([angle.sin(), angle.cos()], -1).flatten(-2)
    torch.testing.assert_close(enc.lookup(Positions.from_ids(ids)), expected, atol=1e-12, rtol=0)
    torch.testing.assert_close(enc.table(9)[ids], expected, atol=1e-12, rtol=0)


def test_sinusoid_angles_are_float64_at_a_far_position():
    """In the default float32 too: float32 frequencies would put sin(10⁶ · 0.1) off by about 6e-3."""
    row = encodings.absolute.sinusoid_table(torch.tensor([10**6]), 8)[0]
    angles = [10**6 / 10000 ** (2 * i / 8) for i in range(4)]
    expected = torch.tensor([f(a) for a in angles for f in (math.sin, math.cos)])
    assert row.dtype == torch.float32
    torch.testing.assert_close(row, expected, atol=1e-6, rtol=0)


def test_sinusoids_from_the_cache_and_of_host_ids_beyond_it_are_on_the_encodings_device():
    """The meta device stands in for an accelerator; the positions' ids stay on the host."""
    enc = build("sinusoidal", max_len=8).to("meta")
    assert enc.lookup(P(10)).device.type == "meta" and enc.table(8).device.type == "meta"  # all 8 from the cache


def test_sinusoids_beyond_the_cache_are_computed_on_the_device_of_their_positions():
    """The meta device stands in for a GPU: ids on it (as a model's own positions are) must not meet a
    frequency vector left on the host — past a table's cache and for sinusoidal_2d's every call."""
    from posbench.encodings.absolute import sinusoid_table
    from posbench.positions import Positions

    ids = torch.arange(12, device="meta")
    assert sinusoid_table(ids, 8).device.type == "meta"
    enc = build("sinusoidal", max_len=8).to("meta")
    assert enc.table(12).device.type == "meta"
    assert enc.lookup(Positions.arange(12, device="meta")).shape == (12, 32)
    grid = build("sinusoidal_2d", max_len=16).to("meta")
    assert grid.lookup(grid.positions(16, "meta")).device.type == "meta"


@pytest.mark.parametrize("name", ["sinusoidal", "learned"])
def test_added_positions_are_the_table_rows_in_the_tokens_dtype(name):
    enc = build(name, d_model=16, max_len=8)
    tokens = torch.randn(2, 5, 16)
    torch.testing.assert_close(enc.inject(tokens, P(5, offset=3)), tokens + enc.table(8)[3:], atol=0, rtol=0)
    half = enc.inject(tokens.to(torch.bfloat16), P(5, offset=3))
    assert half.dtype == torch.bfloat16
    torch.testing.assert_close(half, tokens.to(torch.bfloat16) + enc.table(8)[3:].to(torch.bfloat16), atol=0, rtol=0)


def test_naive_concat_appends_the_table_rows_to_every_sequence():
    enc = build("learned_concat", d_model=16, d_pos=4, max_len=8)
    tokens = torch.randn(3, 5, 16)
    x = enc.inject(tokens, P(5))
    assert x.shape == (3, 5, 20) and torch.equal(x[..., :16], tokens)
    assert all(torch.equal(x[b, :, 16:], enc.weight[:5]) for b in range(3))


@pytest.mark.parametrize("options,message", [
    ({"mode": "sum"}, "mode 'sum'; allowed: add, concat, concat_fixed"),
    ({"mode": "add", "d_pos": 8}, r"d_pos must equal d_model \(16\) when adding, got 8"),
    ({"mode": "concat_fixed", "d_pos": 16}, r"d_pos must be below d_model \(16\) for concat_fixed, got 16"),
    ({"mode": "concat", "d_pos": 0}, "d_pos must be a positive integer, got 0"),
    ({"mode": "concat", "d_pos": 5}, "sinusoidal width must be even, got 5")])
def test_absolute_options_fail_naming_the_option(options, message):
    with pytest.raises(ValueError, match=message):
        encodings.absolute.Sinusoidal(16, 2, 8, **options)


def test_absolute_repr_and_default_widths():
    assert build("learned_concat_fixed", d_model=16, max_len=8).extra_repr() == (
        "d_model=16, n_heads=4, max_len=8, mode=concat_fixed, d_pos=8")
    assert build("sinusoidal_concat", d_model=16, max_len=8).d_pos == 16
    assert build("sinusoidal", d_model=16, max_len=8, d_pos=16).d_pos == 16  # d_pos = d_model is allowed when adding


# ----- learned ------------------------------------------------------------------------------

def test_learned_table_serves_exactly_max_len_positions_and_empty_ones():
    enc = build("learned", d_model=8, max_len=6)
    assert torch.equal(enc.lookup(P(6)), enc.weight) and torch.equal(enc.table(6), enc.weight)
    assert enc.lookup(P(0)).shape == (0, 8) and enc.lookup(P(0, offset=100)).shape == (0, 8)  # none, after a cache
    with pytest.raises(ValueError, match=r"6 rows \(max_len\) but 7 positions were asked for; .* max_len >= 7"):
        enc.table(7)


@pytest.mark.parametrize("name", ["learned", "learned_concat", "learned_concat_fixed"])
def test_learned_beyond_its_table_names_both_numbers(name):
    enc = build(name, max_len=16)
    with pytest.raises(ValueError, match=r"16 rows .* 17 positions"):
        enc.inject(torch.zeros(1, 17, enc.token_width), enc.positions(17))


@pytest.mark.parametrize("name", ["learned", "t5", "learned_concat_fixed"])
def test_gradients_reach_position_parameters(name):
    enc = build(name)
    params = list(enc.parameters())
    assert params, "a learned encoding must own parameters"
    x = enc.inject(torch.randn(2, 10, enc.token_width), enc.positions(10))  # (2, 10, width)
    bias = enc.attention_bias(P(10), P(10))
    loss = x.pow(2).sum() + (0 if bias is None else bias.pow(2).sum())
    loss.backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in params)


@pytest.mark.parametrize("name", encodings.names())
def test_checkpoints_hold_only_learned_parameters(name):
    """Tables computed from a formula (sinusoids, rotary angles, ALiBi slopes) are non-persistent
    buffers: a checkpoint carries exactly the learned parameters."""
    enc = build(name)
    assert set(enc.state_dict()) == {n for n, _ in enc.named_parameters()}


# ----- widths -------------------------------------------------------------------------------

@pytest.mark.parametrize("name,d_pos,token,model", [
    ("sinusoidal", None, 32, 32), ("learned", None, 32, 32),
    ("sinusoidal_concat", None, 32, 64), ("learned_concat", 8, 32, 40),
    ("sinusoidal_concat_fixed", None, 16, 32), ("learned_concat_fixed", 8, 24, 32)])
def test_input_widths(name, d_pos, token, model):
    options = {} if d_pos is None else {"d_pos": d_pos}
    enc = build(name, **options)
    assert (enc.token_width, enc.model_width) == (token, model)
    x = enc.inject(torch.randn(3, 5, token), enc.positions(5))
    assert x.shape == (3, 5, model)


def test_concat_keeps_token_and_position_apart():
    enc = build("sinusoidal_concat_fixed", d_model=32, d_pos=8)
    tokens = torch.randn(2, 6, 24)
    x = enc.inject(tokens, enc.positions(6))
    assert torch.equal(x[..., :24], tokens)
    assert torch.allclose(x[0, :, 24:], enc.table(6))


# ----- RoPE ---------------------------------------------------------------------------------

def rotate(enc, x, ids):
    """``x`` rotated as a query at integer ``ids`` (the hook turns q and k alike for RoPE)."""
    return enc.rotate(x, x, Positions.from_ids(ids))[0]


def rotary_logits(enc, q, k, ids):
    q, k = enc.rotate(q, k, Positions.from_ids(ids))
    return q @ k.transpose(-1, -2)


def test_rope_logits_depend_only_on_offset(float64):
    enc = build("rope", d_model=64, n_heads=4, max_len=256)
    q, k = torch.randn(4, 20, 16), torch.randn(4, 20, 16)
    base = rotary_logits(enc, q, k, torch.arange(20))
    for shift in (1, 37, 250):  # 250 + 19 goes beyond the cache of 256: computed on the fly
        assert torch.allclose(base, rotary_logits(enc, q, k, torch.arange(20) + shift), atol=1e-9)


def test_rope_matches_complex_rotation_reference(float64):
    """Neighbour pairing: dims (2i, 2i+1) form the complex number x_2i + i·x_2i+1, turned by pos·θ_i."""
    d_head, L = 16, 9
    enc = build("rope", d_model=d_head * 2, n_heads=2, max_len=L)
    x = torch.randn(L, d_head)
    theta = 10000.0 ** (-torch.arange(0, d_head, 2) / d_head)
    z = torch.complex(x[:, 0::2], x[:, 1::2]) * torch.polar(
        torch.ones(L, d_head // 2), torch.arange(L)[:, None] * theta)
    assert torch.allclose(rotate(enc, x, torch.arange(L)), torch.stack([z.real, z.imag], -1).flatten(-2),
                          atol=1e-12)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_rope_rotates_half_precision_in_float32_and_keeps_its_dtype(dtype):
    enc = build("rope", d_model=64, n_heads=4, max_len=16)
    x = torch.randn(2, 4, 16, 16).to(dtype)
    rotated = rotate(enc, x, torch.arange(16))
    assert rotated.dtype == dtype
    assert torch.equal(rotated, rotate(enc, x.float(), torch.arange(16)).to(dtype))


@pytest.mark.parametrize("name", ["rope", "xpos"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rope_still_rotates_after_the_module_is_cast(dtype, name):
    """``Module.to(dtype)`` casts buffers; the rotation must survive it (a complex buffer would lose its sines)."""
    enc = build(name, d_model=64, n_heads=4, max_len=16)
    x = torch.randn(4, 16, 16)
    expected = rotate(enc, x, torch.arange(16))
    cast = build(name, d_model=64, n_heads=4, max_len=16).to(dtype)
    assert torch.allclose(rotate(cast, x, torch.arange(16)), expected, atol=0.05 if dtype == torch.bfloat16 else 1e-6)


def test_rope_turns_positions_beyond_the_cache_exactly_in_a_half_precision_model():
    enc = build("rope", d_model=64, n_heads=4, max_len=16)
    x, beyond = torch.randn(4, 3, 16), torch.arange(5000, 5003)
    expected = rotate(enc, x, beyond)  # float32 model
    assert torch.allclose(rotate(enc.to(torch.bfloat16), x, beyond), expected, atol=1e-6)


def test_rope_preserves_norms(float64):
    enc = build("rope", max_len=32)
    x = torch.randn(2, 4, 32, 8)
    assert torch.allclose(rotate(enc, x, torch.arange(32)).norm(dim=-1), x.norm(dim=-1))


def test_rope_2d_depends_only_on_row_and_column_offsets(float64):
    enc = build("rope_2d", d_model=64, n_heads=4, max_len=64, grid=(8, 8))
    q, k = torch.randn(30, 16), torch.randn(30, 16)
    rows, cols = torch.randint(0, 8, (30,)), torch.randint(0, 8, (30,))
    pos = torch.stack([rows, cols], -1)
    shifted = pos + torch.tensor([3, 5])
    assert torch.allclose(rotary_logits(enc, q, k, pos), rotary_logits(enc, q, k, shifted), atol=1e-9)
    moved_row_only = pos.clone()
    moved_row_only[0, 0] += 1
    assert not torch.allclose(rotary_logits(enc, q, k, pos), rotary_logits(enc, q, k, moved_row_only))


def test_grid_positions_read_row_by_row():
    enc = build("sinusoidal_2d", max_len=12, grid=(3, 4))
    assert enc.positions(6).ids.tolist() == [[0, 0], [0, 1], [0, 2], [0, 3], [1, 0], [1, 1]]


def test_sinusoidal_2d_is_row_sinusoid_then_column_sinusoid(float64):
    enc = build("sinusoidal_2d", d_model=32, max_len=64, grid=(8, 8))
    table = enc.table((8, 8))  # (8, 8, 32)
    one_d = build("sinusoidal", d_model=16, max_len=8).table(8)  # (8, 16)
    assert torch.allclose(table[5, 2, :16], one_d[5]) and torch.allclose(table[5, 2, 16:], one_d[2])


def test_a_grid_is_the_one_given_else_the_smallest_square_ish_that_holds_max_len():
    for name in ("sinusoidal_2d", "rope_2d"):
        assert build(name, max_len=10).grid == (3, 4)  # 4 columns (ceil √10), ceil(10 / 4) rows
        assert build(name, max_len=16).grid == (4, 4)
        assert build(name, max_len=64, grid=(2, 8)).grid == (2, 8)
        assert build(name, max_len=8, grid=(1, 5)).grid == (1, 5) and build(name, max_len=8, grid=(5, 1)).grid == (5, 1)
        for bad in ((0, 4), (4, 0), (-1, 3)):
            with pytest.raises(ValueError) as error:
                build(name, max_len=16, grid=bad)
            assert str(error.value) == f"grid must be two positive integers (rows, cols), got {bad!r}"
    assert Sinusoidal2D(32, 4, 16).causal is False and Rope2D(32, 4, 16).causal is False  # unmasked by default


def test_grid_positions_after_a_cache_continue_row_by_row():
    enc = build("rope_2d", max_len=12, grid=(3, 4))
    assert enc.positions(3, offset=5).ids.tolist() == [[1, 1], [1, 2], [1, 3]]


def test_2d_refusals_name_the_widths():
    with pytest.raises(ValueError, match=r"^rope_2d needs d_model/n_heads divisible by 4, got 24/4$"):
        build("rope_2d", d_model=24, n_heads=4)  # 6 per head: even, not a multiple of 4
    with pytest.raises(ValueError, match=r"^sinusoidal_2d needs d_model divisible by 4, got 18$"):
        build("sinusoidal_2d", d_model=18, n_heads=2)


def test_rope_2d_turns_by_its_base_and_caches_the_longest_axis():
    """Pair j of the first half of a head turns by row · base^(-2j/(d_head/2)), of the second by column;
    the cache holds one row per position of the longest grid axis."""
    enc = build("rope_2d", d_model=32, n_heads=2, max_len=64, grid=(4, 8), base=100.0)  # d_head 16
    turns, keys = enc.rows(Positions.grid(32, 8))  # (32, 8): token 13 sits at row 1, column 5
    assert turns.shape == (32, 8) and torch.equal(turns, keys)
    theta = 100.0 ** (-torch.arange(0, 8, 2, dtype=torch.float64) / 8)  # (4,)
    expected = torch.polar(torch.ones(8, dtype=torch.float64), torch.cat([1 * theta, 5 * theta]))
    assert torch.allclose(turns[13].to(torch.complex128), expected, atol=1e-6)
    assert enc.angles.turns.shape == (8, 4, 2) and enc.angles.inv_freq.dtype == torch.float64
    assert isinstance(enc.angles.width, int) and enc.angles.width == 8


def test_sinusoidal_2d_halves_are_integer_widths():
    enc = build("sinusoidal_2d", d_model=32, max_len=16, grid=(4, 4))
    vectors = enc.lookup(Positions.grid(16, 4))
    assert vectors.shape == (16, 32) and vectors.dtype == torch.get_default_dtype()
    assert torch.equal(vectors[5, :16], build("sinusoidal", d_model=16, max_len=8).table(8)[1].to(vectors.dtype))


def test_the_registry_adds_a_name_once_and_names_every_encoding_when_one_is_unknown():
    from posbench.encodings import registry
    from posbench.encodings.absolute import Sinusoidal

    name = "test_only_sinusoidal_concat"
    try:
        assert registry.register(name, mode="concat")(Sinusoidal) is Sinusoidal
        assert name in encodings.names() and encodings.build(name, d_model=16, n_heads=2, max_len=4).model_width == 32
        with pytest.raises(ValueError) as error:
            registry.register(name)(Sinusoidal)
        assert str(error.value) == f"encoding {name!r} is registered twice"
    finally:
        registry._REGISTRY.pop(name, None)
    with pytest.raises(ValueError) as error:
        encodings.build("rotary", d_model=16, n_heads=2, max_len=4)
    assert str(error.value) == f"unknown encoding 'rotary'; allowed: {', '.join(encodings.names())}"


# ----- ALiBi --------------------------------------------------------------------------------

def test_alibi_slopes_match_the_paper():
    assert alibi_slopes(8) == pytest.approx([2.0 ** -k for k in range(1, 9)])
    # 12 heads: the 8-head slopes, then every other slope of the 16-head sequence (2^-0.5, 2^-1.5, …)
    assert alibi_slopes(12) == pytest.approx([2.0 ** -k for k in range(1, 9)]
                                             + [2.0 ** -(k + 0.5) for k in range(4)])


def test_alibi_is_a_penalty_on_distance():
    enc = build("alibi", n_heads=8, max_len=16)
    bias = enc.attention_bias(P(16), P(16))  # (8, 16, 16)
    assert bias.shape == (8, 16, 16)
    assert bias[0, 10, 3].item() == pytest.approx(-0.5 * 7)
    assert bias[7, 3, 10].item() == pytest.approx(-(2.0 ** -8) * 7)
    assert bool((bias <= 0).all()) and bool((bias.diagonal(dim1=1, dim2=2) == 0).all())


@pytest.mark.parametrize("name", ["alibi", "t5"])
@pytest.mark.parametrize("causal", [False, True])
def test_logit_bias_depends_only_on_offset(name, causal):
    enc = build(name, n_heads=4, max_len=200, causal=causal)
    if name == "t5":
        torch.nn.init.normal_(enc.bias.weight)
    bias = enc.attention_bias(P(200), P(200))
    for k in (1, 5, 150):
        assert torch.equal(bias[:, :-k, :-k], bias[:, k:, k:])


def test_logit_bias_for_a_suffix_of_queries_is_the_matching_rows():
    for name in ("alibi", "t5"):
        enc = build(name, max_len=64, causal=True)
        assert torch.equal(enc.attention_bias(P(40)[35:], P(40)), enc.attention_bias(P(40), P(40))[:, 35:])


# ----- T5 -----------------------------------------------------------------------------------

@pytest.mark.parametrize("relative,bidirectional,bucket", [
    (0, True, 0), (-3, True, 3), (3, True, 19), (-8, True, 8), (-127, True, 15), (-1000, True, 15),
    (1000, True, 31), (5, False, 0), (-5, False, 5), (-20, False, 17), (-112, False, 30), (-113, False, 31),
    (-128, False, 31)])
def test_t5_buckets_match_reference_values(relative, bidirectional, bucket):
    """Hand-computed from the reference rule: exact below max_exact, then
    max_exact + ⌊log(n / max_exact) / log(max_distance / max_exact) · (buckets − max_exact)⌋."""
    got = relative_position_bucket(torch.tensor([relative]), bidirectional, 32, 128)
    assert got.item() == bucket
    assert relative_position_bucket(torch.tensor([relative]), bidirectional).item() == bucket  # the defaults


def reference_t5_bucket(offset, bidirectional, num_buckets=32, max_distance=128):
    """The T5 reference rule (Mesh TensorFlow's ``_relative_position_bucket``, as in HF transformers),
    written out for one offset ``j − i`` in plain Python floats."""
    bucket = 0
    if bidirectional:
        num_buckets //= 2
        bucket += num_buckets if offset > 0 else 0
        n = abs(offset)
    else:
        n = max(-offset, 0)
    max_exact = num_buckets // 2
    if n < max_exact:
        return bucket + n
    large = max_exact + int(math.log(n / max_exact) / math.log(max_distance / max_exact) * (num_buckets - max_exact))
    return bucket + min(large, num_buckets - 1)


def bucket_of_each_offset(enc, k_len):
    """Read the bucket of each offset ``1 − k_len … k_len − 1`` off the encoding's bias by setting
    bucket b's scalar to b in every head (the public behaviour: what attention adds)."""
    (weight,) = enc.parameters()
    n_buckets = weight.shape[0]
    assert weight.shape == (n_buckets, enc.n_heads)  # one scalar per (bucket, head)
    with torch.no_grad():
        weight.copy_(torch.arange(float(n_buckets))[:, None].expand(n_buckets, enc.n_heads))
    table = enc.relative_bias(torch.arange(1 - k_len, k_len), k_len - 1)  # (h, 2k − 1), column k − 1 is offset 0
    assert torch.equal(table, table[:1].expand_as(table))
    return {offset: int(table[0, offset + k_len - 1]) for offset in range(1 - k_len, k_len)}


# Causal, 32 buckets, max_distance 128: log bucket 16 + k starts at distance ⌈16 · 8^(k/16)⌉.
T5_CAUSAL_BUCKET_STARTS = [16, 19, 21, 24, 27, 31, 35, 40, 46, 52, 59, 67, 77, 87, 99, 113]


@pytest.mark.parametrize("causal", [True, False])
def test_t5_default_buckets_beyond_the_exact_range(causal):
    """The defaults (32 buckets, max_distance 128) as built: offsets from −300 to 300 against the
    reference rule, and the cases that a max_distance of 127 would move."""
    enc = encodings.build("t5", d_model=32, n_heads=2, max_len=301, causal=causal)
    buckets = bucket_of_each_offset(enc, 301)
    assert buckets == {offset: reference_t5_bucket(offset, not causal) for offset in buckets}
    if causal:
        assert buckets[-76] == 27  # 28 with max_distance 127
        assert [buckets[-n] for n in T5_CAUSAL_BUCKET_STARTS] == list(range(16, 32))
        assert [buckets[1 - n] for n in T5_CAUSAL_BUCKET_STARTS[1:]] == list(range(16, 31))
        assert buckets[-128] == buckets[-300] == 31  # saturated at and beyond max_distance
        assert all(buckets[n] == 0 for n in range(0, 301))  # the future: one bucket, never attended
    else:
        assert buckets[90] == 30 and buckets[-90] == 14  # 31 and 15 with max_distance 127
        assert buckets[-127] == 15 and buckets[127] == 31 and buckets[-64] == 14 and buckets[64] == 30
        assert [buckets[-n] for n in range(8)] == list(range(8))
        assert [buckets[n] for n in range(1, 8)] == list(range(17, 24))


@pytest.mark.parametrize("causal", [True, False])
def test_t5_family_options_reach_the_buckets(causal):
    enc = encodings.build("t5", d_model=32, n_heads=2, max_len=100, causal=causal, num_buckets=16, max_distance=40)
    buckets = bucket_of_each_offset(enc, 100)
    assert buckets == {offset: reference_t5_bucket(offset, not causal, 16, 40) for offset in buckets}
    assert max(buckets.values()) == 15


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("num_buckets, max_distance", [(8, 5), (10, 300), (64, 200), (4, 3)])
def test_t5_bucket_table_equals_the_rule_for_every_offset_inside_and_beyond_it(causal, num_buckets, max_distance):
    """The bucket of each offset is read from a table of ±max_distance: against the reference rule on ±400."""
    enc = encodings.build("t5", d_model=32, n_heads=2, max_len=401, causal=causal, num_buckets=num_buckets,
                          max_distance=max_distance)
    buckets = bucket_of_each_offset(enc, 401)
    assert buckets == {offset: reference_t5_bucket(offset, not causal, num_buckets, max_distance)
                       for offset in buckets}
    assert enc.bucket_of_offset.shape == (2 * max_distance + 1,)
    assert "bucket_of_offset" not in enc.state_dict()  # rebuilt from the options: checkpoints are unchanged


@pytest.mark.parametrize("options, message", [
    ({"num_buckets": 1, "causal": True}, r"^num_buckets must be an integer >= 2 .*got 1$"),
    ({"num_buckets": 3, "causal": False}, r"^num_buckets must be an integer >= 4 .*got 3$"),
    ({"max_distance": 16, "causal": True}, r"^max_distance must be an integer > 16, the exact distances of 32 "
                                            r"buckets, got 16$"),
    ({"max_distance": 8, "causal": False}, r"^max_distance must be an integer > 8, .*got 8$"),
    ({"max_distance": 100.0, "causal": True}, r"^max_distance must be an integer > 16, .*got 100.0$"),
    ({"num_buckets": "32", "causal": True}, r"^num_buckets must be an integer >= 2 .*got '32'$")])
def test_t5_options_without_a_log_range_fail_in_one_line_naming_the_key(options, message):
    """``max_distance`` within the exact distances made negative buckets (log of a ratio below 1) or divided
    by zero; no exact bucket divided by zero: each is refused in one line."""
    with pytest.raises(ValueError, match=message):
        encodings.build("t5", d_model=32, n_heads=2, max_len=64, **options)


@pytest.mark.parametrize("name, std", [("t5", 0.02), *[(name, 1.0) for name in encodings.names()
                                                        if name.startswith("learned")]])
def test_learned_position_parameters_start_at_their_scale(name, std):
    """T5's bias starts N(0, 0.02²): near zero, so training starts close to no position signal. Every
    learned table starts N(0, 1), the token embedding's scale (``nn.Embedding``), not 50× below it.
    Over >= 8192 draws the sample stdev is within 3 % of its target (5 standard errors)."""
    torch.manual_seed(0)
    (weight,) = build(name, d_model=64, n_heads=256, max_len=256).parameters()  # 32 buckets × 256 heads; 256 × d_pos
    assert weight.numel() >= 8192
    assert weight.std().item() == pytest.approx(std, rel=0.03)
    assert abs(weight.mean().item()) < 5 * std / math.sqrt(weight.numel())


def test_t5_has_one_scalar_per_bucket_and_head():
    enc = build("t5", n_heads=6)
    assert sum(p.numel() for p in enc.parameters()) == 32 * 6
    assert enc.attention_bias(P(7), P(7)).shape == (6, 7, 7)


# ----- RoPE options: base, partial rotation, Hugging Face scaling; xPos; M-RoPE ------------------

def hf_inv_freq(d, base, scaling=None, seq_len=None):
    """Hugging Face's ``ROPE_INIT_FUNCTIONS`` written out (transformers' modeling_rope_utils):
    (inverse frequencies, attention factor) over a rotated width ``d``."""
    inv = 1.0 / base ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
    if scaling is None:
        return inv, 1.0
    kind, s = scaling["rope_type"], scaling["factor"]
    original = scaling.get("original_max_position_embeddings")
    if kind == "linear":
        return inv / s, 1.0
    if kind == "dynamic":
        seq_len = seq_len if seq_len is not None and seq_len > original else original
        grown = base * ((s * seq_len / original) - (s - 1)) ** (d / (d - 2))
        return 1.0 / grown ** (torch.arange(0, d, 2, dtype=torch.float64) / d), 1.0
    if kind == "yarn":
        fast, slow = scaling.get("beta_fast", 32), scaling.get("beta_slow", 1)
        dim_of = lambda rotations: d * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(base))  # noqa: E731
        low, high = max(math.floor(dim_of(fast)), 0), min(math.ceil(dim_of(slow)), d - 1)
        high = high + 0.001 if low == high else high  # linear_ramp_factor's guard
        ramp = ((torch.arange(d // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
        extrapolation = 1 - ramp
        return inv / s * (1 - extrapolation) + inv * extrapolation, 0.1 * math.log(s) + 1.0
    if kind == "longrope":  # the long factors once the sequence (largest id + 1) passes the original length
        divisors = scaling["long_factor"] if seq_len and seq_len > original else scaling["short_factor"]
        attention = scaling.get("attention_factor")
        if attention is None:
            attention = 1.0 if s <= 1.0 else math.sqrt(1 + math.log(s) / math.log(original))
        return 1.0 / (torch.tensor(divisors, dtype=torch.float64) * base ** (torch.arange(0, d, 2) / d)), attention
    low_f, high_f = scaling["low_freq_factor"], scaling["high_freq_factor"]  # llama3
    wavelength = 2 * math.pi / inv
    llama = torch.where(wavelength > original / low_f, inv / s, inv)
    smooth = (original / wavelength - low_f) / (high_f - low_f)
    medium = ~(wavelength < original / high_f) & ~(wavelength > original / low_f)
    return torch.where(medium, (1 - smooth) * llama / s + smooth * llama, llama), 1.0


def hf_rotate(x, positions, inv, attention_factor):
    """HF's ``apply_rotary_pos_emb`` on the halves layout: ``x·cos + rotate_half(x)·sin``."""
    angle = positions.double()[:, None] * inv  # (L, d/2)
    cos = torch.cat([angle.cos(), angle.cos()], -1) * attention_factor
    sin = torch.cat([angle.sin(), angle.sin()], -1) * attention_factor
    half = x.shape[-1] // 2
    return x * cos + torch.cat([-x[..., half:], x[..., :half]], -1) * sin


def to_neighbours(x):
    """HF's halves ``(i, i + d/2)`` -> posbench's neighbours ``(2i, 2i + 1)``: the fixed permutation."""
    half = x.shape[-1] // 2
    return torch.stack([x[..., :half], x[..., half:]], -1).flatten(-2)


SCALINGS = [
    {"rope_type": "linear", "factor": 4.0},
    {"rope_type": "dynamic", "factor": 4.0, "original_max_position_embeddings": 32},
    {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32},
    {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 32, "beta_fast": 16.0, "beta_slow": 2.0},
    {"rope_type": "yarn", "factor": 16.0, "original_max_position_embeddings": 2048},  # ramp from pair 4 (2) to 11 (6)
    {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 65536,  # ramp ends at the
     "beta_slow": 0.0001},                                                                 # last dimension
    {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 4},  # low == high == 0: the guard
    {"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 32,
     "low_freq_factor": 1.0, "high_freq_factor": 4.0},
    {"rope_type": "llama3", "factor": 4.0, "original_max_position_embeddings": 32,  # low_freq_factor 1 hides
     "low_freq_factor": 2.0, "high_freq_factor": 8.0},                              # original·low for original/low
]


@pytest.mark.parametrize("scaling", SCALINGS, ids=lambda s: f"{s['rope_type']}-{s['factor']:g}")
@pytest.mark.parametrize("fraction", [1.0, 0.5])
def test_rope_rotation_equals_hugging_face_after_the_pairing_permutation(scaling, fraction, float64):
    d_head, L = 32, 100  # positions beyond original_max_position_embeddings: dynamic grows its base
    enc = build("rope", d_model=2 * d_head, n_heads=2, max_len=128, base=5000.0, rotary_fraction=fraction,
                scaling=scaling)
    rotated = int(d_head * fraction)
    inv, factor = hf_inv_freq(rotated, 5000.0, scaling, seq_len=L)
    x = torch.randn(3, L, d_head)  # HF layout within the rotated part
    expected = torch.cat([hf_rotate(x[..., :rotated], torch.arange(L), inv, factor), x[..., rotated:]], -1)
    ours = rotate(enc, torch.cat([to_neighbours(x[..., :rotated]), x[..., rotated:]], -1), torch.arange(L))
    torch.testing.assert_close(ours, torch.cat([to_neighbours(expected[..., :rotated]), expected[..., rotated:]], -1),
                               atol=1e-9, rtol=0)


@pytest.mark.parametrize("scaling", [None, *SCALINGS[:3]], ids=lambda s: s["rope_type"] if s else "plain")
def test_scaled_frequencies_are_float64_so_far_positions_turn_exactly_in_a_float32_model(scaling):
    """Angles ``p·θ`` at p ≈ 8000 need θ to float64: a float32 θ would be off by ~1e-4 rad there."""
    enc = build("rope", d_model=32, n_heads=2, max_len=16, base=5000.0, scaling=scaling)
    ids = torch.tensor([7919, 8000, 8191])
    inv, factor = hf_inv_freq(16, 5000.0, scaling, seq_len=8192)
    expected = torch.polar(torch.full((3, 8), factor, dtype=torch.float64), ids.double()[:, None] * inv)
    torch.testing.assert_close(enc.angles.rows(Positions.from_ids(ids)).to(torch.complex128), expected,
                               atol=2e-6, rtol=0)


def test_linear_scaling_sees_at_s_times_p_the_angles_of_p(float64):
    plain = build("rope", max_len=512)
    scaled = build("rope", max_len=512, scaling={"rope_type": "linear", "factor": 4.0})
    p = torch.arange(0, 100)
    torch.testing.assert_close(scaled.angles.rows(Positions.from_ids(4 * p)), plain.angles.rows(Positions.from_ids(p)))


@pytest.mark.parametrize("factor", [2.0, 4.0, 16.0])
def test_yarn_attention_factor_is_a_tenth_of_log_s_plus_one(factor):
    enc = build("rope", scaling={"rope_type": "yarn", "factor": factor, "original_max_position_embeddings": 16})
    assert enc.angles.attention_factor == pytest.approx(0.1 * math.log(factor) + 1)
    assert enc.angles.rows(P(20)).abs() == pytest.approx(0.1 * math.log(factor) + 1, rel=1e-6)


def test_dynamic_scaling_is_plain_rope_within_the_training_length(float64):
    scaled = build("rope", max_len=128, scaling={"rope_type": "dynamic", "factor": 4.0,
                                                 "original_max_position_embeddings": 32})
    torch.testing.assert_close(scaled.angles.rows(P(32)), build("rope", max_len=128).angles.rows(P(32)))
    assert not torch.allclose(scaled.angles.rows(P(64))[:32], build("rope", max_len=128).angles.rows(P(32)))


LONGROPE = {"rope_type": "longrope", "factor": 8.0, "original_max_position_embeddings": 32,  # 8 pairs: d_head 16
            "short_factor": [1.0, 1.02, 1.1, 1.25, 1.5, 2.0, 2.5, 3.0],
            "long_factor": [1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0]}


@pytest.mark.parametrize("length", [20, 32, 33, 100])
@pytest.mark.parametrize("attention_factor", [None, 1.5])
def test_longrope_rotation_equals_hugging_face_below_and_above_the_original_length(length, attention_factor, float64):
    """Up to 32 positions (ids 0 … 31) the short factors, from 33 on the long ones, with HF's attention
    factor sqrt(1 + ln 8 / ln 32) = sqrt(1.6) unless one is given; beyond the cache (100 > 64) as well."""
    scaling = LONGROPE if attention_factor is None else {**LONGROPE, "attention_factor": attention_factor}
    enc = build("rope", d_model=32, n_heads=2, max_len=64, base=5000.0, scaling=scaling)
    inv, factor = hf_inv_freq(16, 5000.0, scaling, seq_len=length)
    assert factor == pytest.approx(math.sqrt(1.6) if attention_factor is None else 1.5)
    x = torch.randn(3, length, 16)  # HF layout
    expected = hf_rotate(x, torch.arange(length), inv, factor)
    torch.testing.assert_close(rotate(enc, to_neighbours(x), torch.arange(length)), to_neighbours(expected),
                               atol=1e-9, rtol=0)


def test_longrope_switches_by_the_largest_position_as_hugging_face_does(float64):
    """HF's seq_len is the largest id + 1: a decoding step at id 40 alone turns by the long factors, one at
    id 31 alone by the short ones (both within the cache of 64 rows)."""
    enc = build("rope", d_model=32, n_heads=2, max_len=64, scaling=LONGROPE)
    short, _ = hf_inv_freq(16, 10000.0, LONGROPE, seq_len=32)
    long, factor = hf_inv_freq(16, 10000.0, LONGROPE, seq_len=33)
    torch.testing.assert_close(enc.angles.rows(Positions.from_ids(torch.tensor([40]))),
                               torch.polar(torch.full((1, 8), factor, dtype=torch.float64), 40 * long[None]))
    torch.testing.assert_close(enc.angles.rows(Positions.from_ids(torch.tensor([31]))),
                               torch.polar(torch.full((1, 8), factor, dtype=torch.float64), 31 * short[None]))


def test_longrope_factor_at_most_one_gives_attention_factor_one_and_the_factors_must_fit_the_pairs():
    assert build("rope", d_model=32, n_heads=2, scaling={**LONGROPE, "factor": 1.0}).angles.attention_factor == 1.0
    with pytest.raises(ValueError) as wrong:
        build("rope", d_model=64, n_heads=2, scaling=LONGROPE)  # d_head 32: 16 pairs
    assert str(wrong.value) == ("scaling (longrope) short_factor has 8 values; a rotated width of 32 needs 16, "
                                "one per frequency pair")
    with pytest.raises(ValueError, match=r"^scaling \(longrope\) needs long_factor, short_factor; allowed keys: "
                                         r"attention_factor, factor, long_factor, original_max_position_embeddings, "
                                         r"short_factor$"):
        build("rope", scaling={"rope_type": "longrope", "factor": 4.0, "original_max_position_embeddings": 8})


@pytest.mark.parametrize("name,options", [
    ("rope", {"scaling": SCALINGS[0]}), ("rope", {"scaling": SCALINGS[2]}), ("rope", {"scaling": SCALINGS[4]}),
    ("rope", {"scaling": {**LONGROPE, "original_max_position_embeddings": 8}}),
    ("rope_p50", {}), ("rope_theta500k", {}), ("xpos", {}), ("mrope", {}), ("p_rope", {}), ("p_rope_25", {})])
def test_scaled_and_decayed_rotary_logits_depend_only_on_offset(name, options, float64):
    enc = build(name, d_model=64, n_heads=4, max_len=256, **options)
    q, k = torch.randn(4, 20, 16), torch.randn(4, 20, 16)
    base = rotary_logits(enc, q, k, torch.arange(20))
    for shift in (3, 101):
        torch.testing.assert_close(rotary_logits(enc, q, k, torch.arange(20) + shift), base, atol=1e-9, rtol=0)


def xpos_zeta(d, gamma):
    """ζ_j = (2j/d + γ)/(1 + γ) per frequency pair."""
    return (torch.arange(0, d, 2, dtype=torch.float64) / d + gamma) / (1 + gamma)


def xpos_reference_logits(q, k, scale_base, gamma):
    """xPos written out: q·k = Σ_pairs Re(q_c · conj(k_c) · e^{iθ(m−n)}) · ζ^((m−n)/scale_base), ``(L, L)``."""
    L, d = q.shape
    theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    offset = (torch.arange(L)[:, None] - torch.arange(L)[None, :]).double()[..., None]  # (L, L, 1) m − n
    qc, kc = torch.complex(q[:, 0::2], q[:, 1::2]), torch.complex(k[:, 0::2], k[:, 1::2])  # (L, d/2)
    decay = xpos_zeta(d, gamma) ** (offset / scale_base)
    return (qc[:, None] * kc.conj()[None] * torch.polar(decay, offset * theta)).real.sum(-1)  # (L, L)


def test_xpos_logits_decay_as_zeta_to_the_offset_over_the_scale_base(float64):
    """ζ = (2j/d + 0.4)/1.4, scale_base 512: the defaults."""
    d, L = 16, 12
    enc = build("xpos", d_model=2 * d, n_heads=2, max_len=64)
    q, k = torch.randn(L, d), torch.randn(L, d)
    torch.testing.assert_close(rotary_logits(enc, q, k, torch.arange(L)), xpos_reference_logits(q, k, 512, 0.4),
                               atol=1e-9, rtol=0)


def test_xpos_beyond_its_cache_decays_as_the_formula_and_centres_on_half_the_largest_position(float64):
    """Beyond ``max_len`` the turns are computed, centred on ``max_position // 2``: that row keeps length 1,
    and the logits are the same ``ζ^((m−n)/scale_base)·e^{iθ(m−n)}`` as in the cache (scale_base 64 here)."""
    d, L = 16, 21
    enc = build("xpos", d_model=2 * d, n_heads=2, max_len=9, scale_base=64.0, gamma=0.5)
    q, k = torch.randn(L, d), torch.randn(L, d)
    torch.testing.assert_close(rotary_logits(enc, q, k, torch.arange(L)), xpos_reference_logits(q, k, 64, 0.5),
                               atol=1e-9, rtol=0)
    zeta = xpos_zeta(d, 0.5)
    query_rows, key_rows = enc.rows(P(L))  # (L, d/2) each; centre 20 // 2 = 10
    torch.testing.assert_close(query_rows[10].abs(), torch.ones(d // 2), atol=1e-12, rtol=0)
    torch.testing.assert_close(query_rows[0].abs(), zeta ** (-10 / 64), atol=1e-12, rtol=0)
    torch.testing.assert_close(key_rows[0].abs(), zeta ** (10 / 64), atol=1e-12, rtol=0)
    cached_query, _ = enc.rows(P(9))  # the cache centres on max_len // 2 = 4
    torch.testing.assert_close(cached_query[4].abs(), torch.ones(d // 2), atol=1e-12, rtol=0)
    torch.testing.assert_close(cached_query[0].abs(), zeta ** (-4 / 64), atol=1e-12, rtol=0)


def test_xpos_with_dynamic_scaling_turns_by_the_grown_frequencies_and_decays(float64):
    """Beyond the training length dynamic NTK grows the base: xPos turns by rope-dynamic's angles, with
    lengths ``ζ^(±(n − c)/512)`` centred on ``c = 63 // 2`` (computed, though the cache holds 128 rows)."""
    dynamic = {"rope_type": "dynamic", "factor": 4.0, "original_max_position_embeddings": 32}
    xpos, rope = (build(name, max_len=128, scaling=dynamic) for name in ("xpos", "rope"))
    query_rows, key_rows = xpos.rows(P(64))  # (64, 4) each: d_head 8
    angles, _ = rope.rows(P(64))
    torch.testing.assert_close(query_rows / query_rows.abs(), angles, atol=1e-12, rtol=0)
    zeta = (torch.arange(0, 8, 2, dtype=torch.float64) / 8 + 0.4) / 1.4
    power = (torch.arange(64, dtype=torch.float64)[:, None] - 31) / 512  # (64, 1)
    torch.testing.assert_close(query_rows.abs(), zeta ** power, atol=1e-12, rtol=0)
    torch.testing.assert_close(key_rows.abs(), zeta ** -power, atol=1e-12, rtol=0)


@pytest.mark.parametrize("name", ["rope", "xpos"])
def test_rotary_positions_up_to_the_cache_edge_and_one_beyond_turn_as_the_formula(name, float64):
    """``max_len - 1`` is the last cached row; a window reaching ``max_len`` is computed (same logits)."""
    enc = build(name, d_model=32, n_heads=2, max_len=16)
    q, k = torch.randn(8, 16), torch.randn(8, 16)
    inside, edge = rotary_logits(enc, q, k, torch.arange(8, 16)), rotary_logits(enc, q, k, torch.arange(9, 17))
    torch.testing.assert_close(edge, inside, atol=1e-9, rtol=0)
    torch.testing.assert_close(inside, rotary_logits(enc, q, k, torch.arange(8)), atol=1e-9, rtol=0)


def test_rope_repr_names_base_rotated_width_scaling_and_sections():
    scaled = build("rope", d_model=32, n_heads=2, base=500.0, rotary_fraction=0.5,
                   scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16})
    assert scaled.extra_repr() == "d_model=32, n_heads=2, max_len=64, base=500, rotated=8, scaling=yarn:4"
    plain = build("rope", d_model=32, n_heads=2)
    assert plain.extra_repr() == "d_model=32, n_heads=2, max_len=64, base=10000, rotated=16"
    assert build("mrope", d_model=64, n_heads=2).extra_repr().endswith("base=10000, rotated=32, sections=(4, 6, 6)")


def test_mrope_on_text_equals_rope_and_turns_each_section_by_its_axis(float64):
    enc, rope = build("mrope", d_model=64, n_heads=2, max_len=64), build("rope", d_model=64, n_heads=2, max_len=64)
    assert enc.sections == (4, 6, 6)  # 16 pairs: a quarter for text/time, the rest split between rows and columns
    x = torch.randn(2, 10, 32)
    text = Positions.from_ids(torch.arange(10)[:, None].repeat(1, 3))  # three equal axes
    torch.testing.assert_close(enc.rotate(x, x, text)[0], rotate(rope, x, torch.arange(10)))
    torch.testing.assert_close(rotate(enc, x, torch.arange(10)), rotate(rope, x, torch.arange(10)))
    ids = torch.stack([torch.full((10,), 3), torch.arange(10) // 4, torch.arange(10) % 4], -1)  # (L, 3)
    rows = enc.rows(Positions.from_ids(ids))[0]  # (L, 16)
    plain = [rope.angles.rows(Positions.from_ids(ids[:, a])) for a in range(3)]
    torch.testing.assert_close(rows, torch.cat([plain[0][:, :4], plain[1][:, 4:10], plain[2][:, 10:]], -1))


def test_mrope_sections_of_unequal_sizes_turn_by_their_own_axes(float64):
    enc, rope = build("mrope", d_model=64, n_heads=2, mrope_section=[3, 2, 11]), build("rope", d_model=64, n_heads=2)
    assert enc.sections == (3, 2, 11)
    ids = torch.stack([torch.arange(10), torch.arange(10) // 4, torch.arange(10) % 4], -1)  # (L, 3)
    query_rows, key_rows = enc.rows(Positions.from_ids(ids))  # (L, 16) each
    plain = [rope.angles.rows(Positions.from_ids(ids[:, a])) for a in range(3)]
    torch.testing.assert_close(query_rows, torch.cat([plain[0][:, :3], plain[1][:, 3:5], plain[2][:, 5:]], -1))
    torch.testing.assert_close(key_rows, query_rows)
    with pytest.raises(ValueError, match="mrope needs positions with 1 or 3 axes .*, got 2"):
        enc.rows(Positions.grid(10, cols=4))


def test_mrope_passes_rope_options_on_and_allows_an_empty_section(float64):
    """Family options (base, scaling, …) reach the angles; a section may hold no pair: (16, 0, 0) turns
    every pair by the text/time axis."""
    enc = build("mrope", d_model=64, n_heads=2, base=500.0, mrope_section=(16, 0, 0))
    rope = build("rope", d_model=64, n_heads=2, base=500.0)
    ids = torch.stack([torch.arange(10), torch.arange(10) // 4, torch.arange(10) % 4], -1)  # (L, 3)
    torch.testing.assert_close(enc.rows(Positions.from_ids(ids))[0], rope.angles.rows(Positions.from_ids(ids[:, 0])))


@pytest.mark.parametrize("sections", [(4, 6), (4, 6, 7), (-1, 9, 8), (1, 2, 3, 10)])
def test_mrope_sections_must_be_three_counts_summing_to_the_pairs(sections):
    with pytest.raises(ValueError, match=r"^mrope_section must be three counts of frequency pairs summing to 16, got "):
        build("mrope", d_model=64, n_heads=2, mrope_section=sections)
    with pytest.raises(ValueError, match=r"^mrope_section must be .* summing to 64, got "):
        build("mrope", d_model=64, n_heads=2, mrope_section=sections, section_pairs=64)


def hf_mrope_angles(ids, inv, section, interleaved):
    """The angle of each frequency pair ``(L, d/2)`` as Hugging Face chooses it per axis from ``ids (L, 3)``
    (t, h, w), written out: Qwen2-VL's ``apply_multimodal_rotary_pos_emb`` splits the doubled
    ``mrope_section * 2`` chunks of cos/sin and takes chunk ``i`` from axis ``i % 3``; Qwen3-VL's
    ``apply_interleaved_mrope`` starts from the t frequencies and overwrites ``freqs[..., 1:3·s_1:3]``
    with h's and ``freqs[..., 2:3·s_2:3]`` with w's."""
    freqs = ids.double().T[:, :, None] * inv  # (3, L, d/2)
    if interleaved:
        chosen = freqs[0].clone()
        for axis in (1, 2):
            chosen[..., axis:3 * section[axis]:3] = freqs[axis, ..., axis:3 * section[axis]:3]
        return chosen
    return torch.cat([chunk[i % 3] for i, chunk in enumerate(freqs.split(list(section), dim=-1))], dim=-1)


def hf_mrope_rotate(x, ids, inv, section, interleaved):
    """HF's rotation on the halves layout: ``emb = cat(freqs, freqs)``, ``x·cos + rotate_half(x)·sin``
    (for Qwen2-VL the cat of the doubled sections picks the same axes in both halves)."""
    angle = hf_mrope_angles(ids, inv, section, interleaved)  # (L, d/2)
    cos, sin = torch.cat([angle.cos(), angle.cos()], -1), torch.cat([angle.sin(), angle.sin()], -1)
    half = x.shape[-1] // 2
    return x * cos + torch.cat([-x[..., half:], x[..., :half]], -1) * sin


@pytest.mark.parametrize("name,base,section,interleaved", [
    ("mrope_qwen2vl", 1e6, (16, 24, 24), False), ("mrope_qwen3vl", 5e6, (24, 20, 20), True)])
def test_mrope_presets_rotate_as_hugging_face_at_head_width_128(name, base, section, interleaved, float64):
    """Any (t, h, w) ids, a 128-wide head: ours after the pairing permutation equals HF's layout."""
    enc = build(name, d_model=256, n_heads=2, max_len=64)
    assert (enc.sections, enc.interleaved, enc.angles.base) == (section, interleaved, base)
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 200, (40, 3), generator=generator)  # unrelated axes, beyond max_len too
    x = torch.randn(2, 40, 128, generator=generator)
    inv = 1.0 / base ** (torch.arange(0, 128, 2, dtype=torch.float64) / 128)
    expected = to_neighbours(hf_mrope_rotate(x, ids, inv, section, interleaved))
    torch.testing.assert_close(rotate(enc, to_neighbours(x), ids), expected, atol=1e-9, rtol=0)
    same = build("mrope", d_model=256, n_heads=2, max_len=64, base=base, mrope_section=list(section),
                 mrope_interleaved=interleaved)  # HF's config keys, at the head they were written for
    torch.testing.assert_close(rotate(same, to_neighbours(x), ids), expected, atol=1e-9, rtol=0)


def test_interleaved_mrope_pairs_follow_qwen3vl_rule():
    """Pair i: rows at i % 3 == 1 and i < 3·s_1, columns at i % 3 == 2 and i < 3·s_2, else text/time."""
    enc = build("mrope", d_model=64, n_heads=2, mrope_section=(7, 5, 4), mrope_interleaved=True)  # 16 pairs
    assert enc.axis_of_pair.tolist() == [0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 0, 0]
    assert enc.axis_of_pair.bincount().tolist() == [7, 5, 4]
    assert "sections=(7, 5, 4), interleaved" in enc.extra_repr()
    with pytest.raises(ValueError, match=r"^interleaved mrope_section \(2, 7, 7\): rows need 3·s_1 <= 17"):
        build("mrope", d_model=64, n_heads=2, mrope_section=(2, 7, 7), mrope_interleaved=True)
    with pytest.raises(ValueError, match=r"^mrope_interleaved must be true or false, got 'yes'"):
        build("mrope", d_model=64, n_heads=2, mrope_interleaved="yes")


@pytest.mark.parametrize("name,d_model,n_heads,sections", [
    ("mrope", 64, 4, (2, 3, 3)), ("mrope_qwen2vl", 64, 4, (2, 3, 3)), ("mrope_qwen3vl", 64, 4, (4, 2, 2)),
    ("mrope_qwen2vl", 128, 4, (4, 6, 6)), ("mrope_qwen3vl", 128, 4, (6, 5, 5)),
    ("mrope_qwen3vl", 16, 2, (2, 1, 1)), ("mrope_qwen3vl", 512, 8, (12, 10, 10))])
def test_preset_sections_scale_to_the_head(name, d_model, n_heads, sections):
    """Rows and columns ⌊s · pairs / 64⌋, text/time the rest: tiny's 16-wide head has 8 pairs."""
    assert build(name, d_model=d_model, n_heads=n_heads).sections == sections


@pytest.mark.parametrize("options,message", [
    ({"scaling": {"rope_type": "ntk", "factor": 2.0}},
     "scaling.rope_type 'ntk'; allowed: linear, dynamic, yarn, llama3, longrope"),
    ({"scaling": "yarn"}, "scaling.rope_type 'yarn'; allowed: linear, dynamic, yarn, llama3, longrope"),
    ({"scaling": {"rope_type": "yarn", "factor": 2.0}}, r"scaling \(yarn\) needs original_max_position_embeddings"),
    ({"scaling": {"rope_type": "linear", "factor": 2.0, "beta_fast": 3}}, r"key 'beta_fast' is not allowed"),
    ({"scaling": {"rope_type": "linear", "factor": 0.5}}, "factor must be >= 1"),
    ({"rotary_fraction": 0.0}, r"rotary_fraction must lie in \(0, 1\]"),
    ({"rotary_fraction": 0.05}, "rotates no pair"),
    ({"rotary_fraction": 1.5}, r"rotary_fraction must lie in \(0, 1\], got 1.5"),
    ({"d_model": 30}, r"d_model \(30\) must be divisible by n_heads \(4\)"),
    ({"base": 1.0}, "base must be > 1")])
def test_rope_options_fail_in_one_line_naming_the_key(options, message):
    with pytest.raises(ValueError, match=message):
        build("rope", **options)


def test_rope_scaling_errors_list_every_missing_key_and_the_allowed_ones():
    with pytest.raises(ValueError) as missing:
        build("rope", scaling={"rope_type": "yarn"})
    assert str(missing.value) == ("scaling (yarn) needs factor, original_max_position_embeddings; allowed keys: "
                                  "attention_factor, beta_fast, beta_slow, factor, original_max_position_embeddings")
    with pytest.raises(ValueError) as unknown:
        build("rope", scaling={"rope_type": "dynamic", "factor": 2, "original_max_position_embeddings": 8, "gamma": 1})
    assert str(unknown.value) == ("scaling (dynamic) key 'gamma' is not allowed; allowed keys: "
                                  "factor, original_max_position_embeddings")


def test_dynamic_scaling_grows_from_one_position_beyond_the_training_length(float64):
    dynamic = {"rope_type": "dynamic", "factor": 4.0, "original_max_position_embeddings": 32}
    enc = build("rope", d_model=32, n_heads=2, max_len=128, scaling=dynamic)
    inv, _ = hf_inv_freq(16, 10000.0, dynamic, seq_len=33)  # ids 0 … 32: 33 positions
    expected = torch.polar(torch.ones(33, 8), torch.arange(33.0)[:, None] * inv)
    torch.testing.assert_close(enc.angles.rows(P(33)), expected)


def test_xpos_lengths_carry_the_yarn_attention_factor(float64):
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16}
    query_rows, key_rows = build("xpos", d_model=32, n_heads=2, max_len=16, scaling=yarn).rows(P(16))
    factor = 0.1 * math.log(4.0) + 1  # the cache centres on 8: the decay is 1 there
    torch.testing.assert_close(query_rows[8].abs(), torch.full((8,), factor), atol=1e-12, rtol=0)
    torch.testing.assert_close(key_rows[8].abs(), torch.full((8,), factor), atol=1e-12, rtol=0)


def test_rotary_cache_is_kept_in_the_default_dtype_and_the_width_must_be_even():
    angles = build("rope", d_model=32, n_heads=2, max_len=8).angles
    assert angles.turns.dtype == torch.float32 and angles.rows(P(8)).dtype == torch.complex64
    with pytest.raises(ValueError, match="rotary width must be even, got 5"):
        encodings.rope.RotaryAngles(5, 8)


def test_any_base_above_one_is_allowed(float64):
    enc = build("rope", d_model=16, n_heads=2, base=1.5)
    torch.testing.assert_close(enc.angles.inv_freq, 1.5 ** (-torch.arange(0, 8, 2, dtype=torch.float64) / 8))


def test_linear_scaling_by_one_is_plain_rope(float64):
    scaled = build("rope", scaling={"rope_type": "linear", "factor": 1.0})
    torch.testing.assert_close(scaled.angles.rows(P(64)), build("rope").angles.rows(P(64)), atol=0, rtol=0)


# ----- p-RoPE ------------------------------------------------------------------------------------

def paper_p_rope(x, positions, p, base=10000.0):
    """The paper's ``apply_p_rope`` (Barbero et al. 2025, appendix; Gemma's ``apply_rope`` with
    ``rope_proportion``) written out on the halves layout: ``int(p·d // 2)`` pairs at timescale
    ``base^(2i/d)``, the rest at an infinite timescale (angle 0)."""
    d = x.shape[-1]
    kept = int(p * d // 2)
    timescale = torch.cat([base ** (2 * torch.arange(kept, dtype=torch.float64) / d),
                           torch.full((d // 2 - kept,), math.inf, dtype=torch.float64)])
    angle = positions.double()[:, None] / timescale  # (L, d/2)
    first, second = x[..., : d // 2], x[..., d // 2:]
    return torch.cat([first * angle.cos() - second * angle.sin(), second * angle.cos() + first * angle.sin()], -1)


@pytest.mark.parametrize("name,p,d_head", [("p_rope", 0.75, 32), ("p_rope_25", 0.25, 32), ("p_rope_25", 0.25, 20),
                                           ("p_rope", 0.75, 6)])
def test_p_rope_equals_the_papers_formula_after_the_pairing_permutation(name, p, d_head, float64):
    """d_head 20 at p 0.25: int(5.0 // 2) = 2 pairs; d_head 6 at 0.75: int(4.5 // 2) = 2 of 3."""
    enc = build(name, d_model=2 * d_head, n_heads=2, max_len=64)
    x = torch.randn(3, 70, d_head)  # positions beyond the cache of 64 too
    torch.testing.assert_close(rotate(enc, to_neighbours(x), torch.arange(70)),
                               to_neighbours(paper_p_rope(x, torch.arange(70), p)), atol=1e-9, rtol=0)
    assert enc.rotated_width == 2 * 2 * int(p * d_head // 2)


def test_p_rope_turns_its_pairs_as_rope_and_leaves_the_slowest_unturned(float64):
    """p 0.25 of a 32-wide head: pairs 0 … 3 turn at rope's frequencies 10000^(-2i/32), pairs 4 … 15 (the
    lowest frequencies) pass through bit for bit; rope_p50 at the same width lays a ladder over 16 dims."""
    p_rope, rope = build("p_rope_25", d_model=64, n_heads=2), build("rope", d_model=64, n_heads=2)
    torch.testing.assert_close(p_rope.angles.rows(P(40)), rope.angles.rows(P(40))[:, :4], atol=0, rtol=0)
    x = torch.randn(2, 40, 32)
    turned = rotate(p_rope, x, torch.arange(40))
    assert torch.equal(turned[..., 8:], x[..., 8:])
    assert torch.equal(turned[..., :8], rotate(rope, x, torch.arange(40))[..., :8])
    half = build("p_rope", d_model=64, n_heads=2, kept_fraction=0.5)
    torch.testing.assert_close(half.angles.inv_freq, 10000.0 ** (-torch.arange(0, 16, 2, dtype=torch.float64) / 32))
    torch.testing.assert_close(build("rope_p50", d_model=64, n_heads=2).angles.inv_freq,
                               10000.0 ** (-torch.arange(0, 16, 2, dtype=torch.float64) / 16))
    assert half.extra_repr() == "d_model=64, n_heads=2, max_len=64, base=10000, rotated=16, ladder=32"


@pytest.mark.parametrize("name", ["rope", "xpos", "rope_p50", "mrope", "rope_2d", "rope_per_modality", "irope"])
def test_the_attention_turns_its_own_q_and_k_in_place_bit_for_bit_and_only_without_a_gradient(name):
    """``rotate_in_place``: the attention's own q and k turn in place (no new tensor per layer in a decode step),
    the same multiply as a new tensor's; q and k that record a gradient, or that ``rotate``'s caller keeps, are
    left alone."""
    enc = build(name, d_model=64, n_heads=2)
    positions = enc.positions(12)
    q, k = torch.randn(3, 2, 12, 32), torch.randn(3, 2, 12, 32)
    kept = q.clone(), k.clone()
    turned = enc.rotate(q, k, positions)
    assert torch.equal(q, kept[0]) and torch.equal(k, kept[1])  # the default leaves them as they were
    with torch.no_grad():
        overwritten = enc.rotate_in_place(q, k, positions)
    assert overwritten[0] is q and overwritten[1] is k
    assert all(torch.equal(a, b) for a, b in zip(overwritten, turned))
    grads = [t.clone().requires_grad_() for t in kept]
    with_grad = enc.rotate_in_place(*grads, positions)
    assert torch.equal(grads[0].detach(), kept[0]) and all(torch.equal(a, b) for a, b in zip(with_grad, turned))


@pytest.mark.parametrize("name", ["rope_p50", "p_rope", "p_rope_25"])
def test_a_partial_rotation_multiplies_the_whole_head_by_turns_of_one_on_its_passing_pairs(name):
    """One complex multiply over every pair of a head (no split and join): the rows are ``(L, d_head/2)``, exactly
    1 after the rotated pairs, and the counted work is RoPE's over the whole head, as the counter sees it."""
    partial, full = build(name, d_model=64, n_heads=2), build("rope", d_model=64, n_heads=2)
    query_rows, key_rows = partial.rows(P(40))
    pairs = partial.rotated // 2
    assert query_rows.shape == key_rows.shape == (40, 16)
    assert torch.equal(query_rows[:, pairs:], torch.ones(40, 16 - pairs, dtype=torch.complex64))
    assert partial.rotation_flops(3, 40, "train") == full.rotation_flops(3, 40, "train") == 2 * 3 * 3 * 40 * 64 * 2
    q, k = torch.randn(2, 2, 40, 32), torch.randn(2, 2, 40, 32)
    counter = FlopCounterMode(display=False, custom_mapping=TORCH_FORMULAS)
    with torch.no_grad(), counter:
        partial.rotate(q, k, P(40))
    assert counter.get_total_flops() == partial.rotation_flops(2, 40, "infer") == 2 * 3 * 2 * 40 * 64


def test_p_rope_scales_the_full_width_ladder_and_keeps_its_top(float64):
    """Linear scaling by 4 divides the kept frequencies by 4; rescaled() keeps the ladder."""
    linear = {"rope_type": "linear", "factor": 4.0}
    scaled = build("p_rope_25", d_model=64, n_heads=2, base=500.0, scaling=linear)
    top = 500.0 ** (-torch.arange(0, 8, 2, dtype=torch.float64) / 32)
    torch.testing.assert_close(scaled.angles.inv_freq, top / 4)
    rescaled = build("p_rope_25", d_model=64, n_heads=2, base=500.0).rescaled(encodings.rope.RopeScaling.parse(linear))
    torch.testing.assert_close(rescaled.angles.inv_freq, top / 4)


@pytest.mark.parametrize("options,message", [
    ({"kept_fraction": 0.0}, r"^kept_fraction must lie in \(0, 1\], got 0.0$"),
    ({"kept_fraction": 1.5}, r"^kept_fraction must lie in \(0, 1\], got 1.5$"),
    ({"kept_fraction": 0.05}, r"^kept_fraction 0.05 keeps no frequency pair of a 8-wide head$"),
    ({"rotary_fraction": 0.5}, r"^encoding 'p_rope': .*unexpected keyword argument 'rotary_fraction'$")])
def test_p_rope_options_fail_in_one_line_naming_the_key(options, message):
    with pytest.raises(ValueError, match=message):
        build("p_rope", **options)


# ----- KERPLE and FIRE ---------------------------------------------------------------------------

def test_kerple_is_minus_r1_log_of_one_plus_r2_distance():
    enc = build("kerple", n_heads=2)
    with torch.no_grad():
        enc.r1.copy_(torch.tensor([1.5, 0.001]))  # the second is clamped to 0.01
        enc.r2.copy_(torch.tensor([0.5, 2.0]))
    bias = enc.attention_bias(P(6), P(6))  # (2, 6, 6)
    assert bias[0, 5, 1].item() == pytest.approx(-1.5 * math.log(1 + 0.5 * 4))
    assert bias[1, 0, 3].item() == pytest.approx(-0.01 * math.log(1 + 2.0 * 3))
    assert torch.equal(bias[:, :-2, :-2], bias[:, 2:, 2:])


def test_kerple_initialisation_and_defaults_are_the_documented_ones():
    """r1 ~ U(0, 2) and r2 ~ U(0, 1) per head (a spread of decay rates), clamp 0.01, unmasked unless built causal."""
    from posbench.encodings.kerple import KerpleLog

    torch.manual_seed(0)
    enc = KerpleLog(32, 1000, 64)
    assert enc.causal is False and enc.min_value == 0.01
    assert 0 <= enc.r1.min() and 1.95 < enc.r1.max() < 2 and 0.9 < enc.r1.mean() < 1.1
    assert 0 <= enc.r2.min() and 0.975 < enc.r2.max() < 1 and 0.45 < enc.r2.mean() < 0.55


def fire_reference(enc, i, j):
    """The paper's formula written out: f(ψ(i − j) / ψ(max(L, i))), ψ(x) = log(|c|·x + 1), f a ReLU MLP
    (1 → hidden → heads) computed here from its weights; bidirectional models read |i − j|."""
    c, threshold = enc.c.abs().item(), enc.threshold.abs().item()
    psi = lambda x: math.log(c * x + 1)  # noqa: E731
    feature = psi(max(i - j, 0) if enc.causal else abs(i - j)) / psi(max(threshold, i))
    first, last = enc.mlp[0], enc.mlp[-1]
    hidden = torch.relu(first.weight[:, 0] * feature + first.bias)  # (hidden,)
    return last.weight @ hidden + last.bias  # (h,)


def test_fire_follows_its_formula_and_depends_on_the_query_position():
    torch.manual_seed(0)
    enc = build("fire", n_heads=3, causal=True, init_threshold=4.0)
    bias = enc.attention_bias(P(40), P(40))  # (3, 40, 40)
    for i, j in [(10, 3), (39, 0), (2, 1), (7, 7)]:
        torch.testing.assert_close(bias[:, i, j], fire_reference(enc, i, j), atol=1e-6, rtol=0)
    assert not torch.allclose(bias[:, 10, 3], bias[:, 30, 23])  # same offset, other query: i matters beyond L
    early = build("fire", n_heads=3, causal=True)  # threshold 512: below it, the offset alone matters
    near = early.attention_bias(P(40), P(40))
    torch.testing.assert_close(near[:, 10, 3], near[:, 30, 23])


def test_fire_bidirectional_reads_the_absolute_offset():
    torch.manual_seed(1)
    enc = build("fire", n_heads=3, init_threshold=4.0)
    bias = enc.attention_bias(P(40), P(40))
    for i, j in [(3, 10), (10, 3), (0, 39), (20, 20)]:
        torch.testing.assert_close(bias[:, i, j], fire_reference(enc, i, j), atol=1e-6, rtol=0)
    assert not torch.allclose(bias[:, 3, 10], bias[:, 3, 3])  # a key after the query is not at offset 0


def fire_over_every_pair(enc, query, key):
    """FIRE's bias as it was built before it ran its MLP once per visible pair: the features of all
    ``(q, k)`` pairs, the MLP over every one of them; causal, ``-inf`` at keys after the query's token
    (the queries are the last keys), as attention would have masked it."""
    c = enc.c.abs()
    i = query.ids.to(c.dtype)[:, None]  # (q, 1)
    distance = i - key.ids.to(c.dtype)[None, :]  # (q, k)
    distance = distance.abs() if not enc.causal else distance.clamp(min=0)
    normaliser = torch.log1p(c * torch.maximum(i, enc.threshold.abs()))  # (q, 1)
    bias = enc.mlp((torch.log1p(c * distance) / normaliser)[..., None]).movedim(-1, 0)  # (h, q, k)
    if not enc.causal:
        return bias
    later = torch.arange(len(key))[None, :] > torch.arange(len(key) - len(query), len(key))[:, None]  # (q, k)
    return bias.masked_fill(later, float("-inf"))


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("length, cached", [(1, 0), (37, 0), (300, 0), (5, 40), (1, 99), (1100, 0)])
def test_fire_bias_equals_the_mlp_over_every_pair(causal, length, cached):
    """Running the MLP on the pairs a query sees (causal: the lower triangle, keys after a cache
    included) and gathering gives the same bias, ``-inf`` at future keys included, contiguous so attention
    reads it without copying; in slices into one buffer without autograd (1100 queries take more than one
    slice), in one call with it."""
    torch.manual_seed(2)
    enc = build("fire", n_heads=5, causal=causal, init_threshold=50.0)
    enc.mlp[0].bias.data.uniform_(-1, 1)  # kinks of the ReLU inside [0, 1], where the features lie
    query, key = P(length, cached), P(cached + length)
    ids = Positions.from_ids(torch.tensor([0, 3, 4, 9, 30, 31, 70, 200]))  # randomized positions, in order
    for grad in (True, False):
        with torch.set_grad_enabled(grad):
            bias = enc.attention_bias(query, key)
            assert bias.shape == (5, length, cached + length) and bias.is_contiguous()
            torch.testing.assert_close(bias, fire_over_every_pair(enc, query, key), rtol=1e-6, atol=1e-6)
            torch.testing.assert_close(enc.attention_bias(ids, ids), fire_over_every_pair(enc, ids, ids),
                                       rtol=1e-6, atol=1e-6)
    assert bool(torch.isinf(bias).any()) == (causal and length > 1)  # a key after a query: only then


def test_fire_counts_the_mlp_over_the_pairs_it_runs_on():
    """The analytic FLOPs of one bias: per pair (causal: each query up to its own token) 2 · hidden · (1 + h)
    for the MLP; training adds twice the matmuls, two multiplies per query and key and one per query."""
    causal, both_ways = build("fire", n_heads=3, causal=True), build("fire", n_heads=3)
    mlp = 2 * 32 * (1 + 3)
    assert causal.bias_flops(37, 37, "infer") == 703 * mlp  # 37 · 38 / 2 pairs
    assert causal.bias_flops(5, 45, "infer") == (5 * 45 - 10) * mlp  # after a cache of 40: 41 … 45 keys
    assert both_ways.bias_flops(37, 37, "infer") == 37 * 37 * mlp
    assert causal.bias_flops(37, 37, "train") == 3 * 703 * mlp + 2 * 37 * 37 + 37


def test_fire_defaults_are_the_documented_ones():
    """Family options hidden 32, c 0.1, threshold 512 (the class docstring), unmasked unless built causal."""
    from posbench.encodings.fire import Fire

    enc = Fire(32, 4, 64)
    assert enc.causal is False and (enc.hidden, enc.c.item(), enc.threshold.item()) == (32, pytest.approx(0.1), 512.0)
    assert [type(m).__name__ for m in enc.mlp] == ["Linear", "ReLU", "Linear"]
    assert (enc.mlp[0].in_features, enc.mlp[0].out_features, enc.mlp[-1].out_features) == (1, 32, 4)
