#!/usr/bin/env bash
# npm run demo: everything from a bare machine to a patch. Installs and starts Docker and Redis
# (scripts/services.sh), installs node modules, builds the sandbox image, starts a worker and runs
# a fix job on examples/clamp on the default queue, then stops the worker. With ANTHROPIC_API_KEY
# set it uses Claude; otherwise the scripted model (patchbay worker --scripted
# examples/scripted/clamp.yaml: no API, no key, nothing priced), and says so.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/services.sh
[ -d node_modules/bullmq ] || npm ci --no-audit --no-fund
node bin/patchbay.js image build
exec node scripts/demo.mjs
