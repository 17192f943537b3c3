#!/usr/bin/env bash
# Nothing is written into the source tree: tests write scratch output under
# the build directory only. CTest runs `record` before the tests (fixture
# source_tree, which every test requires) and `check` after them; check
# fails, naming each path, if a file or directory under the source tree was
# created, changed or removed meanwhile.
#
#   source_tree.sh record SOURCE_DIR STATE_DIR
#   source_tree.sh check SOURCE_DIR STATE_DIR
#   source_tree.sh compare BEFORE AFTER     the paths that differ; exit 1 if any
#   source_tree.sh selftest WORK_DIR        compare and check on made-up trees
#
# The state is a listing of every path with its type and, for a file, its
# size and modification time: the same in a git checkout and in an unpacked
# tarball, and it sees a second change to a file that was already modified
# before the run. Left out are .git, the top-level build*/ directories and
# every CMake binary directory (one holding a CMakeCache.txt) present when
# the listing was recorded. Not handled: paths holding a tab or a newline.
# check cannot tell a test's write from someone editing the sources while
# the tests run; both fail it.
set -euo pipefail

# The listing of SOURCE_DIR, sorted; PRUNE_FILE lists the binary
# directories to leave out, one absolute path a line.
listing() {
    local src="$1" prune_file="$2"
    local prune=(-path "$src/.git" -o -path "$src/build*")
    local d
    while IFS= read -r d; do
        prune+=(-o -path "$d")
    done <"$prune_file"
    find "$src" -mindepth 1 \( -type d \( "${prune[@]}" \) \) -prune -o \
        -type d -printf 'd\t%P\n' -o -printf '%y\t%P\t%s\t%T@\n' | LC_ALL=C sort
}

# One line per path that differs between two listings: "new", "changed"
# or "removed", a tab, the path.
differences() {
    awk -F'\t' -v before_file="$1" '
        BEGIN {
            while ((getline line < before_file) > 0) {
                split(line, field, "\t")
                before[field[2]] = line
            }
        }
        { seen[$2] = 1 }
        !($2 in before) { print "new\t" $2; next }
        before[$2] != $0 { print "changed\t" $2 }
        END { for (p in before) if (!(p in seen)) print "removed\t" p }
    ' "$2" | LC_ALL=C sort -t "$(printf '\t')" -k2
}

compare() {
    local diff
    diff=$(differences "$1" "$2")
    [ -z "$diff" ] && return 0
    printf '%s\n' "$diff" | awk -F'\t' '{ printf "  %-8s %s\n", $1, $2 }'
    return 1
}

record() {
    local src state="$2"
    src=$(cd "$1" && pwd)
    mkdir -p "$state"
    find "$src" \( -path "$src/.git" -o -type d -path "$src/build*" \) -prune -o \
        -name CMakeCache.txt -printf '%h\n' >"$state/prune.txt"
    listing "$src" "$state/prune.txt" >"$state/before.txt"
    echo "source_tree: recorded $(wc -l <"$state/before.txt") paths under $src"
}

check() {
    local src state="$2"
    src=$(cd "$1" && pwd)
    if [ ! -f "$state/before.txt" ] || [ ! -f "$state/prune.txt" ]; then
        echo "SKIP: no listing recorded in $state (source_tree.record did not run; run ctest" \
             "without -FS, -FC or -FA for the source_tree fixture)"
        return 77
    fi
    listing "$src" "$state/prune.txt" >"$state/after.txt"
    if ! compare "$state/before.txt" "$state/after.txt" >"$state/differences.txt"; then
        echo "FAIL: the tests wrote into the source tree $src:"
        cat "$state/differences.txt"
        echo "Scratch output belongs under the build directory (assay_test_scratch," \
             "ASSAY_BUILD, or an explicit --out); remove these paths before the next run."
        return 1
    fi
    echo "source_tree: $src unchanged ($(wc -l <"$state/after.txt") paths)"
}

# compare on hand-made listings, then record and check on a made-up source
# tree: a file written at its root fails check, named; files in build*/ and
# in a CMake binary directory do not.
selftest() {
    local work="$1"
    rm -rf "$work"
    mkdir -p "$work"
    printf 'd\tcore\nf\tcore/a.c\t10\t1.0\nf\tcore/b.c\t10\t1.0\nf\tgone.txt\t3\t1.0\n' \
        >"$work/before.txt"
    printf 'd\tcore\nf\tcore/a.c\t11\t2.0\nf\tcore/b.c\t10\t1.0\nf\tnew.json\t2\t3.0\n' \
        >"$work/after.txt"
    compare "$work/before.txt" "$work/before.txt" >"$work/same.txt" ||
        { echo "FAIL: compare found differences in one listing"; cat "$work/same.txt"; exit 1; }
    if compare "$work/before.txt" "$work/after.txt" >"$work/found.txt"; then
        echo "FAIL: compare found two listings the same"
        exit 1
    fi
    printf '  %-8s %s\n' changed core/a.c removed gone.txt new new.json >"$work/expected.txt"
    diff -u "$work/expected.txt" "$work/found.txt" ||
        { echo "FAIL: compare named the wrong paths"; exit 1; }

    local src="$work/src"
    mkdir -p "$src/core" "$src/build/x" "$src/out"
    echo 'int a;' >"$src/core/a.c"
    touch "$src/out/CMakeCache.txt"
    record "$src" "$work/state" >/dev/null
    echo 'new' >"$src/build/x/scratch.txt"
    echo 'new' >"$src/out/scratch.txt"
    check "$src" "$work/state" >"$work/clean.txt" ||
        { echo "FAIL: writes into the build directories failed check"; cat "$work/clean.txt"; exit 1; }
    echo '{}' >"$src/leaked.json"
    local rc=0
    check "$src" "$work/state" >"$work/leak.txt" || rc=$?
    cat "$work/leak.txt"
    [ "$rc" -eq 1 ] || { echo "FAIL: a file at the source root: check exited $rc, not 1"; exit 1; }
    grep -q '^  new      leaked.json$' "$work/leak.txt" ||
        { echo "FAIL: check did not name leaked.json"; exit 1; }
    echo "source_tree: selftest passed"
}

case "${1:-}" in
    record) record "$2" "$3" ;;
    check) check "$2" "$3" ;;
    compare) compare "$2" "$3" ;;
    selftest) selftest "$2" ;;
    *) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
