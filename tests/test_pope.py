"""PoPE against its formula written out: softplus magnitudes, phases from position only, the key's learned shift."""

import math

import pytest
import torch

import posbench
from posbench import encodings
from posbench.attention import attend
from posbench.positions import Positions

P = Positions.arange


def paper_logits(q, k, query_ids, key_ids, delta, base=10000.0):
    """``Σ_c softplus(q_c)·softplus(k_c)·cos((m − n)·θ_c − δ_c) / √d``, ``θ_c = base^(−c/d)``, one term at a
    time: ``q (h, Lq, d)``, ``k (h, Lk, d)``, ``δ (h, d)`` clamped to [−2π, 0] -> ``(h, Lq, Lk)``."""
    h, d = q.shape[0], q.shape[-1]
    theta = [base ** (-c / d) for c in range(d)]
    delta = delta.clamp(-2 * math.pi, 0)
    logits = torch.zeros(h, len(query_ids), len(key_ids), dtype=torch.float64)
    for head in range(h):
        for i, m in enumerate(query_ids):
            for j, n in enumerate(key_ids):
                logits[head, i, j] = sum(
                    math.log1p(math.exp(q[head, i, c])) * math.log1p(math.exp(k[head, j, c]))
                    * math.cos((m - n) * theta[c] - delta[head, c]) for c in range(d)) / math.sqrt(d)
    return logits


def pope(d_model=12, n_heads=2, max_len=32, delta=None):
    enc = encodings.build("pope", d_model=d_model, n_heads=n_heads, max_len=max_len)
    if delta is not None:
        with torch.no_grad():
            enc.key_phase.copy_(delta)
    return enc


def test_logits_equal_the_formula_with_the_shift_clamped(float64):
    torch.manual_seed(0)
    delta = torch.rand(2, 6) * -2 * math.pi
    delta[0, 0], delta[1, 5] = -9.0, 1.5  # outside [−2π, 0]: clamped to −2π and 0
    enc = pope(delta=delta)
    q, k = torch.randn(2, 7, 6), torch.randn(2, 9, 6)  # (h, L, d_head)
    query_ids, key_ids = [3, 5, 8, 13, 21, 34, 40], list(range(9))  # 34 and 40 beyond the 32 cached rows
    turned_q, _ = enc.rotate(q, q, Positions.from_ids(torch.tensor(query_ids)))
    _, turned_k = enc.rotate(k, k, Positions.from_ids(torch.tensor(key_ids)))
    assert turned_q.shape == (2, 7, 12) and turned_k.shape == (2, 9, 12)  # twice the head width
    ours = turned_q @ turned_k.transpose(-1, -2) / math.sqrt(12)  # attention's scale at the doubled width
    torch.testing.assert_close(ours, paper_logits(q, k, query_ids, key_ids, delta), atol=1e-10, rtol=0)


def test_one_attention_layer_equals_softmax_of_the_formula_over_unpadded_values(float64):
    """Through attention: values keep d_head (padded to 2·d_head inside, the padding's outputs dropped)."""
    torch.manual_seed(1)
    enc = pope(delta=torch.rand(2, 6) * -2 * math.pi)
    q, k, v = torch.randn(3, 2, 10, 6), torch.randn(3, 2, 10, 6), torch.randn(3, 2, 10, 6)  # (B, h, L, d)
    turned_q, turned_k = enc.rotate(q, k, P(10))
    out = attend(turned_q, turned_k, v, None, causal=True)  # (B, h, L, d_head)
    future = torch.ones(10, 10, dtype=torch.bool).triu(1)
    for b in range(3):
        logits = paper_logits(q[b], k[b], range(10), range(10), enc.key_phase.detach()).masked_fill(future, -math.inf)
        torch.testing.assert_close(out[b], logits.softmax(-1) @ v[b], atol=1e-10, rtol=0)


def test_logits_depend_on_the_offset_only_and_content_never_turns_the_phase(float64):
    torch.manual_seed(2)
    enc = pope(delta=torch.rand(2, 6) * -2 * math.pi)
    q, k = torch.randn(2, 8, 6), torch.randn(2, 8, 6)

    def logits(offset):
        turned_q, turned_k = enc.rotate(q, k, P(8, offset=offset))
        return turned_q @ turned_k.transpose(-1, -2)

    torch.testing.assert_close(logits(17), logits(0), atol=1e-10, rtol=0)
    turned, _ = enc.rotate(q, k, P(8))
    phases = torch.view_as_complex(turned.unflatten(-1, (6, 2))).angle()  # (h, L, d): the query turns' angles
    other, _ = enc.rotate(5 * q, k, P(8))
    torch.testing.assert_close(torch.view_as_complex(other.unflatten(-1, (6, 2))).angle(), phases, atol=1e-10, rtol=0)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_is_turned_in_float32_and_keeps_its_dtype(dtype):
    enc = pope().to(dtype)
    q = torch.randn(2, 5, 6)
    turned, _ = enc.rotate(q.to(dtype), q.to(dtype), P(5))
    exact, _ = pope().rotate(q.to(dtype).float(), q, P(5))
    assert turned.dtype == dtype
    torch.testing.assert_close(turned.float(), exact, atol=0.02, rtol=0.02)


def test_the_key_shift_is_learned_one_per_head_and_dimension_and_gets_a_gradient():
    enc = pope()
    assert [tuple(p.shape) for p in enc.parameters()] == [(2, 6)] and encodings.traits("pope").trained
    q, k = torch.randn(2, 4, 6), torch.randn(2, 4, 6)
    turned_q, turned_k = enc.rotate(q, k, P(4))
    (turned_q @ turned_k.transpose(-1, -2)).sum().backward()
    assert enc.key_phase.grad.shape == (2, 6) and (enc.key_phase.grad != 0).all()


def test_the_key_cache_is_twice_as_wide_and_the_values_are_not():
    net = posbench.build_model(posbench.ModelConfig.from_size("tiny", encoding="pope", vocab_size=11, max_len=16))
    cache = posbench.KVCache.empty(2)
    with torch.no_grad():
        net(torch.randint(0, 11, (1, 5)), cache=cache)
    assert cache.keys[0].shape == (1, 4, 5, 32) and cache.values[0].shape == (1, 4, 5, 16)
    assert net.encoding.query_key_width == 128 == 2 * net.encoding.rotated_width


def test_bad_options_fail_in_one_line_naming_the_key():
    with pytest.raises(ValueError, match=r"^base must be > 1, got 1$"):
        encodings.build("pope", d_model=12, n_heads=2, max_len=8, base=1)
    with pytest.raises(ValueError, match=r"^encoding 'pope': .*unexpected keyword argument 'rotary_fraction'$"):
        encodings.build("pope", d_model=12, n_heads=2, max_len=8, rotary_fraction=0.5)


def test_flops_and_the_decode_cache_count_twice_wide_keys():
    """tiny (2 layers, w = 64, 4 heads of 16) at L = 50: q·kᵀ and attn·v (values padded) at 2w, keys cached at 2w."""
    from posbench.flops import analytic_flops
    from posbench.footprint import cell_memory

    w, n, L = 64, 2, 50
    cfg = posbench.ModelConfig.from_size("tiny", encoding="pope", max_len=L + 1)
    terms = analytic_flops(cfg, 3, L)
    assert terms["attention_scores"] == terms["attention_values"] == n * 2 * 3 * L * L * 2 * w
    assert terms["rotation"] == n * (2 * 2 * 3 * L * w + 6 * L * w)  # magnitudes × turns; the keys' turns × e^{iδ}
    assert cell_memory(cfg, 3, L, "decode")["kv_cache"] == 3 * (L + 1) * n * (2 * w + w) * 4
