"""The three FLOP counts agree, the handles are needed, and the analytic terms mean what they say."""

import json
import warnings

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from posbench import ModelConfig, attention, build_model, encodings
from posbench.flops import TORCH_FORMULAS, analytic_flops, count_flops, torch_flops

# isort: split
from fvcore.nn import FlopCountAnalysis  # after posbench, which imports it without its deprecation warnings

torch.set_num_threads(1)

# Tiny configs: odd head counts, lengths that are not powers of two, both attention directions,
# token ids and patches. d_head = 20 and 8 keep rope_2d (d_head % 4) and sinusoidal_2d (d % 4) valid.
CONFIGS = {
    "causal-lm-3-heads-L37": (dict(vocab_size=23, d_model=60, n_heads=3, n_layers=2, causal=True), 2, 37),
    "bidirectional-patches-5-heads-L100": (
        dict(d_model=40, n_heads=5, n_layers=2, causal=False, patch_dim=7, n_classes=10), 1, 100),
}


def tiny_model(encoding: str, max_len: int = 128, **options) -> torch.nn.Module:
    torch.manual_seed(0)
    return build_model(ModelConfig(encoding=encoding, max_len=max_len, **options))


def table_rebuilt_per_call(encoding: str, seq_len: int, d_model: int) -> int:
    """FLOPs only the counters see: sinusoidal_2d builds its row and column sinusoids every call
    (``L × d/4`` angle products each); every other encoding caches its table."""
    return seq_len * d_model // 2 if encoding == "sinusoidal_2d" else 0


@pytest.mark.parametrize("mode", ["infer", "train"])
@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("encoding", encodings.names())
def test_three_counts_agree(encoding, config, mode):
    options, batch, seq_len = CONFIGS[config]
    counts = count_flops(tiny_model(encoding, **options), batch, seq_len, mode)
    table = table_rebuilt_per_call(encoding, seq_len, options["d_model"])
    assert counts.torch == counts.analytic + table
    assert abs(counts.torch / counts.analytic - 1) < 0.01
    assert counts.fvcore == (counts.analytic + table if mode == "infer" else None)


@pytest.mark.parametrize("mode", ["infer", "train"])
def test_cope_with_fewer_positions_than_keys_is_counted_alike(mode):
    """A table of 7 positions against 37 keys: inference subtracts the steps between 7 positions per query, not
    one per logit (training does, and both count q·e against 7 positions)."""
    options, batch, seq_len = CONFIGS["causal-lm-3-heads-L37"]
    counts = count_flops(tiny_model("cope", encoding_options={"npos": 7}, **options), batch, seq_len, mode)
    assert counts.torch == counts.analytic and counts.fvcore == (counts.analytic if mode == "infer" else None)


@pytest.mark.parametrize("mode", ["infer", "train"])
@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("encoding", encodings.names())
def test_counts_extended_from_short_lengths_equal_the_counts_at_full_length(encoding, config, mode):
    """Above ``max_run_len`` the counters run at 16, 32, 48 (the fit) and 64 (the check) only, and the
    quadratic through those counts gives exactly what running at the full length counts; an encoding whose
    count is not a quadratic (PaTH's chunks) is counted at the full length."""
    options, batch, seq_len = CONFIGS[config]
    model = tiny_model(encoding, max_len=256, **options)
    extended = count_flops(model, batch, 2 * seq_len + 1, mode, max_run_len=64)
    direct = count_flops(model, batch, 2 * seq_len + 1, mode)
    short = (16, 32, 48, 64) if model.encoding.quadratic_flops else (2 * seq_len + 1,)
    assert extended.counted_at == short and direct.counted_at == (2 * seq_len + 1,)
    assert (extended.torch, extended.fvcore) == (direct.torch, direct.fvcore)
    assert extended.analytic == direct.analytic


def test_a_count_that_is_not_quadratic_in_length_is_refused(monkeypatch):
    from posbench import flops

    monkeypatch.setattr(flops, "torch_flops", lambda model, inputs, mode: inputs.shape[1] ** 3)
    model = tiny_model("none", vocab_size=11, d_model=8, n_heads=2, n_layers=1)
    with pytest.raises(ValueError, match=r"^torch counts are not quadratic in the sequence length \("
                                         r"\{4: 64, 8: 512, 12: 1728, 16: 4096\}\); count at full length instead$"):
        count_flops(model, 1, 100, max_run_len=16)
    monkeypatch.setattr(flops, "fvcore_flops", lambda model, inputs: inputs.shape[1] ** 3)  # counted first
    with pytest.raises(ValueError, match=r"^fvcore counts are not quadratic in the sequence length \("
                                         r"\{4: 64, 8: 512, 12: 1728, 16: 4096\}\); count at full length instead$"):
        count_flops(model, 1, 100, max_run_len=16)
    assert count_flops(model, 1, 16, max_run_len=16).torch == 16 ** 3  # not above it: counted as run


@pytest.mark.parametrize("encoding", ["sinusoidal", "rope", "alibi", "t5"])
def test_each_encodings_own_work_is_counted_by_every_counter(encoding):
    """Against NoPE, every counter sees exactly the encoding's analytic extra (add, rotation, bias)."""
    options, batch, seq_len = CONFIGS["causal-lm-3-heads-L37"]
    d, n, h, tokens = options["d_model"], options["n_layers"], options["n_heads"], batch * seq_len
    forward_extra = {"sinusoidal": tokens * d, "rope": n * 6 * tokens * d,  # E + P; 3 per rotated q, k element
                     "alibi": n * batch * h * seq_len ** 2, "t5": n * batch * h * seq_len ** 2}[encoding]
    for mode in ("infer", "train"):
        with_encoding = count_flops(tiny_model(encoding, **options), batch, seq_len, mode)
        without = count_flops(tiny_model("none", **options), batch, seq_len, mode)
        extra = with_encoding.analytic - without.analytic
        assert with_encoding.torch - without.torch == extra
        if mode == "infer":
            assert with_encoding.fvcore - without.fvcore == extra == forward_extra


def stock_fvcore(model, inputs) -> int:
    analysis = FlopCountAnalysis(model, inputs)
    analysis.unsupported_ops_warnings(False).uncalled_modules_warnings(False)
    with torch.no_grad():
        return analysis.total()


def stock_torch(model, inputs) -> int:
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        model(inputs)
    return counter.get_total_flops()


@pytest.mark.parametrize("stock", [stock_fvcore, stock_torch])
def test_stock_counters_miss_attention(stock):
    """Out of the box both counters are linear in L (no q·kᵀ, no attn·v) and blind to the encoding."""
    model_for = {enc: tiny_model(enc, vocab_size=23, d_model=32, n_heads=4, n_layers=2)
                 for enc in ("none", "alibi")}
    tokens = {L: torch.randint(23, (1, L)) for L in (24, 48)}
    for model in model_for.values():
        assert stock(model, tokens[48]) == 2 * stock(model, tokens[24])
    assert stock(model_for["alibi"], tokens[24]) == stock(model_for["none"], tokens[24])
    alibi = model_for["alibi"]
    with_handles = count_flops(alibi, 1, 48).fvcore - 2 * count_flops(alibi, 1, 24).fvcore
    # the L² term at 2L minus twice that at L: n_layers · 2 · (4 · width + heads) · L²
    assert with_handles == 2 * 2 * (4 * 32 + 4) * 24 ** 2


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("encoding", ["none", "alibi"])
def test_attention_grows_with_the_square_of_length(encoding, causal):
    """Second difference in L: 2 · n_layers · B · (4·width + heads·bias) dense,
    2 · n_layers · B · (2·width + heads·bias) for the causal half."""
    B, width, heads, n = 2, 36, 3, 2
    model = tiny_model(encoding, vocab_size=11, d_model=width, n_heads=heads, n_layers=n, causal=causal)
    bias = heads if encoding == "alibi" else 0

    def second_difference(count, L=50):
        return count(L + 1) - 2 * count(L) + count(L - 1)

    def analytic(causal_half):
        return lambda L: sum(analytic_flops(model, B, L, causal_half=causal_half).values())

    assert second_difference(analytic(False)) == 2 * n * B * (4 * width + bias)
    half_width = 2 * width if causal else 4 * width
    assert second_difference(analytic(True)) == 2 * n * B * (half_width + bias)
    assert second_difference(lambda L: count_flops(model, B, L).torch) == 2 * n * B * (4 * width + bias)


def test_counters_see_the_dense_kernel_whatever_the_query_blocks():
    """The harness's causal query blocks skip keys; count_flops still counts the dense L × L."""
    model = tiny_model("alibi", vocab_size=11, d_model=24, n_heads=3, n_layers=1, causal=True)
    tokens = torch.randint(11, (1, 40))
    dense = count_flops(model, 1, 40)
    with attention.configured(block_size=8):
        assert count_flops(model, 1, 40) == dense
        with torch.no_grad():
            model(tokens)  # build this setting's mask outside the count
        skipped = torch_flops(model, tokens)  # blocks of 8 queries see keys up to their last query
    assert dense.torch == dense.analytic
    logits_seen = sum(8 * stop for stop in range(8, 41, 8))  # per (batch, head)
    per_logit = 2 * 8 + 2 * 8 + 1  # q·kᵀ and attn·v at d_head 8, and the bias add
    assert dense.torch - skipped == per_logit * 3 * (40 * 40 - logits_seen)  # 3 heads


@pytest.mark.parametrize("family", ["sinusoidal", "learned"])
def test_naive_concat_costs_four_times_the_projections_and_fixed_concat_none(family):
    d = 32
    measured, analytic = {}, {}
    for mode in ("", "_concat", "_concat_fixed"):
        model = tiny_model(family + mode, vocab_size=11, d_model=d, n_heads=4, n_layers=2)
        analytic[mode] = analytic_flops(model, 1, 16)["projections"]
        measured[mode] = projection_flops(model, torch.randint(11, (1, 16)))
    assert analytic["_concat"] == 4 * analytic[""] == 4 * 2 * 16 * d * 4 * d * 2
    assert analytic["_concat_fixed"] == analytic[""]
    assert measured == analytic


def projection_flops(model, inputs) -> int:
    """FlopCounterMode's count inside the q/k/v and output projections."""
    counter = FlopCounterMode(display=False, custom_mapping=TORCH_FORMULAS)
    with torch.no_grad(), counter:
        model(inputs)
    per_module = counter.get_flop_counts()
    return sum(sum(ops.values()) for name, ops in per_module.items() if name.endswith((".attn.qkv", ".attn.out")))


def test_analytic_from_config_equals_analytic_from_model():
    cfg = ModelConfig(encoding="t5", vocab_size=11, d_model=20, n_heads=5, n_layers=3, max_len=64)
    for mode in ("infer", "train"):
        assert analytic_flops(cfg, 3, 41, mode) == analytic_flops(build_model(cfg), 3, 41, mode)


def test_counts_are_json_ready_with_ratios():
    model = tiny_model("rope", vocab_size=11, d_model=24, n_heads=3, n_layers=1)
    counts = count_flops(model, 1, 10)
    assert (counts.mode, counts.batch_size, counts.seq_len) == ("infer", 1, 10)
    assert all(type(n) is int for n in (counts.analytic, counts.analytic_causal_half, counts.fvcore, counts.torch,
                                        *counts.terms.values()))  # exact counts, not floats
    infer = json.loads(json.dumps(counts.as_dict()))
    assert infer["fvcore_over_analytic"] == infer["torch_over_analytic"] == 1.0
    assert sum(infer["terms"].values()) == infer["analytic"] > infer["analytic_causal_half"]
    train = json.loads(json.dumps(count_flops(model, 1, 10, "train").as_dict()))
    assert train["fvcore"] is None and train["fvcore_over_analytic"] is None


def test_counting_a_training_step_leaves_gradients_alone():
    model = tiny_model("t5", vocab_size=11, d_model=24, n_heads=3, n_layers=2)
    for param in model.parameters():
        param.grad = torch.full_like(param, 0.5)
    count_flops(model, 2, 9, "train")
    assert all(torch.equal(param.grad, torch.full_like(param, 0.5)) for param in model.parameters())


@pytest.mark.parametrize("arguments, message", [
    (dict(mode="backward"), "mode 'backward'; allowed: infer, train"),
    (dict(seq_len=0), "seq_len must be a positive integer, got 0"),
    (dict(batch_size=1.5), "batch_size must be a positive integer, got 1.5"),
    (dict(seq_len=9, max_run_len=3), "max_run_len must be an integer >= 4, got 3"),
])
def test_bad_arguments_name_the_argument(arguments, message):
    model = tiny_model("none", vocab_size=11, d_model=8, n_heads=2, n_layers=1)
    with pytest.raises(ValueError, match=f"^{message}$"):
        count_flops(model, **{"batch_size": 1, "seq_len": 4, **arguments})


def test_decode_flops_of_one_token_against_a_cache_by_hand():
    """One generated token per sequence, B = 2, 36 cached tokens (37 keys), d 60, 3 heads, 2 layers, d_ff 240,
    vocabulary 23: each term worked out by hand from the convention (2 FLOPs a multiply-add)."""
    from posbench.flops import decode_flops

    options = dict(vocab_size=23, d_model=60, n_heads=3, n_layers=2, causal=True)
    common = {"embedding": 0, "projections": 2 * 2 * 2 * 60 * 4 * 60,  # n · 2 · B · d · 4d = 115,200
              "attention_scores": 2 * 2 * 2 * 37 * 60, "attention_values": 2 * 2 * 2 * 37 * 60,  # 17,760 each
              "ffn": 2 * 2 * 2 * 2 * 60 * 240, "residual": 2 * 2 * 2 * 60, "head": 2 * 2 * 60 * 23}
    assert common == {"embedding": 0, "projections": 115_200, "attention_scores": 17_760, "attention_values": 17_760,
                      "ffn": 230_400, "residual": 480, "head": 5_520}
    common["position_content"] = 0
    plain = {"position_input": 0, "rotation": 0, "attention_bias": 0}
    logits = 2 * 3 * 37  # B · h · keys per layer
    expected = {
        "sinusoidal": {**common, "position_input": 2 * 60, "rotation": 0, "attention_bias": 0},
        # rope: 3 FLOPs per rotated element of q and k
        "rope": {**common, "position_input": 0, "rotation": 2 * 2 * 3 * 2 * 60, "attention_bias": 0},
        # n · B · h · keys bias adds, plus FIRE's one query row: 2 · 32 · (1 + 3) · 37 MLP FLOPs (integer distances)
        "fire": {**common, "position_input": 0, "rotation": 0, "attention_bias": 2 * 2 * 3 * 37 + 2 * 32 * 4 * 37},
        # per layer: q·e against the 38 positions 37 keys can count (2 · B · h · d_head · 38), 4 per logit
        "cope": {**common, **plain, "position_content": 2 * (2 * 2 * 3 * 20 * 38 + 4 * logits)},
        # per layer: the gates' map (2 · B · d · h), a subtraction and the mask's add per logit, the new λ's add
        "fox": {**common, **plain, "position_content": 2 * (2 * 2 * 60 * 3 + 2 * logits + 2 * 3)},
        # per layer: one add per logit, the remainder's multiply and add per value element (B · d)
        "stick_breaking": {**common, **plain, "position_content": 2 * (logits + 2 * 2 * 60)},
    }
    for encoding, terms in expected.items():
        config = ModelConfig(encoding=encoding, max_len=128, **options)
        assert decode_flops(config, 2, 36) == terms
        assert decode_flops(tiny_model(encoding, **options), 2, 36) == terms
    patches = ModelConfig(encoding="sinusoidal_concat", max_len=128, d_model=40, n_heads=5, n_layers=2, causal=False,
                          patch_dim=7, n_classes=10)  # width 80 (40 token + 40 position), d_ff 320, 10 keys
    assert decode_flops(patches, 1, 9) == {
        "embedding": 2 * 7 * 40, "position_input": 0, "projections": 2 * 2 * 80 * 4 * 80, "rotation": 0,
        "attention_scores": 2 * 2 * 10 * 80, "attention_bias": 0, "attention_values": 2 * 2 * 10 * 80,
        "ffn": 2 * 2 * 2 * 80 * 320, "residual": 2 * 2 * 80, "head": 2 * 80 * 10, "position_content": 0}
    assert decode_flops(patches, 3, 9)["embedding"] == 2 * 3 * 7 * 40  # per sequence of the batch
    with pytest.raises(ValueError, match=r"^batch_size must be a positive integer, got 0$"):
        decode_flops(patches, 0, 9)


def test_four_is_the_shortest_run_length_and_a_fractional_extension_is_refused():
    from posbench.flops import _extended

    model = tiny_model("none", vocab_size=11, d_model=8, n_heads=2, n_layers=1)
    shortest = count_flops(model, 1, 9, max_run_len=4)
    assert shortest.counted_at == (1, 2, 3, 4) and shortest.torch == count_flops(model, 1, 9).torch
    assert _extended({2: 1, 4: 4, 6: 9, 8: 16}, 10, "torch") == 25  # L²/4 through even lengths
    with pytest.raises(ValueError, match=r"^torch counts \{2: 1, 4: 4, 6: 9, 8: 16\} extend to a fraction at L=5$"):
        _extended({2: 1, 4: 4, 6: 9, 8: 16}, 5, "torch")


class Attention(torch.nn.Module):
    """One SDPA call, for counting attention alone (fvcore traces a module)."""

    def __init__(self, mask=None):
        super().__init__()
        self.mask = mask

    def forward(self, q, k, v):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=self.mask)


def fvcore_by_operator(module, inputs) -> dict[str, int]:
    from posbench.flops import FVCORE_HANDLES

    analysis = FlopCountAnalysis(module, inputs).clear_op_handles().set_op_handle(**FVCORE_HANDLES)
    analysis.unsupported_ops_warnings(False).uncalled_modules_warnings(False)
    with torch.no_grad():
        return dict(analysis.by_operator())


def torch_by_operator(module, inputs, mode="infer") -> dict[str, int]:
    counter = FlopCounterMode(display=False, custom_mapping=TORCH_FORMULAS)
    if mode == "infer":
        with torch.no_grad(), counter:
            module(*inputs)
    else:
        inputs = [t.clone().requires_grad_() for t in inputs]
        with counter:
            module(*inputs).sum().backward()
    return {str(op): flops for op, flops in counter.get_flop_counts()["Global"].items()}


def test_attention_of_fewer_queries_than_keys_by_formula():
    """Queries of a cached step (Lq = 1 or 3) against 37 keys: q·kᵀ is 2 · B · h · Lq · Lk · d_qk, attn·v
    2 · B · h · Lq · Lk · d_v, a float mask one add per logit; backward twice the two matmuls."""
    from posbench.flops import _attention_flops, _attention_matmul_flops

    # the formulas on shapes: B 2, h 3, d_qk 20, d_v 12 (SDPA allows d_v ≠ d_qk), and without the batch dimension
    assert _attention_matmul_flops((2, 3, 1, 20), (2, 3, 37, 20), (2, 3, 37, 12)) == 2 * 2 * 3 * 1 * 37 * 32 == 14_208
    assert _attention_matmul_flops((2, 3, 3, 20), (2, 3, 37, 20), (2, 3, 37, 12)) == 2 * 2 * 3 * 3 * 37 * 32 == 42_624
    assert _attention_matmul_flops((3, 3, 20), (3, 37, 20), (3, 37, 12)) == 2 * 3 * 3 * 37 * 32 == 21_312
    assert _attention_flops((2, 3, 3, 20), (2, 3, 37, 20), (2, 3, 37, 12), None) == 42_624
    assert _attention_flops((2, 3, 3, 20), (2, 3, 37, 20), (2, 3, 37, 12), ()) == 42_624  # a 0-d mask: a constant
    assert _attention_flops((2, 3, 3, 20), (2, 3, 37, 20), (2, 3, 37, 12), (1, 3, 3, 37)) == 42_624 + 2 * 3 * 3 * 37
    assert _attention_flops((3, 3, 20), (3, 37, 20), (3, 37, 12), (3, 37)) == 21_312 + 3 * 3 * 37

    torch.manual_seed(0)
    for q_len in (1, 3):
        matmuls = 2 * 2 * 3 * q_len * 37 * (20 + 20)  # B 2, h 3, d 20 (equal d: the CPU flash kernel)
        q, k, v = torch.randn(2, 3, q_len, 20), torch.randn(2, 3, 37, 20), torch.randn(2, 3, 37, 20)
        for mask, bias_adds in ((None, 0), (torch.randn(1, 3, q_len, 37), 2 * 3 * q_len * 37)):
            assert fvcore_by_operator(Attention(mask), (q, k, v)) == {
                "scaled_dot_product_attention": matmuls + bias_adds}
            kernel = "aten._scaled_dot_product_flash_attention_for_cpu"
            assert torch_by_operator(Attention(mask), (q, k, v)) == {kernel: matmuls + bias_adds}
            assert torch_by_operator(Attention(mask), (q, k, v), "train") == {
                kernel: matmuls + bias_adds, kernel + "_backward": 2 * matmuls}
        # fvcore's one op for (h, L, d) inputs too (torch's CPU dispatch runs those as bmm, counted by torch's own)
        q3, k3 = q[0], k[0]
        assert fvcore_by_operator(Attention(torch.randn(q_len, 37)), (q3, k3, k3)) == {
            "scaled_dot_product_attention": 3 * q_len * 37 * (2 * 2 * 20 + 1)}


class CachedStep(torch.nn.Module):
    """The model's step on new tokens after a filled cache, each call against a fresh copy (fvcore traces once)."""

    def __init__(self, model, cache):
        super().__init__()
        self.model, self.cache = model, cache

    def forward(self, tokens):
        from posbench.cache import KVCache

        cache = KVCache(list(self.cache.keys), list(self.cache.values), self.cache.positions)
        return self.model(tokens, cache=cache)


# several queries of an unbiased causal model reach SDPA with a boolean causal mask: only the biased ones at 3
@pytest.mark.parametrize("encoding, new_tokens", [("none", 1), ("rope", 1), ("alibi", 1), ("t5", 1), ("alibi", 3),
                                                  ("t5", 3)])
def test_a_cached_decode_step_is_counted_by_formula_by_every_counter(encoding, new_tokens):
    """B 2, 37 − Lq cached tokens, Lq new ones (37 keys), d 60, 3 heads (d_head 20), 2 layers: SDPA's count is
    per layer 2 · 2 · B · h · Lq · 37 · d_head, plus B · h · Lq · 37 bias adds for a biased encoding; the whole
    step of one token is decode_flops' total."""
    from posbench.cache import KVCache
    from posbench.flops import decode_flops

    options = dict(vocab_size=23, d_model=60, n_heads=3, n_layers=2, causal=True)
    model = tiny_model(encoding, **options)
    cache = KVCache.empty(2)
    with torch.no_grad():
        model(torch.randint(23, (2, 37 - new_tokens)), cache=cache)
    step = CachedStep(model, cache)
    tokens = torch.randint(23, (2, new_tokens))
    biased = encoding in ("alibi", "t5")
    per_layer = 2 * 2 * 2 * 3 * new_tokens * 37 * 20 + (2 * 3 * new_tokens * 37 if biased else 0)
    assert per_layer == {1: {False: 17_760, True: 17_982}, 3: {True: 53_946}}[new_tokens][biased]
    fvcore, torch_counts = fvcore_by_operator(step, (tokens,)), torch_by_operator(step, (tokens,))
    assert fvcore["scaled_dot_product_attention"] == 2 * per_layer
    assert torch_counts["aten._scaled_dot_product_flash_attention_for_cpu"] == 2 * per_layer
    assert sum(fvcore.values()) == sum(torch_counts.values())
    if new_tokens == 1:
        terms = decode_flops(model, 2, 36)
        assert terms["attention_scores"] + terms["attention_values"] + terms["attention_bias"] == 2 * per_layer
        assert sum(torch_counts.values()) == sum(terms.values())
    assert len(cache) == 37 - new_tokens  # the counted steps left the cache alone


@pytest.mark.parametrize("encoding", ["rnope_swa", "irope"])
def test_a_cached_decode_step_of_local_attention_is_counted_over_its_window_by_every_counter(encoding):
    """B 2, 36 cached tokens and one new, d 60, 3 heads, 2 layers (a local one, span 128 / 4 = 32; a global
    one): the local layer's query attends its window's 32 keys (rnope_swa) or its chunk's 36 % 32 + 1 = 5
    (irope), unmasked; the global one all 37."""
    from posbench.cache import KVCache
    from posbench.flops import decode_flops

    model = tiny_model(encoding, vocab_size=23, d_model=60, n_heads=3, n_layers=2, causal=True)
    cache = KVCache.empty(2)
    with torch.no_grad():
        model(torch.randint(23, (2, 36)), cache=cache)
    step, tokens = CachedStep(model, cache), torch.randint(23, (2, 1))
    seen = {"rnope_swa": 32, "irope": 5}[encoding] + 37
    fvcore, torch_counts = fvcore_by_operator(step, (tokens,)), torch_by_operator(step, (tokens,))
    assert fvcore["scaled_dot_product_attention"] == 2 * 2 * 2 * 3 * seen * 20
    assert torch_counts["aten._scaled_dot_product_flash_attention_for_cpu"] == 2 * 2 * 2 * 3 * seen * 20
    terms = decode_flops(model, 2, 36)
    assert terms["attention_bias"] == 0 and sum(torch_counts.values()) == sum(terms.values())


@pytest.mark.parametrize("encoding", ["rnope_swa", "irope"])
def test_a_decode_step_of_local_attention_on_a_forced_path_is_counted_over_every_key(encoding):
    """A forced mask path runs the local layer's query against all 37 keys with its window as a mask: decode_flops
    asks choose_path which layers decode in their window, so it counts what runs (before, it counted the window)."""
    from posbench.cache import KVCache
    from posbench.flops import decode_flops

    model = tiny_model(encoding, vocab_size=23, d_model=60, n_heads=3, n_layers=2, causal=True)
    cache = KVCache.empty(2)
    with torch.no_grad():
        model(torch.randint(23, (2, 36)), cache=cache)
    step, tokens = CachedStep(model, cache), torch.randint(23, (2, 1))
    with attention.configured(force_path="general_dense"):
        torch_counts = torch_by_operator(step, (tokens,))
        terms = decode_flops(model, 2, 36)
    assert terms["attention_scores"] == 2 * 2 * 2 * 37 * 60  # both layers over every key
    assert terms["attention_bias"] == 2 * 3 * 37  # the local layer's window, added as a mask
    assert sum(torch_counts.values()) == sum(terms.values())


def test_the_causal_half_by_hand_in_both_modes():
    """Causal, B 2, L 37, width 60, 2 layers: the causal half counts q·kᵀ and attn·v over 37 · 38 / 2 = 703
    logits per (batch, head) instead of 37² = 1,369, 666 fewer; a training step's backward twice that again."""
    options, batch, seq_len = CONFIGS["causal-lm-3-heads-L37"]
    model = tiny_model("alibi", **options)
    fewer = 2 * 2 * 2 * batch * (37 * 37 - 37 * 38 // 2) * 60  # layers · (scores, values) · 2 · B · logits · width
    assert fewer == 639_360
    infer, train = count_flops(model, batch, seq_len), count_flops(model, batch, seq_len, "train")
    assert infer.analytic - infer.analytic_causal_half == fewer
    assert train.analytic - train.analytic_causal_half == 3 * fewer
    bidirectional = count_flops(tiny_model("alibi", **{**options, "causal": False}), batch, seq_len)
    assert bidirectional.analytic_causal_half == bidirectional.analytic  # nothing to halve


def test_count_flops_defaults_to_one_sequence_of_1024():
    model = tiny_model("none", max_len=1024, vocab_size=11, d_model=8, n_heads=2, n_layers=1)
    counts = count_flops(model)
    assert (counts.mode, counts.batch_size, counts.seq_len, counts.counted_at) == ("infer", 1, 1024, (1024,))
    assert counts.torch == counts.fvcore == counts.analytic == sum(analytic_flops(model, 1, 1024).values())


def test_a_float64_model_is_counted_on_inputs_of_its_dtype_and_device():
    from posbench.flops import _example_inputs
    from posbench.model import meta_model

    patches = dict(d_model=8, n_heads=2, n_layers=1, patch_dim=3, n_classes=4, causal=False)
    model = tiny_model("sinusoidal", **patches).double()
    infer, train = count_flops(model, 2, 9), count_flops(model, 2, 9, "train")
    assert infer.fvcore == infer.torch == infer.analytic == sum(analytic_flops(model, 2, 9).values())
    assert train.torch == train.analytic == sum(analytic_flops(model, 2, 9, "train").values())
    inputs = _example_inputs(model, 2, 9)
    assert (inputs.shape, inputs.dtype, inputs.device.type) == ((2, 9, 3), torch.float64, "cpu")
    for config in (ModelConfig(encoding="none", **patches), ModelConfig(encoding="none", vocab_size=11, d_model=8,
                                                                         n_heads=2, n_layers=1)):
        inputs = _example_inputs(meta_model(config).double(), 2, 5)  # a model on the meta device: inputs there too
        assert inputs.device.type == "meta"
        assert (inputs.shape, inputs.dtype) == (((2, 5, 3), torch.float64) if config.patch_dim
                                                else ((2, 5), torch.int64))


def test_elementwise_arithmetic_by_dtype_and_operand():
    """1 FLOP per output element for float add, sub, mul (in place too, broadcast by the output), a complex
    multiply 6, a complex add or sub 2; integers, Python numbers and 0-d tensors count 0; both counters."""

    class Arithmetic(torch.nn.Module):
        def forward(self, a, b, row, z, w, i, j):
            c = a.clone()
            c.add_(b)
            c.mul_(b)
            return (a + b, a - b, a * b, c, z * w, z + w, z - w, i + j, i * j, a + 2.0, a * torch.tensor(3.0),
                    a + row)

    inputs = (torch.randn(3, 4), torch.randn(3, 4), torch.randn(4), torch.randn(5, dtype=torch.complex64),
              torch.randn(5, dtype=torch.complex64), torch.arange(7), torch.arange(7))
    expected = {"add": 12 + 2 * 5 + 12, "sub": 12 + 2 * 5, "mul": 12 + 6 * 5, "add_": 12, "mul_": 12}
    assert {op.removeprefix("aten."): n for op, n in torch_by_operator(Arithmetic(), inputs).items() if n} == expected
    assert {op: n for op, n in fvcore_by_operator(Arithmetic(), inputs).items() if n} == expected


def test_the_gpu_kernels_mask_is_counted_from_its_positional_argument():
    """The efficient and cudnn SDPA kernels take the mask 4th, positionally (the CPU one as ``attn_mask=``);
    run on the meta device, FlopCounterMode counts each as 2 · 2 · B · h · Lq · Lk · d plus the mask adds."""
    aten = torch.ops.aten
    q, k = torch.empty(2, 3, 3, 20, device="meta"), torch.empty(2, 3, 37, 20, device="meta")
    bias = torch.empty(1, 3, 3, 37, device="meta")
    matmuls, bias_adds = 2 * 2 * 2 * 3 * 3 * 37 * 20, 2 * 3 * 3 * 37
    for kernel, mask, flops in (
            (aten._scaled_dot_product_efficient_attention, bias, matmuls + bias_adds),
            (aten._scaled_dot_product_efficient_attention, None, matmuls),
            (aten._scaled_dot_product_cudnn_attention, bias, matmuls + bias_adds)):
        counter = FlopCounterMode(display=False, custom_mapping=TORCH_FORMULAS)
        with counter:
            kernel(q, k, k, mask, True)  # compute_log_sumexp: a bool after the mask, not a tensor
        assert counter.get_total_flops() == flops == {True: 53_946, False: 53_280}[mask is not None]


def test_counting_prints_and_logs_nothing(capsys, caplog):
    """FlopCounterMode prints its table unless told not to; fvcore logs every op it has no handle for."""
    caplog.set_level("DEBUG")
    for encoding in ("rope", "t5"):
        for mode in ("infer", "train"):
            count_flops(tiny_model(encoding, vocab_size=11, d_model=24, n_heads=3, n_layers=1), 1, 10, mode)
    assert capsys.readouterr() == ("", "")
    assert [record.getMessage() for record in caplog.records if record.levelno >= 30] == []


def test_fvcore_silences_the_tracers_warnings_only():
    """Tracing warns where a model turns a tensor into a Python value; fvcore_flops hides those, not the model's own."""
    from posbench.flops import fvcore_flops

    class Branching(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(4, 3, bias=False)

        def forward(self, x):
            warnings.warn("the model's own warning", UserWarning, stacklevel=2)
            y = self.linear(x)
            return y * 2 if bool(y.sum() > -1e9) else y  # a Python bool from a traced tensor: a TracerWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert fvcore_flops(Branching(), torch.randn(5, 4)) == 2 * 5 * 4 * 3  # the linear; * 2 is a constant
    assert {(type(w.message), str(w.message)) for w in caught} == {(UserWarning, "the model's own warning")}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.jit.trace(Branching(), torch.randn(5, 4))
    assert torch.jit.TracerWarning in {type(w.message) for w in caught}  # what there was to hide


def test_the_counters_run_sdpa_even_where_a_cuda_model_would_take_flex(monkeypatch):
    """No counter sees inside FlexAttention, a biased encoding's default path on CUDA: while counting, that
    path is switched off and one SDPA call covers all keys (this CPU run asks which path CUDA would take)."""
    from posbench import flops

    model = tiny_model("alibi", vocab_size=11, d_model=24, n_heads=3, n_layers=1)
    seen = []

    def path_on_cuda(*args):
        seen.append((attention.choose_path(model.encoding, 40, 40, True, device="cuda"), attention.SETTINGS.block_size))
        return 0

    monkeypatch.setattr(flops, "fvcore_flops", path_on_cuda)
    monkeypatch.setattr(flops, "torch_flops", path_on_cuda)
    assert attention.choose_path(model.encoding, 40, 40, True, device="cuda") == "flex"  # outside a count
    count_flops(model, 1, 40)
    count_flops(model, 1, 40, "train")
    assert seen == [("relative", 40)] * 3  # fvcore and torch, then torch alone for the training step
