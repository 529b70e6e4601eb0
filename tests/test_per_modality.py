"""Separate encodings per modality: each token gets exactly its own modality's encoding at its own ids,
through the hooks, at the cost of one part; what does not compose is refused in one line."""

import pytest
import torch
from torch.testing import assert_close
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

import posbench
from posbench import attention, encodings
from posbench.encodings.per_modality import PerModalityInput, PerModalityRotary
from posbench.flops import TORCH_FORMULAS
from posbench.positions import IMAGE, TEXT, Positions

D, HEADS, MAX_LEN = 32, 2, 64
PRESETS = {"sinusoidal_per_modality": ("sinusoidal", "sinusoidal_2d"), "rope_per_modality": ("rope", "rope_2d")}
EXACT = dict(rtol=0, atol=0)


def build(name, **options):
    return encodings.build(name, d_model=D, n_heads=HEADS, max_len=MAX_LEN, **options)


def mixed(text_before=4, rows=3, cols=3, text_after=3, row_shift=0, col_shift=0, text_shift=0):
    """M-RoPE's layout (Qwen2-VL): text tokens at (t, t, t); a rows × cols image after ``text_before``
    tokens at (start, start + row, start + col); text resumes after the image's largest id.
    Shifts move the text ids, or the patches' rows or columns, and nothing else."""
    text_ids = [t + text_shift for t in range(text_before)]
    start = text_before
    patches = [(start, start + r + row_shift, start + c + col_shift) for r in range(rows) for c in range(cols)]
    resume = start + max(rows, cols) + text_shift
    ids = ([(t, t, t) for t in text_ids] + patches + [(t, t, t) for t in range(resume, resume + text_after)])
    modality = [TEXT] * text_before + [IMAGE] * (rows * cols) + [TEXT] * text_after
    return Positions.from_ids(torch.tensor(ids), torch.tensor(modality))  # ids (L, 3), modality (L,)


def parts_of(positions):
    """For each token: its modality's own positions, 1-D text ids or (row, column) patch ids."""
    is_text = positions.modality == TEXT
    return (is_text, Positions.from_ids(positions.ids[is_text, 0]),
            Positions.from_ids(positions.ids[~is_text, 1:]))


def rotary_logits(encoding, q, k, positions):
    """``q_i · k_j`` after rotation: ``(L, L)`` for one head of ``(L, d_head)`` vectors."""
    rotated_q, rotated_k = encoding.rotate(q[None], k[None], positions)  # (1, L, d_head)
    return rotated_q[0] @ rotated_k[0].T


# ----- one modality alone is that modality's encoding, exactly -----------------------------------
@pytest.mark.parametrize("name", PRESETS)
def test_text_only_positions_give_the_text_part_exactly(name):
    composed, text = build(name), build(PRESETS[name][0])
    tokens, q, k = torch.randn(2, 10, D), torch.randn(2, HEADS, 10, D // HEADS), torch.randn(2, HEADS, 10, D // HEADS)
    plain = Positions.arange(10, offset=3)  # (L,) ids: text
    all_text = Positions.from_ids(plain.ids[:, None].expand(10, 3), torch.full((10,), TEXT))  # (L, 3), every token text
    for positions in (plain, all_text):
        assert_close(composed.inject(tokens, positions), text.inject(tokens, plain), **EXACT)
        assert_close(composed.rotate(q, k, positions), text.rotate(q, k, plain), **EXACT)


@pytest.mark.parametrize("name", PRESETS)
def test_a_text_model_is_the_text_encodings_model(name):
    """Default positions are text: the whole model's logits equal the 1-D encoding's model (same seed)."""
    def logits(encoding):
        torch.manual_seed(0)
        cfg = posbench.ModelConfig.from_size("tiny", encoding=encoding, vocab_size=11, max_len=MAX_LEN)
        return posbench.build_model(cfg).eval()(torch.arange(20).remainder(11)[None])

    with torch.no_grad():
        assert_close(logits(name), logits(PRESETS[name][0]), **EXACT)


@pytest.mark.parametrize("name", PRESETS)
def test_patch_only_positions_give_the_image_part_exactly(name):
    composed, image = build(name), build(PRESETS[name][1])
    tokens, q, k = torch.randn(2, 12, D), torch.randn(2, HEADS, 12, D // HEADS), torch.randn(2, HEADS, 12, D // HEADS)
    patches = Positions.grid(12, cols=4)  # (L, 2) row, column
    assert_close(composed.inject(tokens, patches), image.inject(tokens, patches), **EXACT)
    assert_close(composed.rotate(q, k, patches), image.rotate(q, k, patches), **EXACT)


# ----- a mixed sequence: every token its own modality's encoding at its own ids ------------------
def test_mixed_input_adds_each_tokens_own_modality_vector():
    composed = build("sinusoidal_per_modality")
    text, image = build("sinusoidal"), build("sinusoidal_2d")
    positions = mixed()  # 4 text, 3 × 3 patches, 3 text: 16 tokens
    is_text, text_positions, patch_positions = parts_of(positions)
    assert text_positions.ids.tolist() == [0, 1, 2, 3, 7, 8, 9]
    assert patch_positions.ids[:4].tolist() == [[4, 4], [4, 5], [4, 6], [5, 4]]
    tokens = torch.randn(2, 16, D)
    out = composed.inject(tokens, positions)  # (2, 16, D)
    assert_close(out[:, is_text], text.inject(tokens[:, is_text], text_positions), **EXACT)
    assert_close(out[:, ~is_text], image.inject(tokens[:, ~is_text], patch_positions), **EXACT)


def test_mixed_rotation_turns_each_token_by_its_own_modality():
    composed, text, image = build("rope_per_modality"), build("rope"), build("rope_2d")
    positions = mixed()
    is_text, text_positions, patch_positions = parts_of(positions)
    q, k = torch.randn(2, HEADS, 16, D // HEADS), torch.randn(2, HEADS, 16, D // HEADS)
    rotated_q, rotated_k = composed.rotate(q, k, positions)
    text_q, text_k = text.rotate(q[:, :, is_text], k[:, :, is_text], text_positions)
    image_q, image_k = image.rotate(q[:, :, ~is_text], k[:, :, ~is_text], patch_positions)
    assert_close(rotated_q[:, :, is_text], text_q, **EXACT)
    assert_close(rotated_k[:, :, is_text], text_k, **EXACT)
    assert_close(rotated_q[:, :, ~is_text], image_q, **EXACT)
    assert_close(rotated_k[:, :, ~is_text], image_k, **EXACT)


@pytest.mark.parametrize("name", PRESETS)
def test_text_tokens_read_the_text_axis_whatever_their_row_and_column(name):
    """(text, row, column) ids: a text token's row and column ids are not its position."""
    positions = mixed()
    is_text = positions.modality == TEXT
    ids = positions.ids.clone()
    ids[is_text, 1:] = torch.tensor([[0, 11]] * int(is_text.sum()))  # the layout's (t, t, t) -> (t, 0, 11)
    moved = Positions.from_ids(ids, positions.modality)
    encoding = build(name)
    torch.manual_seed(0)
    same = HOOK_CALLS[name](encoding, positions, 16)
    torch.manual_seed(0)
    assert_close(HOOK_CALLS[name](encoding, moved, 16), same, **EXACT)


def test_each_parts_own_options_reach_it_and_a_direct_build_is_unmasked():
    from posbench.encodings.per_modality import per_modality

    composed = build("rope_per_modality", text_options={"base": 100.0}, image_options={"base": 50.0})
    assert (composed.text.angles.base, composed.image.angles.base) == (100.0, 50.0)
    assert per_modality(D, HEADS, MAX_LEN, text="rope", image="rope_2d").causal is False


def test_rotary_logits_depend_on_text_offsets_among_text_and_grid_offsets_among_patches(float64):
    composed = build("rope_per_modality")
    q, k = torch.randn(16, D // HEADS), torch.randn(16, D // HEADS)  # one head
    plain = rotary_logits(composed, q, k, mixed())
    is_text = mixed().modality == TEXT
    text_shifted = rotary_logits(composed, q, k, mixed(text_shift=5))  # every text id + 5, patches unmoved
    grid_shifted = rotary_logits(composed, q, k, mixed(row_shift=2, col_shift=3))  # patches (+2, +3), text unmoved
    between_text, between_patches = is_text[:, None] & is_text, ~is_text[:, None] & ~is_text
    assert_close(text_shifted[between_text], plain[between_text], rtol=0, atol=1e-9)
    assert_close(grid_shifted[between_patches], plain[between_patches], rtol=0, atol=1e-9)
    across = is_text[:, None] ^ is_text  # a text token and a patch: the shift does move these
    assert (text_shifted[across] - plain[across]).abs().max() > 1e-3
    assert (grid_shifted[across] - plain[across]).abs().max() > 1e-3
    one_patch_moved = mixed().ids.clone()
    one_patch_moved[4, 1] += 1  # the first patch one row down: its offsets to the other patches change
    moved = rotary_logits(composed, q, k, Positions.from_ids(one_patch_moved, mixed().modality))
    assert (moved[between_patches] - plain[between_patches]).abs().max() > 1e-3


# ----- cost, attention path, host syncs ----------------------------------------------------------
def torch_count(call) -> int:
    counter = FlopCounterMode(display=False, custom_mapping=TORCH_FORMULAS)
    with torch.no_grad(), counter:
        call()
    return counter.get_total_flops()


def test_a_mixed_sequence_costs_one_rotation_and_one_add():
    """Under posbench.flops' convention, counted by FlopCounterMode with its formulas. Ids stay inside
    rope_2d's cached turns (its default 8 × 8 grid at max_len 64), as ids inside rope's do."""
    positions = mixed(text_before=2, rows=2, cols=3, text_after=2)  # 10 tokens, ids at most 6
    q, k, tokens = torch.randn(2, HEADS, 10, D // HEADS), torch.randn(2, HEADS, 10, D // HEADS), torch.randn(2, 10, D)
    rotary, added = build("rope_per_modality"), build("sinusoidal_per_modality")
    rotation = 2 * 3 * (2 * 10) * rotary.rotated_width  # q and k: 6 FLOPs per complex pair, 3 per rotated element
    assert rotary.rotated_width == D
    assert torch_count(lambda: rotary.rotate(q, k, positions)) == rotation == 3840
    # the add E + P (B·L·d), and sinusoidal_2d's row and column angles built per call (L·d/2), as alone
    assert torch_count(lambda: added.inject(tokens, positions)) == 2 * 10 * D + 10 * D // 2 == 800


@pytest.mark.parametrize("name", PRESETS)
def test_no_logit_bias_so_attention_runs_the_plain_kernel(name):
    composed = build(name)
    assert composed.attention_bias(mixed(), mixed()) is None and attention.bias_kind(composed) is None
    assert attention.choose_path(composed, 16, 16, causal=True) == "is_causal"
    assert attention.choose_path(composed, 16, 16, causal=False) == "unmasked"


class ScalarReads(TorchDispatchMode):
    """Counts reads of a tensor's value by the host: a device sync on a GPU."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.count += func is torch.ops.aten._local_scalar_dense.default
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("name", PRESETS)
def test_a_mixed_forward_pass_never_reads_a_tensor_on_the_host(name):
    torch.manual_seed(0)
    cfg = posbench.ModelConfig.from_size("tiny", encoding=name, vocab_size=11, max_len=MAX_LEN)
    net, tokens, positions = posbench.build_model(cfg).eval(), torch.randint(0, 11, (2, 16)), mixed()
    with torch.no_grad(), ScalarReads() as reads:
        logits = net(tokens, positions)
    assert reads.count == 0 and logits.shape == (2, 16, 11)


def test_a_mixed_forward_pass_splits_the_ids_once_for_all_layers(monkeypatch):
    """The text and image rows are found and joined once per pass and shared by the layers (as rope's are)."""
    torch.manual_seed(0)
    cfg = posbench.ModelConfig.from_size("tiny", encoding="rope_per_modality", vocab_size=11, max_len=MAX_LEN)
    net, tokens, positions, calls = posbench.build_model(cfg).eval(), torch.randint(0, 11, (2, 16)), mixed(), []
    split = PerModalityRotary.split
    monkeypatch.setattr(PerModalityRotary, "split", lambda self, ids: calls.append(ids) or split(self, ids))
    with torch.no_grad():
        net(tokens, positions)
    assert cfg.n_layers == 2 and len(calls) == 1 and not positions.derived


# ----- traits and parameters come from the parts ------------------------------------------------
def test_traits_come_from_the_parts():
    assert encodings.traits("sinusoidal_per_modality") == encodings.Traits("input", "add", "multimodal", False,
                                                                           False, False, "positions", "softmax")
    assert encodings.traits("rope_per_modality") == encodings.Traits("qk", "none", "multimodal", False, False, False,
                                                                     "positions", "softmax")
    assert type(build("sinusoidal_per_modality")) is PerModalityInput
    assert type(build("rope_per_modality")) is PerModalityRotary


def test_a_learned_part_is_counted_as_position_parameters():
    cfg = posbench.ModelConfig(d_model=D, n_heads=HEADS, n_layers=1, max_len=MAX_LEN,
                               encoding="sinusoidal_per_modality", encoding_options={"text": "learned"})
    model = posbench.build_model(cfg)
    assert posbench.count_params(model)["position"] == MAX_LEN * D == 2048
    assert model.encoding.traits.trained and model.encoding.traits.bounded
    assert model.encoding.max_positions == MAX_LEN


# ----- misuse: one line naming what is allowed ---------------------------------------------------
@pytest.mark.parametrize("options, message", [
    ({"image": "rope_2d"}, r"text=sinusoidal \(input, combine add, widths 32->32\) and image=rope_2d \(qk, rotated "
                           r"width 32\) do not compose; allowed: two input encodings with the same combine"),
    ({"text": "alibi"}, r"text=alibi \(logits, .*\) do not compose; allowed: .* or two rotary encodings"),
    ({"text": "sinusoidal_concat"}, r"widths 32->64\) and image=sinusoidal_2d .* do not compose"),
    ({"text": "sinusoidal_2d"}, r"need a 1-D text encoding and a 2-D image encoding; got text=sinusoidal_2d \(2d\)"),
    ({"text": "sinusoidal_randomized"}, r"a randomized part would be trained on plain ids; got "
                                         r"text=sinusoidal_randomized, image=sinusoidal_2d; allowed: parts without"),
])
def test_parts_that_do_not_compose_are_refused_in_one_line(options, message):
    with pytest.raises(ValueError, match=message) as error:
        build("sinusoidal_per_modality", **options)
    assert "\n" not in str(error.value)


def test_rotary_parts_of_different_widths_are_refused():
    with pytest.raises(ValueError, match=r"text=rope_p50 \(qk, rotated width 16\) and image=rope_2d \(qk, rotated "
                                         r"width 32\) do not compose"):
        build("rope_per_modality", text="rope_p50")


HOOK_CALLS = {  # each preset's own hook on random tokens (5 unless told)
    "sinusoidal_per_modality": lambda encoding, positions, n=5: encoding.inject(torch.randn(1, n, D), positions),
    "rope_per_modality": lambda encoding, positions, n=5: encoding.rotate(
        torch.randn(1, HEADS, n, D // HEADS), torch.randn(1, HEADS, n, D // HEADS), positions),
}


@pytest.mark.parametrize("name", PRESETS)
def test_three_axes_without_modality_ids_are_refused(name):
    without_modality = Positions.from_ids(torch.zeros(5, 3, dtype=torch.long))
    with pytest.raises(ValueError, match=r"\(L, 3\) \(text, row, column\) ids with a modality per token; "
                                         r"got 3 axes and no modality"):
        HOOK_CALLS[name](build(name), without_modality)
    four_axes = Positions.from_ids(torch.zeros(5, 4, dtype=torch.long), torch.zeros(5, dtype=torch.long))
    with pytest.raises(ValueError, match=r"with a modality per token; got 4 axes$"):
        HOOK_CALLS[name](build(name), four_axes)
