#!/usr/bin/env bash
# Builds llama.cpp's llama-server from the source that the npm package
# node-llama-cpp ships (a git bundle), into a cache folder outside the
# checkout, and prints the path of the binary on its last line.
#
#   build-llama-server.sh              build (or reuse) it; print its path
#   build-llama-server.sh --if-built   print the path of a finished build and
#                                      exit 0; else exit 1 with a one-line
#                                      message, never fetching or building
#   build-llama-server.sh --quantize   build (or reuse) llama.cpp's
#                                      llama-quantize in the same build tree
#                                      (incremental: it reuses the libraries
#                                      of llama-server); print its path
#   build-llama-server.sh --tensors    build (or reuse) llama_tensors
#                                      (suites/llama_tensors.c: llama.cpp's
#                                      intermediate tensors, for
#                                      numerics_layers) against the same
#                                      build's libraries; print its path
#
# Nothing of llama.cpp is kept in this repository: the package is fetched
# from the npm registry at test time. A finished build is reused.
#
# Environment:
#   ASSAY_CACHE      cache root (default: $XDG_CACHE_HOME/assay or ~/.cache/assay)
#   ASSAY_LLAMA_PKG  npm package version (default: 3.21.1)
set -euo pipefail

version="${ASSAY_LLAMA_PKG:-3.21.1}"
cache="${ASSAY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/assay}"

# The configuration. GGML_NATIVE builds for this CPU, except its AMX units:
# on a CPU with AMX (Intel Sapphire Rapids and later) ggml adds an AMX
# buffer type that takes Q4_0, Q8_0 and the K-quant weights by default, and
# this release's AMX matrix kernel crashed the server (SIGSEGV in
# ggml_backend_amx_mul_mat) on its warm-up decode of every Q4_K_M file. An
# explicit -mno-amx-* outlasts -march=native, so the build is the one every
# CPU without AMX gets. The folder's name carries a hash of this list: a
# build made with other flags is never reused.
config=(
    -DCMAKE_BUILD_TYPE=Release
    -DBUILD_SHARED_LIBS=OFF
    -DGGML_NATIVE=ON
    "-DCMAKE_C_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
    "-DCMAKE_CXX_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
    -DLLAMA_OPENSSL=OFF
    -DLLAMA_BUILD_TESTS=OFF
    -DLLAMA_BUILD_EXAMPLES=OFF
    -DLLAMA_BUILD_APP=OFF
    -DLLAMA_BUILD_UI=OFF
    -DLLAMA_USE_PREBUILT_UI=OFF
)
config_hash="$(printf '%s\n' "${config[@]}" | sha256sum | cut -c1-8)"
root="$cache/llama.cpp-node-llama-cpp-$version-$config_hash"
bin="$root/build/bin/llama-server"
quantize_bin="$root/build/bin/llama-quantize"
tensors_bin="$root/build/bin/llama_tensors"
tensors_src="$(cd "$(dirname "$0")/.." && pwd)/suites/llama_tensors.c"

if_built=0
quantize=0
tensors=0
case "${1:-}" in
"") ;;
--if-built) if_built=1 ;;
--quantize) quantize=1 ;;
--tensors) tensors=1 ;;
*)
    echo "usage: $0 [--if-built | --quantize | --tensors]" >&2
    exit 2
    ;;
esac

# llama-quantize: one more target of the configured build tree. Its own
# marker file says that the binary came from a finished build.
build_quantize() {
    if [ -x "$quantize_bin" ] && [ -f "$root/.built-quantize" ]; then
        echo "llama-quantize: reusing $quantize_bin" >&2
        echo "$quantize_bin"
        return 0
    fi
    echo "llama-quantize: building (incremental on the llama-server build)" >&2
    cmake --build "$root/build" --target llama-quantize -j "$(nproc)" \
        >"$root/build-quantize.log" 2>&1 || {
        echo "build-llama-server: llama-quantize build failed; see $root/build-quantize.log" >&2
        tail -n 20 "$root/build-quantize.log" >&2
        return 1
    }
    touch "$root/.built-quantize"
    echo "$quantize_bin"
}

# llama_tensors: assay's own program (suites/llama_tensors.c) linked with
# the build's static libraries (libllama, ggml's CPU backend, OpenMP);
# rebuilt whenever its source is newer than the binary.
build_tensors() {
    if [ -x "$tensors_bin" ] && [ "$tensors_bin" -nt "$tensors_src" ]; then
        echo "llama_tensors: reusing $tensors_bin" >&2
        echo "$tensors_bin"
        return 0
    fi
    echo "llama_tensors: building against $root/build" >&2
    cmake --build "$root/build" --target llama -j "$(nproc)" >"$root/build-tensors.log" 2>&1 &&
        mapfile -t libs < <(find "$root/build/src" "$root/build/ggml/src" -name '*.a' |
            sort -r) &&
        g++ -O2 -x c "$tensors_src" -x none -o "$tensors_bin.tmp" \
            -I"$root/src/include" -I"$root/src/ggml/include" \
            -Wl,--start-group "${libs[@]}" -Wl,--end-group -fopenmp -lpthread -lm \
            >>"$root/build-tensors.log" 2>&1 && mv "$tensors_bin.tmp" "$tensors_bin" || {
        echo "build-llama-server: llama_tensors build failed; see $root/build-tensors.log" >&2
        tail -n 20 "$root/build-tensors.log" >&2
        return 1
    }
    echo "$tensors_bin"
}

if [ -x "$bin" ] && [ -f "$root/.built" ]; then
    if [ "$quantize" = 1 ]; then
        build_quantize
        exit
    fi
    if [ "$tensors" = 1 ]; then
        build_tensors
        exit
    fi
    [ "$if_built" = 1 ] || echo "llama-server: reusing $bin" >&2
    echo "$bin"
    exit 0
fi
if [ "$if_built" = 1 ]; then
    echo "build-llama-server: no finished llama-server build in $root (run scripts/build-llama-server.sh)" >&2
    exit 1
fi

for tool in npm git cmake tar; do
    command -v "$tool" >/dev/null 2>&1 || {
        echo "build-llama-server: '$tool' is required but not installed" >&2
        exit 2
    }
done

mkdir -p "$root"
work="$(mktemp -d "$root/fetch.XXXXXX")"
trap 'rm -rf "$work"' EXIT

if [ ! -d "$root/src/.git" ]; then
    echo "llama-server: fetching node-llama-cpp@$version from the npm registry" >&2
    (cd "$work" && npm pack --silent "node-llama-cpp@$version" >/dev/null)
    tar -xzf "$work"/node-llama-cpp-"$version".tgz -C "$work" package/llama/gitRelease.bundle
    rm -rf "$root/src"
    git clone --quiet "$work/package/llama/gitRelease.bundle" "$root/src"
fi

echo "llama-server: building (about 7 minutes on 2 cores the first time)" >&2
generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
cmake -S "$root/src" -B "$root/build" "${generator[@]}" "${config[@]}" \
    >"$root/configure.log" 2>&1 || {
        echo "build-llama-server: cmake configure failed; see $root/configure.log" >&2
        tail -n 20 "$root/configure.log" >&2
        exit 1
    }
cmake --build "$root/build" --target llama-server -j "$(nproc)" >"$root/build.log" 2>&1 || {
    echo "build-llama-server: build failed; see $root/build.log" >&2
    tail -n 20 "$root/build.log" >&2
    exit 1
}
touch "$root/.built"
if [ "$quantize" = 1 ]; then
    build_quantize
    exit
fi
if [ "$tensors" = 1 ]; then
    build_tensors
    exit
fi
echo "$bin"
