#!/usr/bin/env bash
# The images docker-compose.yml runs (patchbay-worker:latest, patchbay-redis:latest), built on the
# engine DOCKER_HOST names. Where the registry answers: `compose build` from the Dockerfiles. Where
# it does not (node:20-bookworm-slim / debian:bookworm-slim cannot be pulled): offline, FROM a
# debootstrapped bookworm base (images/worker/base-offline.sh) shared by both, with this machine's
# Node binary and production node_modules (npm ci --omit=dev) for the worker.
# Each image carries the hash of its recipe (label patchbay.recipe); an image whose hash matches is
# kept, so a second run takes seconds. Usage: compose-images.sh [--force] [--offline]
set -euo pipefail
cd "$(dirname "$0")/.."
say() { echo "[compose-images] $*" >&2; }

force=0; offline="${PATCHBAY_OFFLINE:-}"
for a in "$@"; do
  case "$a" in --force) force=1;; --offline) offline=1;; *) say "unknown argument $a"; exit 2;; esac
done
WORKER_TAG=patchbay-worker:latest
REDIS_TAG=patchbay-redis:latest
STATE="${PATCHBAY_STATE_DIR:-/var/tmp/patchbay}/compose"
mkdir -p "$STATE"
# One build at a time per machine (pretest and a test may both ask).
exec 9>"$STATE/lock"; flock 9

[ -f dist/index.js ] || { say "dist/ is missing: run npm run build first"; exit 1; }
NODE_BIN="$(command -v node)"

hash_of() { # files and directories -> 16 hex digits of their names and contents
  find "$@" -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16
}
label_of() { docker image inspect -f '{{index .Config.Labels "patchbay.recipe"}}' "$1" 2>/dev/null || true; }

base_hash="$(hash_of images/worker/base-offline.sh images/sandbox/rootfs.sh images/worker/packages.txt images/redis/packages.txt)"
worker_hash="$( { echo "$base_hash"; hash_of images/worker/Dockerfile.offline package.json package-lock.json bin dist images/sandbox; \
  "$NODE_BIN" --version; stat -c '%s %Y' "$NODE_BIN"; } | sha256sum | cut -c1-16)"
redis_hash="$( { echo "$base_hash"; hash_of images/redis/Dockerfile.offline; } | sha256sum | cut -c1-16)"

if [ $force = 0 ] && [ "$(label_of $WORKER_TAG)" = "$worker_hash" ] && [ "$(label_of $REDIS_TAG)" = "$redis_hash" ]; then
  say "$WORKER_TAG and $REDIS_TAG are up to date (recipes $worker_hash, $redis_hash)"; exit 0
fi

pullable() { timeout 60 docker pull -q "$1" >/dev/null 2>&1; }
if [ -z "$offline" ] && pullable node:20-bookworm-slim && pullable debian:bookworm-slim; then
  compose="docker-compose"; command -v docker-compose >/dev/null 2>&1 || compose="docker compose"
  say "the registry answers: $compose build"
  $compose build worker redis
  exit 0
fi

export DOCKER_BUILDKIT=0 # the classic builder: no buildx needed, FROM a local image works offline
build() { # TAG ARGS...: quiet unless it fails (the classic builder's deprecation notice included)
  local tag="$1" old; shift
  old="$(docker image inspect -f '{{.Id}}' "$tag" 2>/dev/null || true)"
  docker build -q --network none -t "$tag" "$@" >"$STATE/build.log" 2>&1 || { cat "$STATE/build.log" >&2; return 1; }
  # The image this one replaces, unless a container still uses it (its layers are mostly shared).
  if [ -n "$old" ] && [ "$old" != "$(docker image inspect -f '{{.Id}}' "$tag")" ]; then docker rmi "$old" >/dev/null 2>&1 || true; fi
}
base_tag="patchbay-compose-base:$base_hash"
if [ -z "$(docker image ls -q "$base_tag")" ]; then
  say "the registry is unreachable: building the base $base_tag offline"
  bash images/worker/base-offline.sh "$base_tag" "$base_hash"
fi

if [ $force = 1 ] || [ "$(label_of $REDIS_TAG)" != "$redis_hash" ]; then
  say "building $REDIS_TAG (recipe $redis_hash)"
  build "$REDIS_TAG" -f images/redis/Dockerfile.offline --build-arg "BASE=$base_tag" \
    --label "patchbay.recipe=$redis_hash" images/redis
fi

if [ $force = 1 ] || [ "$(label_of $WORKER_TAG)" != "$worker_hash" ]; then
  # Production dependencies, cached by the lockfile's hash (the npm registry is reachable here).
  lock_hash="$(hash_of package.json package-lock.json)"
  modules="$STATE/modules-$lock_hash"
  if [ ! -d "$modules/node_modules" ]; then
    say "npm ci --omit=dev (production node_modules)"
    tmp="$(mktemp -d "$STATE/modules.XXXXXX")"
    cp package.json package-lock.json "$tmp/"
    (cd "$tmp" && npm ci --omit=dev --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null)
    rm -rf "$modules"; mv "$tmp" "$modules"
  fi
  ctx="$STATE/worker-context"
  rm -rf "$ctx"; mkdir -p "$ctx/app/images"
  cp "$NODE_BIN" "$ctx/node"
  cp package.json package-lock.json "$ctx/app/"
  cp -al "$modules/node_modules" "$ctx/app/node_modules" 2>/dev/null || cp -a "$modules/node_modules" "$ctx/app/node_modules"
  cp -a bin dist "$ctx/app/"
  cp -a images/sandbox "$ctx/app/images/sandbox"
  say "building $WORKER_TAG (recipe $worker_hash)"
  build "$WORKER_TAG" -f images/worker/Dockerfile.offline --build-arg "BASE=$base_tag" \
    --label "patchbay.recipe=$worker_hash" "$ctx"
  rm -rf "$ctx"
fi
say "built $WORKER_TAG ($worker_hash) and $REDIS_TAG ($redis_hash) offline"
