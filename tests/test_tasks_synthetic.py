"""The published synthetic tasks (counting, selective copy, flip-flop, multi-key needles, variable
tracking): each generator's items re-read by a small parser of their own that recomputes the answer
from the token sequence, chance levels by the numbers, splits disjoint, seeds reproducible, bad
options refused in one line naming the key; each trains a few steps and is scored item by item."""

import numpy as np
import pytest

from posbench import tasks
from posbench.tasks import IGNORE
from posbench.train import TrainConfig, train

NAMES = ("counting", "selective_copy", "flip_flop", "multikey_niah", "variable_tracking")


def prompt_and_answer(inputs, targets) -> tuple[list[int], list[int]]:
    """The whole sequence split where scoring starts (every task here scores one trailing answer), and the
    scored tokens."""
    sequence = [*inputs.tolist(), int(targets[-1])]
    first = int(np.flatnonzero(targets != IGNORE)[0]) + 1
    return sequence[:first], [int(t) for t in targets[targets != IGNORE]]


def examples(task, length, count=40):
    rng = np.random.default_rng(7)
    return [task.example(rng, task.valid_length(length)) for _ in range(count)]


# ----- counting -----------------------------------------------------------------------------------
def run_program(task, prompt: list[int]) -> int:
    """Interpret ``v = 0 ;``, ``pass ;``, ``v ++ ;`` … ``print v`` as a program; the printed value."""
    words = {task.word(w): w for w in ("=", ";", "pass", "++", "print")}
    text = [words.get(t, f"v{t}") for t in prompt]
    values = {}
    statements = " ".join(text[:-2]).split(" ;")
    for statement in filter(None, (s.strip() for s in statements)):
        parts = statement.split()
        if parts == ["pass"]:
            continue
        if parts[1] == "=":
            assert parts[2] == "v0"  # the value token 0
            values[parts[0]] = 0
        else:
            assert parts[1] == "++" and parts[0] in values  # only a variable already set is incremented
            values[parts[0]] += 1
    assert text[-2] == "print"
    return values[text[-1]]


@pytest.mark.parametrize("n_vars", [1, 3, 5])
def test_counting_answer_is_the_printed_variables_count_since_its_reset(n_vars):
    task = tasks.get("counting", n_vars=n_vars)
    for length in (3, 16, 64):
        for inputs, targets in examples(task, length):
            prompt, answer = prompt_and_answer(inputs, targets)
            assert answer == [run_program(task, prompt)]
            assert prompt.count(task.word(";")) == length  # one statement per unit of length
            assert len(inputs) <= task.sequence_length(length)
            assert 0 <= answer[0] <= 10
            assert len({t for t in prompt if task.variable(0) <= t < task.variable(n_vars)}) <= n_vars


def test_counting_draws_statements_with_the_papers_weights():
    """Statements after the first reset (which every program has, so it is left out) come with weights
    1 : 50 : 7 (reset, pass, increment), less the increments that would pass 10 (rare at 64 statements)."""
    task = tasks.get("counting")
    counts = {"=": 0, "pass": 0, "++": 0}
    for inputs, targets in examples(task, 64, count=300):
        prompt, _ = prompt_and_answer(inputs, targets)
        first_set = prompt.index(task.word("="))
        for word in counts:
            counts[word] += prompt[first_set + 1 :].count(task.word(word))
    total = sum(counts.values())
    assert counts["pass"] / total == pytest.approx(50 / 58, abs=0.01)
    assert counts["++"] / total == pytest.approx(7 / 58, abs=0.01)


# ----- selective copy -----------------------------------------------------------------------------
def test_selective_copy_answer_is_the_non_blank_symbols_in_order():
    task = tasks.get("selective_copy")
    for length in (2, 32, 256):
        for inputs, targets in examples(task, length, count=20):
            prompt, answer = prompt_and_answer(inputs, targets)
            assert prompt[-1] == task.sep_id and len(prompt) == length + 1
            assert answer == [t for t in prompt[:-1] if t != task.blank_id]
            assert len(answer) == max(1, round(0.5 * length))
            assert len(inputs) == task.sequence_length(length)


# ----- flip-flop ----------------------------------------------------------------------------------
def test_flip_flop_every_read_returns_the_last_written_bit():
    task = tasks.get("flip_flop")
    w, r, i = (task.opcode(op) for op in "wri")
    for length in (2, 32, 256):
        for inputs, targets in examples(task, length, count=20):
            sequence = [*inputs.tolist(), int(targets[-1])]
            assert len(sequence) == 2 * length and sequence[0] == w and sequence[-2] == r
            expected, memory = [], None
            for op, bit in zip(sequence[::2], sequence[1::2]):
                assert op in (w, r, i) and bit in (0, 1)
                if op == w:
                    memory = bit
                elif op == r:
                    expected.append(memory)
            assert [int(t) for t in targets[targets != IGNORE]] == expected
            assert all(sequence[p + 1] in (0, 1) for p in np.flatnonzero(targets != IGNORE))  # only bits scored


def test_flip_flop_ignores_with_p_ignore():
    task = tasks.get("flip_flop", p_ignore=0.6)
    ops = np.concatenate([inputs[2:-2:2] for inputs, _ in examples(task, 256, count=20)])  # the middle
    assert np.mean(ops == task.opcode("i")) == pytest.approx(0.6, abs=0.02)
    assert np.mean(ops == task.opcode("w")) == pytest.approx(0.2, abs=0.02)


# ----- multi-key needles --------------------------------------------------------------------------
def test_multikey_niah_answer_is_the_asked_keys_value_and_keys_are_unique():
    task = tasks.get("multikey_niah")
    size = task.needle_size
    colon, semicolon, question = task.mark(":"), task.mark(";"), task.mark("?")
    for length in task.eval_lengths():
        for inputs, targets in examples(task, length, count=10):
            prompt, answer = prompt_and_answer(inputs, targets)
            haystack, query = prompt[:length], prompt[length:]
            table = {}
            for start in range(0, length, size):
                needle = haystack[start : start + size]
                split = needle.index(colon)
                assert needle[-1] == semicolon and split == task.key_tokens
                key = tuple(needle[:split])
                assert key not in table
                table[key] = needle[split + 1 : -1]
            assert query[0] == question and query[-1] == colon
            assert answer == table[tuple(query[1:-1])]
            assert len(inputs) == task.sequence_length(length)


def test_multikey_niah_evaluation_reaches_16x_and_cycles_depths():
    task = tasks.get("multikey_niah")
    assert task.eval_lengths() == [63, 126, 252, 504, 1008]
    inputs, targets = task.eval_example(np.random.default_rng(0), 63, item=0)  # depth 0: the first needle
    prompt, answer = prompt_and_answer(inputs, targets)
    assert prompt[-3:-1] == prompt[:2] and answer == prompt[3:6]


# ----- variable tracking --------------------------------------------------------------------------
def trace(task, prompt: list[int]) -> list[int]:
    """The variables holding the asked value, in the order assigned, from the statements ``x = … ;``."""
    eq, semi = task.mark("="), task.mark(";")
    value = tuple(prompt[-1 - task.n_digits : -1])
    holders = {}  # variable -> value
    order = []
    for p in np.flatnonzero(np.array(prompt) == eq):
        target, source = prompt[p - 1], prompt[p + 1 : prompt.index(semi, p)]
        holders[target] = tuple(source) if len(source) == task.n_digits else holders[source[0]]
        order.append(target)
    return [x for x in order if holders[x] == value]


@pytest.mark.parametrize("hops", [1, 2, 3, 4])
def test_variable_tracking_answer_is_the_chain_of_the_asked_value(hops):
    task = tasks.get("variable_tracking")
    rng = np.random.default_rng(hops)
    for length in (48, 64, 1024):
        for _ in range(10):
            inputs, targets = task.example(rng, length, hops)
            prompt, answer = prompt_and_answer(inputs, targets)
            assert len(prompt) == length + task.n_digits + 2  # context, ``? value :``
            assert answer == trace(task, prompt) and len(answer) == hops + 1
            assert prompt.count(task.mark("=")) == task.n_chains * (hops + 1)
            assert len(inputs) <= task.sequence_length(length)


def test_variable_tracking_evaluation_reaches_16x_and_cycles_hops():
    task = tasks.get("variable_tracking")
    assert task.eval_lengths()[-1] == 16 * task.train_length
    batch = next(task.eval_batches(64))
    answers = (batch.targets != IGNORE).sum(dim=1).tolist()
    assert answers[:8] == [2, 3, 4, 5, 2, 3, 4, 5]  # hops 1 … 4, item by item


# ----- all five -----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_sets_are_reproducible_splits_differ_and_kinds_are_known(name):
    from posbench.guidance import KINDS

    task = tasks.get(name)
    assert task.kind in KINDS and name in tasks.names()
    length = task.eval_lengths()[1]
    test, again, validation = (next(task.eval_batches(length, split)) for split in ("test", "test", "validation"))
    assert test.inputs.equal(again.inputs) and test.targets.equal(again.targets)
    rows = {tuple(row.tolist()) for row in test.inputs}
    assert not rows & {tuple(row.tolist()) for row in validation.inputs}  # no sequence in both splits
    train = task.train_batch(np.random.default_rng(0), 8)
    assert train.inputs.equal(task.train_batch(np.random.default_rng(0), 8).inputs)
    assert int(train.inputs.max()) < task.vocab_size and task.model_options()["vocab_size"] == task.vocab_size


@pytest.mark.parametrize("name", NAMES)
def test_chance_is_the_majority_answers_share(name):
    task = tasks.get(name, eval_examples=64)
    length = task.train_length
    scored = np.concatenate([b.targets[b.targets != IGNORE].numpy() for b in task.eval_batches(length)])
    majority = np.bincount(scored).max() / len(scored)
    assert task.chance(length) == {"token_accuracy": pytest.approx(majority)}


def test_chance_levels_by_the_numbers():
    """Majority answers at the training length on the test set: the task's alphabet bounds them."""
    bounds = {"selective_copy": (1 / 16, 0.1), "flip_flop": (0.5, 0.6), "multikey_niah": (0.1, 0.13),
              "variable_tracking": (1 / 16, 0.1), "counting": (1 / 11, 0.4)}
    for name, (low, high) in bounds.items():
        task = tasks.get(name)
        assert low <= task.chance(task.train_length)["token_accuracy"] <= high, name


@pytest.mark.parametrize(("name", "options", "key"), [
    ("counting", {"n_vars": 0}, "n_vars"),
    ("counting", {"n_vars": 27}, "n_vars"),
    ("selective_copy", {"density": 0.0}, "density"),
    ("flip_flop", {"p_ignore": 1.0}, "p_ignore"),
    ("multikey_niah", {"n_symbols": 4}, "n_symbols"),
    ("variable_tracking", {"max_hops": 8}, "n_names"),
    ("variable_tracking", {"min_length": 20}, "min_length"),
])
def test_bad_options_are_refused_in_one_line_naming_the_key(name, options, key):
    with pytest.raises(ValueError) as error:
        tasks.get(name, **options)
    assert key in str(error.value) and "\n" not in str(error.value)


@pytest.mark.parametrize("name", NAMES)
def test_each_task_trains_and_is_scored_item_by_item_at_every_length(name):
    task = tasks.get(name)
    config = TrainConfig(task=name, encoding="rope", steps=4, batch_size=8, log_every=2,
                         task_options={"eval_examples": 8, "eval_batch_size": 8})
    record = train(config, log=open("/dev/null", "w"))
    assert record["status"] == "ok" and all(np.isfinite(p["loss"]) for p in record["loss_curve"])
    assert [e["length"] for e in record["eval"]] == task.eval_lengths()
    assert [e["positions"] for e in record["eval"]] == [task.sequence_length(n) for n in task.eval_lengths()]
    items = record["items"].columns
    assert len(items["item"]) == 8 * len(task.eval_lengths()) and (items["scored"] > 0).all()
    assert all(0 <= e["chance"]["token_accuracy"] <= 1 for e in record["eval"])
