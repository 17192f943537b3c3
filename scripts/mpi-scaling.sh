#!/usr/bin/env bash
# Measures what sharing checks among MPI ranks buys (docs/mpi.md), and
# models it beyond this machine.
#
#   scripts/mpi-scaling.sh [OUTDIR]        (default build/mpi-scaling)
#
# 1. Each group of checks at 1 and 2 ranks, ASSAY_MPI_ROUNDS times each
#    (default 2), the rank counts alternating so that both see the same
#    machine: each check's wall time (the median over the rounds) and, at 2
#    ranks, its collectives and the bytes rank 0 sent. The groups: the
#    verify plan's distributional checks (samples and oracle passes split by
#    index); its shared equivalence checks (rank 0 runs the engine, the
#    ranks share the oracle's passes); and, when ASSAY_MPI_AUDIT is set
#    ("URL MODEL.gguf [more audit options]"), a quick audit of that server
#    (`assay audit --quick --no-bench`), named ASSAY_MPI_AUDIT_NAME (default
#    the file's name).
# 2. Each check split into a part that did not shrink with the ranks (s:
#    start-up, the engine or the server, the oracle's prompt choice and
#    pilot, merging, the statistics) and a part that did (p: the samples and
#    the oracle's passes), from T1 = s + p and T2 = s + p / 2: s = 2 T2 - T1.
# 3. The model T(N) = s + p / N + c(N), with c(N) the collectives over a
#    network (latency ASSAY_MPI_LATENCY_US per step, default 50, log2 N
#    steps each; bandwidth ASSAY_MPI_GBPS, default 1.25 GB/s: the payload
#    twice, as a ring allreduce sends it, and rank 0 receiving N results of
#    13 kB), at 1, 2, 8, 64 and 512 ranks: for each group measured here, and
#    for each line of ASSAY_MPI_MODELS ("name s p" per line, seconds, as
#    measured elsewhere or scaled; underscores in the name are spaces),
#    printed and drawn into OUTDIR/mpi-scaling.svg. ASSAY_MPI_ROUNDS=0
#    models OUTDIR's last measurement again.
#
# Needs the test preset built with MPI (cmake --preset test), mpirun and jq.
set -euo pipefail
cd "$(dirname "$0")/.."

out="${1:-build/mpi-scaling}"
rounds="${ASSAY_MPI_ROUNDS:-2}"
latency_us="${ASSAY_MPI_LATENCY_US:-50}"
gbps="${ASSAY_MPI_GBPS:-1.25}"
assay=build/test/assay
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
[ -x "$assay" ] || { echo "mpi-scaling: build the test preset first" >&2; exit 2; }
command -v mpirun >/dev/null && command -v jq >/dev/null ||
    { echo "mpi-scaling: needs mpirun and jq (scripts/setup.sh)" >&2; exit 2; }
mkdir -p "$out"
# ASSAY_MPI_ROUNDS=0: no new measurement, the model from OUTDIR's last one.
if [ "$rounds" -gt 0 ]; then
    rm -f "$out"/times.tsv "$out"/volume.tsv
elif [ ! -s "$out/times.tsv" ]; then
    echo "mpi-scaling: no measurement in $out to model" >&2
    exit 2
fi

# The groups: name, then the command's arguments after the program.
equiv=()
for c in kv-cache batching continuous-batching paged preemption prefix-cache chunked-prefill \
    all all-mixed batch-invariant spec-k1 spec-k2 spec-k4 spec-k8; do
    equiv+=(--check "equiv.$c")
done
groups=("verify plan, distributional" "verify plan, shared equivalence")
args_0=(run --no-bench --family distributional)
args_1=(run --no-bench "${equiv[@]}")
if [ -n "${ASSAY_MPI_AUDIT:-}" ]; then
    read -r -a audit_words <<<"$ASSAY_MPI_AUDIT"
    [ "${#audit_words[@]}" -ge 2 ] ||
        { echo "mpi-scaling: ASSAY_MPI_AUDIT is \"URL MODEL.gguf [options]\"" >&2; exit 2; }
    groups+=("quick audit of ${ASSAY_MPI_AUDIT_NAME:-${audit_words[1]##*/}}")
    args_2=(audit --url "${audit_words[0]}" --model "${audit_words[1]}" --quick --no-bench
        "${audit_words[@]:2}")
fi

for r in $(seq 1 "$rounds"); do
    for g in "${!groups[@]}"; do
        declare -n args="args_$g"
        for n in 1 2; do
            d="$out/r$r-g$g-n$n"
            mpirun --oversubscribe -n "$n" "$assay" "${args[@]}" --out "$d" >"$d.txt" 2>"$d.err" ||
                [ -s "$d/report.json" ] ||
                { cat "$d.err" >&2; echo "mpi-scaling: ${groups[$g]} at $n ranks failed" >&2; exit 1; }
            jq -r --arg g "${groups[$g]}" --arg n "$n" '.checks[] | [$g, .name, $n, .seconds] | @tsv' \
                "$d/report.json" >>"$out/times.tsv"
            [ "$n" = 2 ] && sed -n 's/^assay [a-z]*: \[[0-9/]*\] \([^ ]*\) .*\[[0-9]* ranks, \([0-9]*\) collectives, \([0-9.e+]*\) MB sent and [0-9.e+]* MB received by rank 0\].*$/\1\t\2\t\3/p' \
                "$d.err" >>"$out/volume.tsv"
            echo "round $r, ${groups[$g]}, $n rank(s): $(jq -r '.duration_s | floor' "$d/report.json") s" >&2
        done
        unset -n args
    done
done

awk -F'\t' -v lat="$latency_us" -v gbps="$gbps" -v models="${ASSAY_MPI_MODELS:-}" -v svg="$out/mpi-scaling.svg" '
function median(list,    a, k, i, j, t) {
    k = split(list, a, " ")
    for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
}
function log2(x) { return log(x) / log(2) }
# The collectives of a set of nch checks at N ranks: ncoll steps, mb payload.
function comm(N, ncoll, mb, nch) {
    if (N == 1) return 0
    return ncoll * log2(N) * lat * 1e-6 + 2 * mb / (gbps * 1000) + N * 13e3 / (gbps * 1e9) * nch
}
FILENAME ~ /times/ {
    t[$2, $3] = t[$2, $3] " " $4
    if (!($2 in seen)) { seen[$2] = 1; order[++nchecks] = $2; grp[$2] = $1 }
    if (!($1 in gseen)) { gseen[$1] = 1; gorder[++ngroups] = $1 }
    next
}
FILENAME ~ /volume/ { coll[$1] = $2; mb[$1] = $3; next }
END {
    printf "%-32s %8s %8s %7s %7s %7s %6s %8s\n", "check", "1 rank", "2 ranks", "speedup", "s", "p", "coll", "MB"
    for (gi = 1; gi <= ngroups; gi++) {
        g = gorder[gi]
        printf "%s:\n", g
        for (i = 1; i <= nchecks; i++) {
            c = order[i]; if (grp[c] != g) continue
            t1 = median(t[c, 1]); t2 = median(t[c, 2])
            s = 2 * t2 - t1; if (s < 0) s = 0; p = t1 - s
            GS[g] += s; GP[g] += p; G1[g] += t1; G2[g] += t2; GC[g] += coll[c]; GM[g] += mb[c]; GN[g]++
            printf "  %-30s %7.2fs %7.2fs %7.2f %6.2fs %6.2fs %6d %8.2f\n", c, t1, t2, t1 / t2, s, p, coll[c], mb[c]
        }
        printf "  %-30s %7.2fs %7.2fs %7.2f %6.2fs %6.2fs %6d %8.2f\n", "all", G1[g], G2[g], G1[g] / G2[g], GS[g], GP[g], GC[g], GM[g]
        NC += GC[g]; MB += GM[g]; NCH += GN[g]
    }
    nm = 0
    for (gi = 1; gi <= ngroups; gi++) {
        g = gorder[gi]; nm++; name[nm] = g " (measured here)"; ms[nm] = GS[g]; mp[nm] = GP[g]
        mc[nm] = GC[g]; mm[nm] = GM[g]; mn[nm] = GN[g]
    }
    k = split(models, lines, "\n")
    for (i = 1; i <= k; i++) {
        if (split(lines[i], f, " ") < 3) continue
        nm++; ms[nm] = f[2]; mp[nm] = f[3]; name[nm] = f[1]; gsub(/_/, " ", name[nm])
        mc[nm] = NC; mm[nm] = MB; mn[nm] = NCH
    }
    split("1 2 8 64 512", ns, " ")
    printf "\nModel T(N) = s + p/N + c(N) (network: %g us a step, %g GB/s):\n", lat, gbps
    printf "%-48s", "" ; for (j = 1; j <= 5; j++) printf " %10s", "N=" ns[j]; printf " %12s\n", "N: p/N = s"
    ymin = 1e30; ymax = 0
    for (m = 1; m <= nm; m++) {
        printf "%-48s", name[m]
        for (j = 1; j <= 5; j++) {
            N = ns[j]; T = ms[m] + mp[m] / N + comm(N, mc[m], mm[m], mn[m]); tt[m, j] = T
            if (T < ymin) ymin = T; if (T > ymax) ymax = T
            if (T >= 7200) printf " %9.1fh", T / 3600; else if (T >= 120) printf " %9.1fm", T / 60; else printf " %9.1fs", T
        }
        printf " %12.0f\n", (ms[m] > 0 ? mp[m] / ms[m] : 0)
    }
    # The figure: log2 ranks across, log10 seconds up.
    W = 600; H = 400; L = 70; R = 340; TOP = 30; B = 50
    lo = int(log(ymin) / log(10)); if (log(ymin) / log(10) < lo) lo--
    hi = int(log(ymax) / log(10)) + 1
    print "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" W + R "\" height=\"" H "\" font-family=\"sans-serif\" font-size=\"12\">" > svg
    print "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>" > svg
    nt = split("1 10 60 600 3600 36000 360000", tick, " ")
    split("1 s|10 s|1 min|10 min|1 h|10 h|100 h", tname, "|")
    for (e = 1; e <= nt; e++) {
        v = log(tick[e]) / log(10)
        if (v < lo || v > hi) continue
        y = TOP + (H - TOP - B) * (hi - v) / (hi - lo)
        print "<line x1=\"" L "\" x2=\"" W "\" y1=\"" y "\" y2=\"" y "\" stroke=\"#ddd\"/>" > svg
        print "<text x=\"" L - 6 "\" y=\"" y + 4 "\" text-anchor=\"end\">" tname[e] "</text>" > svg
    }
    for (j = 1; j <= 5; j++) {
        x = L + (W - L) * log2(ns[j]) / 9
        print "<line x1=\"" x "\" x2=\"" x "\" y1=\"" TOP "\" y2=\"" H - B "\" stroke=\"#ddd\"/>" > svg
        print "<text x=\"" x "\" y=\"" H - B + 16 "\" text-anchor=\"middle\">" ns[j] "</text>" > svg
    }
    print "<text x=\"" (L + W) / 2 "\" y=\"" H - 12 "\" text-anchor=\"middle\">MPI ranks (measured at 1 and 2, modelled beyond)</text>" > svg
    print "<text x=\"" L "\" y=\"" TOP - 6 "\">wall time of the checks, T(N) = s + p/N + c(N)</text>" > svg
    split("#1f77b4 #d62728 #2ca02c #9467bd #ff7f0e #8c564b", col, " ")
    for (m = 1; m <= nm; m++) {
        pts = ""
        for (j = 1; j <= 5; j++) {
            x = L + (W - L) * log2(ns[j]) / 9
            y = TOP + (H - TOP - B) * (hi - log(tt[m, j]) / log(10)) / (hi - lo)
            pts = pts " " x "," y
            print "<circle cx=\"" x "\" cy=\"" y "\" r=\"3\" fill=\"" col[m] "\"/>" > svg
        }
        print "<polyline fill=\"none\" stroke=\"" col[m] "\" stroke-width=\"2\" points=\"" pts "\"/>" > svg
        print "<text x=\"" W + 10 "\" y=\"" TOP + 16 * m "\" fill=\"" col[m] "\">" name[m] "</text>" > svg
    }
    print "</svg>" > svg
}' "$out/times.tsv" "$out/volume.tsv"
echo "figure: $out/mpi-scaling.svg" >&2
