#!/usr/bin/env bash
# Builds the sandbox image without any registry: debootstrap a minbase bookworm root filesystem
# with the packages of packages.txt, add user agent (uid 1000), then `docker import` it with the
# Dockerfile's USER / WORKDIR / ENV / CMD. Usage: build-offline.sh IMAGE_TAG RECIPE_HASH
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
say "docker import $tag"
tar -C "$work/root" -c . | docker import "${changes[@]}" - "$tag" >/dev/null
say "built $tag"
