"""Start a process as root of a new user namespace whose ids are an unprivileged range of host ids.

bubblewrap can only map one id (``--uid 0`` as real root maps host root itself). To map a range,
the process that will run bwrap unshares its user namespace between fork and exec, and a process
outside it writes the maps; only then may the child become root inside and exec. Needs host root
(``CAP_SETUID``/``CAP_SETGID`` to write a range).
"""

from __future__ import annotations

import ctypes
import errno
import os
import subprocess
import threading
from typing import Callable

from t1env.sandbox.base import SandboxError
from t1env.sandbox.bounded import readable_within

USERNS_SIZE = 65536  # ids 0..65535 exist inside
_CLONE_NEWUSER = 0x10000000
_libc = ctypes.CDLL(None, use_errno=True)


def popen_as_root_of_new_userns(
    argv: list[str], before: Callable[[], None], host_base: int, popen: dict
) -> subprocess.Popen:
    """Start ``argv`` as root of a new user namespace whose ids 0..65535 are host ids ``host_base``+.

    Only a process outside the namespace may write a range into its uid/gid maps, and the child must
    not exec before they are written (it would lose its capabilities). So the child unshares and waits;
    a thread of this process writes the maps, then lets it become root inside and exec.
    """
    to_parent_r, to_parent_w = os.pipe()
    to_child_r, to_child_w = os.pipe()
    failure: list[str] = []

    def write_maps() -> None:
        answer = b"0"
        try:
            msg = os.read(to_parent_r, 64) if readable_within(to_parent_r, 20) else b""
            if msg.startswith(b"E "):
                failure.append(f"unshare(CLONE_NEWUSER): {os.strerror(int(msg.split()[1]))}")
            elif msg.startswith(b"ok "):
                pid = int(msg.split()[1])
                for name in ("uid_map", "gid_map"):
                    with open(f"/proc/{pid}/{name}", "w") as f:
                        f.write(f"0 {host_base} {USERNS_SIZE}\n")
                answer = b"1"
        except (OSError, ValueError) as e:
            failure.append(f"writing the user namespace's id maps: {e}")
        finally:
            try:
                os.write(to_child_w, answer)
            except OSError:
                pass

    def setup() -> None:
        os.close(to_parent_r)  # so that only the writer holds these ends: no wait can hang
        os.close(to_child_w)
        before()  # cgroups and rlimits need host privileges: do them first
        if _libc.unshare(_CLONE_NEWUSER) != 0:
            os.write(to_parent_w, b"E %d" % ctypes.get_errno())
            raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWUSER)")
        os.write(to_parent_w, b"ok %d" % os.getpid())
        if os.read(to_child_r, 1) != b"1":
            raise OSError(errno.EPERM, "no uid map")
        os.setgroups([])
        os.setresgid(0, 0, 0)
        os.setresuid(0, 0, 0)

    writer = threading.Thread(target=write_maps, name="t1-userns-maps", daemon=True)
    writer.start()
    try:
        return subprocess.Popen(argv, preexec_fn=setup, **popen)
    except subprocess.SubprocessError as e:
        why = failure[0] if failure else e
        raise SandboxError(f"cannot start {argv[0]} as root of a new user namespace: {why}") from e
    finally:
        os.close(to_parent_w)  # the writer sees EOF if the child never got as far as unshare
        os.close(to_child_r)
        writer.join(25)
        os.close(to_parent_r)
        os.close(to_child_w)
