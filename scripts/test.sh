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

# Builds that later steps need, started now in the background at the
# lowest priority, one after the other in the order the steps need them:
# llama.cpp's server and tools (the audit label), the fuzz targets (the
# fuzz label), the sanitizer build (the asan step). On two cores the labels
# leave cycles idle (a label's last long test, an audit waiting on its
# server, the hangs a planted bug must run into its time limit); a build
# in the SCHED_IDLE class takes those and gives the core back the moment a
# test's thread wakes. (At nice 19 it did not: a distributional planted
# bug's test took 118 s beside two nice-19 loops, 63 s beside two
# SCHED_IDLE ones, 46 s alone.) It is not free even so: the gaps it fills
# are a test's threads handing work to each other, and each leaves caches
# cold, so the labels beside it run longer (about 6 minutes in all, against
# 11 of builds taken out of the foreground: the record
# docs/measurements/2026-12-07-ci-time-cells.md), and the label times
# printed are not the labels' own. Each step waits for its own build first.
# A build that failed here only loses its head start: the step builds
# again in the foreground and shows the error as before. Logs:
# build/test/background/NAME.log.
background=build/test/background
rm -rf "$background"
mkdir -p "$background"
prebuild() { # NAME COMMAND...: run it as SCHED_IDLE; NAME.status holds its exit status
    local name="$1" rc=0
    shift
    chrt --idle 0 "$@" >"$background/$name.log" 2>&1 || rc=$?
    echo "$rc" >"$background/$name.status"
}
# Its own process group (set -m), ended with the script however it ends.
set -m
(
    prebuild llama sh -c 'scripts/build-llama-server.sh && scripts/build-llama-server.sh --quantize &&
        scripts/build-llama-server.sh --tensors'
    prebuild fuzz scripts/fuzz.sh build build/test/fuzz
    prebuild asan sh -c 'cmake --preset asan >/dev/null && cmake --build --preset asan'
) &
prebuilds=$!
set +m
trap 'kill -- -"$prebuilds" 2>/dev/null || true' EXIT
# await NAME: block until that background build has ended.
await() {
    local start=$SECONDS
    while [ ! -f "$background/$1.status" ] && kill -0 "$prebuilds" 2>/dev/null; do
        sleep 1
    done
    local rc
    rc="$(cat "$background/$1.status" 2>/dev/null || echo none)"
    echo "== background build $1: status $rc, waited $((SECONDS - start)) s"
}

# Every label that must pass, one after the other, each with its wall time.
# The calibration, mpi, fuzz and bench labels print figures (their tables)
# even when they pass; every label's full output is kept in
# build/test/Testing/Temporary/LastTest-LABEL.log.
status=0
# portability prints its table of kernel families; its planted bug
# (labels mutants and portability) runs once, with the mutants.
for label in unit verify mutants portability calibration mpi audit fuzz bench; do
    case "$label" in
    audit) await llama ;;
    fuzz) await fuzz ;;
    bench) await asan ;; # a benchmark runs on cores nothing else uses
    esac
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
