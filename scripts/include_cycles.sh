#!/usr/bin/env bash
# No module of the design includes, through its .c or its .h, a module that
# includes it back, directly or around a loop: the modules stay in layers a
# reader can take one at a time.
#
#   include_cycles.sh [SOURCE_DIR]     check the tree (default: the one
#                                      holding this script); exit 1 naming
#                                      every cycle, 0 when there is none
#   include_cycles.sh selftest WORK_DIR   the check on made-up trees, with
#                                      and without a planted loop
#
# A module is one .c with its .h, in the folders core engine oracles checks
# adapters bench reports cli: core/alloc.c and core/alloc.h are the module
# core/alloc. A header with no .c of its own is a module too, unless it is
# named after one: engine/model_internal.h, the declarations of model.c that
# only the GGUF reader needs, is part of engine/model. When a module's .c or
# .h holds `#include "X"` and X is a file of another module, the module
# depends on that one. X is looked for as the compiler does: beside the
# including file first, then from the source root
# (`#include "reports/report.h"`). Angle-bracket includes, generated headers
# and files outside those folders (suites/) are not part of the graph.
#
# For each include that closes a loop, the shortest loop through it is
# printed once, with the include lines that make each step. Not handled: an
# include inside a block comment or a disabled #if branch still counts, and
# a path holding a newline.
set -euo pipefail

DIRS=(core engine oracles checks adapters bench reports cli)

# Print every cycle in the include graph of the tree at $1; return 1 if
# there is one.
check() {
    local src="$1" dirs=() d
    for d in "${DIRS[@]}"; do
        if [ -d "$src/$d" ]; then
            dirs+=("$d")
        fi
    done
    if [ "${#dirs[@]}" -eq 0 ]; then
        echo "include_cycles: none of ${DIRS[*]} under $src" >&2
        return 2
    fi
    local files
    files=$(cd "$src" && find "${dirs[@]}" -maxdepth 1 -type f \( -name '*.c' -o -name '*.h' \) |
        LC_ALL=C sort)
    # Two inputs: the files, then "FILE:LINE:TEXT" for each quoted include.
    awk -v src="$src" '
        function normalize(p,    part, n, i, out, k, stack) {
            n = split(p, part, "/")
            k = 0
            for (i = 1; i <= n; i++) {
                if (part[i] == "" || part[i] == ".") {
                    continue
                }
                if (part[i] == ".." && k > 0 && stack[k] != "..") {
                    k--
                } else {
                    stack[++k] = part[i]
                }
            }
            out = ""
            for (i = 1; i <= k; i++) {
                out = out (i > 1 ? "/" : "") stack[i]
            }
            return out
        }
        # The module of a file: its name without .c or .h; a header with no
        # .c of its own, named after a module (model_internal.h beside
        # model.c), is that module'"'"'s private header.
        function module_of(p,    stem, prefix) {
            stem = p
            sub(/\.[ch]$/, "", stem)
            if (p ~ /\.h$/ && !((stem ".c") in known)) {
                prefix = stem
                while (match(prefix, /_[^_\/]*$/)) {
                    prefix = substr(prefix, 1, RSTART - 1)
                    if ((prefix ".c") in known) {
                        return prefix
                    }
                }
            }
            return stem
        }
        # The shortest path from a to b along the includes, as "a b ... b",
        # or "" when b cannot be reached from a.
        function path(a, b,    queue, head, tail, parent, next_of, n, i, m, v, out) {
            split("", parent)
            head = 1
            tail = 0
            queue[++tail] = a
            parent[a] = ""
            while (head <= tail) {
                v = queue[head++]
                if (v == b) {
                    out = v
                    while (parent[v] != "") {
                        v = parent[v]
                        out = v " " out
                    }
                    return out
                }
                n = split(adj[v], next_of, " ")
                for (i = 1; i <= n; i++) {
                    m = next_of[i]
                    if (!(m in parent)) {
                        parent[m] = v
                        queue[++tail] = m
                    }
                }
            }
            return ""
        }
        FNR == NR {
            known[$0] = 1
            next
        }
        {
            c = index($0, ":")
            file = substr($0, 1, c - 1)
            rest = substr($0, c + 1)
            c = index(rest, ":")
            line = substr(rest, 1, c - 1)
            text = substr(rest, c + 1)
            sub(/^[ \t]+/, "", text)
            name = text
            sub(/^[^"]*"/, "", name)
            sub(/".*$/, "", name)
            dir = file
            sub(/\/[^\/]*$/, "", dir)
            target = normalize(dir "/" name)
            if (!(target in known)) {
                target = normalize(name)
                if (!(target in known)) {
                    next
                }
            }
            from = module_of(file)
            to = module_of(target)
            n_includes++
            if (from == to) {
                next
            }
            key = from " " to
            if (!(key in sites)) {
                n_edges++
                edge_from[n_edges] = from
                edge_to[n_edges] = to
                adj[from] = adj[from] " " to
                sites[key] = ""
            }
            sites[key] = sites[key] "      " file ":" line ": " text "\n"
        }
        END {
            for (f in known) {
                modules[module_of(f)] = 1
            }
            for (m in modules) {
                n_modules++
            }
            n_cycles = 0
            for (e = 1; e <= n_edges; e++) {
                back = path(edge_to[e], edge_from[e])
                if (back == "") {
                    continue
                }
                # The loop edge_from -> back..., started at its least name
                # so that each loop is printed once.
                k = split(edge_from[e] " " back, step, " ") - 1
                least = 1
                for (i = 2; i <= k; i++) {
                    if (step[i] < step[least]) {
                        least = i
                    }
                }
                for (i = 0; i < k; i++) {
                    loop[i] = step[(least - 1 + i) % k + 1]
                }
                loop[k] = loop[0]
                name = loop[0]
                for (i = 1; i <= k; i++) {
                    name = name " -> " loop[i]
                }
                if (name in seen) {
                    continue
                }
                seen[name] = 1
                n_cycles++
                report = report "  " name "\n"
                for (i = 0; i < k; i++) {
                    report = report "    " loop[i] " -> " loop[i + 1] ":\n" \
                             sites[loop[i] " " loop[i + 1]]
                }
            }
            if (n_cycles == 0) {
                printf "include_cycles: no cycle among %d modules (%d includes between files of %s)\n",
                       n_modules, n_includes, src
                exit 0
            }
            printf "include_cycles: FAIL: %d include cycle%s among the modules of %s\n",
                   n_cycles, n_cycles == 1 ? "" : "s", src
            printf "%s", report
            printf "Break each loop: move what the lower module reads into a module of its own,\n"
            printf "or move the code that calls upward into a module above both.\n"
            exit 1
        }
    ' <(printf '%s\n' "$files") \
      <(cd "$src" && { printf '%s\n' "$files" |
            xargs -r -d '\n' grep -nH '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' || true; })
}

# Expect check on tree $2 to exit $1, and its output to hold each line
# after that (fixed strings).
expect() {
    local want="$1" tree="$2" rc=0 out
    shift 2
    out=$(check "$tree") || rc=$?
    printf '%s\n' "$out"
    if [ "$rc" -ne "$want" ]; then
        echo "FAIL: include_cycles exited $rc on $tree, not $want"
        exit 1
    fi
    local line
    for line in "$@"; do
        if ! grep -qxF -- "$line" <<<"$out"; then
            echo "FAIL: include_cycles did not print: $line"
            exit 1
        fi
    done
}

# A made-up tree in layers passes: a module's private header may include
# the module's own header, and a generated header, a system header or a file
# outside the folders is no dependency. A planted include that closes a
# loop of three modules fails, named; so does a second loop made with a
# root-relative include.
selftest() {
    local work="$1"
    rm -rf "$work"
    mkdir -p "$work"
    local t="$work/tree"
    mkdir -p "$t/core" "$t/reports" "$t/cli" "$t/suites"
    printf '#include <stdio.h>\n' >"$t/core/b.h"
    printf '#include "b.h"\n' >"$t/core/b.c"
    printf '#include "b.h"\n' >"$t/core/a.h"
    printf '#include "a.h"\n#include "assay_git_info.h"\n  #  include "b.h"\n' >"$t/core/a.c"
    printf '#include "a.h"\n' >"$t/core/a_internal.h"
    printf '#include "a_internal.h"\n' >>"$t/core/a.c"
    printf '#include "../core/a.h"\n' >"$t/reports/r.h"
    printf '#include "r.h"\n' >"$t/reports/r.c"
    printf '#include "reports/r.h"\n' >"$t/cli/m.h"
    printf '#include "m.h"\n' >"$t/cli/m.c"
    printf '#include "../cli/m.h"\n' >"$t/suites/test_m.c"
    expect 0 "$t" "include_cycles: no cycle among 4 modules (10 includes between files of $t)"

    printf '#include "../reports/r.h"\n' >>"$t/core/b.c"
    expect 1 "$t" \
        "include_cycles: FAIL: 1 include cycle among the modules of $t" \
        "  core/a -> core/b -> reports/r -> core/a" \
        "      core/a.h:1: #include \"b.h\"" \
        "      core/a.c:3: #  include \"b.h\"" \
        "      core/b.c:2: #include \"../reports/r.h\"" \
        "      reports/r.h:1: #include \"../core/a.h\""

    printf '#include "cli/m.h"\n' >>"$t/reports/r.c"
    expect 1 "$t" \
        "include_cycles: FAIL: 2 include cycles among the modules of $t" \
        "  core/a -> core/b -> reports/r -> core/a" \
        "  cli/m -> reports/r -> cli/m" \
        "      cli/m.h:1: #include \"reports/r.h\"" \
        "      reports/r.c:2: #include \"cli/m.h\""
    echo "include_cycles: selftest passed"
}

case "${1:-}" in
    selftest) selftest "$2" ;;
    -*) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
    *) check "${1:-$(cd "$(dirname "$0")/.." && pwd)}" ;;
esac
