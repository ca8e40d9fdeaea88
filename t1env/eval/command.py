"""``t1env eval`` and ``t1env report``: argument parsing, the live progress display, the summary table.

t1env eval TASK... | --split S | --family NAME --seeds A:B | --tasks-dir DIR
           [--agent oracle|noop|openai|module:Class] [--attempts K] [--concurrency N] [--backend local|docker]
           [--out DIR | --resume DIR] [--max-turns N] [--model M --base-url URL --api-key-env VAR] [--json]
t1env report DIR [DIR_B]
"""

from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from t1env.episode.verify import REWARD_MODES
from t1env.eval.agents import EvalOptions, check_agent_spec
from t1env.eval.harness import EvalConfig, plan_trials, run_job
from t1env.eval.report import write_report
from t1env.eval.results import read_json
from t1env.families import FAMILIES
from t1env.registry import list_tasks
from t1env.sandbox import BACKENDS

console = Console(soft_wrap=True)
err_console = Console(stderr=True, soft_wrap=True)


def _seeds(text: str) -> range:
    a, sep, b = text.partition(":")
    try:
        lo, hi = int(a), int(b)
    except ValueError:
        raise ValueError(f"--seeds {text!r}: expected A:B (seeds A..B-1), e.g. 0:5") from None
    if not sep or hi <= lo or lo < 0:
        raise ValueError(f"--seeds {text!r}: expected A:B with 0 <= A < B, e.g. 0:5")
    return range(lo, hi)


def task_refs(args) -> list[str]:
    """The task references named on the command line, in order."""
    refs = list(args.tasks)
    if args.split:
        refs += list_tasks(split=args.split)
    if args.family:
        if args.family not in FAMILIES:
            raise ValueError(f"--family {args.family!r}: unknown; one of {', '.join(sorted(FAMILIES))}")
        if not args.seeds:
            raise ValueError("--family needs --seeds A:B")
        refs += [f"{args.family}@{s}" for s in _seeds(args.seeds)]
    elif args.seeds:
        raise ValueError("--seeds goes with --family NAME")
    for d in args.tasks_dir or []:
        root = Path(d)
        if not root.is_dir():
            raise ValueError(f"--tasks-dir {d}: not a folder")
        found = sorted(
            str(p)
            for p in root.iterdir()
            if p.is_dir() and ((p / "task.toml").is_file() or (p / "task.yaml").is_file())
        )
        if not found:
            raise ValueError(f"--tasks-dir {d}: no task folders (with task.toml or task.yaml) in it")
        refs += found
    return refs


def _config_from_args(args) -> EvalConfig:
    options = EvalOptions(
        model=args.model,
        base_url=args.base_url,
        api_key_env=args.api_key_env,
        temperature=args.temperature,
        max_tokens=args.max_tokens,
        max_observation_chars=args.max_observation_chars,
        tool_mode=args.tool_mode,
        protocol=args.protocol,
        context_policy=args.context_policy,
        max_context_tokens=args.max_context_tokens,
        max_retries=args.max_retries,
        request_timeout=args.request_timeout,
        price_prompt_per_mtok=args.price_prompt,
        price_completion_per_mtok=args.price_completion,
    )
    for flag, value in (
        ("--max-tokens", args.max_tokens),
        ("--max-observation-chars", args.max_observation_chars),
        ("--max-context-tokens", args.max_context_tokens),
    ):
        if value is not None and value < 1:
            raise ValueError(f"{flag} must be an integer >= 1, got {value}")
    for flag, value in (
        ("--max-retries", args.max_retries),
        ("--price-prompt", args.price_prompt),
        ("--price-completion", args.price_completion),
        ("--temperature", args.temperature),
    ):
        if value < 0:
            raise ValueError(f"{flag} must be >= 0, got {value}")
    if not args.request_timeout > 0:
        raise ValueError(f"--request-timeout must be > 0 seconds, got {args.request_timeout}")
    return EvalConfig(
        tasks=task_refs(args),
        agent=args.agent,
        attempts=args.attempts,
        concurrency=args.concurrency,
        backend=args.backend,
        reward_mode=args.reward_mode,
        max_turns=args.max_turns,
        task_dirs=[str(Path(d)) for d in args.task_dir or []],
        options=options,
        ray=args.ray,
    )


def summary_table(m: dict) -> Table:
    table = Table(title="per task")
    for col in ("task", "trials", "resolved", "rate (95% CI)", "mean passed", "checks"):
        table.add_column(col, overflow="fold")
    for tid, r in m["per_task"].items():
        lo, hi = r["resolved_ci95"]
        table.add_row(
            escape(tid),
            str(r["n_trials"]),
            str(r["resolved"]),
            f"{r['resolved_rate']:.2f} [{lo:.2f}, {hi:.2f}]",
            f"{r['mean_passed']:.2f}",
            str(r["total_checks"]),
        )
    return table


def print_summary(m: dict, job_dir: Path) -> None:
    console.print(summary_table(m))
    for key, title in (("per_category", "category"), ("per_difficulty", "difficulty")):
        parts = [f"{escape(k)} {v['resolved_rate']:.2f} (n={v['n_trials']})" for k, v in m[key].items()]
        console.print(f"by {title}: " + ", ".join(parts))
    lo, hi = m["resolved_ci95"]
    curve = ", ".join(f"pass@{k} {v:.3f}" for k, v in m["pass_at_k"].items())
    console.print(
        f"[bold]resolved {m['resolved']}/{m['n_trials']} = {m['resolved_rate']:.3f}[/bold] "
        f"(95% Wilson [{lo:.3f}, {hi:.3f}]) · mean passing fraction {m['mean_passed_fraction']:.3f} · "
        f"mean passing checks {m['mean_passed']:.2f} · {curve}"
    )
    errs = ", ".join(f"{k} {v}" for k, v in m["errors_by_kind"].items()) or "none"
    console.print(
        f"errors: {errs} · mean wall time {m['mean_wall_time_s']:.2f}s/trial · mean turns {m['mean_turns']:.1f} · "
        f"tokens {m['tokens']['mean_prompt_per_trial']:.0f} prompt + {m['tokens']['mean_completion_per_trial']:.0f} "
        f"completion per trial"
    )
    state = "complete" if m["complete"] else f"[yellow]incomplete ({m['n_trials']}/{m['n_expected_trials']})[/yellow]"
    console.print(f"job {state}: {escape(str(job_dir))}")


def cmd_eval(args) -> int:
    if args.resume:
        if args.tasks or args.split or args.family or args.tasks_dir or args.out:
            raise ValueError(
                f"--resume {args.resume}: the job's config.json says what to run; drop the task arguments and --out"
            )
        job_dir = Path(args.resume)
        config = EvalConfig.load(job_dir)
    else:
        config = _config_from_args(args)
        job_dir = Path(args.out or f"runs/eval-{time.strftime('%Y%m%d-%H%M%S')}")
        if (job_dir / "config.json").exists():
            raise ValueError(f"--out {job_dir}: already a job folder; continue it with --resume {job_dir}")
    check_agent_spec(config.agent, config.options)  # bad input fails here, before the progress display
    plan_trials(config)
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        disable=args.json,
        transient=False,
    )
    bar = progress.add_task("eval", total=None)

    def on_start(total: int, already: int) -> None:
        progress.update(
            bar,
            total=total,
            completed=already,
            description=f"{config.agent} · {already} done before" if already else config.agent,
        )

    def on_trial(r: dict, m: dict) -> None:
        if args.json:
            return
        mark = "resolved" if r["resolved"] else (r["error"]["kind"] if r["error"] else "not resolved")
        progress.console.print(
            f"{escape(r['trial'])}: {r['passed']}/{r['total']} {mark} ({r['wall_time_s']:.1f}s)", highlight=False
        )
        progress.update(
            bar,
            advance=1,
            description=(
                f"{config.agent} · resolved {m['resolved_rate']:.2f} · passing {m['mean_passed_fraction']:.2f}"
            ),
        )

    interrupted = False
    try:
        with progress:
            try:
                m = run_job(config, job_dir, stop=stop, on_trial=on_trial, on_start=on_start)
            except KeyboardInterrupt:
                if not (job_dir / "result.json").is_file():
                    raise  # stopped before the job began: nothing to report
                interrupted = True
                m = read_json(job_dir / "result.json")
    finally:
        signal.signal(signal.SIGTERM, previous)
    interrupted = interrupted or stop.is_set()
    if args.json:
        print(json.dumps({"job_dir": str(job_dir), **m}, indent=2))
    else:
        print_summary(m, job_dir)
        if interrupted:
            err_console.print(f"stopped: finished trials are kept; continue with `t1env eval --resume {job_dir}`")
    return 130 if interrupted else 0


def cmd_report(args) -> int:
    paths = write_report([Path(d) for d in args.jobs], out=Path(args.out) if args.out else None)
    for p in paths:
        console.print(f"wrote {escape(str(p))}")
    return 0


def add_parsers(sub) -> None:
    """Add ``eval`` and ``report`` to ``t1env``'s subcommands."""
    p = sub.add_parser("eval", help="evaluate an agent over a task set into a job folder (metrics, trajectories)")
    p.add_argument("tasks", nargs="*", help="task ids, package paths or family instances (NAME@SEED)")
    p.add_argument("--split", choices=["train", "test"], help="every built-in task of this split")
    p.add_argument("--family", help="a task family (t1env list shows them); with --seeds A:B")
    p.add_argument("--seeds", help="family seeds A:B (A..B-1)")
    p.add_argument("--tasks-dir", action="append", help="every task folder in DIR (t1, Terminal-Bench or Harbor)")
    p.add_argument("--task-dir", action="append", help="extra folder to look task ids up in")
    p.add_argument("--agent", default="oracle", help="oracle | noop | openai | hf | module:Class (default oracle)")
    p.add_argument("--attempts", type=int, default=1, help="trials per task (pass@k for every k <= attempts)")
    p.add_argument("--concurrency", type=int, default=1, help="trials run at the same time")
    p.add_argument("--backend", choices=BACKENDS, default="local")
    p.add_argument(
        "--ray",
        nargs="?",
        const="auto",
        default=None,
        metavar="ADDRESS",
        help="run the sandboxes on Ray workers (docs/scaling.md); ADDRESS of the cluster, default auto",
    )
    p.add_argument("--reward-mode", choices=REWARD_MODES, default="count")
    p.add_argument("--max-turns", type=int, default=None, help="actions per trial (default: the task's)")
    p.add_argument("--out", help="job folder (default runs/eval-<timestamp>)")
    p.add_argument("--resume", metavar="DIR", help="continue the job in DIR: finished trials are kept")
    p.add_argument("--model", help="model name (--agent openai) or checkpoint folder (--agent hf)")
    p.add_argument("--base-url", help="OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1")
    p.add_argument("--api-key-env", default="OPENAI_API_KEY", help="environment variable with the API key")
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument(
        "--max-tokens",
        type=int,
        default=None,
        help="completion tokens per model call (default: the checkpoint's t1_protocol.json, else 1024)",
    )
    p.add_argument("--max-observation-chars", type=int, default=8000, help="observation characters per turn")
    p.add_argument(
        "--protocol",
        choices=["text", "tools"],
        default=None,
        help="agent protocol (docs/protocol.md): text (the action in the reply) or tools (tool calling); "
        "default: --agent hf the checkpoint's (t1_protocol.json), --agent openai --tool-mode",
    )
    p.add_argument(
        "--context-policy",
        choices=["end", "drop_observations", "summary"],
        default=None,
        help="--agent hf: when the next turn would not fit the context, end the trial or go on in a new segment "
        "(docs/training.md, Long episodes); default: the checkpoint's (t1_protocol.json), else end",
    )
    p.add_argument(
        "--max-context-tokens",
        type=int,
        default=None,
        help="--agent hf: the context budget (default: the checkpoint's t1_protocol.json, else none)",
    )
    p.add_argument(
        "--tool-mode",
        choices=["auto", "tools", "text"],
        default="auto",
        help="--agent openai without --protocol: tools with a text fallback (auto), tools or text",
    )
    p.add_argument("--max-retries", type=int, default=5, help="retries of a model call on 429/5xx (backoff)")
    p.add_argument("--request-timeout", type=float, default=120.0, help="seconds per model request")
    p.add_argument("--price-prompt", type=float, default=0.0, help="USD per million prompt tokens (cost estimate)")
    p.add_argument("--price-completion", type=float, default=0.0, help="USD per million completion tokens")
    p.add_argument("--json", action="store_true", help="print the job's metrics as JSON, no progress display")
    p.set_defaults(fn=cmd_eval)

    p = sub.add_parser("report", help="write report.md and report.html for a job folder, or compare two")
    p.add_argument("jobs", nargs="+", metavar="DIR", help="one job folder, or two to compare (A then B)")
    p.add_argument("--out", help="folder for the report (default: the first job folder)")
    p.set_defaults(fn=cmd_report)
