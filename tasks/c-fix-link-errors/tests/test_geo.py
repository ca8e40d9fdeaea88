import math
import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest

SRC = Path("/app/geo")


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    assert (SRC / "Makefile").is_file()
    dst = tmp_path_factory.mktemp("g") / "geo"
    shutil.copytree(SRC, dst, ignore=shutil.ignore_patterns("geo", "*.o"))
    res = subprocess.run(["make"], cwd=dst, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    return dst


def expected(lines):
    out, total, n = [], 0.0, 0
    for line in lines:
        p = line.split()
        a = -1
        try:
            if p[0] == "circle" and len(p) == 2:
                a = math.pi * float(p[1]) ** 2
            elif p[0] == "rect" and len(p) == 3:
                a = float(p[1]) * float(p[2])
            elif p[0] == "tri" and len(p) == 4:
                x, y, z = map(float, p[1:])
                s = (x + y + z) / 2
                q = s * (s - x) * (s - y) * (s - z)
                a = math.sqrt(q) if min(x, y, z) > 0 and q > 0 else -1
        except (ValueError, IndexError):
            a = -1
        if a < 0:
            out.append(f"invalid: {line}")
        else:
            out.append(f"{a:.3f}")
            total += a
            n += 1
    return "\n".join(out + [f"count {n}", f"total {total:.3f}"]) + "\n"


def run(binary, lines):
    res = subprocess.run([str(binary)], input="".join(l + "\n" for l in lines), capture_output=True, text=True, timeout=10)
    assert res.returncode == 0, res.stderr
    return res.stdout


def test_builds_clean_with_flags(tree):
    assert os.access(tree / "geo", os.X_OK)
    mk = (SRC / "Makefile").read_text()
    assert "-std=c99" in mk and "-O0" in mk


def test_header_dependency(tree):
    h = tree / "src" / "shapes.h"
    st = h.stat()
    os.utime(h, (st.st_atime + 100, st.st_mtime + 100))
    out = subprocess.run(["make", "-n"], cwd=tree, capture_output=True, text=True, timeout=30).stdout
    assert "main.c" in out and "shapes.c" in out, out


def test_fixed_cases(tree):
    lines = ["circle 1", "rect 2 3", "tri 3 4 5", "tri 1 1 5", "hello", "rect 2", "circle 0.5"]
    assert run(tree / "geo", lines) == expected(lines)


def test_random_cases(tree):
    r = random.Random(12)
    lines = []
    for _ in range(200):
        k = r.choice(["circle", "rect", "tri", "bad"])
        if k == "circle":
            lines.append(f"circle {r.uniform(0.1, 50):.2f}")
        elif k == "rect":
            lines.append(f"rect {r.uniform(0.1, 50):.2f} {r.uniform(0.1, 50):.2f}")
        elif k == "tri":
            lines.append("tri " + " ".join(f"{r.uniform(0.5, 20):.2f}" for _ in range(3)))
        else:
            lines.append(r.choice(["square 2", "circle", "tri 1 2", ""]))
    assert run(tree / "geo", lines) == expected(lines)
    assert run(SRC / "geo", lines) == expected(lines)
