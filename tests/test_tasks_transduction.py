"""SCAN and bAbI: the grammar means what the paper says, the splits are what the docstrings say, the
answers are what an independent reading of each story gives, and both train end to end."""

from collections import Counter

import numpy as np
import pytest
import torch

from posbench import tasks
from posbench.tasks import IGNORE
from posbench.tasks import babi as babi_module
from posbench.tasks import scan as scan_module
from posbench.tasks.scan import commands, interpret, parts
from posbench.train import TrainConfig, train

L, R = "I_TURN_LEFT", "I_TURN_RIGHT"


# ----- SCAN ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("command, actions", [
    # Lake & Baroni (2018), figure 1
    ("jump", ["I_JUMP"]),
    ("jump left", [L, "I_JUMP"]),
    ("jump around right", [R, "I_JUMP"] * 4),
    ("turn left twice", [L, L]),
    ("jump thrice", ["I_JUMP"] * 3),
    ("jump opposite left and walk thrice", [L, L, "I_JUMP", "I_WALK", "I_WALK", "I_WALK"]),
    ("jump opposite left after walk around left", [L, "I_WALK"] * 4 + [L, L, "I_JUMP"]),
    # from the interpretation function
    ("run around right", [R, "I_RUN"] * 4),
    ("walk opposite left", [L, L, "I_WALK"]),
    ("look twice after jump", ["I_JUMP", "I_LOOK", "I_LOOK"]),
    ("jump twice after walk left", [L, "I_WALK", "I_JUMP", "I_JUMP"]),
    ("turn around left thrice", [L] * 12),
    ("turn opposite right", [R, R]),
    ("walk opposite right and look thrice", [R, R, "I_WALK", "I_LOOK", "I_LOOK", "I_LOOK"]),
    ("look around left thrice and run around right thrice", [L, "I_LOOK"] * 12 + [R, "I_RUN"] * 12),
])
def test_scan_interpretation_of_reference_commands(command, actions):
    assert interpret(command) == actions


@pytest.mark.parametrize("command", ["turn", "jump jump", "walk twice twice", "left", "jump around", "run and"])
def test_scan_refuses_what_the_grammar_does_not_make(command):
    with pytest.raises(ValueError, match=f"not a SCAN command: '{command}'"):
        interpret(command)


def test_scan_has_its_20910_commands_with_the_papers_length_boundary():
    every = commands()
    assert len(every) == len(set(every)) == 20_910  # 102 phrases + 2 · 102²
    actions = scan_module.dataset()[2]
    assert max(len(c.split()) for c in every) == scan_module.MAX_WORDS == 9
    assert actions.max() == scan_module.MAX_ACTIONS == 48 and actions.min() == 1
    assert (actions <= 22).sum() == 16_990 and (actions >= 24).sum() == 3_920 and (actions == 23).sum() == 0


def test_scan_parts_are_disjoint_and_cover_every_command():
    cut = parts(0.2, 0.05)
    assert [len(cut[p]) for p in ("train", "validation", "test")] == [15_682, 1_046, 4_182]
    assert sorted(np.concatenate(list(cut.values()))) == list(range(20_910))


def test_scan_simple_split_is_one_set_of_held_out_commands():
    task = tasks.get("scan")
    assert task.eval_lengths() == [48] and task.sequence_length(48) == 58
    train, validation, test = (set(task.commands_of(p).tolist()) for p in ("train", "validation", "test"))
    assert (len(train), len(validation), len(test)) == (15_682, 1_046, 4_182)
    assert not train & test and not train & validation and not validation & test


def test_scan_length_split_trains_up_to_22_actions_and_tests_24_and_more():
    task = tasks.get("scan", split="length", train_length=22)
    actions = scan_module.dataset()[2]
    assert task.eval_lengths() == [22, 48] and [task.sequence_length(n) for n in (22, 48)] == [32, 58]
    train, short, long = task.commands_of("train"), task.commands_of("test", 22), task.commands_of("test", 48)
    validation = np.concatenate([task.commands_of("validation", n) for n in (22, 48)])
    assert actions[train].max() == 22 and actions[short].max() == 22 and actions[long].min() == 24
    assert (len(train), len(short), len(long)) == (12_739, 3_425, 3_700)
    assert len(long) + (actions[parts(0.2, 0.05)["validation"]] > 22).sum() == 3_920  # every long command
    sets = [set(s.tolist()) for s in (train, short, long, validation)]
    assert sum(len(s) for s in sets) == len(set.union(*sets))  # pairwise disjoint


def test_scan_length_refuses_another_split_in_one_line():
    with pytest.raises(ValueError, match=r"^scan_length: split is the task's own, got 'simple'; allowed: length "):
        tasks.get("scan_length", split="simple")


def test_scan_length_is_the_length_split_by_name():
    named, optioned = tasks.get("scan_length"), tasks.get("scan", split="length", train_length=22)
    assert (named.split, named.train_length, named.eval_lengths()) == ("length", 22, [22, 48])
    for length in (22, 48):
        assert np.array_equal(named.commands_of("test", length), optioned.commands_of("test", length))
    assert np.array_equal(named.commands_of("train"), optioned.commands_of("train"))


@pytest.mark.parametrize("options, message", [
    ({"split": "random"}, "unknown split 'random'; allowed: simple, length"),
    ({"split": "length"}, "pass train_length below 48"),
    ({"eval_factors": (1.0, 2.0)}, "eval_factors must be"),
    ({"train_length": 49}, "1 to 48"),
])
def test_scan_refuses_options_it_cannot_honour(options, message):
    with pytest.raises(ValueError, match=message):
        tasks.get("scan", **options)


@pytest.mark.parametrize("split, length", [("simple", 48), ("length", 22), ("length", 48)])
def test_scan_batches_score_exactly_the_actions_and_the_end(split, length):
    task = tasks.get("scan", split=split, train_length=22 if split == "length" else 48)
    words = {i: w for i, w in enumerate(scan_module.WORDS)}
    action = {len(scan_module.WORDS) + i: a for i, a in enumerate(scan_module.ACTIONS)}
    batch = next(task.eval_batches(length))
    assert batch.inputs.shape == (256, task.sequence_length(length))
    for inputs, targets in zip(batch.inputs.tolist(), batch.targets.tolist()):
        sep = inputs.index(task.sep_id)
        command = " ".join(words[i] for i in inputs[:sep])
        assert all(t == IGNORE for t in targets[:sep])  # the command is never scored
        scored = [t for t in targets if t != IGNORE]
        assert targets[sep:sep + len(scored)] == scored  # the output follows the separator at once
        assert [action[t] for t in scored[:-1]] == interpret(command) and scored[-1] == task.eos_id
        assert inputs[sep + 1:sep + len(scored)] == scored[:-1]  # teacher forcing: the true prefix
        assert (len(scored) - 1 <= length) and (length == task.train_length or len(scored) - 1 > task.train_length)


def test_scan_evaluation_sets_are_whole_fixed_and_chance_is_the_commonest_output_token():
    task = tasks.get("scan", split="length", train_length=22)
    first, again = list(task.eval_batches(48)), list(task.eval_batches(48))
    assert all(torch.equal(a.inputs, b.inputs) and torch.equal(a.targets, b.targets) for a, b in zip(first, again))
    assert sum(len(b.inputs) for b in first) == 3_700
    _, answers, _ = scan_module.dataset()
    chosen = task.commands_of("test", 48)
    counts = Counter(t for i in chosen for t in answers[i].tolist())
    tokens = sum(len(answers[i]) + 1 for i in chosen)  # the actions and the end
    assert task.chance(48) == {"token_accuracy": pytest.approx(max(counts.values()) / tokens)}
    assert task.chance(48)["token_accuracy"] == pytest.approx(0.2540, abs=1e-4)


def test_scan_training_draws_only_training_commands():
    task = tasks.get("scan", split="length", train_length=22)
    batch = task.train_batch(np.random.default_rng(0), 64)
    assert ((batch.targets != IGNORE).sum(1) - 1).max() <= 22  # actions + end
    prompts = {tuple(scan_module.dataset()[0][i].tolist()) for i in task.commands_of("train")}
    for inputs in batch.inputs.tolist():
        assert tuple(inputs[:inputs.index(task.sep_id)]) in prompts


# ----- bAbI ---------------------------------------------------------------------------------------
def read_story(words: list[str]) -> tuple[str, int, int]:
    """An independent reading: follow the story sentence by sentence, answer its question; also the
    number of sentences and how many different rooms the asked person (or object) has been in."""
    room, holder, place, seen = {}, {}, {}, {}
    text = " ".join(words)
    story, question = text.split(" where is ")
    sentences = [s.split() for s in story.split(" .") if s.strip()]
    for sentence in sentences:
        subject = sentence[0]
        if sentence[1:3] in (["went", "to"], ["moved", "to"], ["travelled", "to"], ["journeyed", "to"]):
            room[subject] = sentence[-1]
            seen.setdefault(subject, set()).add(sentence[-1])
            for thing, who in holder.items():
                if who == subject:
                    seen.setdefault(thing, set()).add(sentence[-1])
        elif sentence[1] in ("got", "grabbed", "picked"):
            holder[sentence[-1]] = subject
            seen.setdefault(sentence[-1], set()).add(room[subject])
        elif sentence[1] in ("dropped", "discarded", "put"):
            place[sentence[-1]] = room[subject]
            del holder[sentence[-1]]
        else:
            raise AssertionError(f"unread sentence {sentence}")
    asked = question.split()[-2]
    answer = room[asked] if asked in room else room[holder[asked]] if asked in holder else place[asked]
    return answer, len(sentences), len(seen[asked])


def decode(task, inputs: list[int], targets: list[int]) -> tuple[list[str], str]:
    scored = [i for i, t in enumerate(targets) if t != IGNORE]
    assert len(scored) == 1  # the answer only
    words = [babi_module.WORDS[i] for i in inputs[: scored[0] + 1]]
    assert words[-1] == "?"  # the answer is predicted right after the question
    return words, babi_module.WORDS[targets[scored[0]]]


@pytest.mark.parametrize("facts", [1, 2])
@pytest.mark.parametrize("length", [2, 8, 16, 64])
def test_babi_answer_is_where_an_independent_reading_of_the_story_puts_the_asked(facts, length):
    task = tasks.get("babi", supporting_facts=facts)
    moved_before = 0
    for batch in task.eval_batches(length):
        assert batch.inputs.shape[1] == task.sequence_length(length) == 6 * length + 5
        for inputs, targets in zip(batch.inputs.tolist(), batch.targets.tolist()):
            words, answer = decode(task, inputs, targets)
            read, sentences, rooms = read_story(words)
            assert answer == read and sentences == length
            assert words[-2] in (babi_module.PEOPLE if facts == 1 else babi_module.OBJECTS)
            moved_before += rooms > 1
    if length >= 8:  # order matters: the asked one was often somewhere else before
        assert moved_before / task.eval_examples > (0.3 if facts == 1 else 0.15)


def test_babi_distractors_and_order_are_present():
    """At the training length, most stories name other people than the asked one, and asking for
    the first room instead of the last would be wrong on a large share of them."""
    rng = np.random.default_rng(1)
    first_wrong, others = 0, 0
    for _ in range(500):
        words, answer = babi_module.story(rng, 8, 1)
        person = words[-2]
        sentences = [words[i:i + 6] for i in range(0, 48, 6)]
        rooms = [s[-2] for s in sentences if s[0] == person]
        first_wrong += rooms[0] != answer
        others += any(s[0] != person for s in sentences)
    assert others == 500 and first_wrong > 150


@pytest.mark.parametrize("facts", [1, 2])
def test_babi_chance_is_the_majority_answer_and_sets_are_fixed(facts):
    task = tasks.get("babi", supporting_facts=facts)
    answers = [t for b in task.eval_batches(8) for t in b.targets[b.targets != IGNORE].tolist()]
    assert len(answers) == 512 and set(answers) <= {babi_module.WORDS.index(r) for r in babi_module.ROOMS}
    assert task.chance(8) == {"token_accuracy": max(Counter(answers).values()) / 512}
    assert 1 / 6 <= task.chance(8)["token_accuracy"] < 0.25  # six rooms, about equally often
    test, again, validation = (next(task.eval_batches(8, s)) for s in ("test", "test", "validation"))
    assert torch.equal(test.inputs, again.inputs) and not torch.equal(test.inputs, validation.inputs)
    assert task.eval_lengths() == [8, 10, 12, 16, 32, 64]


def test_babi_refuses_bad_options():
    with pytest.raises(ValueError, match="supporting_facts must be 1 or 2, got 3"):
        tasks.get("babi", supporting_facts=3)
    with pytest.raises(ValueError, match="2 <= min_length <= train_length"):
        tasks.get("babi", min_length=1)


# ----- both, end to end ---------------------------------------------------------------------------
@pytest.mark.parametrize("task, options, lengths, sequences", [
    ("scan", {}, [48], [4_182]),
    ("scan", {"split": "length", "train_length": 22}, [22, 48], [3_425, 3_700]),
    ("babi", {"supporting_facts": 2, "train_length": 4, "eval_examples": 16}, [4, 5, 6, 8, 16, 32], [16] * 6),
])
def test_a_short_training_runs_end_to_end(task, options, lengths, sequences):
    config = TrainConfig(task=task, encoding="sinusoidal", steps=6, batch_size=8, log_every=3, task_options=options)
    record = train(config, log=open("/dev/null", "w"))
    assert record["status"] == "ok" and record["loss_curve"][-1]["loss"] < record["loss_curve"][0]["loss"]
    assert [e["length"] for e in record["eval"]] == lengths and [e["sequences"] for e in record["eval"]] == sequences
    items = record["items"].columns
    if task == "scan":  # each item's scored targets are its actions and the end: results per output length
        actions = items["scored"] - 1
        assert actions[items["length"] == lengths[-1]].min() >= (24 if len(lengths) == 2 else 1)
        assert actions.max() <= 48
    else:
        assert (items["scored"] == 1).all()
    for e in record["eval"]:
        assert e["metrics"]["exact_match"] <= e["metrics"]["token_accuracy"] or task == "babi"
        if task == "babi":
            assert e["metrics"]["exact_match"] == e["metrics"]["token_accuracy"]
