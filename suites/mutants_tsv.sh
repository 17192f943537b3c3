#!/bin/sh
# mutants_tsv.sh ASSAY NAME... - `assay mutants --tsv` prints the catalog
# (core/mutants.def) as one line of 4 tab-separated fields per planted bug,
# in the catalog's order: the NAMEs CMake read from the same file.
set -eu
assay="$1"
shift
out="$("$assay" mutants --tsv)"
fields="$(printf '%s\n' "$out" | awk -F '\t' 'NF != 4 { print NR": "NF" fields"; exit 1 }')" || {
    echo "mutants_tsv: line $fields, not 4" >&2
    exit 1
}
got="$(printf '%s\n' "$out" | cut -f 1 | tr '\n' ' ')"
want="$* "
if [ "$got" != "$want" ]; then
    printf 'mutants_tsv: names differ\n  printed: %s\n  catalog: %s\n' "$got" "$want" >&2
    exit 1
fi
echo "mutants_tsv: $# planted bugs, 4 fields each, in the catalog's order"
