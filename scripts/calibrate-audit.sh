#!/usr/bin/env bash
# The audit's calibration over HTTP: a correct engine that computes in other
# formats than the oracle (the bundled engine with llama.cpp's numerics,
# served by suites/engine_server, reached through the same adapter as a
# server) audited over many master seeds must show false alarms consistent
# with alpha, and the same engine moved away from the oracle (sampling at a
# scaled temperature) must be caught as often as each check's stated power
# says wherever its distance is beyond budget + the excess it detects.
#
#   calibrate-audit.sh [SEEDS]        (default 20 master seeds; CI runs 2)
#
# The correct engine computes act=ggml with an F16 KV cache WITHOUT flash
# attention (fa=off), while the audit is told llama.cpp's default (flash
# attention on): its reference computes the other attention path, so the
# engine under audit is a correct implementation of the formats that is not
# the reference itself, as a real server is. The moved engine is the same
# with --temperature-scale (default 1.6).
#
# Per check it prints: the correct engine's false alarms of R (and the 95%
# upper bound on the rate they allow), how many of its p-values fall at or
# below 0.01 and 0.05 (a valid p-value under a composite null lands there
# at most that often; the bound is Binomial(R, level)'s 1 - 1e-3 upper end),
# its mean estimated distance against its mean budget; and the moved
# engine's catches, with the same figures. It exits 1 when a correct engine
# fails any check, when the p-values are not super-uniform, or when the
# moved engine is caught less often than the stated power allows where its
# distance is beyond the stated detection threshold in every run.
#
# Environment:
#   ASSAY_BUILD          assay's build folder (default build/test of this checkout)
#   ASSAY_CALIB_MODEL    the GGUF served and audited (default: TinyGPT seed 1,
#                        exported into the output folder)
#   ASSAY_CALIB_SCALE    the moved engine's temperature scale (default 1.6)
#   ASSAY_CALIB_CHECKS   the checks (default: the five distributional checks)
#   ASSAY_CALIB_OUT      where reports go (default $ASSAY_BUILD/scratch-calibrate-audit)
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/.." && pwd)"
build="${ASSAY_BUILD:-$repo/build/test}"
seeds="${1:-20}"
scale="${ASSAY_CALIB_SCALE:-1.6}"
out="${ASSAY_CALIB_OUT:-$build/scratch-calibrate-audit}"
checks="${ASSAY_CALIB_CHECKS:-audit.dist.gof.t1 audit.dist.gof.top-k-top-p audit.dist.pit.t1 audit.dist.pit.top-k-top-p audit.dist.homogeneity}"
server="$build/suites/engine_server"
assay="$build/assay"

die() {
    echo "calibrate-audit: $*" >&2
    exit 2
}
[ -x "$server" ] || die "no engine_server at $server (build the test preset, or set ASSAY_BUILD)"
[ -x "$assay" ] || die "no assay at $assay"
command -v jq >/dev/null 2>&1 || die "'jq' is required (scripts/setup.sh installs it)"
case "$seeds" in '' | *[!0-9]*) die "SEEDS must be a positive number, got '$seeds'" ;; esac
[ "$seeds" -ge 1 ] || die "SEEDS must be at least 1"

rm -rf "$out"
mkdir -p "$out"
model="${ASSAY_CALIB_MODEL:-}"
if [ -z "$model" ]; then
    model="$out/tinygpt-s1.gguf"
    "$build/suites/export_gguf" "$model" tinygpt 1 >/dev/null || die "export_gguf failed"
fi
[ -f "$model" ] || die "no model file $model"

pid=""
stop_server() {
    if [ -n "$pid" ]; then
        kill -TERM "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
        pid=""
    fi
}
trap stop_server EXIT

# serve ARGS...: start engine_server, wait for its port.
serve() {
    rm -f "$out/port"
    "$server" --engine "bundled:model=$model,order=sequential,act=ggml,kv_type=f16,fa=off" \
        --port-file "$out/port" "$@" >"$out/server.log" 2>&1 &
    pid=$!
    local i=0
    while [ ! -s "$out/port" ]; do
        kill -0 "$pid" 2>/dev/null || die "engine_server did not start: $(cat "$out/server.log")"
        i=$((i + 1))
        [ $i -le 600 ] || die "engine_server wrote no port within 60 s"
        sleep 0.1
    done
}

check_args=()
for c in $checks; do
    check_args+=(--check "$c")
done
# Each engine's results, one line per (seed, check): verdict p estimate
# ci_lo budget min_excess.
for who in correct moved; do
    : >"$out/$who.tsv"
    if [ "$who" = moved ]; then serve --temperature-scale "$scale"; else serve; fi
    for s in $(seq 1 "$seeds"); do
        dir="$out/$who-s$s"
        rc=0
        "$assay" audit --url "http://127.0.0.1:$(cat "$out/port")" --model "$model" --quick \
            --no-bench --seed "$s" --out "$dir" "${check_args[@]}" >"$dir.log" 2>&1 || rc=$?
        [ "$rc" = 0 ] || [ "$rc" = 1 ] || die "$who, seed $s: the audit exited $rc (see $dir.log)"
        jq -r --arg s "$s" '.checks[] | [$s, .name, .verdict, .figures.p_value,
            (.figures.tolerance.estimate // "null"), (.figures.tolerance.ci_lo // "null"),
            (.figures.tolerance.budget // "null"), (.figures.tolerance.min_excess // "null")]
            | @tsv' "$dir/report.json" >>"$out/$who.tsv"
        printf '.' >&2
    done
    stop_server
done
echo >&2

# The binomial bounds, from the exact tails (awk: sums of the pmf in logs).
upper() { # upper N P: the smallest k with P(X > k) <= 5e-4 for X ~ Bin(N, P)
    awk -v n="$1" -v p="$2" 'function lc(n, k) { return lgamma_(n + 1) - lgamma_(k + 1) - lgamma_(n - k + 1) }
        function lgamma_(x,   s, i) { s = 0; for (i = 2; i < x; i++) s += log(i); return s }
        BEGIN { tail = 1; for (k = 0; k <= n; k++) { pk = exp(lc(n, k) + k * log(p) + (n - k) * log(1 - p));
                tail -= pk; if (tail <= 5e-4) { print k; exit } } print n }'
}
lower() { # lower N P: the largest k with P(X < k) <= 5e-4 for X ~ Bin(N, P)
    awk -v n="$1" -v p="$2" 'function lgamma_(x,   s, i) { s = 0; for (i = 2; i < x; i++) s += log(i); return s }
        BEGIN { c = 0; for (k = 0; k <= n; k++) { pk = exp(lgamma_(n + 1) - lgamma_(k + 1) - lgamma_(n - k + 1) + k * log(p) + (n - k) * log(1 - p));
                if (c + pk > 5e-4) { print k; exit } c += pk } print n }'
}

status=0
u01="$(upper "$seeds" 0.01)" u05="$(upper "$seeds" 0.05)" l99="$(lower "$seeds" 0.99)"
rate_bound="$(awk -v r="$seeds" 'BEGIN { printf "%.3g", 1 - exp(log(0.05) / r) }')"
printf '\naudit calibration over %s master seeds (engine: %s, act=ggml, kv f16, fa off; audited as fa on)\n' \
    "$seeds" "$(basename "$model")"
printf '%-28s %-8s %6s %9s %9s %10s %10s   %s\n' check engine fails 'p<=0.01' 'p<=0.05' \
    estimate budget verdict
for c in $checks; do
    for who in correct moved; do
        row="$(awk -F'\t' -v c="$c" '$2 == c {
                n++; fails += ($3 == "FAIL"); a += ($4 != "null" && $4 <= 0.01); b += ($4 != "null" && $4 <= 0.05)
                if ($5 != "null") { est += $5; bud += $7; if ($6 - $7 > $8 + 0) beyond++ }
            } END { printf "%d %d %d %d %.4f %.4f %d", n, fails, a, b, n ? est / n : 0, n ? bud / n : 0, beyond }' \
            "$out/$who.tsv")"
        read -r n fails a b est bud beyond <<<"$row"
        verdict=ok
        if [ "$who" = correct ]; then
            [ "$fails" = 0 ] || verdict="FALSE ALARMS"
            [ "$a" -le "$u01" ] && [ "$b" -le "$u05" ] || verdict="NOT SUPER-UNIFORM"
        elif [ "$beyond" = "$n" ] && [ "$n" -gt 0 ]; then
            # beyond budget + min_excess in every run (by the lower end of
            # the estimate's interval): caught at the stated power
            [ "$fails" -ge "$l99" ] || verdict="BELOW ITS STATED POWER"
        else
            verdict="not beyond the detection threshold in every run: power not asserted"
        fi
        printf '%-28s %-8s %3s/%-2s %9s %9s %10s %10s   %s\n' "${c#audit.}" "$who" "$fails" "$n" \
            "$a" "$b" "$est" "$bud" "$verdict"
        case "$verdict" in ok | not*) ;; *) status=1 ;; esac
    done
done
printf 'bounds: a correct engine fails no check (0 of %s: the false-alarm rate is below %s at 95%%);\n' \
    "$seeds" "$rate_bound"
printf '        p <= 0.01 at most %s times, p <= 0.05 at most %s (Binomial 1 - 1e-3 upper ends);\n' \
    "$u01" "$u05"
printf '        a moved engine beyond its threshold in every run is caught at least %s times (power 0.99)\n' \
    "$l99"
exit $status
