"""``babi``: answer a question about a story, as in bAbI tasks 1 and 2 (Weston et al. 2015), generated.

One supporting fact (``supporting_facts=1``): people move between rooms; "where is P ?" is answered by
P's *last* move::

    mary went to the kitchen . john moved to the garden . mary travelled to the office . where is mary ? office

Two supporting facts (``supporting_facts=2``): people also pick up and drop objects; "where is the O ?"
needs the sentence that gave O to its holder and the holder's last move after it (or the room O was
dropped in)::

    john picked up the football . john went to the hallway . where is the football ? hallway

Four people, six rooms, three objects, several verbs for each event (:data:`WORDS`). The other
people's sentences are the distractors; the asked person (or object) has moved at least once, and
earlier moves are wrong answers, so the answer depends on the order of the sentences.

Word-level tokens: a story, the question (ending ``?``), then the answer word, the only scored target
(its exact match and token accuracy are one number; token accuracy's chance level is the share of the
set's most frequent answer). A task length is the number of sentences in the story: training draws
``min_length … train_length`` sentences, evaluation longer stories at the usual factors. Test and
validation stories come from generators of their own (:func:`posbench.tasks.base.eval_rng`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from posbench.tasks.base import Batch, Task, eval_rng
from posbench.tasks.registry import register
from posbench.tasks.sequence import pad_right, prompt_then_answer

PEOPLE = ("mary", "john", "sandra", "daniel")
ROOMS = ("bathroom", "hallway", "garden", "office", "bedroom", "kitchen")
OBJECTS = ("football", "apple", "milk")
MOVES = ("went", "moved", "travelled", "journeyed")  # P <move> to the R .
TAKES = ("got", "grabbed", "picked up")  # P <take> the O .
DROPS = ("dropped", "discarded", "put down")  # P <drop> the O .
WORDS = (*PEOPLE, *ROOMS, *OBJECTS, "went", "moved", "travelled", "journeyed", "got", "grabbed", "picked", "up",
         "dropped", "discarded", "put", "down", "to", "the", ".", "where", "is", "?")
SENTENCE_WORDS, QUESTION_WORDS = 6, 5  # the longest sentence ("mary picked up the apple ."), question


def story(rng: np.random.Generator, sentences: int, supporting_facts: int) -> tuple[list[str], str]:
    """``sentences`` sentences and a question as words, and the answer (a room)."""
    while True:  # two facts: redrawn (rarely) until some object has a room to ask about
        words, room, holder, place = [], {}, {}, {}
        for _ in range(sentences):
            takes = [(p, o) for p in room for o in OBJECTS if o not in holder and place.get(o, room[p]) == room[p]]
            drops = [(p, o) for o, p in holder.items()]
            draw = rng.random() if supporting_facts == 2 else 1.0
            if draw < 0.3 and takes:
                person, thing = takes[rng.integers(len(takes))]
                holder[thing] = person
                words += [person, *TAKES[rng.integers(len(TAKES))].split(), "the", thing, "."]
            elif draw < 0.45 and drops:
                person, thing = drops[rng.integers(len(drops))]
                place[thing] = room[person]
                del holder[thing]
                words += [person, *DROPS[rng.integers(len(DROPS))].split(), "the", thing, "."]
            else:
                person = PEOPLE[rng.integers(len(PEOPLE))]
                rooms = [r for r in ROOMS if r != room.get(person)]
                room[person] = rooms[rng.integers(len(rooms))]
                words += [person, MOVES[rng.integers(len(MOVES))], "to", "the", room[person], "."]
        if supporting_facts == 1:
            people = sorted(room, key=PEOPLE.index)
            person = people[rng.integers(len(people))]
            return words + ["where", "is", person, "?"], room[person]
        located = {o: room[holder[o]] if o in holder else place[o] for o in OBJECTS if o in holder or o in place}
        if located:
            things = sorted(located, key=OBJECTS.index)
            thing = things[rng.integers(len(things))]
            return words + ["where", "is", "the", thing, "?"], located[thing]


@register("babi")
@dataclass(frozen=True)
class Babi(Task):
    """Token ids: :data:`WORDS` in order, then padding."""

    kind = "nlp"
    metrics: ClassVar[tuple[str, ...]] = ("exact_match", "token_accuracy")

    supporting_facts: int = 1
    train_length: int = 8
    min_length: int = 2
    steps: int = 800
    batch_size: int = 32
    lr: float = 3e-3
    eval_examples: int = 512
    eval_batch_size: int = 128

    def __post_init__(self):
        if self.supporting_facts not in (1, 2):
            raise ValueError(f"babi: supporting_facts must be 1 or 2, got {self.supporting_facts}")
        if not 2 <= self.min_length <= self.train_length:
            raise ValueError(f"babi: needs 2 <= min_length <= train_length, got {self.min_length}, {self.train_length}")

    @property
    def pad_id(self) -> int:
        return len(WORDS)

    def model_options(self) -> dict:
        return {"vocab_size": len(WORDS) + 1, "causal": True}

    def sequence_length(self, length: int) -> int:
        return SENTENCE_WORDS * length + QUESTION_WORDS  # the answer's own position is never an input

    def example(self, rng: np.random.Generator, length: int) -> tuple[np.ndarray, np.ndarray]:
        words, answer = story(rng, length, self.supporting_facts)
        ids = {w: i for i, w in enumerate(WORDS)}
        return prompt_then_answer(np.array([ids[w] for w in words]), np.array([ids[answer]]))

    def train_batch(self, rng: np.random.Generator, batch_size: int) -> Batch:
        lengths = rng.integers(self.min_length, self.train_length + 1, size=batch_size)
        return pad_right([self.example(rng, int(n)) for n in lengths], self.pad_id)

    def eval_batches(self, length: int, split: str = "test") -> Iterator[Batch]:
        rng = eval_rng(length, split)
        for start in range(0, self.eval_examples, self.eval_batch_size):
            count = min(self.eval_batch_size, self.eval_examples - start)
            stories = [self.example(rng, length) for _ in range(count)]
            yield pad_right(stories, self.pad_id, self.sequence_length(length))
