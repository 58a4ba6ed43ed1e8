#!/usr/bin/env bash
# `npm run compose:up`: the docker-compose deployment on this machine. Starts the engine if needed
# (scripts/services.sh), compiles dist/, builds the sandbox image and the compose images (offline
# when the registry is unreachable; cached by recipe), then `up -d --scale worker=N`.
# Env: PATCHBAY_WORKERS (default 3); the compose file's knobs (ANTHROPIC_API_KEY, PATCHBAY_REPOS, ...);
# COMPOSE_PROJECT_NAME (default: the directory's name). Extra arguments go to `up`.
# Redis's password: PATCHBAY_REDIS_PASSWORD from the environment or .env, generated into .env if neither.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { echo "[compose-up] $*" >&2; }
compose="docker-compose"; command -v docker-compose >/dev/null 2>&1 || compose="docker compose"
$compose version >/dev/null 2>&1 || { say "neither docker-compose nor docker compose is installed (Debian: apt-get install docker-compose)"; exit 1; }

# Redis's password (docker-compose.yml requires it): compose reads .env beside the compose file.
# Written once, random, mode 600, never printed; one set in the environment wins and is left alone.
if [ -z "${PATCHBAY_REDIS_PASSWORD:-}" ] && ! grep -q '^PATCHBAY_REDIS_PASSWORD=.' .env 2>/dev/null; then
  (umask 077 && touch .env)
  printf 'PATCHBAY_REDIS_PASSWORD=%s\n' "$(node -e 'process.stdout.write(require("node:crypto").randomBytes(24).toString("hex"))')" >>.env
  chmod 600 .env
  say "wrote a random Redis password to $PWD/.env (PATCHBAY_REDIS_PASSWORD, mode 600)"
fi

bash scripts/services.sh
npm run build --silent
node bin/patchbay.js image build
bash scripts/compose-images.sh
[ -n "${ANTHROPIC_API_KEY:-}" ] || say "ANTHROPIC_API_KEY is not set: workers start, but jobs fail until it is (set it, then run this again)"
export PATCHBAY_REPOS="${PATCHBAY_REPOS:-$PWD/repos}"
mkdir -p "$PATCHBAY_REPOS"
$compose up -d --scale "worker=${PATCHBAY_WORKERS:-3}" "$@"
$compose ps
say "up. Enqueue with: $compose exec worker node bin/patchbay.js run --repo $PATCHBAY_REPOS/<name> --task '...'"
