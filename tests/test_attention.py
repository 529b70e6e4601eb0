"""The attention paths: every path gives the plain softmax(q·kᵀ/√d + bias) · v of the public hook."""

import math
import warnings

import pytest
import torch

import posbench
from posbench import attention, encodings
from posbench.encodings import PositionalEncoding, alibi
from posbench.positions import Positions

P = Positions.arange

BIASED = [name for name in encodings.names()
          if attention.bias_kind(encodings.build(name, d_model=32, n_heads=4, max_len=8)) is not None]
RELATIVE = [name for name in BIASED
            if attention.bias_kind(encodings.build(name, d_model=32, n_heads=4, max_len=8)) == "relative"]


class QueryScaledBias(PositionalEncoding):
    """A bias that is *not* a function of j − i alone (like FIRE): −|i − j| / (i + 1) · (head + 1).
    It gives only the public hook, so attention must use a general path."""

    hook = "logits"

    def attention_bias(self, query, key):
        i = query.ids.to(torch.get_default_dtype())[:, None]
        j = key.ids.to(torch.get_default_dtype())[None, :]
        heads = torch.arange(1, self.n_heads + 1, dtype=torch.get_default_dtype())[:, None, None]
        return -heads * (i - j).abs() / (i + 1)  # (h, q, k)


def build(name, causal, n_heads=4, max_len=64):
    if name == "query_scaled":
        return QueryScaledBias(d_model=8 * n_heads, n_heads=n_heads, max_len=max_len, causal=causal)
    enc = encodings.build(name, d_model=8 * n_heads, n_heads=n_heads, max_len=max_len, causal=causal)
    if name == "t5":
        torch.nn.init.normal_(enc.bias.weight)  # the N(0, 0.02²) init would hide mistakes
    return enc


def plain_attention(q, k, v, bias, causal):
    """The definition, written out: no SDPA, no blocks."""
    logits = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]) + bias  # (B, h, q, k)
    if causal:
        q_len, k_len = logits.shape[-2:]
        logits = logits.masked_fill(torch.ones(q_len, k_len, dtype=torch.bool).triu(k_len - q_len + 1), -math.inf)
    return logits.softmax(-1) @ v


def paths_of(name):
    kind = attention.bias_kind(build(name, causal=True))
    return ["general_dense", "general_blocked", "flex"] + (["relative"] if kind == "relative" else [])


CASES = [(name, path) for name in [*BIASED, "query_scaled"] for path in paths_of(name)]


def test_bias_encodings_are_found():
    assert {"alibi", "t5", "kerple"} <= set(RELATIVE) and "fire" in set(BIASED) - set(RELATIVE)
    assert attention.bias_kind(build("query_scaled", causal=True)) == "general"


@pytest.mark.parametrize("name,path", CASES)
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("seq_len", [37, 48])  # 37: a ragged last block of 5
def test_every_path_equals_plain_attention(name, path, causal, seq_len):
    torch.manual_seed(0)
    enc = build(name, causal)
    q, k, v = (torch.randn(2, 4, seq_len, 8) for _ in range(3))
    expected = plain_attention(q, k, v, enc.attention_bias(P(seq_len), P(seq_len)), causal)
    # max_mask_bytes: the blocked path gets blocks of 8 rows (4 heads · 48 keys · 4 bytes · 8)
    with attention.configured(force_path=path, block_size=16, max_mask_bytes=4 * 48 * 4 * 8):
        mask = attention.build_mask(enc, P(seq_len), P(seq_len), causal)
        got = attention.attend(q, k, v, mask, causal)
    blocks = list(mask.blocks())
    assert mask.path == path
    assert blocks[-1][1] == seq_len and len(blocks) > (1 if causal or path == "general_blocked" else 0)
    # flex runs one kernel over all blocks; its blocks only describe the mask
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize("name,path", [case for case in CASES if case[1] not in ("general_dense", "flex")])
def test_memory_aware_paths_never_build_the_full_bias(name, path, monkeypatch):
    enc = build(name, causal=True, max_len=64)
    full = enc.attention_bias(P(64), P(64))
    asked = []
    original = enc.attention_bias

    def spy(query, key):
        asked.append(len(query) * len(key))
        return original(query, key)

    monkeypatch.setattr(enc, "attention_bias", spy)
    q, k, v = (torch.randn(1, 4, 64, 8) for _ in range(3))
    with attention.configured(force_path=path, block_size=16, max_mask_bytes=4 * 64 * 4 * 16):
        got = attention.attend(q, k, v, attention.build_mask(enc, P(64), P(64), True), True)
    torch.testing.assert_close(got, plain_attention(q, k, v, full, True), atol=1e-5, rtol=0)
    # the relative path builds nothing of (h, L, L); the general blocked one builds per-block slices
    assert max(asked, default=0) <= (0 if path == "relative" else 64 * 64 - 1)


@pytest.mark.parametrize("name", [*BIASED, "query_scaled"])
def test_a_block_of_positions_gives_the_matching_rows_of_the_hook(name):
    enc = build(name, causal=False)
    positions = P(40)
    full = enc.attention_bias(positions, positions)  # (h, 40, 40)
    for start, stop, k_len in [(0, 40, 40), (3, 17, 40), (39, 40, 40), (5, 9, 12)]:
        block = enc.attention_bias(positions[start:stop], positions[:k_len])
        torch.testing.assert_close(block, full[:, start:stop, :k_len], atol=0, rtol=0)


@pytest.mark.parametrize("name", RELATIVE)
def test_relative_table_reads_back_as_the_hook(name):
    enc = build(name, causal=True)
    table, full = enc.relative_bias(torch.arange(-19, 20), 19), enc.attention_bias(P(20), P(20))  # (h, 39), (h, 20, 20)
    assert table.shape == (4, 39)
    i, j = torch.meshgrid(torch.arange(20), torch.arange(20), indexing="ij")
    assert torch.equal(table[:, j - i + 19], full)


def test_gradients_through_the_relative_path_equal_the_dense_ones():
    grads = {}
    for path in ("general_dense", "relative", "general_blocked"):  # flex: torch has no CPU backward for it
        torch.manual_seed(0)
        enc = build("t5", causal=True)
        q, k, v = (torch.randn(1, 4, 37, 8, requires_grad=True) for _ in range(3))
        with attention.configured(force_path=path, block_size=16):
            attention.attend(q, k, v, attention.build_mask(enc, P(37), P(37), True), True).square().sum().backward()
        grads[path] = [q.grad, k.grad, v.grad, enc.bias.weight.grad]
    assert grads["general_dense"][3].abs().sum() > 0
    for path in ("relative", "general_blocked"):
        for got, expected in zip(grads[path], grads["general_dense"]):
            torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", BIASED)
def test_models_agree_on_every_path(name):
    torch.manual_seed(0)
    cfg = posbench.ModelConfig.from_size("tiny", encoding=name, vocab_size=11, max_len=40)
    model = posbench.build_model(cfg).eval()
    tokens = torch.randint(0, 11, (2, 37))
    with torch.no_grad():
        outputs = {}
        for path in paths_of(name):
            with attention.configured(force_path=path, block_size=16):
                outputs[path] = model(tokens)
    for logits in outputs.values():
        torch.testing.assert_close(logits, outputs["general_dense"], atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", [name for name in ["rope", *BIASED] if not encodings.traits(name).randomized])
def test_logits_survive_switching_modes(name):
    """Inference mode, then training (backward must work: nothing made in inference mode may
    reach autograd), then no_grad: the same logits every time."""
    torch.manual_seed(0)
    model = posbench.build_model(posbench.ModelConfig.from_size("tiny", encoding=name, vocab_size=11, max_len=40))
    tokens = torch.randint(0, 11, (2, 37))
    with torch.inference_mode():
        first = model(tokens)
    trained = model(tokens)
    trained.sum().backward()
    with torch.no_grad():
        last = model(tokens)
    torch.testing.assert_close(trained.detach(), first, atol=1e-6, rtol=0)
    torch.testing.assert_close(last, first, atol=1e-6, rtol=0)


def test_choose_path():
    alibi, general = build("alibi", causal=True), build("query_scaled", causal=True)
    none = encodings.build("none", d_model=32, n_heads=4, max_len=8)
    assert attention.choose_path(none, 8, 8, causal=True) == "is_causal"
    assert attention.choose_path(none, 8, 8, causal=False) == "unmasked"
    assert attention.build_mask(none, P(8), P(8), causal=False) is None
    assert attention.choose_path(alibi, 4096, 4096, causal=True) == "relative"
    full_bytes = 4 * 64 * 64 * 4
    with attention.configured(max_mask_bytes=full_bytes):
        assert attention.choose_path(general, 64, 64, causal=True) == "general_dense"
        assert attention.choose_path(general, 64, 65, causal=True) == "general_blocked"
        assert attention.choose_path(general, 64, 64, causal=True, dtype=torch.float64) == "general_blocked"
        assert attention.choose_path(alibi, 64, 64, causal=True, contiguous=False) == "general_dense"
    assert attention.choose_path(alibi, 64, 64, causal=True, device="cuda:1") == "flex"
    assert attention.choose_path(general, 64, 64, causal=True, device="cuda") == "flex"
    assert attention.choose_path(none, 64, 64, causal=True, device="cuda") == "is_causal"
    with attention.configured(flex_on_cuda=False):
        assert attention.choose_path(alibi, 64, 64, causal=True, device="cuda") == "relative"
    with attention.configured(force_path="general_blocked"):
        assert attention.choose_path(alibi, 8, 8, causal=True) == "general_blocked"
        assert attention.choose_path(none, 8, 8, causal=True) == "is_causal"  # nothing to force


def test_bad_settings_name_the_allowed_values():
    with pytest.raises(ValueError, match="force_path 'flash'; allowed: relative, general_dense, general_blocked, flex"):
        attention.AttentionSettings(force_path="flash")
    with pytest.raises(ValueError, match="depends on j − i alone"):
        with attention.configured(force_path="relative"):
            attention.choose_path(build("query_scaled", causal=True), 8, 8, True)


def test_a_step_on_the_bias_reaches_the_next_forward_pass():
    """Nothing is cached across calls: T5's bias changed in place changes the next logits."""
    torch.manual_seed(0)
    model = posbench.build_model(posbench.ModelConfig.from_size("tiny", encoding="t5", vocab_size=11, max_len=40))
    tokens = torch.randint(0, 11, (2, 37))
    with torch.no_grad():
        before = model(tokens)
        model.encoding.bias.weight.add_(1.0)
        assert not torch.allclose(model(tokens), before)


@pytest.mark.parametrize("name", RELATIVE)
def test_randomized_positions_bias_by_their_ids(name):
    """Sorted ids that are not 0 … L−1 (randomized positions): the bias is the offset table read at
    id differences, through the general path, and the same ids written as a contiguous run give the
    relative path's logits."""
    torch.manual_seed(0)
    enc = build(name, causal=True)
    ids = torch.tensor([0, 3, 4, 9, 17, 30])
    query = Positions.from_ids(ids)
    table = enc.relative_bias(torch.arange(-30, 31), 30)  # (h, 61)
    torch.testing.assert_close(enc.attention_bias(query, query), table[:, ids[None, :] - ids[:, None] + 30])
    cfg = posbench.ModelConfig.from_size("tiny", encoding=name, vocab_size=11, max_len=40)
    model = posbench.build_model(cfg).eval()
    tokens = torch.randint(0, 11, (2, 37))
    with torch.no_grad():
        as_ids = model(tokens, Positions.from_ids(torch.arange(37)))  # not known to be contiguous
        plain = model(tokens)
    assert attention.choose_path(model.encoding, 37, 37, True, contiguous=False) == "general_dense"
    torch.testing.assert_close(as_ids, plain, atol=1e-5, rtol=0)


def manual_attention(q, k, v, sees=None):
    """softmax(q kᵀ / √d, where ``sees``) v, from its definition."""
    logits = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])  # (B, h, q, k)
    if sees is not None:
        logits = logits.masked_fill(~sees, float("-inf"))
    return torch.softmax(logits, dim=-1) @ v


def test_unbiased_attention_is_the_definition_bidirectional_causal_and_after_a_cache():
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 5, 8, dtype=torch.float64) for _ in range(3))
    assert torch.allclose(attention.attend(q, k, v, None, causal=False), manual_attention(q, k, v), atol=1e-12)
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    assert torch.allclose(attention.attend(q, k, v, None, causal=True), manual_attention(q, k, v, causal), atol=1e-12)
    late = q[..., 3:, :]  # two queries after a cache of three: each sees the keys up to its own position
    after_cache = torch.ones(2, 5, dtype=torch.bool).tril(3)
    assert torch.allclose(attention.attend(late, k, v, None, causal=True), manual_attention(late, k, v, after_cache),
                          atol=1e-12)
    assert torch.allclose(attention.attend(late, k, v, None, causal=False), manual_attention(late, k, v), atol=1e-12)


def test_attention_settings_take_one_and_refuse_zero_in_one_line():
    assert attention.AttentionSettings(block_size=1, max_mask_bytes=1).block_size == 1
    for block_size, max_mask_bytes in ((0, 1), (1, 0)):
        with pytest.raises(ValueError) as error:
            attention.AttentionSettings(block_size=block_size, max_mask_bytes=max_mask_bytes)
        assert str(error.value) == (f"block_size and max_mask_bytes must be positive, got {block_size}, "
                                    f"{max_mask_bytes}")


def test_a_relative_bias_takes_its_table_only_when_queries_and_keys_are_both_contiguous():
    alibi = encodings.build("alibi", d_model=16, n_heads=2, max_len=64, causal=True)
    plain, spread = Positions.arange(6), Positions.from_ids(torch.tensor([0, 3, 5, 9, 12, 20]))
    assert attention.build_mask(alibi, plain, plain, True).path == "relative"
    for query, key in ((plain, spread), (spread, plain), (spread, spread)):
        assert attention.build_mask(alibi, query, key, True).path == "general_dense"
    assert attention.build_mask(encodings.build("rope", d_model=16, n_heads=2, max_len=64), plain, plain, True) is None


def test_forcing_the_relative_path_on_a_general_bias_names_the_encoding():
    fire = encodings.build("fire", d_model=16, n_heads=2, max_len=64, causal=True)
    with attention.configured(force_path="relative"), pytest.raises(ValueError) as error:
        attention.choose_path(fire, 8, 8, True)
    assert str(error.value) == ("force_path 'relative' needs a bias that depends on j − i alone, on contiguous "
                                "positions; Fire has a general bias or the positions are not")


@pytest.mark.parametrize("path", ["relative", "general_dense", "general_blocked"])
@pytest.mark.parametrize("causal", [True, False])
def test_causal_blocks_run_only_the_keys_up_to_their_last_query(path, causal, monkeypatch):
    """Causal: one SDPA call per block of 16 queries against the keys up to its last query (the
    relative path runs them last block first); not causal: one call of every query and key."""
    torch.manual_seed(0)
    enc = build("alibi", causal)
    sdpa, calls = torch.nn.functional.scaled_dot_product_attention, []

    def spy(q, k, v, attn_mask):
        calls.append((q.shape[-2], k.shape[-2], tuple(attn_mask.shape)))
        return sdpa(q, k, v, attn_mask=attn_mask)

    monkeypatch.setattr(attention.F, "scaled_dot_product_attention", spy)
    q, k, v = (torch.randn(1, 4, 37, 8) for _ in range(3))
    with attention.configured(force_path=path, block_size=16):
        got = attention.attend(q, k, v, attention.build_mask(enc, P(37), P(37), causal), causal)
    blocks = [(16, 16), (16, 32), (5, 37)] if causal else [(37, 37)]
    expected = [(rows, keys, (1, 4, rows, keys)) for rows, keys in blocks]
    assert calls == (expected[::-1] if path == "relative" else expected)
    torch.testing.assert_close(got, plain_attention(q, k, v, enc.attention_bias(P(37), P(37)), causal),
                               atol=1e-5, rtol=0)


def test_the_blocked_path_takes_as_many_query_rows_as_max_mask_bytes_holds():
    enc = build("query_scaled", causal=False)
    row = 4 * 48 * 4  # one query's float32 mask: 4 heads · 48 keys · 4 bytes
    for max_mask_bytes, dtype, rows in ((8 * row, torch.float32, 8), (8 * row - 1, torch.float32, 7),
                                        (8 * row, torch.float64, 4), (1, torch.float32, 1)):
        with attention.configured(force_path="general_blocked", max_mask_bytes=max_mask_bytes):
            mask = attention.build_mask(enc, P(48), P(48), False, dtype)
        sizes = [rows] * (48 // rows) + ([48 % rows] if 48 % rows else [])
        assert [stop - start for start, stop, _ in mask.blocks()] == sizes


def test_alibi_past_its_cached_offsets_is_the_formula_on_the_table_paths():
    """ALiBi caches −m_h·|j − i| for |j − i| < max_len = 8 and computes longer offsets."""
    enc = encodings.build("alibi", d_model=32, n_heads=4, max_len=8, causal=False)
    slopes = torch.tensor(alibi.alibi_slopes(4), dtype=torch.float64)[:, None, None]
    for length in (8, 9, 10):
        torch.manual_seed(0)
        q, k, v = (torch.randn(1, 4, length, 8, dtype=torch.float64) for _ in range(3))
        i, j = torch.arange(length)[:, None], torch.arange(length)[None, :]
        for path in ("relative", "flex"):
            with attention.configured(force_path=path):
                mask = attention.build_mask(enc, P(length), P(length), False, torch.float64)
                got = attention.attend(q, k, v, mask, False)
            expected = plain_attention(q, k, v, -slopes * (j - i).abs(), False)
            torch.testing.assert_close(got, expected, atol=1e-12, rtol=0)


@pytest.mark.parametrize("name,path", [("kerple", "relative"), ("kerple", "general_dense"), ("fire", "general_dense"),
                                       ("fire", "general_blocked")])
@pytest.mark.parametrize("causal", [True, False])
def test_every_sdpa_path_stays_on_the_keys_device(name, path, causal):
    """On the meta device (shapes, no data) a tensor made on the CPU instead of the keys' device
    raises when it meets the others, which CPU runs never show: three queries after a cache of three."""
    meta = torch.device("meta")
    enc = encodings.build(name, d_model=16, n_heads=2, max_len=64, causal=causal).to(meta)
    keys = P(6, device=meta)
    q = torch.randn(1, 2, 3, 8, device=meta)
    k, v = (torch.randn(1, 2, 6, 8, device=meta) for _ in range(2))
    with attention.configured(force_path=path, block_size=2, max_mask_bytes=2 * 6 * 4 * 2):
        got = attention.attend(q, k, v, attention.build_mask(enc, keys[3:], keys, causal), causal)
    assert got.shape == (1, 2, 3, 8) and got.device == meta


def test_unbiased_queries_after_a_cache_stay_on_the_keys_device():
    meta = torch.device("meta")
    q = torch.randn(1, 2, 3, 8, device=meta)
    k, v = (torch.randn(1, 2, 6, 8, device=meta) for _ in range(2))
    got = attention.attend(q, k, v, None, causal=True)
    assert got.shape == (1, 2, 3, 8) and got.device == meta


@pytest.mark.parametrize("name", ["kerple", "fire"])
def test_the_flex_mask_is_built_on_the_keys_device(name):
    """FlexAttention does not run on meta, but its mask is built there: the bias and the causal block mask."""
    meta = torch.device("meta")
    enc = encodings.build(name, d_model=16, n_heads=2, max_len=64, causal=True).to(meta)
    keys = P(6, device=meta)
    with attention.configured(force_path="flex"):
        mask = attention.build_mask(enc, keys[3:], keys, True)
    assert mask.block_mask.kv_num_blocks.device == meta and mask.block_mask.shape == (1, 1, 3, 6)


@pytest.mark.parametrize("name,path", CASES)
def test_queries_after_a_cache_equal_plain_attention(name, path):
    torch.manual_seed(0)
    enc = build(name, causal=True)
    keys = P(37)
    q = torch.randn(1, 4, 8, 8)  # 8 queries after a cache of 29
    k, v = (torch.randn(1, 4, 37, 8) for _ in range(2))
    expected = plain_attention(q, k, v, enc.attention_bias(keys[29:], keys), True)
    with attention.configured(force_path=path, block_size=3, max_mask_bytes=4 * 37 * 4 * 3):
        got = attention.attend(q, k, v, attention.build_mask(enc, keys[29:], keys, True), True)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", RELATIVE)
def test_flex_reads_a_relative_bias_from_its_table_never_the_full_bias(name, monkeypatch):
    enc = build(name, causal=True)
    expected_bias = enc.attention_bias(P(37), P(37))
    monkeypatch.setattr(enc, "attention_bias", lambda query, key: pytest.fail("the (h, L, L) bias was built"))
    q, k, v = (torch.randn(1, 4, 37, 8) for _ in range(3))
    with attention.configured(force_path="flex"):
        got = attention.attend(q, k, v, attention.build_mask(enc, P(37), P(37), True), True)
    torch.testing.assert_close(got, plain_attention(q, k, v, expected_bias, True), atol=1e-5, rtol=0)


@pytest.mark.parametrize("path", ["relative", "general_dense", "general_blocked"])
@pytest.mark.parametrize("encoding_dtype,mask_dtype", [(torch.float64, torch.float32), (torch.float32, torch.float64)])
def test_the_mask_is_held_in_its_own_dtype_and_reaches_sdpa_in_the_queries(path, encoding_dtype, mask_dtype):
    """SDPA refuses a float64 mask for float32 queries: a bias is cast to the dtype the mask is built
    for (the size choose_path budgets), and each block to the queries' dtype."""
    torch.manual_seed(0)
    enc = build("t5", causal=True).to(encoding_dtype)
    q, k, v = (torch.randn(1, 4, 37, 8) for _ in range(3))
    with attention.configured(force_path=path, block_size=16):
        mask = attention.build_mask(enc, P(37), P(37), True, mask_dtype)
        got = attention.attend(q, k, v, mask, True)
    bias = enc.attention_bias(P(37), P(37)).double()
    expected = plain_attention(q.double(), k.double(), v.double(), bias, True)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got.double(), expected, atol=1e-5, rtol=0)
    held = {"relative": "table", "general_dense": "full"}.get(path)
    assert held is None or getattr(mask, held).dtype == mask_dtype


def test_build_mask_chooses_the_path_for_the_keys_device(monkeypatch):
    """The device decides flex (CUDA) against the SDPA paths, so build_mask must pass the keys' own."""
    seen, choose = [], attention.choose_path
    monkeypatch.setattr(attention, "choose_path", lambda *args: seen.append(args[-1]) or choose(*args))
    meta = torch.device("meta")
    enc = encodings.build("alibi", d_model=16, n_heads=2, max_len=64, causal=True).to(meta)
    assert attention.build_mask(enc, P(6, device=meta), P(6, device=meta), True).path == "relative"
    assert seen == [meta]


def test_eager_flex_silences_its_user_warning_only(monkeypatch):
    def flex(*args, **kwargs):
        warnings.warn("slow path", UserWarning, stacklevel=1)
        warnings.warn("going away", FutureWarning, stacklevel=1)
        return "out"

    monkeypatch.setattr("torch.nn.attention.flex_attention.flex_attention", flex)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert attention.eager_flex() == "out"
    assert [(w.category, str(w.message)) for w in caught] == [(FutureWarning, "going away")]
