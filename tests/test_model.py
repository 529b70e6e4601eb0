"""The model around the encodings: shapes, causality, permutation equivariance."""

import pytest
import torch

import posbench
from posbench import encodings

ALL = encodings.names()
GRID = {"grid": (4, 4)}


def tiny(name, **overrides):
    options = GRID if name.endswith("_2d") else {}
    cfg = posbench.ModelConfig.from_size("tiny", encoding=name, encoding_options=options, vocab_size=11,
                                         max_len=16, **overrides)
    torch.manual_seed(0)
    return posbench.build_model(cfg).eval()


@pytest.mark.parametrize("name", ALL)
def test_lm_shapes_and_dtype(name):
    logits = tiny(name)(torch.randint(0, 11, (3, 16)))
    assert logits.shape == (3, 16, 11) and logits.dtype == torch.float32
    assert torch.isfinite(logits).all()


def test_without_a_gradient_the_attention_turns_its_projections_queries_and_keys_in_place(monkeypatch):
    """Every layer hands its fresh q and k to ``rotate_in_place`` (a decode step then makes no new q and k),
    and the logits equal those of the hook that turns copies, bit for bit."""
    model, turned = tiny("rope"), []
    rope, rotate_in_place = type(model.encoding), type(model.encoding).rotate_in_place
    tokens = torch.randint(0, 11, (2, 16))
    with torch.no_grad():
        monkeypatch.setattr(rope, "rotate_in_place", lambda self, q, k, p: turned.append(q) or rotate_in_place(
            self, q, k, p))
        in_place = model(tokens)
        monkeypatch.setattr(rope, "rotate_in_place", rope.rotate)  # turns copies
        copies = model(tokens)
    assert len(turned) == model.cfg.n_layers and torch.equal(in_place, copies)


@pytest.mark.parametrize("name", ALL)
def test_classifier_on_patches(name):
    model = tiny(name, causal=False, n_classes=10, patch_dim=4)
    assert model(torch.randn(2, 16, 4)).shape == (2, 10)


@pytest.mark.parametrize("name", ALL)
def test_causal_model_does_not_see_the_future(name):
    model = tiny(name)
    tokens = torch.randint(0, 11, (2, 16))
    changed = tokens.clone()
    changed[:, 9] = (changed[:, 9] + 1) % 11
    with torch.no_grad():
        before, after = model(tokens), model(changed)
    assert torch.allclose(before[:, :9], after[:, :9], atol=1e-6)
    assert not torch.allclose(before[:, 9:], after[:, 9:], atol=1e-6)


def test_bidirectional_none_is_permutation_equivariant():
    model = tiny("none", causal=False)
    tokens = torch.randint(0, 11, (2, 16))
    perm = torch.randperm(16)
    with torch.no_grad():
        assert torch.allclose(model(tokens)[:, perm], model(tokens[:, perm]), atol=1e-5)


@pytest.mark.parametrize("name", [n for n in ALL if n != "none"])
def test_every_encoding_breaks_permutation_equivariance(name):
    """The converse check: an encoding that carries position makes order matter."""
    model = tiny(name, causal=False)
    tokens = torch.randint(0, 11, (2, 16))
    perm = torch.roll(torch.arange(16), 3)
    with torch.no_grad():
        assert not torch.allclose(model(tokens)[:, perm], model(tokens[:, perm]), atol=1e-4)


@pytest.mark.parametrize("causal", [True, False])
def test_alibi_model_attends_less_to_distant_inputs(causal, float64):
    """ALiBi through the model, not the encoding's own tensor: with every input the same, q·k is the
    same for every pair, so attention weights are softmax(bias) alone, and in a 1-layer model the
    output at query i depends on an input j ≠ i only through w_ij times one common Jacobian (the key
    path carries nothing: every value is the same). So the gradient's norm at j is ∝ w_ij ∝
    exp(−m·|i − j|), with m = 2^−8 for one head: it must fall by exactly that per step of distance."""
    L, query, m = 24, (23 if causal else 12), 2.0**-8
    cfg = posbench.ModelConfig(vocab_size=5, d_model=16, n_layers=1, n_heads=1, max_len=L, encoding="alibi",
                               causal=causal, patch_dim=3)
    torch.manual_seed(0)
    model = posbench.build_model(cfg)
    inputs = torch.randn(1, 1, 3).expand(1, L, 3).clone().requires_grad_()
    (model(inputs)[0, query] @ torch.randn(5)).backward()
    norms = inputs.grad[0].norm(dim=-1)  # (L,)
    keys = [j for j in range(L) if j != query and (j < query or not causal)]
    distance = torch.tensor([abs(query - j) for j in keys], dtype=torch.float64)
    log_weight = norms[keys].log()  # log w_ij + a constant
    intercept = log_weight + m * distance  # the same for every key if w_ij ∝ exp(−m·|i − j|)
    slope = (log_weight[distance == 1].mean() - log_weight[distance == 2].mean()).item()
    assert slope == pytest.approx(m, rel=1e-6), (
        f"log attention weight falls by {slope} per step of distance, not m = {m}")
    assert torch.allclose(intercept, intercept[0], atol=1e-10, rtol=0)
    if causal:
        assert bool((norms[query + 1:] == 0).all())


def test_unknown_size_names_the_allowed_values():
    with pytest.raises(ValueError, match="unknown size 'huge'; allowed: micro, tiny, small, ladder256"):
        posbench.ModelConfig.from_size("huge")


def test_learned_model_refuses_lengths_beyond_its_table():
    with pytest.raises(ValueError, match="16 rows"):
        tiny("learned")(torch.randint(0, 11, (1, 17)))


@pytest.mark.parametrize("name", ["rope", "alibi", "t5", "sinusoidal"])
def test_lengths_beyond_max_len_run_for_encodings_that_extend(name):
    assert tiny(name)(torch.randint(0, 11, (1, 40))).shape == (1, 40, 11)
