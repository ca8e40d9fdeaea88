"""Offline images for imported tasks: the image map, Dockerfile reading, and local base-image stand-ins.

**The image map.** Terminal-Bench and Harbor Dockerfiles start ``FROM`` public images (for example
Terminal-Bench's own base images) that a machine without a registry cannot pull. The map is a TOML
file of ``"public/name:tag" = "local/name:tag"`` entries, named by ``T1ENV_IMAGE_MAP`` (or
``--image-map FILE`` on the CLI, which sets that variable). The Docker backend rewrites every
``FROM`` line and every ``docker_image`` through it before building; an image that is neither in
the engine nor mapped fails in one line naming the image and the map option.

**Base stand-ins.** ``t1env images build-bases`` builds local stand-ins for the common
Terminal-Bench base images — a Debian userland (the engine's ``debian:bookworm``) with python3,
pip, tmux and asciinema, installed from the machine's own package mirror — and writes the map
entries for them (``t1env images build-bases --map FILE``).

**Package indexes.** Builds of imported tasks see the host's package-index configuration: the
host's pip configuration files and ``PIP_INDEX_URL``/``PIP_EXTRA_INDEX_URL``/``PIP_TRUSTED_HOST``, and
its apt sources when the image runs the same distribution release as the host, are placed into
each build stage before the task's own steps (:func:`index_layer`), so Dockerfiles that install
packages work behind a mirror.

Example:
    >>> rewrite_from("FROM public/py:3 AS base\\nRUN true\\n", {"public/py:3": "local/py:3"})
    'FROM local/py:3 AS base\\nRUN true\\n'
    >>> dockerfile_workdir("FROM x\\nWORKDIR /app\\nWORKDIR src\\n")
    '/app/src'
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path

MAP_ENV = "T1ENV_IMAGE_MAP"
MAP_HINT = f"add it to the image map ({MAP_ENV}=FILE or --image-map FILE) or build it locally (`t1env images build-bases`)"

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
BASE_PACKAGES = "python3 python3-pip python3-venv tmux asciinema curl ca-certificates procps less".split()
BASE_FROM = os.environ.get("T1_TB_BASE_FROM", "debian:bookworm")

_FROM = re.compile(r"^(\s*FROM\s+(?:--\S+\s+)*)(\S+)(.*)$", re.IGNORECASE)
_INSTR = re.compile(r"^\s*([A-Za-z]+)\b\s*(.*)$")
# Instructions that change nothing a shell on the host's userland would notice.
_INERT = {"FROM", "WORKDIR", "CMD", "ENTRYPOINT", "LABEL", "MAINTAINER", "ARG", "EXPOSE", "STOPSIGNAL", "HEALTHCHECK", "SHELL"}


class ImageMapError(ValueError):
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


def rewrite_from(text: str, mapping: dict[str, str]) -> str:
    """``text`` with every FROM image that the map names replaced by its local image."""
    if not mapping:
        return text
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        m = _FROM.match(line.rstrip("\n"))
        if m and m.group(2) in mapping:
            lines[i] = f"{m.group(1)}{mapping[m.group(2)]}{m.group(3)}" + ("\n" if line.endswith("\n") else "")
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
_APPLY = """#!/bin/sh
# t1: use the host's package indexes in this build stage (see t1env/images.py)
d=/.t1-index
if [ -f "$d/os-release" ] && [ -f /etc/os-release ]; then
  h=$(. "$d/os-release"; echo "$ID:$VERSION_CODENAME"); i=$(. /etc/os-release; echo "$ID:$VERSION_CODENAME")
  if [ "$h" = "$i" ] && [ -d "$d/apt" ]; then cp -a "$d/apt/." /etc/apt/ 2>/dev/null || true; fi
fi
if [ -f "$d/pip.conf" ] && [ ! -f /etc/pip.conf ]; then cp "$d/pip.conf" /etc/pip.conf 2>/dev/null || true; fi
rm -rf "$d"
"""


def index_files() -> list[tuple[str, bytes, int]]:
    """Build-context files carrying the host's package-index configuration (apt sources, pip config)."""
    files: list[tuple[str, bytes, int]] = [(".t1-index/apply.sh", _APPLY.encode(), 0o755)]
    if Path("/etc/os-release").is_file():
        files.append((".t1-index/os-release", Path("/etc/os-release").read_bytes(), 0o644))
    for src in [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*.list")),
                *sorted(Path("/etc/apt/sources.list.d").glob("*.sources"))]:
        if src.is_file():
            rel = src.relative_to("/etc/apt").as_posix()
            files.append((f".t1-index/apt/{rel}", src.read_bytes(), 0o644))
    for conf in [os.environ.get("PIP_CONFIG_FILE"), "/etc/pip.conf", str(Path.home() / ".config/pip/pip.conf"),
                 str(Path.home() / ".pip/pip.conf")]:
        if conf and Path(conf).is_file():
            files.append((".t1-index/pip.conf", Path(conf).read_bytes(), 0o644))
            break
    return files


def index_layer(text: str) -> str:
    """``text`` with, after each FROM, the steps that apply the host's package indexes to that stage."""
    env = " ".join(f"{v}={os.environ[v]!r}".replace("'", '"') for v in _PIP_VARS if os.environ.get(v))
    add = "COPY .t1-index/ /.t1-index/\nRUN sh /.t1-index/apply.sh\n" + (f"ENV {env}\n" if env else "")
    out = []
    for line in text.splitlines(keepends=True):
        out.append(line if line.endswith("\n") else line + "\n")
        m = _FROM.match(line.rstrip("\n"))
        if m and m.group(2).lower() != "scratch":
            out.append(add)
    return "".join(out)


# -- base stand-ins ----------------------------------------------------------------------------------

def base_dockerfile(base: str = BASE_FROM) -> str:
    pkgs = " ".join(BASE_PACKAGES)
    return (
        f"FROM {base}\n"
        "ENV DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8\n"
        f"RUN apt-get update && apt-get install -y --no-install-recommends {pkgs} && rm -rf /var/lib/apt/lists/*\n"
        "WORKDIR /app\n"
    )


def build_bases(names: dict[str, str] | None = None, base: str = BASE_FROM, log=None) -> dict[str, str]:
    """Build each local stand-in once and tag it; returns the map entries {public: local}."""
    import docker.errors

    from t1env.sandbox import docker as D

    names = dict(names or TB_BASES)
    c = D.client()
    built: dict[str, str] = {}
    for public, local in names.items():
        if local not in built.values():
            tag = D.build_image(None, "Dockerfile", "t1env/tb-base", base_dockerfile(base), f"stand-in for {public}", log)
            repo, _, ver = local.rpartition(":")
            try:
                c.images.get(tag).tag(repo, ver)
            except docker.errors.APIError as e:
                raise RuntimeError(f"could not tag {tag} as {local}: {e}") from None
        built[public] = local
    return built
