#!/usr/bin/env bash
# Installs what assay needs to build and test, from Debian's packages, if it
# is missing. Safe to run again: it installs nothing that is already there.
#
#   scripts/setup.sh           build and test dependencies
#   scripts/setup.sh --audit   also what the llama.cpp audit needs (npm, git, g++)
#   scripts/setup.sh --browser also Chromium, for the HTML report check
#
# As root it runs apt-get itself; otherwise it uses sudo when available, and
# else prints the one command to run and exits with status 1.
set -euo pipefail

packages=(build-essential cmake ninja-build pkg-config git
          libgsl-dev libcjson-dev libopenblas-dev libcmocka-dev libcurl4-openssl-dev)
for arg in "$@"; do
    case "$arg" in
        --audit) packages+=(nodejs npm g++) ;;
        --browser) packages+=(chromium) ;;
        --fuzz) packages+=(clang libclang-rt-dev) ;;
        --valgrind) packages+=(valgrind) ;;
        *) echo "setup: unknown option $arg (known: --audit --browser --fuzz --valgrind)" >&2; exit 2 ;;
    esac
done

missing=()
for p in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$p")
    fi
done
if [ ${#missing[@]} -eq 0 ]; then
    echo "setup: all dependencies are installed" >&2
    exit 0
fi

echo "setup: installing from Debian's packages: ${missing[*]}" >&2
if [ "$(id -u)" -eq 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
elif command -v sudo >/dev/null 2>&1; then
    sudo apt-get update -qq
    sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
    echo "setup: not root and no sudo; as root, run:" >&2
    echo "  apt-get install -y ${missing[*]}" >&2
    exit 1
fi
