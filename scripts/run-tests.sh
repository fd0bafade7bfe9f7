#!/bin/bash
# The whole l7fast test suite, or some of its suites:
#
#   scripts/run-tests.sh                 all suites (what `make test` and .ci/run run)
#   scripts/run-tests.sh unit e2e        only these
#
# Suites, in the order they run:
#   unit    C++ unit tests (ctest): HTTP parser, policy loader/router/compiler,
#           differential matcher tests, D-Bus codecs and access checks, the
#           fuzz corpus replayed through the fuzz targets' invariants
#   fuzz    libFuzzer targets (scripts/fuzz.sh: its own clang/ASan/UBSan
#           build in $BUILD/fuzz), L7FAST_FUZZ_SECONDS (default 30) each:
#           HTTP parser, policy loader+compiler, JWT, matcher vs Router,
#           BPF-compiled parser vs native; execs per target in the log
#   e2e     tests/e2e (pytest, root): the real l7fastd with its eBPF data plane
#           on this kernel, real sockets, backends, private D-Bus
#   kmod    l7fast.ko built with kbuild and tested in Debian's 6.1 and 6.12
#           kernels under qemu (scripts/kmod/run-matrix.sh)
#   system  .deb/.rpm built, installed and driven under systemd in a qemu
#           guest (tests/system/run.sh)
#   bench   the benchmark harness in smoke mode (tests/bench/run.sh): it
#           must run and print figures; figures are not judged here
# Every suite runs even when an earlier one fails; the summary lists each
# suite's result and duration, and the exit status is 1 if any failed.
# Environment: BUILD (default build), L7F_SUITES (default: all, as above).
set -uo pipefail

TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$TOP/$BUILD ;; esac
ALL=(unit fuzz e2e kmod system bench)

log() { printf '[tests %5ds] %s\n' "$SECONDS" "$*" >&2; }

if [ $# -gt 0 ]; then SUITES=("$@"); else read -r -a SUITES <<<"${L7F_SUITES:-${ALL[*]}}"; fi
for s in "${SUITES[@]}"; do
	case " ${ALL[*]} " in *" $s "*) ;; *) log "unknown suite '$s' (known: ${ALL[*]})"; exit 2 ;; esac
done

[ -x "$BUILD/daemon/l7fastd" ] || { log "no build in $BUILD: run 'make build' (or 'make test') first"; exit 2; }

suite_unit() {
	(cd "$BUILD" && ctest --output-on-failure -j"$(nproc)" --timeout 300)
}

suite_fuzz() {
	BUILD=$BUILD "$TOP/scripts/fuzz.sh"
}

suite_e2e() {
	[ "$(id -u)" = 0 ] || { log "e2e needs root (BPF, cgroups, network namespaces)"; return 1; }
	L7FAST_BUILD=$BUILD L7FAST_REQUIRE_E2E=1 /usr/bin/python3 -m pytest -q -p no:cacheprovider \
		"$TOP/tests/e2e"
}

suite_kmod() {
	"$TOP/scripts/kmod/run-matrix.sh"
}

suite_system() {
	"$TOP/tests/system/run.sh"
}

suite_bench() {
	if [ ! -x "$TOP/tests/bench/run.sh" ]; then
		log "tests/bench/run.sh missing"
		return 1
	fi
	BUILD=$BUILD "$TOP/tests/bench/run.sh"
}

RESULTS=()
failed=0
for s in "${SUITES[@]}"; do
	log "=== suite $s ==="
	t0=$SECONDS
	if "suite_$s"; then st=PASS; else st=FAIL; failed=1; fi
	RESULTS+=("$(printf '%-7s %s %5ds' "$s" "$st" $((SECONDS - t0)))")
	log "=== suite $s: $st in $((SECONDS - t0))s ==="
done

echo
echo "l7fast test summary (total ${SECONDS}s):"
printf '  %s\n' "${RESULTS[@]}"
if [ $failed = 0 ]; then echo "ALL SUITES PASSED"; else echo "SOME SUITES FAILED"; fi
exit $failed
