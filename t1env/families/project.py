"""project: a long-horizon release job in /app — discover, fetch dependencies, configure, build, fix, migrate, report.

The long-horizon family (issue 28): every instance is one multi-stage job whose oracle types **31 dependent
commands, one per turn**, and whose verifier scores **14 checks on 11 milestones** that give partial credit in order.
Each value a command needs is printed by an earlier command and nowhere else (the instruction names the service,
nothing more): the ticket id, the manifest's path, the package versions, the template's path, the port, the host and
its core count, the token, each build error's file and line, the data file's shape, the migrated row count, the
build id and the artifact's checksum. The oracle (``solution/solve.sh``, one whole command per line, so
:func:`t1env.agent.reference.typed_script` types it one command per turn) reads like this for a train instance::

    ls                                              # JOB.md, build.py, data/, meta/, ...
    cat JOB.md                                      # the ticket (REL-4821) and the manifest's path
    mkdir -p release/REL-4821                       # milestone 1: the workspace
    cat meta/kestrel-3f9a.mf                        # requirements, template, data file
    ls vendor                                       # the versions on offer
    cp vendor/netkit-2.3.1.pkg release/REL-4821/    # milestone 2 (weight 2): the newest version
    cp vendor/dbwire-1.4.0.pkg release/REL-4821/    #   that satisfies each requirement
    cat templates/kestrel-edge.tmpl                 # @PORT@, @WORKERS@, @TOKEN@ and where each comes from
    cp templates/kestrel-edge.tmpl release/REL-4821/kestrel.conf
    grep -w kestrel registry/ports.tab              # "kestrel 7341 orca-12"
    sed -i 's/@PORT@/7341/' release/REL-4821/kestrel.conf            # milestone 3
    cat registry/hosts/orca-12.info                 # "cores 6"
    sed -i 's/@WORKERS@/6/' release/REL-4821/kestrel.conf            # milestone 4
    grep -w kestrel secrets/tokens.txt
    sed -i 's/@TOKEN@/tk-9a8b7c2d/' release/REL-4821/kestrel.conf    # milestone 5
    python3 build.py release/REL-4821 || true       # error: src/kestrel/queue.py:15: SyntaxError: expected ':'
    sed -i '15s/)$/):/' src/kestrel/queue.py        # milestone 6
    python3 build.py release/REL-4821 || true       # error: src/kestrel/store.py:8: NameError: ...
    sed -i '8s/rwo/row/' src/kestrel/store.py       # milestone 7
    python3 build.py release/REL-4821               # built release/REL-4821/kestrel-1a2b3c4d5e.bin: milestone 8
    head -3 data/stock-52.dat                       # the data's delimiter and columns
    cat migrations/target.txt                       # the target's columns and which rows to drop
    echo loc,sku,qty > release/REL-4821/inventory.csv
    awk -F'|' 'NR>1 && $4 != "VOID" {print $3 "," $1 "," $2}' data/stock-52.dat >> release/REL-4821/inventory.csv
    wc -l release/REL-4821/inventory.csv            # milestone 9 (weight 2); rows = lines - 1
    sha256sum release/REL-4821/kestrel-1a2b3c4d5e.bin
    echo ticket=REL-4821 > release/REL-4821/REPORT  # milestone 10 (with build=)
    echo build=1a2b3c4d5e >> release/REL-4821/REPORT
    echo rows=9 >> release/REL-4821/REPORT          # milestone 11 (weight 2: rows, sha256)
    echo sha256=... >> release/REL-4821/REPORT
    cat release/REL-4821/REPORT

**Milestones and weights.** Long-Horizon-Terminal-Bench scores a task as a weighted sum of subtask scores; t1's
reward is the number of passing checks. A milestone of weight *w* is therefore *w* checks, each on a distinct fact
of that milestone (the dependency milestone has one check per requirement; the migration one on the header and on
the rows; the last report milestone on the row count and on the checksum), so a milestone's share of the reward is
its weight over the total weight (14). **Order**: the check of milestone *k* first asserts every fact of
milestones 1..k-1 (``_require`` in the tests), so the reward is the weight of the completed prefix of the job plus
any facts of the next milestone: a job done out of order, or with an early step skipped, earns only what comes
before the gap. The build couples the stages as a real build would too: its build id hashes the packages, the
configuration and the sources, so a wrong version or a wrong port gives another artifact name.

**Build errors** are real: ``build.py`` compiles every module of ``src/SERVICE/`` and runs its ``selftest()``, and
reports the first error (file, line, the line's text), so the oracle's fix depends on what the build printed. Two
faults per instance, in two modules, from the split's pool: train ``typo`` (a misspelled name: NameError),
``colon`` (a ``def`` without its ``:``), ``quote`` (an unterminated string); test ``indent`` (a ``return`` out of
its block's indentation), ``attr`` (``.uper()`` for ``.upper()``: AttributeError), ``paren`` (an unclosed
parenthesis). Syntax errors come out before runtime ones, each kind in module order.

**The test split is held out** (``docs/families.md``): test instances draw services, modules, packages, hosts,
ticket prefix (``CHG-`` for ``REL-``), requirement operators (``<=``, ``!=`` for ``>=``, ``<``), fault kinds, data
shape (``;``-separated ``part;count;bin;state`` for ``|``-separated ``sku|qty|loc|status``), status words and the
instruction's wording from pools train never uses.

Everything runs on what every sandbox has (``python3``, ``sed``, ``awk``, ``grep``, ``sha256sum``); each oracle
command takes milliseconds.

Example:
    >>> from t1env.families.project import Project
    >>> inst = Project().build(Project().rng(1), 1)
    >>> lines = inst.solve.splitlines()
    >>> len(lines), lines[1], sum(name.startswith("def test_") for name in inst.tests["test_project.py"].split("\\n"))
    (31, 'cat JOB.md', 14)
"""

from __future__ import annotations

import hashlib
import inspect
import json
import random

from t1env.families.base import Family, Instance, split_of_seed

POOLS = {
    "train": {
        "services": ["kestrel", "heron", "marten", "otter", "lynx", "badger", "falcon", "osprey", "weasel", "plover"],
        "modules": ["store", "ledger", "queue", "cache", "router", "auth"],
        "packages": ["corelib", "netkit", "dbwire", "logfmt", "jsonx", "authz", "cfgparse"],
        "hosts": ["orca", "pike", "wren", "moss"],
        "ticket": "REL",
        "ops": (">=", "<"),
        "faults": ("typo", "colon", "quote"),
        "columns": ("sku", "qty", "loc", "status"),
        "delimiter": "|",
        "drop": ["RETIRED", "VOID"],
        "keep": ["ACTIVE", "OK"],
        "templates": ["edge", "main", "core"],
        "data": ["stock", "inventory", "items"],
    },
    "test": {
        "services": ["quokka", "tapir", "okapi", "dingo", "numbat", "gecko", "ibex", "serval"],
        "modules": ["vault", "relay", "index", "meter", "pager", "shard"],
        "packages": ["fastpipe", "geokit", "timefmt", "mqlink", "crypta", "blobio"],
        "hosts": ["fjord", "delta", "mesa", "tundra"],
        "ticket": "CHG",
        "ops": ("<=", "!="),
        "faults": ("indent", "attr", "paren"),
        "columns": ("part", "count", "bin", "state"),
        "delimiter": ";",
        "drop": ["SCRAPPED", "HOLD"],
        "keep": ["LIVE", "READY"],
        "templates": ["prod", "site", "base"],
        "data": ["parts", "binlist", "counts"],
    },
}
ITEMS = ["rec", "row", "entry", "item", "val"]  # the loop variable a typo misspells
ACCS = ["total", "acc", "running", "tally"]
CONSTS = ["RETRIES", "TIMEOUT", "BATCH", "WORKERS"]  # 0-4 of them shift every line a build error names
SYNTAX_FAULTS = ("colon", "quote", "indent", "paren")  # reported at compile time, before any runtime fault

MODULE = '''"""{svc}.{mod}: {doc}"""

LIMIT = {limit}
{consts}

def {f1}(seq):
    {acc} = 0
    for {item} in seq:
        {acc} += {item}
    return {acc}


def {f2}(name):
    label = name.strip()
    if not label:
        return "<none>"
    return label.upper()


def selftest():
    assert {f1}([1, 2, 3]) == 6
    assert {f2}(" ab ") == "AB"
    assert {f2}("  ") == "<none>"
    return LIMIT
'''
DOCS = ["keeps the counts", "adds up what comes in", "labels the records", "totals each batch"]


def normalized(text: str) -> str:
    """Source text as the build id sees it: trailing spaces and blank lines do not count."""
    return "\n".join(line.rstrip() for line in text.splitlines() if line.strip())


def parse_conf(text: str) -> dict:
    """``key = value`` lines of a configuration, comments (``#`` to the end of the line) and blank lines skipped."""
    out = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if "=" in line:
            key, value = line.split("=", 1)
            out[key.strip()] = value.strip()
    return out


def bundle(service: str, packages: list, config: dict, sources: dict) -> tuple:
    """The build id (10 hex digits of a hash of everything that went in) and the artifact's text."""
    payload = {
        "service": service,
        "packages": sorted(packages),
        "config": config,
        "sources": {k: normalized(v) for k, v in sorted(sources.items())},
    }
    body = json.dumps(payload, sort_keys=True, indent=1)
    bid = hashlib.sha256(body.encode()).hexdigest()[:10]
    return bid, f"bundle {service} {bid}\n{body}\n"


BUILD = '''#!/usr/bin/env python3
"""Build {svc}: check the release folder, compile and self-test src/{svc}/, write the artifact.

Usage: python3 build.py release/TICKET
"""

import hashlib
import importlib.util
import json
import sys
import traceback
from pathlib import Path

sys.dont_write_bytecode = True
APP = Path(__file__).resolve().parent
SERVICE = {svc!r}
REQUIRES = {requires!r}


{helpers}

def fail(message, line=None):
    print("error: " + message)
    if line is not None:
        print("    " + line)
    sys.exit(1)


def source_line(path, lineno):
    lines = path.read_text().splitlines()
    return lines[lineno - 1] if 0 < lineno <= len(lines) else ""


def main(argv):
    if len(argv) != 1:
        fail("usage: python3 build.py release/TICKET")
    rel = Path(argv[0]) if Path(argv[0]).is_absolute() else APP / argv[0]
    if not rel.is_dir():
        fail(f"{{argv[0]}}: no such folder")
    packages = sorted(p.name for p in rel.glob("*.pkg"))
    for name in REQUIRES:
        if not any(p.startswith(name + "-") for p in packages):
            fail(f"{{argv[0]}}: no package for the requirement on {{name}}")
    conf = rel / (SERVICE + ".conf")
    if not conf.is_file():
        fail(f"{{argv[0]}}/{{conf.name}}: no configuration")
    text = conf.read_text()
    for hole in ("@PORT@", "@WORKERS@", "@TOKEN@"):
        if hole in text:
            fail(f"{{argv[0]}}/{{conf.name}}: {{hole}} is not filled in")
    sources = sorted((APP / "src" / SERVICE).glob("*.py"))
    for path in sources:
        name = str(path.relative_to(APP))
        try:
            compile(path.read_text(), name, "exec")
        except SyntaxError as e:
            fail(f"{{name}}:{{e.lineno}}: {{type(e).__name__}}: {{e.msg}}", source_line(path, e.lineno or 0))
    for path in sources:
        name = str(path.relative_to(APP))
        spec = importlib.util.spec_from_file_location(SERVICE + "_" + path.stem, path)
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
            module.selftest()
        except Exception as e:
            frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename == str(path)]
            lineno = frames[-1].lineno if frames else 0
            fail(f"{{name}}:{{lineno}}: {{type(e).__name__}}: {{e}}", source_line(path, lineno))
    bid, artifact = bundle(
        SERVICE, packages, parse_conf(text), {{str(p.relative_to(APP)): p.read_text() for p in sources}}
    )
    out = rel / f"{{SERVICE}}-{{bid}}.bin"
    out.write_text(artifact)
    print(f"built {{out.relative_to(APP)}} (build id {{bid}})")


if __name__ == "__main__":
    main(sys.argv[1:])
'''

TEMPLATE = """# {svc} configuration ({variant})
name = {svc}
# port: the port registry/ports.tab assigns to {svc}
port = @PORT@
# workers: the cores of the host registry/ports.tab names for {svc} (registry/hosts/HOST.info)
workers = @WORKERS@
# token: {svc}'s entry in secrets/tokens.txt
token = @TOKEN@
"""

INSTRUCTIONS = {
    "train": [
        "The service `{svc}` in /app has to be released. /app/JOB.md is the job ticket; everything else is found "
        "from there. Work through the stages in order:\n\n"
        "1. Create the workspace /app/release/TICKET (TICKET: the ticket id in JOB.md).\n"
        "2. Copy into it, from /app/vendor, one package per requirement of the service's manifest: the newest "
        "version that satisfies the requirement.\n"
        "3. Copy the template the manifest names to release/TICKET/SERVICE.conf and fill in each @PLACEHOLDER@ as "
        "the template's comments say.\n"
        "4. Run `python3 build.py release/TICKET` and fix the source errors it reports, one at a time, until it "
        "builds the artifact.\n"
        "5. Migrate the data file the manifest names into release/TICKET/inventory.csv as "
        "/app/migrations/target.txt says.\n"
        "6. Write release/TICKET/REPORT with four lines: `ticket=`, `build=` (the build id), `rows=` (data rows "
        "migrated, header not counted) and `sha256=` (the artifact's SHA-256).\n",
        "Release `{svc}`: the ticket in /app/JOB.md says where its manifest is. Stages, in this order:\n\n"
        "- workspace: make the folder /app/release/TICKET named by the ticket id;\n"
        "- dependencies: for each requirement in the manifest, copy the newest package in /app/vendor that "
        "satisfies it into the workspace;\n"
        "- configuration: the manifest's template, copied to release/TICKET/SERVICE.conf with every @PLACEHOLDER@ "
        "filled in as its comments describe;\n"
        "- build: `python3 build.py release/TICKET`; fix each source error it reports until it writes the "
        "artifact;\n"
        "- migration: the manifest's data file into release/TICKET/inventory.csv, following "
        "/app/migrations/target.txt;\n"
        "- report: release/TICKET/REPORT holding `ticket=...`, `build=...` (build id), `rows=...` (migrated data "
        "rows) and `sha256=...` (of the artifact), one per line.\n",
    ],
    "test": [
        "Change request for `{svc}`: ship it from /app. Read /app/JOB.md first; each step needs what the step "
        "before printed.\n\n"
        "a) Workspace: a folder /app/release/ID, ID being the change id in JOB.md.\n"
        "b) Packages: every requirement listed in the manifest gets one package from /app/vendor in the workspace, "
        "the highest version that the requirement allows.\n"
        "c) Settings: release/ID/SERVICE.conf, made from the manifest's template with all @NAME@ markers replaced "
        "by the values its comments point to.\n"
        "d) Build: `python3 build.py release/ID` must succeed; repair the sources wherever it reports an error, "
        "one error at a time.\n"
        "e) Data: convert the manifest's data file to release/ID/inventory.csv per /app/migrations/target.txt.\n"
        "f) Summary: release/ID/REPORT, lines `ticket=ID`, `build=BUILD-ID`, `rows=N` (converted records, no "
        "header) and `sha256=HASH` of the built artifact.\n",
        "Deploy `{svc}` (files in /app). The change ticket /app/JOB.md leads to the manifest, which leads to the "
        "rest. Do it in order:\n\n"
        "* make /app/release/ID for the change id ID;\n"
        "* put there the package each manifest requirement needs (from /app/vendor; the highest allowed "
        "version);\n"
        "* render the manifest's template as release/ID/SERVICE.conf, resolving each @NAME@ marker where its "
        "comment says;\n"
        "* get `python3 build.py release/ID` through, repairing what it reports in the sources as it goes;\n"
        "* convert the data file named in the manifest into release/ID/inventory.csv (/app/migrations/target.txt "
        "has the format);\n"
        "* finish with release/ID/REPORT: `ticket=`, `build=` (the build id), `rows=` (converted records without "
        "the header), `sha256=` (the artifact's digest), one per line.\n",
    ],
}

TESTS = r'''

import hashlib
from pathlib import Path

APP = Path("/app")
REL = APP / "release" / TICKET


def normalized(text):
    return "\n".join(line.rstrip() for line in text.splitlines() if line.strip())


def conf():
    out = {}
    path = REL / (SERVICE + ".conf")
    assert path.is_file(), f"no configuration release/{TICKET}/{SERVICE}.conf"
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "=" in line:
            key, value = line.split("=", 1)
            out[key.strip()] = value.strip()
    return out


def report():
    path = REL / "REPORT"
    assert path.is_file(), f"no release/{TICKET}/REPORT"
    return dict(line.strip().split("=", 1) for line in path.read_text().splitlines() if "=" in line)


def packages():
    return sorted(p.name for p in REL.glob("*.pkg")) if REL.is_dir() else []


def fact_workspace():
    assert REL.is_dir(), f"no workspace /app/release/{TICKET}"


def fact_package(i):
    name = PACKAGES[i].rsplit("-", 1)[0]
    have = [p for p in packages() if p.rsplit("-", 1)[0] == name]
    assert have == [PACKAGES[i]], f"release/{TICKET} holds {have or 'no version'} of {name}, not {PACKAGES[i]}"


def fact_setting(key):
    assert conf().get(key) == CONFIG[key], f"{SERVICE}.conf: {key} is {conf().get(key)!r}"


def fact_fixed(i):
    path, text = FIXED[i]
    assert normalized((APP / path).read_text()) == normalized(text), f"{path} still has its fault"


def fact_artifact():
    path = REL / ARTIFACT
    assert path.is_file(), f"no artifact release/{TICKET}/{ARTIFACT}"
    assert hashlib.sha256(path.read_bytes()).hexdigest() == SHA256, f"{ARTIFACT} is not what the build writes"


def migrated():
    path = REL / "inventory.csv"
    assert path.is_file(), f"no release/{TICKET}/inventory.csv"
    return path.read_text().splitlines()


def fact_header():
    assert migrated()[:1] == [HEADER]


def fact_rows():
    assert migrated()[1:] == ROWS


def fact_report(key, value):
    assert report().get(key) == value, f"REPORT: {key}= is {report().get(key)!r}"


MILESTONES = [
    [fact_workspace],
    [lambda: fact_package(0), lambda: fact_package(1)],
    [lambda: fact_setting("port")],
    [lambda: fact_setting("workers")],
    [lambda: fact_setting("token")],
    [lambda: fact_fixed(0)],
    [lambda: fact_fixed(1)],
    [fact_artifact],
    [fact_header, fact_rows],
    [lambda: fact_report("ticket", TICKET), lambda: fact_report("build", BUILD_ID)],
    [lambda: fact_report("rows", str(len(ROWS))), lambda: fact_report("sha256", SHA256)],
]


def _require(k):
    """Milestone k's checks count only when milestones 1..k-1 are done: partial credit in order."""
    for i, facts in enumerate(MILESTONES[: k - 1], 1):
        for fact in facts:
            try:
                fact()
            except AssertionError as e:
                raise AssertionError(f"milestone {i} is not done: {e}") from None


def test_m01_workspace():
    _require(1)
    fact_workspace()


def test_m02a_first_requirement():
    _require(2)
    fact_package(0)


def test_m02b_second_requirement():
    _require(2)
    fact_package(1)


def test_m03_port():
    _require(3)
    fact_setting("port")


def test_m04_workers():
    _require(4)
    fact_setting("workers")


def test_m05_token():
    _require(5)
    fact_setting("token")


def test_m06_first_build_error_fixed():
    _require(6)
    fact_fixed(0)


def test_m07_second_build_error_fixed():
    _require(7)
    fact_fixed(1)


def test_m08_artifact_built():
    _require(8)
    fact_artifact()


def test_m09a_migrated_header():
    _require(9)
    fact_header()


def test_m09b_migrated_rows():
    _require(9)
    fact_rows()


def test_m10_report_names_the_release():
    _require(10)
    fact_report("ticket", TICKET)
    fact_report("build", BUILD_ID)


def test_m11a_report_rows():
    _require(11)
    fact_report("rows", str(len(ROWS)))


def test_m11b_report_checksum():
    _require(11)
    fact_report("sha256", SHA256)
'''

# milestone -> weight (checks); the order of MILESTONES in TESTS
WEIGHTS = (1, 2, 1, 1, 1, 1, 1, 1, 2, 1, 2)


def _versions(rng: random.Random) -> list[tuple[int, int, int]]:
    out: set[tuple[int, int, int]] = set()
    while len(out) < 4:
        out.add((rng.randint(1, 3), rng.randint(0, 9), rng.randint(0, 9)))
    return sorted(out)


def _vs(v: tuple[int, int, int]) -> str:
    return ".".join(map(str, v))


def _requirement(rng: random.Random, op: str, versions: list) -> tuple[str, tuple[int, int, int]]:
    """A constraint on ``versions`` (sorted, 4) with operator ``op`` and the newest version satisfying it."""
    if op == ">=":
        bound = versions[rng.randint(1, 3)]
        return _vs(bound), versions[-1]
    if op == "<":
        i = rng.randint(1, 3)  # the bound is a listed version: the newest below it is the one before
        return _vs(versions[i]), versions[i - 1]
    if op == "<=":
        i = rng.randint(1, 2)
        return _vs(versions[i]), versions[i]
    if op == "!=":
        return _vs(versions[-1]), versions[-2]
    raise ValueError(f"unknown operator {op!r}")


def _fault(kind: str, text: str, item: str) -> tuple[str, int, str, str]:
    """Inject fault ``kind`` into a module's correct ``text``: (broken text, line, sed expression, error kind)."""
    lines = text.split("\n")

    def at(pred) -> int:
        return next(i for i, ln in enumerate(lines) if pred(ln))

    if kind == "typo":
        i, typo = at(lambda ln: ln.strip().endswith(f"+= {item}")), item[:-2] + item[-1] + item[-2]
        lines[i] = lines[i][: -len(item)] + typo
        expr = f"s/{typo}/{item}/"
    elif kind == "colon":
        i = at(lambda ln: ln.startswith("def ") and "(name)" in ln)
        lines[i] = lines[i][:-1]
        expr = "s/)$/):/"
    elif kind == "quote":
        i = at(lambda ln: ln.strip() == 'return "<none>"')
        lines[i] = lines[i][:-1]
        expr = 's/$/"/'
    elif kind == "indent":
        i = at(lambda ln: ln.startswith("    return ") and "label" not in ln and "LIMIT" not in ln)
        lines[i] = "  " + lines[i]
        expr = "s/^      /    /"
    elif kind == "attr":
        i = at(lambda ln: ln.strip() == "return label.upper()")
        lines[i] = lines[i].replace("upper", "uper")
        expr = "s/uper/upper/"
    elif kind == "paren":
        i = at(lambda ln: "([1, 2, 3]) == 6" in ln)
        lines[i] = lines[i].replace("]) ==", "] ==")
        expr = "s/] ==/]) ==/"
    else:
        raise ValueError(f"unknown fault {kind!r}")
    return "\n".join(lines), i + 1, expr, kind


class Project(Family):
    name = "project"
    category = "software-engineering"
    difficulty = "hard"
    description = (
        "A long-horizon release job: discover, fetch dependencies, configure, build and fix, migrate data, report "
        "(31 dependent commands, 11 milestones)."
    )

    def build(self, rng: random.Random, seed: int) -> Instance:
        split = split_of_seed(seed)
        pool = POOLS[split]
        svc = rng.choice(pool["services"])
        others = [s for s in pool["services"] if s != svc]
        ticket = f"{pool['ticket']}-{rng.randint(1000, 9999)}"
        manifest = f"meta/{svc}-{rng.getrandbits(16):04x}.mf"
        # dependencies: two required packages, two decoys, four versions each
        names = rng.sample(pool["packages"], 4)
        required = names[:2]  # the other two are decoys
        vendor, requires, chosen = {}, [], []
        for name in names:
            versions = _versions(rng)
            for v in versions:
                vendor[f"vendor/{name}-{_vs(v)}.pkg"] = f"package {name} {_vs(v)}\n"
            if name in required:
                op = rng.choice(pool["ops"])
                bound, pick = _requirement(rng, op, versions)
                requires.append(f"{name}{op}{bound}")
                chosen.append(f"{name}-{_vs(pick)}.pkg")
        # configuration
        variant = rng.choice(pool["templates"])
        template = f"templates/{svc}-{variant}.tmpl"
        hosts = [f"{h}-{rng.randint(10, 99)}" for h in pool["hosts"]]
        cores = {h: rng.choice([2, 4, 6, 8, 12, 16]) for h in hosts}
        registry = rng.sample([svc, *rng.sample(others, 5)], 6)
        ports = {s: rng.randint(2000, 9999) for s in registry}
        placed = {s: rng.choice(hosts) for s in registry}
        tokens = {s: f"tk-{rng.getrandbits(32):08x}" for s in registry}
        host = placed[svc]
        config = {"name": svc, "port": str(ports[svc]), "workers": str(cores[host]), "token": tokens[svc]}
        # sources: three modules, two with a fault each
        mods = sorted(rng.sample(pool["modules"], 3))
        correct = {}
        for mod in mods:
            item = rng.choice(ITEMS)
            correct[f"src/{svc}/{mod}.py"] = (
                MODULE.format(
                    svc=svc,
                    mod=mod,
                    doc=rng.choice(DOCS),
                    limit=rng.randint(10, 99),
                    consts="".join(
                        f"{k} = {rng.randint(1, 60)}\n" for k in rng.sample(CONSTS, rng.randint(0, len(CONSTS)))
                    ),
                    f1=f"{rng.choice(['sum', 'add', 'count'])}_{mod}",
                    f2=f"{rng.choice(['label', 'name', 'tag'])}_{mod}",
                    acc=rng.choice(ACCS),
                    item=item,
                ),
                item,
            )
        kinds = rng.sample(pool["faults"], 2)
        faulty = sorted(rng.sample(mods, 2))
        broken = {path: text for path, (text, _) in correct.items()}
        faults = []  # (path, line, sed expression, kind)
        for mod, kind in zip(faulty, kinds):
            path = f"src/{svc}/{mod}.py"
            text, lineno, expr, kind = _fault(kind, correct[path][0], correct[path][1])
            broken[path] = text
            faults.append((path, lineno, expr, kind))
        faults.sort(key=lambda f: (f[3] not in SYNTAX_FAULTS, f[0]))  # the order the build reports them in
        sources = {path: text for path, (text, _) in correct.items()}
        bid, artifact = bundle(svc, chosen, config, sources)
        artifact_name = f"{svc}-{bid}.bin"
        sha = hashlib.sha256(artifact.encode()).hexdigest()
        # data
        cols, delim = pool["columns"], pool["delimiter"]
        drop, keep = rng.choice(pool["drop"]), rng.choice(pool["keep"])
        data_file = f"data/{rng.choice(pool['data'])}-{rng.randint(10, 99)}.dat"
        order = rng.sample(range(3), 3)
        rows, kept = [], []
        for _ in range(rng.randint(8, 14)):
            rec = (
                f"{cols[0][0].upper()}{rng.randint(1000, 9999)}",
                str(rng.randint(0, 500)),
                f"{rng.choice('ABCDEF')}{rng.randint(1, 20)}",
                drop if rng.random() < 0.3 else keep,
            )
            rows.append(delim.join(rec))
            if rec[3] != drop:
                kept.append(",".join(rec[i] for i in order))
        header = ",".join(cols[i] for i in order)
        target = (
            f"inventory.csv: comma-separated, first line the header `{header}`, then one line per record of the "
            f"source data in the same order, with the columns {', '.join(cols[i] for i in order)}. Records whose "
            f"{cols[3]} is {drop} are dropped.\n"
        )
        files = {
            "JOB.md": f"# Job {ticket}\n\nService: {svc}\nManifest: {manifest}\n",
            manifest: (
                f"service = {svc}\nrequires = {', '.join(requires)}\ntemplate = {template}\ndata = {data_file}\n"
            ),
            template: TEMPLATE.format(svc=svc, variant=variant),
            "registry/ports.tab": "".join(f"{s} {ports[s]} {placed[s]}\n" for s in registry),
            **{f"registry/hosts/{h}.info": f"host {h}\ncores {cores[h]}\nmemory {cores[h] * 4}G\n" for h in hosts},
            "secrets/tokens.txt": "".join(f"{s} {tokens[s]}\n" for s in rng.sample(registry, len(registry))),
            "migrations/target.txt": target,
            data_file: delim.join(cols) + "\n" + "".join(r + "\n" for r in rows),
            "build.py": BUILD.format(
                svc=svc,
                requires=required,
                helpers="\n\n".join(inspect.getsource(f) for f in (normalized, parse_conf, bundle)),
            ),
            **vendor,
            **broken,
        }
        # the oracle: one whole command per line, each using what an earlier one printed
        r, conf = f"release/{ticket}", f"release/{ticket}/{svc}.conf"
        solve = [
            "ls",
            "cat JOB.md",
            f"mkdir -p {r}",
            f"cat {manifest}",
            "ls vendor",
            *[f"cp vendor/{p} {r}/" for p in chosen],
            f"cat {template}",
            f"cp {template} {conf}",
            f"grep -w {svc} registry/ports.tab",
            f"sed -i 's/@PORT@/{config['port']}/' {conf}",
            f"cat registry/hosts/{host}.info",
            f"sed -i 's/@WORKERS@/{config['workers']}/' {conf}",
            f"grep -w {svc} secrets/tokens.txt",
            f"sed -i 's/@TOKEN@/{config['token']}/' {conf}",
        ]
        for path, lineno, expr, _ in faults:
            solve += [f"python3 build.py {r} || true", f"sed -i '{lineno}{expr}' {path}"]
        fields = ' "," '.join(f"${i + 1}" for i in order)
        solve += [
            f"python3 build.py {r}",
            f"head -3 {data_file}",
            "cat migrations/target.txt",
            f"echo {header} > {r}/inventory.csv",
            f"awk -F'{delim}' 'NR>1 && $4 != \"{drop}\" {{print {fields}}}' {data_file} >> {r}/inventory.csv",
            f"wc -l {r}/inventory.csv",
            f"sha256sum {r}/{artifact_name}",
            f"echo ticket={ticket} > {r}/REPORT",
            f"echo build={bid} >> {r}/REPORT",
            f"echo rows={len(kept)} >> {r}/REPORT",
            f"echo sha256={sha} >> {r}/REPORT",
            f"cat {r}/REPORT",
        ]
        fixed = [(path, sources[path]) for path, *_ in faults]
        tests = (
            f"SERVICE = {svc!r}\nTICKET = {ticket!r}\nPACKAGES = {chosen!r}\nCONFIG = {config!r}\n"
            f"FIXED = {fixed!r}\nARTIFACT = {artifact_name!r}\nBUILD_ID = {bid!r}\nSHA256 = {sha!r}\n"
            f"HEADER = {header!r}\nROWS = {kept!r}\n" + TESTS
        )
        return Instance(
            title=f"Release {svc} ({ticket}): 11 stages from manifest to report",
            instruction=rng.choice(INSTRUCTIONS[split]).format(svc=svc),
            solve="\n".join(solve) + "\n",
            tests={"test_project.py": tests},
            files=files,
            executables=frozenset({"build.py"}),
            tags=("long-horizon", "multi-turn", "build", "python", *sorted(f[3] for f in faults)),
            tools=("python3", "sed", "awk", "grep", "sha256sum"),
            max_turns=120,
            command_timeout=30,
            agent_timeout=1800,
            verifier_timeout=120,
            preamble="",
        )
