"""Benchmark: what one episode costs, phase by phase, and oracle episodes per second, on both backends.

Three parts, each with its baselines measured in the same run, and a markdown table on stdout:

1. **Phases** of a ``hello-file`` episode (5 checks) with this checkout, ``prepare_verifier`` on and off in two envs
   played alternately: ``reset()`` with the sandbox pre-started (the default) and cold (a new env, ``prestart=False``),
   a command round trip (``env.step('true')`` and the shell's own ``ShellSession.run('true')``), the oracle's solve
   step, the submit step (the verification the agent waits for) and ``info["verify_duration"]`` (verify's own clock),
   and the teardown (``ShellSession.close()`` + ``Sandbox.stop()``, timed apart: with ``prestart`` it runs in the
   background). Locally, also a block with verifier zygotes off (``T1_VERIFIER_ZYGOTE=0``: the prepared verifier
   starts an interpreter and imports pytest per episode). Baselines: a bare ``bash -c true`` and a bare pytest start
   (this interpreter's ``python -I -m pytest`` over one trivial test, plugin autoload off: about a minimal venv).
2. **Oracle episodes/s** over the four short tasks of ``bench/ray_executor.py``, 1 and 2 workers (driver threads),
   each configuration in a child process of its own, configurations alternating within each round (median over
   rounds): ``fresh`` makes a new env per episode with ``prestart=False`` (what ``bench/ray_executor.py`` and the issue
   measured, and what ``t1train`` and ``t1env eval`` do; this checkout's fresh envs share one zygote pool, as theirs
   do), ``kept`` keeps one env per task and worker (``prestart=True``: the next sandbox starts, and for a one-task
   env its workdir is prepared, while the episode runs), with ``prepare_verifier`` on (locally: with the verifier
   zygote, the default, and with zygotes off) and off. Beside the rate, the CPU seconds an episode costs on the host (the child's own ``cpuacct`` cgroup, as root: every sandbox and verifier
   process included; Docker's containers are the engine's): on a shared machine the rate follows the load, this not.
3. **Today's figure**, side by side: the local 1-worker episodes/s children also run with ``--compare REV`` (default
   ``bce6b5c``, main when the issue was filed; ``git archive`` into a temp folder, put first on ``PYTHONPATH``),
   alternating with this checkout's.

Docker parts run when an engine answers, and are skipped with a line otherwise. ``prepare_verifier`` is passed only
when this checkout's ``EnvKwargs`` has it. Runs in a few minutes on a 2-core machine with the defaults.

Usage: python bench/episode_cost.py [--rounds 2] [--runs 8] [--episodes 12] [--backends local,docker] [--compare REV]
Goals (issue 27): verify of hello-file <= 0.3x a bare pytest start locally and <= 250 ms on Docker; prestarted local
reset <= 1.5 ms; Docker round trip <= 0.6 ms; oracle episodes/s on the 4 short tasks >= 2x today's, 1 worker, local.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import t1env
from t1env.env import TerminalEnv
from t1env.registry import get_task
from t1env.sandbox import make_sandbox
from t1env.sandbox.docker_engine import engine_available

try:
    from t1env.agent.reference import OracleAgent, oracle_command, run_episode
    from t1env.episode.shell import ShellSession
except ImportError:  # a checkout from before the layer folders (--compare REV runs this file with it)
    from t1env.agents import OracleAgent, oracle_command, run_episode  # type: ignore[no-redef]
    from t1env.shell import ShellSession  # type: ignore[no-redef]

TASKS = ["hello-file", "log-error-summary", "json-config-merge", "git-recover-branch"]  # bench/ray_executor.py's
ROOT = Path(__file__).resolve().parent.parent
BEFORE = "bce6b5c"  # main when issue 27 was filed: its "today's" figures


def timed(fn, n: int) -> list[float]:
    """Seconds of each of ``n`` calls (bench/env_latency.py's helper; not imported: a --compare child may run this
    file with an older checkout, which env_latency.py's imports do not fit)."""
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def ms(xs: list[float]) -> float:
    return statistics.median(xs) * 1e3


def env_kwargs(prepare: bool | None) -> dict:
    """``prepare_verifier`` when this checkout has it (and one was asked for), else nothing."""
    try:
        from t1env.options import EnvKwargs
    except ImportError:
        return {}
    return {"prepare_verifier": prepare} if prepare is not None and "prepare_verifier" in EnvKwargs.model_fields else {}


# -- part 1: the phases of one episode --------------------------------------------------------------------------
def phases(backend: str, runs: int, only_on: bool = False) -> dict[str, dict[str, list[float]]]:
    """{row: {"on"/"off": seconds}}: a hello-file episode's phases, prepare_verifier on and off, alternating
    (``only_on``: on only)."""
    task = get_task("hello-file")
    solve = oracle_command(task)
    modes = ("on", "off") if env_kwargs(True) and not only_on else ("on",)
    envs = {
        m: TerminalEnv(task="hello-file", backend=backend, max_turns=100_000, **env_kwargs(m == "on")) for m in modes
    }
    rows: dict[str, dict[str, list[float]]] = {}

    def add(row: str, mode: str, xs: list[float]) -> None:
        rows.setdefault(row, {}).setdefault(mode, []).extend(xs)

    try:
        for i in range(runs + 1):
            for mode, env in envs.items():
                got: dict[str, list[float]] = {}
                got["reset, prestarted (default)"] = timed(lambda: env.reset(seed=i), 1)
                got["env.step('true') round trip"] = timed(lambda: env.step("true"), 20)
                got["ShellSession.run('true') round trip"] = timed(lambda: env.shell.run("true"), 20)
                got["oracle's solve step"] = timed(lambda: env.step({"command": solve, "timeout": 120}), 1)
                t0 = time.perf_counter()
                *_, info = env.step({"submit": True})
                got["submit: verify (what the agent waits)"] = [time.perf_counter() - t0]
                got["info['verify_duration']"] = [info["verify_duration"]]
                assert info["resolved"], info
                if i:  # the first episode warms caches (imports, the runtime bundle, images)
                    for row, xs in got.items():
                        add(row, mode, xs)
    finally:
        for env in envs.values():
            env.close()
    for i in range(runs + 1):  # cold: a new env, no sandbox waiting for it
        for mode in modes:
            env = TerminalEnv(task="hello-file", backend=backend, prestart=False, **env_kwargs(mode == "on"))
            try:
                dt = timed(lambda: env.reset(seed=i), 1)
            finally:
                env.close()
            if i:
                add("reset, cold (prestart=False)", mode, dt)
    for i in range(runs + 1):
        box = make_sandbox(backend, task)
        box.start()
        shell = ShellSession(box)
        shell.start()
        t0 = time.perf_counter()
        shell.close()
        box.stop()
        if i:
            add("teardown: shell.close() + sandbox.stop()", "on", [time.perf_counter() - t0])
    return rows


def baselines(runs: int) -> dict[str, list[float]]:
    d = Path(tempfile.mkdtemp(prefix="t1-bench-"))
    (d / "test_one.py").write_text("def test_one():\n    assert True\n")
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    pytest_argv = [sys.executable, "-I", "-m", "pytest", "-q", "-p", "no:cacheprovider", str(d / "test_one.py")]
    subprocess.run(pytest_argv, env=env, cwd=d, capture_output=True, check=True)  # warm the page cache
    out = {
        "baseline: bare `bash -c true`": timed(lambda: subprocess.run(["bash", "-c", "true"], check=True), runs * 4),
        "baseline: bare pytest start, 1 trivial test": timed(
            lambda: subprocess.run(pytest_argv, env=env, cwd=d, capture_output=True, check=True), runs
        ),
    }
    shutil.rmtree(d)
    return out


# -- part 2: oracle episodes per second (run in a child process per configuration) ----------------------------
def play(backend: str, workers: int, mode: str, episodes: int, prepare: bool | None) -> dict:
    """Oracle episodes over TASKS on ``workers`` driver threads; wall seconds after a warm-up, and the rewards."""
    kw = env_kwargs(prepare)
    shared = None  # fresh envs share one verifier zygote pool, as t1train's and t1env eval's do (this checkout's)
    if mode == "fresh" and backend == "local" and "shared_zygote_pool" in dir(TerminalEnv):
        from t1env.sandbox.local_zygote import ZygotePool, shared_max_idle

        shared = ZygotePool(max_idle=shared_max_idle())
    lock = threading.Lock()
    jobs: list[int] = []
    rewards: list[float] = []
    kept: list[dict[str, TerminalEnv]] = [{} for _ in range(workers)]
    cpu: list[float] = []
    group = own_cpu_cgroup()

    def cpu_seconds() -> float:
        return int((group / "cpuacct.usage").read_text()) / 1e9 if group is not None else float("nan")

    def slot(w: int) -> None:
        while True:
            with lock:
                if not jobs:
                    return
                i = jobs.pop()
            tid = TASKS[i % len(TASKS)]
            task = get_task(tid)
            if mode == "fresh":
                extra = {"zygote_pool": shared} if shared is not None else {}
                env = TerminalEnv(task=str(task.path), backend=backend, prestart=False, **kw, **extra)
            else:
                env = kept[w].get(tid) or kept[w].setdefault(tid, TerminalEnv(task=tid, backend=backend, **kw))
            try:
                ep = run_episode(env, OracleAgent(task), seed=i)
            finally:
                if mode == "fresh":
                    env.close()
            with lock:
                rewards.append(ep.reward)

    def run(n: int) -> float:
        jobs[:] = list(range(n))
        cpu[:] = [cpu_seconds()]
        t0 = time.perf_counter()
        threads = [threading.Thread(target=slot, args=(w,)) for w in range(workers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        dt = time.perf_counter() - t0
        cpu[:] = [cpu_seconds() - cpu[0]]
        return dt

    try:
        run(len(TASKS) * workers)  # warm-up: imports, page cache; kept envs made, their next sandboxes started
        rewards.clear()
        seconds = run(episodes)
    finally:
        for envs in kept:
            for env in envs.values():
                env.close()
        if shared is not None:
            shared.close()
        if group is not None:
            leave_cpu_cgroup(group)
    return {
        "seconds": seconds,
        "cpu": cpu[0],
        "episodes": episodes,
        "rewards": sorted(rewards),
        "t1env": t1env.__file__,
    }


CPUACCT = Path("/sys/fs/cgroup/cpuacct")


def own_cpu_cgroup() -> Path | None:
    """Move this process into a cgroup v1 ``cpuacct`` group of its own (root only), so that the CPU of everything it
    starts — sandboxes, verifiers and what runs in them — is counted, including processes the kernel reaps when a
    sandbox's pid namespace ends (rusage never sees those). None where there is no such controller to use."""
    d = CPUACCT / f"t1-bench-{os.getpid()}"
    try:
        d.mkdir()
        (d / "cgroup.procs").write_text(str(os.getpid()))
    except OSError:
        return None
    return d


def leave_cpu_cgroup(d: Path) -> None:
    try:
        (CPUACCT / "cgroup.procs").write_text(str(os.getpid()))
        d.rmdir()
    except OSError:
        pass  # a process still in it (it ends soon): the empty group stays, harmless


def child(checkout: Path | None, backend: str, workers: int, mode: str, episodes: int, prepare) -> dict:
    """One episodes/s configuration in a process of its own. ``prepare``: True (the default: on, with the local
    verifier zygote), "prepared" (on, zygotes off: ``T1_VERIFIER_ZYGOTE=0``), False, or None (not passed)."""
    env = dict(os.environ)
    if prepare == "prepared":
        env["T1_VERIFIER_ZYGOTE"] = "0"
        prepare = True
    argv = [sys.executable, __file__, "--child", json.dumps([backend, workers, mode, episodes, prepare])]
    if checkout is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(checkout), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=1800)
    if r.returncode != 0:
        raise SystemExit(f"episodes/s child failed ({backend}, {workers}, {mode}, {checkout}):\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def has_revision(rev: str) -> bool:
    return (
        subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{rev}^{{commit}}"], capture_output=True).returncode
        == 0
    )


def checkout_of(rev: str) -> Path:
    d = Path(tempfile.mkdtemp(prefix=f"t1-bench-{rev[:12]}-"))
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(d)], input=archive, check=True)
    return d


def rates_and_goals(args, backends: list[str], has_prepare: bool, base: dict, table: dict, old: Path | None) -> None:
    """Parts 2 and 3 (the episodes/s children, alternating), then the goals, as markdown tables."""
    configs = []
    for b in backends:
        for workers in (1, 2):
            eps = args.episodes if b == "local" else args.docker_episodes
            if b == "local":
                configs.append(("this", None, b, workers, "fresh", eps, None))
            settings = ((True, "prepared", False) if b == "local" else (True, False)) if has_prepare else (None,)
            configs += [("this", None, b, workers, "kept", eps, p) for p in settings]
            if old is not None and b == "local" and workers == 1:
                configs += [(args.compare, old, b, workers, m, eps, None) for m in ("fresh", "kept")]
    results: dict[tuple, list[float]] = {}
    cpu_per: dict[tuple, list[float]] = {}
    rewards: dict[tuple, list[float]] = {}
    for r in range(args.rounds):
        for cfg in configs if r % 2 == 0 else configs[::-1]:
            name, checkout, b, workers, mode, eps, prepare = cfg
            got = child(checkout, b, workers, mode, eps, prepare)
            results.setdefault(cfg, []).append(got["episodes"] / got["seconds"])
            cpu_per.setdefault(cfg, []).append(got["cpu"] / got["episodes"])
            rewards.setdefault((b, mode, workers), got["rewards"])
            assert got["rewards"] == rewards[(b, mode, workers)], "the oracle's rewards differ between runs"
            print(
                f"  round {r + 1}: {name} {b} {mode} w={workers} prepare={prepare}: {results[cfg][-1]:.2f} ep/s",
                file=sys.stderr,
                flush=True,
            )
    print(f"\n### Oracle episodes/s, {', '.join(TASKS)} (median of {args.rounds} alternating rounds)\n")
    print(
        "| checkout | backend | envs | prepare_verifier | 1 worker | 2 workers | CPU s per episode (host side, cpuacct), "
        "1 / 2 workers |\n|---|---|---|---|---:|---:|---:|"
    )
    seen = list(dict.fromkeys((c[0], c[2], c[4], c[6]) for c in configs))
    eps_of: dict[tuple, float] = {}
    for name, b, mode, prepare in seen:
        cells, cpus = [], []
        for workers in (1, 2):
            cfg = next(
                (c for c in configs if (c[0], c[2], c[4], c[6], c[3]) == (name, b, mode, prepare, workers)), None
            )
            if cfg is None:
                cells.append("-")
                cpus.append("-")
                continue
            eps_of[(name, b, mode, prepare, workers)] = statistics.median(results[cfg])
            cells.append(f"{eps_of[(name, b, mode, prepare, workers)]:.2f}")
            cpus.append(f"{statistics.median(cpu_per[cfg]):.2f}")
        label = {None: "default", True: "on", "prepared": "on, zygotes off", False: "off"}[prepare]
        if b == "local" and prepare is True:
            label = "on (zygote: the default)"
        print(f"| {name} | {b} | {mode} | {label} | {cells[0]} | {cells[1]} | {' / '.join(cpus)} |")

    # goals
    print("\n### Goals (issue 27)\n")
    pytest_ms = ms(base["baseline: bare pytest start, 1 trivial test"])
    verify_row = "submit: verify (what the agent waits)"
    goals = []
    if "local" in table:
        v = ms(table["local"][verify_row]["on"])
        goals.append(
            (
                "local verify of hello-file <= 0.3x bare pytest",
                f"{v:.0f} ms = {v / pytest_ms:.2f}x",
                v <= 0.3 * pytest_ms,
            )
        )
        reset = ms(table["local"]["reset, prestarted (default)"]["on"])
        goals.append(("local prestarted reset <= 1.5 ms", f"{reset:.2f} ms", reset <= 1.5))
        best = max(v for k, v in eps_of.items() if k[0] == "this" and k[1] == "local" and k[4] == 1)
        if old is not None:
            today = max(v for k, v in eps_of.items() if k[0] == args.compare)  # its better one of fresh and kept
            why = f"{best:.2f} vs {today:.2f} ep/s ({args.compare}), best of each = {best / today:.2f}x"
        else:
            today = 2.8  # the figure for bce6b5c (2.3-2.8), not measured in this run
            why = f"{best:.2f} vs 2.8 ep/s (the issue's bce6b5c figure, not this run) = {best / today:.2f}x"
        goals.append(("oracle episodes/s >= 2x today's, 1 worker, local", why, best >= 2 * today))
    if "docker" in table:
        v = ms(table["docker"][verify_row]["on"])
        goals.append(("Docker verify of hello-file <= 250 ms", f"{v:.0f} ms", v <= 250))
        rt = ms(table["docker"]["ShellSession.run('true') round trip"]["on"])
        goals.append(("Docker round trip <= 0.6 ms", f"{rt:.2f} ms", rt <= 0.6))
    print("| goal | measured | met |\n|---|---|---|")
    for goal, measured, met in goals:
        print(f"| {goal} | {measured} | {'met' if met else 'not met'} |")
    print(f"\nload average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


# -- the report -------------------------------------------------------------------------------------------------
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=2, help="alternating rounds of the episodes/s configurations")
    ap.add_argument("--runs", type=int, default=8, help="hello-file episodes per backend and setting (phases)")
    ap.add_argument("--episodes", type=int, default=12, help="timed oracle episodes per configuration (local)")
    ap.add_argument("--docker-episodes", type=int, default=8)
    ap.add_argument("--backends", default="local,docker")
    ap.add_argument(
        "--compare",
        metavar="REV",
        default=BEFORE if has_revision(BEFORE) else "",
        help=f"also run the local 1-worker episodes/s children with this git revision (default {BEFORE}, the issue's "
        "'today'; '' for none)",
    )
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(play(*json.loads(args.child))))
        return

    backends = args.backends.split(",")
    if "docker" in backends:
        up, why = engine_available()
        if not up:
            print(f"docker: skipped, no engine answers ({why})")
            backends.remove("docker")
    has_prepare = bool(env_kwargs(True))
    print(f"t1env from {t1env.__file__}; prepare_verifier {'on and off' if has_prepare else 'not in this checkout'}")

    # part 1
    base = baselines(args.runs)
    table: dict[str, dict[str, dict[str, list[float]]]] = {b: phases(b, args.runs) for b in backends}
    if "local" in backends and has_prepare:  # the prepared verifier without zygotes: a block of its own after
        os.environ["T1_VERIFIER_ZYGOTE"] = "0"  # (read at each verification: not switched between envs in play)
        try:
            for row, got in phases("local", args.runs, only_on=True).items():
                table["local"].setdefault(row, {})["prepared"] = got["on"]
        finally:
            del os.environ["T1_VERIFIER_ZYGOTE"]
    print(
        "\n### Phases of a `hello-file` episode (median ms; prepare_verifier on / off; local: on with the verifier "
        "zygote (the default) / on with zygotes off / off)\n"
    )
    print("| phase | " + " | ".join(backends) + " |\n|---|" + "---:|" * len(backends))
    rows = list(dict.fromkeys(r for b in backends for r in table[b]))
    for row in rows:
        cells = []
        for b in backends:
            got = table[b].get(row, {})
            cells.append(" / ".join(f"{ms(got[m]):.2f}" for m in ("on", "prepared", "off") if m in got) or "-")
        print(f"| {row} | " + " | ".join(cells) + " |")
    for row, xs in base.items():
        print(f"| {row} | {ms(xs):.2f} (host) |" + " |" * (len(backends) - 1))

    # part 2 (and 3)
    old = checkout_of(args.compare) if args.compare else None
    try:
        rates_and_goals(args, backends, has_prepare, base, table, old)
    finally:
        if old is not None:
            shutil.rmtree(old)


if __name__ == "__main__":
    main()
