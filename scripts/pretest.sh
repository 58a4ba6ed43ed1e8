#!/usr/bin/env bash
# Runs before `npm test`: the services (Docker engine, Redis), node modules, dist/, the tools the tests
# call (docker-compose v1 to validate docker-compose.yml), and the sandbox image.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/services.sh
[ -x node_modules/.bin/vitest ] || npm ci --no-audit --no-fund
# dist/: what bin/patchbay.js runs and what the package tests pack (`npm ci` builds it too, via prepare).
npm run build
if ! command -v docker-compose >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "[pretest] apt-get install docker-compose (validates docker-compose.yml)" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-compose >/dev/null 2>&1 \
      || { apt-get update -qq >/dev/null 2>&1; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-compose >/dev/null; }
  else
    echo "[pretest] docker-compose is missing: the compose test will fail (Debian: sudo apt-get install docker-compose)" >&2
  fi
fi
if ! command -v tmux >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "[pretest] apt-get install tmux (batch wait's progress bar is checked in a real terminal)" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tmux >/dev/null 2>&1 \
      || { apt-get update -qq >/dev/null 2>&1; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tmux >/dev/null; }
  else
    echo "[pretest] tmux is missing: the batch TTY test will fail (Debian: sudo apt-get install tmux)" >&2
  fi
fi
# Chromium (Debian's package, never a downloaded build) for the browser tests (test/web-*.test.ts, bench web).
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "[pretest] apt-get install chromium (the browser tests drive it headless)" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null 2>&1 \
      || { apt-get update -qq >/dev/null 2>&1; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }
  else
    echo "[pretest] chromium is missing: the browser tests will fail (Debian: sudo apt-get install chromium)" >&2
  fi
fi
node bin/patchbay.js image build
