#!/usr/bin/env bash
# Builds assay with its tests and runs them: the command CI runs.
#
#   scripts/test.sh                 every label CI runs (see below)
#   scripts/test.sh -L verify       only some labels (any ctest arguments)
#
# Installs missing Debian packages first (scripts/setup.sh), configures the
# `test` preset into build/test, builds, and runs ctest. Safe to run again:
# the build is incremental and llama.cpp's server is built once into a cache
# outside the checkout.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh --audit --browser --fuzz --valgrind

cmake --preset test >/dev/null
cmake --build --preset test

if [ $# -gt 0 ]; then
    ctest --preset test "$@"
    exit
fi

# Every label that must pass, one after the other, each with its wall time.
# The calibration, mpi, fuzz and bench labels print figures (their tables)
# even when they pass; every label's full output is kept in
# build/test/Testing/Temporary/LastTest-LABEL.log.
status=0
# portability prints its table of kernel families; its planted bug
# (labels mutants and portability) runs once, with the mutants.
for label in unit verify mutants portability calibration mpi audit fuzz bench; do
    start=$(date +%s)
    extra=()
    case "$label" in calibration | fuzz | bench | portability | mpi) extra=(--verbose) ;; esac
    [ "$label" = portability ] && extra+=(-LE '^mutants$')
    if ctest --preset test -L "^${label}\$" --no-tests=ignore "${extra[@]}"; then
        result=passed
    else
        result=FAILED
        status=1
    fi
    cp build/test/Testing/Temporary/LastTest.log \
        "build/test/Testing/Temporary/LastTest-${label}.log" 2>/dev/null || true
    echo "== label ${label}: ${result} in $(( $(date +%s) - start )) s"
done
# Sanitizers and leaks (scripts/sanitize.sh): the asan preset (build/asan)
# runs the unit and verify labels and a subset of the mutants; valgrind
# memcheck runs a subset of the unit and verify tests of build/test.
for step in asan valgrind; do
    start=$(date +%s)
    if scripts/sanitize.sh "$step"; then
        result=passed
    else
        result=FAILED
        status=1
    fi
    echo "== ${step}: ${result} in $(( $(date +%s) - start )) s"
done
exit $status
