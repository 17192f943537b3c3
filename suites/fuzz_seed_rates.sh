#!/bin/sh
# fuzz_seed_rates.sh ASSAY_MUTANTS SEEDS MIN OUTDIR [NAME...] - equiv.fuzz's
# catch of each planted bug under the master seeds 1..SEEDS (`assay-mutants
# mutants --matrix --check equiv.fuzz --fuzz-seeds SEEDS`): every bug that
# it catches under any seed must be caught under at least MIN of them, so
# that no catch rests on one seed's luck. With NAMEs, those bugs (each must
# then be caught); without, every planted bug of the engine (the families
# equivalence, seeded, property and dies, but pool-dry-spin, which hangs
# each seed for the check's time limit), and the bugs it never catches are
# listed. The matrix (with each row's rate) is written to OUTDIR.
set -eu
[ $# -ge 4 ] || {
    echo "usage: $0 ASSAY_MUTANTS SEEDS MIN OUTDIR [NAME...]" >&2
    exit 2
}
mutants="$1"
seeds="$2"
min="$3"
out="$4"
shift 4
strict=0
if [ $# -eq 0 ]; then
    set -- $("$mutants" mutants --tsv |
        awk -F '\t' '($2 == "equivalence" || $2 == "seeded" || $2 == "property") &&
            $1 != "pool-dry-spin" { print $1 }')
else
    strict=1
fi
args=""
for m in "$@"; do
    args="$args --mutant $m"
done
rm -rf "$out"
# shellcheck disable=SC2086
"$mutants" mutants --matrix --check equiv.fuzz --fuzz-seeds "$seeds" --timeout 300 \
    --out "$out" $args >"$out.txt"
cat "$out.txt"
# Rows: a bug's line, then its rate line ("... under K of N master seeds").
awk -v min="$min" -v strict="$strict" '
    /^planted bug/ || /^wrote/ { next }
    /master seeds/ { match($0, /catches it under [0-9]+ of/); n = substr($0, RSTART + 17, RLENGTH - 20)
                     a[1] = n + 0; rows++
                     if (a[1] == 0) { never = never " " bug; if (strict) low = low " " bug " (0)" }
                     else if (a[1] < min) low = low " " bug " (" a[1] ")"
                     next }
    { bug = $1 }
    END {
        if (never != "") print "fuzz_seed_rates: never caught by equiv.fuzz:" never
        if (low != "") { print "fuzz_seed_rates: caught under fewer than " min " seeds:" low; exit 1 }
        if (rows == 0) { print "fuzz_seed_rates: no rows"; exit 1 }
        print "fuzz_seed_rates: " rows " bugs; each one caught is caught under at least " min " of the seeds"
    }' "$out.txt"
