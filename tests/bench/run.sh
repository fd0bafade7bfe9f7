#!/bin/bash
# The benchmark harness's tests (scripts/run-tests.sh suite "bench"): the
# benchmark's peers are installed if missing (as make bench does), then
# tests/bench runs with skips turned into failures, and the smoke run's
# summary is printed (its figures are not judged).
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
L7F_LOG_PREFIX=bench-tests
# shellcheck source=scripts/lib/common.sh
. "$TOP/scripts/lib/common.sh"
build=${BUILD:-$TOP/build}
case $build in /*) ;; *) build=$(pwd)/$build ;; esac
"$TOP/scripts/bench/run.sh" --install-only
out=$build/bench/smoke
rm -rf "$out"
status=0
L7FAST_BUILD=$build L7BENCH_REQUIRE=1 L7BENCH_SMOKE_OUT=$out \
	/usr/bin/python3 -m pytest -q -p no:cacheprovider "$TOP/tests/bench" || status=$?
if [ -f "$out/summary.md" ]; then
	echo "--- smoke run: $out/summary.md (figures not judged) ---"
	sed -n '/^## Standard policy/,/^## Sweep/p' "$out/summary.md" | sed '$d'
fi
exit $status
