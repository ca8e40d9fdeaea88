"""Soak: many episodes over concurrent envs, driven by a hostile random agent; what leaked.

N episodes run over M envs at once (one thread and one env each), on a mix of built-in tasks and
family instances. The agent picks random actions: normal commands, commands that time out (one
that ignores Ctrl-C too), huge output (``yes | head -c 50M``), binary output, keystrokes and
Ctrl-C (a Python REPL left running included), ``exit`` and ``kill -9 $$`` from the shell,
background processes (``&``, ``nohup``, ``setsid``, double forks, daemons that ignore SIGHUP).
Episodes end by submitting (the verifier runs), by the turn limit (it runs too), by an abandoned
episode (the next ``reset()`` tears it down), by ``close()`` in the middle of an episode, or by an
exception in the agent's code (the loop catches it and closes the env).

Before and after, it counts what this process holds (:mod:`t1env.tools.leaks`): processes and zombies
in its tree and in its cgroups, ``t1-*`` cgroups, episode folders, containers and volumes (Docker),
open fds, threads and RSS. "Before" is taken after a warm-up (one episode per env, then every env
closed: imports, images, family instances and Docker client connections exist by then); "after"
once every env is closed and the warm pools are emptied, waiting up to ``--settle`` seconds for
background clean-up. RSS, threads, fds and processes are sampled every K episodes (the RSS curve).

    python bench/soak.py --backend local --episodes 1000 --envs 8 [--seed 0] [--json PATH]

Prints markdown tables: the run, before/after per resource, the RSS curve. Exit status 0 either
way (``tests/t1env/test_soak.py`` asserts on ``--json``).
"""

from __future__ import annotations

import argparse
import collections
import gc
import json
import os
import random
import shutil
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from t1env.env import TerminalEnv  # noqa: E402
from t1env.families import FAMILIES  # noqa: E402
from t1env.registry import get_task, list_tasks  # noqa: E402
from t1env.tools import leaks  # noqa: E402

MAX_TURNS = 6  # episodes with more actions than this are truncated (and verified)
COMMAND_TIMEOUT = 20.0  # seconds for a normal command: generous, the machine may be loaded


class AgentBug(RuntimeError):
    """Raised on purpose by the agent's code in the middle of an episode."""


# -- the agent's actions: (name, weight, actions(rng, huge_mb)) -----------------------------------
def _cmd(command: str, timeout: float = COMMAND_TIMEOUT) -> dict:
    return {"command": command, "timeout": timeout}


ACTIONS = [
    (
        "command",
        30,
        lambda r, mb: [
            _cmd(
                r.choice(
                    [
                        "ls -la",
                        "pwd; id -u",
                        "echo $RANDOM > x; cat x",
                        "cat /etc/os-release | head -3",
                        "for i in 1 2 3; do echo $i; done",
                        "false",
                        "cd /tmp && touch f && ls",
                        "python3 -c 'print(6*7)'",
                    ]
                )
            )
        ],
    ),
    ("timeout", 5, lambda r, mb: [_cmd("sleep 30", 0.3)]),
    ("timeout-ignoring-ctrl-c", 3, lambda r, mb: [_cmd("trap '' INT; sleep 30", 0.3)]),
    ("endless-output-timeout", 2, lambda r, mb: [_cmd("yes", 0.5)]),
    ("huge-output", 2, lambda r, mb: [_cmd(f"yes | head -c {mb}M", 120)]),
    ("binary-output", 4, lambda r, mb: [_cmd("head -c 1M /dev/urandom")]),
    (
        "keys-sleep-ctrl-c",
        3,
        lambda r, mb: [{"keys": ["sleep 100", "Enter"], "wait": 0.3}, {"keys": ["C-c"], "wait": 0.3}],
    ),
    (
        "keys-repl",
        3,
        lambda r, mb: [
            {"keys": ["python3", "Enter"], "wait": 1.0},
            {"keys": ["print(1+1)", "Enter"], "wait": 0.3},
            {"keys": ["C-d"], "wait": 0.3},
        ],
    ),
    ("keys-repl-left-running", 2, lambda r, mb: [{"keys": ["python3", "Enter"], "wait": 1.0}, _cmd("echo blocked")]),
    ("ctrl-c", 2, lambda r, mb: [{"keys": ["C-c"], "wait": 0.1}]),
    ("exit", 3, lambda r, mb: [_cmd(r.choice(["exit", "exit 7", "kill -9 $$"]))]),
    (
        "background",
        8,
        lambda r, mb: [
            _cmd(
                r.choice(
                    [
                        "sleep 1000 &",
                        "nohup sleep 1000 >/dev/null 2>&1 &",
                        "setsid sleep 1000 >/dev/null 2>&1 < /dev/null &",
                        "( ( exec sleep 1000 ) & )",
                        "sh -c 'sleep 1000 & sleep 1000 &'",
                        "(trap '' HUP TERM; exec sleep 1000) &",
                        "setsid -f sh -c 'while :; do sleep 1; done' >/dev/null 2>&1",
                    ]
                )
            )
        ],
    ),
]
ENDINGS = [("submit", 40), ("abandon", 20), ("close-mid-episode", 15), ("agent-exception", 15), ("turn-limit", 10)]


def _pick(rng: random.Random, table):
    return rng.choices(table, weights=[t[1] for t in table])[0]


def task_mix(rng: random.Random, n_builtin: int, seeds_per_family: int) -> list[str]:
    """``n_builtin`` built-in tasks, two of them shared-mode ones (their verifier freezes the agent's processes
    instead of ending them), and ``seeds_per_family`` instances of every family."""
    ids = list_tasks()
    shared = [t for t in ids if get_task(t).spec.verifier.mode == "shared"]
    picked = rng.sample(shared, min(2, len(shared), n_builtin))
    picked += rng.sample([t for t in ids if t not in picked], n_builtin - len(picked))
    return picked + [f"{name}@{k}" for name in sorted(FAMILIES) for k in range(seeds_per_family)]


# -- the run ----------------------------------------------------------------------------------------
class Soak:
    def __init__(self, args):
        self.args = args
        self.lock = threading.Lock()
        self.next_episode = 0
        self.done = 0
        self.endings: collections.Counter = collections.Counter()
        self.actions: collections.Counter = collections.Counter()
        self.errors: list[str] = []
        self.curve: list[dict] = []
        self.volumes: set[str] = set()
        self.max_obs = 0
        self.obs_cap = 0
        self.trimmed_rss = 0.0

    def claim(self) -> int | None:
        with self.lock:
            if self.next_episode >= self.args.episodes:
                return None
            self.next_episode += 1
            return self.next_episode - 1

    def make_env(self) -> TerminalEnv:
        return TerminalEnv(task="hello-file", backend=self.args.backend, max_turns=MAX_TURNS)

    def worker(self, wid: int, tasks: list[str]) -> None:
        rng = random.Random(self.args.seed * 1000 + wid)
        env = self.make_env()
        self.obs_cap = env.observation_space.max_length
        try:
            while (ep := self.claim()) is not None:
                ending = self.episode(env, rng, ep, tasks)
                self.finished(ending)
        finally:
            env.close()

    def episode(self, env: TerminalEnv, rng: random.Random, ep: int, tasks: list[str]) -> str:
        ending = _pick(rng, ENDINGS)[0]
        task = rng.choice(tasks)
        try:
            env.reset(seed=ep, options={"task": task})
            if self.args.backend == "docker":
                self.record_volumes(env)
            n = MAX_TURNS + 2 if ending == "turn-limit" else rng.randint(1, MAX_TURNS - 1)
            for _ in range(n):
                name, _, make = _pick(rng, ACTIONS)
                with self.lock:
                    self.actions[name] += 1
                for action in make(rng, self.args.huge_mb):
                    obs, _, term, trunc, _ = env.step(action)
                    self.observed(obs)
                    if term or trunc:
                        return "turn-limit" if trunc else ending
                if ending == "agent-exception" and rng.random() < 0.5:
                    raise AgentBug(f"episode {ep}: the agent's code failed")
            if ending == "submit":
                obs, _, term, _, info = env.step({"submit": True})
                self.observed(obs)
                if not term or "total" not in info:
                    raise RuntimeError(f"episode {ep} ({task}): submit did not end the episode with a verdict")
            elif ending == "agent-exception":
                raise AgentBug(f"episode {ep}: the agent's code failed")
            elif ending == "close-mid-episode":
                env.close()
            return ending
        except AgentBug:
            env.close()  # what a careful loop does: the env is reused after close(), as a new one would be
            return "agent-exception"
        except Exception as e:
            with self.lock:
                self.errors.append(f"episode {ep} ({task}): {type(e).__name__}: {e}\n{traceback.format_exc(limit=3)}")
            env.close()
            return "error"

    def observed(self, obs: str) -> None:
        if not isinstance(obs, str) or len(obs) > self.obs_cap:
            raise RuntimeError(
                f"observation out of bounds: {type(obs).__name__} of {len(obs)} chars (cap {self.obs_cap})"
            )
        with self.lock:
            self.max_obs = max(self.max_obs, len(obs))

    def record_volumes(self, env: TerminalEnv) -> None:
        box = env.sandbox
        if box is not None:
            names = leaks.container_volumes([box.container_id])
            with self.lock:
                self.volumes |= names

    def finished(self, ending: str) -> None:
        with self.lock:
            self.done += 1
            self.endings[ending] += 1
            done = self.done
        if done % self.args.sample_every == 0 or done == self.args.episodes:
            s = leaks.snapshot()
            with self.lock:
                self.curve.append(
                    {
                        "episodes": done,
                        "rss_mb": round(s.rss_mb, 1),
                        "threads": s.threads,
                        "fds": s.fds,
                        "processes": s.processes,
                        "zombies": s.zombies,
                    }
                )
            if not self.args.quiet:
                print(
                    f"  {done}/{self.args.episodes} episodes, RSS {s.rss_mb:.1f} MiB, {s.threads} threads, "
                    f"{s.fds} fds, {s.processes} processes",
                    file=sys.stderr,
                    flush=True,
                )

    def run_threads(self, n: int, target, *a) -> None:
        threads = [threading.Thread(target=target, args=(i, *a), name=f"soak-{i}") for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()


def warm_up(soak: Soak, tasks: list[str]) -> None:
    """One short episode per env, in parallel, every env closed: what a run keeps for its lifetime exists now
    (imports, images, family instances, client connections); leaks are counted from here."""
    for t in tasks:  # generate family instances and resolve every task once, serially
        get_task(t)

    def one(i: int) -> None:
        env = soak.make_env()
        try:
            env.reset(seed=i, options={"task": tasks[i % len(tasks)]})
            env.step("true")
            env.step({"submit": True})
        finally:
            env.close()

    soak.run_threads(soak.args.envs, one)


def close_everything(soak: Soak) -> None:
    if soak.args.backend == "docker":
        from t1env.sandbox import docker as D

        soak.volumes |= leaks.container_volumes()  # warm pool containers no episode used
        D.close_pools()


def settle(soak: Soak, before: leaks.Snapshot, seconds: float, snap) -> leaks.Snapshot:
    """The snapshot once nothing is left over (or after ``seconds``): background clean-up (reapers, pools)
    may still be running when the last env has closed."""
    deadline = time.monotonic() + seconds
    while True:
        gc.collect()
        after = snap()
        if not any(after.leaks(before).values()) or time.monotonic() > deadline:
            return after
        time.sleep(0.5)


def steady(snap, seconds: float) -> leaks.Snapshot:
    """A snapshot once two in a row, a second apart, hold the same things (or after ``seconds``)."""
    deadline = time.monotonic() + seconds
    gc.collect()
    prev = snap()
    while time.monotonic() < deadline:
        time.sleep(1.0)
        gc.collect()
        cur = snap()
        if not any(cur.leaks(prev).values()) and not any(prev.leaks(cur).values()):  # nothing new, nothing gone
            return cur
        prev = cur
    return prev


# -- tables -----------------------------------------------------------------------------------------
ROWS = [
    ("processes", "processes in the driver's tree"),
    ("zombies", "zombies in the driver's tree"),
    ("cgroup_processes", "processes in the driver's cgroups (itself excluded)"),
    ("cgroups", "t1-* cgroups below the driver's"),
    ("temp_dirs", "temp dirs (entries of the run's temp folder)"),
    ("containers", "containers labelled as the driver's"),
    ("volumes", "volumes of those containers still present"),
    ("fds", "open fds of the driver (less the Docker SDK's pooled connections)"),
    ("docker_pooled_fds", "idle connections in the Docker SDK's pools (bounded)"),
    ("threads", "threads of the driver"),
    ("rss_mb", "driver RSS (MiB)"),
    ("machine_processes", "all processes on the machine (context)"),
    ("machine_zombies", "all zombies on the machine (context)"),
]


def _fmt(v) -> str:
    if v is None:
        return "n/a"
    return f"{v:.1f}" if isinstance(v, float) else str(v)


def report(soak: Soak, cold, before, after, wall: float, isolated: bool) -> str:
    a = soak.args
    out = [f"## Soak: {a.backend} backend, {a.episodes} episodes over {a.envs} envs (seed {a.seed})", ""]
    out += ["| run | value |", "|---|---:|"]
    out.append(f"| wall time | {wall:.0f} s ({a.episodes / wall:.2f} episodes/s) |")
    for name, _ in ENDINGS + [("error", 0)]:
        out.append(f"| episodes ending by {name} | {soak.endings.get(name, 0)} |")
    out.append(
        f"| actions | {sum(soak.actions.values())} ({', '.join(f'{k} {v}' for k, v in sorted(soak.actions.items()))}) |"
    )
    out.append(f"| largest observation | {soak.max_obs} chars (cap {soak.obs_cap}) |")
    out.append(f"| driver in cgroups of its own | {'yes' if isolated else 'no (cgroup counts not attributable)'} |")
    out += ["", "| resource | cold start | before (after warm-up) | after | leaked |", "|---|---:|---:|---:|---:|"]
    lk = after.leaks(before)
    for key, label in ROWS:
        c, b, f = getattr(cold, key), getattr(before, key), getattr(after, key)
        leak = lk.get(key)
        cell = (
            ""
            if key not in leaks.Snapshot.LEAK_KINDS
            else ("n/a" if leak is None else (f"**{leak}**" if leak > 0 else "0"))
        )
        out.append(f"| {label} | {_fmt(c)} | {_fmt(b)} | {_fmt(f)} | {cell} |")
    out += [
        "",
        f"RSS curve (sampled every {a.sample_every} episodes):",
        "",
        "| episodes | RSS MiB | threads | fds | processes in tree |",
        "|---:|---:|---:|---:|---:|",
    ]
    step = max(1, len(soak.curve) // 20)
    shown = soak.curve[::step] + ([soak.curve[-1]] if soak.curve and (len(soak.curve) - 1) % step else [])
    for p in shown:
        out.append(f"| {p['episodes']} | {p['rss_mb']} | {p['threads']} | {p['fds']} | {p['processes']} |")
    if soak.curve:
        first, last = soak.curve[0], soak.curve[-1]
        out += [
            "",
            (
                f"RSS {first['rss_mb']} MiB after {first['episodes']} episodes, {last['rss_mb']} MiB after "
                f"{last['episodes']} ({last['rss_mb'] - first['rss_mb']:+.1f} MiB); peak {leaks.peak_rss_mb():.1f} MiB; "
                f"at the end {after.rss_mb:.1f} MiB, {soak.trimmed_rss:.1f} MiB once malloc_trim(0) returned free heap "
                f"(before: {before.rss_mb:.1f} MiB)."
            ),
        ]
    if soak.errors:
        out += ["", f"{len(soak.errors)} episodes failed with an error; first: `{soak.errors[0].splitlines()[0]}`"]
    return "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", choices=("local", "docker"), default="local")
    ap.add_argument("--episodes", type=int, default=1000, help="episodes in all (over every env)")
    ap.add_argument("--envs", type=int, default=8, help="concurrent envs, one thread each")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sample-every", type=int, default=0, help="RSS sample every K episodes (default: episodes/20)")
    ap.add_argument("--huge-mb", type=int, default=50, help="MiB printed by the huge-output action")
    ap.add_argument(
        "--tasks", type=int, default=12, help="built-in tasks in the mix (plus 2 instances of every family)"
    )
    ap.add_argument("--settle", type=float, default=30.0, help="seconds to wait for background clean-up at the end")
    ap.add_argument("--json", help="write the numbers (snapshots, leaks, RSS curve, errors) here")
    ap.add_argument("--markdown", help="also write the tables here")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args()
    args.sample_every = args.sample_every or max(1, args.episodes // 20)

    # Episode folders go to a folder of this run's own (searchable: a sandbox's root, an unprivileged host id,
    # walks into it), so every entry in it is this run's.
    tmp_root = Path(tempfile.mkdtemp(prefix="t1-soak-"))
    tmp_root.chmod(0o711)
    tempfile.tempdir = str(tmp_root)
    os.environ["TMPDIR"] = str(tmp_root)
    docker = args.backend == "docker"

    def snap() -> leaks.Snapshot:
        return leaks.snapshot(tmp_root, private_temp=True, docker=docker, volumes=soak.volumes)

    soak = Soak(args)
    rng = random.Random(args.seed)
    tasks = task_mix(rng, args.tasks, 2)
    with leaks.own_cgroups() as isolated:
        cold = snap()
        warm_up(soak, tasks)
        close_everything(soak)
        before = steady(snap, args.settle)  # the warm-up's own clean-up has finished
        t0 = time.monotonic()
        soak.run_threads(args.envs, soak.worker, tasks)
        wall = time.monotonic() - t0
        close_everything(soak)
        after = settle(soak, before, args.settle, snap)
        soak.trimmed_rss = leaks.trimmed_rss_mb()
    table = report(soak, cold, before, after, wall, isolated)
    print(table)
    if args.markdown:
        Path(args.markdown).write_text(table)
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "args": vars(args),
                    "wall_s": wall,
                    "isolated": isolated,
                    "endings": dict(soak.endings),
                    "actions": dict(soak.actions),
                    "max_observation": soak.max_obs,
                    "observation_cap": soak.obs_cap,
                    "cold": cold.as_dict(),
                    "before": before.as_dict(),
                    "after": after.as_dict(),
                    "leaks": after.leaks(before),
                    "rss_after_trim_mb": soak.trimmed_rss,
                    "curve": soak.curve,
                    "errors": soak.errors,
                },
                indent=1,
            )
        )
    leftover = os.listdir(tmp_root)
    if leftover:
        print(f"left in {tmp_root}: {leftover[:10]}", file=sys.stderr)
    else:
        shutil.rmtree(tmp_root, ignore_errors=True)


if __name__ == "__main__":
    main()
