#!/bin/bash
# Installs what building l7fast, running it and running the unit, fuzz and
# end-to-end tests need on Debian 12 (bookworm), through apt only.
# The heavier suites install their own extras when they run:
#   kernel module matrix  scripts/kmod/run-matrix.sh (headers, qemu, kernels)
#   system test           tests/system/run.sh (qemu, debootstrap, packaging)
#   benchmark             scripts/bench/run.sh (wrk, haproxy, nginx)
#
#   scripts/install-deps.sh            (as root, or with sudo available)
# Environment:
#   L7F_NO_APT=1   only check; fail listing what is missing
# Installs nothing when everything is already there (no apt-get update).
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
L7F_LOG_PREFIX=deps
# shellcheck source=scripts/lib/common.sh
. "$TOP/scripts/lib/common.sh"

PACKAGES=(
	# build
	build-essential cmake pkg-config clang llvm bpftool libbpf-dev libelf-dev zlib1g-dev
	libtomlplusplus-dev libnl-3-dev libnl-genl-3-dev libsystemd-dev libboost-dev
	libboost-system-dev libssl-dev libgtest-dev
	# fuzz suite: libFuzzer and the ASan/UBSan runtimes of clang 14
	libclang-rt-14-dev
	# run (demo) and test
	python3 python3-pytest curl iproute2 procps util-linux kmod
	dbus-daemon dbus-bin dbus-system-bus-common systemd
	# test: the monitoring assets (tests/monitoring/check.py, a ctest test):
	# promtool is in Debian's prometheus package
	prometheus python3-jsonschema python3-yaml
)

# shellcheck disable=SC1091
. /etc/os-release
if [ "${VERSION_CODENAME:-}" != bookworm ]; then
	log "warning: written for Debian 12 (bookworm); this is ${PRETTY_NAME:-unknown}. Trying anyway."
fi

mapfile -t missing < <(missing_packages "${PACKAGES[@]}")
if [ ${#missing[@]} = 0 ]; then
	log "all ${#PACKAGES[@]} packages present"
	exit 0
fi
if [ "${L7F_NO_APT:-0}" = 1 ]; then
	log "missing: ${missing[*]} (L7F_NO_APT=1: not installing)"
	exit 1
fi

SUDO=()
if [ "$(id -u)" != 0 ]; then
	command -v sudo >/dev/null || { log "missing: ${missing[*]}; run as root or install sudo"; exit 1; }
	SUDO=(sudo)
fi
log "installing: ${missing[*]}"
"${SUDO[@]}" apt-get -o DPkg::Lock::Timeout=300 update -qq
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
	apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends "${missing[@]}"
# Only promtool is wanted from prometheus, but its maintainer scripts enable
# and start a Prometheus server (port 9090) where systemd runs: stop and
# disable it when this script installed the package (a server the machine
# already had is left alone). Without systemd, invoke-rc.d starts the SysV
# script unless policy-rc.d forbids it; stop that one too.
if [[ " ${missing[*]} " == *" prometheus "* ]]; then
	if [ -d /run/systemd/system ]; then
		"${SUDO[@]}" systemctl disable --now prometheus.service >/dev/null 2>&1 || true
	elif [ -x /etc/init.d/prometheus ]; then
		"${SUDO[@]}" /etc/init.d/prometheus stop >/dev/null 2>&1 || true
	fi
	log "prometheus installed for promtool; its server is stopped and not enabled"
fi
log "done"
