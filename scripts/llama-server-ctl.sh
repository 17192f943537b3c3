#!/usr/bin/env bash
# Starts and stops llama.cpp's llama-server for the audit, on 127.0.0.1 on a
# free port, with several parallel slots and continuous batching.
#
#   llama-server-ctl.sh start STATE_DIR MODEL.gguf [extra llama-server args...]
#   llama-server-ctl.sh stop STATE_DIR
#   llama-server-ctl.sh status STATE_DIR
#
# start builds llama-server or reuses it (scripts/build-llama-server.sh),
# lets the kernel pick the port (--port 0, read back from the server's log),
# waits until GET /health answers {"status":"ok"}, and writes into STATE_DIR:
#   url    http://127.0.0.1:PORT      pid    the server's process id
#   log    the server's output        cmd    the command line it ran
# A watchdog stops the server when the process that started it (the owner:
# ASSAY_OWNER_PID, else the caller, e.g. ctest) is gone, or after
# ASSAY_LLAMA_MAX_SECONDS (default 3600), so an interrupted run leaves no
# server behind. stop ends the server it started (by its recorded pid,
# checked to still be that llama-server): SIGTERM, then SIGKILL after 10 s.
#
# Environment: ASSAY_LLAMA_SERVER (a llama-server binary to use instead of
# building one), ASSAY_LLAMA_NP (slots, default 4), ASSAY_LLAMA_THREADS
# (default 1: ggml's thread pool spins while it waits, and on a machine
# whose cores are busy with other work - a CI runner, ctest -j - two
# spinning threads made the audit 20 times slower than one),
# ASSAY_LLAMA_CTX_PER_SLOT (default 2048), ASSAY_LLAMA_READY_SECONDS
# (default 120).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"

die() {
    echo "llama-server-ctl: $*" >&2
    exit 1
}

usage() {
    echo "usage: $0 start STATE_DIR MODEL.gguf [llama-server args...] | stop STATE_DIR | status STATE_DIR" >&2
    exit 2
}

# True when pid $1 is alive and is a llama-server (not a recycled pid).
is_our_server() {
    local pid="$1"
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
    [ -r "/proc/$pid/cmdline" ] || return 0
    tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q "llama-server"
}

stop_server() {
    local dir="$1" pid="" wd=""
    [ -f "$dir/pid" ] && pid="$(cat "$dir/pid")"
    [ -f "$dir/watchdog" ] && wd="$(cat "$dir/watchdog")"
    if [ -n "$wd" ] && kill -0 "$wd" 2>/dev/null; then
        kill "$wd" 2>/dev/null || true
    fi
    if is_our_server "$pid"; then
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 1 100); do
            is_our_server "$pid" || break
            sleep 0.1
        done
        if is_our_server "$pid"; then
            echo "llama-server-ctl: pid $pid ignored SIGTERM for 10 s; sending SIGKILL" >&2
            kill -KILL "$pid" 2>/dev/null || true
        fi
        echo "llama-server-ctl: stopped llama-server (pid $pid)" >&2
    fi
    rm -f "$dir/pid" "$dir/url" "$dir/watchdog"
}

cmd="${1:-}"
[ $# -ge 2 ] || usage
dir="$2"

case "$cmd" in
stop)
    stop_server "$dir"
    exit 0
    ;;
status)
    pid="$(cat "$dir/pid" 2>/dev/null || true)"
    if is_our_server "$pid"; then
        echo "running: pid $pid, $(cat "$dir/url" 2>/dev/null)"
        exit 0
    fi
    echo "not running"
    exit 1
    ;;
start) ;;
*) usage ;;
esac

[ $# -ge 3 ] || usage
model="$3"
shift 3
[ -f "$model" ] || die "no model file at $model (export one: export_gguf OUT.gguf tinygpt 1)"
command -v curl >/dev/null 2>&1 || die "'curl' is required to wait for /health"

mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"
stop_server "$dir" # a stale server from an interrupted run

if [ -n "${ASSAY_LLAMA_SERVER:-}" ]; then
    bin="$ASSAY_LLAMA_SERVER"
else
    bin="$("$here/build-llama-server.sh" | tail -n 1)"
fi
[ -x "$bin" ] || die "no llama-server binary at '$bin'"

np="${ASSAY_LLAMA_NP:-4}"
threads="${ASSAY_LLAMA_THREADS:-1}"
ctx=$((np * ${ASSAY_LLAMA_CTX_PER_SLOT:-2048}))
owner="${ASSAY_OWNER_PID:-$PPID}"
max_s="${ASSAY_LLAMA_MAX_SECONDS:-3600}"
ready_s="${ASSAY_LLAMA_READY_SECONDS:-120}"

args=(-m "$model" --host 127.0.0.1 --port 0 -np "$np" -cb -c "$ctx" -t "$threads" --metrics "$@")
printf '%q ' "$bin" "${args[@]}" >"$dir/cmd"
echo >>"$dir/cmd"
: >"$dir/log"
# Detached from our stdout/stderr: ctest waits for a fixture's output to close.
setsid "$bin" "${args[@]}" </dev/null >"$dir/log" 2>&1 &
pid=$!
echo "$pid" >"$dir/pid"

# The watchdog: ends the server when its owner is gone or time is up.
setsid bash -c '
    pid=$1; owner=$2; max_s=$3; t=0
    while kill -0 "$pid" 2>/dev/null; do
        [ "$(cut -d" " -f3 "/proc/$pid/stat" 2>/dev/null)" = Z ] && exit 0
        if ! kill -0 "$owner" 2>/dev/null || [ "$t" -ge "$max_s" ]; then
            kill -TERM "$pid" 2>/dev/null; sleep 5; kill -KILL "$pid" 2>/dev/null; exit 0
        fi
        sleep 1; t=$((t + 1))
    done' llama-watchdog "$pid" "$owner" "$max_s" </dev/null >/dev/null 2>&1 &
echo $! >"$dir/watchdog"

fail_start() {
    echo "llama-server-ctl: $1; the end of $dir/log:" >&2
    tail -n 20 "$dir/log" >&2 || true
    stop_server "$dir"
    exit 1
}

port=""
for _ in $(seq 1 $((ready_s * 10))); do
    kill -0 "$pid" 2>/dev/null || fail_start "llama-server exited during start-up"
    port="$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9][0-9]*\).*/\1/p' "$dir/log" | head -n 1)"
    [ -n "$port" ] && break
    sleep 0.1
done
[ -n "$port" ] || fail_start "no 'listening on' line after ${ready_s} s"
url="http://127.0.0.1:$port"
for _ in $(seq 1 $((ready_s * 10))); do
    kill -0 "$pid" 2>/dev/null || fail_start "llama-server exited while loading the model"
    if curl -fsS --max-time 2 "$url/health" 2>/dev/null | grep -q '"ok"'; then
        echo "$url" >"$dir/url"
        echo "llama-server-ctl: llama-server (pid $pid) ready at $url: $np slots, continuous batching, ctx $ctx, $threads threads" >&2
        echo "$url"
        exit 0
    fi
    sleep 0.1
done
fail_start "/health not ok after ${ready_s} s"
