#!/usr/bin/env bash
# Bring up a Docker engine and the registry-free base images that t1's Docker backend and the
# built-in tasks' Dockerfiles name. Idempotent: a second run only checks and returns (~1 s).
#
#   1. install docker.io (+ debootstrap) with apt if dockerd is missing;
#   2. start dockerd in the background unless an engine already answers; wait until it does;
#   3. for each name in $T1_BASE_IMAGES that the engine lacks: debootstrap a minimal Debian
#      bookworm (minbase) from the Debian mirror this machine's apt sources name, and
#      `docker import` it under that name (no registry is ever contacted).
#
# Environment:
#   T1_BASE_IMAGES   names to import the minbase rootfs under (default: "debian:bookworm-slim debian:bookworm")
#   T1_DEBIAN_MIRROR override the mirror (default: read from /etc/apt/sources.list{,.d/*})
#   T1_DOCKERD_LOG   dockerd's log file (default: /tmp/dockerd.log)
set -euo pipefail

BASE_IMAGES=${T1_BASE_IMAGES:-"debian:bookworm-slim debian:bookworm"}
DOCKERD_LOG=${T1_DOCKERD_LOG:-/tmp/dockerd.log}
SUITE=bookworm
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

log() { echo "docker-setup: $*" >&2; }

# -- 1. packages -------------------------------------------------------------------------------
need=()
command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
if [ ${#need[@]} -gt 0 ]; then
    log "installing ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# -- 2. engine ---------------------------------------------------------------------------------
engine_up() { docker info >/dev/null 2>&1; }
if ! engine_up; then
    if pgrep -x dockerd >/dev/null 2>&1; then
        log "dockerd is running but not answering yet; waiting"
    else
        log "starting dockerd (log: $DOCKERD_LOG)"
        $SUDO sh -c "nohup setsid dockerd >'$DOCKERD_LOG' 2>&1 </dev/null &"
    fi
    for _ in $(seq 1 120); do
        engine_up && break
        sleep 0.5
    done
    if ! engine_up; then
        log "dockerd did not come up within 60 s; last lines of $DOCKERD_LOG:"
        tail -n 20 "$DOCKERD_LOG" >&2 || true
        exit 1
    fi
fi
log "engine ready ($(docker version --format '{{.Server.Version}}' 2>/dev/null), storage driver $(docker info --format '{{.Driver}}' 2>/dev/null))"

# -- 3. base images ----------------------------------------------------------------------------
missing=()
for name in $BASE_IMAGES; do
    docker image inspect "$name" >/dev/null 2>&1 || missing+=("$name")
done
if [ ${#missing[@]} -eq 0 ]; then
    log "base images present: $BASE_IMAGES"
    exit 0
fi

debian_mirror() {
    # First URI of a Debian main archive (not -security) this machine's apt is configured with,
    # from one-line (*.list) or deb822 (*.sources) files. Prints nothing if none is found.
    local f
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -f "$f" ] || continue
        awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i !~ /^\[/) { print $i; break } }' "$f"
    done
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        awk 'tolower($1) == "uris:" { for (i = 2; i <= NF; i++) print $i }' "$f"
    done
}
MIRROR=${T1_DEBIAN_MIRROR:-}
if [ -z "$MIRROR" ]; then
    MIRROR=$(debian_mirror | grep -E '/debian/?$' | head -n 1 || true)
fi
if [ -z "$MIRROR" ]; then
    log "no Debian mirror found in /etc/apt/sources.list{,.d}; set T1_DEBIAN_MIRROR"
    exit 1
fi

ROOTFS=$(mktemp -d /tmp/t1-rootfs.XXXXXX)
trap '$SUDO rm -rf "$ROOTFS"' EXIT
log "debootstrap --variant=minbase $SUITE from $MIRROR (about 30-60 s)"
if ! $SUDO debootstrap --variant=minbase "$SUITE" "$ROOTFS" "$MIRROR" >/tmp/t1-debootstrap.log 2>&1; then
    log "debootstrap failed; last lines of /tmp/t1-debootstrap.log:"
    tail -n 20 /tmp/t1-debootstrap.log >&2
    exit 1
fi
# Slim it like the official -slim images: no apt lists, caches, docs or man pages.
$SUDO rm -rf "$ROOTFS"/var/lib/apt/lists/* "$ROOTFS"/var/cache/apt/*.bin "$ROOTFS"/var/cache/apt/archives/*.deb \
    "$ROOTFS"/usr/share/doc/* "$ROOTFS"/usr/share/man/* "$ROOTFS"/usr/share/info/*
first=${missing[0]}
log "importing as $first"
$SUDO tar -C "$ROOTFS" -c . | docker import \
    --change 'CMD ["bash"]' --change 'ENV LANG=C.UTF-8' \
    --message "t1: debootstrap --variant=minbase $SUITE" - "$first" >/dev/null
for name in "${missing[@]:1}"; do
    docker tag "$first" "$name"
done
log "base images ready: ${missing[*]}"
