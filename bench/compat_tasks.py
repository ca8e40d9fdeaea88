"""Imported tasks on the Docker backend: oracle wall time, and t1's verification vs the upstream way.

For each fixture task in ``tests/fixtures/compat/{terminal-bench,harbor}``:

* **t1**: one oracle episode and one no-op episode through ``TerminalEnv`` (image built and cached
  beforehand, so the time is the episode's): wall time, checks passed / total, and the verifier's
  own time (``verify_duration``);
* **upstream**: the same image and oracle, then the task's own ``run-tests.sh`` (Terminal-Bench,
  ``TEST_DIR=/tests``) or ``tests/test.sh`` (Harbor, reading ``/logs/verifier/reward.*``) run as
  written in the agent's container, with the task's network setting: its result and wall time.
  On a machine without internet the scripts that download uv and pytest fail; the table says so.

    python bench/compat_tasks.py [--image-map FILE]     (default map: built by `t1env images build-bases`)

Prints a markdown table (docs/compat.md has one from a 2-core machine).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "compat"


def upstream(task) -> tuple[str, float]:
    """Run the oracle, then the task's own test script as written; (result, seconds of the script)."""
    from t1env.agent.reference import oracle_command
    from t1env.formats.oracle import oracle_actions
    from t1env.sandbox import SandboxConfig
    from t1env.sandbox.docker import DockerSandbox

    box = DockerSandbox(SandboxConfig.from_task(task), task=task, pool=False)
    with box:
        actions = oracle_actions(task, 600) or [{"command": oracle_command(task)}]
        for a in actions:
            cmd = a.get("command") or " ".join(k for k in a["keys"] if k != "Enter")
            box.exec(["bash", "-c", cmd], timeout=600, cwd=task.spec.environment.workdir)
        box.put_tree(task.tests_dir, "/tests")
        box.exec(["mkdir", "-p", "/logs/verifier"], timeout=10)
        if task.origin.format == "terminal-bench":
            box.put_file("/tests/run-tests.sh", (task.path / "run-tests.sh").read_bytes(), 0o755)
            argv = ["bash", "/tests/run-tests.sh"]
        else:
            argv = ["bash", "/tests/test.sh"]
        t0 = time.monotonic()
        r = box.exec(
            argv, timeout=300, env={**box.config.environ(), "TEST_DIR": "/tests"}, cwd=task.spec.environment.workdir
        )
        took = time.monotonic() - t0
        if r.timed_out:
            return "timed out", took
        if task.origin.format == "terminal-bench":
            ok = r.exit_code == 0 and b" passed" in r.stdout + r.stderr
            why = "" if ok else " (" + _why(r.stdout + r.stderr) + ")"
            return ("resolved" if ok else "failed") + why, took
        for name in ("reward.json", "reward.txt"):
            try:
                return f"{name}: " + box.get_file(f"/logs/verifier/{name}").decode().strip(), took
            except FileNotFoundError:
                continue
        return "no reward file (" + _why(r.stdout + r.stderr) + ")", took


def _why(out: bytes) -> str:
    text = out.decode("utf-8", "replace")
    for needle, why in (
        ("Could not resolve", "no network"),
        ("Failed to connect", "no network"),
        ("curl: (", "download failed"),
        ("uv: command not found", "uv missing"),
        ("uvx: command not found", "uv missing"),
        ("pytest: command not found", "pytest missing"),
    ):
        if needle in text:
            return why
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:60] if lines else "no output"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--image-map", help="image map (default: build the stand-ins and map them)")
    ap.add_argument("--only", nargs="*", help="task ids to run")
    args = ap.parse_args()

    from t1env import images
    from t1env.agent.reference import NopAgent, OracleAgent, run_episode
    from t1env.env import TerminalEnv
    from t1env.sandbox import docker as D
    from t1env.sandbox.docker_images import build_bases
    from t1env.task import load_task

    if args.image_map:
        os.environ[images.MAP_ENV] = str(Path(args.image_map).resolve())
    else:
        path = Path(tempfile.mkdtemp()) / "map.toml"
        images.write_map(path, build_bases())
        os.environ[images.MAP_ENV] = str(path)
    D.configure_pool(0)
    rows = []
    for folder in sorted(FIXTURES.glob("*/*")):
        task = load_task(folder)
        if args.only and task.id not in args.only:
            continue
        D.image_for(task)  # build first: the episode times below do not include image builds
        env = TerminalEnv(task=str(folder), backend="docker", prestart=False)
        try:
            t0 = time.monotonic()
            ep = run_episode(env, OracleAgent(task))
            oracle_wall = time.monotonic() - t0
            oracle = f"{ep.info['passed']}/{ep.info['total']}"
            vtime = ep.info["verify_duration"]
            nop = run_episode(env, NopAgent())
            nop_res = f"{nop.info['passed']}/{nop.info['total']}"
        finally:
            env.close()
        up, up_time = upstream(task) if not task.origin.steps else ("(multi-step: not run)", float("nan"))
        rows.append(
            (task.id, task.origin.format, task.origin.verifier, oracle, nop_res, oracle_wall, vtime, up, up_time)
        )
        print(
            f"{task.id}: oracle {oracle} in {oracle_wall:.1f}s, no-op {nop_res}; upstream {up} in {up_time:.1f}s",
            file=sys.stderr,
        )

    print(
        "| task | format | t1 verifier | oracle checks | no-op checks | t1 oracle episode (s) | t1 verify (s) "
        "| upstream script result | upstream script (s) |"
    )
    print("|---|---|---|---:|---:|---:|---:|---|---:|")
    for tid, fmt, kind, oracle, nop, wall, vt, up, ut in rows:
        print(f"| `{tid}` | {fmt} | {kind} | {oracle} | {nop} | {wall:.2f} | {vt:.2f} | {up} | {ut:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
