#!/usr/bin/env bash
# How far a llama-server's log-probabilities for one token sequence lie from
# themselves when the server computes the same positions along its other
# kernel path (by hand, outside .ci/run; docs/numerics.md, "Where the server
# and the reference part").
#
#   server-self-distance.sh SERVER_URL
#   server-self-distance.sh MODEL.gguf        serve it (llama-server-ctl.sh)
#
# For each of 4 prompts, request A decodes G greedy tokens (temperature 0,
# the prompt cache off, n_probs top logprobs per token): position P + k is
# computed one row at a time, on a KV cache written one row at a time.
# Request B_k sends the prompt and A's first k tokens as a prompt and asks
# for one token: the same position, the same tokens before it, computed in
# one batch of P + k rows (ggml's matrix-matrix kernels and tiled flash
# attention instead of its vector kernels and one-row attention). Both are
# llama.cpp's arithmetic, correct; what differs is the order of float sums,
# and with it which activations round up or down to Q8_K or fp16. Prints,
# per prompt, the largest |logprob A - logprob B| over the top tokens both
# list and the positions whose greedy token differs; then the largest over
# all and the median position's. Request A is also repeated: a server that
# is deterministic for one batch shape gives 0 there.
#
# Environment: ASSAY_SELF_TOKENS (G, default 16), ASSAY_SELF_TOP (n_probs,
# default 10), ASSAY_LLAMA_SERVER and the rest of llama-server-ctl.sh's.
set -euo pipefail

# shellcheck source=scripts/test-models-lib.sh
. "$(dirname "$0")/test-models-lib.sh"
die() {
    echo "server-self-distance: $*" >&2
    exit 2
}
command -v jq >/dev/null 2>&1 || die "'jq' is required (scripts/setup.sh --audit installs it)"
command -v curl >/dev/null 2>&1 || die "'curl' is required"
[ $# -eq 1 ] || die "usage: $0 SERVER_URL | MODEL.gguf"
n_gen="${ASSAY_SELF_TOKENS:-16}"
n_top="${ASSAY_SELF_TOP:-10}"
case "$n_gen$n_top" in *[!0-9]*) die "ASSAY_SELF_TOKENS and ASSAY_SELF_TOP must be integers" ;; esac
[ "$n_gen" -ge 2 ] || die "ASSAY_SELF_TOKENS must be at least 2"

state="$(mktemp -d "${TMPDIR:-/tmp}/assay-self.XXXXXX")"
trap '"$here/llama-server-ctl.sh" stop "$state/server" >/dev/null 2>&1 || true; rm -rf "$state"' EXIT
case "$1" in
http://* | https://*) url="${1%/}" ;;
*)
    [ -f "$1" ] || die "$1: no such file (give a server URL or a .gguf file)"
    export ASSAY_OWNER_PID=$$
    url="$("$here/llama-server-ctl.sh" start "$state/server" "$1")" ||
        die "llama-server did not start"
    ;;
esac

# ask PROMPT N_PREDICT OUT: a greedy completion with top logprobs.
ask() {
    curl -sf "$url/completion" -H 'Content-Type: application/json' -o "$3" -d "{\"prompt\":$1,
        \"n_predict\":$2,\"return_tokens\":true,\"temperature\":0,\"cache_prompt\":false,
        \"ignore_eos\":true,\"n_probs\":$n_top,\"samplers\":[\"top_k\"],\"top_k\":1}" ||
        die "$url: the request failed (prompt $1)"
}

# The largest |difference| of the logprobs two answers give the tokens both
# list: answer $1 at its position $2, answer $3 at its first.
distance() {
    jq -n --slurpfile a "$1" --slurpfile b "$3" --argjson k "$2" '
        ($a[0].completion_probabilities[$k].top_logprobs
         | map({key: (.id | tostring), value: .logprob}) | from_entries) as $m
        | [$b[0].completion_probabilities[0].top_logprobs[]
           | select($m[.id | tostring] != null)
           | (.logprob - $m[.id | tostring]) | if . < 0 then -. else . end]
        | max // 0'
}

all="$state/all"
: >"$all"
for prompt in "[1,17,33,250,9,14]" "[200,3,71,5]" "[77,140,171,72,107,3,3,99]" "[1,2,3,4,5,6,7,8,9,10,11,12]"; do
    ask "$prompt" "$n_gen" "$state/a.json"
    ask "$prompt" "$n_gen" "$state/a2.json"
    repeat="$(jq -n --slurpfile a "$state/a.json" --slurpfile b "$state/a2.json" \
        '[$a[0].completion_probabilities, $b[0].completion_probabilities] | .[0] == .[1]')"
    worst=0
    flips=0
    for k in $(seq 1 $((n_gen - 1))); do
        b_prompt="$(jq -c --argjson p "$prompt" --argjson k "$k" '$p + .tokens[0:$k]' "$state/a.json")"
        ask "$b_prompt" 1 "$state/b.json"
        d="$(distance "$state/a.json" "$((k))" "$state/b.json")"
        echo "$d" >>"$all"
        same="$(jq -n --slurpfile a "$state/a.json" --slurpfile b "$state/b.json" --argjson k "$k" \
            '$a[0].tokens[$k] == $b[0].tokens[0]')"
        [ "$same" = true ] || flips=$((flips + 1))
        worst="$(jq -n --argjson x "$worst" --argjson y "$d" '[$x, $y] | max')"
    done
    printf 'prompt %-30s %2d positions: max |A - B| %.4g; greedy token differs at %d; A repeated bit for bit: %s\n' \
        "$prompt" "$((n_gen - 1))" "$worst" "$flips" "$repeat"
done
jq -s 'sort | {n: length, max: .[-1], median: .[(length / 2 | floor)]}
       | "server-self-distance: \(.n) positions, |decoded - batched| logprob max \(.max), median \(.median)"' \
    -r "$all"
