#!/usr/bin/env bash
# A Slurm job: assay's verify plan (or an audit) with its distributional
# checks shared among the job's tasks (README, "Across machines with MPI").
#
#   sbatch examples/slurm-verify.sh            # verify, the bundled engine
#   sbatch --export=ALL,AUDIT_URL=http://host:8080,AUDIT_GGUF=/models/m.gguf \
#          examples/slurm-verify.sh            # audit a server instead
#
# assay must be built with -DASSAY_MPI=ON against the cluster's MPI, and be
# on the same path on every node (a shared file system, or a container image
# every node runs: then put the container runtime in front of assay on the
# srun line, e.g. `srun apptainer exec assay.sif assay run ...`, with the
# MPI inside the image matching the host's PMIx). Every task loads the
# model; an audited server must be reachable from every node.
#
#SBATCH --job-name=assay
#SBATCH --nodes=4
#SBATCH --ntasks-per-node=8
#SBATCH --cpus-per-task=4
#SBATCH --time=02:00:00
#SBATCH --output=assay-%j.out
set -euo pipefail

ASSAY="${ASSAY:-assay}"
OUT="${OUT:-assay-report-$SLURM_JOB_ID}"
# OpenBLAS's threads per task: the cores Slurm gave it.
export OPENBLAS_NUM_THREADS="${SLURM_CPUS_PER_TASK:-1}"
# A task that has not answered for this long (hung, its node gone) ends the
# run with an error and no report.
export ASSAY_RANK_TIMEOUT="${ASSAY_RANK_TIMEOUT:-1800}"

if [ -n "${AUDIT_URL:-}" ]; then
    srun --mpi=pmix "$ASSAY" audit --url "$AUDIT_URL" --model "$AUDIT_GGUF" --out "$OUT"
else
    srun --mpi=pmix "$ASSAY" run --no-bench --out "$OUT"
fi
# Rank 0 wrote the one report; its stamp says how many ranks shared it.
jq '.stamp.ranks, .verdict' "$OUT/report.json"
