"""chain: read a word and a number from two files, then build a folder and a note from them.

The learnable multi-turn family of the training recipe (``configs/tiny-cpu.yaml``, ``docs/benchmarks-training.md``):
small enough that a tiny model warm-started on oracle episodes resolves some held-out instances, and long enough
that every step depends on what an earlier one printed. The oracle types four commands, one per turn::

    cat name.txt                 # prints the word, e.g. "gold"
    mkdir gold
    cat count.txt                # prints the number, e.g. "7"
    echo 7 > gold/notes.txt

and then submits. Four checks, one per sub-goal: the folder exists, ``notes.txt`` exists in it, it holds the
number, and nothing else in ``/app`` changed (so doing nothing scores 0 and a half-done episode scores 1–3).

A sloppy demonstrator (``solution/demos/``, which an SFT warm-start with ``sft.demos: true`` imitates beside the
oracle) makes two slips, each on a word every instance shares and each costing one check:

* ``rereads-name``: it reads ``name.txt`` again where it should read ``count.txt``, and writes the word into the
  note (3 of 4: the note does not hold the number);
* ``spare-folder``: it types ``mkdir tmp WORD`` (3 of 4: something else in ``/app`` changed);
* ``both-slips``: both (2 of 4).

Imitating the oracle and the three demos alike, a policy makes each slip half of the time, and only the verifier's
checks say which way is right: that is what RL has to learn (``docs/benchmarks-training.md``).

Instances are the pairs of 6 words and the numbers 1–9 (54 in all). The pairs are split for good: a pair whose
index is a multiple of 5 is a test pair (11 pairs), the others are train pairs (43), so a held-out instance is a
combination of word and number no train instance has. The k-th seed of a split (:func:`t1env.families.split_seed`)
is that split's ``k mod len(pairs)``-th pair, so ``chain@train:43`` (the first 43 train seeds) is every train pair
once and ``chain@test:11`` every test pair once.

Example:
    >>> from t1env.families.chain import Chain, pair_of_seed
    >>> pair_of_seed(0), pair_of_seed(5), pair_of_seed(1), pair_of_seed(2)
    (('red', 1), ('red', 6), ('red', 2), ('red', 3))
    >>> inst = Chain().build(Chain().rng(1), 1)
    >>> inst.solve.splitlines()
    ['cat name.txt', 'mkdir red', 'cat count.txt', 'echo 2 > red/notes.txt']
    >>> inst.demos["both-slips"].splitlines()
    ['cat name.txt', 'mkdir tmp red', 'cat name.txt', 'echo red > red/notes.txt']
"""

from __future__ import annotations

import random

from t1env.families.base import TEST_EVERY, Family, Instance, split_of_seed

WORDS = ("red", "blue", "green", "gold", "pink", "gray")
NUMBERS = tuple(range(1, 10))
PAIRS = [(w, n) for w in WORDS for n in NUMBERS]
TEST_PAIRS = [p for i, p in enumerate(PAIRS) if i % TEST_EVERY == 0]
TRAIN_PAIRS = [p for i, p in enumerate(PAIRS) if i % TEST_EVERY != 0]

INSTRUCTION = (
    "/app/name.txt holds a word and /app/count.txt a number. Create a folder named after the word, and in "
    "it a file notes.txt holding the number. Change nothing else."
)

TESTS = """from pathlib import Path

APP = Path("/app")


def test_folder_exists():
    assert (APP / WORD).is_dir(), f"no folder /app/{WORD}"


def test_notes_exists():
    assert (APP / WORD / "notes.txt").is_file(), f"no file /app/{WORD}/notes.txt"


def test_notes_holds_the_number():
    assert (APP / WORD / "notes.txt").read_text().strip() == NUMBER


def test_nothing_else_changed():
    assert sorted(p.name for p in APP.iterdir()) == sorted(["count.txt", "name.txt", WORD])
    assert sorted(p.name for p in (APP / WORD).iterdir()) == ["notes.txt"]
    assert (APP / "name.txt").read_text() == WORD + "\\n" and (APP / "count.txt").read_text() == NUMBER + "\\n"
"""


def pair_of_seed(seed: int) -> tuple[str, int]:
    """The (word, number) of ``chain@seed``: the seed's index within its split picks that split's pair."""
    if split_of_seed(seed) == "test":
        return TEST_PAIRS[(seed // TEST_EVERY) % len(TEST_PAIRS)]
    k = (TEST_EVERY - 1) * (seed // TEST_EVERY) + seed % TEST_EVERY - 1
    return TRAIN_PAIRS[k % len(TRAIN_PAIRS)]


def script(word: str, number: int, spare_folder: bool, rereads_name: bool) -> str:
    """The four commands of an episode: the oracle's, or the sloppy demonstrator's with its slips."""
    value, read = (word, "name.txt") if rereads_name else (number, "count.txt")
    return f"cat name.txt\nmkdir {'tmp ' if spare_folder else ''}{word}\ncat {read}\necho {value} > {word}/notes.txt\n"


class Chain(Family):
    name = "chain"
    category = "files"
    difficulty = "easy"
    description = "Read a word and a number from two files, then make a folder named by the word holding the number."

    def build(self, rng: random.Random, seed: int) -> Instance:
        word, number = pair_of_seed(seed)
        return Instance(
            title=f"Make the folder {word} with a note of {number}",
            instruction=INSTRUCTION,
            solve=script(word, number, spare_folder=False, rereads_name=False),
            demos={
                "rereads-name": script(word, number, spare_folder=False, rereads_name=True),
                "spare-folder": script(word, number, spare_folder=True, rereads_name=False),
                "both-slips": script(word, number, spare_folder=True, rereads_name=True),
            },
            tests={"test_chain.py": f"WORD = {word!r}\nNUMBER = {str(number)!r}\n" + TESTS},
            files={"name.txt": f"{word}\n", "count.txt": f"{number}\n"},
            tags=("files", "multi-turn", "learnable"),
            max_turns=8,
            command_timeout=10,
            agent_timeout=120,
            verifier_timeout=60,
            preamble="",
        )
