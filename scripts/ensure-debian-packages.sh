#!/usr/bin/env bash
# Install the Debian packages loom's toolchain needs: clang, lld, llvm (llvm-objdump, llvm-nm)
# and qemu-user, whose qemu-hexagon must be QEMU 10 or newer to run Hexagon v68-v73 code
# (bookworm's QEMU 7.2 runs v66/v67 only). On bookworm, QEMU 10 comes from bookworm-backports:
# this script adds that suite to apt's sources, pinned at priority 100 so that nothing else is
# ever upgraded from it, and installs only qemu-user from it. When that fails (no network), QEMU
# 7.2 is kept, the v68+ tests are skipped, and the command that installs QEMU 10 is printed.
# Usage: ensure-debian-packages.sh  (idempotent: when everything is in place it only prints
# qemu-hexagon's version; needs root to install, else prints the commands)
set -euo pipefail

QEMU_NEEDED=10
BACKPORTS=bookworm-backports
SOURCES_FILE=/etc/apt/sources.list.d/loom-$BACKPORTS.sources
PIN_FILE=/etc/apt/preferences.d/loom-$BACKPORTS
SOURCES=(
    "Types: deb"
    "URIs: http://deb.debian.org/debian"
    "Suites: $BACKPORTS"
    "Components: main"
    "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg"
)
# backports have priority 100 by default; said explicitly so that no upgrade ever takes a
# package from there: only an install with `-t bookworm-backports` does
PIN=(
    "Package: *"
    "Pin: release n=$BACKPORTS"
    "Pin-Priority: 100"
)

# command -> Debian package that provides it
declare -A PROVIDER=(
    [clang]=clang
    [ld.lld]=lld
    [llvm-nm]=llvm
    [llvm-objdump]=llvm
    [qemu-hexagon]=qemu-user
    [qemu-aarch64]=qemu-user
)

qemu_major() { # qemu-hexagon's major version; 0 when there is none
    local v
    v=$(qemu-hexagon --version 2>/dev/null | sed -n '1s/.* version \([0-9]*\)\..*/\1/p')
    echo "${v:-0}"
}

missing=()
for cmd in "${!PROVIDER[@]}"; do
    command -v "$cmd" >/dev/null 2>&1 || missing+=("${PROVIDER[$cmd]}")
done
# bookworm with an old (or no) qemu-hexagon: QEMU 10 from backports. Other releases have
# their own qemu-user (trixie's is QEMU 10).
codename=$( (. /etc/os-release && echo "${VERSION_CODENAME:-}") 2>/dev/null || true)
backports=false
if [ "$codename" = bookworm ] && [ "$(qemu_major)" -lt $QEMU_NEEDED ]; then
    backports=true
    missing=("${missing[@]/qemu-user/}") # qemu-user comes from backports (or, failing that, below)
fi
packages=$(printf '%s\n' "${missing[@]}" | sed '/^$/d' | sort -u | tr '\n' ' ')
packages=${packages% }
if [ -z "$packages" ] && ! $backports; then
    # one line on every run: which emulator the Hexagon tests will use (present: not missing)
    echo "loom setup: $(qemu-hexagon --version | head -1)"
    exit 0
fi

wanted=${packages:+Debian packages $packages}
if $backports; then
    have=$(qemu-hexagon --version 2>/dev/null | sed -n '1s/.* version \([^ ]*\).*/\1/p' || true)
    wanted="${wanted:+$wanted and }QEMU $QEMU_NEEDED (qemu-user from $BACKPORTS; this qemu-hexagon \
is ${have:-missing})"
fi
install="apt-get install -y --no-install-recommends"
install_qemu="$install -t $BACKPORTS qemu-user"
if [ "$(id -u)" -ne 0 ]; then
    echo "loom setup: needs $wanted; run as root:"
    if $backports; then
        printf "  printf '%%s\\\\n'%s > %s\n" "$(printf " '%s'" "${SOURCES[@]}")" "$SOURCES_FILE"
        printf "  printf '%%s\\\\n'%s > %s\n" "$(printf " '%s'" "${PIN[@]}")" "$PIN_FILE"
    fi
    echo "  apt-get update"
    if [ -n "$packages" ]; then echo "  $install $packages"; fi
    if $backports; then echo "  $install_qemu"; fi
    echo "loom setup: (tests that need them are skipped until then)"
    exit 0
fi

export DEBIAN_FRONTEND=noninteractive
write_if_changed() { # file, lines...: write the lines unless the file holds exactly them
    local file=$1
    shift
    [ -f "$file" ] && [ "$(cat "$file")" = "$(printf '%s\n' "$@")" ] && return 0
    printf '%s\n' "$@" >"$file"
}
if $backports; then
    write_if_changed "$SOURCES_FILE" "${SOURCES[@]}"
    write_if_changed "$PIN_FILE" "${PIN[@]}"
fi
echo "loom setup: installing $wanted"
updated=true
apt-get update -qq || updated=false
if [ -n "$packages" ]; then
    # shellcheck disable=SC2086  # one word per package
    $install -qq $packages >/dev/null
fi
if $backports; then
    if ! $updated || ! $install_qemu -qq >/dev/null; then
        # QEMU 7.2 then: keep the one installed, or install bookworm's (which may fail too)
        command -v qemu-hexagon >/dev/null 2>&1 || $install -qq qemu-user >/dev/null || true
        echo "loom setup: could not install QEMU $QEMU_NEEDED from $BACKPORTS: Hexagon v68-v73" \
            "code is compile-only here and its tests are skipped. To install it, as root:"
        echo "  apt-get update && $install_qemu"
    fi
fi
if command -v qemu-hexagon >/dev/null 2>&1; then
    echo "loom setup: $(qemu-hexagon --version | head -1)"
else
    echo "loom setup: no qemu-hexagon: the Hexagon tests are skipped until it is installed"
fi
