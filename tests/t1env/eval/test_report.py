"""`t1env report`: markdown + self-contained HTML with four plots, the two-job comparison, and a real headless
Chromium rendering of the HTML (slow; skipped where Debian's chromium is not installed)."""

import base64
import re
import shutil
import subprocess

import pytest

from t1env.cli import main
from t1env.eval import EvalConfig, run_job

pytestmark = pytest.mark.needs_bwrap
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def jobs(tmp_path_factory):
    root = tmp_path_factory.mktemp("jobs")
    run_job(
        EvalConfig(tasks=["hello-file", "csv-region-totals"], agent="oracle", attempts=2, concurrency=2),
        root / "oracle",
    )
    run_job(EvalConfig(tasks=["hello-file", "csv-region-totals"], agent="noop", attempts=2), root / "noop")
    return root / "oracle", root / "noop"


def test_one_job_report_has_every_plot_inline_and_as_files(jobs, capsys):
    job = jobs[0]
    assert main(["report", str(job)]) == 0
    md = (job / "report.md").read_text()
    html = (job / "report.html").read_text()
    plots = ["resolved_by_category.png", "pass_at_k.png", "passing_fraction.png", "turns_vs_reward.png"]
    for p in plots:
        assert f"]({p})" in md and (job / p).read_bytes().startswith(PNG)
    inline = re.findall(r'src="data:image/png;base64,([^"]+)"', html)
    assert len(inline) == 4 and all(base64.b64decode(b).startswith(PNG) for b in inline)
    assert "1.000 (95% Wilson [0.510, 1.000])" in md and "| hello-file | files | easy | 2 | 1.00 |" in md
    assert "http" not in html  # self-contained


def test_comparing_two_jobs_lists_deltas_and_flipped_tasks(jobs, tmp_path):
    assert main(["report", str(jobs[0]), str(jobs[1]), "--out", str(tmp_path)]) == 0
    md = (tmp_path / "report.md").read_text()
    assert "| hello-file | 1.00 | 0.00 | -1.00 | 5.00 | 0.00 | now failing |" in md
    assert "csv-region-totals (now failing), hello-file (now failing)" in md


def test_report_of_a_folder_that_is_not_a_job_names_it(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 2
    assert f"t1env report {tmp_path}: no result.json" in capsys.readouterr().err


@pytest.mark.slow
def test_html_renders_in_headless_chromium(jobs, tmp_path):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    assert main(["report", str(jobs[0]), str(jobs[1]), "--out", str(tmp_path)]) == 0
    shot = tmp_path / "screenshot.png"
    subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--window-size=1200,1500",
            f"--screenshot={shot}",
            (tmp_path / "report.html").as_uri(),
        ],
        capture_output=True,
        timeout=120,
        check=True,
    )
    import matplotlib.image

    pixels = matplotlib.image.imread(str(shot))
    assert pixels.shape[:2] == (1500, 1200)
    # the plots drew: the screenshot holds the plots' blue and orange, not only text on white
    blue = ((abs(pixels[..., 0] - 0x3B / 255) < 0.02) & (abs(pixels[..., 2] - 0xA8 / 255) < 0.02)).sum()
    orange = ((abs(pixels[..., 0] - 0xD9 / 255) < 0.02) & (abs(pixels[..., 1] - 0x82 / 255) < 0.02)).sum()
    assert blue > 1000 and orange > 100


def test_checks_that_ran_agent_code_are_in_the_trial_job_and_report(tmp_path):
    """An imported task whose check imports the agent's module (fixture harbor-agent-module): the trial's
    result.json names the check, the job's metrics count the trial, and the report lists it."""
    import json
    from pathlib import Path

    fixture = Path(__file__).resolve().parents[2] / "fixtures" / "tasks" / "harbor-agent-module"
    job = tmp_path / "job"
    run_job(EvalConfig(tasks=[str(fixture)], agent="oracle", attempts=1), job)
    (trial,) = [json.loads(p.read_text()) for p in job.glob("*/result.json")]
    assert trial["resolved"] and trial["checks_trusting_agent_code"] == ["test_outputs.py::test_add"]
    metrics = json.loads((job / "result.json").read_text())
    assert metrics["trials_trusting_agent_code"] == 1
    assert main(["report", str(job)]) == 0
    md = (job / "report.md").read_text()
    assert "## Checks that ran agent code in process" in md and "| test_outputs.py::test_add |" in md
