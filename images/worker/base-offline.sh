#!/usr/bin/env bash
# The shared root filesystem of the offline worker and Redis images: a minbase Debian bookworm
# (debootstrap, from the mirror apt already uses here) with the packages of worker/packages.txt and
# redis/packages.txt, `docker import`ed as TAG. Both images are then built FROM it with no registry.
# Usage: base-offline.sh TAG RECIPE_HASH   (run by scripts/compose-images.sh; needs root)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
tag="$1"; recipe="$2"
say() { echo "[compose-images] $*" >&2; }

source "$here/../sandbox/rootfs.sh"
work="$(mktemp -d /var/tmp/patchbay-compose-rootfs.XXXXXX)"
trap 'rm -rf "$work"' EXIT
make_rootfs "$work/root" "$(cat "$here/packages.txt" "$here/../redis/packages.txt" | grep -v '^#' | xargs | tr ' ' ',')" \
  "make the registry reachable" ""
# Redis's data directory, owned by the redis user the package created (a named volume copies it).
mkdir -p "$work/root/data"; chroot "$work/root" chown redis:redis /data
clean_rootfs "$work/root"
say "docker import $tag"
tar -C "$work/root" -c . | docker import --change "LABEL patchbay.recipe=$recipe" - "$tag" >/dev/null
