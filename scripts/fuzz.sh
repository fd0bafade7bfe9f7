#!/bin/bash
# Builds the libFuzzer targets (tests/fuzz, clang + ASan/UBSan, a CMake
# configuration of its own in $BUILD/fuzz, kept between runs) and runs each
# for a bounded time.
#
#   scripts/fuzz.sh                  every target, L7FAST_FUZZ_SECONDS each (default 30)
#   scripts/fuzz.sh --long           every target, 600 s each (make fuzz-long)
#   scripts/fuzz.sh http_parse jwt   only these
#
# Targets: http_parse policy jwt match_diff http_diff (http_diff loads a BPF
# program: root). Each run starts from the committed seeds
# (tests/fuzz/corpus/<target>) plus what earlier runs found
# ($BUILD/fuzz/corpus/<target>). Any crash, leak, timeout or broken
# invariant fails the run; the reproducer's path is printed, and
#   $BUILD/fuzz/tests/fuzz/fuzz_<target> <reproducer>
# replays it. A fixed bug's reproducer goes into tests/fuzz/corpus/<target>/,
# where the unit tests replay it too (tests/unit/fuzz_corpus_test.cpp).
# Environment: BUILD (default build), L7FAST_FUZZ_BUILD (default $BUILD/fuzz),
# L7FAST_FUZZ_SECONDS, JOBS (build, default 2).
set -uo pipefail

TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$TOP/$BUILD ;; esac
FB=${L7FAST_FUZZ_BUILD:-$BUILD/fuzz}
case $FB in /*) ;; *) FB=$TOP/$FB ;; esac
ALL=(http_parse policy jwt match_diff http_diff)
SECONDS_PER=${L7FAST_FUZZ_SECONDS:-30}

log() { printf '[fuzz] %s\n' "$*" >&2; }

if [ "${1:-}" = --long ]; then
	SECONDS_PER=${L7FAST_FUZZ_SECONDS:-600}
	shift
fi
if [ $# -gt 0 ]; then TARGETS=("$@"); else TARGETS=("${ALL[@]}"); fi
for t in "${TARGETS[@]}"; do
	case " ${ALL[*]} " in *" $t "*) ;; *) log "unknown target '$t' (known: ${ALL[*]})"; exit 2 ;; esac
done

# inputs longer than the defaults libFuzzer derives from the seeds: heads
# beyond the kernel's 8 KiB window, policies of many routes
max_len() {
	case $1 in
	http_parse | http_diff) echo 9000 ;;
	policy | match_diff) echo 16384 ;;
	jwt) echo 4096 ;;
	esac
}

dict() {
	case $1 in
	http_parse | http_diff) echo http ;;
	policy | match_diff) echo policy ;;
	jwt) echo jwt ;;
	esac
}

if [ ! -f "$FB/CMakeCache.txt" ]; then
	log "configuring $FB (clang, -DL7FAST_FUZZ=ON)"
	mkdir -p "$FB"
	CC=clang CXX=clang++ cmake -S "$TOP" -B "$FB" -DL7FAST_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
		>"$FB/configure.log" 2>&1 ||
		{ tail -40 "$FB/configure.log" >&2; log "cmake configure failed (log: $FB/configure.log)"; exit 1; }
fi
log "building fuzz targets"
cmake --build "$FB" -j"${JOBS:-2}" --target "${TARGETS[@]/#/fuzz_}" >"$FB/build.log" 2>&1 ||
	{ tail -40 "$FB/build.log"; log "build failed (log: $FB/build.log)"; exit 1; }

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
failed=0
SUMMARY=()
for t in "${TARGETS[@]}"; do
	work=$FB/corpus/$t
	art=$FB/artifacts/$t
	logf=$FB/logs/$t.log
	mkdir -p "$work" "$art" "$FB/logs"
	args=(-max_total_time="$SECONDS_PER" -timeout=25 -rss_limit_mb=2560 -max_len="$(max_len "$t")"
		-print_final_stats=1 -artifact_prefix="$art/")
	args+=(-dict="$TOP/tests/fuzz/dict/$(dict "$t").dict")
	log "$t: ${SECONDS_PER}s"
	(cd "$FB" && "$FB/tests/fuzz/fuzz_$t" "${args[@]}" "$work" "$TOP/tests/fuzz/corpus/$t") >"$logf" 2>&1
	rc=$?
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$logf" | tail -1)
	rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$logf" | tail -1)
	stats=$(grep -E '^#[0-9]+' "$logf" | tail -1 | sed -E 's/^#[0-9]+[[:space:]]+[A-Z]+[[:space:]]+//')
	line=$(printf '%-11s execs %-10s exec/s %-7s %s' "$t" "${execs:-?}" "${rate:-?}" "$stats")
	if [ $rc != 0 ]; then
		failed=1
		line="$line  FAILED (exit $rc)"
		grep -E 'ERROR: |invariant broken|SUMMARY: ' "$logf" | head -5 >&2
		for f in "$art"/*; do
			[ -e "$f" ] && log "$t: reproducer $f (replay: $FB/tests/fuzz/fuzz_$t $f)"
		done
		log "$t: full log $logf"
	fi
	log "$line"
	SUMMARY+=("$line")
done
echo "fuzz summary (${SECONDS_PER}s per target):"
printf '  %s\n' "${SUMMARY[@]}"
exit $failed
