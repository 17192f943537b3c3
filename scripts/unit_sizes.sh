#!/usr/bin/env bash
# Units a reader can hold: no source file of the library over 1,500 lines,
# and no function over 150 lines unless the comment just above it says why
# it is one piece, in a sentence that starts "Long because" (a table of
# options read in order, a list of fields validated one after the other).
#
#   unit_sizes.sh [SOURCE_DIR]      check the tree (default: the one holding
#                                   this script); exit 1 naming every file
#                                   and function over its limit, 0 otherwise
#   unit_sizes.sh selftest WORK_DIR the check on made-up trees: a long file,
#                                   a long function with and without its
#                                   reason
#
# The library is the .c and .h files in core engine oracles checks adapters
# bench reports cli. A function is what the project's style makes of one: a
# line at column 0 naming it, its body from a line "{" to the next "}" at
# column 0; its length counts from the name's line to the closing brace.
# The comment above is the block of comment lines ending on the line before
# the name (the signature may take several lines; they count).
# Not handled: K&R definitions, a brace on the name's line.
set -euo pipefail

DIRS=(core engine oracles checks adapters bench reports cli)
FILE_MAX=1500
FUNC_MAX=150

# check ROOT: prints each unit over its limit; returns 1 if any.
check() {
    local root="$1" bad=0 f
    for d in "${DIRS[@]}"; do
        [ -d "$root/$d" ] || continue
        for f in "$root/$d"/*.c "$root/$d"/*.h; do
            [ -f "$f" ] || continue
            local rel="${f#"$root"/}" n
            n=$(wc -l <"$f")
            if [ "$n" -gt "$FILE_MAX" ]; then
                echo "$rel: $n lines (at most $FILE_MAX)"
                bad=1
            fi
            case "$f" in *.c) ;; *) continue ;; esac
            awk -v file="$rel" -v max="$FUNC_MAX" '
                # the comment block just above: reset on any other line
                /^(\/\*| \*|\/\/)/ && !in_body {
                    line = $0; gsub(/^(\/\*|\*\/| \*\/| \*|\/\/)/, "", line); gsub(/\*\/$/, "", line)
                    comment = comment " " line; next
                }
                !in_body && /^[A-Za-z_].*\(/ && !/;[[:space:]]*$/ && !/^(typedef|struct [a-z_]+ \{)/ {
                    if (!sig) { start = NR; name = $0; why = comment }
                    sig = 1; comment = ""; next
                }
                !in_body && sig && /^\{$/ { in_body = 1; next }
                !in_body && sig && /^[[:space:]]/ { next }  # the signature goes on
                in_body && /^\}/ {
                    len = NR - start + 1
                    if (len > max && why !~ /Long[[:space:]]+because/) {
                        sub(/\(.*/, "", name); n = split(name, w, /[ *]+/)
                        printf "%s:%d: %s is %d lines (at most %d without a \"Long because\" reason above it)\n", file, start, w[n], len, max
                        bad = 1
                    }
                    in_body = 0; sig = 0; comment = ""; next
                }
                !in_body { sig = 0; comment = "" }
                END { exit bad }
            ' "$f" || bad=1
        done
    done
    return $bad
}

if [ "${1:-}" = selftest ]; then
    work="${2:?usage: unit_sizes.sh selftest WORK_DIR}"
    rm -rf "$work" && mkdir -p "$work/core"
    # long_body N: a function body of N statements
    long_body() {
        local i
        echo "{"
        for ((i = 0; i < $1; i++)); do echo "    x++;"; done
        echo "}"
    }
    {
        echo "/* Short. */"
        echo "static int short_one(int x)"
        long_body 10
        echo
        echo "/* A reason across a line break: it is Long"
        echo " * because the reason is stated. */"
        echo "static int long_with_reason(int x,"
        echo "                            int y)"
        long_body 200
        echo
        echo "/* A comment with no reason. */"
        echo "int long_without_reason(int x)"
        long_body 160
    } >"$work/core/a.c"
    out="$(check "$work" || true)"
    echo "$out"
    grep -q "core/a.c:.*long_without_reason is 163 lines" <<<"$out" ||
        { echo "selftest: the long function without a reason was not named" >&2; exit 1; }
    if grep -q "long_with_reason\|short_one" <<<"$out"; then
        echo "selftest: a function within the rule was named" >&2
        exit 1
    fi
    for ((i = 0; i < 1600; i++)); do echo "int v$i;"; done >"$work/core/b.h"
    out="$(check "$work" || true)"
    grep -q "core/b.h: 1600 lines" <<<"$out" ||
        { echo "selftest: the long file was not named" >&2; exit 1; }
    rm "$work/core/a.c" "$work/core/b.h"
    check "$work" || { echo "selftest: an empty tree failed" >&2; exit 1; }
    echo "selftest: passed"
    exit 0
fi

root="${1:-$(cd "$(dirname "$0")/.." && pwd)}"
if check "$root"; then
    echo "unit sizes: every file within $FILE_MAX lines, every function within $FUNC_MAX or with its reason"
else
    exit 1
fi
