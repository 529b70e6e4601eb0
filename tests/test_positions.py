"""Positions as a value, and the traits encodings declare: what the hooks receive and what the rest
of posbench reads instead of encoding names."""

import dataclasses

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import posbench
from posbench import encodings
from posbench.encodings import PositionalEncoding
from posbench.positions import Positions


def model(name, max_len=40, **options):
    torch.manual_seed(0)
    grid = {"encoding_options": {"grid": (5, 8)}} if encodings.traits(name).axes == "2d" else {}
    cfg = posbench.ModelConfig.from_size("tiny", encoding=name, vocab_size=11, max_len=max_len, **grid, **options)
    return posbench.build_model(cfg).eval()


# ----- the value ---------------------------------------------------------------------------------
def test_arange_knows_its_maximum_offset_and_contiguity():
    positions = Positions.arange(5, offset=3)
    assert positions.ids.tolist() == [3, 4, 5, 6, 7]
    assert (positions.max_position, positions.offset, positions.contiguous, positions.axes) == (7, 3, True, 1)
    block = positions[1:3]
    assert block.ids.tolist() == [4, 5] and (block.max_position, block.offset, block.contiguous) == (5, 4, True)
    assert Positions.arange(0).max_position == 0 and len(Positions.arange(0)) == 0


def test_grid_reads_row_by_row_with_exact_maximum():
    positions = Positions.grid(10, cols=4)
    assert positions.ids.tolist() == [[0, 0], [0, 1], [0, 2], [0, 3], [1, 0], [1, 1], [1, 2], [1, 3], [2, 0], [2, 1]]
    assert positions.max_position == 3 and positions.axes == 2 and not positions.contiguous
    assert positions.axis(0).ids.tolist() == [0, 0, 0, 0, 1, 1, 1, 1, 2, 2]
    assert Positions.grid(3, cols=8).max_position == 2  # one short row: columns 0 … 2


def test_from_ids_reads_the_maximum_once_and_refuses_bad_ids():
    positions = Positions.from_ids(torch.tensor([0, 4, 9]), modality=torch.tensor([0, 0, 1]))
    assert positions.max_position == 9 and not positions.contiguous
    assert positions[1:].modality.tolist() == [0, 1]
    with pytest.raises(ValueError, match="ids must be integers"):
        Positions.from_ids(torch.tensor([0.0, 1.0]))
    with pytest.raises(ValueError, match="must be >= 0, got -2"):
        Positions.from_ids(torch.tensor([3, -2]))
    with pytest.raises(ValueError, match="only contiguous slices"):
        Positions.arange(6)[::2]


def test_constructors_refuse_negative_sizes_and_empty_grids_have_bound_zero():
    with pytest.raises(ValueError, match="length and offset must be >= 0, got -1, 0"):
        Positions.arange(-1)
    with pytest.raises(ValueError, match="length and offset must be >= 0, got 2, -3"):
        Positions.arange(2, offset=-3)
    with pytest.raises(ValueError, match="cols must be positive, got 0"):
        Positions.grid(4, cols=0)
    with pytest.raises(ValueError, match=r"shape \(L,\) or \(L, axes\), got torch.int64 \(2, 2, 2\)"):
        Positions.from_ids(torch.zeros(2, 2, 2, dtype=torch.long))
    assert Positions.grid(0, cols=4).max_position == 0
    assert Positions.from_ids(torch.tensor([], dtype=torch.long)).max_position == 0


def test_grid_after_an_offset_continues_the_rows():
    positions = Positions.grid(4, cols=3, offset=5)  # cells 5 … 8 of a 3-wide grid
    assert positions.ids.tolist() == [[1, 2], [2, 0], [2, 1], [2, 2]]
    assert (positions.max_position, positions.offset) == (2, 5)
    partial = Positions.grid(2, cols=8, offset=9)  # row 1, columns 1 and 2: the bound assumes columns 0 … 7 were seen
    assert partial.ids.max() <= partial.max_position == 7
    assert Positions.grid(1, cols=2, offset=6).max_position == 3  # row 3, column 0
    column = Positions.grid(3, cols=1)  # one column is a grid too
    assert column.ids.tolist() == [[0, 0], [1, 0], [2, 0]] and column.max_position == 2
    assert not column.axis(0).contiguous and not Positions.grid(3, cols=8).axis(1).contiguous  # never claimed


def test_constructors_put_ids_on_the_device_asked_for():
    """The meta device stands in for an accelerator: ids (and filled-in modality ids) are made there."""
    assert Positions.arange(3, device="meta").ids.device.type == "meta"
    assert Positions.grid(3, cols=2, device="meta").ids.device.type == "meta"
    tagged = dataclasses.replace(Positions.arange(1, offset=2, device="meta"), modality=torch.ones(1, device="meta"))
    on_meta = Positions.arange(2, device="meta").then(tagged)  # the cache's modality ids are filled in on meta
    assert on_meta.modality.device.type == "meta" and on_meta.modality.shape == (3,)


def test_an_encoding_puts_its_positions_on_the_device_asked_for():
    plain = encodings.build("rope", d_model=16, n_heads=2, max_len=64)
    assert plain.positions(3, device="meta", offset=2).ids.device.type == "meta"
    drawn = encodings.build("rope", d_model=16, n_heads=2, max_len=64, randomized=True, max_position=10)
    assert drawn.training and drawn.positions(3, device="meta").ids.device.type == "meta"  # drawn on the host, moved


def test_then_joins_a_cache_and_new_tokens():
    cache, new = Positions.arange(3), Positions.arange(2, offset=3)
    joined = cache.then(new)
    assert joined.ids.tolist() == [0, 1, 2, 3, 4]
    assert (joined.max_position, joined.offset, joined.contiguous, joined.modality) == (4, 0, True, None)
    gap = cache.then(Positions.arange(2, offset=4))  # ids 0, 1, 2, 4, 5: no longer i − j alone
    assert gap.ids.tolist() == [0, 1, 2, 4, 5] and (gap.max_position, gap.contiguous) == (5, False)
    assert not cache.then(Positions.from_ids(torch.tensor([3, 4]))).contiguous  # from_ids never claims contiguity
    assert not Positions.from_ids(torch.arange(3)).then(new).contiguous
    later = Positions.arange(4, offset=2)[2:]  # ids 4, 5 at offset 4: contiguous, but not after ids 0 … 2
    assert not cache.then(later).contiguous
    mixed = Positions.from_ids(torch.tensor([7, 1]), modality=torch.tensor([2, 1])).then(new)
    assert mixed.modality.tolist() == [2, 1, 0, 0] and mixed.max_position == 7 and mixed.offset == 0
    assert mixed.modality.dtype == torch.long  # the filled-in zeros are modality ids, integers
    tagged = Positions.from_ids(torch.tensor([0]), modality=torch.tensor([5]))
    assert cache.then(tagged).modality.tolist() == [0, 0, 0, 5]


def test_rows_of_a_table_are_a_view_for_contiguous_ids_and_gathered_otherwise():
    table = torch.arange(40.0).view(20, 2)  # (max_len, 2): row n holds 2n, 2n + 1
    step = Positions.arange(1, offset=7)  # a decode step's one position
    gathered = Positions.from_ids(torch.tensor([7, 3, 12]))
    assert torch.equal(step.rows_of(table), table[[7]]) and step.rows_of(table).data_ptr() == table[7].data_ptr()
    assert torch.equal(Positions.arange(5, offset=2)[1:4].rows_of(table), table[3:6])
    assert torch.equal(gathered.rows_of(table), table[[7, 3, 12]])
    assert gathered.rows_of(table).data_ptr() != table.data_ptr()  # a copy: ids that are not a run


def test_a_slice_of_gathered_ids_keeps_their_bound_and_offset():
    positions = Positions.from_ids(torch.tensor([9, 2, 5, 1]), offset=6)
    block = positions[1:3]
    assert block.ids.tolist() == [2, 5] and (block.max_position, block.offset, block.contiguous) == (9, 6, False)
    assert len(block) == 2
    tail = Positions.arange(6, offset=2)[4:]  # ids 6, 7
    assert (tail.max_position, tail.offset, tail.ids.tolist()) == (7, 6, [6, 7])
    assert Positions.arange(6)[3:3].max_position == 2  # empty: bound at most the id before it
    assert Positions.arange(6)[0:0].max_position == 0  # empty at the start: the bound is 0, as for arange(0)


# ----- the hooks read the value ------------------------------------------------------------------
class ScalarReads(TorchDispatchMode):
    """Counts reads of a tensor's value by the host (``int(t)``, ``t.item()``): a device sync on a GPU."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.aten._local_scalar_dense.default:
            self.count += 1
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("name", encodings.names())
def test_a_forward_pass_never_reads_a_tensor_on_the_host(name):
    net, tokens = model(name), torch.randint(0, 11, (2, 37))
    with torch.no_grad(), ScalarReads() as reads:
        net(tokens)
    assert reads.count == 0


@pytest.mark.parametrize("name", ["learned", "learned_concat_fixed"])
def test_a_bounded_table_refuses_ids_beyond_it_from_the_host_maximum(name):
    net = model(name, max_len=16)
    with pytest.raises(ValueError, match=r"16 rows .* 21 positions"):
        net(torch.randint(0, 11, (1, 4)), Positions.from_ids(torch.tensor([0, 1, 2, 20])))


@pytest.mark.parametrize("name", ["none", "rope", "alibi", "t5"])
def test_relative_encodings_ignore_a_shift_of_every_id(name):
    """A cache offset (or any common shift) leaves a relative encoding's logits unchanged."""
    net, tokens = model(name, max_len=64), torch.randint(0, 11, (2, 20))
    with torch.no_grad():
        plain = net(tokens)
        shifted = net(tokens, Positions.arange(20, offset=17))
        randomized = net(tokens, Positions.from_ids(torch.arange(20) + 30))  # general path, same offsets
    torch.testing.assert_close(shifted, plain, atol=2e-5, rtol=0)
    torch.testing.assert_close(randomized, plain, atol=2e-5, rtol=0)


@pytest.mark.parametrize("name", ["sinusoidal", "learned"])
def test_absolute_encodings_see_a_shift(name):
    net, tokens = model(name, max_len=64), torch.randint(0, 11, (2, 20))
    with torch.no_grad():
        assert (net(tokens, Positions.arange(20, offset=17)) - net(tokens)).abs().max() > 1e-3


# ----- traits ------------------------------------------------------------------------------------
def _overrides(encoding, hook) -> bool:
    return getattr(type(encoding), hook) is not getattr(PositionalEncoding, hook)


@pytest.mark.parametrize("name", encodings.names())
def test_declared_traits_match_what_the_encoding_does(name):
    encoding = encodings.build(name, d_model=32, n_heads=2, max_len=8)
    traits = encodings.traits(name)
    assert traits == encoding.traits
    assert traits.trained == any(p.requires_grad for p in encoding.parameters())
    assert traits.bounded == (encoding.max_positions is not None)
    assert (traits.hook == "input") == _overrides(encoding, "inject")
    assert (traits.hook == "qk") == _overrides(encoding, "rotate")
    assert (traits.hook == "logits") == (encoding.attention_bias(Positions.arange(3), Positions.arange(3)) is not None)
    assert (traits.combine != "none") == (traits.hook == "input")
    contextual = _overrides(encoding, "content_bias") or traits.attention != "softmax"
    assert (traits.hook == "contextual") == contextual == (traits.reads in ("qk", "input"))
    assert (encoding.model_width > encoding.d_model) == (traits.combine == "concat")  # the naive concat widens
    assert (encoding.token_width < encoding.d_model) == (traits.combine == "concat_fixed")  # E gives up width


def test_traits_of_the_catalogue():
    table = {name: encodings.traits(name) for name in encodings.names()}
    assert {n for n, t in table.items() if t.combine == "add"} == {"sinusoidal", "learned", "sinusoidal_2d",
                                                                   "sinusoidal_randomized", "learned_randomized",
                                                                   "sinusoidal_per_modality"}
    assert {n for n, t in table.items() if t.bounded} == {"learned", "learned_concat", "learned_concat_fixed",
                                                          "learned_randomized"}
    assert {n for n, t in table.items() if t.axes == "2d"} == {"sinusoidal_2d", "rope_2d"}
    assert {n for n, t in table.items() if t.hook == "logits"} == {"alibi", "t5", "kerple", "fire", "alibi_randomized"}
    assert {n for n, t in table.items() if t.randomized} == {"sinusoidal_randomized", "learned_randomized",
                                                             "rope_randomized", "alibi_randomized"}
    assert {n: (t.reads, t.attention) for n, t in table.items() if t.hook == "contextual"} == {
        "cope": ("qk", "softmax"), "fox": ("input", "softmax"), "stick_breaking": ("qk", "stick_breaking"),
        "path": ("qk", "softmax")}
    assert {t.reads for t in table.values() if t.hook not in ("none", "contextual")} == {"positions"}
    assert encodings.traits("t5").as_columns() == {"pe_hook": "logits", "pe_combine": "none", "pe_axes": "1d",
                                                   "pe_bounded": False, "pe_trained": True, "pe_randomized": False,
                                                   "pe_reads": "positions", "pe_attention": "softmax"}


# ----- randomized positions ----------------------------------------------------------------------
@pytest.mark.parametrize("name", ["sinusoidal_randomized", "learned_randomized", "rope_randomized", "alibi_randomized"])
def test_randomized_positions_in_training_plain_ones_in_evaluation(name):
    encoding = encodings.build(name, d_model=16, n_heads=2, max_len=100)
    assert encoding.traits.randomized and encoding.random_positions == 100
    torch.manual_seed(3)
    drawn = encoding.positions(12)
    ids = drawn.ids.tolist()
    assert ids == sorted(set(ids)) and 0 <= ids[0] and ids[-1] == drawn.max_position < 100 and len(ids) == 12
    assert ids != list(range(12)) and not drawn.contiguous
    torch.manual_seed(3)
    assert encoding.positions(12).ids.tolist() == ids  # the training seed fixes them
    encoding.eval()
    assert encoding.positions(12).ids.tolist() == list(range(12)) and encoding.positions(12).contiguous


def test_a_randomized_model_trains_through_every_hook():
    net = model("alibi_randomized").train()
    logits = net(torch.randint(0, 11, (2, 20)))
    logits.sum().backward()
    assert all(p.grad is not None for p in net.parameters())


@pytest.mark.parametrize("name,options,message", [
    ("learned", {"randomized": True, "max_position": 65}, r"max_position 65 is beyond the table's 64 rows"),
    ("rope_2d", {"randomized": True}, "randomized positions are for 1-D positions"),
    ("rope", {"max_position": 65}, "max_position applies only with randomized=True")])
def test_randomized_positions_refuse_what_they_cannot_do(name, options, message):
    with pytest.raises(ValueError, match=message):
        encodings.build(name, d_model=16, n_heads=2, max_len=64, **options)


def test_randomized_positions_refuse_more_tokens_than_ids():
    encoding = encodings.build("rope", d_model=16, n_heads=2, max_len=64, randomized=True, max_position=10)
    with pytest.raises(ValueError, match="11 tokens but randomized positions draw from 10 ids"):
        encoding.positions(11)


def test_randomized_positions_at_the_edges_of_their_range():
    encoding = encodings.build("learned", d_model=16, n_heads=2, max_len=8, randomized=True, max_position=8)
    assert encoding.random_positions == 8  # max_position equal to the table's rows is allowed
    every = encoding.positions(8)  # as many tokens as ids: all of them, in order
    assert every.ids.tolist() == list(range(8)) and every.max_position == 7
    assert (encoding.positions(0).max_position, len(encoding.positions(0))) == (0, 0)
    with pytest.raises(ValueError, match="^randomized positions are drawn for whole training sequences, "
                                         "not after a cache$"):
        encoding.positions(4, offset=2)
    encoding.eval()
    assert encoding.positions(4, offset=2).ids.tolist() == [2, 3, 4, 5]  # evaluation: plain ids after the cache
    with pytest.raises(ValueError, match="max_position must be a positive integer, got 0"):
        encoding.randomize(0)


@pytest.mark.parametrize("value", [True, 0, -3, 4.0])
def test_sizes_must_be_positive_integers_not_booleans(value):
    with pytest.raises(ValueError, match=f"n_heads must be a positive integer, got {value!r}"):
        encodings.build("none", d_model=16, n_heads=value, max_len=8)
