"""Egress policy of network-on sandboxes: the internet, never the host.

A task with ``[environment] network = true`` gets outbound network (slirp4netns on the local backend,
the engine's default bridge on Docker). Without a filter that network leads to the host too: every
service a host process serves on ``0.0.0.0`` (an inference server, Ray's GCS and dashboard, which take
jobs without authentication) is one ``connect()`` away through the host's bridge or LAN address, and so
are the host's LAN, other sandboxes and the cloud metadata address. This module closes that.

The policy
----------
Refused (:data:`REJECT_WITH`), for every packet a sandbox sends that does not stay on its own loopback:

* the private and special-use ranges of :data:`BLOCKED_V4` and :data:`BLOCKED_V6`: RFC 1918, CGNAT
  ``100.64/10``, loopback, link-local ``169.254/16`` (the metadata address ``169.254.169.254``
  included), ``0/8``, benchmarking, multicast and reserved; on IPv6 ``::1``, ULA ``fc00::/7``,
  link-local ``fe80::/10``, multicast, v4-mapped and NAT64 prefixes. Other sandboxes live in these
  ranges (slirp4netns's ``10.0.2.0/24``, Docker's bridge subnets), so they are unreachable too;
* every address of the host, taken when the sandbox starts (:func:`host_addresses`), public ones
  included — the host is unreachable at any of its addresses, not only at its private ones.

Let through before that: DNS (UDP and TCP port 53) to the sandbox's own resolver (slirp4netns's
``10.0.2.3`` forwarder; on Docker the nameservers of the container's ``/etc/resolv.conf``), and the
task's allowlist, ``[environment] network_allow = ["10.1.2.3:5432", "db.example:443"]``: each entry an
address or host name and a port (host names are resolved when the sandbox starts; the syntax is
checked when the task is loaded, see :func:`t1env.task.split_network_allow`). Everything else — the
internet — is let through.

Where the rules live, and why the agent cannot remove them
----------------------------------------------------------
In the sandbox's own network namespace, as an iptables ``OUTPUT`` chain (:data:`CHAIN`), written with
``iptables-restore``/``ip6tables-restore`` (:func:`ruleset`) by t1 before the agent's first process
runs. The agent has no ``CAP_NET_ADMIN`` there (neither the local sandbox's capability set nor
Docker's default one has it), cannot make a user namespace to get one (the seccomp filter), and a
network-on sandbox has no ``CAP_NET_RAW`` either, so it cannot send frames around the filter with a
packet socket. On Docker, drops happen in the container before anything reaches the bridge.

* Local backend (:func:`install_local`): t1 enters the sandbox's network namespace with ``nsenter``
  and runs this machine's ``iptables-restore``. As root it needs only ``-n`` (root of the first user
  namespace holds ``CAP_NET_ADMIN`` over every namespace); as a normal user it enters the sandbox's
  user namespace first (``-U -n``), which that user made and so holds every capability in.
* Docker backend (:func:`install_docker`), right after the container is created (in the warm pool's
  thread when the pool is on). Where t1 is root and the engine is local (the container's first
  process, as the engine reports it, is in that container's cgroup on this machine), t1 enters the
  container's network namespace with ``nsenter --net`` and runs this machine's iptables, as for the
  local backend (no measurable cost next to a container's start). Otherwise — t1 as a member of the
  docker group, a remote engine — a helper container from t1's small filter image (``t1env/egress``,
  Debian with iptables, built once per engine like the default image) joins the container's network
  namespace (``network_mode=container:<id>``) with ``CAP_NET_ADMIN`` only, restores the rules, prints
  the rules in force and exits (about 1.4 s on this 2-core machine). Neither changes the engine
  host's own firewall.

If the rules cannot be installed (no ``iptables-restore`` on this machine, the kernel refuses, the
filter image cannot be built), the sandbox does not start: :class:`SandboxError` says why and what to
do. A network-on sandbox never runs unfiltered.
"""

from __future__ import annotations

import io
import ipaddress
import json
import os
import shutil
import socket
import subprocess
import tarfile
import threading
import time
from typing import Iterable, Sequence

from t1env.sandbox.base import SandboxError
from t1env.sandbox.docker_engine import (
    _OWNER,
    DEFAULT_BASE,
    IMAGE_REPO,
    LABEL,
    LABEL_OWNER,
    _one_line,
    engine_is_remote,
    engine_url,
)
from t1env.sandbox.docker_images import build_image
from t1env.task import split_network_allow

CHAIN = "T1-EGRESS"
"""The iptables chain (in the sandbox's network namespace) that holds the policy."""

BLOCKED_V4 = (
    "0.0.0.0/8",  # "this network"
    "10.0.0.0/8",  # RFC 1918
    "100.64.0.0/10",  # CGNAT (RFC 6598)
    "127.0.0.0/8",  # loopback
    "169.254.0.0/16",  # link-local, cloud metadata (169.254.169.254)
    "172.16.0.0/12",  # RFC 1918 (Docker's bridges)
    "192.0.0.0/24",  # IETF protocol assignments
    "192.168.0.0/16",  # RFC 1918
    "198.18.0.0/15",  # benchmarking
    "224.0.0.0/4",  # multicast
    "240.0.0.0/4",  # reserved, broadcast
)
BLOCKED_V6 = (
    "::/128",  # unspecified
    "::1/128",  # loopback
    "::ffff:0:0/96",  # v4-mapped
    "64:ff9b::/96",  # NAT64 (reaches v4 private ranges through a translator)
    "fc00::/7",  # unique local (ULA)
    "fe80::/10",  # link-local
    "fec0::/10",  # site-local (deprecated, still routed by some)
    "ff00::/8",  # multicast
)

SLIRP_DNS = "10.0.2.3"
REJECT_WITH = {4: "icmp-admin-prohibited", 6: "icmp6-adm-prohibited"}
"""How a refused packet is answered: at once, so ``connect()`` fails with "No route to host" instead of hanging
(a TCP SYN that is only dropped is retried until the connect times out)."""

_INSTALL_IPTABLES = (
    "network = true on the local backend needs iptables to keep the sandbox off the host's addresses: install it "
    "with `sudo apt-get install iptables` (Debian/Ubuntu) or `sudo dnf install iptables-nft` (Fedora), or use "
    "backend='docker'"
)


# ---------------------------------------------------------------------------------------------
# the policy
# ---------------------------------------------------------------------------------------------


def resolve_allow(entries: Iterable[str]) -> list[tuple[str, int]]:
    """``network_allow`` entries as (address, port) pairs; host names resolved now (all their addresses)."""
    out: list[tuple[str, int]] = []
    for entry in entries:
        host, port = split_network_allow(entry)
        try:
            out.append((str(ipaddress.ip_address(host)), port))
            continue
        except ValueError:
            pass
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as e:
            raise SandboxError(
                f"environment.network_allow: cannot resolve {host!r} ({e.strerror or e}); fix the name in task.toml "
                "or give an address"
            ) from None
        for addr in sorted({i[4][0] for i in infos}):
            out.append((addr.split("%", 1)[0], port))
    return out


def ruleset(
    version: int,
    host: Iterable[str],
    dns: Iterable[str] = (),
    allow: Iterable[tuple[str, int]] = (),
) -> str:
    """``iptables-restore`` input (``version`` 4) or ``ip6tables-restore`` input (6) for the filter table."""
    bits = 32 if version == 4 else 128
    refuse = f"-j REJECT --reject-with {REJECT_WITH[version]}"

    def mine(addrs):
        return [a for a in addrs if ipaddress.ip_address(a).version == version]

    lines = ["*filter", ":INPUT ACCEPT [0:0]", ":FORWARD DROP [0:0]", ":OUTPUT ACCEPT [0:0]", f":{CHAIN} - [0:0]"]
    lines += ["-A OUTPUT -o lo -j ACCEPT", f"-A OUTPUT -j {CHAIN}"]
    for a in dict.fromkeys(mine(dns)):
        lines += [f"-A {CHAIN} -d {a}/{bits} -p {p} -m {p} --dport 53 -j ACCEPT" for p in ("udp", "tcp")]
    for a, port in dict.fromkeys((a, p) for a, p in allow if ipaddress.ip_address(a).version == version):
        lines += [f"-A {CHAIN} -d {a}/{bits} -p {p} -m {p} --dport {port} -j ACCEPT" for p in ("tcp", "udp")]
    for a in sorted(set(mine(host))):
        lines.append(f"-A {CHAIN} -d {a}/{bits} {refuse}")
    for net in BLOCKED_V4 if version == 4 else BLOCKED_V6:
        lines.append(f"-A {CHAIN} -d {net} {refuse}")
    return "\n".join(lines + ["COMMIT", ""])


def parse_ip_json(text: str) -> list[str]:
    """Addresses in ``ip -j addr`` output, the subnets' broadcast addresses included (without zone suffixes)."""
    out = []
    for iface in json.loads(text or "[]"):
        for a in iface.get("addr_info", ()):
            for key in ("local", "broadcast"):
                if a.get(key):
                    out.append(a[key].split("%", 1)[0])
    return sorted(set(out))


def parse_fib_trie(text: str) -> list[str]:
    """The IPv4 addresses the kernel delivers locally, from ``/proc/net/fib_trie``: the host's own (``/32 host
    LOCAL``) and its subnets' broadcast addresses (``/32 link BROADCAST``)."""
    out, last = set(), None
    for line in text.splitlines():
        words = line.split()
        if len(words) == 2 and words[0] == "|--":
            last = words[1]
        elif last and words[:1] == ["/32"] and words[-1] in ("LOCAL", "BROADCAST"):
            out.add(last)
    return sorted(out)


def parse_if_inet6(text: str) -> list[str]:
    """The IPv6 addresses in ``/proc/net/if_inet6``."""
    out = set()
    for line in text.splitlines():
        words = line.split()
        if words and len(words[0]) == 32:
            out.add(str(ipaddress.IPv6Address(bytes.fromhex(words[0]))))
    return sorted(out)


def host_addresses() -> list[str]:
    """Every address of this machine's network namespace, IPv4 (broadcast included) and IPv6, read from /proc."""
    try:
        v4 = parse_fib_trie(open("/proc/net/fib_trie").read())
    except OSError as e:
        raise SandboxError(f"cannot list this host's addresses to keep the sandbox off them: {e}") from None
    try:
        v6 = parse_if_inet6(open("/proc/net/if_inet6").read())
    except FileNotFoundError:
        v6 = []  # IPv6 disabled on this host
    if not v4:
        raise SandboxError("cannot list this host's addresses to keep the sandbox off them: no local address in /proc")
    return v4 + v6


def resolv_nameservers(text: str) -> list[str]:
    """The ``nameserver`` addresses of a resolv.conf."""
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] == "nameserver":
            try:
                out.append(str(ipaddress.ip_address(parts[1].split("%", 1)[0])))
            except ValueError:
                pass
    return out


# ---------------------------------------------------------------------------------------------
# local backend
# ---------------------------------------------------------------------------------------------


def _which(name: str) -> str | None:
    """``name`` on PATH, or in the sbin folders a normal user's PATH often lacks."""
    return shutil.which(name, path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin")


def _nsenter(pid: int, own_userns: bool) -> list[str]:
    """Enter the sandbox's network namespace with CAP_NET_ADMIN over it (see the module docstring)."""
    argv = ["nsenter", "-t", str(pid)]
    return argv + (["-U", "-n", "--preserve-credentials"] if own_userns else ["-n"])


def install_local(pid: int, own_userns: bool, allow: Sequence[str] = ()) -> None:
    """Install the policy in the network namespace of process ``pid`` (a local sandbox's first process);
    ``own_userns``: t1 runs as a normal user and enters the sandbox's user namespace to get CAP_NET_ADMIN.
    :func:`rules_in_force_local` reads back what is in force."""
    tools = _iptables()
    if tools is None:
        raise SandboxError(_INSTALL_IPTABLES)
    resolved = resolve_allow(allow)
    _restore(_nsenter(pid, own_userns), tools, host_addresses(), [SLIRP_DNS], resolved)


def rules_in_force_local(pid: int, own_userns: bool) -> str:
    """``iptables -S`` and ``ip6tables -S`` of the sandbox's network namespace (the whole filter table)."""
    return _show(_nsenter(pid, own_userns))


def _iptables() -> dict[str, str] | None:
    """This machine's iptables programs, or None where one is missing."""
    tools = {n: _which(n) for n in ("iptables-restore", "ip6tables-restore", "iptables", "ip6tables")}
    return tools if all(tools.values()) else None  # type: ignore[return-value]


def _restore(enter: list[str], tools: dict[str, str], host: Sequence[str], dns: Sequence[str], allow) -> None:
    """Restore both rulesets in the namespace ``enter`` (an nsenter command line) leads to, with one process
    there: the IPv4 rules on its stdin, the IPv6 rules as an argument."""
    script = '"$0" && printf "%s" "$2" | "$1"'
    argv = enter + ["sh", "-c", script, tools["iptables-restore"], tools["ip6tables-restore"]]
    argv.append(ruleset(6, host, dns, allow))
    r = subprocess.run(argv, input=ruleset(4, host, dns, allow), capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        why = (r.stderr.strip().splitlines() or ["no output"])[-1]
        raise SandboxError(f"could not install the network filter in the sandbox: {why}")


def _show(enter: list[str]) -> str:
    out = []
    for tool in ("iptables", "ip6tables"):
        r = subprocess.run(enter + [_which(tool) or tool, "-S"], capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise SandboxError(f"could not read the sandbox's network filter: {r.stderr.strip()}")
        out.append(f"# {tool}\n{r.stdout}")
    return "".join(out)


# ---------------------------------------------------------------------------------------------
# Docker backend
# ---------------------------------------------------------------------------------------------

EGRESS_PACKAGES = ("iptables", "iproute2")
_host_cache: dict[str, tuple[float, list[str]]] = {}
_host_lock = threading.Lock()
HOST_ADDRESSES_TTL = 300.0
"""Seconds the Docker engine host's address list is reused before it is taken again."""

# The helper's script: restore both rulesets from the environment, then print what is in force.
_SHOW = 'echo "# iptables" && iptables -S && echo "# ip6tables" && ip6tables -S'
_DOCKER_SCRIPT = (
    f'printf "%s" "$T1_RULES4" | iptables-restore && printf "%s" "$T1_RULES6" | ip6tables-restore && {_SHOW}'
)


def egress_dockerfile(base: str) -> str:
    return (
        f"FROM {base}\n"
        "ENV DEBIAN_FRONTEND=noninteractive\n"
        f"RUN apt-get update && apt-get install -y --no-install-recommends {' '.join(EGRESS_PACKAGES)} \\\n"
        "    && rm -rf /var/lib/apt/lists/*\n"
    )


def egress_image(host: str | None = None) -> str:
    """t1's filter image on the engine ``host`` (built once, then found by its content hash)."""
    try:
        return build_image(
            None,
            dockerfile_text=egress_dockerfile(DEFAULT_BASE),
            repo=f"{IMAGE_REPO}/egress",
            what="t1's network filter image",
            host=host,
        )
    except SandboxError as e:
        raise SandboxError(
            f"network = true on Docker needs t1's network filter image, which failed to build: {e}"
        ) from None


def _run_helper(c, image: str, argv: list[str], **kw) -> str:
    try:
        out = c.containers.run(
            image,
            argv,
            remove=True,
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            labels={LABEL: "1", LABEL_OWNER: _OWNER},
            **kw,
        )
    except Exception as e:
        raise SandboxError(f"the network filter helper container failed: {_one_line(e)}") from None
    return out.decode(errors="replace") if isinstance(out, bytes) else str(out)


def docker_host_addresses(c, image: str, host: str | None = None) -> list[str]:
    """Every address of the engine's host (a helper container on the host's network runs ``ip -j addr``);
    kept per engine for :data:`HOST_ADDRESSES_TTL` seconds."""
    key = engine_url(host)
    with _host_lock:
        hit = _host_cache.get(key)
        if hit is not None and time.monotonic() - hit[0] < HOST_ADDRESSES_TTL:
            return hit[1]
    addrs = parse_ip_json(_run_helper(c, image, ["ip", "-j", "addr", "show"], network_mode="host"))
    if not addrs:
        raise SandboxError("could not list the Docker host's addresses to keep the sandbox off them")
    with _host_lock:
        _host_cache[key] = (time.monotonic(), addrs)
    return addrs


def container_nameservers(ctr) -> list[str]:
    """The nameservers of the container's /etc/resolv.conf (read over the API: nothing runs in it)."""
    try:
        stream, _ = ctr.get_archive("/etc/resolv.conf")
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as t:
            member = t.next()
            f = t.extractfile(member) if member is not None else None
            text = f.read().decode(errors="replace") if f is not None else ""
    except Exception:
        return []
    return resolv_nameservers(text)


def install_docker(c, ctr, allow: Sequence[str] = (), host: str | None = None, helper: bool | None = None) -> str:
    """Install the policy in container ``ctr``'s network namespace; returns the rules in force
    (``iptables -S``/``ip6tables -S``). Directly with this machine's iptables where t1 can enter the
    container's namespace itself (:func:`_container_netns`), else through the filter image's helper
    container; ``helper`` forces the choice."""
    resolved = resolve_allow(allow)
    dns = container_nameservers(ctr)
    enter = None if helper else _container_netns(ctr, host)
    tools = _iptables() if enter is not None else None
    if enter is not None and tools is not None:
        _restore(enter, tools, host_addresses(), dns, resolved)
        out = _show(enter)
    elif helper is False:
        raise SandboxError("cannot install the network filter from here: that needs root, a local engine and iptables")
    else:
        image = egress_image(host)
        addrs = docker_host_addresses(c, image, host)
        env = {"T1_RULES4": ruleset(4, addrs, dns, resolved), "T1_RULES6": ruleset(6, addrs, dns, resolved)}
        out = _run_helper(c, image, ["sh", "-c", _DOCKER_SCRIPT], environment=env, **_joined(ctr))
    if f"-A OUTPUT -j {CHAIN}" not in out:
        tail = out.strip()[-200:]
        raise SandboxError(f"the network filter is not in force in the container after installing it: {tail}")
    return out


def rules_in_force_docker(c, ctr, host: str | None = None) -> str:
    """``iptables -S`` and ``ip6tables -S`` of container ``ctr``'s network namespace."""
    enter = _container_netns(ctr, host)
    if enter is not None and _iptables() is not None:
        return _show(enter)
    return _run_helper(c, egress_image(host), ["sh", "-c", _SHOW], **_joined(ctr))


def _container_netns(ctr, host: str | None = None) -> list[str] | None:
    """An nsenter command line into ``ctr``'s network namespace, where this process can use one: t1 is root,
    the engine is local and its containers' processes are this machine's (the container's first process,
    as the engine reports it, is in the container's own cgroup here). None otherwise."""
    if os.geteuid() != 0 or engine_is_remote(host):
        return None
    try:
        ctr.reload()
        pid = int(ctr.attrs["State"]["Pid"])
        with open(f"/proc/{pid}/cgroup") as f:
            if pid <= 0 or ctr.id not in f.read():
                return None
    except Exception:
        return None
    return ["nsenter", f"--net=/proc/{pid}/ns/net"]


def _joined(ctr) -> dict:
    """The helper's settings that put it in ``ctr``'s network namespace with CAP_NET_ADMIN (and nothing else)."""
    return {"network_mode": f"container:{ctr.id}", "cap_add": ["NET_ADMIN"]}
