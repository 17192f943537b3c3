#!/usr/bin/env bash
# The MPI run (checks/shard.h) against the one-process run, and its faults.
#
#   suites/mpi.sh identical ASSAY ASSAY_MUTANTS OUT
#       The verify plan's distributional checks (the oracle-heavy ones) at
#       1, 2 and 3 ranks (--oversubscribe): every check's every field but
#       its wall time must be the same, and the stamp must name the rank
#       count. Then a planted bug (spec-accept-q-over-p) at 1 and 2 ranks:
#       the same FAILs, the same figures. Then the shared equivalence checks
#       (rank 0 runs the engine, the ranks share the oracle's passes) at 1
#       and 2 ranks: the same results, and rank 0 received rows; and a planted
#       bug (chunk-rope-off-by-one) at 1 and 2 ranks: the same FAILs.
#   suites/mpi.sh audit ASSAY ENGINE_SERVER EXPORT_GGUF OUT
#       `assay audit` of suites/engine_server (the bundled engine served as
#       llama-server speaks) on TinyGPT: the shared equivalence checks the
#       same at 1 and 2 ranks, with rows received by rank 0; and ranks given
#       unequal memory (ASSAY_MEM_AVAILABLE) choose alike how to hold the
#       weights (the least share: no bundled engine on either).
#   suites/mpi.sh killed ASSAY OUT
#       A rank killed (SIGKILL) in the middle of the checks: the run must
#       end non-zero, within a minute, with no report written.
#   suites/mpi.sh check-killed ASSAY OUT
#       The process of rank 1's running check killed (SIGKILL), the rank
#       itself alive: that check must FAIL, its failure saying it died on
#       rank 1, every later check must still run and pass, and the report
#       must be written (exit status 1).
#   suites/mpi.sh hung ASSAY OUT
#       A rank stopped (SIGSTOP) in the middle: with ASSAY_RANK_TIMEOUT=8,
#       the others must end the run with the message that says so, and no
#       report.
set -euo pipefail

mode="$1"
shift
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Loopback only: no interface probing on a machine without a network.
export OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
command -v mpirun >/dev/null || { echo "mpirun not found (scripts/setup.sh installs openmpi-bin)"; exit 1; }
command -v jq >/dev/null || { echo "jq not found (scripts/setup.sh installs it)"; exit 1; }

fail() {
    echo "FAIL: $*"
    exit 1
}

# The checks of a report, without what may differ between runs.
checks_of() {
    jq -S '[.checks[] | del(.seconds)]' "$1/report.json"
}

# shared_same PREFIX WHAT ARGS...: `assay ARGS... --out PREFIXn` under
# mpirun at 1 and 2 ranks, for checks whose oracle passes are shared (rank
# 0 runs the engine, every rank computes its share of the oracle's rows,
# rank 0 judges): the same results at both, and rank 0 received rows from
# rank 1 (a run where rank 0 computed them all would pass the comparison).
shared_same() {
    local prefix="$1" what="$2" n
    shift 2
    for n in 1 2; do
        mpirun --oversubscribe -n "$n" "$assay" "$@" --out "$prefix$n" \
            >"$prefix$n.txt" 2>"$prefix$n.err" ||
            { cat "$prefix$n.err"; fail "$what at $n ranks: status $?"; }
        checks_of "$prefix$n" >"$prefix$n.checks"
    done
    diff -u "${prefix}1.checks" "${prefix}2.checks" ||
        fail "$what at 2 ranks differ from 1 rank"
    grep -q 'MB sent and [0-9.e+]*[1-9][0-9.e+]* MB received by rank 0' "${prefix}2.err" ||
        { cat "${prefix}2.err"; fail "rank 0 received no rows from rank 1 in $what"; }
    echo "$what: the same at 1 and 2 ranks, rank 1's oracle rows received by rank 0"
}

# planted MUTANT PREFIX CHECK_ARGS...: the planted bug at 1 and 2 ranks
# (assay-mutants, $mutants): status 1, both checks FAIL, the same results.
planted() {
    local m="$1" pre="$2" n rc
    shift 2
    for n in 1 2; do
        set +e
        mpirun --oversubscribe -n "$n" "$mutants" run --no-bench --engine "bundled:mutant=$m" \
            "$@" --no-shrink --out "$pre$n" >"$pre$n.txt" 2>"$pre$n.err"
        rc=$?
        set -e
        [ "$rc" = 1 ] || { cat "$pre$n.err"; fail "$m at $n ranks: status $rc, not 1"; }
        checks_of "$pre$n" >"$pre$n.checks"
    done
    [ "$(jq '[.checks[] | select(.verdict == "FAIL")] | length' "${pre}1/report.json")" = 2 ] ||
        fail "$m: not both checks FAIL at 1 rank"
    diff -u "${pre}1.checks" "${pre}2.checks" ||
        fail "$m: the checks at 2 ranks differ from those at 1 rank"
    echo "$m: both checks FAIL, the same at 1 and 2 ranks"
}

case "$mode" in
identical)
    assay="$1" mutants="$2" out="$3"
    rm -rf "$out"
    mkdir -p "$out"
    for n in 1 2 3; do
        start=$(date +%s)
        mpirun --oversubscribe -n "$n" "$assay" run --no-bench --family distributional \
            --seed 7 --out "$out/n$n" >"$out/n$n.txt" 2>"$out/n$n.err" ||
            { cat "$out/n$n.err"; fail "the run at $n ranks ended with status $?"; }
        end=$(date +%s)
        ranks="$(jq '.stamp.ranks' "$out/n$n/report.json")"
        [ "$ranks" = "$n" ] || fail "the stamp of the run at $n ranks says ranks $ranks"
        printf "%d ranks: %4d s, %s checks\n" "$n" "$((end - start))" \
            "$(jq '.checks | length' "$out/n$n/report.json")"
    done
    [ "$(jq '.checks | length' "$out/n1/report.json")" -ge 7 ] ||
        fail "fewer distributional checks ran than the plan has"
    checks_of "$out/n1" >"$out/n1.checks"
    for n in 2 3; do
        checks_of "$out/n$n" >"$out/n$n.checks"
        if ! diff -u "$out/n1.checks" "$out/n$n.checks" >"$out/n$n.diff"; then
            head -40 "$out/n$n.diff"
            fail "the checks at $n ranks differ from those at 1 rank"
        fi
    done
    echo "1, 2 and 3 ranks: every count, statistic, p-value and verdict the same"
    # A planted bug is caught the same way at any rank count.
    planted spec-accept-q-over-p "$out/m" --check dist.pit.spec --check dist.spec.acceptance
    # The shared equivalence checks: rank 0 runs the engine, every rank
    # computes its share of the oracle's passes, rank 0 judges.
    eq=(--check equiv.kv-cache --check equiv.batching --check equiv.paged
        --check equiv.preemption --check equiv.prefix-cache --check equiv.chunked-prefill
        --check equiv.spec-k4)
    shared_same "$out/e" "the equivalence checks" run --no-bench "${eq[@]}" --seed 7
    planted chunk-rope-off-by-one "$out/q" --check equiv.chunked-prefill --check equiv.all-mixed
    # compare's check against the oracle is shared the same way.
    shared_same "$out/c" "compare.oracle" compare "bundled:model=tinygpt,kv=off" \
        "bundled:model=tinygpt,kv=paged" --check compare.oracle --no-bench
    ;;
audit)
    assay="$1" server="$2" export="$3" out="$4"
    rm -rf "$out"
    mkdir -p "$out"
    "$export" "$out/tiny.gguf" tinygpt 1 >"$out/export.txt" 2>&1 ||
        { cat "$out/export.txt"; fail "export_gguf failed"; }
    gguf="$out/tiny.gguf"
    "$server" --engine "bundled:model=$gguf,order=sequential" --port-file "$out/port" \
        >"$out/server.log" 2>&1 &
    spid=$!
    trap 'kill "$spid" 2>/dev/null || true' EXIT
    for _ in $(seq 1 600); do
        [ -s "$out/port" ] && break
        kill -0 "$spid" 2>/dev/null || { cat "$out/server.log"; fail "engine_server did not start"; }
        sleep 0.1
    done
    [ -s "$out/port" ] || fail "engine_server wrote no port file within 60 s"
    url="http://127.0.0.1:$(cat "$out/port")"
    audit=(audit --url "$url" --model "$gguf" --quick --no-bench --kv-type f32 --flash-attn off)
    # The shared equivalence checks against a server: rank 0 sends the
    # requests, the ranks share the oracle's passes.
    shared_same "$out/a" "the audit's equivalence checks" "${audit[@]}" \
        --check audit.equiv.alone --check audit.equiv.concurrent
    # The ranks choose how to hold the weights alike: rank 0 has the memory
    # for the bundled engine, rank 1 (the same machine: half of it) not, so
    # neither runs the engine and the two-sample test is a SKIP on both.
    set +e
    mpirun --oversubscribe -n 1 -x ASSAY_MEM_AVAILABLE=100000000000 "$assay" "${audit[@]}" \
        --check audit.dist.homogeneity --out "$out/m" : \
        -n 1 -x ASSAY_MEM_AVAILABLE=1000000 "$assay" "${audit[@]}" \
        --check audit.dist.homogeneity --out "$out/m" >"$out/m.txt" 2>"$out/m.err"
    rc=$?
    set -e
    got="$(jq -r '[(.checks[] | "\(.name) \(.verdict)"), .audit.bundled_engine] | join(", ")' \
        "$out/m/report.json" 2>/dev/null)" || got="no report"
    [ "$rc" = 0 ] && [ "$got" = "audit.dist.homogeneity SKIP, false" ] ||
        { cat "$out/m.err"; fail "ranks with unequal memory: exit $rc, $got"; }
    echo "unequal memory: both ranks without the bundled engine ($got)"
    ;;
killed | hung | check-killed)
    assay="$1" out="$2"
    rm -rf "$out"
    mkdir -p "$out"
    extra=()
    [ "$mode" = hung ] && extra=(-x ASSAY_RANK_TIMEOUT=8)
    start=$(date +%s)
    mpirun --oversubscribe -n 2 "${extra[@]}" "$assay" run --no-bench --family distributional \
        --out "$out/report" >"$out/run.txt" 2>"$out/run.err" &
    launcher=$!
    # Rank 1's process: the one whose environment says so.
    victim=""
    for _ in $(seq 1 200); do
        for pid in $(pgrep -f -- "--out $out/report" || true); do
            if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=1' &&
                [ "$(ps -o comm= -p "$(ps -o ppid= -p "$pid" | tr -d ' ')")" != assay ]; then
                victim=$pid
            fi
        done
        [ -n "$victim" ] && break
        sleep 0.1
    done
    [ -n "$victim" ] || { kill "$launcher" 2>/dev/null; fail "rank 1's process never appeared"; }
    sleep 5 # inside the checks
    if [ "$mode" = check-killed ]; then
        # The rank's child: the check it is running. A child that has
        # already exited (a zombie its rank has not yet reaped) is passed
        # over: killing it would do nothing, and the run would pass.
        child=""
        for _ in $(seq 1 100); do
            for c in $(pgrep -P "$victim" -x assay || true); do
                case "$(ps -o stat= -p "$c" 2>/dev/null || echo Z)" in
                Z* | " Z"*) ;;
                *) child=$c && break ;;
                esac
            done
            [ -n "$child" ] && break
            sleep 0.05
        done
        [ -n "$child" ] || { kill "$launcher" 2>/dev/null; fail "rank 1 ran no check process"; }
        victim=$child
    fi
    if [ "$mode" = killed ] || [ "$mode" = check-killed ]; then
        kill -KILL "$victim"
    else
        kill -STOP "$victim"
    fi
    set +e
    wait "$launcher"
    rc=$?
    set -e
    took=$(( $(date +%s) - start ))
    [ "$mode" = hung ] && kill -KILL "$victim" 2>/dev/null || true
    echo "rank 1 ${mode}: mpirun ended with status $rc after ${took} s"
    tail -5 "$out/run.err"
    if [ "$mode" = check-killed ]; then
        [ "$rc" = 1 ] || fail "the run ended with status $rc, not 1 (a check FAILs)"
        [ -e "$out/report/report.json" ] || fail "no report"
        jq -r '.checks[] | "\(.name) \(.verdict) \(.failure // "")"' "$out/report/report.json" |
            cut -c1-200
        [ "$(jq '[.checks[] | select(.verdict == "FAIL")] | length' "$out/report/report.json")" = 1 ] ||
            fail "not exactly one check FAILs"
        jq -e '.checks[] | select(.verdict == "FAIL") | .failure | test("^on rank 1 of 2: .*signal 9")' \
            "$out/report/report.json" >/dev/null || fail "the FAIL does not say rank 1's check died"
        n_checks="$(jq '.checks | length' "$out/report/report.json")"
        [ "$n_checks" -gt 1 ] || fail "the report has $n_checks checks"
        [ "$(jq '[.checks[] | select(.verdict == "PASS")] | length' "$out/report/report.json")" = \
            "$((n_checks - 1))" ] || fail "the other $((n_checks - 1)) checks did not all PASS"
        echo "the killed check FAILs on rank 1, the others pass, the report is written"
        exit 0
    fi
    [ "$rc" != 0 ] || fail "the run ended with status 0"
    [ "$took" -lt 120 ] || fail "the run took ${took} s to end"
    [ ! -e "$out/report/report.json" ] || fail "a report was written from part of the ranks"
    if [ "$mode" = hung ]; then
        grep -q "did not reach" "$out/run.err" || fail "no message says a rank did not answer"
    fi
    if pgrep -f -- "--out $out/report" >/dev/null; then
        fail "processes of the run are left behind: $(pgrep -f -- "--out $out/report" | tr '\n' ' ')"
    fi
    echo "no verdict, no report: as it must"
    ;;
*)
    fail "unknown mode '$mode'"
    ;;
esac
