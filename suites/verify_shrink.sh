#!/usr/bin/env bash
# A failing run prints a shrunk reproducer that works when pasted, through
# the built command as a user meets it:
#
#   verify_shrink.sh ASSAY_MUTANTS WORK_DIR
#
# assay verify on a planted bug (an aborted request's blocks freed twice)
# must fail (exit 1), shrink the failing case, write the reproducer into
# --repro-dir and print its command; that command, pasted, must fail again
# (exit 1) on a case smaller than the fixture's 40 requests. assay run must
# do the same into its --out folder and put the shrunk command in the
# report's JSON; --no-shrink must leave the full case's command.
set -euo pipefail

assay="$1"
work="$2"
rm -rf "$work"
mkdir -p "$work"
cd "$work"
fail() { echo "verify_shrink: $*" >&2; exit 1; }

engine='bundled:mutant=abort-double-free'
status=0
"$assay" verify --engine "$engine" --check prop.blocks --repro-dir repro >out.txt 2>&1 || status=$?
cat out.txt
[ "$status" -eq 1 ] || fail "assay verify exited $status, expected 1"
grep -q "prop.blocks shrunk in" out.txt || fail "no shrink reported"
line=$(sed -n 's/^    reproduce: //p' out.txt)
[ -n "$line" ] || fail "no reproduce line"
case "$line" in *"--workload repro/repro-prop.blocks.json"*) ;; *) fail "the command does not name the reproducer: $line" ;; esac
requests=$(grep -o '"id"' repro/repro-prop.blocks.json | wc -l)
[ "$requests" -ge 1 ] && [ "$requests" -lt 40 ] || fail "the reproducer holds $requests requests"
echo "pasting: $line"
status=0
eval "$line" >pasted.txt 2>&1 || status=$?
cat pasted.txt
[ "$status" -eq 1 ] || fail "the pasted reproducer exited $status, expected 1"
grep -q "prop.blocks .*FAIL" pasted.txt || fail "the pasted reproducer did not fail prop.blocks"

status=0
"$assay" run --no-bench --engine "$engine" --check prop.blocks --out report >run.txt 2>&1 || status=$?
[ "$status" -eq 1 ] || { cat run.txt; fail "assay run exited $status, expected 1"; }
[ -f report/repro-prop.blocks.json ] || fail "assay run wrote no reproducer"
grep -q 'report/repro-prop.blocks.json' report/report.json || fail "the report does not carry the shrunk command"

status=0
"$assay" verify --engine "$engine" --check prop.blocks --no-shrink --repro-dir none >full.txt 2>&1 ||
    status=$?
[ "$status" -eq 1 ] || fail "assay verify --no-shrink exited $status, expected 1"
[ ! -e none ] || fail "--no-shrink wrote a reproducer"
grep -q -- "--workload .*prop-blocks.json" full.txt || fail "--no-shrink did not give the fixture's command"
echo "verify_shrink: shrunk to $requests requests; the pasted command failed again"
