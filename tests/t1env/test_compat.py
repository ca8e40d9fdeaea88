"""Terminal-Bench 1.x and Harbor task folders run unchanged (t1env.formats, t1env.images, t1env.tools.export).

Fixtures: ``tests/fixtures/compat/terminal-bench/*`` (tb-word-count, tb-expected-files: a multi-file
tests/, tb-keystrokes: solution.yaml, tb-apt-package: a Dockerfile installing a Debian package,
tb-old-descriptions) and ``tests/fixtures/compat/harbor/*`` (hb-log-levels: pytest + a benchmark
org, hb-sorted-output: multi-file tests/ reading /tests, hb-reward-json: a non-pytest test.sh with a
multi-key reward.json, hb-apt-jq: apt in the Dockerfile, hb-two-step: two steps with a min_reward gate).
tb-test-tools and hb-test-tools (shared and separate verifier mode) have checks that need what
upstream's test script and base image give the tests: a package the script installs (tabulate), the
``python`` command and ``git``.
The Docker tests build the base stand-ins (``t1env images build-bases``) and run every fixture with
the network off for the whole episode: verification needs none.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from t1env import images
from t1env.agent.reference import NopAgent, OracleAgent, run_episode
from t1env.env import TerminalEnv
from t1env.formats.oracle import keystroke_actions
from t1env.registry import get_task, list_tasks, split_of, training_tasks
from t1env.sandbox.docker_images import build_bases
from t1env.task import Keystroke, TaskError, load_task

ROOT = Path(__file__).resolve().parents[2]
COMPAT = ROOT / "tests" / "fixtures" / "compat"
TB = sorted((COMPAT / "terminal-bench").iterdir())
HB = sorted((COMPAT / "harbor").iterdir())


# -- loading ----------------------------------------------------------------------------------------


def test_every_fixture_loads_with_its_format_and_checks():
    got = {
        p.name: (load_task(p).origin.format, load_task(p).origin.verifier, len(load_task(p).declared_checks()))
        for p in TB + HB
    }
    assert got == {
        "tb-apt-package": ("terminal-bench", "pytest", 3),
        "tb-expected-files": ("terminal-bench", "pytest", 3),
        "tb-keystrokes": ("terminal-bench", "pytest", 3),
        "tb-old-descriptions": ("terminal-bench", "pytest", 3),
        "tb-word-count": ("terminal-bench", "pytest", 3),
        "tb-test-tools": ("terminal-bench", "pytest", 3),
        "hb-test-tools": ("harbor", "pytest", 3),
        "hb-apt-jq": ("harbor", "pytest", 3),
        "hb-log-levels": ("harbor", "pytest", 4),
        "hb-reward-json": ("harbor", "script", 3),
        "hb-sorted-output": ("harbor", "pytest", 3),
        "hb-two-step": ("harbor", "pytest", 5),
    }


def test_terminal_bench_fields_map_onto_the_task():
    t = load_task(COMPAT / "terminal-bench" / "tb-word-count")
    s = t.spec
    assert (s.limits.agent_timeout, s.limits.verifier_timeout, s.environment.workdir) == (120.0, 60.0, "/app")
    assert (s.difficulty, s.category, s.verifier.mode, s.environment.network) == (
        "easy",
        "file-operations",
        "shared",
        True,
    )
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


@pytest.mark.parametrize(
    "script, want",
    [
        ("uv pip install pytest==8.4.1 numpy==2.3.3", ("numpy==2.3.3",)),  # Terminal-Bench's run-tests.sh
        (
            "uvx -p 3.13 -w pytest==8.4.1 -w pytest-json-ctrf==0.3.5 -w numpy pytest /tests -rA",
            ("numpy",),
        ),  # Harbor's test.sh
        (
            "pip install numpy && pip3 install --no-cache-dir -q 'scipy>=1.11,<2' -i https://mirror.example.invalid/simple",
            ("numpy", "scipy>=1.11,<2"),
        ),
        (
            "python3 -m pip install -r /tests/requirements.txt requests[socks]; uv add PyYAML",
            ("requests[socks]", "PyYAML"),
        ),
        ("uv run --with a,b --with=c pytest\nuv tool run -w d pytest", ("a", "b", "c", "d")),
        ("pip install \\\n  six \\\n  toml  # and a comment: pip install nope", ("six", "toml")),
        ("# pip install commented-out\npip install -e . ./pkg https://x.example.invalid/p.whl $EXTRA pytest", ()),
        ("apt-get install -y python3-pip && uv venv && uv pip install pytest", ()),
    ],
)
def test_test_requirements_are_read_from_upstream_test_scripts(script, want):
    from t1env.formats import test_requirements

    assert test_requirements(script) == want


def test_fixture_test_deps_and_the_local_backends_one_line_refusal(tmp_path):
    from t1env.sandbox import SandboxError, make_sandbox

    tb, hb = load_task(COMPAT / "terminal-bench" / "tb-test-tools"), load_task(COMPAT / "harbor" / "hb-test-tools")
    assert tb.origin.test_deps == hb.origin.test_deps == ("tabulate==0.9.0",)
    assert (tb.origin.test_deps_source.name, hb.origin.test_deps_source.name) == ("run-tests.sh", "test.sh")
    assert not any(load_task(p).origin.test_deps for p in TB + HB if not p.name.endswith("test-tools"))
    # a task the local backend could otherwise run (its Dockerfile only picks a base) is refused for its test deps
    d = tmp_path / "hb-deps"
    shutil.copytree(COMPAT / "harbor" / "hb-test-tools", d)
    (d / "environment" / "Dockerfile").write_text("FROM python:3.13-slim-bookworm\nWORKDIR /app\n")
    with pytest.raises(SandboxError) as e:
        make_sandbox("local", load_task(d))
    msg = str(e.value)
    assert (
        str(d) in msg and "tabulate==0.9.0 (from test.sh)" in msg and "use backend='docker'" in msg and "\n" not in msg
    )
    # [metadata.t1] test_deps replaces what test.sh says; a bad entry fails in one line naming the file and field
    toml = (d / "task.toml").read_text()
    (d / "task.toml").write_text(toml + '\n[metadata.t1]\ntest_deps = ["numpy>=2", "pytest"]\n')
    assert load_task(d).origin.test_deps == ("numpy>=2",)
    (d / "task.toml").write_text(toml + '\n[metadata.t1]\ntest_deps = ["numpy; rm -rf /"]\n')
    with pytest.raises(TaskError, match=r"task.toml: metadata.t1.test_deps: 'numpy; rm -rf /' is not a requirement"):
        load_task(d)


def test_host_pip_config_is_merged_in_pips_order_without_local_paths(tmp_path, monkeypatch):
    xdg, home = tmp_path / "xdg", tmp_path / "home"
    (xdg / "pip").mkdir(parents=True)
    (home / ".config" / "pip").mkdir(parents=True)
    (xdg / "pip" / "pip.conf").write_text("[global]\nindex-url = https://a.example.invalid/simple\nretries = 2\n")
    (home / ".config" / "pip" / "pip.conf").write_text(
        "[global]\nextra-index-url = file:///opt/local/simple https://b.example.invalid/simple\nfind-links = /opt/wheels\n"
        "constraint = /etc/constraints.txt\n[install]\ntrusted-host = b.example.invalid\n"
    )
    for var in (
        "PIP_INDEX_URL",
        "PIP_EXTRA_INDEX_URL",
        "PIP_TRUSTED_HOST",
        "PIP_CONFIG_FILE",
        "PIP_RETRIES",
        "XDG_CONFIG_HOME",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("XDG_CONFIG_DIRS", str(xdg))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PIP_RETRIES", "7")  # a variable outranks every file, as in pip
    got = images.host_pip_config()
    assert got["index-url"] == "https://a.example.invalid/simple" and got["retries"] == "7"
    assert got["extra-index-url"] == "https://b.example.invalid/simple" and got["trusted-host"] == "b.example.invalid"
    assert not {"find-links", "constraint"} & set(got)
    conf = {name: data for name, data, _ in images.index_files()}.get(".t1-index/pip.conf", b"").decode()
    assert (
        conf.startswith("[global]\n")
        and "index-url = https://a.example.invalid/simple\n" in conf
        and "/opt/" not in conf
    )


def test_a_built_stand_in_replaces_a_missing_public_base_and_the_map_wins():
    built = {"t1env/tb-python-3-13:local"}
    public = "ghcr.io/laude-institute/t-bench/python-3-13:20250620"
    assert images.resolve_image(public, {}, built.__contains__) == "t1env/tb-python-3-13:local"
    assert images.resolve_image(public, {public: "mine:1"}, built.__contains__) == "mine:1"
    assert images.resolve_image(public, {}, lambda n: False) == public  # not built: the FROM stays, and fails to build
    assert images.resolve_image("ghcr.io/x/other:1", {}, built.__contains__) == "ghcr.io/x/other:1"
    assert "t1env images build-bases" in images.missing_hint(public) and "--image-map" in images.missing_hint(
        "ghcr.io/x/other:1"
    )
    text = images.rewrite_from(
        f"FROM {public} AS a\nFROM debian:bookworm\n", {}, lambda n: n in built or n == "debian:bookworm"
    )
    assert text == "FROM t1env/tb-python-3-13:local AS a\nFROM debian:bookworm\n"
    dockerfile = images.verifier_dockerfile("t1env/task-x:1", ("tabulate==0.9.0",))
    assert dockerfile.startswith("FROM t1env/task-x:1\n") and '"python3", "-m", "pip", "install"' in dockerfile
    assert dockerfile.rstrip().endswith('"tabulate==0.9.0"]')


@pytest.mark.parametrize(
    "name, text, message",
    [
        ("task.yaml", "difficulty: easy\n", "task.yaml: instruction: missing or empty"),
        (
            "task.yaml",
            "instruction: x\nmax_agent_timeout_sec: soon\n",
            "task.yaml: max_agent_timeout_sec: Input should be a valid number",
        ),
        ("task.yaml", "instruction: x\ndifficulty: brutal\n", "difficulty: 'brutal' is not one of"),
        ("task.yaml", "instruction: [unclosed\n", "task.yaml: line 2: invalid YAML"),
        ("task.toml", '[task]\nname = "no-slash"\n', "task.toml: task.name: String should match pattern"),
        (
            "task.toml",
            '[task]\nname = "a/b"\n[environment]\nmemory = "lots"\n',
            "task.toml: environment.memory: String should match",
        ),
        (
            "task.toml",
            '[task]\nname = "a/b"\n[verifier]\nenvironment_mode = "both"\n',
            "task.toml: verifier.environment_mode: Input should be",
        ),
    ],
)
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
    with pytest.raises(
        TaskError, match=r"tb-word-count: an imported benchmark task is eval-only \(benchmark canary string"
    ):
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
    from t1env.tools.decontam import read_corpus

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
    from t1env.tools.export import export

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
    images.write_map(path, build_bases())  # `t1env images build-bases --map FILE`
    return path


@pytest.fixture
def no_network(monkeypatch):
    """Every sandbox without network for the whole episode (so verification provably needs none)."""
    from t1env.sandbox.base import SandboxConfig

    original = SandboxConfig.from_task.__func__
    monkeypatch.setattr(
        SandboxConfig, "from_task", classmethod(lambda cls, task, **kw: original(cls, task, **{**kw, "network": False}))
    )


@pytest.fixture
def offline(monkeypatch, image_map, no_network):
    """The image map in force, and every sandbox without network."""
    monkeypatch.setenv(images.MAP_ENV, str(image_map))


@pytest.mark.parametrize("path", [pytest.param(p, id=p.name, marks=docker_only) for p in TB + HB])
def test_docker_oracle_full_marks_noop_less(path, offline):
    from t1env.tools.validate import validate_task

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
def test_the_missing_base_error_advice_works_as_written(tmp_path, monkeypatch, image_map, no_network):
    """No image map: a task FROM a Terminal-Bench base whose stand-in is not built fails in one line naming
    `t1env images build-bases`; after running that command as written, the same task runs (no map, no variable)."""
    from t1env.sandbox import SandboxError
    from t1env.sandbox import docker as D

    monkeypatch.delenv(images.MAP_ENV, raising=False)
    public = "ghcr.io/laude-institute/t-bench/ubuntu-24-04:20250624"  # no fixture uses this base: safe to untag
    d = tmp_path / "tb-on-ubuntu"
    shutil.copytree(COMPAT / "terminal-bench" / "tb-word-count", d)
    (d / "Dockerfile").write_text(f"FROM {public}\nWORKDIR /app\nCOPY input.txt /app/input.txt\n")
    D.client().images.remove(images.TB_BASES[public])  # the tag only: the image stays under its content tag
    try:
        with pytest.raises(SandboxError) as e:
            D.image_for(load_task(d))
        msg = str(e.value)
        assert f"FROM {public}: not in the local Docker engine" in msg and "\n" not in msg
        command = re.search(r"`(t1env [^`]+)`", msg).group(1)
        assert command == "t1env images build-bases"
        script = Path(sys.executable).with_name("t1env")
        argv = [str(script)] if script.exists() else [sys.executable, "-m", "t1env"]
        r = subprocess.run(argv + command.split()[1:], capture_output=True, text=True, timeout=1800)
        assert r.returncode == 0, r.stderr[-2000:]
        env = TerminalEnv(task=str(d), backend="docker", prestart=False)
        try:
            info = run_episode(env, OracleAgent(load_task(d)), seed=0).info
        finally:
            env.close()
        assert info["resolved"] and info["verifier_error"] is None, info["checks"]
    finally:
        build_bases()  # a cache hit: tags the stand-ins again whatever happened above


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.skipif(not _UP, reason=_WHY)
def test_tests_dependencies_are_in_the_verifiers_image_only(offline):
    """What test.sh installs for the tests is in the verifier's image, not the agent's (as upstream, where it
    arrives after the agent is done), and a fake `tabulate` the agent plants in its own site-packages, user site
    and workdir, with the table.md the fake accepts, is not what the checks import: the no-op agent's reward."""
    from t1env.sandbox.docker_images import image_for, verifier_image

    task = get_task(str(COMPAT / "harbor" / "hb-test-tools"))
    image = image_for(task)
    assert verifier_image(task, image) != image
    env = TerminalEnv(task=str(task.path), backend="docker", prestart=False)
    try:
        nop = run_episode(env, NopAgent(), seed=0)
        env.reset(seed=0)
        obs, *_ = env.step("python3 -c 'import tabulate' 2>&1 | tail -1")
        assert "No module named 'tabulate'" in str(obs)
        fake = "def tabulate(*args, **kwargs):\n    return 'forged'\n"
        env.step(
            f"for d in $(python3 -c 'import site, sysconfig; print(sysconfig.get_paths()[\"purelib\"], site.getusersitepackages())') /app;"
            f" do mkdir -p $d && printf '{fake}' > $d/tabulate.py; done; echo forged > /app/table.md"
        )
        _, reward, _, _, info = env.step({"submit": True})
    finally:
        env.close()
    assert (reward, info["passed"], info["total"]) == (nop.reward, nop.info["passed"], nop.info["total"]) == (0.0, 0, 3)
    assert info["verifier_error"] is None


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
    from t1env.tools.export import export

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
    from t1env.registry import builtin_tasks_dir
    from t1env.tools.export import export

    ids = sorted(
        p.name
        for p in builtin_tasks_dir().iterdir()
        if (p / "task.toml").is_file() and not (p / "environment" / "Dockerfile").is_file()
    )
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
    script = (
        "import sys; from pathlib import Path; from harbor.mappers.terminal_bench import TerminalBenchMapper; "
        "r = TerminalBenchMapper().map(Path(sys.argv[1]), Path(sys.argv[2])); print(len(r.mapped), r.failed)"
    )
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
