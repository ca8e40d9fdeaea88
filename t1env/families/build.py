"""build: a small C program built with make, with one or two faults injected by seed.

Faults: a missing semicolon, a misspelled variable, a header prototype that disagrees with the
definition, a Makefile whose recipes are indented with spaces, an object missing from the link
line, a missing include guard, and a logic error (builds, wrong output). The instruction specifies
what the program must print; the tests rebuild from clean and run it on fresh inputs.

The splits draw from disjoint pools (``docs/families.md``): every test instance has at least one
held-out fault kind (a source file missing its header include, a ``clean`` target that leaves the
binary, numbers parsed in the wrong base), and test instances have their own program names, constants,
variable names and instruction wording.
"""

from __future__ import annotations

import random

from t1env.families.base import Family, Instance, split_of_seed

FAULTS = ("semicolon", "typo", "prototype", "spaces", "link", "guard", "logic")
HELD_OUT_FAULTS = ("include", "clean", "base")  # only in the test split
POOLS = {  # per split: binary names, multipliers, offsets, moduli, the accumulator's names
    "train": (
        ["calc", "mixer", "tally", "hashsum", "scorer"],
        (3, 97),
        (1, 999),
        [997, 1009, 7919, 10007, 65521, 99991],
        ["total", "sum", "acc"],
    ),
    "test": (
        ["blend", "fold", "crunch", "digest", "warp"],
        (101, 199),
        (1000, 1999),
        [1013, 4099, 8191, 30011, 49999],
        ["grand", "running", "agg"],
    ),
}

TESTS = r"""
import random
import shutil
import subprocess
from pathlib import Path

import pytest

APP = Path("/app")


def mix(x):
    return (x * A + B) % M


def expected(xs):
    return "".join(f"{x} -> {mix(x)}\n" for x in xs) + f"total {sum(mix(x) for x in xs)}\n"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    work = tmp_path_factory.mktemp("build") / "app"
    shutil.copytree(APP, work, symlinks=True)
    subprocess.run(["make", "clean"], cwd=work, capture_output=True, timeout=60)
    for p in work.rglob("*.o"):
        p.unlink()
    (work / BINARY).unlink(missing_ok=True)
    res = subprocess.run(["make"], cwd=work, capture_output=True, text=True, timeout=120)
    return work, res


def run(work, xs):
    res = subprocess.run([str(work / BINARY), *map(str, xs)], capture_output=True, text=True, timeout=30)
    assert res.returncode == 0, res.stderr
    return res.stdout


def test_make_builds_from_clean(built):
    work, res = built
    assert res.returncode == 0, (res.stdout + res.stderr)[-2000:]
    assert (work / BINARY).is_file()


def test_output_on_sample_input(built):
    work, _ = built
    assert run(work, SAMPLE) == expected(SAMPLE)


def test_output_on_fresh_inputs_including_negatives(built):
    work, _ = built
    r = random.Random(SEED)
    xs = [r.randint(-10**6, 10**6) for _ in range(25)] + [0, -1, 1]
    assert run(work, xs) == expected(xs)


def test_no_arguments_prints_total_zero(built):
    work, _ = built
    assert run(work, []) == "total 0\n"


def test_make_clean_removes_build_outputs(built):
    work, _ = built
    res = subprocess.run(["make", "clean"], cwd=work, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert not (work / BINARY).exists() and not list(work.rglob("*.o"))
"""


def _sources(binary: str, a: int, b: int, m: int, faults: set[str], typo_var: str) -> dict[str, str]:
    semi = "" if "semicolon" in faults else ";"
    total_use = typo_var[:-1] + typo_var[-1] * 2 if "typo" in faults else typo_var
    reduce = "(x * A + B) % M" if "logic" in faults else "((x * A + B) % M + M) % M"
    proto = "long mix(int x);" if "prototype" in faults else "long mix(long x);"
    guard_open = "" if "guard" in faults else "#ifndef ROW_H\n#define ROW_H\n"
    guard_close = "" if "guard" in faults else "#endif\n"
    mixh = f"#ifndef MIX_H\n#define MIX_H\n\n{proto}\n\n#endif\n"
    rowh = (
        f"{guard_open}\nstruct row {{\n    long x;\n    long value;\n}};\n\n"
        f"void print_row(const struct row *r);\nvoid print_total(long total);\n\n{guard_close}"
    )
    mixc = (
        f'#include "mix.h"\n\n#define A {a}L\n#define B {b}L\n#define M {m}L\n\n'
        f"long mix(long x)\n{{\n    long r = {reduce}{semi}\n    return r;\n}}\n"
    )
    rowc = (
        "#include <stdio.h>\n" + ("" if "include" in faults else '#include "row.h"\n') + "\n"
        'void print_row(const struct row *r)\n{\n    printf("%ld -> %ld\\n", r->x, r->value);\n}\n\n'
        'void print_total(long total)\n{\n    printf("total %ld\\n", total);\n}\n'
    )
    mainc = (
        '#include <stdlib.h>\n#include "mix.h"\n#include "row.h"\n'
        + ('#include "row.h"\n' if "guard" in faults else "")
        + f"\nint main(int argc, char **argv)\n{{\n    long {typo_var} = 0;\n"
        "    for (int i = 1; i < argc; i++) {\n"
        f"        struct row r;\n        r.x = strtol(argv[i], NULL, {16 if 'base' in faults else 10});\n"
        "        r.value = mix(r.x);\n"
        f"        {total_use} += r.value;\n        print_row(&r);\n    }}\n    print_total({typo_var});\n    return 0;\n}}\n"
    )
    objs = "main.o mix.o" if "link" in faults else "main.o mix.o row.o"
    ind = "    " if "spaces" in faults else "\t"
    makefile = (
        f"CC = gcc\nCFLAGS = -O2 -Wall\nOBJS = {objs}\n\n{binary}: $(OBJS)\n{ind}$(CC) $(CFLAGS) -o $@ $(OBJS)\n\n"
        f"%.o: %.c *.h\n{ind}$(CC) $(CFLAGS) -c $<\n\n"
        f"clean:\n{ind}rm -f {'' if 'clean' in faults else binary + ' '}*.o\n\n"
        ".PHONY: clean\n"
    )
    return {"main.c": mainc, "mix.c": mixc, "mix.h": mixh, "row.c": rowc, "row.h": rowh, "Makefile": makefile}


class BrokenBuild(Family):
    name = "build"
    category = "build-c"
    difficulty = "medium"
    description = "Fix a C + make project with 1-2 injected faults (syntax, prototype, link, Makefile, logic)."

    def build(self, rng: random.Random, seed: int) -> Instance:
        split = split_of_seed(seed)
        binaries, a_range, b_range, moduli, accumulators = POOLS[split]
        binary = rng.choice(binaries)
        a, b, m = rng.randint(*a_range), rng.randint(*b_range), rng.choice(moduli)
        n_faults = rng.choice([1, 2, 2])
        if split == "train":
            faults = set(rng.sample(FAULTS, n_faults))
        else:  # one held-out fault kind, maybe with one more of any kind; a broken `clean` alone would leave
            # every check but one to the no-op agent, so it always comes with another fault
            faults = {rng.choice(HELD_OUT_FAULTS)}
            if n_faults == 2 or faults == {"clean"}:
                faults.add(rng.choice([f for f in FAULTS + HELD_OUT_FAULTS if f not in faults]))
        typo_var = rng.choice(accumulators)
        broken = _sources(binary, a, b, m, faults, typo_var)
        fixed = _sources(binary, a, b, m, set(), typo_var)
        sample = sorted(rng.sample(range(-50, 200), 5))
        instruction = (
            (
                f"`/app` holds the C sources and the Makefile of `{binary}`, but the project is broken: it does not build\n"
                "or does not behave as specified. Fix it.\n\n"
                f"Specification: `./{binary} X1 X2 ...` takes integers and prints, for each X in order, a line `X -> V` where\n"
                f"V = (X * {a} + {b}) mod {m}, the remainder taken in 0..{m - 1} (also for negative X); then a last line\n"
                "`total T` where T is the sum of the V values. With no arguments it prints `total 0`.\n\n"
                f"Requirements: `make` in `/app` builds `/app/{binary}` from the sources in a clean tree, and `make clean`\n"
                f"removes `{binary}` and the object files. Example: `./{binary} {' '.join(map(str, sample[:2]))}`.\n"
            )
            if split == "train"
            else (
                f"The C program `{binary}` in `/app` (sources plus a Makefile) is broken: either it fails to build or its\n"
                "output is not what it should be. Repair it.\n\n"
                f"What `./{binary} X1 X2 ...` must do: read its arguments as decimal integers and, for each X in order,\n"
                f"print `X -> V` with V = (X * {a} + {b}) mod {m}, always in the range 0..{m - 1} (negative X included);\n"
                f"then print `total T`, T being the sum of all V. Without arguments the output is just `total 0`.\n\n"
                f"Also: running `make` in `/app` on a clean tree must build `/app/{binary}` from the sources, and\n"
                f"`make clean` must delete `{binary}` and every object file. "
                f"Try e.g. `./{binary} {' '.join(map(str, sample[:2]))}`.\n"
            )
        )
        solve = "".join(f"cat > {name} <<'T1EOF'\n{body}T1EOF\n" for name, body in fixed.items())
        solve += f"make clean\nmake\n./{binary} {' '.join(map(str, sample))}\n"
        tests = f"A, B, M = {a}, {b}, {m}\nBINARY = {binary!r}\nSAMPLE = {sample!r}\nSEED = {seed}\n" + TESTS
        return Instance(
            title=f"Fix the broken build of {binary} ({len(faults)} fault{'s' if len(faults) > 1 else ''})",
            instruction=instruction,
            solve=solve,
            tests={"test_build.py": tests},
            files=broken,
            difficulty="easy" if len(faults) == 1 else "medium",
            tags=("c", "make", *sorted(faults)),
            tools=("gcc", "make"),
            max_turns=40,
        )
