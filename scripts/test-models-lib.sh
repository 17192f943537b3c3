# test-models-lib.sh - sourced by the scripts that make, check, audit and
# verify the test models (scripts/*-test-model*.sh): where things are, and a
# file's path from the models' manifest. Sets:
#   here   this folder          repo   the checkout
#   cache  $ASSAY_CACHE, else $XDG_CACHE_HOME/assay or ~/.cache/assay
#   out    the models' folder: the script's first argument, else $cache/models
#   build  $ASSAY_BUILD, else the checkout's build/test
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
cache="${ASSAY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/assay}"
out="${1:-$cache/models}"
build="${ASSAY_BUILD:-$repo/build/test}"

# manifest_file NAME TYPE: the path of model NAME's TYPE file, as
# make-test-models.sh listed it in $out/manifest.tsv, or in $manifest_copy
# when the caller kept a copy (a later make-test-models.sh of other models
# rewrites the folder's manifest); nothing when absent.
manifest_file() {
    awk -F'\t' -v n="$1" -v t="$2" '$1 == n && $2 == t { print $3 }' \
        "${manifest_copy:-$out/manifest.tsv}"
}
