#!/usr/bin/env bash
# Where llama.cpp and the audit's reference part, layer by layer (by hand,
# outside .ci/run; docs/numerics.md, "Where the server and the reference
# part").
#
#   numerics-layers.sh MODEL.gguf [N_TOKENS]
#
# Builds llama_tensors against the llama.cpp build of
# build-llama-server.sh, draws N_TOKENS token ids (default 48; fixed seed,
# below the vocabulary of the file), and has llama.cpp compute them twice
# with its server's defaults (F16 KV cache, flash attention, one thread):
# in one call (the path of a prompt: matrix-matrix kernels, tiled flash
# attention) and one token a call (the path of a decoded token: vector
# kernels, one-row attention). Then numerics_layers compares each with the
# reference (the bundled engine, act=ggml, kv_type=f16, fa=on) and the two
# with each other, checkpoint by checkpoint; prints the three tables and
# their last lines. Exit 2 when something could not run.
#
# Environment: ASSAY_BUILD (numerics_layers), ASSAY_LLAMA_PKG and the rest
# of build-llama-server.sh's.
set -euo pipefail

# shellcheck source=scripts/test-models-lib.sh
. "$(dirname "$0")/test-models-lib.sh"
die() {
    echo "numerics-layers: $*" >&2
    exit 2
}
[ $# -ge 1 ] && [ $# -le 2 ] || die "usage: $0 MODEL.gguf [N_TOKENS]"
file="$1"
n="${2:-48}"
[ -f "$file" ] || die "$file: no such file"
case "$n" in '' | *[!0-9]*) die "N_TOKENS must be an integer" ;; esac
[ "$n" -ge 2 ] && [ "$n" -le 1024 ] || die "N_TOKENS must be 2 to 1024"
layers="$build/suites/numerics_layers"
[ -x "$layers" ] || die "no numerics_layers in $build/suites (build it, or set ASSAY_BUILD)"
tensors="$("$here/build-llama-server.sh" --tensors | tail -n 1)" || die "llama_tensors did not build"

state="$(mktemp -d "${TMPDIR:-/tmp}/assay-layers.XXXXXX")"
trap 'rm -rf "$state"' EXIT
# Token ids below 4096 (every test model's vocabulary is larger), from a
# fixed linear congruential sequence, so runs and files compare.
tokens="$(awk -v n="$n" 'BEGIN { x = 12345; for (i = 0; i < n; i++) {
    x = (1103515245 * x + 12345) % 2147483648; printf "%s%d", (i ? "," : ""), 1 + int(x / 65536) % 4095 } }')"
"$tensors" "$file" "$state/batch.bin" "$tokens" 2>"$state/err" || { cat "$state/err" >&2; die "llama_tensors failed"; }
"$tensors" "$file" "$state/one.bin" "$tokens" --ubatch 1 2>"$state/err" || { cat "$state/err" >&2; die "llama_tensors failed"; }
compare() {
    echo
    "$layers" "$file" "$@" || die "numerics_layers failed"
}
compare "$state/batch.bin" "$tokens"
compare "$state/one.bin" "$tokens"
compare "$state/batch.bin" "$tokens" --against "$state/one.bin"
