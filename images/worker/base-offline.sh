#!/usr/bin/env bash
# The shared root filesystem of the offline worker and Redis images: a minbase Debian bookworm
# (debootstrap, from the mirror apt already uses here) with the packages of worker/packages.txt and
# redis/packages.txt, `docker import`ed as TAG. Both images are then built FROM it with no registry.
# Usage: base-offline.sh TAG RECIPE_HASH   (run by scripts/compose-images.sh; needs root)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
tag="$1"; recipe="$2"
say() { echo "[compose-images] $*" >&2; }

if ! command -v debootstrap >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing debootstrap"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null 2>&1 \
      || { apt-get update -qq >/dev/null 2>&1; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; }
  else
    say "debootstrap is missing: install it (Debian: sudo apt-get install debootstrap) or make the registry reachable"; exit 1
  fi
fi
[ "$(id -u)" = 0 ] || { say "the offline build needs root (debootstrap)"; exit 1; }

mirror="$(grep -hoE '^(URIs:|deb) +https?://[^ ]+' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null \
  | grep -v security | head -1 | awk '{print $2}' || true)"
mirror="${mirror:-http://deb.debian.org/debian}"

work="$(mktemp -d /var/tmp/patchbay-compose-rootfs.XXXXXX)"
trap 'rm -rf "$work"' EXIT
pkgs="$(cat "$here/packages.txt" "$here/../redis/packages.txt" | grep -v '^#' | xargs | tr ' ' ',')"
say "debootstrap bookworm with $pkgs from $mirror (a minute or two)"
debootstrap --variant=minbase --include="$pkgs" bookworm "$work/root" "$mirror" >"$work/debootstrap.log" 2>&1 \
  || { tail -30 "$work/debootstrap.log" >&2; exit 1; }
# Redis's data directory, owned by the redis user the package created (a named volume copies it).
mkdir -p "$work/root/data"; chroot "$work/root" chown redis:redis /data
rm -rf "$work/root/var/lib/apt/lists/"* "$work/root/var/cache/apt/"*.bin "$work/root/var/cache/apt/archives/"*.deb
say "docker import $tag"
tar -C "$work/root" -c . | docker import --change "LABEL patchbay.recipe=$recipe" - "$tag" >/dev/null
