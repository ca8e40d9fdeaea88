"""Terminal-Bench 1.x and Harbor task folders run unchanged (t1env.formats, t1env.images, t1env.export).

Fixtures: ``tests/fixtures/compat/terminal-bench/*`` (tb-word-count, tb-expected-files: a multi-file
tests/, tb-keystrokes: solution.yaml, tb-apt-package: a Dockerfile installing a Debian package,
tb-old-descriptions) and ``tests/fixtures/compat/harbor/*`` (hb-log-levels: pytest + a benchmark
org, hb-sorted-output: multi-file tests/ reading /tests, hb-reward-json: a non-pytest test.sh with a
multi-key reward.json, hb-apt-jq: apt in the Dockerfile, hb-two-step: two steps with a min_reward gate).
The Docker tests build the base stand-ins (``t1env images build-bases``) and run every fixture with
the network off for the whole episode: verification needs none.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from t1env import images
from t1env.agents import NopAgent, OracleAgent, run_episode
from t1env.env import TerminalEnv
from t1env.formats import Keystroke
from t1env.formats.oracle import keystroke_actions
from t1env.registry import get_task, list_tasks, split_of, training_tasks
from t1env.task import TaskError, load_task

ROOT = Path(__file__).resolve().parents[2]
COMPAT = ROOT / "tests" / "fixtures" / "compat"
TB = sorted((COMPAT / "terminal-bench").iterdir())
HB = sorted((COMPAT / "harbor").iterdir())


# -- loading ----------------------------------------------------------------------------------------

def test_every_fixture_loads_with_its_format_and_checks():
    got = {p.name: (load_task(p).origin.format, load_task(p).origin.verifier, len(load_task(p).declared_checks())) for p in TB + HB}
    assert got == {
        "tb-apt-package": ("terminal-bench", "pytest", 3), "tb-expected-files": ("terminal-bench", "pytest", 3),
        "tb-keystrokes": ("terminal-bench", "pytest", 3), "tb-old-descriptions": ("terminal-bench", "pytest", 3),
        "tb-word-count": ("terminal-bench", "pytest", 3),
        "hb-apt-jq": ("harbor", "pytest", 3), "hb-log-levels": ("harbor", "pytest", 4),
        "hb-reward-json": ("harbor", "script", 3), "hb-sorted-output": ("harbor", "pytest", 3), "hb-two-step": ("harbor", "pytest", 5),
    }


def test_terminal_bench_fields_map_onto_the_task():
    t = load_task(COMPAT / "terminal-bench" / "tb-word-count")
    s = t.spec
    assert (s.limits.agent_timeout, s.limits.verifier_timeout, s.environment.workdir) == (120.0, 60.0, "/app")
    assert (s.difficulty, s.category, s.verifier.mode, s.environment.network) == ("easy", "file-operations", "shared", True)
    assert t.solution.name == "solution.sh" and t.dockerfile.name == "Dockerfile" and t.workdir_files() == []
    old = load_task(COMPAT / "terminal-bench" / "tb-old-descriptions")
    assert old.instruction.startswith("Make the directory /app/build") and old.spec.difficulty == "medium"
    assert "difficulty-unknown" in old.spec.tags


def test_harbor_fields_map_onto_the_task():
    t = load_task(COMPAT / "harbor" / "hb-log-levels")
    s = t.spec
    assert (s.limits.agent_timeout, s.limits.verifier_timeout, s.environment.memory_mb) == (300.0, 120.0, 1024)
    assert (s.verifier.mode, s.environment.network) == ("shared", False)  # Harbor's default mode; no-network
    assert load_task(COMPAT / "harbor" / "hb-sorted-output").spec.verifier.mode == "separate"
    assert load_task(COMPAT / "harbor" / "hb-apt-jq").spec.environment.memory_mb == 1024  # memory = "1G"
    two = load_task(COMPAT / "harbor" / "hb-two-step")
    assert [st.origin.step_name for st in two.origin.steps] == ["create", "extend"]
    assert [st.spec.verifier.mode for st in two.origin.steps] == ["shared", "shared"]
    assert two.origin.steps[0].origin.min_reward == 1.0
    rj = load_task(COMPAT / "harbor" / "hb-reward-json")
    assert rj.declared_checks() == ["has_file", "port", "mode"] and rj.origin.script == "test.sh"


def test_harbor_environment_mode_separate_maps_and_the_local_backend_says_why_not(tmp_path):
    from t1env.sandbox import SandboxError, make_sandbox

    with pytest.raises(SandboxError, match=r"Dockerfile:2: needs its Dockerfile \(RUN"):
        make_sandbox("local", load_task(COMPAT / "harbor" / "hb-apt-jq"))
    with pytest.raises(SandboxError, match="shares the agent's environment"):
        make_sandbox("local", load_task(COMPAT / "harbor" / "hb-two-step"))


@pytest.mark.parametrize("name, text, message", [
    ("task.yaml", "difficulty: easy\n", "task.yaml: instruction: missing or empty"),
    ("task.yaml", "instruction: x\nmax_agent_timeout_sec: soon\n", "task.yaml: max_agent_timeout_sec: Input should be a valid number"),
    ("task.yaml", "instruction: x\ndifficulty: brutal\n", "difficulty: 'brutal' is not one of"),
    ("task.yaml", "instruction: [unclosed\n", "task.yaml: line 2: invalid YAML"),
    ("task.toml", '[task]\nname = "no-slash"\n', "task.toml: task.name: String should match pattern"),
    ("task.toml", '[task]\nname = "a/b"\n[environment]\nmemory = "lots"\n', "task.toml: environment.memory: String should match"),
    ("task.toml", '[task]\nname = "a/b"\n[verifier]\nenvironment_mode = "both"\n', "task.toml: verifier.environment_mode: Input should be"),
])
def test_malformed_imported_packages_fail_in_one_line_naming_file_and_field(tmp_path, name, text, message):
    src = COMPAT / ("terminal-bench/tb-word-count" if name == "task.yaml" else "harbor/hb-sorted-output")
    d = tmp_path / "bad"
    shutil.copytree(src, d)
    (d / name).write_text(text)
    with pytest.raises(TaskError) as e:
        load_task(d)
    assert message in str(e.value) and "\n" not in str(e.value) and str(d / name) in str(e.value)


def test_keystroke_solution_yaml_becomes_key_and_command_actions():
    t = load_task(COMPAT / "terminal-bench" / "tb-keystrokes")
    assert t.origin.keystrokes[0] == Keystroke("cat > /app/notes.txt <<'EOF'", 0.1, False, True)
    acts = keystroke_actions(t.origin.keystrokes, 60)
    assert acts[0] == {"keys": ["cat > /app/notes.txt <<'EOF'", "Enter"], "wait": 0.1}
    assert acts[-1]["command"].startswith("printf") and acts[-1]["timeout"] == 60


# -- contamination guard ----------------------------------------------------------------------------

def test_benchmark_tasks_are_eval_only_and_never_in_train(tmp_path):
    dirs = [COMPAT / "terminal-bench", COMPAT / "harbor"]
    train = list_tasks(split="train", task_dirs=dirs)
    assert not any(t.startswith("tb-") for t in train) and "hb-log-levels" not in train
    assert "hb-sorted-output" in train or split_of("hb-sorted-output") == "test"  # an ordinary task: by hash
    with pytest.raises(TaskError, match=r"tb-word-count: an imported benchmark task is eval-only \(benchmark canary string"):
        training_tasks(["hello-file", "tb-word-count"], task_dirs=dirs)
    with pytest.raises(TaskError, match="benchmark org 'terminal-bench'"):
        training_tasks(["hb-log-levels"], task_dirs=dirs)
    marked = tmp_path / "mine"
    shutil.copytree(COMPAT / "harbor" / "hb-sorted-output", marked)
    (marked / ".t1-eval-only").write_text("")
    with pytest.raises(TaskError, match="marked eval-only"):
        training_tasks([str(marked)])
    assert training_tasks(["hello-file"]) == ["hello-file"]


def test_decontam_reads_both_layouts():
    from t1env.decontam import read_corpus

    docs = {d.task: d for d in read_corpus(COMPAT) if d.part == "instruction"}
    assert "Count the words" in docs["terminal-bench/tb-word-count"].text
    assert "Make the directory /app/build" in docs["terminal-bench/tb-old-descriptions"].text
    assert "per level" in docs["harbor/hb-log-levels"].text


# -- images -----------------------------------------------------------------------------------------

def test_image_map_file_and_errors(tmp_path):
    m = tmp_path / "map.toml"
    images.write_map(m, {"ghcr.io/x/base:1": "local/base:1"})
    assert images.load_map(m) == {"ghcr.io/x/base:1": "local/base:1"}
    text = "FROM ghcr.io/x/base:1 AS build\nRUN make\nFROM build\nFROM --platform=linux/amd64 ghcr.io/x/base:1\n"
    out = images.rewrite_from(text, images.load_map(m))
    assert out.count("local/base:1") == 2 and images.from_images(out) == ["local/base:1", "local/base:1"]
    m.write_text('"a" = 3\n')
    with pytest.raises(images.ImageMapError, match=r"map.toml: a: the local image must be a non-empty string"):
        images.load_map(m)
    with pytest.raises(images.ImageMapError, match="image map not found"):
        images.load_map(tmp_path / "nope.toml")


def test_cli_rejects_a_malformed_image_map_in_one_line(tmp_path):
    m = tmp_path / "map.toml"
    m.write_text("not toml = = =\n")
    r = subprocess.run([sys.executable, "-m", "t1env", "list", "--image-map", str(m)], capture_output=True, text=True)
    assert r.returncode == 2 and "map.toml: invalid TOML" in r.stderr and len(r.stderr.strip().splitlines()) == 1


# -- export -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["harbor", "terminal-bench"])
def test_export_writes_a_loadable_package_with_the_same_checks(tmp_path, fmt):
    from t1env.export import export

    src = get_task("hello-file")
    (d,) = export([src], fmt, tmp_path)
    back = load_task(d)
    assert back.origin.format == fmt and back.origin.verifier == "pytest"
    assert back.declared_checks() == src.declared_checks()
    rt = back.tests_dir / "_t1"
    assert json.loads((rt / "checks.json").read_text()) == src.declared_checks() and (rt / "pytest.zip").is_file()
    script = (back.tests_dir / "test.sh") if fmt == "harbor" else (d / "run-tests.sh")
    assert "curl" not in script.read_text() and "reward.json" in script.read_text()
    with pytest.raises(ValueError, match="already exists"):
        export([src], fmt, tmp_path)


# -- episodes on the local backend -------------------------------------------------------------------

@pytest.mark.needs_bwrap
@pytest.mark.parametrize("name", ["harbor/hb-sorted-output", "harbor/hb-reward-json", "terminal-bench/tb-keystrokes"])
def test_local_backend_runs_imported_tasks_that_need_nothing_from_their_image(name):
    env = TerminalEnv(task=str(COMPAT / name), prestart=False)
    try:
        task = get_task(str(COMPAT / name))
        good = run_episode(env, OracleAgent(task), seed=0).info
        bad = run_episode(env, NopAgent(), seed=0).info
    finally:
        env.close()
    assert good["resolved"] and good["verifier_error"] is None, good["checks"]
    assert bad["passed"] < bad["total"] == good["total"]


@pytest.mark.needs_bwrap
def test_script_verifier_ignores_a_reward_file_the_agent_planted():
    """The agent writes /logs/verifier/reward.json and a test.sh-like script of its own: the verifier's
    /logs/verifier is its own (a fresh tmpfs), and only the host-declared keys count."""
    env = TerminalEnv(task=str(COMPAT / "harbor" / "hb-reward-json"), prestart=False)
    try:
        env.reset(seed=0)
        forged = json.dumps({"has_file": 1, "port": 1, "mode": 1, **{f"k{i}": 1 for i in range(20)}})
        env.step(f"mkdir -p /tmp/logs && echo '{forged}' > /tmp/logs/reward.json; echo '{forged}' > /app/reward.json")
        _, reward, _, _, info = env.step({"submit": True})
    finally:
        env.close()
    assert (reward, info["total"]) == (0.0, 3)


# -- the Docker backend: every fixture, network off ----------------------------------------------------

def _docker_ready() -> tuple[bool, str]:
    try:
        from t1env.sandbox import docker as D
    except ImportError:
        return False, "the docker SDK is not installed"
    return D.engine_ready(images.BASE_FROM)


_UP, _WHY = _docker_ready() if os.environ.get("T1_SKIP_DOCKER_PROBE") is None else (False, "probe skipped")
docker_only = [pytest.mark.docker, pytest.mark.slow, pytest.mark.skipif(not _UP, reason=_WHY)]


@pytest.fixture(scope="module")
def image_map(tmp_path_factory):
    path = tmp_path_factory.mktemp("images") / "map.toml"
    images.write_map(path, images.build_bases())  # `t1env images build-bases --map FILE`
    return path


@pytest.fixture
def offline(monkeypatch, image_map):
    """The image map in force, and every sandbox without network (so verification provably needs none)."""
    from t1env.sandbox.base import SandboxConfig

    monkeypatch.setenv(images.MAP_ENV, str(image_map))
    original = SandboxConfig.from_task.__func__
    monkeypatch.setattr(SandboxConfig, "from_task", classmethod(lambda cls, task, **kw: original(cls, task, **{**kw, "network": False})))


@pytest.mark.parametrize("path", [pytest.param(p, id=p.name, marks=docker_only) for p in TB + HB])
def test_docker_oracle_full_marks_noop_less(path, offline):
    from t1env.validate import validate_task

    v = validate_task(str(path), backend="docker", runs=1, exploits=False)  # the imported tasks are not ours to fix
    assert v.ok, v.problems
    assert v.oracle[0][0] == v.oracle[0][1] and v.nop[0] < v.nop[1]


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.skipif(not _UP, reason=_WHY)
def test_a_missing_from_image_fails_in_one_line_naming_the_image_and_the_map(tmp_path, monkeypatch):
    from t1env.sandbox import SandboxError
    from t1env.sandbox import docker as D

    monkeypatch.delenv(images.MAP_ENV, raising=False)
    d = tmp_path / "tb"
    shutil.copytree(COMPAT / "terminal-bench" / "tb-word-count", d)
    (d / "Dockerfile").write_text("FROM ghcr.io/example/not-here:1\nWORKDIR /app\n")
    with pytest.raises(SandboxError) as e:
        D.image_for(load_task(d))
    assert "FROM ghcr.io/example/not-here:1: not in the local Docker engine" in str(e.value)
    assert "T1ENV_IMAGE_MAP" in str(e.value) and "--image-map" in str(e.value) and "\n" not in str(e.value)


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.skipif(not _UP, reason=_WHY)
def test_two_step_gate_stops_after_a_failed_step(offline):
    task = get_task(str(COMPAT / "harbor" / "hb-two-step"))
    env = TerminalEnv(task=str(task.path), backend="docker", prestart=False)
    try:
        env.reset(seed=0)
        _, _, terminated, _, info = env.step({"submit": True})  # step "create" not done: min_reward 1.0 not met
    finally:
        env.close()
    assert terminated and info["end_reason"] == "min_reward" and "below min_reward 1" in info["gate"]
    assert [c["outcome"] for c in info["checks"]][2:] == ["not run"] * 3 and info["total"] == 5


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.skipif(not _UP, reason=_WHY)
def test_export_round_trip_keeps_per_check_results(tmp_path, offline):
    from t1env.export import export

    src = get_task("hello-file")

    def play(path: str, agent) -> list[tuple[str, bool]]:
        env = TerminalEnv(task=path, backend="docker", prestart=False)
        try:
            return [(c["name"], c["passed"]) for c in run_episode(env, agent, seed=0).info["checks"]]
        finally:
            env.close()

    want = play(str(src.path), OracleAgent(src))
    for fmt in ("harbor", "terminal-bench"):
        (d,) = export([src], fmt, tmp_path / fmt)
        back = load_task(d)
        assert play(str(d), OracleAgent(back)) == want
    assert play(str(tmp_path / "harbor" / src.id), NopAgent()) != want


# -- interop with Harbor's own package (Python >= 3.12, in a venv of its own) ----------------------------

@pytest.fixture(scope="module")
def harbor_python(interop_python):
    return interop_python  # tests/conftest.py: a Python >= 3.12 venv with the harbor package


@pytest.mark.slow
def test_harbor_taskconfig_reads_every_exported_and_fixture_task_toml(tmp_path, harbor_python):
    from t1env.export import export
    from t1env.registry import builtin_tasks_dir

    ids = sorted(p.name for p in builtin_tasks_dir().iterdir() if (p / "task.toml").is_file() and not (p / "environment" / "Dockerfile").is_file())
    dirs = export([get_task(i) for i in ids], "harbor", tmp_path)
    files = [str(d / "task.toml") for d in dirs] + [str(p / "task.toml") for p in HB]
    script = textwrap.dedent("""
        import sys, warnings
        from harbor.models.task.config import TaskConfig
        warnings.simplefilter("ignore")
        for f in sys.argv[1:]:
            c = TaskConfig.model_validate_toml(open(f).read())
            print(f, c.verifier.environment_mode.value if c.verifier.environment_mode else "-", c.task.name if c.task else "-")
    """)
    r = subprocess.run([harbor_python, "-c", script, *files], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.strip().splitlines()
    assert len(lines) == len(files) and len(dirs) >= 30
    assert all(line.split()[1] in ("separate", "shared", "-") for line in lines)


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.skipif(not _UP, reason=_WHY)
def test_what_harbors_terminal_bench_mapper_writes_t1_runs(tmp_path, harbor_python, offline):
    src = tmp_path / "tb"
    src.mkdir()
    for name in ("tb-word-count", "tb-expected-files"):
        shutil.copytree(COMPAT / "terminal-bench" / name, src / name)
    script = ("import sys; from pathlib import Path; from harbor.mappers.terminal_bench import TerminalBenchMapper; "
              "r = TerminalBenchMapper().map(Path(sys.argv[1]), Path(sys.argv[2])); print(len(r.mapped), r.failed)")
    r = subprocess.run([harbor_python, "-c", script, str(src), str(tmp_path / "out")], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith("2 []"), r.stdout + r.stderr[-2000:]
    for name in ("tb-word-count", "tb-expected-files"):
        task = load_task(tmp_path / "out" / name)
        assert task.origin.format == "harbor" and task.origin.verifier == "pytest" and len(task.declared_checks()) == 3
        env = TerminalEnv(task=str(task.path), backend="docker", prestart=False)
        try:
            info = run_episode(env, OracleAgent(task), seed=0).info
        finally:
            env.close()
        assert info["resolved"], info["checks"]
