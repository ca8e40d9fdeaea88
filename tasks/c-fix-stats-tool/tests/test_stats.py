import math
import random
import shutil
import subprocess
from pathlib import Path

import pytest

SRC = Path("/app/stats")


@pytest.fixture(scope="module")
def binary(tmp_path_factory):
    assert (SRC / "Makefile").is_file()
    dst = tmp_path_factory.mktemp("b") / "stats"
    shutil.copytree(SRC, dst, ignore=shutil.ignore_patterns("stats", "*.o"))
    res = subprocess.run(["make"], cwd=dst, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    return dst / "stats"


def expected(nums):
    n = len(nums)
    m = sum(nums) / n
    var = sum(x * x for x in nums) / n - m * m
    return (f"count {n}\nmin {min(nums):.3f}\nmax {max(nums):.3f}\nmean {m:.3f}\n"
            f"stddev {math.sqrt(max(var, 0)):.3f}\n")


def run(binary, text):
    return subprocess.run([str(binary)], input=text, capture_output=True, text=True, timeout=10)


def test_builds_with_strict_flags(binary):
    assert binary.is_file()
    mk = (SRC / "Makefile").read_text()
    for flag in ("-std=c11", "-Wall", "-Wextra", "-Werror"):
        assert flag in mk, f"{flag} was removed"
    for name in ("main.c", "summary.c", "summary.h"):
        assert "pragma GCC diagnostic" not in (SRC / name).read_text()


def test_shipped_binary_present():
    res = subprocess.run([str(SRC / "stats")], input="2 4 4 4 5 5 7 9", capture_output=True, text=True, timeout=10)
    assert res.returncode == 0 and res.stdout == expected([2, 4, 4, 4, 5, 5, 7, 9])


def test_random_inputs(binary):
    r = random.Random(5)
    for _ in range(5):
        nums = [round(r.uniform(-1000, 1000), 2) for _ in range(r.randint(1, 300))]
        res = run(binary, "\n".join(" ".join(map(str, nums[i:i + 7])) for i in range(0, len(nums), 7)))
        assert res.returncode == 0 and res.stdout == expected(nums), res.stdout


def test_empty_input(binary):
    for text in ("", "   \n\n"):
        res = run(binary, text)
        assert (res.returncode, res.stdout) == (0, "count 0\n")
