#!/usr/bin/env bash
# Install the Debian packages loom's toolchain needs, only when a command is missing.
# Usage: ensure-debian-packages.sh  (idempotent; needs root to install, else prints the command)
set -euo pipefail

# command -> Debian package that provides it
declare -A PROVIDER=(
    [clang]=clang
    [ld.lld]=lld
    [qemu-hexagon]=qemu-user
    [qemu-aarch64]=qemu-user
)

missing=()
for cmd in "${!PROVIDER[@]}"; do
    command -v "$cmd" >/dev/null 2>&1 || missing+=("${PROVIDER[$cmd]}")
done
[ ${#missing[@]} -eq 0 ] && exit 0

packages=$(printf '%s\n' "${missing[@]}" | sort -u | tr '\n' ' ')
install="apt-get update && apt-get install -y --no-install-recommends $packages"
if [ "$(id -u)" -eq 0 ]; then
    echo "loom setup: installing Debian packages: $packages"
    export DEBIAN_FRONTEND=noninteractive
    sh -c "$install"
else
    echo "loom setup: missing Debian packages: $packages"
    echo "loom setup: run as root:  $install"
    echo "loom setup: (tests that need them are skipped until then)"
fi
