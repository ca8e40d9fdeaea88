#!/usr/bin/env bash
# The reward-integrity suite once more, with t1 run by a normal user, as most users run it (issue 24).
#
# As a normal user the local sandbox's mechanisms differ: bubblewrap makes the user namespace, no cgroup
# freezer is writable (shared-mode verification freezes the agent's processes with ptrace, or refuses),
# cgroup caps may be missing. The same tests, with the same assertions, must hold. The Docker backend's
# mechanisms are the engine's whoever asks (pause, containers, capabilities), so on Docker only t1's own
# side is run as that user: one shared-mode attack (the agent paused while the verifier starts) and one
# separate-mode attack (images, caches, the verifier's container and its staged files made by that user).
#
# Needs root (it prepares the user). Idempotent. Steps:
#   1. create the user (uid 1001) unless it exists, with a home of its own, in the docker group;
#   2. let it reach the checkout, the virtualenv and the interpreter the virtualenv points to (a pyenv
#      install under /root, mode 700, is made traversable for that user alone, with an ACL);
#   3. run, as that user, the freezer's tests and the integrity file on the local backend and, beside it, the
#      Docker subset, each with its time.
#
#   .ci/nonroot-integrity.sh [PYTHON]   PYTHON: the interpreter t1 is installed into (default .venv/bin/python)
#
# Environment: T1_NONROOT_USER (default t1ci), T1_NONROOT_UID (default 1001).
set -euo pipefail
cd "$(dirname "$0")/.."
user=${T1_NONROOT_USER:-t1ci}
uid=${T1_NONROOT_UID:-1001}
py=${1:-.venv/bin/python}
step() { echo "== .ci/nonroot-integrity.sh: $*" >&2; }

[ "$(id -u)" -eq 0 ] || { echo "run it as root: it creates the user $user and grants it access" >&2; exit 1; }
[ -x "$py" ] || { echo "no interpreter at $py: run \`make test\` first, or pass t1's interpreter" >&2; exit 1; }
py=$(cd "$(dirname "$py")" && pwd)/$(basename "$py")  # absolute, links kept (a venv's python is a link)

# -- 1. the user ------------------------------------------------------------------------------------
if ! id -u "$user" >/dev/null 2>&1; then
    step "creating user $user (uid $uid)"
    useradd --uid "$uid" --create-home --shell /bin/sh "$user"
fi
home=$(getent passwd "$user" | cut -d: -f6)
mkdir -p "$home/.cache"
chown -R "$user:" "$home"
if getent group docker >/dev/null; then
    usermod -aG docker "$user"
fi

# -- 2. read access -----------------------------------------------------------------------------------
as_user() { runuser -u "$user" -- "$@"; }
grant_walk() {  # every folder above and at $1 that the user cannot enter gets an ACL entry for it alone
    local d
    d=$(dirname "$1")
    while [ "$d" != / ]; do
        if ! as_user test -x "$d"; then
            if ! command -v setfacl >/dev/null 2>&1; then
                step "installing acl (setfacl)"
                apt-get update -qq
                DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends acl >/dev/null
            fi
            step "letting $user enter $d (setfacl -m u:$user:x)"
            setfacl -m "u:$user:x" "$d"
        fi
        d=$(dirname "$d")
    done
}
grant_walk "$(pwd)/."
grant_walk "$py"
grant_walk "$(readlink -f "$py")"
as_user "$py" -c 'import t1env, pytest' || {
    echo "$user cannot import t1env with $py: make the checkout and the virtualenv readable by it" >&2
    exit 1
}

# -- 3. the suite, as the user --------------------------------------------------------------------------
run_as_user() {
    as_user env -i HOME="$home" USER="$user" LOGNAME="$user" LANG=C.UTF-8 TMPDIR=/tmp \
        PATH="$(dirname "$py"):/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin" \
        XDG_CACHE_HOME="$home/.cache" PYTHONDONTWRITEBYTECODE=1 \
        "$py" -m pytest -p no:cacheprovider -q "$@"
}
# The two runs share nothing but the user and mostly wait on sandboxes: side by side they take the longer one's time
step "as $user (uid $(id -u "$user")): the freezer and the integrity suite on the local backend; beside it, on Docker,"
step "  one shared-mode and one separate-mode attack (t1's side of the Docker backend)"
t0=$SECONDS
docker_log=$(mktemp /tmp/t1-nonroot-docker.XXXXXX)
docker_tests="sigcont_each_other or usercustomize"
run_as_user -m docker tests/t1env/test_reward_integrity.py -k "$docker_tests" >"$docker_log" 2>&1 &
docker_pid=$!
local_rc=0
run_as_user -m "not docker" tests/t1env/sandbox/test_freezer.py tests/t1env/test_reward_integrity.py || local_rc=$?
step "  local: took $((SECONDS - t0)) s"
docker_rc=0
wait "$docker_pid" || docker_rc=$?
step "  Docker (its output follows): both took $((SECONDS - t0)) s"
cat "$docker_log"
rm -f "$docker_log"
[ "$local_rc" -eq 0 ] && [ "$docker_rc" -eq 0 ]
