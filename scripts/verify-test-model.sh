#!/usr/bin/env bash
# Runs the whole verify plan on the bundled engine loading a generated test
# model of realistic shape (scripts/make-test-models.sh): by default
# llama-hd64 as Q4_K_M, dequantized at load; the model drafts for itself in
# the speculative checks. The distributional checks and the pool-pressure
# property checks name their own small model (`mini`) in the plan, so they
# run as everywhere; the rest runs on the test model.
#
#   verify-test-model.sh [OUTDIR]      (OUTDIR as make-test-models.sh's)
#
# Environment: as make-test-models.sh, and ASSAY_VERIFY_MODEL (default
# llama-hd64), ASSAY_VERIFY_TYPE (default Q4_K_M). Exit status: assay
# verify's.
set -euo pipefail

# shellcheck source=scripts/test-models-lib.sh
. "$(dirname "$0")/test-models-lib.sh"
name="${ASSAY_VERIFY_MODEL:-llama-hd64}"
type="${ASSAY_VERIFY_TYPE:-Q4_K_M}"

[ $# -le 1 ] || {
    echo "usage: $0 [OUTDIR]" >&2
    exit 2
}
[ -x "$build/assay" ] || {
    echo "verify-test-model: no assay at $build/assay (build it, or set ASSAY_BUILD)" >&2
    exit 2
}
types="$type"
[ "$type" = F32 ] && types=F16 # the F32 file is always made
ASSAY_MODEL_NAMES="$name" ASSAY_MODEL_TYPES="$types" "$here/make-test-models.sh" "$out" >&2
file="$(manifest_file "$name" "$type")"
[ -n "$file" ] || {
    echo "verify-test-model: $name $type is not in $out/manifest.tsv" >&2
    exit 2
}
exec "$build/assay" verify --engine "bundled:model=$file" \
    --repro-dir "$build/scratch-verify-test-model"
