"""The fourth hook (position from content): CoPE, FoX and stick-breaking attention against written-out loop
references that follow their public implementations, through the model's own attention paths."""

import math

import pytest
import torch

import posbench
from posbench import KVCache, attention, encodings
from posbench.encodings.base import LayerInput
from posbench.positions import Positions

B, H, L, D_HEAD = 2, 3, 11, 4


def inputs(seed=0, width=H * D_HEAD):
    """``q, k, v (B, H, L, D_HEAD)`` and a layer input ``x (B, L, width)``, float64."""
    generator = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(B, H, L, D_HEAD, generator=generator, dtype=torch.float64) for _ in range(3))
    return q, k, v, torch.randn(B, L, width, generator=generator, dtype=torch.float64)


def run(encoding, q, k, v, x, causal, block_size=4):
    """The model's attention path for ``encoding``, in causal blocks smaller than L (so blocks are exercised)."""
    with attention.configured(block_size=block_size):
        mask = attention.build_mask(encoding, Positions.arange(L), Positions.arange(L), causal, q.dtype)
        return attention.attend(q, k, v, mask, causal, LayerInput(x, 0))


def build(name, causal, **options):
    torch.manual_seed(0)
    return encodings.build(name, d_model=H * D_HEAD, n_heads=H, max_len=16, causal=causal, **options).double()


# ----- CoPE: facebookresearch/RAM projects/cope/src/cope/context_position.py, per query and key -------
def cope_reference(q, k, v, embedding, causal):
    """RAM's ``ContextPosSelfAttn.forward`` (gates from the same q·k, ``cope_nodiv`` off) written out per
    batch, head, query and key: gates σ(q·k/√d) masked, positions a sum of gates from key j to the end,
    clamped at npos − 1, the position logits q·e interpolated between floor and ceiling, added to q·k,
    all divided by √d, then masked and a softmax."""
    npos, scale = embedding.shape[-1], math.sqrt(q.shape[-1])
    out = torch.zeros_like(q)
    for b in range(B):
        for h in range(H):
            for i in range(L):
                seen = [j for j in range(L) if j <= i or not causal]
                gates = {j: torch.sigmoid(q[b, h, i] @ k[b, h, j] / scale) for j in seen}
                logits = torch.full((L,), float("-inf"), dtype=q.dtype)
                for j in seen:
                    p = min(sum(gates[t] for t in seen if t >= j), npos - 1)
                    fixed = q[b, h, i] @ embedding  # (npos,)
                    lo, hi = math.floor(p), math.ceil(p)
                    pos_logit = fixed[hi] * (p - lo) + fixed[lo] * (1 - (p - lo))
                    logits[j] = (q[b, h, i] @ k[b, h, j] + pos_logit) / scale
                out[b, h, i] = torch.softmax(logits, -1) @ v[b, h]
    return out


@pytest.mark.parametrize("npos", [7, None])  # counts above 6 clamp, as in the reference; None: max_len + 1
@pytest.mark.parametrize("causal", [True, False])
def test_cope_is_the_reference(causal, npos, float64):
    enc = build("cope", causal, npos=npos)
    torch.nn.init.normal_(enc.embeddings[0])
    q, k, v, x = inputs()
    k = k + 2  # large gates: counts up to L, past the clamp
    expected = cope_reference(q, k, v, enc.embeddings[0].detach(), causal)
    torch.testing.assert_close(run(enc, q, k, v, x, causal), expected, atol=1e-10, rtol=0)


# ----- FoX: zhixuan-lin/forgetting-transformer ops/forgetting_attention.py test_op's reference -------------
def fox_reference(q, k, v, x, weight, bias, causal):
    """The reference's ``log_fgate = logsigmoid(fgate_proj(x))``; causal: its test's plain attention,
    ``decay_bias = log_lambda_i − log_lambda_j`` written as a sum of log gates between key and query;
    bidirectional: x-transformers' ``DataDependentAlibi`` (the second half of the gates for keys after)."""
    log_gates = torch.nn.functional.logsigmoid(x @ weight.T + bias)  # (B, L, gates)
    out = torch.zeros_like(q)
    for b in range(B):
        for h in range(H):
            for i in range(L):
                logits = torch.full((L,), float("-inf"), dtype=q.dtype)
                for j in range(L):
                    if j <= i:
                        decay = sum((log_gates[b, s, h] for s in range(j + 1, i + 1)), torch.tensor(0.0))
                    elif causal:
                        continue
                    else:
                        decay = sum(log_gates[b, s, H + h] for s in range(i + 1, j + 1))
                    logits[j] = q[b, h, i] @ k[b, h, j] / math.sqrt(D_HEAD) + decay
                out[b, h, i] = torch.softmax(logits, -1) @ v[b, h]
    return out


@pytest.mark.parametrize("causal", [True, False])
def test_fox_is_the_reference(causal, float64):
    enc = build("fox", causal)
    q, k, v, x = inputs()
    gate = enc.gates[0]
    assert gate.weight.shape == ((1 if causal else 2) * H, H * D_HEAD)
    expected = fox_reference(q, k, v, x, gate.weight.detach(), gate.bias.detach(), causal)
    torch.testing.assert_close(run(enc, q, k, v, x, causal), expected, atol=1e-10, rtol=0)


# ----- stick-breaking: shawntan/stickbreaking-attention sb_ref.py, as tests/test_attn.py calls it ---------
def stick_breaking_reference(q, k, v, causal):
    """``A_ij = β_ij ∏_{j<t<i} (1 − β_it)`` with ``β = σ(q·k/√d)`` over the keys before the query
    (``attend_current=False``; bidirectional: every key, unmasked), and the remainder times the query's value."""
    out = torch.zeros_like(q)
    for b in range(B):
        for h in range(H):
            for i in range(L):
                keys = range(i) if causal else range(L)
                beta = {j: torch.sigmoid(q[b, h, i] @ k[b, h, j] / math.sqrt(D_HEAD)) for j in keys}
                weights = {j: beta[j] * math.prod(1 - beta[t] for t in keys if t > j) for j in keys}
                remainder = 1 - sum(weights.values())
                out[b, h, i] = sum((w * v[b, h, j] for j, w in weights.items()), remainder * v[b, h, i])
    return out


@pytest.mark.parametrize("causal", [True, False])
def test_stick_breaking_is_the_reference(causal, float64):
    q, k, v, x = inputs()
    expected = stick_breaking_reference(q, k, v, causal)
    torch.testing.assert_close(run(build("stick_breaking", causal), q, k, v, x, causal), expected, atol=1e-10,
                               rtol=0)


def test_the_first_causal_token_takes_its_own_value_whole():
    q, k, v, x = inputs()
    out = run(build("stick_breaking", True), q, k, v, x, True)
    torch.testing.assert_close(out[..., 0, :], v[..., 0, :], atol=1e-12, rtol=0)


# ----- the hook as the model runs it -----------------------------------------------------------------------
@pytest.mark.parametrize("name, path", [("cope", "contextual_logits"), ("fox", "contextual_bias"),
                                        ("stick_breaking", "contextual_logits")])
def test_traits_pick_the_path_and_blocks_change_nothing(name, path):
    enc = build(name, True)
    assert attention.choose_path(enc, L, L, True) == attention.choose_path(enc, L, L, False, device="cuda") == path
    q, k, v, x = inputs(1)
    torch.testing.assert_close(run(enc, q, k, v, x, True, block_size=3), run(enc, q, k, v, x, True, block_size=L),
                               atol=1e-12, rtol=0)


@pytest.mark.parametrize("name", ["cope", "fox"])
def test_every_layer_has_its_own_parameters(name):
    cfg = posbench.ModelConfig.from_size("tiny", encoding=name, vocab_size=11, max_len=16, n_layers=3)
    model = posbench.build_model(cfg)
    per_layer = model.encoding.embeddings if name == "cope" else model.encoding.gates
    assert len(per_layer) == 3 and model.encoding.n_layers == 3
    tokens = torch.randint(0, 11, (1, 16))
    model(tokens).sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.encoding.parameters())


def test_fox_truncated_cache_decodes_as_the_full_forward():
    """The cache's states are cut with its keys: decoding after a truncation equals the full forward."""
    torch.manual_seed(0)
    model = posbench.build_model(posbench.ModelConfig.from_size("tiny", encoding="fox", vocab_size=11,
                                                                max_len=32)).eval()
    tokens = torch.randint(0, 11, (2, 20))
    with torch.no_grad():
        full = model(tokens)
        cache = KVCache.empty(2)
        model(torch.randint(0, 11, (2, 12)), cache=cache)  # a different prompt after token 8
        cache.truncate(0)
        model(tokens[:, :15], cache=cache)
        cache.truncate(12)
        assert cache.states[0]["fox"].shape == (2, 4, 12)
        step = model(tokens[:, 12:13], cache=cache)
    torch.testing.assert_close(step[:, 0], full[:, 12], atol=1e-5, rtol=0)
