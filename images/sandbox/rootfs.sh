# Sourced by the offline image builds (images/sandbox/build-offline.sh, images/worker/base-offline.sh):
# a minbase Debian bookworm root filesystem with the given packages, debootstrapped from the mirror
# apt already uses on this machine. The caller defines say(). Needs root.
# Usage: make_rootfs DIR PACKAGES(comma-separated) MISSING_HINT ROOT_HINT
make_rootfs() {
  local root="$1" pkgs="$2" missing_hint="$3" root_hint="$4" mirror
  if ! command -v debootstrap >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      say "installing debootstrap"
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null 2>&1 \
        || { apt-get update -qq >/dev/null 2>&1; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; }
    else
      say "debootstrap is missing: install it (Debian: sudo apt-get install debootstrap) or $missing_hint"; exit 1
    fi
  fi
  [ "$(id -u)" = 0 ] || { say "the offline build needs root (debootstrap)$root_hint"; exit 1; }
  mirror="$(grep -hoE '^(URIs:|deb) +https?://[^ ]+' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null \
    | grep -v security | head -1 | awk '{print $2}' || true)"
  mirror="${mirror:-http://deb.debian.org/debian}"
  say "debootstrap bookworm with $pkgs from $mirror (a minute or two)"
  debootstrap --variant=minbase --include="$pkgs" bookworm "$root" "$mirror" >"$root.log" 2>&1 \
    || { tail -30 "$root.log" >&2; exit 1; }
}

# What apt leaves that an image does not need.
clean_rootfs() {
  rm -rf "$1/var/lib/apt/lists/"* "$1/var/cache/apt/"*.bin "$1/var/cache/apt/archives/"*.deb
}
