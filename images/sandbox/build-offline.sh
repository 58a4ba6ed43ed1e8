#!/usr/bin/env bash
# Builds the sandbox image without any registry: debootstrap a minbase bookworm root filesystem
# with the packages of packages.txt, add user agent (uid 1000), then `docker import` it with the
# Dockerfile's USER / WORKDIR / ENV / CMD. Usage: build-offline.sh IMAGE_TAG RECIPE_HASH
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
tag="$1"; recipe="$2"
say() { echo "[image] $*" >&2; }

if ! command -v debootstrap >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing debootstrap"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null 2>&1 \
      || { apt-get update -qq >/dev/null 2>&1; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; }
  else
    say "debootstrap is missing: install it (Debian: sudo apt-get install debootstrap) or make debian:bookworm-slim pullable"; exit 1
  fi
fi
[ "$(id -u)" = 0 ] || { say "the offline build needs root (debootstrap); run: sudo npx patchbay image build"; exit 1; }

# The mirror apt already uses on this machine.
mirror="$(grep -hoE '^(URIs:|deb) +https?://[^ ]+' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null \
  | grep -v security | head -1 | awk '{print $2}' || true)"
mirror="${mirror:-http://deb.debian.org/debian}"

work="$(mktemp -d /var/tmp/patchbay-rootfs.XXXXXX)"
trap 'rm -rf "$work"' EXIT
pkgs="$(grep -v '^#' "$here/packages.txt" | xargs | tr ' ' ',')"
say "debootstrap bookworm from $mirror (about 80 s)"
debootstrap --variant=minbase --include="$pkgs" bookworm "$work/root" "$mirror" >"$work/debootstrap.log" 2>&1 \
  || { tail -30 "$work/debootstrap.log" >&2; exit 1; }
chroot "$work/root" useradd --uid 1000 --create-home --shell /bin/bash agent
mkdir -p "$work/root/workspace"; chroot "$work/root" chown agent:agent /workspace
rm -rf "$work/root/var/lib/apt/lists/"* "$work/root/var/cache/apt/"*.bin "$work/root/var/cache/apt/archives/"*.deb

changes=()
while IFS= read -r line; do
  case "$line" in ENV\ *|USER\ *|WORKDIR\ *|CMD\ *) changes+=(--change "$line");; esac
done <"$here/Dockerfile"
changes+=(--change "LABEL patchbay.recipe=$recipe")
say "docker import $tag"
tar -C "$work/root" -c . | docker import "${changes[@]}" - "$tag" >/dev/null
say "built $tag"
