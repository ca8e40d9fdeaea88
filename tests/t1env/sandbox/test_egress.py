"""``network = true`` means the internet, never the host (:mod:`t1env.sandbox.egress`), on both backends.

Test traffic only ever goes to listeners this test starts on this machine's own addresses: the host's
addresses are probed from inside network-on sandboxes (each refused), one allowlisted address is
reached. The private-range and metadata rules are checked by reading the rules in force in the
sandbox's network namespace, never by connecting out.
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket
import threading

import pytest

from t1env.sandbox import egress
from t1env.sandbox.base import SandboxConfig, SandboxError
from t1env.sandbox.local import LocalSandbox
from t1env.task import TaskError, load_task

GREETING = b"hello-from-host"


def _docker_up() -> tuple[bool, str]:
    try:
        from t1env.sandbox import docker as D
    except ImportError:
        return False, "the docker SDK is not installed"
    return D.engine_ready(D.DEFAULT_BASE)


_DOCKER_UP, _DOCKER_WHY = _docker_up()
_DOCKER_WHY = f"no Docker engine: {_DOCKER_WHY}"
BACKENDS = [
    "local",
    pytest.param("docker", marks=[pytest.mark.docker, pytest.mark.skipif(not _DOCKER_UP, reason=_DOCKER_WHY)]),
]


def _sandbox(backend: str, config: SandboxConfig, image: str | None = None):
    if backend == "local":
        return LocalSandbox(config)
    from t1env.sandbox import docker as D

    return D.DockerSandbox(config, image=image or D.default_image(), pool=False)


def _listener():
    """A TCP server on 0.0.0.0 and :: of this machine that greets every client; returns (port, close)."""
    srv = socket.socket(socket.AF_INET6)
    srv.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)  # one socket, both families: every address
    srv.bind(("::", 0))
    srv.listen(64)

    def serve():
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            try:
                conn.sendall(GREETING)
            finally:
                conn.close()

    threading.Thread(target=serve, daemon=True).start()
    return srv.getsockname()[1], srv.close


def _probe(box, addr: str, port: int) -> bytes:
    """What a connection from inside the sandbox to addr:port reads (the greeting, or nothing)."""
    script = f"timeout 10 bash -c 'exec 3<>/dev/tcp/{addr}/{port}; head -c 15 <&3' 2>&1; echo"
    return box.exec(["bash", "-c", script], timeout=30).stdout


def _targets() -> list[str]:
    """This machine's own addresses a sandbox could name: everything but loopback (inside a sandbox that is
    its own) and IPv6 link-local (needs a zone)."""
    out = []
    for a in egress.host_addresses():
        ip = ipaddress.ip_address(a)
        if not ip.is_loopback and not (ip.version == 6 and ip.is_link_local):
            out.append(a)
    if not any(ipaddress.ip_address(a).version == 4 for a in out):
        pytest.skip("this machine has no non-loopback IPv4 address to probe")
    return out


def _drops(rules: str) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    refused = rf"^-A {egress.CHAIN} -d (\S+) -j REJECT --reject-with icmp6?-adm(?:in)?-prohibited$"
    return [ipaddress.ip_network(m) for m in re.findall(refused, rules, re.M)]


def _rules_now(backend: str, box) -> str:
    if backend == "local":
        return egress.rules_in_force_local(box.init_pid, own_userns=os.geteuid() != 0)
    from t1env.sandbox import docker as D

    return egress.rules_in_force_docker(D.client(), box._box.container)


# -- the host is unreachable at every address; the allowlist opens one ------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_network_on_reaches_no_address_of_the_host(backend):
    targets = _targets()
    port, close = _listener()
    try:
        with _sandbox(backend, SandboxConfig(network=True)) as box:
            got = {a: _probe(box, a, port) for a in targets}
    finally:
        close()
    assert got and all(GREETING not in out for out in got.values()), got
    # refused on the spot (by the filter, or by the kernel for a broadcast address), not timed out somewhere
    v4 = [a for a in targets if ipaddress.ip_address(a).version == 4]
    assert all(b"No route to host" in got[a] or b"Network is unreachable" in got[a] for a in v4), got
    assert any(b"No route to host" in got[a] for a in v4), got


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_allowlisted_address_is_reachable_and_only_that_port(backend):
    addr = next(a for a in _targets() if ipaddress.ip_address(a).version == 4)
    port, close = _listener()
    other, close_other = _listener()
    try:
        with _sandbox(backend, SandboxConfig(network=True, network_allow=(f"{addr}:{port}",))) as box:
            allowed = _probe(box, addr, port)
            not_allowed = _probe(box, addr, other)
    finally:
        close()
        close_other()
    assert allowed.startswith(GREETING)
    assert GREETING not in not_allowed


# -- the rules in force: private ranges, metadata, the host; the agent cannot remove them -------------


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_rules_in_force_block_private_link_local_and_metadata_ranges(backend):
    with _sandbox(backend, SandboxConfig(network=True)) as box:
        rules = box.egress_rules
    assert rules is not None
    assert f"-A OUTPUT -o lo -j ACCEPT\n-A OUTPUT -j {egress.CHAIN}\n" in rules  # all off loopback goes through it
    drops = _drops(rules)
    for net in (*egress.BLOCKED_V4, *egress.BLOCKED_V6):
        assert ipaddress.ip_network(net) in drops, net
    for must in ("169.254.169.254", "10.0.2.2", "172.17.0.1", "192.168.1.1", "100.64.0.1", "fd00::1", "fe80::1", "::1"):
        assert any(ipaddress.ip_address(must) in d for d in drops), must
    for a in _targets():  # the host's own addresses too, each by name, public ones included
        assert ipaddress.ip_network(a) in drops, a
    # DNS is let through, to the resolver only, and only on port 53; nothing else is accepted
    accepts = re.findall(rf"^-A {egress.CHAIN} .*-j ACCEPT$", rules, re.M)
    assert accepts and all("--dport 53 " in r for r in accepts), accepts


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_agent_cannot_flush_the_rules(backend):
    addr = next(a for a in _targets() if ipaddress.ip_address(a).version == 4)
    port, close = _listener()
    image = None
    if backend == "docker":
        image = egress.egress_image()  # an image that has iptables, so the attempt is a real one
    try:
        with _sandbox(backend, SandboxConfig(network=True), image=image) as box:
            before = _rules_now(backend, box)
            attack = (
                "iptables -F; iptables -F T1-EGRESS; iptables -P OUTPUT ACCEPT; iptables -D OUTPUT -j T1-EGRESS; "
                "printf '*filter\\nCOMMIT\\n' | iptables-restore; ip6tables -F; nft flush ruleset; "
                "ip link set lo down; grep CapEff /proc/self/status"
            )
            r = box.exec(["bash", "-c", attack], timeout=60)
            after = _rules_now(backend, box)
            probe = _probe(box, addr, port)
    finally:
        close()
    eff = int(re.search(rb"CapEff:\s*([0-9a-f]+)", r.stdout).group(1), 16)
    assert not eff & (1 << 12) and not eff & (1 << 13)  # no CAP_NET_ADMIN, no CAP_NET_RAW
    assert b"ermission denied" in r.stderr or b"not permitted" in r.stderr  # iptables was there and was refused
    assert after == before
    assert GREETING not in probe


@pytest.mark.parametrize("backend", BACKENDS)
def test_network_on_sandbox_cannot_open_a_packet_socket(backend):
    """No CAP_NET_RAW: no frames sent past the filter through a packet socket."""
    code = "import socket; socket.socket(socket.AF_PACKET, socket.SOCK_RAW)"
    with _sandbox(backend, SandboxConfig(network=True)) as box:
        r = box.exec(["python3", "-c", code], timeout=30)
    assert r.exit_code != 0 and b"Operation not permitted" in r.stderr


@pytest.mark.slow
@pytest.mark.docker
@pytest.mark.skipif(not _DOCKER_UP, reason=_DOCKER_WHY)
def test_docker_network_on_sandboxes_cannot_reach_each_other():
    serve = "import socket\ns=socket.socket(); s.bind(('0.0.0.0', 7070)); s.listen()\n" + (
        "while True:\n c,_=s.accept(); c.sendall(b'hello-from-host'); c.close()\n"
    )
    up = "for i in $(seq 300); do (exec 3<>/dev/tcp/127.0.0.1/7070) 2>/dev/null && exit 0; sleep 0.1; done; exit 1"
    start = ["bash", "-c", f'python3 -c "$0" </dev/null >/dev/null 2>&1 & {up}', serve]  # returns once it listens
    on = SandboxConfig(network=True)
    with _sandbox("docker", on) as server, _sandbox("docker", on) as client:
        assert server.exec(start, timeout=30).exit_code == 0
        ip = server.exec(["hostname", "-I"], timeout=30).stdout.split()[0].decode()
        own = _probe(server, ip, 7070)  # the server reaches itself (its own loopback): the listener is up
        other = _probe(client, ip, 7070)
    assert own.startswith(GREETING)
    assert ipaddress.ip_address(ip).is_private
    assert GREETING not in other and b"No route to host" in other


@pytest.mark.slow
@pytest.mark.docker
@pytest.mark.skipif(not _DOCKER_UP, reason=_DOCKER_WHY)
def test_docker_filter_through_the_helper_container(monkeypatch):
    """Where t1 cannot enter the container's namespace itself (not root, a remote engine), the filter image's
    helper container installs the same rules: forced here, on this machine's engine."""
    addr = next(a for a in _targets() if ipaddress.ip_address(a).version == 4)
    direct = egress.install_docker
    monkeypatch.setattr(egress, "install_docker", lambda *a, **k: direct(*a, **{**k, "helper": True}))
    port, close = _listener()
    try:
        with _sandbox("docker", SandboxConfig(network=True, network_allow=(f"{addr}:{port}",))) as box:
            rules = box.egress_rules
            allowed = _probe(box, addr, port)
            refused = {a: _probe(box, a, port) for a in _targets() if a != addr}
    finally:
        close()
    assert rules is not None and f"-A OUTPUT -j {egress.CHAIN}" in rules
    for net in (*egress.BLOCKED_V4, *egress.BLOCKED_V6):
        assert ipaddress.ip_network(net) in _drops(rules), net
    assert allowed.startswith(GREETING)
    assert refused and all(GREETING not in out for out in refused.values()), refused


def test_local_sandbox_without_iptables_refuses_to_start_open(monkeypatch):
    """No iptables on this machine: a network-on sandbox does not start (it never runs unfiltered), the error is
    one line that says what to install, and nothing is left behind."""
    monkeypatch.setattr(egress, "_iptables", lambda: None)  # stands for a machine without the package
    box = LocalSandbox(SandboxConfig(network=True))
    with pytest.raises(SandboxError) as e:
        box.start()
    assert "apt-get install iptables" in str(e.value) and "\n" not in str(e.value)
    assert not box.alive and box._root is None and box._net is None


# -- the allowlist setting ----------------------------------------------------------------------------


def test_ruleset_accepts_allowlist_before_any_drop():
    rules = egress.ruleset(4, ["192.0.2.2", "fd00::2"], dns=["10.0.2.3"], allow=[("10.1.2.3", 5432)])
    lines = rules.splitlines()
    accept = lines.index(f"-A {egress.CHAIN} -d 10.1.2.3/32 -p tcp -m tcp --dport 5432 -j ACCEPT")
    first_refusal = min(i for i, x in enumerate(lines) if "-j REJECT" in x)
    assert accept < first_refusal
    assert f"-A {egress.CHAIN} -d 192.0.2.2/32 -j REJECT --reject-with icmp-admin-prohibited" in lines
    assert "fd00::2" not in rules
    assert "-d fd00::2/128 -j REJECT --reject-with icmp6-adm-prohibited" in egress.ruleset(6, ["192.0.2.2", "fd00::2"])


@pytest.mark.parametrize(
    "value, needle",
    [
        ('["10.1.2.3"]', "environment.network_allow: Value error, '10.1.2.3' is not HOST:PORT"),
        ('["10.1.2.3:0"]', "is not HOST:PORT"),
        ('["fd00::1:80"]', "is not HOST:PORT"),
        ('["bad host:80"]', "is not HOST:PORT"),
        ('"10.1.2.3:5432"', "environment.network_allow: Input should be a valid tuple"),
    ],
)
def test_bad_network_allow_names_file_and_field(make_task, value, needle):
    with pytest.raises(TaskError) as e:
        load_task(make_task(toml_extra=f"[environment]\nnetwork = true\nnetwork_allow = {value}\n"))
    assert "task.toml: " in str(e.value) and needle in str(e.value) and "\n" not in str(e.value)


def test_network_allow_needs_network(make_task):
    with pytest.raises(TaskError, match=r"task.toml: environment.network_allow: .*needs network = true"):
        load_task(make_task(toml_extra='[environment]\nnetwork_allow = ["10.1.2.3:5432"]\n'))


def test_network_allow_reaches_the_sandbox_config(make_task):
    toml = '[environment]\nnetwork = true\nnetwork_allow = ["10.1.2.3:5432", "[fd00::5]:80"]\n'
    task = load_task(make_task(toml_extra=toml))
    config = SandboxConfig.from_task(task)
    assert config.network_allow == ("10.1.2.3:5432", "[fd00::5]:80")
    assert egress.resolve_allow(config.network_allow) == [("10.1.2.3", 5432), ("fd00::5", 80)]


def test_host_addresses_come_from_the_kernels_local_table():
    trie = """Local:
  +-- 0.0.0.0/0 3 0 4
     +-- 127.0.0.0/8 2 0 2
           |-- 127.0.0.0
              /8 host LOCAL
           |-- 127.0.0.1
              /32 host LOCAL
     +-- 192.0.2.0/24 2 0 2
           |-- 192.0.2.0
              /24 link UNICAST
           |-- 192.0.2.2
              /32 host LOCAL
        |-- 192.0.2.255
           /32 link BROADCAST
"""
    assert egress.parse_fib_trie(trie) == ["127.0.0.1", "192.0.2.2", "192.0.2.255"]
    inet6 = "00000000000000000000000000000001 01 80 10 80 lo\nfd000000000000000000000000000002 04 40 00 82 eth0\n"
    assert egress.parse_if_inet6(inet6) == ["::1", "fd00::2"]
    ip_json = '[{"addr_info": [{"local": "192.0.2.2", "broadcast": "192.0.2.255"}, {"local": "fe80::1%eth0"}]}]'
    assert egress.parse_ip_json(ip_json) == ["192.0.2.2", "192.0.2.255", "fe80::1"]
