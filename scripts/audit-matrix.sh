#!/usr/bin/env bash
# The whole matrix by hand: llama-server in its default configuration (an
# F16 KV cache, flash attention, four slots, its prompt cache on) audited in
# full (`assay audit --no-bench`, every check) on the generated test models
# in every format people serve, with several master seeds, and with
# speculative decoding on (a draft of the same family). A correct server
# must pass everywhere: every check PASS or SKIP with a reason, none ERROR
# or FAIL.
#
#   audit-matrix.sh [OUTDIR]        (OUTDIR as make-test-models.sh's)
#
# Prints one row per audit (model, format, seed, speculative or not, exit
# status, one letter per check, seconds) and per distributional check its
# p-value with the tolerance test's estimate against its budget; writes
# them to $ASSAY_MATRIX_OUT/matrix.tsv, each audit's report beside it.
# Exit 1 when an audit did not exit 0, 2 when a part could not run.
#
# Environment (defaults: the whole matrix, several hours on 2 cores):
#   ASSAY_MATRIX_MODELS  models (default: llama-hd64 qwen2-hd64)
#   ASSAY_MATRIX_TYPES   formats (default: F16 BF16 Q8_0 Q4_K_M Q5_K_M Q6_K)
#   ASSAY_MATRIX_SEEDS   master seeds (default: 1 2 3; "": only the
#                        speculative audits)
#   ASSAY_MATRIX_SPEC    formats audited again with speculative decoding,
#                        the family's draft in F16 (default: Q4_K_M F16;
#                        none: "")
#   ASSAY_MATRIX_SPEC_SEEDS  master seeds of those (default: 1 2 3)
#   ASSAY_MATRIX_QUICK=1 `--quick` audits (the same matrix in about a third)
#   ASSAY_MATRIX_OUT     where reports go (default: $ASSAY_BUILD/scratch-matrix)
#   ASSAY_LLAMA_THREADS, ASSAY_LLAMA_NP as llama-server-ctl.sh's
set -euo pipefail

# shellcheck source=scripts/test-models-lib.sh
. "$(dirname "$0")/test-models-lib.sh"
models="${ASSAY_MATRIX_MODELS:-llama-hd64 qwen2-hd64}"
types="${ASSAY_MATRIX_TYPES:-F16 BF16 Q8_0 Q4_K_M Q5_K_M Q6_K}"
seeds="${ASSAY_MATRIX_SEEDS-1 2 3}"
spec_types="${ASSAY_MATRIX_SPEC-Q4_K_M F16}"
spec_seeds="${ASSAY_MATRIX_SPEC_SEEDS-1 2 3}"
reports="${ASSAY_MATRIX_OUT:-$build/scratch-matrix}"
assay="$build/assay"
quick=()
[ "${ASSAY_MATRIX_QUICK:-0}" = 1 ] && quick=(--quick)
export ASSAY_OWNER_PID=$$
export ASSAY_LLAMA_MAX_SECONDS="${ASSAY_LLAMA_MAX_SECONDS:-86400}"

die() {
    echo "audit-matrix: $*" >&2
    exit 2
}

[ $# -le 1 ] || {
    echo "usage: $0 [OUTDIR]" >&2
    exit 2
}
[ -x "$assay" ] || die "no assay at $assay (build it, or set ASSAY_BUILD)"
command -v jq >/dev/null 2>&1 || die "'jq' is required (scripts/setup.sh --audit installs it)"

drafts=""
if [ -n "$spec_types" ]; then
    for name in $models; do
        drafts="$drafts ${name%%-*}-draft"
    done
fi
ASSAY_MODEL_NAMES="$models$drafts" \
    ASSAY_MODEL_TYPES="$(echo "$types $spec_types F16" | tr ' ' '\n' | sort -u | xargs)" \
    "$here/make-test-models.sh" "$out" >&2
mkdir -p "$reports"
# The files of this run, kept: another run of make-test-models.sh (the
# audit label's, say) rewrites the folder's manifest with its own models.
manifest_copy="$reports/manifest.tsv"
cp "$out/manifest.tsv" "$manifest_copy"
state="$(mktemp -d "${TMPDIR:-/tmp}/assay-matrix.XXXXXX")"
trap '"$here/llama-server-ctl.sh" stop "$state" 2>/dev/null; rm -rf "$state"' EXIT

table="$reports/matrix.tsv"
printf 'model\tformat\tseed\tspeculative\texit\tverdicts\tseconds\n' >"$table"
failures=0

# audit_one NAME TYPE SEED SPEC: one server, one full audit.
audit_one() {
    local name="$1" type="$2" seed="$3" spec="$4" server_args=()
    local file tag dir
    file="$(manifest_file "$name" "$type")"
    [ -n "$file" ] || die "$name $type: not in $manifest_copy"
    tag="$name-$type-s$seed"
    if [ "$spec" = yes ]; then
        local draft
        draft="$(manifest_file "${name%%-*}-draft" F16)"
        [ -n "$draft" ] || die "${name%%-*}-draft F16: not in $manifest_copy"
        server_args=(-md "$draft" --spec-type draft-simple --spec-draft-n-max 4)
        tag="$tag-spec"
    fi
    dir="$reports/$tag"
    rm -rf "$dir"
    "$here/llama-server-ctl.sh" start "$state" "$file" "${server_args[@]}" >"$state/url" \
        2>"$state/start.err" || {
        cat "$state/start.err" >&2
        die "$tag: llama-server did not start"
    }
    local rc=0 start
    start=$(date +%s)
    "$assay" audit --url "$(cat "$state/url")" --model "$file" --out "$dir" --no-bench \
        --seed "$seed" "${quick[@]}" >"$dir.log" 2>&1 || rc=$?
    local secs=$(($(date +%s) - start))
    "$here/llama-server-ctl.sh" stop "$state" >/dev/null 2>&1 || true
    local verdicts="?"
    if [ -f "$dir/report.json" ]; then
        verdicts="$(jq -r '[.checks[] | .verdict[0:1]] | join("")' "$dir/report.json")"
    fi
    printf '%-11s %-7s %4s %-4s exit %s  %s  %5s s\n' "$name" "$type" "$seed" "$spec" "$rc" \
        "$verdicts" "$secs"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$type" "$seed" "$spec" "$rc" "$verdicts" \
        "$secs" >>"$table"
    if [ -f "$dir/report.json" ]; then
        jq -r '.checks[] | select(.family == "distributional") |
            "      \(.name): \(.verdict) p \(.figures.p_value)" +
            (if .figures.tolerance then
                " \(.figures.tolerance.distance) \(.figures.tolerance.estimate) [\(.figures.tolerance.ci_lo), \(.figures.tolerance.ci_hi)] budget \(.figures.tolerance.budget)"
             else "" end)' "$dir/report.json"
    fi
    if [ "$rc" != 0 ]; then
        failures=$((failures + 1))
        echo "    FAIL: $tag exited $rc (see $dir.log)"
        [ -f "$dir/report.json" ] &&
            jq -r '.checks[] | select(.verdict == "FAIL" or .verdict == "ERROR") |
                "      \(.name): \(.failure)"' "$dir/report.json"
    fi
    return 0
}

echo "one letter per check in the audit's plan order (P pass, F fail, S skip, E error)"
# Seed by seed, so that an interrupted run has covered every format once.
for seed in $seeds; do
    for name in $models; do
        for type in $types; do
            audit_one "$name" "$type" "$seed" no
        done
    done
done
for seed in $spec_seeds; do
    for name in $models; do
        for type in $spec_types; do
            audit_one "$name" "$type" "$seed" yes
        done
    done
done
echo "matrix: $failures audit(s) did not exit 0; table in $table"
[ "$failures" = 0 ]
