#!/usr/bin/env bash
# The installed package, as a plugin author meets it: `cmake --install` into
# a scratch prefix, the example plugin (examples/plugin) built from there
# with pkg-config alone, and the installed assay loading it.
#
#   install_plugin.sh CMAKE BUILD_DIR SOURCE_DIR WORK_DIR
#
# Checks: the installed headers compile on their own, as C and as C++; the
# plugin links nothing of assay (its only dependencies are libc and libm);
# the installed command finds its installed fixtures (ASSAY_FIXTURES unset)
# and verifies the plugin; `assay compare` on two plugin specs passes with
# the cache off against on (and shows the speed difference), and fails,
# naming the check, with the example's planted bug switched on.
set -euo pipefail

cmake="$1"
build="$2"
src="$3"
work="$4"

rm -rf "$work"
mkdir -p "$work"
prefix="$work/prefix"
"$cmake" --install "$build" --prefix "$prefix" >"$work/install.log"

pcdir=$(dirname "$(find "$prefix" -name assay.pc | head -n 1)")
export PKG_CONFIG_PATH="$pcdir"
echo "== pkg-config --cflags --libs assay: $(pkg-config --cflags --libs assay)"

# The public headers stand alone, in C and in C++ (a C++ engine team
# includes them as they are).
for lang in c c++; do
    compiler=cc
    [ "$lang" = c++ ] && compiler=c++
    printf '#include <assay/adapters/plugin.h>\nint main(void) { return ASSAY_ADAPTER_ABI_VERSION - 1; }\n' |
        "$compiler" -x "$lang" -Wall -Wextra -Werror $(pkg-config --cflags assay) -o "$work/hdr-$lang" -
done
echo "== the installed headers compile as C and as C++"

make -s -C "$src/examples/plugin" OUT="$work/toy" CC=cc
plugin="$work/toy/libtoy_engine.so"
needed=$(readelf -d "$plugin" | awk '/NEEDED/ {print $5}' | tr -d '[]' | sort | tr '\n' ' ')
echo "== the plugin needs: $needed"
for lib in $needed; do
    case "$lib" in
        libc.so.*|libm.so.*) ;;
        *) echo "FAIL: the example plugin depends on $lib" >&2; exit 1 ;;
    esac
done

assay="$prefix/bin/assay"
unset ASSAY_FIXTURES
cd "$work"

echo "== verify with the installed command and its installed fixtures"
"$assay" verify --engine "plugin:$plugin:cache=on" --family property | tee verify.out
grep -q "prop.isolation-blackbox *property *PASS" verify.out

echo "== compare: cache off (baseline) against cache on (candidate)"
set +e
"$assay" compare "plugin:$plugin:cache=off,work=400" "plugin:$plugin:cache=on,work=400" \
    --workload workloads/compare-small.json --rate 1000 --pairs 10 --out "$work/ok" | tee ok.out
rc=${PIPESTATUS[0]}
set -e
[ "$rc" -eq 0 ] || { echo "FAIL: compare of a correct optimisation exited $rc" >&2; exit 1; }
grep -q "^CORRECT, FASTER" ok.out
grep -q '"speed":[[:space:]]*"faster"' "$work/ok/report.json"
grep -q "compare.greedy *equivalence *PASS" ok.out
# No weights for a plugin: SKIP, never PASS (on its own row, or named
# under a row of SKIPs that share their reason).
grep -q "^compare.oracle *equivalence *SKIP" ok.out ||
    awk '/checks, named below *SKIP/ { getline; if ($0 ~ /(^| )compare\.oracle(,|$)/) f = 1 }
         END { exit !f }' ok.out

echo "== compare: the same with the example's planted bug (stale state in a reused slot)"
set +e
"$assay" compare "plugin:$plugin:cache=off" "plugin:$plugin:cache=on,bug=stale-state" \
    --workload workloads/compare-small.json --pairs 2 --shrink-seconds 20 --out "$work/bug" |
    tee bug.out
rc=${PIPESTATUS[0]}
set -e
[ "$rc" -eq 1 ] || { echo "FAIL: compare of a broken candidate exited $rc, not 1" >&2; exit 1; }
grep -q "^INCORRECT: compare.greedy failed" bug.out
grep -q "compare.greedy *equivalence *FAIL" bug.out
test -s "$work/bug/repro-compare.greedy.json"
echo "PASS"
