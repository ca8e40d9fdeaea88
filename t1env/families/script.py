"""script: fix a bash script with 2-3 injected bugs so that it meets its specification.

The script reports line counts of the files with one extension in a folder. The extension, the
output format, the script's name and the bugs vary by seed; bugs come from the classic shell
pitfalls (word splitting on names with spaces, ``wc -l`` missing an unterminated last line, a
variable updated in a pipeline's subshell, an unmatched glob, wrong sort, wrong usage handling).
Tests run the script on fresh folders.

The splits draw from disjoint pools (``docs/families.md``): test instances have their own script names,
extensions, output formats (``NAME=COUNT``, ``COUNT<TAB>NAME``, ``NAME (COUNT)``), sample files and
instruction wording; the bug classes are shared (they are what the family teaches).
"""

from __future__ import annotations

import random

from t1env.families.base import Family, Instance, split_of_seed

BUGS = ("spaces", "lastline", "sort", "subshell", "glob", "usage")
# format: (as the instruction shows it, printf format, printf argument order, the tests' Python format)
FORMATS = {
    "count-name": ("COUNT NAME", "%s %s", "n, name", "{n} {name}"),
    "name-colon": ("NAME: COUNT", "%s: %s", "name, n", "{name}: {n}"),
    "name-tab": ("NAME<TAB>COUNT", "%s\\t%s", "name, n", "{name}\t{n}"),
    "name-equals": ("NAME=COUNT", "%s=%s", "name, n", "{name}={n}"),
    "count-tab": ("COUNT<TAB>NAME", "%s\\t%s", "n, name", "{n}\t{name}"),
    "name-paren": ("NAME (COUNT)", "%s (%s)", "name, n", "{name} ({n})"),
}
POOLS = {  # per split: script names, extensions, output formats, sample file stems
    "train": (
        ["linecount.sh", "count-lines.sh", "lines-report.sh", "tally.sh"],
        ["log", "txt", "md", "csv", "conf"],
        ["count-name", "name-colon", "name-tab"],
        ("access", "notes"),
    ),
    "test": (
        ["wc-report.sh", "linestats.sh", "count-rows.sh", "sizes.sh"],
        ["dat", "ini", "yaml", "tsv", "out"],
        ["name-equals", "count-tab", "name-paren"],
        ("chunk", "tail"),
    ),
}


def _script(name: str, ext: str, fmt: str, bugs: set[str]) -> str:
    pf, order = FORMATS[fmt][1], FORMATS[fmt][2]
    args = '"$n" "$name"' if order == "n, name" else '"$name" "$n"'
    if "usage" in bugs:
        usage = f'if [ $# -lt 1 ]; then\n    echo "usage: {name} DIR"\n    exit 1\nfi\n'
    else:
        usage = f'if [ $# -ne 1 ] || [ ! -d "$1" ]; then\n    echo "usage: {name} DIR" >&2\n    exit 2\nfi\n'
    loop_head = (
        f'for f in $(ls "$dir"/*.{ext} 2>/dev/null); do\n' if "spaces" in bugs else f'for f in "$dir"/*.{ext}; do\n'
    )
    q = "$f" if "spaces" in bugs else '"$f"'
    body = "" if "glob" in bugs else f"    [ -f {q} ] || continue\n"
    body += f"    n=$(wc -l < {q})\n" if "lastline" in bugs else f"    n=$(awk 'END {{ print NR }}' {q})\n"
    body += f'    echo "$n $(basename {q})" >> "$tmp"\n'
    if "subshell" not in bugs:
        body += "    total=$((total + n))\n"
    after = 'cat "$tmp" | while read -r n _; do\n    total=$((total + n))\ndone\n' if "subshell" in bugs else ""
    sort = 'LC_ALL=C sort -k2 "$tmp"' if "sort" in bugs else 'LC_ALL=C sort -k1,1nr -k2 "$tmp"'
    return (
        f"#!/bin/bash\n# {name} DIR: line counts of the *.{ext} files in DIR, biggest first, then a total.\n"
        f"set -u\n{usage}dir=$1\ntotal=0\ntmp=$(mktemp)\n"
        + ("" if "glob" in bugs else "shopt -s nullglob\n")
        + loop_head
        + body
        + "done\n"
        + after
        + f"{sort} | while read -r n name; do\n    printf '{pf}\\n' {args}\ndone\n"
        + 'rm -f "$tmp"\necho "TOTAL $total"\n'
    )


TESTS = r"""
import random
import subprocess
from pathlib import Path

SCRIPT = Path("/app/bin") / NAME


def expected(files):
    rows = []
    for name, text in files.items():
        if name.endswith("." + EXT):
            rows.append((len(text.splitlines()), name))
    rows.sort(key=lambda r: (-r[0], r[1].encode()))
    return "".join(FMT.format(n=n, name=name) + "\n" for n, name in rows) + f"TOTAL {sum(n for n, _ in rows)}\n"


def make(tmp_path, files, subdirs=()):
    d = tmp_path / "data"
    d.mkdir()
    for name, text in files.items():
        (d / name).write_text(text)
    for s in subdirs:
        (d / s).mkdir()
        (d / s / ("inner." + EXT)).write_text("x\ny\n")
    return d


def run(*args):
    assert SCRIPT.is_file() and SCRIPT.stat().st_mode & 0o111, f"{SCRIPT} must exist and be executable"
    return subprocess.run([str(SCRIPT), *map(str, args)], capture_output=True, text=True, timeout=30, cwd="/tmp")


def lines(r, k):
    return "".join(f"row {i} {r.randint(0, 999)}\n" for i in range(k))


def test_simple_folder(tmp_path):
    r = random.Random(SEED)
    files = {f"f{i}.{EXT}": lines(r, c) for i, c in enumerate(r.sample(range(1, 60), 4))}
    res = run(make(tmp_path, files))
    assert res.returncode == 0 and res.stdout == expected(files), res.stdout + res.stderr


def test_names_with_spaces(tmp_path):
    r = random.Random(SEED + 1)
    files = {f"my notes {i}.{EXT}": lines(r, c) for i, c in enumerate(r.sample(range(1, 60), 3))}
    files[f"plain.{EXT}"] = lines(r, 61)
    res = run(make(tmp_path, files))
    assert res.returncode == 0 and res.stdout == expected(files), res.stdout + res.stderr


def test_last_line_without_newline_counts(tmp_path):
    files = {f"a.{EXT}": "one\ntwo\nthree", f"b.{EXT}": "x\n", f"empty.{EXT}": ""}
    res = run(make(tmp_path, files))
    assert res.returncode == 0 and res.stdout == expected(files), res.stdout + res.stderr


def test_ties_other_extensions_and_subfolders(tmp_path):
    files = {f"zeta.{EXT}": "1\n2\n", f"alpha.{EXT}": "1\n2\n", f"Mid.{EXT}": "1\n2\n", f"big.{EXT}": "1\n2\n3\n",
             "skip.bak": "1\n2\n3\n4\n5\n", f"skip.{EXT}.old": "1\n"}
    res = run(make(tmp_path, files, subdirs=[f"folder.{EXT}"]))
    assert res.returncode == 0 and res.stdout == expected(files), res.stdout + res.stderr


def test_folder_without_matching_files(tmp_path):
    res = run(make(tmp_path, {"readme.bak": "hi\n"}))
    assert res.returncode == 0 and res.stdout == "TOTAL 0\n", res.stdout + res.stderr


def test_usage_errors(tmp_path):
    for args in ([], [tmp_path / "does-not-exist"]):
        res = run(*args)
        assert res.returncode == 2 and res.stdout == "" and res.stderr.strip(), args
"""


class ScriptFix(Family):
    name = "script"
    category = "shell-scripting"
    difficulty = "medium"
    description = "Fix 2-3 classic bugs (word splitting, subshell, globs, wc -l, sort, usage) in a bash report script."

    def build(self, rng: random.Random, seed: int) -> Instance:
        split = split_of_seed(seed)
        names, exts, fmts, stems = POOLS[split]
        name, ext, fmt = rng.choice(names), rng.choice(exts), rng.choice(fmts)
        bugs = set(rng.sample(BUGS, rng.randint(2, 3)))
        shown = FORMATS[fmt][0]
        instruction = (
            (
                f"`/app/bin/{name}` is supposed to report line counts, but it has bugs. Fix it (keep its path; it must stay\n"
                "executable). Specification of `" + name + " DIR`:\n\n"
                f"* for every regular file directly in DIR whose name ends in `.{ext}` (not in sub-folders), print one line\n"
                f"  `{shown}`, where COUNT is the number of lines of the file (a last line without a trailing newline counts;\n"
                "  an empty file has 0) and NAME the file name (names may contain spaces);\n"
                "* lines sorted by COUNT descending, ties by NAME ascending in plain byte order;\n"
                "* then a final line `TOTAL N`, the sum of the counts (just `TOTAL 0` when no file matches);\n"
                "* exit status 0; when DIR is missing or not a folder, print a usage message to stderr, nothing to\n"
                "  stdout, and exit with status 2.\n\n"
                f"Example: `/app/bin/{name} /app/sample`.\n"
            )
            if split == "train"
            else (
                f"Someone wrote `/app/bin/{name}` to summarise how long the `.{ext}` files of a folder are, and it does not\n"
                "do what it should. Repair it in place (same path, still executable) so that `"
                + name
                + " DIR` behaves\n"
                "like this:\n\n"
                f"* it considers the regular files right inside DIR (sub-folders are ignored) whose names end in `.{ext}`;\n"
                f"  names can contain spaces. For each it prints `{shown}`: NAME is the file name, COUNT its number of\n"
                "  lines, where an unterminated last line is still a line and an empty file has none;\n"
                "* the biggest COUNT comes first; equal counts are ordered by NAME, ascending, comparing bytes;\n"
                "* the last line is `TOTAL N` with N the sum of all counts (`TOTAL 0` when there is no such file);\n"
                "* it exits with 0. If DIR is not given or is not a folder, it writes a usage message to stderr, prints\n"
                "  nothing on stdout and exits with 2.\n\n"
                f"Try it with `/app/bin/{name} /app/sample`.\n"
            )
        )
        fixed = _script(name, ext, fmt, set())
        pyfmt = FORMATS[fmt][3]
        sample = {f"{stems[0]} {i}.{ext}": "".join(f"entry {j}\n" for j in range(rng.randint(1, 30))) for i in range(3)}
        sample[f"{stems[1]}.{ext}"] = "first\nsecond"
        tests = f"NAME = {name!r}\nEXT = {ext!r}\nFMT = {pyfmt!r}\nSEED = {seed}\n" + TESTS
        return Instance(
            title=f"Fix the bugs in the shell script {name}",
            instruction=instruction,
            solve=f"cat > bin/{name} <<'SH'\n{fixed}SH\nchmod +x bin/{name}\nbin/{name} sample\n",
            tests={"test_script.py": tests},
            files={f"bin/{name}": _script(name, ext, fmt, bugs), **{f"sample/{k}": v for k, v in sample.items()}},
            executables=frozenset({f"bin/{name}"}),
            tags=("bash", "debugging", *sorted(bugs)),
            tools=("bash", "awk", "sort"),
            max_turns=40,
        )
