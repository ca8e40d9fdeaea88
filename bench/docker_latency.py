"""Docker backend latency: reset (cold build / cached image / warm pool), command round trip,
verification, and a tmux baseline (the Terminal-Bench way) on the same container in the same run.

    python bench/docker_latency.py [--n 30] [--task hello-file] [--verify-n 10] [--only verify|shell]

Prints a table of medians (and p90). Verification is timed cold (the verifier container started at submission)
and prepared (started with the episode by ``verify.prepare``, told go at submission), alternating, each on a
fresh oracle-solved container. Needs a Docker engine and the base image
(``.ci/docker-setup.sh``). The tmux baseline drives a tmux server inside the container with
``tmux send-keys '<cmd>; tmux wait -S done' Enter``, ``tmux wait done`` and ``tmux capture-pane -p``,
each run through the engine's exec API as Terminal-Bench's harness does.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gymnasium as gym  # noqa: E402

import t1env  # noqa: E402,F401
from t1env.episode.shell import ShellSession  # noqa: E402
from t1env.registry import get_task  # noqa: E402
from t1env.sandbox import docker as D  # noqa: E402
from t1env.sandbox import docker_pool  # noqa: E402
from t1env.sandbox.base import SandboxConfig  # noqa: E402


def ms(xs: list[float]) -> tuple[float, float]:
    xs = sorted(x * 1e3 for x in xs)
    return statistics.median(xs), xs[min(len(xs) - 1, int(0.9 * len(xs)))]


def env_resets(task: str, n: int, pool: int, prestart: bool = False, episode_s: float = 0.3) -> list[float]:
    """Time env.reset() after a short episode of ``episode_s`` seconds (background work overlaps it)."""
    D.configure_pool(pool)
    env = gym.make("T1Terminal-v0", task=task, backend="docker", prestart=prestart)
    out = []
    try:
        env.reset(seed=0)  # first reset fills the pool; not counted
        for i in range(n):
            env.step("echo work")  # a short episode, so the pool refills as it would in training
            time.sleep(episode_s if (pool or prestart) else 0)
            t0 = time.perf_counter()
            env.reset(seed=i)
            out.append(time.perf_counter() - t0)
    finally:
        env.close()
        D.close_pools()
    return out


def cold_build_reset(task: str, n: int) -> list[float]:
    """A Dockerfile never seen before (one RUN step on the default image), then a container."""
    base = D.default_image()
    out = []
    for _ in range(n):
        ctx = Path(f"/tmp/t1-bench-{uuid.uuid4().hex[:8]}")
        ctx.mkdir()
        (ctx / "Dockerfile").write_text(f"FROM {base}\nRUN echo {uuid.uuid4().hex} > /nonce\n")
        t0 = time.perf_counter()
        tag = D.build_image(ctx, repo="t1env/bench-cold")
        box = D.DockerSandbox(SandboxConfig(), image=tag, pool=False)
        box.start()
        with ShellSession(box) as sh:
            sh.run("true")
        out.append(time.perf_counter() - t0)
        box.stop()
        docker_pool._reaper.drain()
        D.client().images.remove(tag, force=True)
        for p in ctx.iterdir():
            p.unlink()
        ctx.rmdir()
    return out


def round_trips(box, n: int, transports: tuple[str, ...]) -> dict[str, list[float]]:
    """``ShellSession.run('echo i')`` on one session per transport, open side by side, taking turns command by
    command (the order flipped every other command), so a change in the machine's load hits each alike."""
    sessions = {}
    try:
        for t in transports:
            box.shell_transport = t
            sessions[t] = ShellSession(box)
            sessions[t].start()
            sessions[t].run("true")
        out: dict[str, list[float]] = {t: [] for t in transports}
        for i in range(n):
            for t in transports if i % 2 else transports[::-1]:
                t0 = time.perf_counter()
                r = sessions[t].run(f"echo {i}")
                out[t].append(time.perf_counter() - t0)
                assert r.output == f"{i}\n", r
    finally:
        for sh in sessions.values():
            sh.close()
    return out


def socket_round_trips(box, n: int) -> tuple[float, list[float]]:
    """The transport alone: the SDK's attached exec socket driven by pexpect's fdspawn, without ShellSession's
    framing (one printf per command; ShellSession's markers, eval and output capture come on top)."""
    from pexpect.fdpexpect import fdspawn

    c = D.client()
    t0 = time.perf_counter()
    ex = c.api.exec_create(
        box.container_id, ["bash", "--noprofile", "--norc", "-i"], stdin=True, tty=True, environment={"PS1": "$ "}
    )
    holder = c.api.exec_start(ex["Id"], tty=True, socket=True)
    sock = getattr(holder, "_sock", holder)
    child = fdspawn(sock.fileno())
    child.delaybeforesend = None
    child.send(b"stty -echo; echo READY\n")
    child.expect_exact(b"READY\r\n")
    spawn = time.perf_counter() - t0
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        # the marker is made by printf, so the terminal's echo of the typed line (readline echoes it whatever stty
        # says) does not contain it: this times the command, not the echo
        child.send(f"printf 'M%sK\\n' {i}\n".encode())
        child.expect_exact(f"M{i}K\r\n".encode())
        out.append(time.perf_counter() - t0)
    sock.close()
    return spawn, out


def exec_spawn(box, n: int) -> list[float]:
    out = []
    for _ in range(n):
        sh = ShellSession(box)
        t0 = time.perf_counter()
        sh.start()
        out.append(time.perf_counter() - t0)
        sh.close()
    return out


def tmux_round_trips(box, n: int) -> list[float]:
    ctr = D.client().containers.get(box.container_id)

    def ex(*argv):
        r = ctr.exec_run(list(argv))
        if r.exit_code != 0:
            raise RuntimeError(f"{argv}: {r.output!r}")
        return r.output

    ex("tmux", "new-session", "-d", "-s", "bench", "-x", "120", "-y", "40")
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        ex("tmux", "send-keys", "-t", "bench", f"echo T{i}; tmux wait -S done", "Enter")
        ex("tmux", "wait", "done")
        screen = ex("tmux", "capture-pane", "-p", "-t", "bench")
        out.append(time.perf_counter() - t0)
        assert f"T{i}".encode() in screen
    ex("tmux", "kill-server")
    return out


def verify_times(task_id: str, n: int, prepared: bool, episode_s: float = 1.0) -> tuple[list[float], str]:
    """verify() of ``n`` oracle-solved episodes, each in a fresh container (a verification ends the agent's).
    ``prepared``: the verifier container was started at the episode's start (``verify.prepare``) and had
    ``episode_s`` seconds to warm up, as it has while an agent plays."""
    from t1env.agent.reference import oracle_command
    from t1env.episode.verify import prepare, verify

    task = get_task(task_id)
    out, note = [], ""
    for _ in range(n):
        box = D.DockerSandbox(SandboxConfig.from_task(task), task=task, pool=False)
        box.start()
        try:
            if prepared and not prepare(box, task):
                raise SystemExit("the Docker backend prepared no verifier")
            with ShellSession(box) as sh:
                sh.run(oracle_command(task), timeout=120)
            time.sleep(episode_s)
            t0 = time.perf_counter()
            res = verify(box, task)
            out.append(time.perf_counter() - t0)
        finally:
            box.stop()
        if res.prepared != prepared:
            raise SystemExit(f"verify(): prepared={res.prepared}, expected {prepared}")
    info = res.to_info()
    note = f"{info['passed']}/{info['total']} checks" + (
        f"; {info.get('verifier_error')}" if info.get("verifier_error") else ""
    )
    return out, note


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=30)
    ap.add_argument("--task", default="hello-file")
    ap.add_argument("--cold", type=int, default=3, help="cold builds to time")
    ap.add_argument("--verify-n", type=int, default=10, help="verifications to time, cold and prepared each")
    ap.add_argument("--only", choices=("verify", "shell"), help="time only the verifications or the shell")
    args = ap.parse_args()
    n = args.n
    ok, why = D.engine_available()
    if not ok:
        sys.exit(why)
    t0 = time.perf_counter()
    D.default_image()
    print(
        f"engine {why}; default image ready in {time.perf_counter() - t0:.1f}s (cached after the first build)",
        flush=True,
    )

    rows: list[tuple[str, tuple[float, float], str]] = []
    if args.only is None:
        rows.append(
            (
                "reset: cold build (new 1-step Dockerfile) + container + shell",
                ms(cold_build_reset(args.task, args.cold)),
                f"n={args.cold}",
            )
        )
        rows.append(("reset: cached image, no pool", ms(env_resets(args.task, max(5, n // 3), pool=0)), "env.reset()"))
        rows.append(("reset: warm pool", ms(env_resets(args.task, n, pool=1)), "env.reset()"))
        rows.append(
            (
                "reset: warm pool + env prestart (default), 2 s episodes",
                ms(env_resets(args.task, n, pool=1, prestart=True, episode_s=2.0)),
                "env.reset()",
            )
        )

    rt = tm = None
    if args.only in (None, "shell"):
        D.configure_pool(0)
        box = D.DockerSandbox(SandboxConfig(), pool=False)
        box.start()
        try:
            spawns: dict[str, list[float]] = {"cli": [], "socket": []}
            for _ in range(5):  # alternating, so a change in the machine's load hits both alike
                for transport in spawns:
                    box.shell_transport = transport
                    spawns[transport] += exec_spawn(box, 2)
            by = round_trips(box, n * 30, ("cli", "socket"))
            names = {"cli": "docker exec -it (pexpect)", "socket": "attached exec socket (ExecShell)"}
            for transport, name in names.items():
                rows.append((f"shell spawn: {name}", ms(spawns[transport]), "ShellSession.start"))
            for transport, name in names.items():
                rows.append((f"round trip: ShellSession.run, {name}", ms(by[transport]), "echo i"))
            rt = by["socket"]
            sp, srt = socket_round_trips(box, n * 10)
            rows.append(("round trip: bare attached socket (fdspawn, no framing)", ms(srt), f"spawn {sp * 1e3:.0f} ms"))
            if args.only is None:
                tm = tmux_round_trips(box, n)
                rows.append(("round trip: tmux send-keys/wait -S/capture-pane", ms(tm), "Terminal-Bench way"))
            t0 = time.perf_counter()
            r = box.exec(["true"], timeout=10)
            rows.append(
                (
                    "exec(argv) via in-container helper",
                    ms([time.perf_counter() - t0] + [_timed(box.exec, ["true"], timeout=10) for _ in range(n)]),
                    f"rc={r.exit_code}",
                )
            )
        finally:
            box.stop()
    if args.only in (None, "verify"):
        cold, prep = [], []
        for _ in range(args.verify_n):  # alternating, so a change in the machine's load hits both alike
            vt, note = verify_times(args.task, 1, prepared=False)
            cold += vt
            vt, note_p = verify_times(args.task, 1, prepared=True)
            prep += vt
        rows.append((f"verify ({args.task}, oracle solved): cold verifier container", ms(cold), note))
        rows.append((f"verify ({args.task}, oracle solved): prepared (verify.prepare)", ms(prep), note_p))
    D.close_pools()

    w = max(len(r[0]) for r in rows)
    print(f"\n{'measurement':<{w}}  {'median ms':>10}  {'p90 ms':>9}  note")
    print(f"{'-' * w}  {'-' * 10}  {'-' * 9}  ----")
    for name, (med, p90), note in rows:
        print(f"{name:<{w}}  {med:>10.2f}  {p90:>9.2f}  {note}")
    if rt and tm:
        ratio = statistics.median(tm) / statistics.median(rt)
        print(f"\nround trip speed-up over the tmux baseline: {ratio:.0f}x (goal >= 50x)")
    if args.only is None:
        warm = [r for r in rows if r[0].startswith("reset: warm pool + env prestart")][0][1][0]
        pool_only = [r for r in rows if r[0] == "reset: warm pool"][0][1][0]
        print(
            f"reset median with the defaults (warm pool + prestart): {warm:.0f} ms (goal <= 150 ms); "
            f"pool alone: {pool_only:.0f} ms"
        )


def _timed(fn, *a, **kw) -> float:
    t0 = time.perf_counter()
    fn(*a, **kw)
    return time.perf_counter() - t0


if __name__ == "__main__":
    main()
