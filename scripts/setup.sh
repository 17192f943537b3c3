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

# Libraries are Debian packages; tools are needed as commands, from whatever
# source (Node.js and npm, for instance, often come from elsewhere, and
# Debian's npm package then conflicts with them).
# Open MPI and jq: the test preset builds with MPI (-DASSAY_MPI=ON) and the
# mpi label runs mpirun; the release build needs neither.
libraries=(libgsl-dev libcjson-dev libopenblas-dev libcmocka-dev libcurl4-openssl-dev
           libopenmpi-dev)
tools=("cc:build-essential" "make:build-essential" "cmake:cmake" "ninja:ninja-build"
       "pkg-config:pkg-config" "git:git" "mpirun:openmpi-bin" "jq:jq")
for arg in "$@"; do
    case "$arg" in
        --audit) tools+=("node:nodejs" "npm:npm" "g++:g++" "jq:jq") ;;
        --browser) tools+=("chromium:chromium" "node:nodejs" "npm:npm") ;;
        --fuzz) tools+=("clang:clang"); libraries+=(libclang-rt-dev) ;;
        --valgrind) tools+=("valgrind:valgrind") ;;
        *) echo "setup: unknown option $arg (known: --audit --browser --fuzz --valgrind)" >&2; exit 2 ;;
    esac
done

missing=()
add_missing() {
    for m in "${missing[@]}"; do
        [ "$m" = "$1" ] && return
    done
    missing+=("$1")
}
for p in "${libraries[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        add_missing "$p"
    fi
done
for t in "${tools[@]}"; do
    command -v "${t%%:*}" >/dev/null 2>&1 || add_missing "${t#*:}"
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
