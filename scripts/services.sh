#!/usr/bin/env bash
# Makes sure a Docker engine and Redis answer. Idempotent and quick when both are up.
# Where they are missing on Debian as root, installs docker.io / redis-server (and runsc, gVisor)
# with apt and starts them in the background; elsewhere says exactly what is missing. Also installs
# (never starts) redis-sentinel and openssl, which the Redis topology tests run themselves.
#
# --engine podman sets up and starts a rootless Podman engine instead of Docker (scripts/podman-engine.sh:
# a dedicated user, its API service, cgroup limits on v1 hosts) and prints its DOCKER_HOST; Redis as usual.
# The sandbox image is loaded into it from the Docker engine when that has it (the tests run both).
#
# --second-engine [NAME] also starts an extra engine standing in for a second host (scripts/engine.sh:
# its own dockerd, data-root, exec-root and socket; default NAME host2), loads the sandbox image into
# it from the main engine when the main engine has it, and prints its DOCKER_HOST.
set -euo pipefail

second_engine=""
engine=docker
if [ "${1:-}" = --second-engine ]; then second_engine="${2:-host2}"
elif [ "${1:-}" = --engine ] && [[ "${2:-}" =~ ^(docker|podman)$ ]]; then engine="$2"
elif [ -n "${1:-}" ]; then echo "usage: $0 [--engine docker|podman | --second-engine [NAME]]" >&2; exit 2; fi

STATE_DIR="${PATCHBAY_STATE_DIR:-/var/tmp/patchbay}"
REDIS_URL="${REDIS_URL:-redis://127.0.0.1:6379}"
mkdir -p "$STATE_DIR" 2>/dev/null || STATE_DIR="$(mktemp -d)"

say() { echo "[services] $*" >&2; }
docker_ok() { docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }
redis_hostport() { local hp="${REDIS_URL#*://}"; hp="${hp##*@}"; hp="${hp%%/*}"; echo "$hp"; }
redis_ok() {
  local hp host port; hp="$(redis_hostport)"; host="${hp%%:*}"; port="${hp##*:}"; [ "$port" = "$hp" ] && port=6379
  if command -v redis-cli >/dev/null 2>&1; then redis-cli -h "$host" -p "$port" ping 2>/dev/null | grep -q PONG
  else (exec 3<>"/dev/tcp/$host/$port" && printf 'PING\r\n' >&3 && head -c 5 <&3 | grep -q PONG) 2>/dev/null; fi
}
can_apt() { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && [ -f /etc/debian_version ]; }

apt_updated=0
apt_install() {
  if [ $apt_updated = 0 ]; then say "apt-get update"; apt-get update -qq >"$STATE_DIR/apt.log" 2>&1 || true; apt_updated=1; fi
  say "apt-get install $*"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >>"$STATE_DIR/apt.log" 2>&1 \
    || { say "apt-get install $* failed; see $STATE_DIR/apt.log"; return 1; }
}

wait_for() { # name, check function, seconds
  local i; for ((i = 0; i < $3 * 10; i++)); do "$2" && return 0; sleep 0.1; done
  say "$1 did not answer within $3 s"; return 1
}

missing=()
if [ "$engine" = docker ] && ! docker_ok; then
  if [ -n "${DOCKER_HOST:-}" ] && [[ "$DOCKER_HOST" != unix://* ]]; then
    missing+=("Docker engine at DOCKER_HOST=$DOCKER_HOST does not answer")
  elif can_apt; then
    command -v dockerd >/dev/null 2>&1 || apt_install docker.io
    # gVisor is optional: register it when the package is there, so runtime "runsc" works.
    command -v runsc >/dev/null 2>&1 || apt_install runsc || say "runsc not installed; runtime runsc will be unavailable"
    if command -v runsc >/dev/null 2>&1 && [ ! -f /etc/docker/daemon.json ]; then
      mkdir -p /etc/docker
      printf '{\n  "runtimes": { "runsc": { "path": "%s", "runtimeArgs": ["--network=none", "--oci-seccomp"] } }\n}\n' "$(command -v runsc)" >/etc/docker/daemon.json
    fi
    say "starting dockerd (log: $STATE_DIR/dockerd.log)"
    # setsid: dockerd must outlive this script and the npm process that ran it.
    setsid nohup dockerd --bridge=none --iptables=false --ip6tables=false >"$STATE_DIR/dockerd.log" 2>&1 < /dev/null &
    echo $! >"$STATE_DIR/dockerd.pid"
    wait_for "dockerd" docker_ok 60 || { tail -20 "$STATE_DIR/dockerd.log" >&2; exit 1; }
  else
    missing+=("Docker engine: install Docker (Debian: 'sudo apt-get install docker.io && sudo dockerd &'; elsewhere https://docs.docker.com/engine/install/) or set DOCKER_HOST")
  fi
fi

# gVisor applies a container's seccomp profile (patchbay's denies ptrace between a job's processes,
# src/backend/seccomp.ts) only when runsc runs with --oci-seccomp; a worker refuses runsc boxes
# otherwise. A daemon.json of an earlier run of this script lacks it: added, and dockerd reloaded
# (SIGHUP reloads its runtimes; running containers are not touched).
runsc_seccomp() {
  local conf=/etc/docker/daemon.json pid
  [ "$engine" = docker ] && [ -f $conf ] && [ -w $conf ] && command -v node >/dev/null 2>&1 || return 0
  node -e '
    const fs = require("fs"), f = process.argv[1], c = JSON.parse(fs.readFileSync(f, "utf8"));
    const r = c.runtimes && c.runtimes.runsc;
    if (!r) process.exit(1);
    r.runtimeArgs = r.runtimeArgs || [];
    if (r.runtimeArgs.some((a) => /^--?oci-seccomp(=true)?$/.test(a))) process.exit(1);
    r.runtimeArgs.push("--oci-seccomp");
    fs.writeFileSync(f, JSON.stringify(c, null, 2) + "\n");' $conf || return 0
  say "registered runsc with --oci-seccomp in $conf"
  pid="$(cat /var/run/docker.pid 2>/dev/null || true)"
  if [ -n "$pid" ] && kill -HUP "$pid" 2>/dev/null; then
    local i; for ((i = 0; i < 50; i++)); do docker info --format '{{json .Runtimes.runsc}}' 2>/dev/null | grep -q oci-seccomp && return 0; sleep 0.1; done
  fi
  say "reload dockerd (kill -HUP its pid) for runsc's --oci-seccomp to take effect"
}
runsc_seccomp

if ! redis_ok; then
  hp="$(redis_hostport)"
  if [[ "$hp" != 127.0.0.1* && "$hp" != localhost* ]]; then
    missing+=("Redis at REDIS_URL=$REDIS_URL does not answer")
  elif can_apt; then
    command -v redis-server >/dev/null 2>&1 || apt_install redis-server
    port="${hp##*:}"; [ "$port" = "$hp" ] && port=6379
    say "starting redis-server on 127.0.0.1:$port"
    redis-server --daemonize yes --bind 127.0.0.1 --port "$port" --dir "$STATE_DIR" \
      --appendonly yes --maxmemory-policy noeviction \
      --logfile "$STATE_DIR/redis.log" --pidfile "$STATE_DIR/redis.pid"
    wait_for "redis" redis_ok 20
  else
    missing+=("Redis: install it (Debian: 'sudo apt-get install redis-server'; or 'docker run -d -p 6379:6379 redis:7') or set REDIS_URL")
  fi
fi

# The Redis topology tests (test/support/redis-topology.ts) start redis-sentinel processes of their own
# and make a test CA with openssl: installed where missing, never started (the package's init script
# is held off by a policy-rc.d for the install), and not needed by a deployment, so only a note.
apt_quiet_install() {
  local policy=/usr/sbin/policy-rc.d own=0
  if [ ! -e $policy ]; then printf '#!/bin/sh\nexit 101\n' >$policy && chmod +x $policy && own=1; fi
  apt_install "$@" || true
  [ $own = 0 ] || rm -f $policy
}
for pair in redis-sentinel:redis-sentinel openssl:openssl; do
  cmd="${pair%%:*}"; pkg="${pair##*:}"
  command -v "$cmd" >/dev/null 2>&1 && continue
  if can_apt; then apt_quiet_install "$pkg"; fi
  command -v "$cmd" >/dev/null 2>&1 || say "$cmd is missing: the Redis topology tests will fail (Debian: sudo apt-get install $pkg)"
done

if [ ${#missing[@]} -gt 0 ]; then
  say "missing (this script installs them only as root on Debian):"
  for m in "${missing[@]}"; do say "  - $m"; done
  exit 1
fi
if [ "$engine" = podman ]; then
  say "redis ($REDIS_URL) answers; setting up rootless Podman"
  exec bash "$(dirname "$0")/podman-engine.sh"
fi
say "docker $(docker version --format '{{.Server.Version}}') and redis ($REDIS_URL) answer"
if [ -n "$second_engine" ]; then
  engine="$(dirname "$0")/engine.sh"
  bash "$engine" start "$second_engine"
  if docker image inspect "${PATCHBAY_IMAGE:-patchbay-sandbox:latest}" >/dev/null 2>&1; then bash "$engine" load-image "$second_engine"
  else say "the main engine has no ${PATCHBAY_IMAGE:-patchbay-sandbox:latest} yet: build it, then run $engine load-image $second_engine"; fi
fi
