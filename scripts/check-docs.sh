#!/usr/bin/env bash
# The documentation stays runnable: every `assay` command line it shows
# names a subcommand and options the built command has, every relative
# link points at something in the repository, and README.md stays one page.
#
#   check-docs.sh ASSAY [SOURCE_DIR [SCRATCH_DIR]]
#       check README.md and docs/**/*.md of SOURCE_DIR (default: the tree
#       holding this script) against the built command ASSAY; print each
#       offence as FILE:LINE: what, and exit 1 if there is one, else 0.
#       SCRATCH_DIR (default: beside ASSAY, scratch-check-docs) holds the
#       commands' --help texts; it is never under the source tree.
#   check-docs.sh selftest ASSAY SOURCE_DIR SCRATCH_DIR
#       copy the docs into SCRATCH_DIR, require the copy to pass, plant one
#       offence of each kind in it, and require each to be reported.
#
# What is a command line: in a fenced code block, a line (joined with the
# next while it ends in a backslash) that starts, after blanks and a "$ "
# prompt, with `assay SUBCOMMAND`, `assay-mutants SUBCOMMAND` or a path to
# either (./build/test/assay); in a block that has "$ " lines, only those
# are commands, the rest being their output. Outside code blocks, an inline
# code span (it may run over several lines of a paragraph) that starts the
# same way. The line is cut at the first " | ", " || ", " && ", "; ",
# " > ", " 2>" or " #", quoted strings are dropped, and every --option left
# must appear in `ASSAY SUBCOMMAND --help` (assay-mutants has the same
# options as assay; --help itself is always allowed). A SUBCOMMAND in
# capitals (`assay SUBCOMMAND --help`) is a placeholder: its options must
# appear in some subcommand's help.
#
# What is a link: [text](target) and [label]: target outside code, whose
# target is not a URL (scheme:) or a mail address. The target, taken
# relative to the file, must exist inside SOURCE_DIR; a #fragment on a
# Markdown target must be one of its headings' anchors as GitHub makes
# them (lower case; everything but letters, digits, blanks, "-" and "_"
# dropped; blanks to "-"; a repeated anchor gets -1, -2, ...). A link to
# "#fragment" alone is checked against the file's own headings.
#
# Not handled: HTML links (<a href>), links whose target holds a ")" or a
# blank, commands started through another program (mpirun ... assay), and
# anchors of headings with non-ASCII letters (dropped here, kept by GitHub).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"

# Records of one Markdown file, one a line, tab-separated:
#   cmd LINE TEXT     a command line
#   link LINE TARGET  a link target
#   head LINE ANCHOR  a heading's anchor
extract() {
    awk '
        function trim(s) { sub(/^[ \t]+/, "", s); sub(/[ \t]+$/, "", s); return s }
        function is_cmd(t) { return t ~ /^([^ ]*\/)?assay(-mutants)? +[^ ]/ }
        function emit(kind, line, text) {
            gsub(/\t/, " ", text)
            printf "%s\t%d\t%s\n", kind, line, text
        }
        function anchor(h,    s, t) {
            s = h
            sub(/^#+[ \t]*/, "", s)
            sub(/[ \t]#+[ \t]*$/, "", s)
            while (match(s, /\[[^]]*\]\([^)]*\)/)) {
                t = substr(s, RSTART + 1, RLENGTH - 1)
                sub(/\]\(.*$/, "", t)
                s = substr(s, 1, RSTART - 1) t substr(s, RSTART + RLENGTH)
            }
            s = tolower(s)
            gsub(/[^a-z0-9 _-]/, "", s)
            gsub(/ /, "-", s)
            if (s in seen) {
                seen[s]++
                return s "-" seen[s]
            }
            seen[s] = 0
            return s
        }
        # Links in text outside code.
        function links(s, line,    t) {
            while (match(s, /\]\([^)]*\)/)) {
                t = substr(s, RSTART + 2, RLENGTH - 3)
                sub(/[ \t].*$/, "", t)
                sub(/^</, "", t)
                sub(/>$/, "", t)
                emit("link", line, t)
                s = substr(s, RSTART + RLENGTH)
            }
        }
        # The commands of a finished fenced block.
        function flush_block(    i, dollar, t) {
            dollar = 0
            for (i = 1; i <= nb; i++) {
                if (trim(btext[i]) ~ /^\$ /) {
                    dollar = 1
                }
            }
            for (i = 1; i <= nb; i++) {
                t = trim(btext[i])
                if (dollar) {
                    if (t !~ /^\$ /) {
                        continue
                    }
                    sub(/^\$ +/, "", t)
                }
                if (is_cmd(t)) {
                    emit("cmd", bline[i], t)
                }
            }
            nb = 0
        }
        # One line of text outside code blocks: code spans (which may go on
        # over the next lines) and the links between them.
        function text_line(s, line,    i, n, j) {
            while (s != "") {
                if (!inspan) {
                    i = index(s, "`")
                    if (i == 0) {
                        links(s, line)
                        return
                    }
                    links(substr(s, 1, i - 1), line)
                    n = 0
                    while (substr(s, i + n, 1) == "`") {
                        n++
                    }
                    inspan = 1
                    ticks = n
                    span = ""
                    spanline = line
                    s = substr(s, i + n)
                } else {
                    j = index(s, "`")
                    if (j == 0) {
                        span = span s " "
                        return
                    }
                    n = 0
                    while (substr(s, j + n, 1) == "`") {
                        n++
                    }
                    if (n == ticks) {
                        span = span substr(s, 1, j - 1)
                        if (is_cmd(trim(span))) {
                            emit("cmd", spanline, trim(span))
                        }
                        inspan = 0
                    } else {
                        span = span substr(s, 1, j + n - 1)
                    }
                    s = substr(s, j + n)
                }
            }
        }
        BEGIN { infence = 0; inspan = 0; nb = 0; cont = "" }
        {
            if ($0 ~ /^[ \t]*(```|~~~)/) {
                if (infence) {
                    flush_block()
                }
                infence = !infence
                inspan = 0
                cont = ""
                next
            }
            if (infence) {
                if (cont == "") {
                    contline = NR
                }
                if ($0 ~ /\\$/) {
                    cont = cont substr($0, 1, length($0) - 1) " "
                    next
                }
                nb++
                btext[nb] = cont $0
                bline[nb] = contline
                cont = ""
                next
            }
            if ($0 ~ /^[ \t]*$/) {
                inspan = 0
                next
            }
            if ($0 ~ /^#+ /) {
                inspan = 0
                emit("head", NR, anchor($0))
                text_line($0, NR)
                inspan = 0
                next
            }
            if (match($0, /^ *\[[^]]+\]: */)) {
                t = substr($0, RSTART + RLENGTH)
                sub(/[ \t].*$/, "", t)
                emit("link", NR, t)
                next
            }
            text_line($0, NR)
        }
        END { if (infence) flush_block() }
    ' "$1"
}

# The anchors of a Markdown file, one a line.
anchors_of() {
    extract "$1" | awk -F'\t' '$1 == "head" { print $3 }'
}

# Normalise a path of "/"-separated parts into $norm: drop "." and
# resolve ".."; "/.." when it climbs out of the top.
normalize() {
    local IFS=/ part
    local -a stack=()
    norm=""
    for part in $1; do
        case "$part" in
        "" | .) ;;
        ..)
            if [ "${#stack[@]}" -eq 0 ]; then
                norm="/.."
                return
            fi
            unset 'stack[${#stack[@]}-1]'
            ;;
        *) stack+=("$part") ;;
        esac
    done
    norm="${stack[*]}"
}

check() {
    local assay="$1" src="$2" scratch="$3"
    local bad=0 ncmd=0 nlink=0 nfile=0 norm
    local -A anchors=()
    offence() {
        echo "$1:$2: $3"
        bad=$((bad + 1))
    }
    if [ ! -x "$assay" ]; then
        echo "check-docs: $assay: expected the built assay command" >&2
        return 2
    fi
    mkdir -p "$scratch"
    # The subcommands, from the top-level help's "commands:" list.
    "$assay" --help >"$scratch/help.txt" 2>&1 || true
    local subs
    subs=$(awk '/^commands:/ { on = 1; next } on && /^  [a-z]/ { print $1 } on && /^$/ { on = 0 }' \
        "$scratch/help.txt")
    if [ -z "$subs" ]; then
        echo "check-docs: '$assay --help' lists no commands" >&2
        return 2
    fi
    # Every --option each help text names, as "SUBCOMMAND --option" keys;
    # "ANY" collects them all, "" the top level's.
    local -A known=() opts=()
    local s o
    for o in $(grep -oE -- '--[a-z][a-z0-9-]*' "$scratch/help.txt"); do
        opts[" $o"]=1
    done
    for s in $subs; do
        known[$s]=1
        if ! "$assay" "$s" --help >"$scratch/help-$s.txt" 2>&1; then
            offence "$assay" 0 "'assay $s --help' exits non-zero"
        fi
        for o in $(grep -oE -- '--[a-z][a-z0-9-]*' "$scratch/help-$s.txt"); do
            opts["$s $o"]=1
            opts["ANY $o"]=1
        done
    done

    local files f rel
    files=$(cd "$src" && { [ -f README.md ] && echo README.md; [ -d docs ] && find docs -name '*.md'; } |
        LC_ALL=C sort)
    for rel in $files; do
        nfile=$((nfile + 1))
        f="$src/$rel"
        local kind line text
        while IFS=$'\t' read -r kind line text; do
            case "$kind" in
            cmd)
                ncmd=$((ncmd + 1))
                local t sub key rest
                t="$text"
                # Cut at the first shell operator or comment, drop quoted strings.
                t="${t%% | *}"
                t="${t%% || *}"
                t="${t%% && *}"
                t="${t%%; *}"
                t="${t%% > *}"
                t="${t%% 2>*}"
                t="${t%% #*}"
                while [[ "$t" =~ ^(.*)\'[^\']*\'(.*)$ ]]; do
                    t="${BASH_REMATCH[1]}${BASH_REMATCH[2]}"
                done
                while [[ "$t" =~ ^(.*)\"[^\"]*\"(.*)$ ]]; do
                    t="${BASH_REMATCH[1]}${BASH_REMATCH[2]}"
                done
                rest="${t#* }"
                rest="${rest#"${rest%%[! ]*}"}"
                sub="${rest%% *}"
                if [[ "$sub" =~ ^[A-Z][A-Z_]*$ ]]; then
                    key=ANY
                elif [[ "$sub" == -* ]]; then
                    key="" # assay --help
                elif [ -n "${known[$sub]+set}" ]; then
                    key="$sub"
                else
                    offence "$rel" "$line" "'$sub' is not an assay subcommand (in: $text)"
                    continue
                fi
                rest=" $t"
                while [[ "$rest" =~ [^A-Za-z0-9_-](--[a-z][a-z0-9-]*)(.*)$ ]]; do
                    o="${BASH_REMATCH[1]}"
                    rest="${BASH_REMATCH[2]}"
                    [ "$o" = "--help" ] && continue
                    if [ -z "${opts["$key $o"]+set}" ]; then
                        offence "$rel" "$line" "assay $sub has no option $o (in: $text)"
                    fi
                done
                ;;
            link)
                local target path frag dir full
                target="$text"
                case "$target" in
                "" | *:*) continue ;; # a URL, a mail address
                esac
                nlink=$((nlink + 1))
                path="${target%%#*}"
                frag=""
                [ "$path" != "$target" ] && frag="${target#*#}"
                if [ -z "$path" ]; then
                    full="$rel"
                else
                    dir=.
                    [[ "$rel" == */* ]] && dir="${rel%/*}"
                    normalize "$dir/$path"
                    full="$norm"
                    if [ "$full" = "/.." ]; then
                        offence "$rel" "$line" "link $target leaves the repository"
                        continue
                    fi
                    if [ -z "$full" ] || [ ! -e "$src/$full" ]; then
                        offence "$rel" "$line" "link $target: no such file ($full)"
                        continue
                    fi
                fi
                if [ -n "$frag" ] && [[ "$full" == *.md ]]; then
                    if [ -z "${anchors[$full]+set}" ]; then
                        anchors[$full]="$scratch/anchors-$(printf '%s' "$full" | tr '/' '_')"
                        anchors_of "$src/$full" >"${anchors[$full]}"
                    fi
                    if ! grep -qxF -- "$frag" "${anchors[$full]}"; then
                        offence "$rel" "$line" "link $target: $full has no heading whose anchor is #$frag"
                    fi
                fi
                ;;
            esac
        done < <(extract "$f")
    done

    # Counts of the whole plan quoted in prose ("the whole plan: 45 checks",
    # "only 4 of the 45 checks ran") are the plan's; a quoted summary
    # "N checks: A passed, B failed, C skipped, D could not run" adds up.
    # Paragraphs are joined, since a sentence may wrap; dated records
    # (docs/measurements/) keep the figures of their day.
    local n_plan
    n_plan=$("$assay" verify --list 2>/dev/null | tail -n +2 | grep -c . || true)
    for rel in $files; do
        case "$rel" in docs/measurements/*) continue ;; esac
        while IFS=$'\t' read -r line text; do
            offence "$rel" "$line" "$text"
        done < <(awk -v plan="$n_plan" '
            function judge(p, at,   m, rest, a, b, c, d, n) {
                gsub(/[ \t]+/, " ", p)
                rest = p
                while (match(rest, /the whole plan: [0-9]+ checks/)) {
                    m = substr(rest, RSTART, RLENGTH); rest = substr(rest, RSTART + RLENGTH)
                    split(m, w, " ")
                    if (w[4] + 0 != plan) printf "%d\t\"%s\": the plan has %d checks\n", at, m, plan
                }
                rest = p
                while (match(rest, /only [0-9]+ of the [0-9]+ checks ran/)) {
                    m = substr(rest, RSTART, RLENGTH); rest = substr(rest, RSTART + RLENGTH)
                    split(m, w, " ")
                    if (w[5] + 0 != plan) printf "%d\t\"%s\": the plan has %d checks\n", at, m, plan
                }
                rest = p
                while (match(rest, /[0-9]+ checks: [0-9]+ passed, [0-9]+ failed, [0-9]+ skipped(, [0-9]+ could not run)?/)) {
                    m = substr(rest, RSTART, RLENGTH); rest = substr(rest, RSTART + RLENGTH)
                    split(m, w, " ")
                    n = w[1]; a = w[3]; b = w[5]; c = w[7]; d = (w[9] == "" ? 0 : w[9])
                    if (a + b + c + d != n) printf "%d\t\"%s\" does not add up\n", at, m
                }
            }
            /^[ \t]*$/ { if (para != "") judge(para, start); para = ""; next }
            { if (para == "") start = NR; para = para " " $0 }
            END { if (para != "") judge(para, start) }' "$src/$rel")
    done

    if [ -f "$src/README.md" ]; then
        local n
        n=$(wc -l <"$src/README.md")
        if [ "$n" -gt 150 ]; then
            offence README.md "$n" "README.md has $n lines; at most 150 (the rest belongs in docs/)"
        fi
    else
        offence README.md 0 "no README.md"
    fi

    if [ "$bad" -gt 0 ]; then
        echo "check-docs: $bad offences in $nfile files"
        return 1
    fi
    echo "check-docs: ok: $ncmd command lines and $nlink links in $nfile files"
    return 0
}

selftest() {
    local assay="$1" src work="$3"
    src="$(cd "$2" && pwd)"
    rm -rf "$work"
    mkdir -p "$work/tree"
    # The docs copied, everything else they may link to linked.
    cp -R "$src/README.md" "$src/docs" "$work/tree/"
    local e
    for e in "$src"/* "$src"/.ci; do
        case "$(basename "$e")" in
        README.md | docs | build*) continue ;;
        esac
        [ -e "$e" ] && ln -s "$e" "$work/tree/$(basename "$e")"
    done
    echo "== the copy as it is must pass"
    check "$assay" "$work/tree" "$work/scratch" || {
        echo "selftest: the unchanged copy fails"
        return 1
    }
    echo "== one offence of each kind planted"
    cat >>"$work/tree/docs/cli.md" <<'EOF'

Planted: `assay verify --no-such-option` and `assay nosuchcommand --list`.

```sh
./build/test/assay compare A B --pairs 3 \
    --also-no-such-option
```

Planted: [a file](no-such-file.md), [an anchor](cli.md#no-such-heading).

Planted: the whole plan: 7 checks; "9 checks: 4 passed, 0 failed, 4
skipped, 0 could not run".
EOF
    local i
    for i in $(seq 1 150); do echo "padding $i" >>"$work/tree/README.md"; done
    local out status=0
    out=$(check "$assay" "$work/tree" "$work/scratch") || status=$?
    printf '%s\n' "$out"
    if [ "$status" -ne 1 ]; then
        echo "selftest: expected exit status 1 with the planted offences, got $status"
        return 1
    fi
    local want missing=0
    for want in "has no option --no-such-option" "'nosuchcommand' is not an assay subcommand" \
        "has no option --also-no-such-option" "link no-such-file.md: no such file" \
        "has no heading whose anchor is #no-such-heading" "README.md has" \
        "\"the whole plan: 7 checks\": the plan has" "skipped, 0 could not run\" does not add up"; do
        # A here-string, not a pipe: grep -q stops at the first match, and
        # under pipefail the writer's SIGPIPE would read as "not found".
        if ! grep -qF -- "$want" <<<"$out"; then
            echo "selftest: not reported: $want"
            missing=1
        fi
    done
    [ "$missing" -eq 0 ] || return 1
    echo "selftest: every planted offence reported"
}

if [ "${1:-}" = selftest ]; then
    [ $# -eq 4 ] || {
        echo "usage: check-docs.sh selftest ASSAY SOURCE_DIR SCRATCH_DIR" >&2
        exit 2
    }
    selftest "$2" "$3" "$4"
    exit
fi
[ $# -ge 1 ] && [ $# -le 3 ] || {
    echo "usage: check-docs.sh ASSAY [SOURCE_DIR [SCRATCH_DIR]] | selftest ASSAY SOURCE_DIR SCRATCH_DIR" >&2
    exit 2
}
assay="$1"
src="${2:-$(cd "$here/.." && pwd)}"
scratch="${3:-$(dirname "$assay")/scratch-check-docs}"
check "$assay" "$src" "$scratch"
