#!/usr/bin/env bash
# Makes the test models: random-weight llama and qwen2 models of realistic
# shape, written by assay (export_gguf, f32; the served sizes llama-1b,
# qwen2-1.5b and llama-8b straight to f16) and converted by llama.cpp's own
# llama-quantize to the formats llama-server is audited on.
#
#   make-test-models.sh [OUTDIR]
#   make-test-models.sh --shape NAME     print NAME's export_gguf --shape
#
# OUTDIR defaults to $ASSAY_CACHE/models (ASSAY_CACHE defaults to
# $XDG_CACHE_HOME/assay or ~/.cache/assay): never the checkout. Each model
# goes into OUTDIR/NAME-KEY/ as model-F32.gguf (or -F16) and model-TYPE.gguf, where
# KEY is a hash of the shape, the seed, the gains and the sources that
# define the weights; a quantized file is reused only when the llama-quantize
# binary that made it (its sha256, kept beside it in .key) is the one of
# now. A folder of the same NAME with another KEY is stale and removed.
# Files are written under a temporary name and renamed, so a partial file
# is never reused. Prints each file, its size and the time it took, and
# writes OUTDIR/manifest.tsv (name, type, path) for the check
# (scripts/check-test-models.sh).
#
# Environment:
#   ASSAY_BUILD          assay's build folder with suites/export_gguf
#                        (default: build/test of this checkout)
#   ASSAY_MODEL_SEED     weights seed (default 1)
#   ASSAY_MODEL_GAIN     output gain (default: export_gguf's for a shape)
#   ASSAY_MODEL_TYPES    llama-quantize types (default: F16 BF16 Q8_0 Q4_K_M Q5_K_M Q6_K)
#   ASSAY_MODEL_NAMES    which models (default: llama-hd64 llama-hd128 qwen2-hd64)
#   ASSAY_QUANT_THREADS  llama-quantize threads (default 2)
set -euo pipefail

# shellcheck source=scripts/test-models-lib.sh
. "$(dirname "$0")/test-models-lib.sh"
seed="${ASSAY_MODEL_SEED:-1}"
gain="${ASSAY_MODEL_GAIN:-}"
types="${ASSAY_MODEL_TYPES:-F16 BF16 Q8_0 Q4_K_M Q5_K_M Q6_K}"
names="${ASSAY_MODEL_NAMES:-llama-hd64 llama-hd128 qwen2-hd64}"
threads="${ASSAY_QUANT_THREADS:-2}"

die() {
    echo "make-test-models: $*" >&2
    exit 1
}

[ $# -le 1 ] || [ "$1" = --shape ] || {
    echo "usage: $0 [OUTDIR] | --shape NAME" >&2
    exit 2
}

# name -> shape (export_gguf --shape). head_dim 64 and 128, GQA 4:1,
# SwiGLU width about 8/3 d_model rounded to 256 (k-quants need rows of a
# multiple of 256). qwen2-hd64 is Qwen2-0.5B's kind: q/k/v biases, NEOX
# RoPE, tied embeddings, its vocabulary of 151936.
shape_of() {
    case "$1" in
    llama-hd64) echo "d_model=768,layers=12,heads=12,kv_heads=3,head_dim=64,d_ff=2048,vocab=32000,ctx=2048" ;;
    llama-hd128) echo "d_model=1024,layers=12,heads=8,kv_heads=2,head_dim=128,d_ff=2816,vocab=32000,ctx=2048" ;;
    qwen2-hd64) echo "d_model=768,layers=12,heads=12,kv_heads=3,head_dim=64,d_ff=2048,vocab=151936,ctx=2048,arch=qwen2,bias=1,tied=1,rope_theta=1000000" ;;
    llama-small) echo "d_model=256,layers=4,heads=4,kv_heads=2,head_dim=64,d_ff=768,vocab=8192,ctx=2048" ;;
    llama-draft) echo "d_model=256,layers=2,heads=4,kv_heads=1,head_dim=64,d_ff=768,vocab=32000,ctx=2048" ;;
    qwen2-draft) echo "d_model=256,layers=2,heads=4,kv_heads=1,head_dim=64,d_ff=768,vocab=151936,ctx=2048,arch=qwen2,bias=1,tied=1,rope_theta=1000000" ;;
    # The sizes people serve, by hand (not in the default list): shaped
    # like Llama 3.2 1B (tied, llama 3's RoPE divisors, GQA 32:8), Qwen2.5
    # 1.5B and Llama 3.1 8B, with their vocabularies and RoPE bases.
    llama-1b) echo "d_model=2048,layers=16,heads=32,kv_heads=8,head_dim=64,d_ff=8192,vocab=128256,ctx=8192,tied=1,rope_theta=500000,rope_freqs=1" ;;
    qwen2-1.5b) echo "d_model=1536,layers=28,heads=12,kv_heads=2,head_dim=128,d_ff=8960,vocab=151936,ctx=8192,arch=qwen2,bias=1,tied=1,rope_theta=1000000" ;;
    llama-8b) echo "d_model=4096,layers=32,heads=32,kv_heads=8,head_dim=128,d_ff=14336,vocab=128256,ctx=8192,rope_theta=500000,rope_freqs=1" ;;
    *) return 1 ;;
    esac
}

# The format a model is exported in: F16 for the served sizes (an 8B
# model is 32 GB in F32; written straight to F16 by export_gguf --type,
# never built in memory), F32 for the others.
base_type_of() {
    case "$1" in
    llama-1b | qwen2-1.5b | llama-8b) echo F16 ;;
    *) echo F32 ;;
    esac
}

# The parameters of a shape (the tied output counted once).
params_of() {
    echo "$1" | tr ',' '\n' | awk -F= '{ v[$1] = $2 }
        END {
            kv = v["kv_heads"] ? v["kv_heads"] : v["heads"]
            hd = v["head_dim"] ? v["head_dim"] : v["d_model"] / v["heads"]
            d = v["d_model"]
            per = d * (2 * v["heads"] * hd + 2 * kv * hd) + 3 * d * v["d_ff"]
            printf "%.0f\n", v["vocab"] * d * (v["tied"] == 1 ? 1 : 2) + v["layers"] * per
        }'
}

if [ "${1:-}" = --shape ]; then
    [ $# -eq 2 ] || die "usage: $0 --shape NAME"
    shape_of "$2" || die "unknown model '$2'"
    exit 0
fi

export_bin="$build/suites/export_gguf"
[ -x "$export_bin" ] || die "no export_gguf at $export_bin (build it: cmake --preset test && cmake --build --preset test --target export_gguf, or set ASSAY_BUILD)"
quantize="$("$here/build-llama-server.sh" --quantize | tail -n 1)"
[ -x "$quantize" ] || die "no llama-quantize binary at '$quantize'"

# What the f32 weights depend on besides the arguments: the sources of the
# initialisation, the random numbers, the GGUF writer and the tool.
weights_sources=(engine/model.c engine/model.h engine/model_gguf.c engine/gguf.c engine/gguf.h
    engine/gguf_internal.h engine/gguf_types.c engine/gguf_write.c
    core/rng.c core/sha256.c suites/export_gguf.c)
sources_hash="$(cd "$repo" && cat "${weights_sources[@]}" | sha256sum | cut -c1-16)"
quantize_hash="$(sha256sum "$quantize" | cut -c1-64)"

df_avail_mb() { df -Pm "$1" | awk 'NR == 2 { print $4 }'; }

human_size() { numfmt --to=iec-i --suffix=B --format="%.1f" "$1"; }

now_ms() { date +%s%3N; }

# Seconds since $1 (from now_ms), with one decimal.
since() { awk -v a="$1" -v b="$(now_ms)" 'BEGIN { printf "%.1f", (b - a) / 1000 }'; }

mkdir -p "$out"
# One maker at a time per folder: two would remove each other's files as
# stale and write over each other's manifest.
exec 9>"$out/.lock"
flock 9
manifest="$out/manifest.tsv.tmp.$$"
: >"$manifest"
trap 'rm -f "$manifest"' EXIT
printf '%-12s %-7s %10s %9s  %s\n' model type size seconds file

for name in $names; do
    shape="$(shape_of "$name")" || die "unknown model '$name' (expected llama-hd64, llama-hd128, qwen2-hd64, llama-small, llama-draft, qwen2-draft, llama-1b, qwen2-1.5b or llama-8b)"
    args=(--shape "$shape" --seed "$seed")
    [ -n "$gain" ] && args+=(--gain "$gain")
    key="$(printf '%s\n' "format 1" "$shape" "seed $seed" "gain ${gain:-default}" \
        "sources $sources_hash" | sha256sum | cut -c1-12)"
    dir="$out/$name-$key"

    # Remove stale folders of this model (another key); only ours, which
    # hold a .key file.
    for old in "$out/$name"-*; do
        [ -d "$old" ] && [ "$old" != "$dir" ] && [ -f "$old/.key" ] || continue
        echo "make-test-models: removing stale $old" >&2
        rm -rf "$old"
    done
    mkdir -p "$dir"
    printf '%s\n' "$shape" "seed $seed" "gain ${gain:-default}" "sources $sources_hash" >"$dir/.key"

    base_type="$(base_type_of "$name")"
    base="$dir/model-$base_type.gguf"
    if [ -f "$base" ] && [ -f "$dir/export.log" ]; then
        seconds=reused
    else
        bytes_per=4
        [ "$base_type" = F16 ] && bytes_per=2 && args+=(--type F16)
        need_mb=$(($(params_of "$shape") * bytes_per / 1048576 + 4096))
        [ "$(df_avail_mb "$out")" -gt "$need_mb" ] ||
            die "less than $need_mb MiB free in $out for $name in $base_type"
        rm -f "$base" "$dir/export.log"
        start=$(now_ms)
        "$export_bin" "$base" "${args[@]}" >"$dir/export.log.tmp" ||
            die "export_gguf failed for $name (see $dir/export.log.tmp)"
        mv "$dir/export.log.tmp" "$dir/export.log"
        seconds=$(since "$start")
    fi
    sed -n '2,$s/^/  /p' "$dir/export.log"
    printf '%-12s %-7s %10s %9s  %s\n' "$name" "$base_type" \
        "$(human_size "$(stat -c %s "$base")")" "$seconds" "$base"
    printf '%s\t%s\t%s\n' "$name" "$base_type" "$base" >>"$manifest"

    for type in $types; do
        [ "$type" = "$base_type" ] && continue
        file="$dir/model-$type.gguf"
        if [ -f "$file" ] && [ "$(cat "$file.key" 2>/dev/null)" = "$quantize_hash" ]; then
            seconds=reused
        else
            rm -f "$file" "$file.key"
            start=$(now_ms)
            "$quantize" "$base" "$file.tmp" "$type" "$threads" >"$dir/quantize-$type.log" 2>&1 || {
                tail -n 20 "$dir/quantize-$type.log" >&2
                rm -f "$file.tmp"
                die "llama-quantize $type failed for $name (see $dir/quantize-$type.log)"
            }
            mv "$file.tmp" "$file"
            echo "$quantize_hash" >"$file.key"
            seconds=$(since "$start")
        fi
        printf '%-12s %-7s %10s %9s  %s\n' "$name" "$type" \
            "$(human_size "$(stat -c %s "$file")")" "$seconds" "$file"
        printf '%s\t%s\t%s\n' "$name" "$type" "$file" >>"$manifest"
    done
done
mv "$manifest" "$out/manifest.tsv"
trap - EXIT
