#!/usr/bin/env bash
# Builds and runs assay's libFuzzer targets (suites/fuzz_*.c).
#
#   scripts/fuzz.sh build [DIR]               configure and build them with clang into
#                                             DIR (default build/fuzz)
#   scripts/fuzz.sh run TARGET SECONDS [DIR]  run one target for SECONDS (the fuzz label
#                                             runs each for 60 s)
#   scripts/fuzz.sh long [RUNS] [DIR]         run every target, one after the other and
#                                             niced, until RUNS executions each (default
#                                             10000000; a few hours on one core)
#   scripts/fuzz.sh coverage TARGET [DIR]     the coverage the target's corpus reaches
#
# Targets: workload (core/workload.c: workload and trace files), gguf
# (engine/gguf*.c and engine/model_gguf.c: GGUF files and the model they
# hold) and sse (adapters/sse.c: server-sent events). Each starts from its
# seed corpus, fixtures/fuzz/TARGET/ (read only), and keeps what it finds in
# DIR/corpus/TARGET/, so later runs go on from there; a dictionary
# fixtures/fuzz/TARGET.dict is used when present. A crash, a leak, an
# undefined behaviour, an input slower than 10 s or a memory blow-up (2 GiB)
# fails the run: the input is written to DIR/artifacts/TARGET/ and the
# command to reproduce it is printed. Every run prints one line of figures
# (executions, seconds, executions/s, libFuzzer's coverage counters and the
# corpus) and appends it to DIR/figures.tsv; `coverage` prints the edges and
# functions of each source file that the corpus reaches.
#
# Needs clang and libFuzzer's runtime (Debian: clang, libclang-rt-dev;
# scripts/setup.sh --fuzz).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
targets=(workload gguf sse)

usage() {
    sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

check_target() {
    for t in "${targets[@]}"; do
        [ "$t" = "$1" ] && return 0
    done
    echo "fuzz.sh: unknown target '$1' (known: ${targets[*]})" >&2
    exit 2
}

build() {
    local dir="$1"
    if ! command -v clang >/dev/null 2>&1; then
        echo "fuzz.sh: clang is not installed (scripts/setup.sh --fuzz)" >&2
        exit 1
    fi
    # The warnings gate is gcc's (the test build); clang may warn differently
    # about code it did not write, and must not stop the fuzzers.
    cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_C_COMPILER=clang \
        -DCMAKE_BUILD_TYPE=RelWithDebInfo -DASSAY_FUZZ=ON -DASSAY_BUILD_TESTS=OFF \
        -DASSAY_BUILD_MUTANTS=OFF -DASSAY_WERROR=OFF >/dev/null
    local names=()
    for t in "${targets[@]}"; do
        names+=("fuzz_$t")
    done
    cmake --build "$dir" --target "${names[@]}"
}

# run TARGET DIR LIBFUZZER-OPTIONS...: one run; prints and records its figures.
run_target() {
    local t="$1" dir="$2"
    shift 2
    local bin="$dir/fuzz_$t" seeds="$root/fixtures/fuzz/$t"
    local corpus="$dir/corpus/$t" artifacts="$dir/artifacts/$t"
    if [ ! -x "$bin" ]; then
        echo "fuzz.sh: $bin is not built (scripts/fuzz.sh build $dir)" >&2
        exit 1
    fi
    mkdir -p "$corpus" "$artifacts"
    local opts=(-rss_limit_mb=2048 -timeout=10 -print_final_stats=1
                -artifact_prefix="$artifacts/")
    if [ -f "$root/fixtures/fuzz/$t.dict" ]; then
        opts+=(-dict="$root/fixtures/fuzz/$t.dict")
    fi
    local log="$dir/fuzz_$t.log" status=0
    local start
    start=$(date +%s)
    "$bin" "${opts[@]}" "$@" "$corpus" "$seeds" >"$log" 2>&1 || status=$?
    local secs=$(( $(date +%s) - start ))
    local runs cov ft corp
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
    ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
    corp=$(grep -o 'corp: [0-9]*/[0-9]*[a-zA-Z]*' "$log" | tail -1 | cut -d' ' -f2)
    local rate=0
    [ "${runs:-0}" -gt 0 ] && [ "$secs" -gt 0 ] && rate=$(( runs / secs ))
    local verdict="no crash"
    if [ "$status" -ne 0 ]; then
        verdict="FAILED (exit $status)"
    fi
    printf 'fuzz %s: %s executions in %s s (%s/s), cov %s, ft %s, corpus %s inputs: %s\n' \
        "$t" "${runs:-0}" "$secs" "$rate" "${cov:-?}" "${ft:-?}" "${corp:-?}" "$verdict"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(date -u +%FT%TZ)" "$t" "${runs:-0}" "$secs" \
        "${cov:-}" "${ft:-}" "${corp:-}" "$verdict" >>"$dir/figures.tsv"
    if [ "$status" -ne 0 ]; then
        # The sanitizer's report and the input that caused it.
        grep -E -A25 '^==[0-9]+==ERROR|^SUMMARY|deadly signal|ALARM|out-of-memory|leak' "$log" |
            head -60 >&2 || true
        local art
        art=$(sed -n "s/.*Test unit written to //p" "$log" | tail -1)
        if [ -n "$art" ]; then
            echo "fuzz.sh: reproduce with: $bin $art" >&2
        fi
        echo "fuzz.sh: full log in $log" >&2
        return 1
    fi
}

# coverage TARGET DIR: edges and functions reached per source file.
coverage() {
    local t="$1" dir="$2"
    local bin="$dir/fuzz_$t"
    mkdir -p "$dir/corpus/$t"
    "$bin" -runs=0 -print_coverage=1 "$dir/corpus/$t" "$root/fixtures/fuzz/$t" 2>&1 |
        awk -v root="$root/" '
            /^(UN)?COVERED_FUNC:/ {
                split($5, e, "/"); file = $7; sub(/:[0-9]+$/, "", file); sub(root, "", file)
                if (file ~ /^suites\//) next
                edges[file] += e[1]; total[file] += e[2]; funcs[file]++
                if ($1 == "COVERED_FUNC:") hit[file]++
            }
            END {
                for (f in total)
                    if (hit[f] > 0)
                        printf "  %-28s %5d of %5d edges, %3d of %3d functions\n", f, edges[f],
                               total[f], hit[f], funcs[f]
            }' | sort
}

cmd="${1:-}"
case "$cmd" in
    build)
        build "${2:-$root/build/fuzz}"
        ;;
    run)
        [ $# -ge 3 ] || usage
        check_target "$2"
        run_target "$2" "${4:-$root/build/fuzz}" -max_total_time="$3"
        ;;
    long)
        runs="${2:-10000000}"
        dir="${3:-$root/build/fuzz}"
        status=0
        for t in "${targets[@]}"; do
            nice -n 10 bash -c "$(declare -f run_target); root='$root'; run_target $t '$dir' -runs=$runs" ||
                status=1
            echo "coverage of the $t corpus:"
            coverage "$t" "$dir"
        done
        exit $status
        ;;
    coverage)
        [ $# -ge 2 ] || usage
        check_target "$2"
        coverage "$2" "${3:-$root/build/fuzz}"
        ;;
    *)
        usage
        ;;
esac
