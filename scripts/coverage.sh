#!/usr/bin/env bash
# What of engine/ the checks reach: line and branch coverage by gcov.
#
#   scripts/coverage.sh [N_CASES] [DIR]
#
# Builds assay and the differential fuzzing's program with gcc --coverage
# into DIR (default build/coverage; the sources are not touched), then
#   1. runs the verify plan (`assay verify`, every check, the differential
#      fuzzing's 150 cases among them) and prints the coverage of each file
#      of engine/ and in all;
#   2. runs N_CASES (default 1000) more differential cases
#      (suites/fuzz_differential.c, another seed) and prints the coverage
#      of the two runs together.
# Each table gives, per file, the lines executed and the branches taken at
# least once, as gcov counts them. The lines not reached are listed in
# DIR/uncovered.txt (file:line), to read which are allocation-failure paths
# and which are corners no check reaches yet.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cases="${1:-1000}"
dir="${2:-$root/build/coverage}"
case "$cases" in '' | *[!0-9]*) echo "coverage.sh: N_CASES must be a number" >&2; exit 2 ;; esac

cmake -S "$root" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DASSAY_BUILD_MUTANTS=OFF \
    -DCMAKE_C_FLAGS="--coverage" -DCMAKE_EXE_LINKER_FLAGS="--coverage" \
    -DCMAKE_SHARED_LINKER_FLAGS="--coverage" >/dev/null
cmake --build "$dir" --target assay fuzz_differential -j"$(nproc)" >/dev/null

objdir="$dir/CMakeFiles/assay_core.dir/engine"
if [ ! -d "$objdir" ]; then
    echo "coverage.sh: no objects of engine/ in $objdir" >&2
    exit 1
fi

# gcov's summary of every engine/ file: per file and in all.
report() {
    local title="$1" tmp
    tmp="$(mktemp -d)"
    (cd "$tmp" && for src in "$root"/engine/*.c; do
        gcov -b -o "$objdir/$(basename "$src").gcno" "$src" 2>/dev/null || true
    done) >"$tmp/summary.txt"
    echo "== coverage of engine/ after: $title"
    awk -v root="$root/engine/" '
        /^File / { f = $2; gsub(/\047/, "", f); keep = index(f, root) == 1; sub(root, "", f); next }
        !keep { next }
        /^Lines executed:/ {
            split($2, a, ":"); p = a[2]; sub(/%/, "", p); n = $4
            lines[f] = n; lhit[f] = p * n / 100 }
        /^Taken at least once:/ {
            split($4, a, ":"); p = a[2]; sub(/%/, "", p); n = $6
            br[f] = n; bhit[f] = p * n / 100 }
        END {
            for (f in lines) {
                printf "%-14s %6.0f/%-5d %5.1f%% %6.0f/%-5d %5.1f%%\n", f, lhit[f], lines[f],
                       lines[f] ? 100 * lhit[f] / lines[f] : 0, bhit[f], br[f],
                       br[f] ? 100 * bhit[f] / br[f] : 0
                tl += lines[f]; tlh += lhit[f]; tb += br[f]; tbh += bhit[f]
            }
            printf "%-14s %6.0f/%-5d %5.1f%% %6.0f/%-5d %5.1f%%\n", "engine/", tlh, tl,
                   tl ? 100 * tlh / tl : 0, tbh, tb, tb ? 100 * tbh / tb : 0
        }' "$tmp/summary.txt" | sort -k1,1 |
        awk 'BEGIN { printf "%-14s %16s %18s\n", "file", "lines", "branches taken" }
             /^engine\// { last = $0; next } { print } END { print last }'
    : >"$dir/uncovered.txt"
    for g in "$tmp"/*.c.gcov; do
        [ -e "$g" ] || continue
        awk -v f="engine/$(basename "$g" .gcov)" -F: '$1 ~ /#####/ { gsub(/ /, "", $2); print f ":" $2 }' \
            "$g" >>"$dir/uncovered.txt"
    done
    echo "   (lines not reached: $(wc -l <"$dir/uncovered.txt") in $dir/uncovered.txt)"
    rm -rf "$tmp"
}

find "$dir" -name '*.gcda' -delete
start=$(date +%s)
(cd "$dir" && ASSAY_FIXTURES="$root/fixtures" "$dir/assay" verify --repro-dir "$dir/repro" \
    >"$dir/verify.log" 2>&1) || {
    echo "coverage.sh: assay verify failed (see $dir/verify.log):" >&2
    tail -20 "$dir/verify.log" >&2
    exit 1
}
echo "   the verify plan ran in $(( $(date +%s) - start )) s"
report "the verify plan"

start=$(date +%s)
"$dir/suites/fuzz_differential" "$cases" 7 | grep '^# seed' || {
    echo "coverage.sh: the differential run failed" >&2
    exit 1
}
echo "   $cases differential cases ran in $(( $(date +%s) - start )) s"
report "the verify plan and $cases more differential cases"
