"""Layer patterns (irope, rnope_swa): which layer gets what at each size, windows, chunks and the temperature
against their rules written out, one mask per distinct layer encoding, decoding with a cache."""

import math

import pytest
import torch

import posbench
from posbench import KVCache, encodings, tasks, train
from posbench.attention import attend, build_mask, choose_path, configured
from posbench.encodings.layer_pattern import ChunkedRope, QueryTemperature, SlidingWindowRope
from posbench.positions import Positions

P = Positions.arange
LOCAL, GLOBAL = "local", "global"


def net(name, size="tiny", max_len=48, **options):
    torch.manual_seed(0)
    cfg = posbench.ModelConfig.from_size(size, encoding=name, vocab_size=13, max_len=max_len, encoding_options=options)
    return posbench.build_model(cfg).eval()


@pytest.mark.parametrize("n_layers, pattern", [
    (1, [LOCAL]), (2, [LOCAL, GLOBAL]), (3, [LOCAL, LOCAL, GLOBAL]), (4, [LOCAL] * 3 + [GLOBAL]),
    (6, [LOCAL] * 3 + [GLOBAL] + [LOCAL] * 2), (12, ([LOCAL] * 3 + [GLOBAL]) * 3)])
@pytest.mark.parametrize("name", ["irope", "rnope_swa"])
def test_every_period_th_layer_is_global_the_period_shrunk_to_the_depth_but_not_below_two(name, n_layers, pattern):
    enc = encodings.build(name, d_model=16, n_heads=2, max_len=32)
    kinds = {enc.local: LOCAL, enc.global_layer: GLOBAL}
    assert [kinds[layer] for layer in enc.layers(n_layers)] == pattern


def test_tiny_and_small_get_their_patterns_and_each_preset_its_layers():
    assert [type(e).__name__ for e in net("irope").layer_encodings] == ["ChunkedRope", "QueryTemperature"]
    assert [type(e).__name__ for e in net("irope", "small").layer_encodings] == ["ChunkedRope"] * 3 + [
        "QueryTemperature"]
    assert [type(e).__name__ for e in net("rnope_swa", "small").layer_encodings] == ["SlidingWindowRope"] * 3 + [
        "PositionalEncoding"]  # NoPE: no hook at all
    assert net("rnope_swa").layer_encodings[1].hook == "none"


def test_span_and_floor_scale_are_a_quarter_of_the_training_length_which_train_passes():
    enc = encodings.build("irope", d_model=16, n_heads=2, max_len=400, trained_length=100)
    assert (enc.local.span, enc.global_layer.floor_scale) == (25, 25)
    assert encodings.build("rnope_swa", d_model=16, n_heads=2, max_len=64).local.span == 16  # default: max_len
    task = tasks.get("reverse")
    cfg = train.model_config(task, "irope", "tiny")
    trained = task.sequence_length(task.train_length)
    assert cfg.encoding_options == {"trained_length": trained} and trained < cfg.max_len
    assert posbench.build_model(cfg).encoding.local.span == trained // 4
    assert train.model_config(task, "rope", "tiny").encoding_options == {}  # a family without the option: none


def reference_attention(q, k, v, sees):
    """Softmax over the keys ``sees (L, L)`` allows, written out."""
    logits = (q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])).masked_fill(~sees, -math.inf)
    return logits.softmax(-1) @ v


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("contiguous", [True, False])
def test_a_sliding_window_sees_keys_fewer_than_span_positions_away(causal, contiguous, float64):
    local = SlidingWindowRope(16, 2, 64, causal, span=4)
    positions = P(12) if contiguous else Positions.from_ids(torch.arange(12) * 2 + 3)  # ids 3, 5, …, 25
    ids = positions.ids
    q, k, v = torch.randn(3, 1, 2, 12, 8, dtype=torch.float64).unbind(0)  # (B, h, L, d)
    i, j = ids[:, None], ids[None, :]
    sees = ((i - j).abs() < 4) & ((j <= i) if causal else True)
    mask = build_mask(local, positions, positions, causal, torch.float64)
    assert mask.path == ("relative" if contiguous else "general_dense")
    torch.testing.assert_close(attend(q, k, v, mask, causal), reference_attention(q, k, v, sees), atol=1e-12, rtol=0)


@pytest.mark.parametrize("causal", [True, False])
def test_a_chunk_sees_only_its_own_chunk(causal, float64):
    local = ChunkedRope(16, 2, 64, causal, span=5)
    q, k, v = torch.randn(3, 1, 2, 12, 8, dtype=torch.float64).unbind(0)  # (B, h, L, d)
    i, j = torch.arange(12)[:, None], torch.arange(12)[None, :]
    sees = (i // 5 == j // 5) & ((j <= i) if causal else True)  # chunks 0-4, 5-9, 10-11
    assert choose_path(local, 12, 12, causal) == "general_dense"
    mask = build_mask(local, P(12), P(12), causal, torch.float64)
    assert mask.full.shape == (1, 2, 12, 12) and mask.full.stride(1) == 0  # one (L, L) mask every head reads
    torch.testing.assert_close(attend(q, k, v, mask, causal), reference_attention(q, k, v, sees), atol=1e-12, rtol=0)
    with configured(force_path="flex"):  # FlexAttention (uncompiled here) reads the one mask in its score_mod
        flex = build_mask(local, P(12), P(12), causal, torch.float64)
        torch.testing.assert_close(attend(q, k, v, flex, causal), reference_attention(q, k, v, sees), atol=1e-12,
                                   rtol=0)


def test_the_temperature_is_llama_4s_at_its_own_numbers():
    """``ln(1 + ⌊(n + 1) / 8192⌋) · 0.1 + 1``: 1 up to position 8190, then a step at every multiple of 8192."""
    temperature = QueryTemperature(16, 2, 8, floor_scale=8192, attn_scale=0.1)
    ids = torch.tensor([0, 8190, 8191, 16382, 16383, 3 * 8192 - 1, 10**6])
    expected = [1, 1, 1 + 0.1 * math.log(2), 1 + 0.1 * math.log(2), 1 + 0.1 * math.log(3),
                1 + 0.1 * math.log(4), 1 + 0.1 * math.log(1 + 10**6 // 8192)]
    torch.testing.assert_close(temperature.temperature(Positions.from_ids(ids)),
                               torch.tensor(expected, dtype=torch.float32), atol=1e-6, rtol=0)
    q, k = torch.randn(2, 2, 7, 8), torch.randn(2, 2, 7, 8)
    scaled, same = temperature.rotate(q, k, Positions.from_ids(ids))
    assert same is k
    torch.testing.assert_close(scaled, q * torch.tensor(expected, dtype=torch.float32)[:, None], atol=1e-6, rtol=0)


@pytest.mark.parametrize("name, local_type", [("irope", ChunkedRope), ("rnope_swa", SlidingWindowRope)])
def test_the_local_layers_share_one_mask_per_forward_pass(name, local_type, monkeypatch):
    built = []
    hook = "attention_bias" if local_type is ChunkedRope else "relative_bias"
    original = getattr(local_type, hook)
    monkeypatch.setattr(local_type, hook, lambda self, *args: built.append(1) or original(self, *args))
    with torch.no_grad():
        net(name, "small")(torch.randint(0, 13, (2, 30)))  # three local layers
    assert len(built) == 1


@pytest.mark.parametrize("size", ["tiny", "small"])
@pytest.mark.parametrize("name", ["irope", "rnope_swa"])
def test_cached_decoding_equals_the_full_forward_where_windows_chunks_and_temperature_bite(name, size):
    model = net(name, size, max_len=48, trained_length=16)  # span and floor_scale 4: 30 tokens cross several
    tokens = torch.randint(0, 13, (2, 30))
    with torch.no_grad():
        full = model(tokens)
        cache = KVCache.empty(model.cfg.n_layers)
        steps = [model(tokens[:, :11], cache=cache)] + [model(tokens[:, t:t + 1], cache=cache) for t in range(11, 30)]
        unmasked = model.encoding.local.span
        model.encoding.local.span = 10**6  # no window or chunk: the masks must have mattered
        assert (model(tokens) - full).abs().max() > 1e-3
        model.encoding.local.span = unmasked
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=0)


@pytest.mark.parametrize("name, position, seen", [("rnope_swa", 29, 4), ("rnope_swa", 2, 3), ("irope", 29, 2),
                                                  ("irope", 31, 4), ("irope", 32, 1)])
def test_a_decode_step_of_a_local_layer_attends_only_its_window_or_chunk(name, position, seen):
    """Span 4: a window sees the last 4 keys (fewer at the start); a chunk its own keys up to the query
    (position 29: 28 and 29; 32 starts a chunk)."""
    local = net(name, max_len=48, trained_length=16).encoding.local
    query, key = Positions.arange(1, position), Positions.arange(position + 1)
    assert choose_path(local, 1, position + 1, True) == "window"
    assert "window" not in (choose_path(local, 2, position + 1, True), choose_path(local, 1, position + 1, False),
                            choose_path(local, 1, position + 1, True, contiguous=False))
    with configured(force_path="general_dense"):
        assert choose_path(local, 1, position + 1, True) == "general_dense"
    mask = build_mask(local, query, key, True)
    assert mask.seen == seen
    q, k, v = torch.randn(3, 2, 4, position + 1, 8).unbind()
    bias = local.attention_bias(query, key)[None]  # (1, h, 1, k): 0 in the window or chunk, −inf before it
    expected = torch.nn.functional.scaled_dot_product_attention(q[..., -1:, :], k, v, attn_mask=bias)
    torch.testing.assert_close(attend(q[..., -1:, :], k, v, mask, True), expected, atol=1e-6, rtol=0)


@pytest.mark.parametrize("options, message", [
    ({"local_attention": "global"}, r"^local_attention 'global'; allowed: sliding, chunked$"),
    ({"period": 1}, r"^period must be an integer >= 2, got 1$"),
    ({"span": 0.5}, r"^span must be an integer >= 1, got 0.5$"),
    ({"window": 8}, r"^encoding 'rnope_swa': .*unexpected keyword argument 'window'$")])
def test_bad_options_fail_in_one_line_naming_the_key(options, message):
    with pytest.raises(ValueError, match=message):
        encodings.build("rnope_swa", d_model=16, n_heads=2, max_len=32, **options)


def test_flops_and_memory_count_each_layer_with_its_own_encoding():
    """small (4 layers, w = 128, 4 heads) at L = 100: three local RoPE layers with a mask, one global layer."""
    from posbench.flops import analytic_flops, decode_flops
    from posbench.footprint import cell_memory

    w, h, L = 128, 4, 100
    for name, temperature in (("irope", 1), ("rnope_swa", 0)):
        cfg = posbench.ModelConfig.from_size("small", encoding=name, max_len=L)
        terms = analytic_flops(cfg, 2, L)
        assert terms["rotation"] == 3 * 2 * 3 * 2 * L * w + temperature * 2 * L * w  # RoPE's q and k; q × temperature
        assert terms["attention_bias"] == 3 * 2 * h * L * L  # the mask added in the three local layers
        decode = decode_flops(cfg, 2, L - 1)  # the local layers' one query attends its 25 keys (L / 4), unmasked
        assert decode["attention_bias"] == 0
        assert decode["attention_scores"] == decode["attention_values"] == 2 * 2 * (3 * 25 + L) * w
    chunked = cell_memory(posbench.ModelConfig.from_size("small", encoding="irope", max_len=L), 1, L)
    window = cell_memory(posbench.ModelConfig.from_size("small", encoding="rnope_swa", max_len=L), 1, L)
    assert chunked["attention_bias"] == 2 * h * L * L * 4  # one (h, L, L) mask and its causal copy, float32
    assert window["attention_bias"] == 2 * h * (2 * L - 1) * 4  # one (h, 2L − 1) table and its causal copy
