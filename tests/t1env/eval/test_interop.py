"""Every trajectory.json of a job validates with the `harbor` package's own ATIF models, and every terminal.cast
loads with the `asciinema` package's parser (and `asciinema cat` replays it). Harbor needs Python >= 3.12: the
test makes a venv with it in t1's cache folder the first time (CI has the package registry)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from t1env.eval import EvalConfig, run_job

pytestmark = [pytest.mark.slow, pytest.mark.needs_bwrap]

CHECK = r"""
import json, subprocess, sys
from pathlib import Path
from harbor.models.trajectories import Trajectory
from asciinema.asciicast import open_from_url
n_traj = n_cast = 0
for job in sys.argv[1:]:
    for p in sorted(Path(job).glob("*/trajectory.json")):
        t = Trajectory.model_validate(json.loads(p.read_text()))
        assert t.steps[0].source == "user" and all(s.source == "agent" for s in t.steps[1:]), p
        n_traj += 1
    for p in sorted(Path(job).glob("*/terminal.cast")):
        with open_from_url(str(p)) as cast:
            times = [e[0] for e in cast.events()]
        assert cast.v2_header["version"] == 2 and times == sorted(times) and times, p
        out = subprocess.run([sys.executable, "-m", "asciinema", "cat", str(p)], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        n_cast += 1
print(json.dumps({"trajectories": n_traj, "casts": n_cast}))
"""


def test_trajectories_and_casts_validate_with_harbor_and_asciinema(tmp_path, interop_python):
    here = str(Path(__file__).parent)
    sys.path.insert(0, here)
    try:
        run_job(EvalConfig(tasks=["hello-file", "log-error-summary"], agent="oracle", attempts=2), tmp_path / "o")
        run_job(EvalConfig(tasks=["hello-file"], agent="noop"), tmp_path / "n")
        run_job(EvalConfig(tasks=["hello-file"], agent="blocking_agent:RaisingAgent"), tmp_path / "e")
    finally:
        sys.path.remove(here)
    out = subprocess.run(
        [str(interop_python), "-c", CHECK, str(tmp_path / "o"), str(tmp_path / "n"), str(tmp_path / "e")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"trajectories": 6, "casts": 6}
