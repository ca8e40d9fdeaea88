"""A seccomp filter for sandboxed processes: Docker's default profile, for the syscalls that matter.

The filter is a classic BPF program (``struct sock_filter[]``) written out by hand, so it needs no
library: :func:`program` returns its bytes (what ``bwrap --seccomp FD`` reads) and :func:`installer`
makes a function that loads it into the calling process (for a process t1 starts with ``nsenter``,
between fork and exec).

What it does, in order:

1. A syscall made with another ABI than the native one (``AUDIT_ARCH``) kills the process: syscall
   numbers differ between ABIs, so a 32-bit call could slip past every rule below.
2. On x86_64, x32-ABI syscalls (numbers with bit 30 set) fail with ``EPERM``.
3. ``clone3`` fails with ``ENOSYS``: its flags live in memory a filter cannot read, and glibc falls
   back to ``clone`` when it sees ``ENOSYS``.
4. ``clone`` and ``unshare`` with any ``CLONE_NEW*`` flag fail with ``EPERM`` (no new namespaces:
   the kernel's namespace code is a large attack surface, and a new user namespace would hand out
   a fresh set of capabilities). Plain ``fork``/threads pass.
5. The syscalls in :data:`DENIED` fail with ``EPERM``: mounting, kernel keyrings, ``bpf``,
   ``perf_event_open``, ``userfaultfd``, ``io_uring``, module and kexec loading, file handles,
   swap, reboot, accounting, quotas, setting the clock, the kernel log.
6. Everything else is allowed (``setns`` too: ``nsenter`` runs under this filter, and without
   ``CAP_SYS_ADMIN`` a sandboxed process cannot use it).

Only x86_64 and aarch64 are known; on any other machine :func:`program` returns None and the
sandbox runs without the filter (and says so in ``LocalSandbox.limits["seccomp"]``).

Example:
    >>> prog = program("x86_64")
    >>> len(prog) % 8 == 0 and len(prog) // 8 < 128
    True
    >>> program("riscv64") is None
    True
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
from typing import Callable

# classic BPF opcodes (linux/filter.h) and seccomp return values (linux/seccomp.h)
_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_JSET = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_RET = 0x06  # BPF_RET | BPF_K
RET_KILL_PROCESS = 0x80000000
RET_ERRNO = 0x00050000
RET_ALLOW = 0x7FFF0000

# offsets in struct seccomp_data: int nr; u32 arch; u64 instruction_pointer; u64 args[6]
_OFF_NR, _OFF_ARCH, _OFF_ARG0_LO = 0, 4, 16  # both known ABIs are little-endian

CLONE_NEW_FLAGS = 0x7E020000  # NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET
CLONE_NEWTIME = 0x80  # only unshare() takes it (in clone() the low byte is the exit signal)
X32_SYSCALL_BIT = 0x40000000

# The denied syscalls, by name. Each fails with EPERM, as under Docker's default profile.
DENIED = (
    # mounts and the new mount API
    "mount umount2 pivot_root move_mount open_tree fsopen fsconfig fsmount fspick mount_setattr "
    # kernel keyrings
    "keyctl add_key request_key "
    # attack surface without a use in a task
    "userfaultfd perf_event_open bpf io_uring_setup io_uring_enter io_uring_register lookup_dcookie "
    # the kernel itself
    "kexec_load kexec_file_load init_module finit_module delete_module reboot syslog vhangup "
    # host-wide state
    "open_by_handle_at name_to_handle_at swapon swapoff acct quotactl quotactl_fd "
    "settimeofday clock_settime clock_adjtime adjtimex"
).split()

ARCHES: dict[str, dict] = {
    "x86_64": {
        "audit_arch": 0xC000003E,
        "x32": True,
        "nr": {
            "clone": 56,
            "clone3": 435,
            "unshare": 272,
            "mount": 165,
            "umount2": 166,
            "pivot_root": 155,
            "move_mount": 429,
            "open_tree": 428,
            "fsopen": 430,
            "fsconfig": 431,
            "fsmount": 432,
            "fspick": 433,
            "mount_setattr": 442,
            "keyctl": 250,
            "add_key": 248,
            "request_key": 249,
            "userfaultfd": 323,
            "perf_event_open": 298,
            "bpf": 321,
            "io_uring_setup": 425,
            "io_uring_enter": 426,
            "io_uring_register": 427,
            "lookup_dcookie": 212,
            "kexec_load": 246,
            "kexec_file_load": 320,
            "init_module": 175,
            "finit_module": 313,
            "delete_module": 176,
            "reboot": 169,
            "syslog": 103,
            "vhangup": 153,
            "open_by_handle_at": 304,
            "name_to_handle_at": 303,
            "swapon": 167,
            "swapoff": 168,
            "acct": 163,
            "quotactl": 179,
            "quotactl_fd": 443,
            "settimeofday": 164,
            "clock_settime": 227,
            "clock_adjtime": 305,
            "adjtimex": 159,
            "iopl": 172,
            "ioperm": 173,  # x86 only: port I/O
        },
    },
    "aarch64": {
        "audit_arch": 0xC00000B7,
        "x32": False,
        "nr": {
            "clone": 220,
            "clone3": 435,
            "unshare": 97,
            "mount": 40,
            "umount2": 39,
            "pivot_root": 41,
            "move_mount": 429,
            "open_tree": 428,
            "fsopen": 430,
            "fsconfig": 431,
            "fsmount": 432,
            "fspick": 433,
            "mount_setattr": 442,
            "keyctl": 219,
            "add_key": 217,
            "request_key": 218,
            "userfaultfd": 282,
            "perf_event_open": 241,
            "bpf": 280,
            "io_uring_setup": 425,
            "io_uring_enter": 426,
            "io_uring_register": 427,
            "lookup_dcookie": 18,
            "kexec_load": 104,
            "kexec_file_load": 294,
            "init_module": 105,
            "finit_module": 273,
            "delete_module": 106,
            "reboot": 142,
            "syslog": 116,
            "vhangup": 58,
            "open_by_handle_at": 265,
            "name_to_handle_at": 264,
            "swapon": 224,
            "swapoff": 225,
            "acct": 89,
            "quotactl": 60,
            "quotactl_fd": 443,
            "settimeofday": 170,
            "clock_settime": 112,
            "clock_adjtime": 266,
            "adjtimex": 171,
        },
    },
}
ARCHES["arm64"] = ARCHES["aarch64"]
ARCHES["amd64"] = ARCHES["x86_64"]


def program(machine: str | None = None) -> bytes | None:
    """The filter for ``machine`` (default: this one) as ``struct sock_filter`` bytes, or None."""
    arch = ARCHES.get((machine or platform.machine()).lower())
    if arch is None:
        return None
    nr = arch["nr"]
    denied = [nr[name] for name in DENIED] + [nr[n] for n in ("iopl", "ioperm") if n in nr]
    # (code, jump-if-true label, jump-if-false label, k); labels are resolved below
    ins: list[tuple] = [
        (_LD_W_ABS, None, None, _OFF_ARCH),
        (_JEQ, "nr", "kill", arch["audit_arch"]),
        ("kill", _RET, None, None, RET_KILL_PROCESS),
        ("nr", _LD_W_ABS, None, None, _OFF_NR),
    ]
    if arch["x32"]:
        ins.append((_JGE, "eperm", None, X32_SYSCALL_BIT))
    ins += [
        (_JEQ, "enosys", None, nr["clone3"]),
        (_JEQ, "clone", None, nr["clone"]),
        (_JEQ, "unshare", None, nr["unshare"]),
    ]
    ins += [(_JEQ, "eperm", None, n) for n in denied]
    ins += [
        (_RET, None, None, RET_ALLOW),
        ("clone", _LD_W_ABS, None, None, _OFF_ARG0_LO),
        (_JSET, "eperm", None, CLONE_NEW_FLAGS),
        (_RET, None, None, RET_ALLOW),
        ("unshare", _LD_W_ABS, None, None, _OFF_ARG0_LO),
        (_JSET, "eperm", None, CLONE_NEW_FLAGS | CLONE_NEWTIME),
        (_RET, None, None, RET_ALLOW),
        ("eperm", _RET, None, None, RET_ERRNO | errno.EPERM),
        ("enosys", _RET, None, None, RET_ERRNO | errno.ENOSYS),
    ]
    labels: dict[str, int] = {}
    plain: list[tuple] = []
    for i, item in enumerate(ins):
        if isinstance(item[0], str):
            labels[item[0]] = i
            item = item[1:]
        plain.append(item)
    out = bytearray()
    for pc, (code, jt, jf, k) in enumerate(plain):
        out += struct.pack("=HBBI", code, _jump(labels, jt, pc), _jump(labels, jf, pc), k)
    return bytes(out)


def _jump(labels: dict[str, int], label: str | None, pc: int) -> int:
    if label is None:
        return 0  # fall through to the next instruction
    off = labels[label] - pc - 1
    if not 0 <= off <= 255:
        raise ValueError(f"seccomp program: jump to {label} from {pc} out of range")
    return off


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2


def installer(prog: bytes | None) -> Callable[[], None]:
    """A function that sets ``no_new_privs`` and, if ``prog`` is given, loads it into the calling
    process. Everything is prepared here, so the returned function is safe between fork and exec."""
    libc = ctypes.CDLL(None, use_errno=True)
    prctl = libc.prctl
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    buf = ctypes.create_string_buffer(prog or b"", len(prog or b""))
    fprog = _SockFprog(len(prog or b"") // 8, ctypes.cast(buf, ctypes.c_void_p))
    fprog_addr = ctypes.addressof(fprog)

    def install() -> None:
        if prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            e = ctypes.get_errno()
            raise OSError(e, f"prctl(PR_SET_NO_NEW_PRIVS): {os.strerror(e)}")
        if prog and prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, fprog_addr, 0, 0) != 0:
            e = ctypes.get_errno()
            raise OSError(e, f"prctl(PR_SET_SECCOMP): {os.strerror(e)}")

    install.keep_alive = (buf, fprog)  # type: ignore[attr-defined]  # the program outlives the closure
    return install
