#!/usr/bin/env bash
# The HTML report in a real browser: render the committed sample reports
# (fixtures/reports/sample-run.json, an `assay run --quick`, and
# sample-evidence.json, an `assay compare` whose distributional checks pool
# a tail; sample-compare-regression.json, an `assay compare --no-checks`
# that found a regression (exit 3); sample-skipped-run.json, an `assay run
# --no-bench --require-checks 10` on a plugin engine that skips 30 of the
# 33 checks and fails one; sample-kill-matrix.json, the property family's
# kill matrix from `assay-mutants mutants --matrix --out`) with this
# build's `assay report`,
# load each in Debian's Chromium
# headless and check that it renders with its plots, the distributional
# evidence drawn as its JSON says, and without a console error
# (suites/report_browser.mjs, through playwright-core and the DevTools
# protocol).
#
#   report_browser.sh ASSAY_BINARY WORK_DIR
#
# Exit 77 (CTest: skipped) only when Chromium is not installed; everything
# else that is missing is a failure. playwright-core (the npm package, not
# its browsers: Debian's Chromium is used) is installed once into
# WORK_DIR/node_modules, pinned.
set -euo pipefail

assay="$1"
work="$2"
here="$(cd "$(dirname "$0")" && pwd)"
fixtures="${ASSAY_FIXTURES:-$here/../fixtures}"
chromium="${ASSAY_CHROMIUM:-/usr/bin/chromium}"
playwright_version="1.65.1"

if [ ! -x "$chromium" ]; then
    echo "SKIP: Chromium is not installed at $chromium (scripts/setup.sh --browser installs Debian's chromium)"
    exit 77
fi
for tool in node npm; do
    command -v "$tool" >/dev/null 2>&1 || {
        echo "FAIL: '$tool' is required for the browser check (scripts/setup.sh --audit installs it)" >&2
        exit 1
    }
done

mkdir -p "$work"
module="$work/node_modules/playwright-core"
if [ ! -f "$module/package.json" ] ||
   ! grep -q "\"version\": \"$playwright_version\"" "$module/package.json"; then
    echo "installing playwright-core@$playwright_version into $work" >&2
    (cd "$work" && npm install --no-audit --no-fund --silent --no-save \
        "playwright-core@$playwright_version" >/dev/null) || {
        echo "FAIL: npm could not install playwright-core@$playwright_version" >&2
        exit 1
    }
fi

# Each page is rendered by this build, from the JSON alone.
for sample in sample-run sample-evidence sample-compare-regression sample-skipped-run \
    sample-kill-matrix; do
    out="$work/out-$sample"
    rm -rf "$out"
    mkdir -p "$out"
    # The status is the report's own (3 for the regression, 1 for the
    # failed check): anything above 4 is a failure to render.
    status=0
    "$assay" report "$fixtures/reports/$sample.json" --out "$out" >/dev/null || status=$?
    if [ "$status" -gt 4 ]; then
        echo "FAIL: assay report $sample.json ended with status $status" >&2
        exit 1
    fi
    ASSAY_PLAYWRIGHT="$module" ASSAY_CHROMIUM="$chromium" \
        node "$here/report_browser.mjs" "$out/$sample.html" "$out" "$fixtures/reports/$sample.json"
done
