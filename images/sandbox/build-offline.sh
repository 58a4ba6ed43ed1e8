#!/usr/bin/env bash
# Builds the sandbox image without any registry: debootstrap a minbase bookworm root filesystem
# with the packages of packages.txt, add user agent (uid 1000), then `docker import` it with the
# Dockerfile's USER / WORKDIR / ENV / CMD (where there is no docker CLI, a host with only Podman, the
# same import through the engine's API on DOCKER_HOST's socket). Usage: build-offline.sh IMAGE_TAG RECIPE_HASH
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
tag="$1"; recipe="$2"
say() { echo "[image] $*" >&2; }

source "$here/rootfs.sh"
work="$(mktemp -d /var/tmp/patchbay-rootfs.XXXXXX)"
trap 'rm -rf "$work"' EXIT
make_rootfs "$work/root" "$(grep -v '^#' "$here/packages.txt" | xargs | tr ' ' ',')" \
  "make debian:bookworm-slim pullable" "; run: sudo npx patchbay image build"
chroot "$work/root" useradd --uid 1000 --create-home --shell /bin/bash agent
mkdir -p "$work/root/workspace"; chroot "$work/root" chown agent:agent /workspace
clean_rootfs "$work/root"

changes=()
while IFS= read -r line; do
  case "$line" in ENV\ *|USER\ *|WORKDIR\ *|CMD\ *) changes+=(--change "$line");; esac
done <"$here/Dockerfile"
changes+=(--change "LABEL patchbay.recipe=$recipe")
say "import $tag"
if command -v docker >/dev/null 2>&1; then
  tar -C "$work/root" -c . | docker import "${changes[@]}" - "$tag" >/dev/null
else
  # No docker CLI (a host with only Podman): the same import through the engine's API, on its socket.
  sock="${DOCKER_HOST:-unix:///var/run/docker.sock}"
  [[ "$sock" == unix://* ]] || { say "no docker CLI, and DOCKER_HOST=$sock is not a unix socket: install the docker CLI"; exit 1; }
  enc() { node -e 'process.stdout.write(encodeURIComponent(process.argv[1]))' "$1"; }
  # The whole name:tag as repo, as the docker CLI sends it (Podman 4.3 ignores a separate tag).
  query="fromSrc=-&repo=$(enc "$tag")"
  for ((i = 1; i < ${#changes[@]}; i += 2)); do query+="&changes=$(enc "${changes[$i]}")"; done
  tar -C "$work/root" -c . | curl -sf --unix-socket "${sock#unix://}" -X POST -H 'Content-Type: application/x-tar' -T - "http://engine/images/create?$query" >/dev/null \
    || { say "the engine refused the import"; exit 1; }
fi
say "built $tag"
