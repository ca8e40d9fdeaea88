"""Local sandbox on bubblewrap: the embedded default backend (no Docker needed).

One sandbox is one ``bwrap`` process holding a set of fresh namespaces (user, mount, pid, ipc, uts,
cgroup, net). Every process of the episode — the agent's shell, setup scripts, file transfers, the
verifier — is started inside those namespaces with ``nsenter``, under the same seccomp filter and
capability set as the sandbox's first process. The episode's state lives in one host directory
that ``stop()`` deletes.

What is covered
---------------
* **Root in the sandbox is not root on the host.** When t1 runs as root, the sandbox gets a user
  namespace of its own that maps its ids 0-65535 to the unprivileged host ids
  ``HOST_ID_BASE``-``HOST_ID_BASE + 65535``: the agent is root inside (chown to any id, files
  owned by root, services), but to the host kernel it is an unprivileged user with capabilities
  only over its own namespaces. Host files it can see are readable only where they are
  world-readable. (When t1 runs as a normal user, the sandbox's root is that user, in a user
  namespace bubblewrap makes.)
* **Host secrets are not readable.** Besides the above, every entry under ``/etc`` that is not
  world-readable (``/etc/shadow``, ``/etc/gshadow``, their backups, SSH host keys,
  ``/etc/ssl/private``, ...) is masked: files by ``/dev/null``, directories by an empty read-only
  tmpfs.
* **Host files are read-only.** The host userland (``/usr``, ``/etc`` and the ``/bin``-style links)
  is bind-mounted read-only; the sandbox root is a read-only tmpfs. Writable are only ``/app`` (the
  workdir), ``/tmp`` and ``/root`` (``$HOME``), each backed by the episode's own directory, fresh per
  episode and deleted at ``stop()``. ``/.t1-verifier`` is a read-only, empty directory reserved for
  the verifier. Nothing else of the host (home directories, the project checkout, the task's tests)
  is visible, unless the caller binds it read-only with ``ro_binds``.
* **No privilege to undo the above.** Processes keep only Docker's default capability set (chown,
  dac_override, fowner, fsetid, kill, setgid, setuid, setpcap, net_bind_service, net_raw,
  sys_chroot, mknod, audit_write, setfcap), and those only inside the user namespace;
  ``no_new_privs`` is set. A seccomp filter (:mod:`t1env.sandbox.seccomp`: Docker's default
  profile for the syscalls that matter) refuses new namespaces, mounts, kernel keyrings, ``bpf``,
  ``perf_event_open``, ``userfaultfd``, ``io_uring``, module loading, clock setting and the like,
  for the sandbox's first process and for every process t1 starts inside later.
* **Network only on request, and never the host's.** The sandbox always has a network namespace of
  its own. Without ``environment.network`` it holds only loopback. With ``network = true``, a
  ``slirp4netns`` process on the host gives it outbound TCP/UDP through a user-mode NAT
  (``--disable-host-loopback``: the gateway address does not lead to the host's ``127.0.0.1``; no
  port is forwarded in), and before it comes up t1 installs the egress filter of
  :mod:`t1env.sandbox.egress` in the sandbox's network namespace: no address of the host (public
  ones included), no private, CGNAT, loopback or link-local range (the metadata address, other
  sandboxes), only DNS to slirp4netns's forwarder and the task's ``network_allow``. A network-on
  sandbox also lacks ``CAP_NET_RAW`` (no packet socket to send around the filter); it never had
  ``CAP_NET_ADMIN`` to remove it. ``stop()`` ends slirp4netns.
* **Processes are isolated and contained.** New pid, ipc and uts namespaces; the sandbox cannot see
  or signal host processes. A pids cgroup caps the number of processes (a fork bomb hits the cap),
  a memory cgroup caps memory, on cgroup v1 and v2 (:mod:`t1env.sandbox.cgroups`), and rlimits cap
  file size (``RLIMIT_FSIZE``) and CPU time per process (``RLIMIT_CPU``).
* **File transfers cannot be redirected to the host.** ``put_file``, ``put_tree`` and ``get_file``
  run ``tar``/``cat`` inside the sandbox's namespaces as its root, so every path, symlinks the
  agent planted included, resolves inside the sandbox.
* **The host is not stalled by what the sandbox prints or leaves running.** :meth:`LocalSandbox.exec`
  keeps at most :attr:`LocalSandbox.EXEC_OUTPUT_CAP` bytes of each stream (head and tail) and returns
  shortly after its command ends or is killed, even when a daemon it started holds the pipes.
* **Nothing is left running.** The sandbox's pid 1 is a bubblewrap process started with
  ``--die-with-parent``; when it dies the kernel kills every process in the namespace. ``stop()``
  also kills what remains in the cgroup, ends the network helper and removes the episode directory.

:attr:`LocalSandbox.limits` says which of these are in force for a sandbox (``pids``, ``memory``,
``file_size``, ``cpu_time``, ``seccomp``, ``user_namespace``, ``network_isolated``); whatever could
not be enforced is also reported once with :func:`warnings.warn`.

What is not covered
-------------------
* Kernel exploits: this is namespaces, seccomp and cgroups on the host kernel, not a VM. Use the
  Docker backend with a hardened runtime (gVisor, Kata) for untrusted code at scale.
* Disk usage of ``/app`` and ``/tmp`` is not quota'd (only the size of each file is capped).
* Reading world-readable host files under ``/usr`` and ``/etc`` is allowed (that is the userland).
* Where the kernel refuses a user namespace (e.g. ``user.max_user_namespaces = 0``, or bubblewrap
  cannot mount ``/proc`` inside one), a root t1 runs the sandbox without it: sandbox root is then
  host root with the reduced capability set, seccomp filter and ``/etc`` masking above
  (``limits["user_namespace"]`` is False).
* When the host offers no usable cgroup (no delegation on cgroup v2, another process sharing t1's
  cgroup), the process and memory caps are not enforced; ``limits`` says so.
* On CPUs other than x86_64 and aarch64 there is no seccomp filter (``limits["seccomp"]`` is False).
* With ``network = true`` the sandbox reaches the public internet, and its DNS queries (to
  slirp4netns's ``10.0.2.3``) go to the host's resolver, even one that listens on host loopback.
  The host's address list is taken when the sandbox starts: an address the host gains later is not
  filtered for that sandbox.
* All sandboxes of a host run as the same host ids (``HOST_ID_BASE`` and up): what keeps two
  sandboxes apart is that each has its own namespaces, not its own uid.
* File transfers start a process inside the sandbox: while the sandbox is at its pids cap (a fork
  bomb running), they fail.
* CPU *quota* (``environment.cpus``) is only applied by the Docker backend.
"""

from __future__ import annotations

import errno
import functools
import io
import os
import re
import resource
import shutil
import stat
import subprocess
import tarfile
import tempfile
import time
import uuid
import warnings
from pathlib import Path
from typing import Callable, Mapping

from t1env.sandbox import egress, launcher, local_verifier, seccomp
from t1env.sandbox.base import ExecResult, Sandbox, SandboxConfig, SandboxError, VerifierRun
from t1env.sandbox.bounded import Finished, OutputCapture, pump, readable_within
from t1env.sandbox.cgroups import SandboxCgroups, remove_cgroups
from t1env.sandbox.userns import popen_as_root_of_new_userns

# Docker's default capability set: enough to be "root" for chown/chmod/useradd-style work,
# without CAP_SYS_ADMIN (mount, setns) or CAP_SYS_PTRACE.
DEFAULT_CAPS = (
    "chown dac_override fowner fsetid kill setgid setuid setpcap net_bind_service net_raw "
    "sys_chroot mknod audit_write setfcap"
).split()

_INSTALL_HINT = (
    "bubblewrap (bwrap) is not installed: install it with `sudo apt-get install bubblewrap` "
    "(Debian/Ubuntu) or `sudo dnf install bubblewrap` (Fedora), or use backend='docker'"
)
_SLIRP_HINT = (
    "this task needs network, which the local sandbox provides with slirp4netns: install it with "
    "`sudo apt-get install slirp4netns` (Debian/Ubuntu) or `sudo dnf install slirp4netns` (Fedora), "
    "or use backend='docker'"
)

EPISODE_PREFIX = "t1-sbx-"
SLIRP_DNS = egress.SLIRP_DNS  # slirp4netns's built-in DNS forwarder


class SandboxWarning(UserWarning):
    """A protection of the local sandbox is not in force on this host (see ``LocalSandbox.limits``)."""


_warned: set[str] = set()


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        warnings.warn(message, SandboxWarning, stacklevel=3)


def bwrap_path() -> str:
    path = shutil.which("bwrap")
    if path is None:
        raise SandboxError(_INSTALL_HINT)
    return path


@functools.lru_cache(maxsize=None)
def etc_secrets() -> tuple[tuple[str, bool], ...]:
    """(path, is_dir) of every entry under /etc that is not world-readable (computed once per process)."""
    out: list[tuple[str, bool]] = []
    stack = ["/etc"]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for e in entries:
            try:
                mode = e.stat(follow_symlinks=False).st_mode
            except OSError:
                continue
            if stat.S_ISDIR(mode):
                if mode & 0o005 != 0o005:  # not listable and searchable by others: mask all of it
                    out.append((e.path, True))
                else:
                    stack.append(e.path)
            elif stat.S_ISREG(mode) and not mode & 0o004:
                out.append((e.path, False))
    return tuple(sorted(out))


@functools.lru_cache(maxsize=None)
def _seccomp_installer() -> Callable[[], None]:
    return seccomp.installer(_seccomp_program())


@functools.lru_cache(maxsize=None)
def _seccomp_program() -> bytes | None:
    prog = seccomp.program()
    if prog is None:
        import platform

        _warn_once(f"no seccomp filter for this CPU ({platform.machine()}): the local sandbox runs without one")
    return prog


# ---------------------------------------------------------------------------------------------
# the sandbox
# ---------------------------------------------------------------------------------------------


class LocalSandbox(Sandbox):
    """A bubblewrap sandbox. See the module docstring for what it protects against."""

    name = "local"
    HOST_ID_BASE = 0x60000000
    """First host uid/gid behind the sandbox's ids (root inside is this id on the host)."""
    EXEC_OUTPUT_CAP = 8 * 1024 * 1024
    """Bytes of each of stdout and stderr that :meth:`exec` keeps (half from the start, half from the end)."""
    EXIT_GRACE = 0.5
    """Seconds :meth:`exec` still reads output after its command ended (a daemon may hold the pipes)."""
    FILE_TIMEOUT = 120.0
    """Seconds a single file transfer may take."""

    _userns_usable: bool | None = None  # per process: None until the first root sandbox tried one

    def __init__(self, config: SandboxConfig | None = None, ro_binds: Mapping[str, str] | None = None):
        super().__init__(config or SandboxConfig())
        self._ro_binds = dict(ro_binds or {})
        self._init: subprocess.Popen | None = None
        self._net: subprocess.Popen | None = None
        self._net_exit_w: int | None = None
        self._root: Path | None = None
        self._cg: SandboxCgroups | None = None
        self._userns = False
        self._own_cgroupns = False
        self._launch_fds: list[int] = []
        self._prepared = None  # a local_verifier.Prepared while a verifier waits for this episode's end
        self._zygote = False  # prepared through a verifier zygote (local_zygote): verify through one
        self._zygote_staged: tuple | None = None  # (tests, private state) staged for the zygote's verifier
        self.verifier_zygotes = None
        """The :class:`~t1env.sandbox.local_zygote.ZygotePool` this sandbox's verifier may come from (its env's)."""
        self.init_pid: int | None = None
        self.limits: dict[str, bool] = {}

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        if self._init is not None:
            raise SandboxError("sandbox already started; call stop() first")
        bwrap_path()
        self._root = Path(tempfile.mkdtemp(prefix=EPISODE_PREFIX))
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> None:
        root = self._root
        assert root is not None
        c = self.config
        (root / "owner").write_text(str(os.getpid()))  # lets `t1env gc` find orphans
        (root / "verifier").mkdir(mode=0o755)  # owned by host root: read-only inside
        self._cg = SandboxCgroups(f"t1-{uuid.uuid4().hex[:12]}", c.pids, c.memory_mb * 1024 * 1024)
        (root / "cgroups").write_text("".join(f"{d}\n" for d in self._cg.dirs))  # for `t1env gc` too
        for ctrl, why in self._cg.missing.items():
            _warn_once(f"the local sandbox cannot cap {ctrl}: {why}")
        if os.geteuid() != 0:
            self._userns = True  # bubblewrap maps the calling user into a user namespace of its own
            self._make_dirs(os.geteuid())
            self._launch()
        else:
            self._userns = LocalSandbox._userns_usable is not False
            if self._userns:
                self._check_reachable()
            self._make_dirs(self.HOST_ID_BASE if self._userns else 0)
            try:
                self._launch()
            except SandboxError as e:
                if not self._userns or LocalSandbox._userns_usable or not _refused(e):
                    raise
                # The first try in this process, refused by the kernel (user.max_user_namespaces = 0, or
                # /proc masked in a container). If the sandbox starts without a user namespace, run
                # without one from now on, and say so.
                self._userns = False
                self._make_dirs(0)
                try:
                    self._launch()
                except SandboxError:
                    raise e from None
                LocalSandbox._userns_usable = False
                _warn_once(f"the local sandbox runs without a user namespace (sandbox root is host root): {e}")
            if self._userns:
                LocalSandbox._userns_usable = True
        if c.network:
            egress.install_local(self.init_pid, os.geteuid() != 0, c.network_allow)
            self._start_network()
        self.limits = {
            **self._cg.enforced,
            "file_size": True,
            "cpu_time": True,
            "seccomp": _seccomp_program() is not None,
            "user_namespace": self._userns,
            "network_isolated": True,
        }

    def _check_reachable(self) -> None:
        """bwrap runs as the sandbox's unprivileged root: it must be able to walk to what it binds."""
        assert self._root is not None
        for host in [*self._ro_binds, self._root]:
            for d in Path(host).absolute().parents:
                if not os.stat(d).st_mode & stat.S_IXOTH:
                    raise SandboxError(
                        f"cannot bind {host} into the sandbox: its root (host uid {self.HOST_ID_BASE}) may not "
                        f"enter {d}; make every directory above it searchable (chmod o+x {d}), or set TMPDIR "
                        "to such a directory if it is the episode directory"
                    )

    def _make_dirs(self, owner: int) -> None:
        """The episode's writable directories, owned by the sandbox's root (host id ``owner``)."""
        root = self._root
        assert root is not None
        if os.geteuid() == 0:  # bwrap, as the sandbox's root, must walk into it; no one else may
            os.chown(root, 0, owner)
            os.chmod(root, 0o710)
        for sub, mode in (("app", 0o755), ("tmp", 0o1777), ("home", 0o700)):
            d = root / sub
            d.mkdir(exist_ok=True)
            os.chmod(d, mode)
            if os.geteuid() == 0:
                os.chown(d, owner, owner)
        if self.config.network:
            (root / "resolv.conf").write_text(f"nameserver {SLIRP_DNS}\n")

    def _bwrap_argv(self) -> list[str]:
        """bwrap's options that build this sandbox (everything before ``--chdir``/``--`` and the command).

        A file descriptor this opens (the seccomp program) is appended to ``self._launch_fds``: pass
        those to bwrap and close them once it has started.
        """
        root = self._root
        if root is None:
            raise SandboxError("sandbox is not started")
        c = self.config
        argv = [bwrap_path(), "--die-with-parent", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net"]
        argv += ["--unshare-cgroup-try", "--hostname", "t1"]
        for top in ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32"):
            host = Path("/") / top
            if host.is_symlink():
                argv += ["--symlink", os.readlink(host), f"/{top}"]
            elif host.is_dir():
                argv += ["--ro-bind", str(host), f"/{top}"]
        argv += ["--ro-bind", "/etc", "/etc"]
        for path, is_dir in etc_secrets():
            argv += ["--tmpfs", path, "--remount-ro", path] if is_dir else ["--ro-bind", "/dev/null", path]
        if c.network and not Path("/etc/resolv.conf").is_symlink():
            argv += ["--ro-bind", str(root / "resolv.conf"), "/etc/resolv.conf"]
        argv += ["--proc", "/proc", "--dev", "/dev"]
        argv += ["--bind", str(root / "tmp"), "/tmp", "--bind", str(root / "home"), "/root"]
        argv += ["--bind", str(root / "app"), c.workdir]
        argv += ["--dir", "/var", "--symlink", "../tmp", "/var/tmp", "--dir", "/run"]
        argv += ["--ro-bind", str(root / "verifier"), "/.t1-verifier"]
        for host, inside in self._ro_binds.items():
            argv += ["--ro-bind", host, inside]
        if os.geteuid() != 0:  # one user namespace, the caller as its root (the default would nest a second one)
            argv += ["--unshare-user", "--uid", "0", "--gid", "0"]
        argv += ["--cap-drop", "ALL"] + [a for cap in self._caps() for a in ("--cap-add", f"CAP_{cap.upper()}")]
        prog = _seccomp_program()
        if prog is not None:
            r, w = os.pipe()
            os.write(w, prog)  # a few hundred bytes: fits the pipe buffer
            os.close(w)
            self._launch_fds.append(r)
            argv += ["--seccomp", str(r)]
        argv += ["--remount-ro", "/"]
        return argv

    def _caps(self) -> list[str]:
        """The sandbox's capabilities: :data:`DEFAULT_CAPS`, less ``net_raw`` when it has a network (a packet
        socket would send frames past the egress filter)."""
        return [cap for cap in DEFAULT_CAPS if not (self.config.network and cap == "net_raw")]

    def _launch(self) -> None:
        """Start bwrap and wait until the sandbox's first process runs."""
        c = self.config
        info_r, info_w = os.pipe()
        self._launch_fds = []
        try:
            argv = self._bwrap_argv()
            argv += ["--chdir", c.workdir, "--info-fd", str(info_w)]
            argv += ["--", "/bin/sh", "-c", "echo ready; exec sleep infinity"]
            popen = dict(
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=(info_w, *self._launch_fds),
                env=c.environ(),
            )
            init = self._start_bwrap(argv, popen)
        except BaseException:
            os.close(info_r)
            raise
        finally:
            for f in (info_w, *self._launch_fds):
                os.close(f)
            self._launch_fds = []
        assert init.stdout is not None and init.stderr is not None
        ready = init.stdout.readline() if readable_within(init.stdout, 20) else b""
        info = _read_available(info_r)
        m = re.search(rb'"child-pid"\s*:\s*(\d+)', info)
        if ready.strip() != b"ready" or m is None:
            _kill_and_reap(init, keep=("stderr",))
            err = init.stderr.read().decode(errors="replace").strip()
            init.stderr.close()
            why = err.splitlines()[-1] if err else ("no output" if m else f"no child pid on --info-fd: {info!r}")
            raise SandboxError(f"bubblewrap failed to start: {why}")
        self._init = init
        self.init_pid = int(m.group(1))
        try:  # --unshare-cgroup-try: enter the sandbox's cgroup namespace where bwrap made one
            inside, here = os.stat(f"/proc/{self.init_pid}/ns/cgroup"), os.stat("/proc/self/ns/cgroup")
            self._own_cgroupns = inside.st_ino != here.st_ino
        except OSError:
            self._own_cgroupns = False

    def _start_network(self) -> None:
        """Outbound network for the sandbox's own network namespace, through slirp4netns.

        slirp4netns rather than pasta: one flag (``--disable-host-loopback``) closes the route from the
        gateway address to the host's loopback, it forwards no port unless asked through an API socket
        (not opened here), it runs in a mount namespace of its own without capabilities and under its
        own seccomp filter (``--enable-sandbox --enable-seccomp``), and its options have been stable
        across the releases distributions ship. ``--exit-fd`` ends it if t1 dies without ``stop()``.
        """
        slirp = shutil.which("slirp4netns")
        if slirp is None:
            raise SandboxError(_SLIRP_HINT)
        ready_r, ready_w = os.pipe()
        exit_r, self._net_exit_w = os.pipe()
        argv = [slirp, "--configure", "--mtu=65520", "--disable-host-loopback", "--enable-sandbox", "--enable-seccomp"]
        argv += [f"--ready-fd={ready_w}", f"--exit-fd={exit_r}"]
        if os.geteuid() != 0:
            argv.append(f"--userns-path=/proc/{self.init_pid}/ns/user")
        argv += [str(self.init_pid), "tap0"]
        log = self._root / "slirp4netns.log"  # a file, not a pipe: a full pipe would stall the network
        try:
            with open(log, "wb") as logf:
                self._net = subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=logf,
                    stderr=subprocess.STDOUT,
                    pass_fds=(ready_w, exit_r),
                    start_new_session=True,
                )
        finally:
            os.close(ready_w)
            os.close(exit_r)
        try:
            ok = readable_within(ready_r, 20) and os.read(ready_r, 1) == b"1"
        finally:
            os.close(ready_r)
        if not ok:
            lines = [x for x in log.read_text(errors="replace").splitlines() if x.strip() and "WARNING" not in x]
            raise SandboxError(f"slirp4netns did not bring up the network: {lines[-1] if lines else 'no output'}")

    def _start_bwrap(self, argv: list[str], popen: dict, cgroups: SandboxCgroups | None = None) -> subprocess.Popen:
        """Start ``argv`` (a bwrap command line of this sandbox's shape: the agent's sandbox, a verifier, a zygote)
        with ``popen``'s Popen arguments, in ``cgroups`` (default: the sandbox's) with its rlimits, as the root of a
        new user namespace where the sandbox has one. Always from the launcher thread (``launcher.py``):
        ``--die-with-parent`` follows the thread that starts bwrap, and these processes outlive their caller's."""
        if self._userns and os.geteuid() == 0:
            return launcher.run(
                popen_as_root_of_new_userns, argv, self._join_and_limit(cgroups), self.HOST_ID_BASE, popen
            )
        return launcher.run(subprocess.Popen, argv, preexec_fn=self._join_and_limit(cgroups), **popen)

    def _join_and_limit(self, cgroups: SandboxCgroups | None = None) -> Callable[[], None]:
        """Runs between fork and exec: join the cgroups (``cgroups``, else the sandbox's), set rlimits
        (async-signal-safe work only)."""
        cg = cgroups if cgroups is not None else self._cg
        fsize = self.config.file_size_mb * 1024 * 1024
        cpu = self.config.cpu_seconds
        nproc = self.config.pids

        def setup() -> None:
            if cg is not None:
                cg.join_self()
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
            resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
            if os.geteuid() != 0:  # only enforced for non-root (see setrlimit(2))
                resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))

        return setup

    def preexec(self) -> Callable[[], None]:
        """Between fork and exec of a process that enters the sandbox: cgroups, rlimits,
        ``no_new_privs`` and the seccomp filter (``nsenter`` still works under it)."""
        join = self._join_and_limit()
        install = _seccomp_installer()

        def setup() -> None:
            join()
            install()

        return setup

    def preexec_without_cgroups(self) -> Callable[[], None]:
        """:meth:`preexec` minus joining the sandbox's cgroups (for the shared-mode verifier on cgroup v2,
        where the sandbox's cgroup is what gets frozen)."""
        fsize = self.config.file_size_mb * 1024 * 1024
        cpu = self.config.cpu_seconds
        install = _seccomp_installer()

        def setup() -> None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
            resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
            install()

        return setup

    def run_verifier(
        self, runtime: Path, tests: Path, timeout: float, mode: str = "separate", options=None
    ) -> VerifierRun:
        """Out of the agent's reach: see :mod:`t1env.sandbox.local_verifier`."""
        return local_verifier.run_verifier(self, runtime, tests, timeout, mode, options)

    def end_processes(self) -> None:
        """Kill the network helper and the sandbox's pid 1 (the kernel then kills everything in its pid
        namespace); the episode folders and cgroups stay (``stop()`` removes them)."""
        net, self._net = self._net, None
        if self._net_exit_w is not None:
            os.close(self._net_exit_w)  # slirp4netns exits when this closes
            self._net_exit_w = None
        if net is not None:
            _kill_and_reap(net)
        init, self._init = self._init, None
        if init is not None:
            _kill_and_reap(init)  # pid 1 of the namespace: the kernel kills everything inside
        self.init_pid = None

    def prepare_verifier(self, runtime: Path, tests: Path | None, mode: str = "separate", options=None) -> bool:
        """Start the checks' sandbox while the agent plays: see :mod:`t1env.sandbox.local_verifier`."""
        return local_verifier.prepare(self, runtime, tests, mode, options)

    def stop(self) -> None:
        local_verifier.discard(self)
        self.end_processes()
        self.drop_private_state()
        cg, self._cg = self._cg, None
        if cg is not None:
            cg.destroy()
        root, self._root = self._root, None
        if root is not None:
            _rmtree(root)
        self.init_pid = None

    @property
    def egress_rules(self) -> str | None:
        """With network on: the iptables rules in force in the sandbox's network namespace, read now."""
        if not self.config.network or not self.alive or self.init_pid is None:
            return None
        return egress.rules_in_force_local(self.init_pid, os.geteuid() != 0)

    @property
    def alive(self) -> bool:
        return self._init is not None and self._init.poll() is None

    def _private_state_parent(self) -> str | None:
        return str(self._root) if self._root is not None else None  # removed with the episode folder (and by gc)

    def oom_kills(self) -> int | None:
        return self._cg.oom_kills() if self._cg is not None and self._cg.enforced["memory"] else None

    @property
    def host_workdir(self) -> Path:
        """The host directory behind the workdir (for tests and debugging)."""
        if self._root is None:
            raise SandboxError("sandbox is not started")
        return self._root / "app"

    # -- processes ---------------------------------------------------------------------------
    def _enter_argv(self, cwd: str | None = None) -> list[str]:
        if not self.alive or self.init_pid is None:
            raise SandboxError("sandbox is not running (it was stopped or its init process died)")
        pid = str(self.init_pid)
        argv = ["nsenter", "-t", pid, "-m", "-u", "-i", "-n", "-p", "-r", "-w"]
        if self._own_cgroupns:
            argv.append("-C")
        if self._userns:  # and become the sandbox's root (a non-root caller already is: its uid maps to 0)
            argv += ["-U"] if os.geteuid() == 0 else ["-U", "--preserve-credentials"]
        caps = ",".join(["-all"] + [f"+{c}" for c in self._caps()])
        argv += ["setpriv", f"--bounding-set={caps}", f"--inh-caps={caps}", "--no-new-privs", "--"]
        if cwd and cwd != self.config.workdir:
            argv += ["env", "-C", cwd]
        return argv

    def shell_argv(self) -> list[str]:
        return self._enter_argv() + ["/bin/bash", "--noprofile", "--norc", "-i"]

    def exec(self, argv, timeout, env=None, cwd=None) -> ExecResult:
        t0 = time.monotonic()
        r = self._run(self._enter_argv(cwd) + list(argv), timeout, env={**self.config.environ(), **(env or {})})
        out, err = r.stdout.bytes(), r.stderr.bytes()
        return ExecResult(r.returncode if not r.timed_out else -9, out, err, r.timed_out, time.monotonic() - t0)

    def _run(
        self,
        argv: list[str],
        timeout: float,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
        stdout_limit: int | None = None,
    ) -> Finished:
        """Run ``argv`` (an ``nsenter`` command line) with bounded output and a hard deadline.

        Output is kept up to :attr:`EXEC_OUTPUT_CAP` per stream, or, with ``stdout_limit``, stdout is
        kept whole and the process killed once it passes that many bytes (``over_limit``).
        """
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env) if env is not None else self.config.environ(),
            preexec_fn=self.preexec(),
            start_new_session=True,
        )
        out_cap = stdout_limit + 1 if stdout_limit is not None else self.EXEC_OUTPUT_CAP
        res = Finished(OutputCapture(out_cap, keep_tail=stdout_limit is None), OutputCapture(self.EXEC_OUTPUT_CAP))
        pump(proc, stdin, res, time.monotonic() + timeout, self.EXIT_GRACE, stdout_limit)
        return res

    # -- files -------------------------------------------------------------------------------
    # Transfers run inside the sandbox (tar, cat) as its root, so paths resolve there: a symlink the
    # agent planted can only lead to another place inside the sandbox, whenever it is swapped in.
    def put_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        name = _inside_path(path)
        info = tarfile.TarInfo(name.lstrip("/"))
        info.size, info.mode, info.mtime = len(data), mode & 0o7777, int(time.time())
        self._untar(path, [(info, data)])

    def put_tree(self, src: Path, dest: str) -> None:
        src = Path(src)
        base = _inside_path(dest).lstrip("/")
        if not base:
            raise ValueError("put_tree: give a directory below / as dest, e.g. '/app'")
        members: list[tuple[tarfile.TarInfo, bytes | None]] = []
        for p in [src, *sorted(src.rglob("*"))]:
            st = p.lstat()
            rel = p.relative_to(src).as_posix()
            info = tarfile.TarInfo(base if rel == "." else f"{base}/{rel}")
            info.mode, info.mtime = stat.S_IMODE(st.st_mode), int(st.st_mtime)
            data = None
            if stat.S_ISLNK(st.st_mode):
                info.type, info.linkname = tarfile.SYMTYPE, os.readlink(p)
            elif stat.S_ISDIR(st.st_mode):
                info.type = tarfile.DIRTYPE
            elif stat.S_ISREG(st.st_mode):
                data = p.read_bytes()
                info.size = len(data)
            else:
                continue  # sockets, fifos, devices: not copied
            members.append((info, data))
        self._untar(dest, members)

    def _untar(self, path: str, members: list[tuple[tarfile.TarInfo, bytes | None]]) -> None:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
            for info, data in members:
                info.uid = info.gid = 0
                info.uname = info.gname = "root"
                tar.addfile(info, io.BytesIO(data) if data is not None else None)
        argv = self._enter_argv() + ["tar", "-x", "-f", "-", "-C", "/", "--numeric-owner", "--overwrite"]
        r = self._run(argv, self.FILE_TIMEOUT, stdin=buf.getvalue())
        if r.timed_out:
            raise SandboxError(f"copying into {path} took longer than {self.FILE_TIMEOUT:g}s")
        if r.returncode != 0:
            raise _os_error(r.stderr.bytes(), path, "tar")

    def get_file(self, path: str) -> bytes:
        # A regular file in the sandbox is at most file_size_mb (RLIMIT_FSIZE); more means a device or a
        # fifo the agent put there (/dev/zero), which must not fill the host's memory.
        limit = self.config.file_size_mb * 1024 * 1024
        r = self._run(self._enter_argv() + ["cat", "--", _inside_path(path)], self.FILE_TIMEOUT, stdout_limit=limit)
        if r.over_limit:
            raise SandboxError(f"{path}: more than {self.config.file_size_mb} MiB (not a regular file?)")
        if r.timed_out:
            raise SandboxError(f"reading {path} took longer than {self.FILE_TIMEOUT:g}s (not a regular file?)")
        if r.returncode != 0:
            raise _os_error(r.stderr.bytes(), path, "cat")
        return r.stdout.bytes()


def gc(tmpdir: str | None = None) -> int:
    """Remove what local sandboxes of dead processes left (``t1env gc``): their cgroups, with any process still
    in them, and their episode folders (``t1-sbx-*`` in ``tmpdir``, default the temp folder). A folder whose
    ``owner`` process runs is kept, and so is one too new to have an owner yet (a sandbox starting now).
    Returns how many folders were removed."""
    removed = 0
    for d in Path(tmpdir or tempfile.gettempdir()).glob(f"{EPISODE_PREFIX}*"):
        try:
            os.kill(int((d / "owner").read_text()), 0)
            continue  # its process is alive
        except PermissionError:
            continue  # alive, and another user's
        except (OSError, ValueError):
            pass
        try:
            if not (d / "owner").exists() and time.time() - d.stat().st_mtime < 60:
                continue  # made by mkdtemp a moment ago: its owner is being written
            listed = (d / "cgroups").read_text().split()
        except FileNotFoundError:
            listed = []
        except OSError:
            continue
        root = SandboxCgroups.ROOT.resolve()
        remove_cgroups(
            [
                Path(x)
                for x in listed
                if Path(x).is_absolute() and root in Path(x).parents and Path(x).name.startswith("t1-")
            ]
        )
        _rmtree(d)
        removed += 1
    return removed


# ---------------------------------------------------------------------------------------------
# helpers: starting bwrap in a user namespace, bounded output, errors from inside
# ---------------------------------------------------------------------------------------------


def _kill_and_reap(proc: subprocess.Popen, keep: tuple[str, ...] = ()) -> None:
    try:
        proc.kill()
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
    for name in ("stdin", "stdout", "stderr"):
        stream = getattr(proc, name)
        if stream is not None and name not in keep:
            stream.close()


def _refused(e: SandboxError) -> bool:
    """Whether starting the sandbox failed on a permission (not, say, a timeout on a loaded host)."""
    return "user namespace" in str(e) or os.strerror(errno.EPERM) in str(e)


def _inside_path(path: str) -> str:
    if not path.startswith("/"):
        raise ValueError(f"{path!r}: give an absolute path inside the sandbox, e.g. '/app/{path}'")
    return os.path.normpath(path)


_PERMISSION = (errno.EACCES, errno.EPERM, errno.EROFS)
_KNOWN_ERRORS = (*_PERMISSION, errno.ENOENT, errno.EISDIR, errno.ENOTDIR, errno.EEXIST, errno.ELOOP, errno.ENOSPC)


def _os_error(stderr: bytes, path: str, tool: str) -> OSError:
    """The OSError behind a failed ``tar``/``cat`` inside (same libc, so the same strerror texts)."""
    text = stderr.decode(errors="replace")
    for err in _KNOWN_ERRORS:
        if os.strerror(err) in text:
            if err in _PERMISSION:
                return PermissionError(err, os.strerror(err), path)
            return OSError(err, os.strerror(err), path)  # FileNotFoundError, IsADirectoryError, ...
    lines = text.strip().splitlines()
    return OSError(errno.EIO, f"{tool} failed in the sandbox: {lines[0] if lines else 'no output'}", path)


def _read_available(fd: int) -> bytes:
    """Read what bwrap wrote to --info-fd (it keeps the fd open, so never wait for EOF)."""
    os.set_blocking(fd, False)
    chunks = []
    try:
        while True:
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks)


def _rmtree(root: Path) -> None:
    def onerror(func, path, _exc):  # chmod 000 dirs left by the agent (matters when not root)
        try:
            os.chmod(path, 0o700)
            parent = os.path.dirname(path)
            os.chmod(parent, 0o700)
            func(path)
        except OSError:
            pass

    shutil.rmtree(root, onerror=onerror)
