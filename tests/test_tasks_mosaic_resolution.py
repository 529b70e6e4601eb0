"""mosaic_resolution: the mosaic upsampled to a grid of g × g fixed 4 × 4-pixel patches, re-read independently
of the generator (pixels back to digits, words back to answers); its layout, grids, chance and splits."""

import numpy as np
import pytest
import torch

from posbench import tasks
from posbench.tasks.mosaic_qa import CORNERS, NO, PIXELS, WORDS, YES, split_images
from posbench.train import TrainConfig, train

TASK = tasks.get("mosaic_resolution")


def image_of(tokens: np.ndarray, grid: int) -> np.ndarray:
    """The ``(4g, 4g)`` image whose patches, row by row and pixels row-major inside, are the first g² tokens."""
    image = np.zeros((4 * grid, 4 * grid), dtype=tokens.dtype)
    for cell in range(grid * grid):
        row, column = divmod(cell, grid)
        image[4 * row: 4 * row + 4, 4 * column: 4 * column + 4] = tokens[cell, :PIXELS].reshape(4, 4)
    return image


def downsampled(image: np.ndarray) -> np.ndarray:
    """The ``(16, 16)`` mosaic an image of side 4g was blown up from, read back by intervals: source pixel ``a``
    covers the output pixels from ``⌈a · 4g / 16⌉`` up to the next one's start; each such block must be one value."""
    side = len(image)
    starts = -(-np.arange(16) * side // 16)  # (16,) ceil(a · side / 16)
    owner = np.searchsorted(starts, np.arange(side), side="right") - 1  # (side,) which source pixel covers each
    mosaic = image[starts[:, None], starts[None, :]]  # (16, 16)
    assert np.array_equal(image, mosaic[owner[:, None], owner[None, :]])  # every block is constant
    return mosaic


def answer_of(tokens: np.ndarray, grid: int, tile_labels: np.ndarray) -> int:
    """The answer to the question in the last six tokens, from the words and the tiles' labels alone."""
    words = [WORDS[i] for i in tokens[grid * grid:, PIXELS:].argmax(1)]
    if words[0] == "what":
        return int(tile_labels[CORNERS.index(words[4])])
    column_of = {int(label): tile % 2 for tile, label in enumerate(tile_labels)}
    a, b = int(words[1]), int(words[4])
    assert column_of[a] != column_of[b]
    return YES if column_of[a] < column_of[b] else NO


@pytest.mark.parametrize("grid", [4, 5, 6, 9, 12])
def test_each_item_reads_back_as_split_digits_and_the_right_answer(grid):
    images, labels = split_images("test")
    rng = np.random.default_rng(grid)
    for _ in range(40):
        tokens, answer, tile_labels = TASK.example(rng, "test", grid)
        assert tokens.shape == (grid * grid + 6, 16 + len(WORDS))
        assert (tokens[: grid * grid, PIXELS:] == 0).all() and (tokens[grid * grid:, :PIXELS] == 0).all()
        mosaic = downsampled(image_of(tokens, grid))
        for tile, label in enumerate(tile_labels):  # each quarter is one test image of its label
            row, column = divmod(tile, 2)
            quarter = mosaic[8 * row: 8 * row + 8, 8 * column: 8 * column + 8]
            assert (np.abs(images[labels == label] - quarter).max(axis=(1, 2)) == 0).any()
        assert answer == answer_of(tokens, grid, tile_labels)


def test_at_the_smallest_grid_an_item_is_mosaic_qas():
    mosaic_qa = tasks.get("mosaic_qa")
    for seed in range(5):
        ours, theirs = (task.example(np.random.default_rng(seed), "train", 4) for task in (TASK, mosaic_qa))
        assert all(np.array_equal(a, b) for a, b in zip(ours, theirs))


def test_layout_grids_and_lengths():
    assert TASK.eval_lengths() == [6, 9, 12] and [TASK.sequence_length(n) for n in (6, 9, 12)] == [42, 87, 150]
    batch = next(TASK.eval_batches(9))
    assert batch.inputs.shape == (128, 87, 16 + len(WORDS)) and batch.positions.ids.shape == (87, 3)
    assert batch.positions.ids[80].tolist() == [0, 8, 8] and batch.positions.ids[81].tolist() == [9, 9, 9]
    assert batch.positions.modality.tolist() == [1] * 81 + [0] * 6
    rng = np.random.default_rng(0)
    sides = [TASK.train_batch(rng, 2).positions.ids[:-6, 1].max().item() + 1 for _ in range(60)]
    assert set(sides) == {4, 5, 6}  # training: every grid side from min_grid to train_length, nothing larger
    assert tasks.get("mosaic_resolution", min_grid=6).eval_lengths() == [6, 9, 12]
    with pytest.raises(ValueError, match=r"^mosaic_resolution: min_grid must lie in 4 … train_length \(6\)"):
        tasks.get("mosaic_resolution", min_grid=8)


def test_sets_are_fixed_and_chance_is_each_sets_majority_answer():
    for grid in (6, 12):
        first, again = next(TASK.eval_batches(grid)), next(TASK.eval_batches(grid))
        assert torch.equal(first.inputs, again.inputs)
        assert not torch.equal(next(TASK.eval_batches(grid, "validation")).inputs, first.inputs)
        answers = torch.cat([b.targets for b in TASK.eval_batches(grid)])[:, 0]
        assert len(answers) == 1024
        assert TASK.chance(grid) == {"accuracy": torch.bincount(answers).max().item() / 1024}
        assert 0.2 < TASK.chance(grid)["accuracy"] < 0.3  # yes and no, each about a quarter of the questions


def test_training_reads_train_images_only_and_the_splits_share_none():
    by_split = {split: {image.tobytes() for image in split_images(split)[0]} for split in ("train", "test",
                                                                                              "validation")}
    assert sum(map(len, by_split.values())) == len(set.union(*by_split.values()))
    rng = np.random.default_rng(1)
    for _ in range(20):
        tokens, _, _ = TASK.example(rng, "train", 6)
        mosaic = downsampled(image_of(tokens, 6))
        quarters = [mosaic[r: r + 8, c: c + 8] for r in (0, 8) for c in (0, 8)]
        assert all(quarter.tobytes() in by_split["train"] for quarter in quarters)


@pytest.mark.parametrize("encoding", ["sinusoidal", "mrope_mosaic"])
def test_it_trains_a_few_steps_and_evaluates_at_every_grid(encoding):
    config = TrainConfig(task="mosaic_resolution", encoding=encoding, steps=4, batch_size=8, log_every=2,
                         task_options={"eval_examples": 16})
    record = train(config, log=open("/dev/null", "w"))
    assert record["status"] == "ok"
    assert [(e["length"], e["positions"], e["sequences"]) for e in record["eval"]] == [(6, 42, 16), (9, 87, 16),
                                                                                        (12, 150, 16)]
