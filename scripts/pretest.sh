#!/usr/bin/env bash
# Runs before `npm test`: the services (Docker engine, Redis, and a rootless Podman engine), node
# modules, dist/, the tools the tests call (docker-compose v1, tmux, Chromium from Debian's package),
# the sandbox image (in both engines) and the compose images.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/services.sh
[ -x node_modules/.bin/vitest ] || npm ci --no-audit --no-fund
# dist/: what bin/patchbay.js runs and what the package tests pack (`npm ci` builds it too, via prepare).
npm run build

# tool COMMAND PACKAGE WHY: installs PACKAGE with apt when COMMAND is missing (as root on Debian);
# elsewhere says which tests will fail without it.
tool() {
  command -v "$1" >/dev/null 2>&1 && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "[pretest] apt-get install $2 ($3)" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null 2>&1 \
      || { apt-get update -qq >/dev/null 2>&1; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null; }
  else
    echo "[pretest] $1 is missing, and its tests will fail: $3 (Debian: sudo apt-get install $2)" >&2
  fi
}
tool docker-compose docker-compose "the compose test validates docker-compose.yml"
tool tmux tmux "batch wait's progress bar is checked in a real terminal"
tool chromium chromium "the browser tests drive it headless"
tool openssl openssl "the second-host test makes TLS certificates for its second engine"
tool /usr/sbin/sshd openssh-server "the campaign tests push over SSH"
node bin/patchbay.js image build
# The engine matrix's second engine (vitest.config.ts): a rootless Podman, the sandbox image loaded into it.
bash scripts/services.sh --engine podman >/dev/null
# The compose test's images (worker, Redis): offline here, about 2 minutes the first time, then cached.
bash scripts/compose-images.sh
