"""The fourth hook (position from content): CoPE, FoX, stick-breaking and PaTH attention against written-out loop
references that follow their public implementations, through the model's own attention paths."""

import dataclasses
import math

import pytest
import torch
from fvcore.nn import FlopCountAnalysis

import posbench
from posbench import KVCache, attention, encodings, flops
from posbench.encodings import path
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


# Blocks of 4 queries (a head's 4 dimensions) flip their logits; blocks of 8 (causal: 8 then 3) and the bidirectional
# model's one block of 11 flip the keys and values instead (the last key first)
@pytest.mark.parametrize("causal, block_size", [(True, 4), (True, 8), (False, 4)])
def test_stick_breaking_is_the_reference(causal, block_size, float64):
    q, k, v, x = inputs()
    expected = stick_breaking_reference(q, k, v, causal)
    torch.testing.assert_close(run(build("stick_breaking", causal), q, k, v, x, causal, block_size), expected,
                               atol=1e-10, rtol=0)


@pytest.mark.parametrize("grad", [True, False])
def test_stick_breaking_takes_the_keys_in_either_order(grad):
    """The last key first gives the weights of token order (the sums run over the keys in another order:
    float32 rounding apart), with or without a gradient recorded (the in-place passes)."""
    q, k, v, _ = (t.float() for t in inputs(2))
    logits = attention.mask_future(q @ k.transpose(-1, -2) * 3, -1)  # hides each query's own key and the future
    with torch.set_grad_enabled(grad):
        in_order = attention.stick_breaking(logits, v, v)
        nearest_first = attention.stick_breaking(logits.flip(-1), v.flip(-2), v, nearest_first=True)
    torch.testing.assert_close(nearest_first, in_order, atol=1e-6, rtol=0)
    assert in_order.abs().max() > 0.5


def test_the_first_causal_token_takes_its_own_value_whole():
    q, k, v, x = inputs()
    out = run(build("stick_breaking", True), q, k, v, x, True)
    torch.testing.assert_close(out[..., 0, :], v[..., 0, :], atol=1e-12, rtol=0)


@pytest.mark.parametrize("name, options", [("cope", {"npos": 7}), ("cope", {}), ("stick_breaking", {})])
@pytest.mark.parametrize("block_size", [3, 8])
def test_without_a_gradient_the_same_bits_come_from_fewer_passes(name, options, block_size):
    """Where no gradient is recorded CoPE gathers each position's step once and the passes write in place
    (stick-breaking's too): evaluation gives exactly the numbers the training forward gives."""
    enc = build(name, True, **options).float()
    if name == "cope":
        torch.nn.init.normal_(enc.embeddings[0])
    q, k, v, x = (t.float() for t in inputs(3))
    k = k + 1  # counts past cope's clamp at 6
    trained = run(enc, q.requires_grad_(), k, v, x, True, block_size)
    with torch.no_grad():
        evaluated = run(enc, q, k, v, x, True, block_size)
    assert trained.requires_grad and torch.equal(evaluated, trained)


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


# ----- PaTH: fla-org/flash-linear-attention fla/layers/path_attn.py and naive_path_attn, per query and key -----
def path_reference(q, k, v, x, layer, causal):
    """The reference layer's ``w = l2_norm(silu(conv(w_proj(x))))`` (low rank; ``ShortConvolution``, a causal
    depthwise ``nn.Conv1d`` of kernel 3 without bias), ``β = 2·σ(bt_proj(x))``, and the logit
    ``q_iᵀ H_i ⋯ H_{j+1} k_j / √d`` with ``H_t = I − β_t w_t w_tᵀ`` written out per batch, head, query and key as
    explicit matrix products (bidirectional: ``q_iᵀ H_i ⋯ H_{j−1} k_j`` for a key after)."""
    down, up, conv, strength = layer
    projected = (x @ down.T @ up.T).transpose(1, 2)  # (B, width, L)
    convolved = torch.nn.functional.conv1d(projected, conv[:, None, :], padding=2, groups=H * D_HEAD)[..., :L]
    w = torch.nn.functional.silu(convolved).transpose(1, 2).unflatten(-1, (H, D_HEAD))  # (B, L, H, D_HEAD)
    w = w / torch.sqrt((w * w).sum(-1, keepdim=True) + 1e-6)  # fla's l2_norm: its eps under the root
    beta = 2 * torch.sigmoid(x @ strength.weight.T + strength.bias)  # (B, L, H)
    out = torch.zeros_like(q)
    for b in range(B):
        for h in range(H):
            householder = [torch.eye(D_HEAD, dtype=q.dtype) - beta[b, t, h] * torch.outer(w[b, t, h], w[b, t, h])
                           for t in range(L)]
            for i in range(L):
                logits = torch.full((L,), float("-inf"), dtype=q.dtype)
                for j in range(L):
                    if causal and j > i:
                        continue
                    between = range(j + 1, i + 1) if j <= i else range(j - 1, i - 1, -1)  # nearest the key first
                    key = k[b, h, j]
                    for t in between:
                        key = householder[t] @ key
                    logits[j] = q[b, h, i] @ key / math.sqrt(D_HEAD)
                out[b, h, i] = torch.softmax(logits, -1) @ v[b, h]
    return out


@pytest.mark.parametrize("chunk", [3, 64])  # several chunks (blocks of 4 split them), or one
@pytest.mark.parametrize("causal", [True, False])
def test_path_is_the_reference(causal, chunk, monkeypatch, float64):
    monkeypatch.setattr(path, "CHUNK", chunk)
    enc = build("path", causal)
    q, k, v, x = inputs()
    layer = (enc.w_down[0].weight.detach(), enc.w_up[0].weight.detach(), enc.conv[0].detach(), enc.strengths[0])
    expected = path_reference(q, k, v, x, layer, causal)
    with torch.no_grad():
        torch.testing.assert_close(run(enc, q, k, v, x, causal), expected, atol=1e-10, rtol=0)
        torch.testing.assert_close(run(enc, q, k, v, x, causal, block_size=L), expected, atol=1e-10, rtol=0)


@pytest.mark.parametrize("size", [1, 2, 5, 37, 64])
def test_the_block_inverse_of_a_unit_lower_triangle_is_its_inverse(size, float64):
    """Entries of the size of ``β_t w_t·w_s`` at d_head 16 (0.5 / 4): exactly unit lower triangular, and an inverse."""
    generator = torch.Generator().manual_seed(size)
    strict = (0.125 * torch.randn(3, size, size, generator=generator, dtype=torch.float64)).tril(-1)
    inverse = path.unit_lower_inverse(strict)
    identity = torch.eye(size, dtype=torch.float64)
    assert torch.equal(inverse.triu(), identity.expand(3, size, size))
    torch.testing.assert_close((identity + strict) @ inverse, identity.expand(3, size, size), atol=1e-12, rtol=0)


def test_path_decodes_as_the_full_forward_and_its_cache_cannot_be_truncated(monkeypatch):
    """Prefill across chunks, a second prompt piece after the cache, then one token at a time: every logit is the
    full forward's, the cache holding the keys carried through every later token; cutting it back is refused."""
    monkeypatch.setattr(path, "CHUNK", 4)
    torch.manual_seed(0)
    model = posbench.build_model(posbench.ModelConfig.from_size("tiny", encoding="path", vocab_size=11,
                                                                max_len=32)).eval()
    tokens = torch.randint(0, 11, (2, 20))
    cache = KVCache.empty(2)
    with torch.no_grad():
        full = model(tokens)
        pieces = [model(tokens[:, :9], cache=cache), model(tokens[:, 9:15], cache=cache),
                  *(model(tokens[:, t:t + 1], cache=cache) for t in range(15, 20))]
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, atol=1e-5, rtol=0)
    plain_key = model.blocks[0].attn.queries_keys_values(model.blocks[0].norm_attn(model.embedded(
        tokens, model.encoding.positions(20))), model.encoding, model.encoding.positions(20))[1]
    torch.testing.assert_close(cache.keys[0][..., -1, :], plain_key[..., -1, :], atol=1e-6, rtol=0)  # as it is
    assert not torch.allclose(cache.keys[0][..., :-1, :], plain_key[..., :-1, :], atol=1e-3)  # the others carried
    with pytest.raises(ValueError, match=r"^cannot truncate to 12 tokens: later tokens rewrote the cached keys "
                                         r"\(an encoding with rewrites_cache\); allowed: 0 or 20$"):
        cache.truncate(12)
    cache.truncate(0)
    with torch.no_grad():
        again = model(tokens[:, :9], cache=cache)
    torch.testing.assert_close(again, full[:, :9], atol=1e-5, rtol=0)


class PathStep(torch.nn.Module):
    """One token after a filled cache, on a shallow copy of it (its lists and maps new, its tensors shared)."""

    def __init__(self, model, cache):
        super().__init__()
        self.model, self.cache = model, cache

    def forward(self, tokens):
        cache = dataclasses.replace(self.cache, keys=list(self.cache.keys), values=list(self.cache.values),
                                    states=[dict(state) for state in self.cache.states],
                                    buffers=dict(self.cache.buffers))
        return self.model(tokens, cache=cache)


def test_a_path_decode_step_is_counted_by_formula_by_both_counters_and_its_flops_at_full_length():
    """fvcore and the torch counter see one cached step exactly as ``decode_flops`` has it (the carried path: the
    cached keys' rank-one update, one ``baddbmm`` per layer); PaTH's chunked count is not quadratic in L, so
    count_flops never extrapolates it."""
    from posbench.flops import count_flops, decode_flops

    torch.manual_seed(0)
    model = posbench.build_model(posbench.ModelConfig(encoding="path", vocab_size=23, d_model=60, n_heads=3,
                                                      n_layers=2, max_len=128)).eval()
    cache = KVCache.empty(2)
    with torch.no_grad():
        model(torch.randint(23, (2, 36)), cache=cache)
    step, token = PathStep(model, cache), torch.randint(23, (2, 1))
    assert attention.layer_paths(model, 1, 37) == "carried"
    counter = torch.utils.flop_counter.FlopCounterMode(display=False, custom_mapping=flops.TORCH_FORMULAS)
    with torch.no_grad(), counter:
        step(token)
    analysis = FlopCountAnalysis(step, (token,)).clear_op_handles().set_op_handle(**flops.FVCORE_HANDLES)
    analysis.unsupported_ops_warnings(False).uncalled_modules_warnings(False)
    with torch.no_grad():
        fvcore = int(analysis.total())
    terms = decode_flops(model, 2, 36)
    # per layer: 2 maps (2·B·d·(64 + h)), the convolution (5·B·d), w's normalisation (2·B·d), β·w (B·d), each
    # cached key against w (2·B·36·d) and its update (the matmul 2·B·36·d and an add per element, B·36·d)
    carry = 2 * 60 + 2 * 2 * 36 * 60 + 3 * 2 * 36 * 60
    assert terms["position_content"] == 2 * (2 * 2 * 60 * 67 + 5 * 2 * 60 + 2 * 2 * 60 + carry)
    assert counter.get_total_flops() == fvcore == sum(terms.values())
    assert count_flops(model, 1, 100, max_run_len=64).counted_at == (100,)


def test_a_path_decode_step_on_the_carried_path_equals_the_materialised_logits_path(float64, monkeypatch):
    """The same step, the cached keys carried in place and one SDPA call, against the ``contextual_logits`` path
    (the chunk of one token, its bias on the materialised logits): the same output and the same rewritten keys;
    a step that autograd would record is refused in one line."""
    torch.manual_seed(0)
    model = posbench.build_model(posbench.ModelConfig.from_size("tiny", encoding="path", vocab_size=11,
                                                                max_len=64)).eval()
    prompt, token = torch.randint(0, 11, (2, 30)), torch.randint(0, 11, (2, 1))
    caches, outputs = [], []
    for carried in (True, False):
        cache = KVCache.empty(2)
        with torch.no_grad():
            model(prompt, cache=cache)
            if carried:
                outputs.append(model(token, cache=cache))
            else:
                with monkeypatch.context() as patched:
                    patched.setattr(attention, "carries_keys", lambda encoding: False)
                    outputs.append(model(token, cache=cache))
        caches.append(cache)
    torch.testing.assert_close(outputs[0], outputs[1], atol=1e-12, rtol=0)
    for carried_keys, materialised_keys in zip(caches[0].keys, caches[1].keys):
        torch.testing.assert_close(carried_keys, materialised_keys, atol=1e-12, rtol=0)
    with pytest.raises(RuntimeError, match=r"^PaTH's decode step rewrites the cached keys in place; run it under "
                                           r"torch.no_grad\(\) or torch.inference_mode\(\)$"):
        model(token, cache=caches[0])


def test_only_one_causal_query_after_a_cache_of_an_encoding_that_carries_keys_takes_the_carried_path():
    path_encoding = build("path", True)
    assert attention.choose_path(path_encoding, 1, 37, causal=True) == "carried"
    assert attention.choose_path(path_encoding, 2, 37, causal=True) == "contextual_logits"  # two queries
    assert attention.choose_path(path_encoding, 1, 1, causal=True) == "contextual_logits"  # no cached key
    assert attention.choose_path(build("path", False), 1, 37, causal=False) == "contextual_logits"  # bidirectional
    for name in ("cope", "stick_breaking", "fox"):  # their caches are kept as they are
        assert attention.choose_path(encodings.build(name, d_model=64, n_heads=4, max_len=64, causal=True, n_layers=2),
                                     1, 37, causal=True) != "carried"


@pytest.mark.parametrize("mode", ["infer", "train"])
@pytest.mark.parametrize("d_model, n_heads, batch, seq_len", [(40, 5, 1, 150), (80, 2, 2, 128)])
def test_path_flops_over_several_chunks_agree(d_model, n_heads, batch, seq_len, mode):
    """Causal, several chunks of 64 (the key state carried between them): 150 = 2 × 64 + 22 at d_head 8, 128 =
    2 × 64 at d_head 40; the counters and content_flops agree exactly (the registry's configs have one chunk
    when causal)."""
    from posbench.flops import count_flops

    torch.manual_seed(0)
    model = posbench.build_model(posbench.ModelConfig(encoding="path", vocab_size=23, d_model=d_model,
                                                      n_heads=n_heads, n_layers=1, max_len=256))
    counts = count_flops(model, batch, seq_len, mode)
    assert counts.torch == counts.analytic and counts.fvcore == (counts.analytic if mode == "infer" else None)
