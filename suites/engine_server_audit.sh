#!/bin/sh
# engine_server_audit.sh - `assay audit` end to end against suites/engine_server:
# start the server on a port the kernel picks, audit it, stop it (also when
# the audit fails or this script is interrupted), and require the audit's
# exit status.
#
#   engine_server_audit.sh ENGINE_SERVER ASSAY GGUF DIR EXPECT [SPEC_KEYS [AUDIT_ARGS...]]
#
# ENGINE_SERVER and ASSAY are the built programs, GGUF the file served and
# audited, DIR a scratch folder (the port file, the server's log, the
# report), EXPECT the audit's exit status that passes (0: every check
# passed; 1: a check failed, for a planted bug), SPEC_KEYS more keys of the
# bundled spec (e.g. mutant=softmax-twice), AUDIT_ARGS more audit options.
# The audit runs with --quick --no-bench and the server's numerics (f32 KV
# cache, no flash attention: the bundled engine's exact arithmetic).
# Prints the audit's table, the server's log, and the time both took.
set -u
if [ $# -lt 5 ]; then
    echo "usage: $0 ENGINE_SERVER ASSAY GGUF DIR EXPECT [SPEC_KEYS [AUDIT_ARGS...]]" >&2
    exit 2
fi
server=$1 assay=$2 gguf=$3 dir=$4 expect=$5
keys=${6:-}
shift 5
[ $# -gt 0 ] && shift
spec="bundled:model=$gguf,order=sequential${keys:+,$keys}"

rm -rf "$dir" && mkdir -p "$dir" || exit 2
pid=
stop() {
    if [ -n "$pid" ]; then
        kill -TERM "$pid" 2>/dev/null
        wait "$pid"
        rc=$?
        pid=
        echo "engine_server exited with status $rc"
        return $rc
    fi
    return 0
}
trap 'stop; exit 2' INT TERM HUP

start=$(date +%s)
"$server" --engine "$spec" --port-file "$dir/port" >"$dir/server.log" 2>&1 &
pid=$!
i=0
while [ ! -s "$dir/port" ]; do
    if ! kill -0 "$pid" 2>/dev/null; then
        echo "engine_server did not start:" >&2
        cat "$dir/server.log" >&2
        pid=
        exit 2
    fi
    i=$((i + 1))
    if [ $i -gt 600 ]; then
        echo "engine_server wrote no port file within 60 s" >&2
        stop
        exit 2
    fi
    sleep 0.1
done
port=$(cat "$dir/port")

"$assay" audit --url "http://127.0.0.1:$port" --model "$gguf" --api completion --quick \
    --no-bench --kv-type f32 --flash-attn off --out "$dir/report" "$@" >"$dir/audit.txt" 2>&1
status=$?
stop
server_rc=$?
end=$(date +%s)
cat "$dir/audit.txt"
echo "--- engine_server log"
cat "$dir/server.log"
echo "audit exit status $status (expected $expect), $((end - start)) s in all"
if [ "$server_rc" -ne 0 ]; then
    echo "FAIL: engine_server did not stop cleanly (status $server_rc)" >&2
    exit 1
fi
if [ "$status" -ne "$expect" ]; then
    echo "FAIL: the audit exited with $status, expected $expect" >&2
    exit 1
fi
exit 0
