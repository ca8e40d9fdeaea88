"""What the egress filter (``t1env/sandbox/egress.py``) costs a network-on sandbox's start.

    python bench/network_start.py [--n 10] [--docker]

Starts and stops sandboxes with ``network = false``, ``network = true`` without the filter (its installer
replaced by a no-op, for this measurement only) and ``network = true`` as shipped, and prints the median
and p90 of ``start()`` for each, on the local backend and, with ``--docker``, on Docker (``pool=False``:
every start creates its container, so the helper container's cost is in the number; with the warm pool it
is paid in the pool's background thread). The filter image is built (or found) before timing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from t1env.sandbox import egress  # noqa: E402
from t1env.sandbox.base import SandboxConfig  # noqa: E402
from t1env.sandbox.local import LocalSandbox  # noqa: E402


def _time_starts(make, n: int) -> list[float]:
    out = []
    for _ in range(n):
        box = make()
        t0 = time.perf_counter()
        box.start()
        out.append(time.perf_counter() - t0)
        box.stop()
    return out


def _row(name: str, xs: list[float]) -> str:
    xs = sorted(xs)
    p90 = xs[min(len(xs) - 1, int(round(0.9 * (len(xs) - 1))))]
    return f"| {name} | {statistics.median(xs) * 1000:.0f} | {p90 * 1000:.0f} |"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10)
    ap.add_argument("--docker", action="store_true")
    args = ap.parse_args()
    rows = []
    backends = [("local", lambda cfg: LocalSandbox(cfg))]
    if args.docker:
        from t1env.sandbox import docker as D

        image = D.default_image()
        egress.egress_image()
        backends.append(("docker", lambda cfg: D.DockerSandbox(cfg, image=image, pool=False)))
    for name, make in backends:
        rows.append(_row(f"{name}, network = false", _time_starts(lambda: make(SandboxConfig()), args.n)))
        on = SandboxConfig(network=True)
        real = (egress.install_local, egress.install_docker)
        egress.install_local = egress.install_docker = lambda *a, **k: (
            None
        )  # both backends call them through the module
        try:
            rows.append(_row(f"{name}, network = true, no filter", _time_starts(lambda: make(on), args.n)))
        finally:
            egress.install_local, egress.install_docker = real
        rows.append(_row(f"{name}, network = true, filtered", _time_starts(lambda: make(on), args.n)))
    print("| sandbox | start median (ms) | p90 (ms) |\n|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
