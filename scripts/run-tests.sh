#!/bin/bash
# The whole l7fast test suite, or some of its suites:
#
#   scripts/run-tests.sh                 all suites (what `make test` and .ci/run run)
#   scripts/run-tests.sh unit e2e        only these
#   scripts/run-tests.sh --under-load 2 unit e2e
#                                        the same with 2 CPU-burning processes
#                                        running throughout
#
# --under-load N: N busy loops start before the first suite and are killed
# when this script exits, however it exits (each also ends by itself once
# the script is gone); the summary says the run was under load N. The
# suites' verdicts must not depend on the machine's load (issue 11): tests
# assert behaviour, never a rate, a share or a duration that depends on
# scheduling, and this is how to check that they do not.
#
# Suites, in the order they run:
#   unit    C++ unit tests (ctest): HTTP parser, policy loader/router/compiler,
#           differential matcher tests, D-Bus codecs and access checks, the
#           fuzz corpus replayed through the fuzz targets' invariants; and
#           the Grafana dashboard and Prometheus alert rules
#           (tests/monitoring/check.py, also a ctest test)
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
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
L7F_LOG_PREFIX=tests
# shellcheck source=scripts/lib/common.sh
. "$TOP/scripts/lib/common.sh"
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$TOP/$BUILD ;; esac
ALL=(unit fuzz e2e kmod system bench)

usage() {
	log "usage: scripts/run-tests.sh [--under-load N] [suite...] (suites: ${ALL[*]})"
	exit 2
}

LOAD=0
ARGS=()
while [ $# -gt 0 ]; do
	case $1 in
	--under-load | --under-load=*)
		if [ "$1" = --under-load ]; then
			[ $# -ge 2 ] || { log "--under-load needs a number of CPU-burning processes"; usage; }
			LOAD=$2
			shift
		else
			LOAD=${1#--under-load=}
		fi
		[[ $LOAD =~ ^[1-9][0-9]{0,3}$ ]] ||
			{ log "--under-load: '$LOAD' is not a positive integer (1-9999)"; usage; }
		;;
	-h | --help) usage ;;
	-*) log "unknown option '$1'"; usage ;;
	*) ARGS+=("$1") ;;
	esac
	shift
done

if [ ${#ARGS[@]} -gt 0 ]; then SUITES=("${ARGS[@]}"); else read -r -a SUITES <<<"${L7F_SUITES:-${ALL[*]}}"; fi
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
	L7F_KERNEL_TESTS=$BUILD/tests/l7fast_kernel_tests "$TOP/scripts/kmod/run-matrix.sh"
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

# The burners: busy loops in subshells of this script. Killed by the EXIT
# trap (INT and TERM exit through it); a burner also stops by itself once
# this script's process is gone (kill -9), so none outlives the run.
BURNERS=()
stop_burners() {
	local pid
	for pid in "${BURNERS[@]}"; do kill "$pid" 2>/dev/null || true; done
	for pid in "${BURNERS[@]}"; do wait "$pid" 2>/dev/null || true; done
	BURNERS=()
}
burn() {
	local i
	while kill -0 "$1" 2>/dev/null; do
		for ((i = 0; i < 200000; i++)); do :; done
	done
}
if [ "$LOAD" -gt 0 ]; then
	trap stop_burners EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	for ((b = 0; b < LOAD; b++)); do
		burn $$ &
		BURNERS+=($!)
	done
	log "under load: $LOAD CPU-burning processes (pids ${BURNERS[*]}) on $(nproc) CPUs"
fi

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
echo "l7fast test summary (total ${SECONDS}s$([ "$LOAD" = 0 ] || echo ", under load $LOAD: $LOAD CPU-burning processes")):"
printf '  %s\n' "${RESULTS[@]}"
if [ $failed = 0 ]; then echo "ALL SUITES PASSED"; else echo "SOME SUITES FAILED"; fi
exit $failed
