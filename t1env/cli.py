"""The ``t1env`` command: list, show, run, validate, scaffold and clean up tasks.

t1env list [--split train|test] [--json]
t1env show ID                       (ID: a task id, a path, or a family instance FAMILY@SEED)
t1env run ID [--agent oracle|nop|human] [--backend local|docker] [--reward-mode count|fraction|binary] [--json]
t1env validate PATH... | --all [--runs N] [--jobs N] [--backend ...] [--no-exploits] [-v] [--json]
t1env new ID [--dir DIR]
t1env gc
t1env catalog                       (the markdown of docs/tasks.md)
t1env decontam --against PATH [--threshold X] [--n N] [--family-seeds K] [--json]
t1env eval TASK... [--agent ...] [--attempts K] [--concurrency N] [--out DIR | --resume DIR]  (docs/evaluation.md)
t1env report DIR [DIR_B]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from t1env import images
from t1env.agent.reference import HumanAgent, NopAgent, OracleAgent, oracle_command_count, run_episode
from t1env.argtypes import at_least_one
from t1env.env import TerminalEnv
from t1env.episode.verify import REWARD_MODES
from t1env.errors import T1Error
from t1env.eval.command import add_parsers as add_eval_parsers
from t1env.families import FAMILIES, calibration_refs, parse_instance_id, split_of_seed
from t1env.images import MAP_ENV, load_map
from t1env.registry import PATH_ENV, discover, get_task, list_tasks, split_of
from t1env.sandbox import BACKENDS, SandboxError
from t1env.sandbox import local as local_backend
from t1env.sandbox.docker_images import build_bases
from t1env.task import TASK_ID_PATTERN
from t1env.tools.catalog import render
from t1env.tools.decontam import compare, read_corpus, read_ours
from t1env.tools.exploits import EXPLOITS
from t1env.tools.export import export
from t1env.tools.validate import validate_task

# What `t1env show` says about a task's verification (docs/sandbox.md has the details).
VERIFIER_MODE_NOTES = {
    "separate": "separate (every agent process is ended before the checks run; they see only its files)",
    "shared": (
        "shared (the agent's processes keep running while the checks run: they cannot reach the verifier's "
        "process or report, but they can read the tests on the local backend while they run, and they can "
        "change the files and services the checks look at until the checks end)"
    ),
}

# What `t1env show` says about a check that loads the agent's code into its own process (docs/sandbox.md).
AGENT_CODE_NOTES = {
    "refuse": "refused (each check runs in a process of its own; an import of the agent's code there fails and is a "
    "tamper event: call it through t1check)",
    "record": (
        "allowed and recorded (an imported task: its checks may import the agent's code into the check's "
        "process, where that code can set the check's own result but no other; "
        "info['checks_trusting_agent_code'] names them)"
    ),
}

console = Console(soft_wrap=True)
err_console = Console(stderr=True, soft_wrap=True)


def _cmd_list(args) -> int:
    rows = []
    found = discover()
    for tid in list_tasks(split=args.split):
        t = get_task(tid)
        rows.append(
            {
                "id": tid,
                "category": t.spec.category,
                "difficulty": t.spec.difficulty,
                "checks": len(t.declared_checks()),
                "split": split_of(tid, pkg=found.get(tid)),
                "title": t.spec.title,
            }
        )
    fams = []
    for fam in FAMILIES.values():
        t = get_task(fam.instance_id(0))
        fams.append(
            {
                "id": f"{fam.name}@SEED",
                "kind": "family",
                "category": fam.category,
                "difficulty": fam.difficulty,
                "checks": len(t.declared_checks()),
                "split": "s%5==0: test",
                "title": fam.description,
            }
        )
    if args.json:
        print(json.dumps(rows + fams, indent=2))
        return 0
    table = Table(title=f"{len(rows)} tasks")
    for col in ("id", "category", "difficulty", "checks", "split", "title"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(*(escape(str(r[c])) for c in ("id", "category", "difficulty", "checks", "split", "title")))
    console.print(table)
    table = Table(title=f"{len(fams)} task families (run one as FAMILY@SEED, e.g. logs@17)")
    for col in ("id", "category", "difficulty", "checks", "split", "title"):
        table.add_column("checks (seed 0)" if col == "checks" else col, overflow="fold")
    for r in fams:
        table.add_row(*(escape(str(r[c])) for c in ("id", "category", "difficulty", "checks", "split", "title")))
    console.print(table)
    return 0


def _cmd_show(args) -> int:
    t = get_task(args.task)
    s = t.spec
    console.print(f"[bold]{escape(s.id)}[/bold] — {escape(s.title)}")
    instance = parse_instance_id(args.task)
    split = split_of_seed(instance[1]) if instance else split_of(s.id, pkg=t.path)
    # every value from the package is escaped: a category like "[/]" is text, not rich markup
    console.print(
        f"category {escape(s.category)} · difficulty {s.difficulty} · split {split} · "
        f"tags {escape(', '.join(s.tags)) or '-'}"
    )
    console.print(f"path {escape(str(t.path))}")
    if t.origin is not None:
        o = t.origin
        console.print(
            f"format {o.format} · verifier {o.verifier}"
            + (f" ({o.script})" if o.script else "")
            + (f" · eval-only: {escape(o.eval_only)}" if o.eval_only else "")
            + (f" · steps {', '.join(st.origin.step_name for st in o.steps)}" if o.steps else "")
        )
        for n in o.notes:
            console.print(f"  note: {escape(n)}")
        if o.local_problem:
            console.print(f"  local backend: {escape(o.local_problem)}")
    console.print(f"limits {escape(str(s.limits.model_dump()))}")
    console.print(f"environment {escape(str(s.environment.model_dump(exclude_none=True)))}")
    console.print(f"checks ({len(t.declared_checks())}): " + escape(", ".join(t.declared_checks())))
    console.print(f"verifier: {VERIFIER_MODE_NOTES[s.verifier.mode]}")
    console.print(f"agent code in checks: {AGENT_CODE_NOTES['refuse' if t.origin is None else 'record']}")
    console.print(f"oracle commands: {oracle_command_count(t)}")
    console.rule("instruction")
    console.print(escape(t.instruction))
    return 0


def _checks_table(info: dict) -> Table:
    table = Table(title=f"{info['task_id']}: {info['passed']}/{info['total']} checks passed")
    table.add_column("check", overflow="fold")
    table.add_column("result")
    table.add_column("message", overflow="fold", max_width=70)
    for c in info["checks"]:
        mark = "[green]pass[/green]" if c["passed"] else f"[red]{c['outcome']}[/red]"
        msg = c["message"].strip().splitlines()[0] if c["message"].strip() else ""
        table.add_row(escape(c["name"]), mark, escape(msg))
    return table


def _cmd_run(args) -> int:
    task = get_task(args.task)
    env = TerminalEnv(task=str(task.path), backend=args.backend, reward_mode=args.reward_mode, max_turns=args.max_turns)
    agent = {"oracle": lambda: OracleAgent(task), "nop": NopAgent, "human": HumanAgent}[args.agent]()
    try:
        quiet = args.json or args.agent == "human"
        with _null() if quiet else console.status(f"running {task.id} with the {args.agent} agent on {args.backend}"):
            ep = run_episode(env, agent, seed=args.seed)
    finally:
        env.close()
    info = ep.info
    if args.json:
        out = {
            k: info[k]
            for k in ("task_id", "checks", "passed", "total", "resolved", "verifier_error", "end_reason", "elapsed")
        }
        out.update(
            reward=ep.reward, reward_mode=args.reward_mode, agent=args.agent, backend=args.backend, turns=ep.turns
        )
        print(json.dumps(out, indent=2))
    else:
        console.print(_checks_table(info))
        status = "[green]resolved[/green]" if info["resolved"] else "[yellow]not resolved[/yellow]"
        console.print(
            f"reward {ep.reward:g} ({args.reward_mode}) · {status} · {ep.turns} turns · ended by {info['end_reason']} "
            f"· {info['elapsed']:.2f}s"
        )
        if info.get("verifier_error"):
            console.print(f"[red]verifier: {escape(info['verifier_error'])}[/red]")
    return 0


def _cmd_validate(args) -> int:
    if args.all:
        refs = [str(p) for _, p in sorted(discover().items())] + calibration_refs()
    else:
        refs = args.paths
    runs = args.runs if args.runs is not None else (3 if args.all else 2)
    if not refs:
        err_console.print("t1env validate: give task folders or --all")
        return 2
    results = []
    with console.status(f"validating {len(refs)} task(s) with {args.jobs} job(s)") if not args.json else _null():
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            exploit_jobs = max(1, args.jobs // len(refs))  # spare workers play one task's exploits at once
            for v in pool.map(
                lambda r: validate_task(
                    r, backend=args.backend, runs=runs, exploits=args.exploits, exploit_jobs=exploit_jobs
                ),
                refs,
            ):
                results.append(v)
                if not args.json:
                    mark = "[green]ok[/green]" if v.ok else "[red]FAIL[/red]"
                    oracle = ", ".join(f"{p}/{t}" for p, t in v.oracle) or "-"
                    nop = f"{v.nop[0]}/{v.nop[1]}" if v.nop else "-"
                    console.print(f"{mark} {escape(v.task)}  oracle {oracle}  no-op {nop}  ({v.duration:.1f}s)")
                    for p in v.problems:
                        console.print(f"    [red]{escape(p)}[/red]")
                    if args.verbose:
                        _print_exploits(v)
    bad = [v for v in results if not v.ok]
    if args.json:
        print(json.dumps([v.__dict__ for v in results], indent=2))
    else:
        console.print(f"{len(results) - len(bad)}/{len(results)} tasks valid")
    return 1 if bad else 0


def _print_exploits(v) -> None:
    """``validate -v``: what each exploit earned against the no-op agent, and the checks it gained."""
    nop = v.nop[0] if v.nop else 0
    for e in v.exploits:
        summary = EXPLOITS[e["name"]].summary if e["name"] in EXPLOITS else ""
        if e["error"]:
            line = f"error: {e['error']}"
        elif e["passed"] is None:
            line = "nothing to act on (scores as the no-op agent)"
        else:
            line = f"{e['passed']}/{e['total']} ({e['passed'] - nop:+d} over the no-op agent)"
        console.print(f"    exploit {e['name']:<23} {escape(line)}  [dim]{escape(summary)}[/dim]")
        for check in e["gained"]:
            console.print(f"      + {escape(check)}")


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


_TOML = """id = "{id}"
title = "TODO: one line saying what the agent must achieve"
category = "files"          # e.g. files, text, data, git, build, debugging, sql, sysadmin, services, archives, scripting, performance, processes
difficulty = "easy"         # easy | medium | hard
tags = []

[limits]
max_turns = 30
command_timeout = 30
agent_timeout = 900
verifier_timeout = 60

[environment]
workdir = "/app"
network = false
tools = []                  # programs the task needs inside the sandbox, e.g. ["git", "gcc"]
"""

_INSTRUCTION = "TODO: tell the agent exactly what to do, and which paths and formats are checked.\n"
_SOLVE = """#!/usr/bin/env bash
# The oracle: solves the task from the starting state in /app. `t1env validate` runs it.
set -euo pipefail
cd /app
# TODO
"""
_TEST = '''"""Each test function is one check: the reward is how many pass. Test outcomes, not commands."""

from pathlib import Path

APP = Path("/app")


def test_todo_first_outcome():
    assert False, "TODO: check something the agent must produce"


def test_todo_second_outcome():
    assert False, "TODO"


def test_todo_third_outcome():
    assert False, "TODO"
'''


def _cmd_new(args) -> int:
    if not re.fullmatch(TASK_ID_PATTERN, args.id) or len(args.id) > 80:
        err_console.print(
            f"t1env new: {escape(repr(args.id))} is not a task id: lower-case letters, digits, '.', '_' "
            "and '-', starting with a letter or digit, at most 80 characters",
            highlight=False,
        )
        return 2
    root = Path(args.dir) / args.id
    if root.exists():
        err_console.print(f"t1env new: {root} already exists")
        return 2
    (root / "environment").mkdir(parents=True)
    (root / "solution").mkdir()
    (root / "tests").mkdir()
    (root / "task.toml").write_text(_TOML.format(id=args.id))
    (root / "instruction.md").write_text(_INSTRUCTION)
    (root / "solution" / "solve.sh").write_text(_SOLVE)
    os.chmod(root / "solution" / "solve.sh", 0o755)
    (root / "environment" / ".keep").write_text("")
    (root / "tests" / "test_outputs.py").write_text(_TEST)
    console.print(f"created {root}: fill in the TODOs, then run `t1env validate {root}`")
    return 0


def _cmd_gc(args) -> int:
    removed = local_backend.gc()
    console.print(f"removed {removed} orphaned local sandbox folder(s) and their cgroups")
    try:
        from t1env.sandbox import docker as docker_backend  # needs the docker extra's packages (requests)
    except ImportError:
        return 0
    try:
        n = docker_backend.gc()
        console.print(f"removed {n} orphaned Docker container(s)")
    except SandboxError as e:
        console.print(f"docker: {e}")
    return 0


def _cmd_catalog(args) -> int:
    sys.stdout.write(render())
    return 0


def _cmd_decontam(args) -> int:
    if args.n < 1 or not 0 < args.threshold <= 1:
        raise ValueError("--n must be >= 1 and --threshold in (0, 1]")
    theirs = read_corpus(args.against)
    ours = read_ours(family_seeds=args.family_seeds)
    matches = compare(ours, theirs, n=args.n, threshold=args.threshold, min_shared=args.min_shared)
    if args.json:
        print(json.dumps([m.__dict__ for m in matches], indent=2))
    else:
        table = Table(title=f"{len(matches)} pair(s) over containment {args.threshold:g} ({args.n}-grams)")
        for col in ("ours", "theirs", "part", "shared", "containment", "jaccard"):
            table.add_column(col, overflow="fold")
        for m in matches:
            table.add_row(
                escape(m.ours), escape(m.theirs), m.part, str(m.shared), f"{m.containment:.2f}", f"{m.jaccard:.2f}"
            )
        if matches:
            console.print(table)
        n_ours, n_theirs = len({d.task for d in ours}), len({d.task for d in theirs})
        console.print(
            f"compared {n_ours} of our tasks with {n_theirs} task(s) under {escape(args.against)}: "
            + (f"[red]{len(matches)} overlapping pair(s)[/red]" if matches else "[green]no overlap[/green]")
        )
    return 1 if matches else 0


def _cmd_export(args) -> int:
    tasks = [get_task(t) for t in args.tasks]
    for d in export(tasks, args.format, args.out):
        console.print(f"wrote {d}")
    return 0


def _cmd_images(args) -> int:
    entries = build_bases(log=None if args.quiet else (lambda line: err_console.print(escape(line), highlight=False)))
    for public, local in entries.items():
        console.print(f"{public} -> {local}")
    if args.map:
        images.write_map(Path(args.map), entries)
        console.print(f"wrote {args.map}: use it with --image-map {args.map} or {images.MAP_ENV}={args.map}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="t1env", description="t1 terminal environments: tasks, sandboxes, verifiers.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--tasks-dir",
        action="append",
        default=[],
        metavar="DIR",
        help="another folder of task packages (t1, Terminal-Bench or Harbor layout); repeatable",
    )
    common.add_argument(
        "--image-map", metavar="FILE", help="TOML map of public image = local image (sets T1ENV_IMAGE_MAP)"
    )

    p = sub.add_parser("list", help="list the known tasks", parents=[common])
    p.add_argument("--split", choices=["train", "test"])
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=_cmd_list)

    p = sub.add_parser("show", help="show one task", parents=[common])
    p.add_argument("task", help="task id or path")
    p.set_defaults(fn=_cmd_show)

    p = sub.add_parser("run", help="run one episode and print the per-check results", parents=[common])
    p.add_argument("task", help="task id or path")
    p.add_argument("--agent", choices=["oracle", "nop", "human"], default="oracle")
    p.add_argument("--backend", choices=BACKENDS, default="local")
    p.add_argument("--reward-mode", choices=REWARD_MODES, default="count")
    p.add_argument("--max-turns", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")
    p.set_defaults(fn=_cmd_run)

    p = sub.add_parser(
        "validate",
        help="check tasks: oracle full marks, no-op less, deterministic verifier, no exploit "
        "earns more than one check over the no-op",
        parents=[common],
    )
    p.add_argument("paths", nargs="*", help="task folders (or ids)")
    p.add_argument("--all", action="store_true", help="every known task and the calibration seeds of every family")
    p.add_argument(
        "--runs",
        type=at_least_one,
        default=None,
        help="oracle runs per task, results must be identical (default 2; 3 with --all)",
    )
    p.add_argument(
        "--jobs", type=at_least_one, default=max(1, (os.cpu_count() or 2)), help="tasks validated in parallel"
    )
    p.add_argument("--backend", choices=BACKENDS, default="local")
    p.add_argument(
        "--exploits",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="play the exploit gate: generic shortcuts that must not earn more than one check over the "
        "no-op agent (default: on; --no-exploits skips it)",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="print what every exploit earned, per check")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=_cmd_validate)

    p = sub.add_parser("new", help="scaffold a new task package")
    p.add_argument("id")
    p.add_argument("--dir", default="tasks")
    p.set_defaults(fn=_cmd_new)

    p = sub.add_parser("gc", help="remove sandboxes left behind by crashed processes")
    p.set_defaults(fn=_cmd_gc)

    p = sub.add_parser("catalog", help="print the task catalogue (docs/tasks.md) generated from the packages")
    p.set_defaults(fn=_cmd_catalog)

    p = sub.add_parser("decontam", help="list our tasks that overlap another task corpus (word n-grams); exit 1 if any")
    p.add_argument("--against", required=True, help="folder of task folders (Terminal-Bench, Harbor or t1 layout)")
    p.add_argument(
        "--threshold", type=float, default=0.3, help="containment (shared / smaller text's n-grams) to report"
    )
    p.add_argument("--n", type=int, default=8, help="words per n-gram")
    p.add_argument("--min-shared", type=int, default=10, help="n-grams a pair must share to be reported")
    p.add_argument("--family-seeds", type=int, default=3, help="instances per family to compare (seeds 0..K-1)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=_cmd_decontam)

    p = sub.add_parser("export", help="write t1 tasks as Harbor or Terminal-Bench task folders (docs/compat.md)")
    p.add_argument("tasks", nargs="+", metavar="TASK", help="task ids or folders")
    p.add_argument("--format", required=True, choices=["harbor", "terminal-bench"])
    p.add_argument("--out", required=True, help="folder to write the task folders into")
    p.set_defaults(fn=_cmd_export)

    p = sub.add_parser("images", help="local images for imported tasks (docs/compat.md)")
    isub = p.add_subparsers(dest="images_cmd", required=True)
    q = isub.add_parser("build-bases", help="build local stand-ins for the common Terminal-Bench base images")
    q.add_argument("--map", help="image map file to write the entries into (TOML)")
    q.add_argument("--quiet", action="store_true", help="do not stream the build log")
    q.set_defaults(fn=_cmd_images)

    add_eval_parsers(sub)  # eval, report
    return ap


def console_main() -> None:
    """The ``t1env`` command (and ``python -m t1env``): :func:`main` in a process of its own.

    Only here is SIGPIPE set back to its default, so that ``t1env list | head`` ends quietly; :func:`main`
    called in-process (tests, notebooks, other tools) leaves the caller's signal handling alone, since a
    process with SIGPIPE at its default dies on the first write to a closed pipe instead of raising.
    """
    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.exit(main())


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "tasks_dir", None):
        os.environ[PATH_ENV] = os.pathsep.join([*args.tasks_dir, *filter(None, [os.environ.get(PATH_ENV)])])
    if getattr(args, "image_map", None):
        os.environ[MAP_ENV] = str(Path(args.image_map).resolve())
    try:
        load_map()  # a malformed map fails now, in one line
        return args.fn(args)
    except (T1Error, ValueError) as e:  # t1's own errors (task, sandbox, image map, ...) and bad values
        err_console.print(f"t1env {args.cmd}: {escape(str(e))}", highlight=False)
        return 2
    except OSError as e:  # a path that is missing, a folder, a file, unreadable: its message names it
        err_console.print(f"t1env {args.cmd}: {escape(str(e))}", highlight=False)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
