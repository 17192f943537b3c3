#!/usr/bin/env bash
# The sanitizer and leak runs CI makes after the labels (scripts/test.sh).
#
#   scripts/sanitize.sh asan       the asan preset (AddressSanitizer with
#                                  LeakSanitizer, and UndefinedBehaviorSanitizer;
#                                  a Debug build in build/asan): the unit and
#                                  verify labels, and the mutants below
#   scripts/sanitize.sh valgrind   valgrind memcheck on the test preset's build
#                                  (build/test, which scripts/test.sh builds):
#                                  the unit and verify tests below
#   scripts/sanitize.sh ... CTEST-ARGS   extra ctest arguments (-R, -V, ...)
#
# Any sanitizer report, valgrind error or definite or indirect leak fails
# the test it happens in (ASan and UBSan abort; valgrind exits 99). The
# commands the tests start (assay, in test_report, test_bad_inputs and
# test_server_faults) are sanitizer builds too under asan; under valgrind
# only the test programs themselves are checked.
#
# What runs (each subset chosen to keep CI within its time; see the
# figures in the comments):
#   asan: every unit and verify test but the two distributional verify
#     programs; the mutants catalog, the eight property mutants (a second or
#     two each), two equivalence mutants and one distributional mutant -
#     every family's planted bug still caught under the sanitizers without
#     the 10-minute distributional ones. The distributional verify programs
#     (252 and 163 s under ASan) run the code that test_distributional and
#     test_stats run under ASan too, with far more samples; they run in the
#     verify label without sanitizers.
#   valgrind: the unit tests whose code is not pure number crunching
#     (core, gguf, sse, property, distributional, openai with its HTTP
#     server, bench, stamp, the mutants catalog) and, of the verify label,
#     block conservation and trace consistency (memcheck_verify_property:
#     prop.blocks, prop.blocks-spec, prop.trace, on the mini model). Left to
#     the asan run: test_engine, test_stats and the equivalence,
#     distributional, isolation and soak checks, which spend their time in
#     BLAS and GSL loops on TinyGPT (prop.isolation alone ran over 9 minutes
#     under valgrind), and test_faults (about 5 minutes under valgrind, the
#     step's longest pole: it fails every allocation in turn, and ASan's
#     leak checker sees each of those paths in the asan run). The rest
#     in two groups, one per core, of about equal length (under 4 minutes
#     each here).
#     OPENBLAS_CORETYPE=Haswell, since valgrind cannot run OpenBLAS's AVX-512
#     kernels.
set -euo pipefail
cd "$(dirname "$0")/.."

step="${1:-}"
[ $# -gt 0 ] && shift

ASAN_MUTANTS='^mutants_catalog$|^mutant\.(abort-double-free|evictable-counted-free|prefix-entry-dangling|preempt-resets-boundary|abort-leaks-blocks|admit-ignores-promised|padding-row-nan|spec-rollback-leak|attn-neighbour-leak|chunk-rope-off-by-one|unseeded-steals-seeds)$'
VALGRIND_A='^(test_gguf|test_model_gguf|test_openai|test_sse|test_stamp|mutants_catalog|test_core|memcheck_verify_property|test_bench|test_bench_stats)$'
VALGRIND_B='^(test_property|test_distributional)$'

case "$step" in
    asan)
        cmake --preset asan >/dev/null
        cmake --build --preset asan
        export ASAN_OPTIONS="detect_leaks=1"
        export UBSAN_OPTIONS="print_stacktrace=1"
        status=0
        ctest --preset asan -L '^(unit|verify)$' -E '^verify_distributional_|^check_docs' "$@" ||
            status=1
        ctest --preset asan -R "$ASAN_MUTANTS" "$@" || status=1
        exit $status
        ;;
    valgrind)
        if ! command -v valgrind >/dev/null 2>&1; then
            echo "sanitize.sh: valgrind is not installed (scripts/setup.sh --valgrind)" >&2
            exit 1
        fi
        [ -d build/test ] || { cmake --preset test >/dev/null && cmake --build --preset test; }
        # Slow runs: the tests' upper time bounds are scaled by this.
        export ASSAY_TEST_TIME_SCALE=40
        export OPENBLAS_CORETYPE=Haswell
        # Two groups of about equal length, one per core; each test has an
        # hour (scripts/memcheck.cmake: ctest -T memcheck would keep the
        # tests' own time limits, which valgrind overruns).
        status=0
        cmake -DBUILD_DIR=build/test -DTESTS="$VALGRIND_A" -P scripts/memcheck.cmake &
        a=$!
        cmake -DBUILD_DIR=build/test -DTESTS="$VALGRIND_B" -P scripts/memcheck.cmake || status=1
        wait $a || status=1
        exit $status
        ;;
    *)
        sed -n '2,36p' "$0" | sed 's/^# \{0,1\}//' >&2
        exit 2
        ;;
esac
