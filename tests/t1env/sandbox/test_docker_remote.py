"""The Docker backend against a remote engine: a second ``dockerd`` on a loopback TCP port.

The module starts its own engine (own data root, exec root, pid file and socket under a temporary
folder, a bridge of its own and no iptables rules, so it cannot disturb the machine's engine), loads the
images a ``hello-file`` episode needs into it (``docker save | docker -H tcp://... load``), and plays
real episodes there: one chosen by ``DOCKER_HOST``, one by ``gym.make(..., docker_host=...)`` while
``DOCKER_HOST`` points nowhere. A ``tcp://`` engine is remote to t1, so the verifier's runtime and the
task's tests travel over the engine API into read-only volumes instead of being bind-mounted; the
tests check that path ran, that the containers lived in the second engine only, and that nothing is
left in either engine afterwards. The engine is stopped and its folders removed whatever happens.

Needs root, ``dockerd``, a working first engine with the base image (``.ci/docker-setup.sh``).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

pytest.importorskip("docker", reason="the docker SDK is not installed: pip install 't1[docker]'")

import gymnasium as gym  # noqa: E402

import t1env  # noqa: E402,F401  (registers T1Terminal-v0)
from t1env.agent.reference import oracle_command  # noqa: E402
from t1env.sandbox import docker as D  # noqa: E402
from t1env.sandbox import docker_pool, docker_verifier  # noqa: E402
from t1env.sandbox.base import VERIFIER_DIR, SandboxConfig, VerifierOptions  # noqa: E402
from t1env.sandbox.docker_engine import _OWNER, REMOTE_ENV  # noqa: E402

FIRST = D.engine_url()  # the machine's engine ($DOCKER_HOST or the local socket)
_UP, _WHY = D.engine_ready(D.DEFAULT_BASE, FIRST)
pytestmark = [
    pytest.mark.docker,
    pytest.mark.slow,
    pytest.mark.skipif(not _UP, reason=_WHY),
    pytest.mark.skipif(shutil.which("dockerd") is None, reason="no dockerd binary to start a second engine"),
    pytest.mark.skipif(os.geteuid() != 0, reason="starting a second dockerd needs root"),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _free_subnet() -> str:
    """A 10.x.y.0/24 no route on this machine covers (the second engine's bridge)."""
    import ipaddress

    routes = subprocess.run(["ip", "-4", "route", "show", "table", "all"], capture_output=True, text=True).stdout
    used = []
    for line in routes.splitlines():
        word = line.split()[0] if line.split() else ""
        if word[:1].isdigit():
            try:
                used.append(ipaddress.ip_network(word if "/" in word else word + "/32", strict=False))
            except ValueError:
                pass
    for y in range(200, 255):
        net = ipaddress.ip_network(f"10.254.{y}.0/24")
        if not any(net.overlaps(u) for u in used if u.prefixlen > 0):
            return f"10.254.{y}"
    raise RuntimeError("no free 10.254.y.0/24 for the second engine's bridge")


class _SecondEngine:
    """A dockerd of its own: ``url`` (tcp on loopback), everything it writes under ``root``, its own
    bridge ``bridge``.

    Not ``--bridge=none``: a dockerd started so deletes the interface named ``docker0`` (the first
    engine's bridge) at start-up. With ``-b`` naming a bridge made here, ``--iptables=false`` and
    ``--ip-forward=false``, it changes nothing outside its folder and that bridge."""

    def __init__(self):
        self.root = Path(tempfile.mkdtemp(prefix="t1-docker2-"))
        self.url = f"tcp://127.0.0.1:{_free_port()}"
        self.bridge = f"t1d2-{os.urandom(3).hex()}"
        self.proc: subprocess.Popen | None = None

    def start(self, wait: float = 60) -> None:
        cfg = self.root / "daemon.json"
        cfg.write_text("{}")  # not /etc/docker/daemon.json: its hosts or bridge would clash
        net = _free_subnet()
        for cmd in (
            ["ip", "link", "add", "name", self.bridge, "type", "bridge"],
            ["ip", "addr", "add", f"{net}.1/24", "dev", self.bridge],
        ):
            subprocess.run(cmd, check=True, capture_output=True)
        self.log = open(self.root / "dockerd.log", "wb")  # noqa: SIM115  (closed in stop())
        self.proc = subprocess.Popen(
            [
                "dockerd",
                "--config-file",
                str(cfg),
                "-H",
                self.url,
                "-H",
                f"unix://{self.root}/docker.sock",
                "--data-root",
                str(self.root / "data"),
                "--exec-root",
                str(self.root / "exec"),
                "--pidfile",
                str(self.root / "docker.pid"),
                f"--bridge={self.bridge}",
                "--iptables=false",
                "--ip-masq=false",
                "--ip-forward=false",
                "--cgroup-parent=/t1-docker2-test",
            ],
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            if subprocess.run(["docker", "-H", self.url, "version"], capture_output=True).returncode == 0:
                return
            time.sleep(0.3)
        raise RuntimeError(f"the second dockerd did not come up; its log ends:\n{self.tail()}")

    def tail(self) -> str:
        try:
            return "\n".join((self.root / "dockerd.log").read_text(errors="replace").splitlines()[-20:])
        except OSError:
            return ""

    def load(self, *images: str) -> None:
        save = subprocess.Popen(["docker", "-H", FIRST, "save", *images], stdout=subprocess.PIPE)
        load = subprocess.run(["docker", "-H", self.url, "load", "-q"], stdin=save.stdout, capture_output=True)
        save.stdout.close()
        if save.wait() != 0 or load.returncode != 0:
            raise RuntimeError(f"docker save | load failed: {load.stderr.decode(errors='replace')[-500:]}")

    def stop(self) -> None:
        """SIGTERM (dockerd stops its containers and containerd), SIGKILL to its process group after
        30 s; then unmount what it left mounted under ``root`` and remove ``root``."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)  # the group this fixture started (dockerd, its containerd)
                self.proc.wait(10)
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, 0)
                os.killpg(self.proc.pid, signal.SIGKILL)  # a containerd that outlived dockerd
            except ProcessLookupError:
                pass
        try:
            self.log.close()
        except Exception:
            pass
        prefix = str(self.root) + "/"
        mounts = [
            line.split()[1]
            for line in Path("/proc/mounts").read_text().splitlines()
            if line.split()[1].startswith(prefix)
        ]
        for m in sorted(mounts, key=len, reverse=True):
            subprocess.run(["umount", "-l", m], capture_output=True)
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True)
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="module")
def engine2():
    default = D.default_image(host=FIRST)  # built (or found) on the first engine, the one with a network
    docker0 = Path("/sys/class/net/docker0").exists()
    eng = _SecondEngine()
    try:
        eng.start()
        eng.load(D.DEFAULT_BASE, default)  # same image ids: the second engine resolves the same tag, no build
        D.configure_pool(1)
        yield eng
    finally:
        try:
            D.close_pools()
        finally:
            eng.stop()
    assert not eng.root.exists() and not Path(f"/sys/class/net/{eng.bridge}").exists()
    assert Path("/sys/class/net/docker0").exists() == docker0  # the first engine's bridge is untouched


def _ours(url: str) -> list[dict]:
    return [
        c
        for c in D.client(url).api.containers(all=True, filters={"label": f"{D.LABEL}=1"})
        if c["Labels"].get(D.LABEL_OWNER) == _OWNER
    ]


def _t1_volumes(url: str) -> list[str]:
    return [v["Name"] for v in D.client(url).api.volumes(filters={"label": f"{D.LABEL}=1"}).get("Volumes") or []]


@pytest.fixture
def deliveries(monkeypatch):
    """What the remote path sent: one (mounts, volumes) per verification."""
    seen = []
    real = docker_verifier._deliver

    def spy(c, image, runtime, tests, alias, private, volumes):
        mounts = real(c, image, runtime, tests, alias, private, volumes)
        seen.append((mounts, list(volumes)))
        return mounts

    monkeypatch.setattr(docker_verifier, "_deliver", spy)
    return seen


def _episode(env, engine2) -> tuple[dict, str]:
    env.reset(seed=0)
    box = env.unwrapped.sandbox
    assert box.host == engine2.url and box.remote
    # the shell is `docker -H <engine2> exec ...`: the CLI goes where the SDK went, whatever DOCKER_HOST says
    assert box.shell_argv()[1:3] == ["-H", engine2.url]
    cid = box.container_id
    assert cid in {c["Id"] for c in _ours(engine2.url)}
    assert cid not in {c["Id"] for c in _ours(FIRST)}
    # the agent's container cannot see the verifier's files before verification
    r = box.exec(["sh", "-c", f"ls -a {VERIFIER_DIR} 2>&1"], timeout=10)
    assert b"No such file" in r.stdout or b"cannot access" in r.stdout
    env.step(oracle_command(env.unwrapped.task))
    *_, info = env.step({"submit": True})
    return info, cid


def _assert_nothing_left(engine2, cids) -> None:
    D.close_pools()
    docker_pool._reaper.drain()
    assert _ours(engine2.url) == []
    assert _t1_volumes(engine2.url) == []
    assert not set(cids) & {c["Id"] for c in _ours(FIRST)}
    assert not [cid for cid in docker_pool._live if cid in cids]


def test_episode_on_the_engine_named_by_DOCKER_HOST(engine2, deliveries, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", engine2.url)
    monkeypatch.delenv(REMOTE_ENV, raising=False)  # tcp:// alone makes it remote
    # no spare sandbox: one episode's container, one verifier prepared for it, one delivery
    env = gym.make("T1Terminal-v0", task="hello-file", backend="docker", prestart=False)
    try:
        info, cid = _episode(env, engine2)
    finally:
        env.close()
    assert info["passed"] == info["total"] == 5 and info["resolved"], info
    assert info["tamper"] == [] and not info.get("error")
    assert any("remote Docker engine" in n for n in info["verifier_notes"])
    assert info["verifier_prepared"]  # delivered and started while the agent played, told go at submission
    # the remote path ran: the runtime and tests came in volumes, mounted read-only, no bind mount
    ((mounts, volumes),) = deliveries
    assert [m["Type"] for m in mounts] == ["volume"] and all(m["ReadOnly"] for m in mounts)
    assert mounts[0]["Target"] == VERIFIER_DIR and mounts[0]["Source"] == volumes[0]
    _assert_nothing_left(engine2, [cid])


def test_episode_on_the_engine_named_by_docker_host(engine2, deliveries, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")  # the argument wins over it
    env = gym.make("T1Terminal-v0", task="hello-file", backend="docker", docker_host=engine2.url, prestart=False)
    try:
        info, cid = _episode(env, engine2)
    finally:
        env.close()
    assert info["passed"] == info["total"] == 5 and info["resolved"], info
    assert len(deliveries) == 1 and info["verifier_prepared"]  # delivered once, at prepare time
    _assert_nothing_left(engine2, [cid])


def test_remote_verifier_files_are_read_only_and_private(engine2, tmp_path, monkeypatch):
    """The remote path keeps the verifier's guarantees: runtime, tests and their alias read-only (and
    the root filesystem), the tests visible nowhere but in the verifier container, the volumes gone after."""
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.delenv(REMOTE_ENV, raising=False)
    runtime = tmp_path / "runtime"
    (runtime / "tests").mkdir(parents=True)
    (runtime / "tests" / "stale.txt").write_text("the runtime's own tests/ is shadowed by the task's")
    (runtime / "run_checks.py").write_text(
        "import os, sys\n"
        "print('ready', flush=True)\n"
        f"R = {VERIFIER_DIR!r}\n"
        "for p in (R + '/x', R + '/tests/x', '/tests/x', '/x'):\n"
        "    try:\n"
        "        open(p, 'w').close(); print('WROTE', p)\n"
        "    except OSError as e:\n"
        "        print('refused', p, e.errno)\n"
        "print('tests', sorted(os.listdir(R + '/tests')), sorted(os.listdir('/tests')))\n"
        "print('secret', open(R + '/tests/test_secret.py').read().strip())\n"
    )
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test_secret.py").write_text("SECRET = 42\n")
    box = D.DockerSandbox(SandboxConfig(), image=D.default_image(host=engine2.url), pool=False, docker_host=engine2.url)
    with box:
        assert box.remote
        before = set(_t1_volumes(engine2.url))
        run = box.run_verifier(
            runtime, tests, timeout=60, mode="separate", options=VerifierOptions(tests_alias="/tests")
        )
        out = run.result.stdout.decode()
        assert run.result.exit_code == 0, (out, run.result.stderr.decode())
        assert "WROTE" not in out and out.count("refused") == 4 and "refused /x 30" in out  # EROFS everywhere
        assert "tests ['test_secret.py'] ['test_secret.py']" in out and "secret SECRET = 42" in out
        docker_pool._reaper.drain()  # the verifier container and its volumes are removed in the background
        assert set(_t1_volumes(engine2.url)) == before  # the delivery volumes are gone
    _assert_nothing_left(engine2, [])


def test_engine_is_remote_rules(monkeypatch):
    monkeypatch.delenv(REMOTE_ENV, raising=False)
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    assert D.engine_url(None) == "unix:///var/run/docker.sock" and not D.engine_is_remote(None)
    assert D.engine_url("/run/other.sock") == "unix:///run/other.sock"
    assert D.engine_is_remote("tcp://127.0.0.1:2375") and D.engine_is_remote("ssh://me@host")
    monkeypatch.setenv(REMOTE_ENV, "0")
    assert not D.engine_is_remote("tcp://127.0.0.1:2375")
    monkeypatch.setenv(REMOTE_ENV, "1")
    assert D.engine_is_remote("unix:///var/run/docker.sock")
    with pytest.raises(Exception, match="engine URL"):
        D.engine_url("127.0.0.1:2375")
