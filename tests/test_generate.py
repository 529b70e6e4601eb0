"""A KV cache for every encoding: cached logits equal the full forward's at every step, greedy
generation with and without the cache gives the same tokens."""

import pytest
import torch

import posbench
from posbench import KVCache, encodings, generate
from posbench.positions import Positions

DECODERS = [name for name in encodings.names() if encodings.traits(name).axes != "2d"]  # 2-D: grids, not text


def model(name, max_len=48):
    torch.manual_seed(0)
    cfg = posbench.ModelConfig.from_size("tiny", encoding=name, vocab_size=13, max_len=max_len)
    net = posbench.build_model(cfg).eval()
    if name == "t5":
        torch.nn.init.normal_(net.encoding.bias.weight)  # the N(0, 0.02²) init would hide an offset mistake
    return net


@pytest.mark.parametrize("name", DECODERS)
def test_cached_logits_equal_the_full_forward_at_every_step(name):
    net, tokens = model(name), torch.randint(0, 13, (2, 30))
    with torch.no_grad():
        full = net(tokens)  # (2, 30, 13)
        cache = KVCache.empty(net.cfg.n_layers)
        steps = [net(tokens[:, :20], cache=cache)] + [net(tokens[:, t:t + 1], cache=cache) for t in range(20, 27)]
        steps.append(net(tokens[:, 27:], cache=cache))  # a chunk of 3 after the cache
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=0)
    assert len(cache) == 30 and cache.keys[0].shape[-2] == 30


@pytest.mark.parametrize("name", DECODERS)
def test_greedy_generation_is_the_same_with_and_without_the_cache(name):
    net, prompt = model(name), torch.randint(0, 13, (2, 9))
    cached, uncached = generate(net, prompt, 12), generate(net, prompt, 12, use_cache=False)
    assert cached.shape == (2, 21) and torch.equal(cached[:, :9], prompt)
    assert torch.equal(cached, uncached)


def test_rope_with_a_cache_at_offset_p_equals_a_fresh_forward_at_p():
    net, tokens = model("rope"), torch.randint(0, 13, (1, 5))
    cache = KVCache.empty(net.cfg.n_layers)
    with torch.no_grad():
        net(torch.randint(0, 13, (1, 12)), cache=cache)  # 12 tokens before
        after_cache = net(tokens, cache=cache)  # queries at 12 … 16 against 17 keys
        fresh = net(tokens, Positions.arange(5, offset=12))  # the same ids, no earlier tokens
    assert cache.positions.contiguous and cache.positions.max_position == 16
    assert not torch.allclose(after_cache, fresh)  # the cached tokens are attended to ...
    empty = KVCache.empty(net.cfg.n_layers)
    empty.positions = Positions.arange(0, offset=12)  # ... but a cache holding no tokens, at offset 12:
    with torch.no_grad():
        torch.testing.assert_close(net(tokens, cache=empty), fresh, atol=1e-6, rtol=0)


def test_a_learned_table_refuses_to_decode_past_its_rows():
    net = model("learned", max_len=16)
    with pytest.raises(ValueError, match=r"16 rows .* 17 positions"):
        generate(net, torch.randint(0, 13, (1, 10)), 8)  # the 8th new token is read at position 16


def test_generate_needs_a_causal_token_model():
    cfg = posbench.ModelConfig.from_size("tiny", encoding="rope", vocab_size=13, max_len=8, n_classes=3)
    with pytest.raises(ValueError, match="causal language model"):
        generate(posbench.build_model(cfg), torch.zeros(1, 4, dtype=torch.long), 2)


def test_the_cache_is_preallocated_a_step_writes_only_its_own_entries():
    """After a prefill of 20 tokens each layer's keys live in a buffer of 32 (the next power of two above 20):
    steps up to 32 tokens write in place (the same storage, no copy), the 33rd doubles it to 64; truncating
    shortens the views and the next step overwrites what lay beyond."""
    net, tokens = model("alibi"), torch.randint(0, 13, (2, 40))
    cache = KVCache.empty(net.cfg.n_layers)
    with torch.no_grad():
        net(tokens[:, :20], cache=cache)
        storage = cache.keys[0].untyped_storage().data_ptr()
        assert cache.buffers["keys", 0].shape == (2, 4, 32, 16) and cache.nbytes() == 2 * 2 * 2 * 4 * 32 * 16 * 4
        for t in range(20, 32):
            net(tokens[:, t:t + 1], cache=cache)
            assert cache.keys[0].untyped_storage().data_ptr() == storage and cache.keys[0].shape[-2] == t + 1
        net(tokens[:, 32:33], cache=cache)
        assert cache.buffers["keys", 0].shape[-2] == 64 and cache.keys[0].untyped_storage().data_ptr() != storage
        cache.truncate(25)
        again = net(tokens[:, 25:26], cache=cache)  # overwrites entry 25, written before by token 25 itself
        reference = net(tokens[:, :26])[:, -1:]
    assert cache.keys[0].shape[-2] == 26
    torch.testing.assert_close(again, reference, atol=1e-5, rtol=0)


def test_a_forward_pass_gathers_the_rotary_rows_once_for_all_layers(monkeypatch):
    """Every layer receives the same Positions, so rope's per-step table rows are gathered once and shared
    (positions.once_per_positions), and nothing of them outlives the pass."""
    net, calls = model("rope"), []
    gather = type(net.encoding.angles).query_key_rows
    monkeypatch.setattr(type(net.encoding.angles), "query_key_rows",
                        lambda self, positions: calls.append(positions) or gather(self, positions))
    positions = Positions.arange(7)
    with torch.no_grad():
        net(torch.randint(0, 13, (1, 7)), positions)
        net(torch.randint(0, 13, (1, 7)), positions)  # the same ids again: gathered again, once
    assert net.cfg.n_layers == 2 and len(calls) == 2 and not positions.derived
