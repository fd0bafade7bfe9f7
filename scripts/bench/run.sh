#!/bin/sh
# make bench / make bench-full: l7fast against a direct connection, HAProxy
# and nginx. Installs the benchmark's peers (Debian 12, apt) when missing,
# builds l7fastd when it is not built, then runs the harness
# (scripts/bench/l7bench). Options: scripts/bench/run.sh --help;
# --install-only only installs the peers.
# Results: build/bench/<timestamp>/summary.md (build/bench/latest).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${L7FAST_BUILD:-$root/build}
case $build in /*) ;; *) build=$(pwd)/$build ;; esac
export L7FAST_BUILD="$build"

packages="haproxy nginx wrk python3-matplotlib linux-perf bpftool"

need_install=""
for p in $packages; do
    # any nginx flavour (nginx-light, nginx-full, ...) will do
    if [ "$p" = nginx ] && command -v nginx >/dev/null 2>&1; then
        continue
    fi
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        need_install="$need_install $p"
    fi
done
if [ -n "$need_install" ] && [ "${L7BENCH_NO_INSTALL:-0}" != 1 ]; then
    echo "bench: installing$need_install"
    if [ "$(id -u)" != 0 ]; then
        echo "bench: needs root to install packages and to run (BPF, cgroups)" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    # shellcheck disable=SC2086
    apt-get install -y --no-install-recommends $need_install ||
        { apt-get update && apt-get install -y --no-install-recommends $need_install; }
fi
# Debian starts the packaged services where systemd runs; the benchmark
# starts its own instances and needs neither.
for svc in nginx haproxy; do
    if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet "$svc" 2>/dev/null; then
        echo "bench: note: the system's $svc service is running (it is left alone)"
    fi
done

if [ "${1:-}" = --install-only ]; then
    exit 0
fi

if [ ! -x "$build/daemon/l7fastd" ]; then
    echo "bench: $build/daemon/l7fastd is not built; building"
    make -C "$root" build
fi

cd "$here"
exec /usr/bin/python3 -m l7bench.main "$@"
