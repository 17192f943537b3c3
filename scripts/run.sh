#!/usr/bin/env bash
# The main job: verify the bundled engine with its defaults, measure it, and
# write the report.
#
#   scripts/run.sh [assay run options]     (default: --out assay-report)
#
# Installs missing Debian packages first (scripts/setup.sh), builds the
# release preset into build/release, then runs `assay run`, which prints the
# pass/fail table and writes report.json, report.html and report.md.
# Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release

if [ $# -eq 0 ]; then
    set -- --out assay-report
fi
exec build/release/assay run "$@"
