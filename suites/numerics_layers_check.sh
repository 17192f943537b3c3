#!/usr/bin/env bash
# The layer-by-layer comparison (numerics_layers against llama.cpp's own
# llama_tensors) on a file whose products round nothing (an F32 file, an
# F32 cache, flash attention off): every checkpoint of every layer must
# agree to 1e-4 of its largest value and the log-softmax to 1e-4, or the
# probe, the dump or their alignment is wrong. The dump against itself
# (--against) must be 0 everywhere. Its must-fail control
# compares the dump with the reference on another last token: that row
# must part (log-softmax 0.1 or more) while the others still agree.
#
#   numerics_layers_check.sh NUMERICS_LAYERS FILE.gguf SCRATCH_DIR
set -euo pipefail

layers="$1"
file="$2"
scratch="$3"
here="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$scratch"
tensors="$("$here/../scripts/build-llama-server.sh" --tensors | tail -n 1)"
tokens="5,17,33,99,120,7,64,3,2,200,150,11,12,13,14,15"
other="5,17,33,99,120,7,64,3,2,200,150,11,12,13,14,16"
"$tensors" "$file" "$scratch/dump.bin" "$tokens" --kv f32 --fa off
"$layers" "$file" "$scratch/dump.bin" "$tokens" --kv f32 --fa off | tee "$scratch/same.txt"
"$layers" "$file" "$scratch/dump.bin" "$other" --kv f32 --fa off >"$scratch/other.txt"
"$layers" "$file" "$scratch/dump.bin" "$tokens" --kv f32 --fa off --against "$scratch/dump.bin" \
    >"$scratch/self.txt"

# The largest "max|d|/max" over the table's rows, the number of rows, and
# the log-softmax distance of the last line.
largest() { awk '$1 ~ /^([0-9]+|out)$/ { n++; if ($3 > m) m = $3 } END { printf "%d %g\n", n, m }' "$1"; }
softmax() { sed -n 's/.*|log-softmax llama.cpp - reference| max \([^;]*\);.*/\1/p' "$1"; }
read -r rows worst < <(largest "$scratch/same.txt")
lsm="$(softmax "$scratch/same.txt")"
echo "numerics_layers_check: $rows checkpoints, largest relative difference $worst, log-softmax $lsm"
[ "$rows" -ge 20 ] || {
    echo "numerics_layers_check: only $rows checkpoints compared" >&2
    exit 1
}
awk -v w="$worst" -v l="$lsm" 'BEGIN { exit !(w <= 1e-4 && l != "" && l <= 1e-4) }' || {
    echo "numerics_layers_check: llama.cpp and the reference part where nothing rounds" >&2
    exit 1
}
read -r self_rows self_worst < <(largest "$scratch/self.txt")
self_lsm="$(sed -n 's/.*|log-softmax A - B| max \([^ ]*\) .*/\1/p' "$scratch/self.txt")"
echo "numerics_layers_check: the dump against itself: $self_rows checkpoints, largest $self_worst, log-softmax $self_lsm"
[ "$self_rows" = "$rows" ] && [ "$self_worst" = 0 ] && [ "$self_lsm" = 0 ] || {
    echo "numerics_layers_check: the dump against itself is not 0 everywhere" >&2
    exit 1
}
lsm_other="$(softmax "$scratch/other.txt")"
echo "numerics_layers_check: control (another last token): log-softmax $lsm_other"
awk -v l="$lsm_other" 'BEGIN { exit !(l != "" && l >= 0.1) }' || {
    echo "numerics_layers_check: the control did not part: the comparison cannot fail" >&2
    exit 1
}
