"""``scan``: translate a navigation command into its action sequence (Lake & Baroni 2018, SCAN).

"jump twice after walk left" -> ``I_TURN_LEFT I_WALK I_JUMP I_JUMP``. The commands and their meanings
are generated here from the paper's grammar and interpretation function (:func:`interpret`), not
downloaded: every one of its 20,910 commands (:func:`commands`), at most 9 words and 48 actions.

Decoder-only, as the length-generalisation literature runs SCAN on a language model: the command's
words, ``SEP``, then the actions and ``EOS``; next-token loss and exact match on the output only
(actions and ``EOS``; the command is IGNORE). ``exact_match`` is teacher-forced: a command is right when
every action and the end are predicted right given the true prefix; ``greedy_exact_match`` is the
papers' free-running score, the model writing the actions itself after ``SEP`` (:mod:`posbench.free_running`).
Token ids, word-level: the 13 command words, the 6 actions, ``SEP``, ``EOS``, padding (22).

Splits (option ``split``), from one fixed permutation of all commands (seed :data:`SPLIT_SEED`):
``test_fraction`` of them are the test part, the next ``validation_fraction`` the validation part,
the rest the training part; the three are disjoint, whatever the lengths.

* ``simple``: train on the training part, test on the test part (the paper's random split is 80/20;
  here 75/5/20 with the validation part taken out of training).
* ``length``: train only on training-part commands of at most ``train_length`` actions (the paper's
  cut: 22), and test on every command of more actions outside the validation part (the paper's length
  split: 24 to 48 actions; no command has 23). The paper trains on all short commands; here 20 % of
  them are kept back to score the in-distribution set.

A task length is a number of actions, the output's size. The evaluation sets are fixed by the split,
not by ``eval_factors`` (which must stay ``(1.0,)``): at ``train_length`` the held-out commands of at
most that many actions, and, when ``train_length`` < 48, at 48 the longer ones (factor 48 / 22 ≈ 2.2
for the length split). With the default ``train_length`` of 48 the simple split has one set, its whole
test part. :meth:`Scan.sequence_length` is the positions of the longest command at a length (9 words,
``SEP``, the actions, ``EOS``, less the shift by one); each item's ``scored`` in a train record is its
number of actions + 1, which gives the results per output length.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from posbench.tasks.base import Batch, Task, check_split
from posbench.tasks.registry import register
from posbench.tasks.sequence import FREE_RUNNING_METRICS, pad_right, prompt_then_answer

PRIMITIVES = {"jump": "I_JUMP", "walk": "I_WALK", "run": "I_RUN", "look": "I_LOOK"}  # U
TURNS = {"left": "I_TURN_LEFT", "right": "I_TURN_RIGHT"}
REPEATS = {"twice": 2, "thrice": 3}
CONJUNCTIONS = ("and", "after")
WORDS = (*PRIMITIVES, "turn", *TURNS, "opposite", "around", *REPEATS, *CONJUNCTIONS)  # 13 command words
ACTIONS = (*PRIMITIVES.values(), *TURNS.values())  # 6 actions
MAX_WORDS, MAX_ACTIONS = 9, 48  # "jump around left thrice and walk around right thrice": 9 words, 48 actions
SPLIT_SEED = 20240603  # the permutation every split cuts
SCAN_SPLITS = ("simple", "length")  # the option `split`


def interpret(command: str) -> list[str]:
    """The action sequence of ``command`` by the paper's interpretation function:
    ``x1 and x2`` is ``x1`` then ``x2``; ``x1 after x2`` is ``x2`` then ``x1``."""
    words = command.split()
    for conjunction in CONJUNCTIONS:
        if conjunction in words:
            cut = words.index(conjunction)
            first, second = _phrase(words[:cut], command), _phrase(words[cut + 1:], command)
            return first + second if conjunction == "and" else second + first
    return _phrase(words, command)


def _phrase(words: list[str], command: str) -> list[str]:
    """S -> V twice | V thrice | V."""
    if words and words[-1] in REPEATS:
        return _verb(words[:-1], command) * REPEATS[words[-1]]
    return _verb(words, command)


def _verb(words: list[str], command: str) -> list[str]:
    """V -> D opposite D | D around D | D | U, with D -> U left | U right | turn left | turn right:
    ``u opposite d`` turns twice then does ``u``; ``u around d`` turns then does ``u``, four times."""
    known = (*PRIMITIVES, "turn")
    shape_ok = (len(words) == 1 and words[0] in PRIMITIVES) or (
        len(words) in (2, 3) and words[0] in known and words[-1] in TURNS
        and (len(words) == 2 or words[1] in ("opposite", "around")))
    if not shape_ok:
        raise ValueError(f"not a SCAN command: {command!r}")
    action = [PRIMITIVES[words[0]]] if words[0] in PRIMITIVES else []  # "turn" does nothing but turn
    if len(words) == 1:
        return action
    turn = TURNS[words[-1]]
    if len(words) == 2:
        return [turn, *action]
    return [turn, turn, *action] if words[1] == "opposite" else [turn, *action] * 4


def commands() -> list[str]:
    """Every command of the grammar, in a fixed order: 34 verb phrases, each alone, twice or thrice
    (102 phrases), then the phrases alone and every ordered pair joined by ``and`` or ``after``."""
    verbs = list(PRIMITIVES)
    for verb in (*PRIMITIVES, "turn"):
        for direction in TURNS:
            verbs += [f"{verb} {direction}", f"{verb} opposite {direction}", f"{verb} around {direction}"]
    phrases = [f"{verb}{repeat}" for verb in verbs for repeat in ("", " twice", " thrice")]
    return phrases + [f"{a} {c} {b}" for c in CONJUNCTIONS for a in phrases for b in phrases]


@functools.cache
def dataset() -> tuple[list[np.ndarray], list[np.ndarray], np.ndarray]:
    """Every command as word ids, its actions as action ids, and ``(N,)`` its number of actions."""
    word_id = {w: i for i, w in enumerate(WORDS)}
    action_id = {a: len(WORDS) + i for i, a in enumerate(ACTIONS)}
    prompts, answers = [], []
    for command in commands():
        prompts.append(np.array([word_id[w] for w in command.split()], dtype=np.int64))
        answers.append(np.array([action_id[a] for a in interpret(command)], dtype=np.int64))
    return prompts, answers, np.array([len(a) for a in answers])


@functools.cache
def parts(test_fraction: float, validation_fraction: float) -> dict[str, np.ndarray]:
    """Command indices of the ``train``, ``validation`` and ``test`` parts: one fixed permutation, cut."""
    count = len(dataset()[2])
    order = np.random.default_rng(SPLIT_SEED).permutation(count)
    n_test, n_validation = round(test_fraction * count), round(validation_fraction * count)
    return {"test": order[:n_test], "validation": order[n_test:n_test + n_validation],
            "train": order[n_test + n_validation:]}


@register("scan")
@dataclass(frozen=True)
class Scan(Task):
    """Options: ``split`` (``simple`` or ``length``), the parts' fractions; see the module."""

    kind = "nlp"
    metrics: ClassVar[tuple[str, ...]] = FREE_RUNNING_METRICS

    split: str = "simple"
    train_length: int = MAX_ACTIONS
    steps: int = 800
    batch_size: int = 32
    lr: float = 3e-3
    eval_factors: tuple[float, ...] = (1.0,)
    test_fraction: float = 0.2
    validation_fraction: float = 0.05
    eval_batch_size: int = 256

    def __post_init__(self):
        if self.split not in SCAN_SPLITS:
            raise ValueError(f"scan: unknown split {self.split!r}; allowed: {', '.join(SCAN_SPLITS)}")
        if tuple(self.eval_factors) != (1.0,):
            raise ValueError("scan: eval_factors must be (1.0,); the longer evaluation set is fixed by the split")
        if not 0 < self.train_length <= MAX_ACTIONS:
            raise ValueError(f"scan: train_length is a number of actions, 1 to {MAX_ACTIONS}; got {self.train_length}")
        if self.split == "length" and self.train_length == MAX_ACTIONS:
            raise ValueError("scan: split 'length' tests commands longer than train_length; pass train_length "
                             f"below {MAX_ACTIONS} (the paper's: 22)")

    @property
    def sep_id(self) -> int:
        return len(WORDS) + len(ACTIONS)

    @property
    def eos_id(self) -> int:
        return self.sep_id + 1

    @property
    def pad_id(self) -> int:
        return self.sep_id + 2

    def model_options(self) -> dict:
        return {"vocab_size": self.pad_id + 1, "causal": True}

    def sequence_length(self, length: int) -> int:
        return MAX_WORDS + length + 1

    def eval_lengths(self) -> list[int]:
        return [self.train_length] + ([MAX_ACTIONS] if self.train_length < MAX_ACTIONS else [])

    def commands_of(self, part: str, length: int | None = None) -> np.ndarray:
        """Indices into :func:`commands` of ``part`` (``train`` or a split of :data:`SPLITS`) at
        ``length`` (default: the training length): at ``train_length``, the part's commands of at most
        that many actions; at 48 (above it), the longer ones, for the length split every longer
        command outside the validation part."""
        length = self.train_length if length is None else length
        if length not in self.eval_lengths():
            raise ValueError(f"scan: no set at length {length}; allowed: {', '.join(map(str, self.eval_lengths()))}")
        actions = dataset()[2]
        cut = parts(self.test_fraction, self.validation_fraction)
        if length == self.train_length:
            return cut[part][actions[cut[part]] <= length]
        if self.split == "length" and part == "test":
            return np.setdiff1d(np.flatnonzero(actions > self.train_length), cut["validation"])
        return cut[part][actions[cut[part]] > self.train_length]

    def example(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        prompts, answers, _ = dataset()
        return prompt_then_answer(np.append(prompts[index], self.sep_id), np.append(answers[index], self.eos_id))

    def train_batch(self, rng: np.random.Generator, batch_size: int) -> Batch:
        pool = self.commands_of("train")
        return pad_right([self.example(i) for i in rng.choice(pool, size=batch_size)], self.pad_id)

    def eval_batches(self, length: int, split: str = "test") -> Iterator[Batch]:
        check_split(split)
        chosen = self.commands_of(split, length)
        for start in range(0, len(chosen), self.eval_batch_size):
            batch = [self.example(i) for i in chosen[start:start + self.eval_batch_size]]
            yield pad_right(batch, self.pad_id, self.sequence_length(length))


@register("scan_length")
@dataclass(frozen=True)
class ScanLength(Scan):
    """``scan_length``: SCAN's length split as a task of its own, so that a preset names it as it names any
    task (the train CLI takes no task options): train on commands of at most 22 actions (the paper's cut),
    test on every longer one, 24 to 48 actions (Lake & Baroni's experiment 2; the split Kazemnejad et al.
    2023 rank encodings on). Its evaluation sets: the held-out short commands at 22, the long ones at 48."""

    split: str = "length"
    train_length: int = 22

    def __post_init__(self):
        if self.split != "length":
            raise ValueError(f"scan_length: split is the task's own, got {self.split!r}; allowed: length (the "
                             f"simple split is the task scan)")
        super().__post_init__()
