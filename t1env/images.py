"""Offline images for imported tasks: the image map, Dockerfile reading, and local base-image stand-ins.

**The image map.** Terminal-Bench and Harbor Dockerfiles start ``FROM`` public images (for example
Terminal-Bench's own base images) that a machine without a registry cannot pull. The map is a TOML
file of ``"public/name:tag" = "local/name:tag"`` entries, named by ``T1ENV_IMAGE_MAP`` (or
``--image-map FILE`` on the CLI, which sets that variable). The Docker backend rewrites every
``FROM`` line and every ``docker_image`` through it before building; an image that is neither in
the engine nor mapped (nor a built stand-in, below) fails in one line naming the image, the map
option and ``t1env images build-bases``.

**Base stand-ins.** ``t1env images build-bases`` builds local stand-ins for the common
Terminal-Bench and Harbor base images (:data:`TB_BASES`) — a Debian userland (the engine's
``debian:bookworm``) with python3, pip, git, tmux and asciinema, installed from the machine's own
package mirror, with the commands the real bases have (``python`` and ``pip`` next to ``python3`` and
``pip3``; ``pip install`` works system-wide, as in the ``python:3.x`` images) — and tags them under
the names in :data:`TB_BASES`. Once built they are used without any map: a ``FROM`` image (or
``docker_image``) that is not in the engine resolves to its stand-in when that is
(:func:`resolve_image`); an image map still wins. ``--map FILE`` also writes the entries to a map.

**Package indexes.** Builds of imported tasks see the host's package-index configuration
(:func:`host_pip_config`: pip's configuration files merged in pip's order, then ``PIP_INDEX_URL``/
``PIP_EXTRA_INDEX_URL``/``PIP_TRUSTED_HOST``; settings that name files on this machine, like a
``file://`` index or ``find-links`` folder, are left out since a build cannot see them), and its apt
sources when the image runs the same distribution release as the host. They are placed into each
build stage before the task's own steps (:func:`index_layer`), so Dockerfiles that install packages,
and the verifier image's test dependencies (:func:`verifier_dockerfile`), work behind a mirror.

Example:
    >>> rewrite_from("FROM public/py:3 AS base\\nRUN true\\n", {"public/py:3": "local/py:3"})
    'FROM local/py:3 AS base\\nRUN true\\n'
    >>> dockerfile_workdir("FROM x\\nWORKDIR /app\\nWORKDIR src\\n")
    '/app/src'
    >>> resolve_image("python:3.13-slim", {}, lambda name: name == "t1env/tb-python-3-13:local")
    't1env/tb-python-3-13:local'
"""

from __future__ import annotations

import configparser
import json
import os
import re
import sys
import tomllib
from pathlib import Path
from typing import Callable

from t1env.errors import T1Error

MAP_ENV = "T1ENV_IMAGE_MAP"
MAP_HINT = (
    f"add it to the image map ({MAP_ENV}=FILE or --image-map FILE) or build or load it into the engine under that name"
)
STANDIN_HINT = "build the stand-ins first: `t1env images build-bases` (then it is used without a map)"

# Base images that Terminal-Bench 1.x and Harbor task Dockerfiles commonly start FROM, and the stand-in
# each gets (all the same Debian userland: a stand-in, not a copy; docs/compat.md says what differs).
TB_BASES = {
    "ghcr.io/laude-institute/t-bench/python-3-13:20250620": "t1env/tb-python-3-13:local",
    "ghcr.io/laude-institute/t-bench/python-3-13:latest": "t1env/tb-python-3-13:local",
    "ghcr.io/laude-institute/t-bench/ubuntu-24-04:20250624": "t1env/tb-ubuntu-24-04:local",
    "ghcr.io/laude-institute/t-bench/ubuntu-24-04:latest": "t1env/tb-ubuntu-24-04:local",
    "python:3.13-slim-bookworm": "t1env/tb-python-3-13:local",
    "python:3.13-slim": "t1env/tb-python-3-13:local",
    "python:3.12-slim-bookworm": "t1env/tb-python-3-13:local",
    "python:3.11-slim-bookworm": "t1env/tb-python-3-13:local",
    "ubuntu:24.04": "t1env/tb-ubuntu-24-04:local",
}
BASE_PACKAGES = (
    "python3 python3-pip python3-venv python-is-python3 git tmux asciinema curl ca-certificates procps less"
).split()
BASE_FROM = os.environ.get("T1_TB_BASE_FROM", "debian:bookworm")

_FROM = re.compile(r"^(\s*FROM\s+(?:--\S+\s+)*)(\S+)(.*)$", re.IGNORECASE)
_INSTR = re.compile(r"^\s*([A-Za-z]+)\b\s*(.*)$")
# Instructions that change nothing a shell on the host's userland would notice.
_INERT = {
    "FROM",
    "WORKDIR",
    "CMD",
    "ENTRYPOINT",
    "LABEL",
    "MAINTAINER",
    "ARG",
    "EXPOSE",
    "STOPSIGNAL",
    "HEALTHCHECK",
    "SHELL",
}


class ImageMapError(T1Error, ValueError):
    """The image map file is unreadable or malformed (one line naming the file and the entry)."""


# -- the map ----------------------------------------------------------------------------------------


def load_map(path: str | Path | None = None) -> dict[str, str]:
    """The image map from ``path`` (default: ``$T1ENV_IMAGE_MAP``; none set: empty)."""
    path = path or os.environ.get(MAP_ENV)
    if not path:
        return {}
    p = Path(path)
    try:
        raw = tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ImageMapError(f"{p}: image map not found ({MAP_ENV} / --image-map)") from None
    except OSError as e:  # a folder, no permission
        raise ImageMapError(f"{p}: cannot read the image map: {e.strerror}") from None
    except RecursionError:
        raise ImageMapError(f"{p}: invalid TOML: arrays or tables nested too deeply") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ImageMapError(f"{p}: invalid TOML: {e}") from None
    table = raw.get("images", raw)
    out = {}
    for k, v in table.items():
        if not isinstance(v, str) or not v.strip():
            raise ImageMapError(f"{p}: {k}: the local image must be a non-empty string, got {v!r}")
        out[k] = v.strip()
    return out


def write_map(path: Path, entries: dict[str, str]) -> None:
    """Merge ``entries`` into the map at ``path`` (created if missing)."""
    current = load_map(path) if path.is_file() else {}
    current.update(entries)
    lines = ["# t1 image map: public image = local image (T1ENV_IMAGE_MAP / --image-map)"]
    lines += [f'"{k}" = "{v}"' for k, v in sorted(current.items())]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def map_image(name: str, mapping: dict[str, str] | None = None) -> str:
    mapping = load_map() if mapping is None else mapping
    return mapping.get(name, name)


def resolve_image(name: str, mapping: dict[str, str], exists: Callable[[str], bool]) -> str:
    """The local image a task's public ``name`` runs on: the map's entry, else ``name`` itself when the
    engine has it, else its built stand-in (:data:`TB_BASES`), else ``name`` (which then fails to build)."""
    if name in mapping:
        return mapping[name]
    if exists(name):
        return name
    standin = TB_BASES.get(name)
    return standin if standin is not None and exists(standin) else name


def missing_hint(name: str) -> str:
    """What to do about a missing image: build the stand-in when t1 has one for it, else map it."""
    return STANDIN_HINT if name in TB_BASES or name in TB_BASES.values() else MAP_HINT


# -- reading Dockerfiles -------------------------------------------------------------------------------


def _instructions(text: str) -> list[tuple[int, str, str]]:
    """(line number, INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    out, buf, start = [], "", 0
    for i, line in enumerate(text.splitlines(), 1):
        if not buf and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if not buf:
            start = i
        if line.rstrip().endswith("\\"):
            buf += line.rstrip()[:-1] + " "
            continue
        buf += line
        m = _INSTR.match(buf)
        if m:
            out.append((start, m.group(1).upper(), m.group(2).strip()))
        buf = ""
    return out


def rewrite_from(text: str, mapping: dict[str, str], exists: Callable[[str], bool] | None = None) -> str:
    """``text`` with every FROM image that the map names replaced by its local image; with ``exists``
    (is this image in the engine?), also those the engine lacks and a built stand-in replaces
    (:func:`resolve_image`)."""
    if not mapping and exists is None:
        return text
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        m = _FROM.match(line.rstrip("\n"))
        if not m:
            continue
        name = m.group(2)
        local = mapping.get(name, name) if exists is None else resolve_image(name, mapping, exists)
        if local != name:
            lines[i] = f"{m.group(1)}{local}{m.group(3)}" + ("\n" if line.endswith("\n") else "")
    return "".join(lines)


def from_images(text: str) -> list[str]:
    """External images the Dockerfile starts FROM (build-stage names, ``scratch`` and ``$ARG``s left out)."""
    stages, out = set(), []
    for _, instr, args in _instructions(text):
        if instr != "FROM":
            continue
        words = [w for w in args.split() if not w.startswith("--")]
        if not words:
            continue
        name = words[0]
        if len(words) >= 3 and words[1].lower() == "as":
            stages.add(words[2].lower())
        if name.lower() not in stages and name.lower() != "scratch" and "$" not in name:
            out.append(name)
    return out


def dockerfile_workdir(text: str, default: str = "/app") -> str:
    """The last WORKDIR of the final stage (relative ones joined), else ``default``."""
    wd = None
    for _, instr, args in _instructions(text):
        if instr == "FROM":
            wd = None
        elif instr == "WORKDIR" and args:
            arg = args.strip().strip("\"'")
            wd = arg if arg.startswith("/") or wd is None else f"{wd.rstrip('/')}/{arg}"
            if not wd.startswith("/"):
                wd = "/" + wd
    return os.path.normpath(wd) if wd else default


def local_problem(dockerfile: Path | None, docker_image: str | None, where: str) -> str | None:
    """Why the local backend cannot stand in for this task's image, or None when it can: the
    Dockerfile does nothing but pick a base and a WORKDIR (the host's userland then serves)."""
    if docker_image:
        return f"{where}: needs its docker_image {docker_image!r}: use backend='docker'"
    if dockerfile is None:
        return None
    for line, instr, args in _instructions(dockerfile.read_text(encoding="utf-8", errors="replace")):
        if instr not in _INERT:
            return f"{dockerfile}:{line}: needs its Dockerfile ({instr} {args[:60]}): use backend='docker'"
    return None


# -- package indexes ---------------------------------------------------------------------------------

_PIP_VARS = ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_TRUSTED_HOST")
# pip settings a build can use: they name servers, not files on this machine (the cert file travels with them:
# an index behind this machine's TLS proxy or private CA is trusted only through it)
CERT_IN_IMAGE = "/etc/t1-pip-cert.pem"
_PIP_KEYS = ("index-url", "extra-index-url", "trusted-host", "cert", "proxy", "timeout", "default-timeout", "retries")
_APPLY = """#!/bin/sh
# t1: use the host's package indexes in this build stage (see t1env/images.py)
d=/.t1-index
if [ -f "$d/os-release" ] && [ -f /etc/os-release ]; then
  h=$(. "$d/os-release"; echo "$ID:$VERSION_CODENAME"); i=$(. /etc/os-release; echo "$ID:$VERSION_CODENAME")
  if [ "$h" = "$i" ] && [ -d "$d/apt" ]; then cp -a "$d/apt/." /etc/apt/ 2>/dev/null || true; fi
fi
if [ -f "$d/pip.conf" ] && [ ! -f /etc/pip.conf ]; then
  cp "$d/pip.conf" /etc/pip.conf 2>/dev/null || true
  if [ -f "$d/pip-cert.pem" ]; then cp "$d/pip-cert.pem" /etc/t1-pip-cert.pem 2>/dev/null || true; fi
fi
rm -rf "$d"
"""


def _pip_config_files() -> list[Path]:
    """pip's configuration files in the order pip reads them (a later one overrides an earlier one)."""
    xdg = os.environ.get("XDG_CONFIG_DIRS", "/etc/xdg").split(":")
    files = [Path(d) / "pip" / "pip.conf" for d in reversed(xdg) if d] + [Path("/etc/pip.conf")]
    home = Path.home()
    user_config = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
    files += [home / ".pip" / "pip.conf", user_config / "pip" / "pip.conf"]
    if sys.prefix != sys.base_prefix:
        files.append(Path(sys.prefix) / "pip.conf")
    if os.environ.get("PIP_CONFIG_FILE") and os.environ["PIP_CONFIG_FILE"] != os.devnull:
        files.append(Path(os.environ["PIP_CONFIG_FILE"]))
    return files


def _server_values(key: str, value: str) -> str | None:
    """``value`` without the entries a build cannot reach (``file:`` URLs), or None when nothing is left."""
    if key in ("index-url", "extra-index-url"):
        kept = [u for u in value.split() if not u.startswith("file:") and "://" in u]
        return " ".join(kept) or None
    return value.strip() or None


def host_pip_config() -> dict[str, str]:
    """The pip settings this machine's pip installs with (``[global]`` then ``[install]`` of every
    configuration file, then the ``PIP_*`` variables), limited to those a build can use."""
    if os.environ.get("PIP_CONFIG_FILE") == os.devnull:
        files: list[Path] = []
    else:
        files = _pip_config_files()
    out: dict[str, str] = {}
    for f in files:
        cp = configparser.RawConfigParser()
        try:
            cp.read(f, encoding="utf-8")
        except (configparser.Error, OSError, UnicodeDecodeError):
            continue
        for section in ("global", "install"):
            if cp.has_section(section):
                for key, value in cp.items(section):
                    key = key.replace("_", "-")
                    if key in _PIP_KEYS:
                        out[key] = value
    for key in _PIP_KEYS:
        v = os.environ.get("PIP_" + key.upper().replace("-", "_"))
        if v:
            out[key] = v
    kept = {k: _server_values(k, v) for k, v in out.items()}
    return {k: v for k, v in kept.items() if v is not None}


def pip_conf_text(settings: dict[str, str]) -> str:
    return "[global]\n" + "".join(f"{k} = {v}\n" for k, v in sorted(settings.items()))


def index_files() -> list[tuple[str, bytes, int]]:
    """Build-context files carrying the host's package-index configuration (apt sources, pip config)."""
    files: list[tuple[str, bytes, int]] = [(".t1-index/apply.sh", _APPLY.encode(), 0o755)]
    if Path("/etc/os-release").is_file():
        files.append((".t1-index/os-release", Path("/etc/os-release").read_bytes(), 0o644))
    for src in [
        Path("/etc/apt/sources.list"),
        *sorted(Path("/etc/apt/sources.list.d").glob("*.list")),
        *sorted(Path("/etc/apt/sources.list.d").glob("*.sources")),
    ]:
        if src.is_file():
            rel = src.relative_to("/etc/apt").as_posix()
            files.append((f".t1-index/apt/{rel}", src.read_bytes(), 0o644))
    pip = host_pip_config()
    cert = pip.pop("cert", None)
    if cert and Path(cert).is_file():
        files.append((".t1-index/pip-cert.pem", Path(cert).read_bytes(), 0o644))
        pip["cert"] = CERT_IN_IMAGE
    if pip:
        files.append((".t1-index/pip.conf", pip_conf_text(pip).encode(), 0o644))
    return files


def index_layer(text: str) -> str:
    """``text`` with, after each FROM, the steps that apply the host's package indexes to that stage."""
    env = " ".join(
        f"{v}={os.environ[v]!r}".replace("'", '"')
        for v in _PIP_VARS
        if _server_values("index-url", os.environ.get(v, ""))
    )
    add = "COPY .t1-index/ /.t1-index/\nRUN sh /.t1-index/apply.sh\n" + (f"ENV {env}\n" if env else "")
    out = []
    for line in text.splitlines(keepends=True):
        out.append(line if line.endswith("\n") else line + "\n")
        m = _FROM.match(line.rstrip("\n"))
        if m and m.group(2).lower() != "scratch":
            out.append(add)
    return "".join(out)


# -- the verifier's image: the task's image and the tests' dependencies ------------------------------


def verifier_dockerfile(image: str, requirements: tuple[str, ...]) -> str:
    """A Dockerfile for the image the verifier container runs on: ``image`` (the task's, pristine) plus
    ``requirements`` installed by the image's own ``python3`` (the verifier's interpreter) into its
    system site-packages, through the host's package indexes (:func:`index_layer`)."""
    argv = [
        "env",
        "PIP_BREAK_SYSTEM_PACKAGES=1",
        "PIP_ROOT_USER_ACTION=ignore",
        "PIP_DISABLE_PIP_VERSION_CHECK=1",
        "python3",
        "-m",
        "pip",
        "install",
        "--no-cache-dir",
        "--no-warn-script-location",
        *requirements,
    ]
    return index_layer(f"FROM {image}\n") + f"RUN {json.dumps(argv)}\n"


# -- base stand-ins ----------------------------------------------------------------------------------


def base_dockerfile(base: str = BASE_FROM) -> str:
    pkgs = " ".join(BASE_PACKAGES)
    return (
        f"FROM {base}\n"
        "ENV DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8\n"
        f"RUN apt-get update && apt-get install -y --no-install-recommends {pkgs} && rm -rf /var/lib/apt/lists/*"
        # the python:3.x images let `pip install` write the system's site-packages: so does the stand-in
        " && rm -f /usr/lib/python3*/EXTERNALLY-MANAGED\n"
        "WORKDIR /app\n"
    )
