#!/bin/bash
# make bench / make bench-full: l7fast against a direct connection, HAProxy
# and nginx. Installs the benchmark's peers (Debian 12, apt) when missing,
# builds l7fastd when it is not built, then runs the harness
# (scripts/bench/l7bench). Options: scripts/bench/run.sh --help;
# --install-only only installs the peers.
# Results: build/bench/<timestamp>/summary.md (build/bench/latest).
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOP=$(cd "$here/../.." && pwd)
L7F_LOG_PREFIX=bench
# shellcheck source=scripts/lib/common.sh
. "$TOP/scripts/lib/common.sh"
build=${L7FAST_BUILD:-$TOP/build}
case $build in /*) ;; *) build=$(pwd)/$build ;; esac
export L7FAST_BUILD="$build"

# the harness's help needs neither packages nor a build
for a in "$@"; do
	case $a in -h | --help) cd "$here" && exec /usr/bin/python3 -m l7bench.main --help ;; esac
done

packages=(haproxy wrk python3-matplotlib linux-perf bpftool)
# any nginx flavour (nginx-light, nginx-full, ...) will do
command -v nginx >/dev/null 2>&1 || packages+=(nginx)
mapfile -t need < <(missing_packages "${packages[@]}")
if [ ${#need[@]} -gt 0 ] && [ "${L7BENCH_NO_INSTALL:-0}" != 1 ]; then
	log "installing ${need[*]}"
	[ "$(id -u)" = 0 ] || die "needs root to install packages and to run (BPF, cgroups)"
	mkdir -p "$build"
	apt_install "$build/bench-apt.log" "${need[@]}"
fi
# Debian starts the packaged services where systemd runs; the benchmark
# starts its own instances and needs neither.
for svc in nginx haproxy; do
	if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet "$svc" 2>/dev/null; then
		log "note: the system's $svc service is running (it is left alone)"
	fi
done

if [ "${1:-}" = --install-only ]; then
	exit 0
fi

if [ ! -x "$build/daemon/l7fastd" ]; then
	log "$build/daemon/l7fastd is not built; building"
	make -C "$TOP" build
fi

cd "$here"
exec /usr/bin/python3 -m l7bench.main "$@"
