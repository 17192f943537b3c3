#!/usr/bin/env bash
# Checks that llama-server loads each test model and generates from it:
# makes (or reuses) the models with scripts/make-test-models.sh, then for
# each file of its manifest starts llama-server (scripts/llama-server-ctl.sh,
# the audit's flags: f32 KV cache, no flash attention), sends one greedy
# /completion with a prompt of token ids, checks that token ids come back,
# and stops the server.
#
#   check-test-models.sh [OUTDIR]      (OUTDIR as make-test-models.sh's)
#
# Prints per file the load time (start until /health is ok), llama-server's
# own prompt and generation speeds, and how many of the greedy tokens agree
# with the F32 file's (a first look at what quantization changes; not a
# pass/fail criterion). Exit status 0 when every file loads and generates,
# 1 otherwise.
#
# Environment: as make-test-models.sh, and ASSAY_LLAMA_THREADS (default 1),
# ASSAY_LLAMA_NP (default 1 here), ASSAY_CHECK_N_PREDICT (default 64).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
cache="${ASSAY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/assay}"
out="${1:-$cache/models}"
n_predict="${ASSAY_CHECK_N_PREDICT:-64}"
export ASSAY_LLAMA_NP="${ASSAY_LLAMA_NP:-1}"
export ASSAY_OWNER_PID=$$

for tool in curl jq; do
    command -v "$tool" >/dev/null 2>&1 || {
        echo "check-test-models: '$tool' is required but not installed" >&2
        exit 2
    }
done

"$here/make-test-models.sh" "$out"
manifest="$out/manifest.tsv"
[ -s "$manifest" ] || {
    echo "check-test-models: no models listed in $manifest" >&2
    exit 1
}

state="$(mktemp -d "${TMPDIR:-/tmp}/assay-models.XXXXXX")"
trap '"$here/llama-server-ctl.sh" stop "$state" 2>/dev/null; rm -rf "$state"' EXIT

now_ms() { date +%s%3N; }

# A fixed prompt of 16 token ids spread over the first 32000 (every test
# model's vocabulary has at least that many).
prompt="[$(seq 0 15 | awk '{ printf "%s%d", (NR > 1 ? "," : ""), ($1 * 7919 + 13) % 32000 }')]"
body="$(jq -cn --argjson p "$prompt" --argjson n "$n_predict" \
    '{prompt: $p, n_predict: $n, temperature: 0, seed: 1, return_tokens: true, cache_prompt: false}')"

status=0
reference=""
last=""
printf '%-12s %-7s %8s %12s %10s %8s %9s\n' model type load_s prompt_t/s gen_t/s tokens same_f32
while IFS=$'\t' read -r name type file; do
    [ "$name" = "$last" ] || reference=""
    last="$name"
    start=$(now_ms)
    if ! url="$("$here/llama-server-ctl.sh" start "$state" "$file" -ctk f32 -ctv f32 -fa off 2>"$state/start.err")"; then
        echo "check-test-models: llama-server did not load $file:" >&2
        cat "$state/start.err" >&2
        status=1
        continue
    fi
    load=$(awk -v a="$start" -v b="$(now_ms)" 'BEGIN { printf "%.2f", (b - a) / 1000 }')
    reply="$(curl -fsS --max-time 600 -H 'Content-Type: application/json' -d "$body" \
        "$url/completion" 2>"$state/curl.err")" || {
        echo "check-test-models: /completion failed on $file: $(cat "$state/curl.err")" >&2
        "$here/llama-server-ctl.sh" stop "$state" 2>/dev/null
        status=1
        continue
    }
    "$here/llama-server-ctl.sh" stop "$state" 2>/dev/null
    tokens="$(jq -c '.tokens // []' <<<"$reply")"
    n="$(jq 'length' <<<"$tokens")"
    vocab="$("$here/make-test-models.sh" --shape "$name" | sed -n 's/.*vocab=\([0-9]*\).*/\1/p')"
    bad="$(jq --argjson v "$vocab" '[.[] | select(. < 0 or . >= $v)] | length' <<<"$tokens")"
    if [ "$n" -lt 1 ] || [ "$bad" -ne 0 ]; then
        echo "check-test-models: $file: expected token ids in 0..$((vocab - 1)), got $tokens" >&2
        status=1
        continue
    fi
    [ "$type" = F32 ] && reference="$tokens"
    same="-"
    if [ -n "$reference" ] && [ "$type" != F32 ]; then
        same="$(jq -n --argjson a "$reference" --argjson b "$tokens" \
            'first(range(0; [($a | length), ($b | length)] | min) | select($a[.] != $b[.])) // ([($a | length), ($b | length)] | min)')"
        same="$same/$n"
    fi
    printf '%-12s %-7s %8s %12.1f %10.1f %8s %9s\n' "$name" "$type" "$load" \
        "$(jq '.timings.prompt_per_second' <<<"$reply")" \
        "$(jq '.timings.predicted_per_second' <<<"$reply")" "$n" "$same"
done <"$manifest"
exit $status
