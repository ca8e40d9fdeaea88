"""One adversarial test per property the local (bubblewrap) sandbox claims in its docstring."""

import os
import resource
import subprocess
import time
from pathlib import Path

import pytest

from t1env.sandbox.base import SandboxConfig, SandboxError
from t1env.sandbox.local import LocalSandbox
from t1env.shell import ShellSession


def sh(box, script, timeout=30):
    return box.exec(["bash", "-c", script], timeout=timeout)


def test_no_network(box):
    r = sh(box, "ls /sys/class/net 2>/dev/null; cat /proc/net/dev | tail -n +3 | cut -d: -f1")
    assert r.stdout.split() == [b"lo"]
    r = sh(box, "exec 3<>/dev/tcp/10.0.0.1/80", timeout=10)
    assert r.exit_code != 0


def test_network_when_the_task_asks():
    with LocalSandbox(SandboxConfig(network=True)) as b:
        r = sh(b, "cat /proc/net/dev | tail -n +3 | cut -d: -f1")
    host = subprocess.run(["sh", "-c", "cat /proc/net/dev | tail -n +3 | cut -d: -f1"], capture_output=True).stdout
    assert sorted(r.stdout.split()) == sorted(host.split())


def test_no_write_outside_app_tmp_home(box):
    for target in ("/usr/evil", "/etc/evil", "/evil", "/var/evil", "/bin/evil", "/proc/evil"):
        r = sh(box, f"echo x > {target}")
        assert r.exit_code != 0, target
    assert not Path("/usr/evil").exists() and not Path("/etc/evil").exists()
    r = sh(box, "echo a > /app/a && echo b > /tmp/b && echo c > /root/c && cat /app/a /tmp/b /root/c")
    assert r.stdout == b"a\nb\nc\n"


def test_cannot_remount_or_mount(box):
    r = sh(box, "mount -o remount,rw /usr 2>&1; echo rc=$?; mount -t tmpfs none /mnt 2>&1; echo rc=$?")
    assert b"rc=0" not in r.stdout
    status = sh(box, "grep CapEff /proc/self/status").stdout.split()[1]
    assert int(status, 16) & (1 << 21) == 0  # CAP_SYS_ADMIN


def test_host_files_outside_userland_are_invisible(box):
    here = Path(__file__).resolve()
    r = sh(box, f"cat {here} 2>/dev/null | head -1; for p in {here} {here.parent} /work /home; do test -e $p && echo seen $p; done")
    assert b"seen" not in r.stdout
    assert b"One adversarial test" not in r.stdout


def test_host_processes_are_invisible(box):
    r = sh(box, "ls /proc | grep -E '^[0-9]+$' | wc -l")
    assert int(r.stdout) < 10  # only the sandbox's own few processes
    r = sh(box, f"kill -0 {os.getpid()} 2>&1; echo rc=$?")
    assert b"rc=0" not in r.stdout


def test_fork_bomb_is_contained():
    cfg = SandboxConfig(pids=64)
    with LocalSandbox(cfg) as b:
        if not b.limits.get("pids"):
            pytest.skip("no writable pids cgroup on this host")
        r = sh(b, "bomb() { bomb | bomb & }; bomb; sleep 2; ls /proc | grep -cE '^[0-9]+$'", timeout=20)
        assert int(r.stdout.split()[-1] if r.stdout.split() else 0) <= 64
        # the host is fine and the sandbox still obeys stop()
    out = subprocess.run(["sh", "-c", "echo ok"], capture_output=True).stdout
    assert out == b"ok\n"


def test_file_size_limit():
    with LocalSandbox(SandboxConfig(file_size_mb=1)) as b:
        r = sh(b, "head -c 3000000 /dev/zero > /app/big; echo rc=$?; stat -c %s /app/big")
        assert b"rc=0" not in r.stdout
        assert int(r.stdout.split()[-1]) <= 1024 * 1024


def test_memory_limit():
    with LocalSandbox(SandboxConfig(memory_mb=128)) as b:
        if not b.limits.get("memory"):
            pytest.skip("no writable memory cgroup on this host")
        r = sh(b, "python3 -c 'x = bytearray(400 * 1024 * 1024); print(len(x))'; echo rc=$?", timeout=60)
        assert b"419430400" not in r.stdout
        assert b"rc=0" not in r.stdout


def test_cpu_time_limit():
    with LocalSandbox(SandboxConfig(cpu_seconds=1)) as b:
        t0 = time.monotonic()
        r = sh(b, "python3 -c 'while True: pass'; echo rc=$?", timeout=30)
        assert time.monotonic() - t0 < 20
        assert b"rc=137" in r.stdout or b"rc=152" in r.stdout  # SIGKILL or SIGXCPU


def test_background_process_does_not_survive_stop():
    b = LocalSandbox()
    b.start()
    s = ShellSession(b)
    s.start()
    s.run("nohup sleep 4242 >/dev/null 2>&1 & setsid sleep 4243 >/dev/null 2>&1 < /dev/null &")
    root = b._root
    s.close()
    b.stop()
    b.stop()  # idempotent
    time.sleep(0.2)
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert "sleep 4242" not in ps and "sleep 4243" not in ps
    assert root is not None and not root.exists()


def test_stop_removes_files_even_if_agent_locked_them():
    b = LocalSandbox()
    b.start()
    sh(b, "mkdir -p /app/locked/deep && touch /app/locked/deep/f && chmod 000 /app/locked/deep /app/locked && chattr +i /app/locked 2>/dev/null; true")
    root = b._root
    b.stop()
    assert not root.exists()


def test_put_file_refuses_symlink_escape(box):
    sh(box, "ln -s /etc /app/etc-link")
    with pytest.raises(PermissionError):
        box.put_file("/app/etc-link/passwd", b"pwned")
    with pytest.raises(PermissionError):
        box.put_file("/usr/bin/x", b"x")


def test_missing_bwrap_gives_one_line_install_hint(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(SandboxError) as e:
        LocalSandbox().start()
    assert "apt-get install bubblewrap" in str(e.value) and "\n" not in str(e.value)


def test_exec_timeout_kills_the_command(box):
    t0 = time.monotonic()
    r = box.exec(["sleep", "100"], timeout=0.5)
    assert r.timed_out and time.monotonic() - t0 < 5


def test_start_is_fast_enough_to_matter(box):
    # not a timing assertion: checks the sandbox reports the limits it enforces
    assert set(box.limits) == {"pids", "memory", "file_size", "cpu_time"}
    assert resource.getrlimit(resource.RLIMIT_FSIZE)[0] == resource.RLIM_INFINITY  # the host is untouched
