#!/usr/bin/env bash
# What a llama-server keeps at an exact tie, measured (by hand, outside
# .ci/run). The sampling contract (core/request.h) ranks tokens by
# descending logit and equal logits by ascending id, and cuts that one
# order: where top-k's k-th and (k+1)-th token tie, or top-p's crossing
# token ties with the next, the lower id is kept and the higher removed.
#
#   server-ties.sh [SERVER_URL]
#
# Without a URL it writes a twins file (export_gguf --shape ...,twins=1:
# `mini`'s shape with a context of 512, output row 2i + 1 a copy of row 2i,
# so tokens 2i and 2i + 1 always have the same logit) and serves it with
# llama-server (scripts/llama-server-ctl.sh) in its default configuration;
# with one, that server must serve such a file.
# For each of 4 prompts it reads the whole next-token distribution (n_probs
# over the vocabulary), places top-k and top-p cuts on tied pairs (k odd;
# top-p half way through the first token of a pair), reads the set the
# server kept (post_sampling_probs: tokens of probability > 0) and compares
# it with the contract's. Then, on a server it started, `assay audit
# --quick --no-bench` of the same file: a correct server must pass it
# whatever its tie rule. Prints one line per cut and the audit's verdicts;
# exit 1 when the audit does not pass, 2 when something could not run. A
# kept set other than the contract's is reported, not an error: it is the
# server's tie rule, which the audit does not hold it to.
#
# Environment: ASSAY_BUILD (export_gguf), ASSAY_LLAMA_SERVER and the rest
# of llama-server-ctl.sh's.
set -euo pipefail

# shellcheck source=scripts/test-models-lib.sh
. "$(dirname "$0")/test-models-lib.sh"
die() {
    echo "server-ties: $*" >&2
    exit 2
}
command -v jq >/dev/null 2>&1 || die "'jq' is required (scripts/setup.sh --audit installs it)"
command -v curl >/dev/null 2>&1 || die "'curl' is required"

state="$(mktemp -d "${TMPDIR:-/tmp}/assay-ties.XXXXXX")"
trap '"$here/llama-server-ctl.sh" stop "$state/server" >/dev/null 2>&1 || true; rm -rf "$state"' EXIT
if [ $# -ge 1 ]; then
    url="$1"
else
    [ -x "$build/suites/export_gguf" ] || die "no export_gguf in $build/suites (build it, or set ASSAY_BUILD)"
    file="$state/twins.gguf"
    "$build/suites/export_gguf" "$file" --shape \
        d_model=64,layers=2,heads=4,kv_heads=2,head_dim=16,d_ff=256,vocab=256,ctx=512,twins=1 \
        >/dev/null || die "export_gguf could not write the twins file"
    export ASSAY_OWNER_PID=$$
    export ASSAY_LLAMA_CTX_PER_SLOT="${ASSAY_LLAMA_CTX_PER_SLOT:-1024}"
    url="$("$here/llama-server-ctl.sh" start "$state/server" "$file")" ||
        die "llama-server did not start"
fi

# ask PROMPT TOP_K TOP_P POST: one token's probabilities, the whole vocabulary.
ask() {
    curl -sf "$url/completion" -H 'Content-Type: application/json' -d "{\"prompt\":$1,
        \"n_predict\":1,\"return_tokens\":true,\"temperature\":1,\"top_k\":$2,\"top_p\":$3,
        \"min_p\":0,\"typical_p\":1,\"repeat_penalty\":1,\"repeat_last_n\":0,
        \"presence_penalty\":0,\"frequency_penalty\":0,\"dry_multiplier\":0,
        \"xtc_probability\":0,\"top_n_sigma\":-1,\"mirostat\":0,\"dynatemp_range\":0,
        \"samplers\":[\"temperature\",\"top_k\",\"top_p\"],\"seed\":1,\"cache_prompt\":false,
        \"n_probs\":4096,\"post_sampling_probs\":$4}"
}

cuts=0
broken=0
for prompt in "[5,17,33]" "[200,3]" "[77,140,171,72,107]" "[1]"; do
    # The contract's order: descending probability, ascending id.
    ask "$prompt" 0 1 false >"$state/full.json" || die "$url: the request failed"
    jq -c '[.completion_probabilities[0].top_logprobs[] | {id, lp: .logprob}]
           | sort_by(-.lp, .id)' "$state/full.json" >"$state/order.json"
    n="$(jq length "$state/order.json")"
    [ "$n" -ge 64 ] || die "$url: $n probabilities returned, not the whole vocabulary (n_probs)"
    # Cuts on tied pairs: top-k k odd, top-p within the first token of a pair.
    for k in 1 3 5 9 17 33 65 129 201; do
        [ "$k" -lt "$n" ] || continue
        tied="$(jq --argjson k "$k" '.[$k - 1].lp == .[$k].lp' "$state/order.json")"
        [ "$tied" = true ] || continue
        echo "top_k $k"
    done >"$state/cuts"
    for i in 0 2 4 8 16 32; do
        jq -r --argjson i "$i" 'if .[$i].lp == .[$i + 1].lp then
            "top_p \((([.[0:$i][] | .lp | exp] | add // 0) + 0.5 * (.[$i].lp | exp)) * 1e9 | round / 1e9) \($i + 1)"
            else empty end' "$state/order.json"
    done >>"$state/cuts"
    while read -r kind value keep; do
        if [ "$kind" = top_k ]; then
            keep="$value"
            ask "$prompt" "$value" 1 true >"$state/post.json"
        else
            ask "$prompt" 0 "$value" true >"$state/post.json"
        fi
        want="$(jq -c --argjson m "$keep" '[.[0:$m][] | .id] | sort' "$state/order.json")"
        got="$(jq -c '[.completion_probabilities[0].top_probs[] | select(.prob > 0) | .id] | sort' \
            "$state/post.json")"
        cut="$(jq -r --argjson m "$keep" '"\(.[$m - 1].id) kept, \(.[$m].id) removed"' "$state/order.json")"
        cuts=$((cuts + 1))
        if [ "$want" = "$got" ]; then
            printf 'prompt %-20s %s %-11s as the contract: %s\n' "$prompt" "$kind" "$value" "$cut"
        else
            broken=$((broken + 1))
            printf 'prompt %-20s %s %-11s ANOTHER SET: the contract: %s; kept %s tokens: %s\n' \
                "$prompt" "$kind" "$value" "$cut" "$(jq length <<<"$got")" "$got"
        fi
    done <"$state/cuts"
done
[ "$cuts" -gt 0 ] || die "no tied cut found: is the file's output matrix made of twin rows?"
echo "server-ties: $cuts tied cuts; the server kept another set than the contract's at $broken"
[ -n "${file:-}" ] || exit 0
[ -x "$build/assay" ] || die "no assay in $build (build it, or set ASSAY_BUILD)"
rc=0
"$build/assay" audit --url "$url" --model "$file" --quick --no-bench --out "$state/audit" \
    >"$state/audit.log" 2>&1 || rc=$?
verdicts="$(jq -r '[.checks[] | .verdict[0:1]] | join("")' "$state/audit/report.json" 2>/dev/null || echo "?")"
echo "server-ties: assay audit --quick of the same file: exit $rc, $verdicts"
[ "$rc" = 0 ] || {
    grep -E 'why:' "$state/audit.log" >&2 || tail -5 "$state/audit.log" >&2
    exit 1
}
