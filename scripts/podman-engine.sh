#!/usr/bin/env bash
# Sets up a rootless Podman engine for patchbay's workers on Debian, as root, idempotently, and
# starts its API service (run by `scripts/services.sh --engine podman`; quick when all is up).
#
# What it makes: a dedicated unprivileged user (default patchbay-engine) with its own subordinate
# uid/gid range (a container's root is that user on the host, its uid 1000 a subordinate id with no
# rights here); Podman with runc, the native overlay driver and catatonit as the init; on a cgroup v1
# host, cgroup hierarchies (memory, pids, cpu: patchbay-rootless-UID in each) delegated to the user and patchbay's runtime wrapper
# (scripts/podman/patchbay-runc) as its default runtime, since rootless Podman itself drops every
# limit there; `podman system service` on /run/user/UID/podman/podman.sock; and the sandbox image,
# loaded from the Docker engine when that has it and Podman has not the same one.
#
# Arguments: none. Environment: PATCHBAY_PODMAN_USER (default patchbay-engine), PATCHBAY_SUBIDS
# (the subordinate range's first id, default 200000; 65536 ids), PATCHBAY_IMAGE (default
# patchbay-sandbox:latest), PATCHBAY_STATE_DIR (logs and pid file; default /var/tmp/patchbay).
# Prints: DOCKER_HOST=unix:///run/user/UID/podman/podman.sock on stdout (also written to
# $PATCHBAY_STATE_DIR/podman.env); progress on stderr.
# Exit status: 0 when the service answers; 1 when a step failed (said why); 2 when not root on Debian.
set -euo pipefail

USER_NAME="${PATCHBAY_PODMAN_USER:-patchbay-engine}"
SUBIDS="${PATCHBAY_SUBIDS:-200000}"
IMAGE="${PATCHBAY_IMAGE:-patchbay-sandbox:latest}"
STATE_DIR="${PATCHBAY_STATE_DIR:-/var/tmp/patchbay}"
HERE="$(cd "$(dirname "$0")" && pwd)"
WRAPPER=/usr/local/libexec/patchbay/patchbay-runc

say() { echo "[podman] $*" >&2; }
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  say "needs root on Debian (apt-get); see docs/rootless.md for the steps by hand"; exit 2
fi
mkdir -p "$STATE_DIR"

need=()
for c in podman runc newuidmap catatonit; do command -v "$c" >/dev/null 2>&1 || need+=("$c"); done
if [ ${#need[@]} -gt 0 ]; then
  say "apt-get install podman runc uidmap catatonit (missing: ${need[*]})"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman runc uidmap catatonit >>"$STATE_DIR/apt.log" 2>&1 \
    || { apt-get update -qq >>"$STATE_DIR/apt.log" 2>&1; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman runc uidmap catatonit >>"$STATE_DIR/apt.log" 2>&1; } \
    || { say "apt-get install failed; see $STATE_DIR/apt.log"; exit 1; }
fi

if ! id "$USER_NAME" >/dev/null 2>&1; then
  say "adding the system user $USER_NAME"
  useradd --system --create-home --home-dir "/var/lib/$USER_NAME" --shell /usr/sbin/nologin "$USER_NAME"
fi
U="$(id -u "$USER_NAME")"; G="$(id -g "$USER_NAME")"; HOME_DIR="$(getent passwd "$USER_NAME" | cut -d: -f6)"
RANGE="$SUBIDS-$((SUBIDS + 65535))"
if ! grep -q "^$USER_NAME:" /etc/subuid; then say "giving $USER_NAME the subordinate uids $RANGE"; usermod --add-subuids "$RANGE" "$USER_NAME"; fi
if ! grep -q "^$USER_NAME:" /etc/subgid; then say "giving $USER_NAME the subordinate gids $RANGE"; usermod --add-subgids "$RANGE" "$USER_NAME"; fi
RUN_DIR="/run/user/$U"
# Whatever is inside the user's own directories is written by the user, never by root: a symlink
# the user (or an escape as the user) planted there must not make root write or chown elsewhere.
AS_USER=(setpriv --reuid="$U" --regid="$G" --init-groups env -i -C / HOME="$HOME_DIR" XDG_RUNTIME_DIR="$RUN_DIR" PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin)
as_user() { "${AS_USER[@]}" "$@"; }
[ -d "$RUN_DIR" ] && [ ! -L "$RUN_DIR" ] || install -d -o "$U" -g "$G" -m 0700 "$RUN_DIR" # /run/user is root's
as_user mkdir -p "$RUN_DIR/podman"

# The limits: cgroup v2 with delegation is Podman's own business (systemd's Delegate=); on v1 (or
# hybrid) the wrapper applies them in hierarchies made the engine user's.
RUNTIME_CONF=""
if [ "$(stat -fc %T /sys/fs/cgroup)" != cgroup2fs ]; then
  for c in memory pids cpu; do
    d="/sys/fs/cgroup/$c/patchbay-rootless-$U" # the wrapper's name for it (by uid)
    [ -d "/sys/fs/cgroup/$c" ] || { say "no cgroup v1 $c hierarchy at /sys/fs/cgroup/$c: limits cannot be enforced"; exit 1; }
    mkdir -p "$d"
    # The directory and its own files (cgroupfs has no symlinks); not the containers' below it,
    # which come and go meanwhile.
    chown "$U:$G" "$d"
    find "$d" -maxdepth 1 -type f -exec chown "$U:$G" {} +
  done
  install -D -o root -g root -m 0755 "$HERE/podman/patchbay-runc" "$WRAPPER"
  RUNTIME_CONF=$'runtime = "patchbay-runc"\n[engine.runtimes]\npatchbay-runc = ["'"$WRAPPER"$'"]'
  MANAGER=cgroupfs # no systemd user session is assumed
else
  # On v2 the limits are Podman's own, through systemd's delegation (cgroupfs would drop them).
  say "cgroup v2: needs a systemd user session for $USER_NAME (loginctl enable-linger) with memory, pids and cpu delegated; patchbay's worker refuses the engine otherwise"
  MANAGER=systemd
fi

CONF="$HOME_DIR/.config/containers"
as_user mkdir -p "$CONF"
printf '[storage]\ndriver = "overlay"\n' | as_user tee "$CONF/storage.conf" >/dev/null
# file events: no journald assumed. exit_command_delay: each exec's conmon (~1.5 MB) stays this long
# after its process ended, for the API to fetch the exit code; Podman's 300 s kept ~700 of them
# (1 GB) alive under the bench's jobs. patchbay asks for the code as soon as the stream ends.
printf '[containers]\ninit_path = "%s"\n[engine]\ncgroup_manager = "%s"\nevents_logger = "file"\nexit_command_delay = 10\n%s\n' "$(command -v catatonit)" "$MANAGER" "$RUNTIME_CONF" >"$STATE_DIR/podman.conf.new"
as_user tee "$CONF/containers.conf" <"$STATE_DIR/podman.conf.new" >/dev/null

SOCK="$RUN_DIR/podman/podman.sock"
answers() { curl -sf --max-time 2 --unix-socket "$SOCK" http://podman/_ping >/dev/null 2>&1; }
pidfile="$STATE_DIR/podman.pid"
# The service this script started, if it still runs: the pid's owner and command checked (a pid is reused).
ours() { [ -f "$pidfile" ] && local p && p="$(cat "$pidfile")" && [ "$(stat -c %u "/proc/$p" 2>/dev/null)" = "$U" ] && [ "$(cat "/proc/$p/comm" 2>/dev/null)" = podman ]; }
# A service this script started with another config is restarted for the new one.
if answers && ours && ! cmp -s "$STATE_DIR/podman.conf.new" "$STATE_DIR/podman.conf"; then
  say "restarting the service for its new config"
  p="$(cat "$pidfile")"; kill "$p"
  for _ in $(seq 1 100); do [ -d "/proc/$p" ] || break; sleep 0.1; done
fi
# start_service: starts it in the background; 0 once it answers, 1 when it did not within 30 s or
# its process ended first (then its log says why).
start_service() {
  as_user rm -f "$SOCK"
  # setsid: the service must outlive this script and the npm process that ran it. (Not through
  # as_user: a function in the background is a subshell, and $! would be its pid.)
  "${AS_USER[@]}" setsid nohup podman system service --time=0 "unix://$SOCK" >"$STATE_DIR/podman.log" 2>&1 </dev/null &
  local p=$!
  echo $p >"$pidfile"
  # (its first start makes its storage: ~2 s here)
  for _ in $(seq 1 300); do answers && return 0; [ -d "/proc/$p" ] || break; sleep 0.1; done
  answers
}
if ! answers; then
  say "starting podman system service as $USER_NAME (log: $STATE_DIR/podman.log)"
  if ! start_service; then
    # The user's processes were killed without Podman's knowing (a session's end, say): its pause
    # process is gone but still recorded, and every podman command fails until it is reset.
    if grep -q 'podman system migrate' "$STATE_DIR/podman.log"; then
      say "resetting the user's stale pause process (podman system migrate), then starting again"
      as_user podman system migrate >>"$STATE_DIR/podman.log" 2>&1 || true
      start_service || { say "the service did not answer within 30 s"; tail -20 "$STATE_DIR/podman.log" >&2; exit 1; }
    else
      say "the service did not answer within 30 s"; tail -20 "$STATE_DIR/podman.log" >&2; exit 1
    fi
  fi
fi
# Recorded once a service runs with it (one started elsewhere is left alone, and said so).
if ours; then mv "$STATE_DIR/podman.conf.new" "$STATE_DIR/podman.conf"; else say "a service this script did not start answers on $SOCK: restart it for a new config"; fi

# The sandbox image: the Docker engine's, when it has one Podman lacks (same id after the load).
if docker_id="$(docker image inspect -f '{{.Id}}' "$IMAGE" 2>/dev/null)"; then
  podman_id="sha256:$(as_user podman image inspect -f '{{.Id}}' "$IMAGE" 2>/dev/null || true)"
  if [ "$docker_id" != "$podman_id" ]; then
    say "loading $IMAGE from the Docker engine"
    docker save "$IMAGE" | as_user podman load -q >/dev/null
  fi
fi

echo "DOCKER_HOST=unix://$SOCK" | tee "$STATE_DIR/podman.env"
