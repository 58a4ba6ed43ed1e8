#!/usr/bin/env bash
# An extra Docker engine on this machine, standing in for a second host: its own dockerd with its own
# --data-root, --exec-root, --pidfile, unix socket, its own (dockerd-managed) containerd, and its
# containers under their own cgroup parent. It never touches the main engine or its data.
#
#   scripts/engine.sh start NAME         starts it (idempotent); prints DOCKER_HOST=unix://…
#   scripts/engine.sh load-image NAME [IMAGE]   copies IMAGE from the main engine (skipped when the
#                                        engine already has the same image id)
#   scripts/engine.sh stop NAME          SIGTERM, as a clean shutdown (dockerd stops its containers)
#   scripts/engine.sh kill NAME          the whole "host" dies: SIGKILL to dockerd, containerd, the
#                                        shims and every container process, then what a reboot
#                                        clears (its mounts, its exec-root); the data-root stays
#   scripts/engine.sh status NAME        running|stopped, and the DOCKER_HOST
#   scripts/engine.sh remove NAME        kill, then delete its data-root and cgroups
# With ENGINE_TLS_PORT=N, start also listens on tcp://127.0.0.1:N with TLS and client certificates
# (--tlsverify; a CA, server and client certificate made once under its data-root) and prints
# DOCKER_TLS_VERIFY=1 and DOCKER_CERT_PATH for a client, as a remote engine would be reached.
# Root only (it runs dockerd). Paths: /var/run/patchbay-engines/NAME (socket, pidfile, exec-root),
# /var/lib/patchbay-engines/NAME (data-root), cgroup parent /patchbay-engines/NAME.
set -euo pipefail

cmd="${1:-}"
name="${2:-}"
[[ "$name" =~ ^[a-z0-9][a-z0-9-]{0,19}$ ]] || { echo "usage: $0 start|load-image|stop|kill|status|remove NAME [IMAGE] (NAME: [a-z0-9-], ≤ 20)" >&2; exit 2; }

RUN="/var/run/patchbay-engines/$name"
DATA="/var/lib/patchbay-engines/$name"
SOCK="$RUN/docker.sock"
PIDFILE="$RUN/docker.pid"
LOG="/var/lib/patchbay-engines/$name.log"
CG="patchbay-engines/$name"
# The pids hierarchy (cgroup v1) or the unified one (v2) holds every process of the engine.
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then PIDS_CG="/sys/fs/cgroup/$CG"; else PIDS_CG="/sys/fs/cgroup/pids/$CG"; fi
export_host="unix://$SOCK"

say() { echo "[engine $name] $*" >&2; }
engine() { DOCKER_HOST="$export_host" DOCKER_TLS_VERIFY= DOCKER_CERT_PATH= docker "$@"; }
answers() { engine version --format '{{.Server.Version}}' >/dev/null 2>&1; }
daemon_pid() {
  local pid
  pid="$(cat "$PIDFILE" 2>/dev/null || true)"
  # Not a zombie: a killed daemon waits for this machine's init to reap it, and its pid stays taken.
  [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null || true)" = dockerd ] \
    && ! grep -q '^[0-9]* (dockerd) Z' "/proc/$pid/stat" 2>/dev/null && echo "$pid"
  return 0
}

# Every process of this engine: dockerd, its containerd, the shims (all in the daemon cgroup) and the
# containers' processes (in cgroups under the same parent, --cgroup-parent).
engine_pids() { [ -d "$PIDS_CG" ] && find "$PIDS_CG" -name cgroup.procs -exec cat {} + 2>/dev/null; return 0; }

kill_all() {
  local i pids
  for ((i = 0; i < 100; i++)); do
    pids="$(engine_pids)"
    [ -z "$pids" ] && return 0
    # shellcheck disable=SC2086
    kill -9 $pids 2>/dev/null || true
    sleep 0.1
  done
  say "processes left after SIGKILL: $(engine_pids | tr '\n' ' ')"
  return 1
}

# What a reboot clears: mounts under the engine's roots (overlay rootfs, shm, tmpfs volumes, netns)
# and the exec-root (under /run on a real host). Deepest first.
clear_volatile() {
  local m
  while read -r m; do umount -l "$m" 2>/dev/null || true; done < <(
    awk -v d="$(realpath -m "$DATA")/" -v r="$(realpath -m "$RUN")/" '{ p = $5; if (index(p "/", d) == 1 || index(p "/", r) == 1) print p }' /proc/self/mountinfo | sort -r)
  rm -rf "$RUN/exec"
}

# A CA, a server certificate for 127.0.0.1 and a client certificate (docker's file names), made once.
make_certs() {
  local d="$DATA/tls"
  [ -f "$d/cert.pem" ] && return 0
  mkdir -p "$d"
  (
    cd "$d"
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=patchbay-engine-$name CA" -keyout ca-key.pem -out ca.pem
    openssl req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -keyout server-key.pem -out server.csr
    printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >server.ext
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 3650 -extfile server.ext -out server-cert.pem
    openssl req -newkey rsa:2048 -nodes -subj /CN=client -keyout key.pem -out client.csr
    printf 'extendedKeyUsage=clientAuth\n' >client.ext
    openssl x509 -req -in client.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 3650 -extfile client.ext -out cert.pem
    rm -f ./*.csr ./*.ext
  ) >/dev/null 2>&1 || { say "openssl failed making certificates in $d"; exit 1; }
}

tls_lines() { [ -n "${ENGINE_TLS_PORT:-}" ] && printf 'DOCKER_TLS_HOST=tcp://127.0.0.1:%s\nDOCKER_CERT_PATH=%s\n' "$ENGINE_TLS_PORT" "$DATA/tls"; return 0; }

start() {
  local pid
  pid="$(daemon_pid)"
  if [ -n "$pid" ] && answers; then
    if [ -z "${ENGINE_TLS_PORT:-}" ] || tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -- "-H tcp://127.0.0.1:$ENGINE_TLS_PORT "; then
      echo "DOCKER_HOST=$export_host"; tls_lines; return 0
    fi
    say "restarting it to listen on TLS port $ENGINE_TLS_PORT"; stop
  fi
  local tls=()
  if [ -n "${ENGINE_TLS_PORT:-}" ]; then
    make_certs
    tls=(-H "tcp://127.0.0.1:$ENGINE_TLS_PORT" --tlsverify --tlscacert "$DATA/tls/ca.pem" --tlscert "$DATA/tls/server-cert.pem" --tlskey "$DATA/tls/server-key.pem")
  fi
  [ "$(id -u)" = 0 ] || { say "needs root (it runs dockerd)"; exit 1; }
  command -v dockerd >/dev/null || { say "dockerd not installed (Debian: apt-get install docker.io)"; exit 1; }
  # A dockerd that died leaves its containerd, shims and mounts: start from a clean boot.
  kill_all; clear_volatile
  # dockerd refuses a pidfile whose pid exists, and a killed daemon's may (a zombie, or reused).
  rm -f "$PIDFILE"
  mkdir -p "$RUN/exec" "$DATA" "$PIDS_CG/daemon"
  # Its own key, so its engine ID differs from the main engine's as another host's would.
  local runtimes=""
  command -v runsc >/dev/null 2>&1 && runtimes="$(printf ', "runtimes": { "runsc": { "path": "%s", "runtimeArgs": ["--network=none"] } }' "$(command -v runsc)")"
  printf '{ "deprecated-key-path": "%s"%s }\n' "$DATA/key.json" "$runtimes" >"$RUN/daemon.json"
  say "starting dockerd (log: $LOG)"
  # The daemon joins its own pids cgroup before exec, so its containerd and shims are found there.
  setsid sh -c 'echo $$ >"$0/daemon/cgroup.procs" && exec "$@"' "$PIDS_CG" \
    dockerd --data-root "$DATA" --exec-root "$RUN/exec" --pidfile "$PIDFILE" -H "$export_host" \
    --config-file "$RUN/daemon.json" --cgroup-parent "/$CG" "${tls[@]}" \
    --bridge=none --iptables=false --ip6tables=false --ip-forward=false --ip-masq=false \
    >>"$LOG" 2>&1 </dev/null &
  local i
  for ((i = 0; i < 600; i++)); do
    answers && { echo "DOCKER_HOST=$export_host"; tls_lines; return 0; }
    sleep 0.1
  done
  say "did not answer within 60 s"; tail -20 "$LOG" >&2; exit 1
}

stop() {
  local pid i
  pid="$(daemon_pid)"
  if [ -n "$pid" ]; then
    kill -TERM "$pid"
    for ((i = 0; i < 600; i++)); do [ -d "/proc/$pid" ] || break; sleep 0.1; done
  fi
  kill_all
}

load_image() {
  local image="${3:-${PATCHBAY_IMAGE:-patchbay-sandbox:latest}}" want have
  want="$(docker image inspect --format '{{.Id}}' "$image")" # the main engine: read only
  have="$(engine image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)"
  if [ "$want" = "$have" ]; then say "$image already loaded ($want)"; return 0; fi
  say "loading $image ($want) from the main engine"
  docker save "$image" | engine load -q >/dev/null
}

case "$cmd" in
  start) start ;;
  load-image) answers || { say "not running"; exit 1; }; load_image "$@" ;;
  stop) stop ;;
  kill) kill_all; clear_volatile ;;
  status) if [ -n "$(daemon_pid)" ] && answers; then echo "running DOCKER_HOST=$export_host"; else echo "stopped"; fi ;;
  remove)
    kill_all; clear_volatile
    rm -rf "$RUN" "$DATA" "$LOG"
    for c in /sys/fs/cgroup/*/"$CG" "/sys/fs/cgroup/$CG"; do [ -d "$c" ] && find "$c" -depth -type d -exec rmdir {} + 2>/dev/null; done
    true ;;
  *) echo "usage: $0 start|load-image|stop|kill|status|remove NAME [IMAGE]" >&2; exit 2 ;;
esac
