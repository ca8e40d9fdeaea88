"""Benchmark: episodes per second of the oracle with the in-process and the Ray executor, 1 and 2 workers.

Four short tasks, N episodes each configuration (default 16), the oracle as the policy on the driver. Each worker
slot is a driver thread playing episodes back to back: ``inprocess`` makes each env here, ``ray`` on an
``EnvWorker`` actor (t1env.executor). All four runs happen in one process, one after the other, on the same
machine; the table gives episodes/s and wall time per episode, and the Ray overhead per episode against the
in-process run with the same number of workers.

Needs a running Ray cluster with a ``sandbox`` resource. Ray binds to the machine's interface address, so on a
single machine run the cluster and this script in a network namespace of their own (docs/scaling.md)::

    unshare -n sh -c 'ip link set lo up
      ray start --head --port=6391 --num-cpus=1 --resources="{\\"sandbox\\": 2}" --include-dashboard=false
      RAY_TMPDIR=/tmp/ray-node2 ray start --address=127.0.0.1:6391 --num-cpus=1 --resources="{\\"sandbox\\": 2}"
      python bench/ray_executor.py --address 127.0.0.1:6391; ray stop'

Usage: python bench/ray_executor.py --address ADDRESS [--episodes N]
"""

from __future__ import annotations

import argparse
import threading
import time

from t1env.agent.reference import OracleAgent, run_episode
from t1env.executor import InProcessExecutor, RayExecutor
from t1env.registry import get_task

TASKS = ["hello-file", "log-error-summary", "json-config-merge", "git-recover-branch"]


def play(executor, episodes: int, workers: int) -> tuple[float, list[float]]:
    """Wall seconds for ``episodes`` oracle episodes over ``workers`` driver threads; and every episode's reward."""
    jobs = list(range(episodes))
    lock, rewards = threading.Lock(), []

    def slot():
        while True:
            with lock:
                if not jobs:
                    return
                i = jobs.pop()
            task = get_task(TASKS[i % len(TASKS)])
            env = executor.make_env(task=str(task.path), prestart=False)
            try:
                ep = run_episode(env, OracleAgent(task), seed=i)
            finally:
                env.close()
            with lock:
                rewards.append(ep.reward)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=slot) for _ in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - t0, rewards


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--address", required=True, help="the Ray cluster, e.g. 127.0.0.1:6391")
    ap.add_argument("--episodes", type=int, default=16)
    args = ap.parse_args()
    rows = []
    for workers in (1, 2):
        local = InProcessExecutor()
        play(local, len(TASKS), workers)  # warm-up: imports, page cache
        t_local, r_local = play(local, args.episodes, workers)
        ray_ex = RayExecutor(args.address, workers=workers)
        try:
            play(ray_ex, len(TASKS), workers)  # warm-up: actors started, t1env imported on the workers
            t_ray, r_ray = play(ray_ex, args.episodes, workers)
        finally:
            ray_ex.close()
        assert sorted(r_local) == sorted(r_ray), "the oracle's rewards differ between executors"
        rows.append((workers, t_local, t_ray))
    n = args.episodes
    print(f"oracle, {n} episodes over {len(TASKS)} tasks per run")
    print(
        f"{'workers':>7} {'in-process ep/s':>16} {'ray ep/s':>9} {'in-process s/ep':>16} {'ray s/ep':>9} "
        f"{'ray overhead/ep':>16}"
    )
    for workers, t_local, t_ray in rows:
        print(
            f"{workers:>7} {n / t_local:>16.2f} {n / t_ray:>9.2f} {t_local / n * workers:>16.3f} "
            f"{t_ray / n * workers:>9.3f} {(t_ray - t_local) / n * workers * 1000:>13.0f} ms"
        )


if __name__ == "__main__":
    main()
