#!/bin/bash
# The system test: builds the .deb and .rpm packages, checks the service
# files on the host, then installs the .debs into a Debian 12 guest (6.12
# kernel from bookworm-backports, systemd as PID 1) booted under qemu (TCG)
# and runs tests/system/guest/systest.sh there: DKMS, start/READY, traffic
# through the kernel path, reload under load, a broken policy, l7fastctl
# permissions, upgrade, remove and purge.
#
#   tests/system/run.sh            (as root, Debian 12; `make test-system`)
# Environment:
#   L7F_SYS_OUT       results directory  (default <top>/build/system)
#   L7F_SYS_TIMEOUT   seconds for the guest (default 1200)
#   L7F_SYS_SKIP_RPM=1  do not build the .rpm
#   L7F_NO_APT=1      do not apt-get anything (offline re-run)
#   L7F_SYS_GUEST_SCRIPT=FILE  run FILE in the guest instead of
#                     tests/system/guest/systest.sh (experiments, debugging)
#   L7F_SRC, L7F_SRC_OVERLAY, L7F_POLICY   passed to the package builds
# Output: one "L7S-TEST: PASS|FAIL|SKIP|TODO name: detail" line per check
# (host and guest), then the verdict; logs under L7F_SYS_OUT.

TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
L7F_LOG_PREFIX=system
# shellcheck source=scripts/lib/common.sh
. "$TOP/scripts/lib/common.sh"
OUT=${L7F_SYS_OUT:-$TOP/build/system}
TIMEOUT=${L7F_SYS_TIMEOUT:-1200}
HOST_PACKAGES=(
	qemu-system-x86 qemu-utils debootstrap e2fsprogs dpkg-dev
	dbus dbus-bin dbus-daemon dbus-tests util-linux systemd bash-completion python3
)

RESULTS=()
result() { # STATE name detail
	local line="L7S-TEST: $1 host/$2${3:+: $3}"
	RESULTS+=("$line")
	echo "$line"
}
timed() { # NAME command...: runs it, records its duration
	local name=$1 t0=$SECONDS rc=0
	shift
	"$@" || rc=$?
	DURATIONS+=("$name $((SECONDS - t0))s")
	return $rc
}
DURATIONS=()

[ "$(id -u)" = 0 ] || die "must run as root (apt, debootstrap, chroot, mount)"
# shellcheck disable=SC1091
. /etc/os-release
[ "${VERSION_CODENAME:-}" = bookworm ] || die "this test targets a Debian 12 host, found ${VERSION_CODENAME:-?}"
rm -rf "$OUT"
mkdir -p "$OUT"

# --- host tools ------------------------------------------------------------------
host_packages() {
	local missing=() p
	[ "${L7F_NO_APT:-0}" = 1 ] && return 0
	for p in "${HOST_PACKAGES[@]}"; do
		dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q ' installed$' || missing+=("$p")
	done
	[ ${#missing[@]} = 0 ] && return 0
	log "installing ${missing[*]}"
	{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"; } \
		>"$OUT/apt-host.log" 2>&1 || { tail -n 20 "$OUT/apt-host.log" >&2; die "apt-get install failed"; }
}
timed host-tools host_packages

# --- packages ----------------------------------------------------------------------
DEB_OUT=$TOP/build/packaging/deb
RPM_OUT=$TOP/build/packaging/rpm
if timed deb env L7F_DEB_REUSE=1 "$TOP/packaging/build-deb.sh" 2>"$OUT/build-deb.log"; then
	result PASS deb-build "$(cd "$DEB_OUT" && ls *.deb | tr '\n' ' ')"
	result PASS lintian "$( [ -s "$DEB_OUT/lintian.txt" ] && wc -l <"$DEB_OUT/lintian.txt" | sed 's/$/ lines of info/' || echo 'clean: 0 tags with --pedantic --info (overrides: packaging/debian/*.lintian-overrides)')"
else
	cat "$OUT/build-deb.log" >&2
	result FAIL deb-build "packaging/build-deb.sh failed (log: $OUT/build-deb.log)"
	die "no packages to test"
fi
if [ "${L7F_SYS_SKIP_RPM:-0}" = 1 ]; then
	result SKIP rpm-build "L7F_SYS_SKIP_RPM=1"
elif timed rpm env L7F_RPM_REUSE=1 "$TOP/packaging/build-rpm.sh" 2>"$OUT/build-rpm.log"; then
	result PASS rpm-build "$(cd "$RPM_OUT" && ls l7fast-*.rpm | grep -v -e debuginfo -e '\.src\.' | tr '\n' ' ')"
	result PASS rpmlint "$(grep -m1 'packages and .* checked' "$RPM_OUT/rpmlint.txt" | sed 's/^ *//')"
else
	tail -n 20 "$OUT/build-rpm.log" >&2
	result FAIL rpm-build "packaging/build-rpm.sh failed (log: $OUT/build-rpm.log)"
fi
VERSION=$(dpkg-deb -f "$DEB_OUT"/l7fast_*_amd64.deb Version)
DEB=$DEB_OUT/l7fast_${VERSION}_amd64.deb
DKMS_DEB=$DEB_OUT/l7fast-dkms_${VERSION}_all.deb
DKMS_VERSION=$(dpkg-deb -c "$DKMS_DEB" | sed -n 's|.*\./usr/src/l7fast-\([^/]*\)/$|\1|p' | head -n 1)

# --- host checks ---------------------------------------------------------------------
ROOT=$OUT/deb-root
mkdir -p "$ROOT"
dpkg-deb -x "$DEB" "$ROOT"
# systemd-analyze verify checks the executables at their absolute paths:
# point them into the unpacked package (the guest verifies the real install).
sed -e "s|/usr/sbin/l7fastd|$ROOT/usr/sbin/l7fastd|" -e "s|/usr/bin/l7fastctl|$ROOT/usr/bin/l7fastctl|" \
	"$ROOT/lib/systemd/system/l7fast.service" >"$OUT/l7fast.service"
if systemd-analyze verify --man=no "$OUT/l7fast.service" >"$OUT/unit-verify.log" 2>&1; then
	result PASS unit-verify "systemd-analyze verify (unit from the .deb)"
else
	result FAIL unit-verify "$(head -n 3 "$OUT/unit-verify.log" | tr '\n' ' ')"
fi

if "$TOP/tests/system/dbus-policy.sh" >"$OUT/dbus-policy.log" 2>&1; then
	result PASS dbus-policy "$(grep -c '^PASS' "$OUT/dbus-policy.log") checks: root owns the name; Reload and SetLogLevel for root and group l7fast only; read-only methods (DumpConfig and Explain among them), Introspect, Properties.Get for everyone"
else
	result FAIL dbus-policy "$(grep '^FAIL' "$OUT/dbus-policy.log" | head -n 3 | tr '\n' ' ')"
fi

"$TOP/tests/system/completion-test.sh" "$ROOT/usr/share/bash-completion/completions/l7fastctl" >"$OUT/completion.log" 2>&1 &&
	result PASS bash-completion "$(tail -n 1 "$OUT/completion.log")" ||
	result FAIL bash-completion "$(grep -m3 FAIL "$OUT/completion.log" | tr '\n' ' ')"

man_ok=1
for page in usr/share/man/man8/l7fastd.8.gz usr/share/man/man8/l7fastctl.8.gz usr/share/man/man5/l7fast.toml.5.gz; do
	[ -f "$ROOT/$page" ] || { man_ok=0; continue; }
	w=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$ROOT/$page" 2>&1 >/dev/null) || man_ok=0
	[ -z "$w" ] || man_ok=0
done
[ $man_ok = 1 ] && result PASS man-pages "l7fastd(8) l7fastctl(8) l7fast.toml(5) render without groff warnings" ||
	result FAIL man-pages "missing or groff warnings"

if [ -f "$RPM_OUT/l7fast-$VERSION-1.x86_64.rpm" ] && [ "${L7F_SYS_SKIP_RPM:-0}" != 1 ]; then
	if "$TOP/tests/system/layout-test.sh" "$DEB" "$DKMS_DEB" "$RPM_OUT/l7fast-$VERSION-1.x86_64.rpm" \
		"$RPM_OUT/l7fast-dkms-$VERSION-1.noarch.rpm" >"$OUT/layout.log" 2>&1; then
		result PASS deb-rpm-layout "$(tail -n 1 "$OUT/layout.log")"
	else
		result FAIL deb-rpm-layout "$(tail -n 5 "$OUT/layout.log" | tr '\n' ' ')"
	fi
fi

# --- guest image ---------------------------------------------------------------------------
DEPS=()
for d in "$DEB" "$DKMS_DEB"; do
	while IFS= read -r rel; do [ -n "$rel" ] && DEPS+=("$rel"); done \
		< <(dpkg-deb -f "$d" Depends | tr ',' '\n' | sed 's/^ *//; s/ *$//' | grep -v '^l7fast')
done
t0=$SECONDS
GUEST=$("$TOP/scripts/system/build-rootfs.sh" "${DEPS[@]}" 2>"$OUT/rootfs.log") ||
	{ cat "$OUT/rootfs.log" >&2; die "building the guest image failed"; }
DURATIONS+=("rootfs $((SECONDS - t0))s")
KREL=$(cat "$GUEST/kernel.txt")
K61=$(cat "$GUEST/kernel-6.1.txt")

# --- share ---------------------------------------------------------------------------------------
SHARE=$OUT/share
mkdir -p "$SHARE"/{guest,debs,upgrade,policies,results}
cp "$TOP"/tests/system/guest/* "$SHARE/guest/"
# the pool inspection the e2e tests use too, with the ABI header it reads
cp "$TOP"/scripts/pylib/l7fast_abi.py "$TOP"/scripts/pylib/l7fast_pools.py "$TOP"/bpf/include/l7fast_abi.h \
	"$SHARE/guest/"
[ -z "${L7F_SYS_GUEST_SCRIPT:-}" ] || cp "$L7F_SYS_GUEST_SCRIPT" "$SHARE/guest/systest.sh"
cp "$TOP"/tests/system/policies/*.toml "$SHARE/policies/"
cp "$DEB" "$DKMS_DEB" "$SHARE/debs/"
# The upgrade: the same package with a higher version (what a new release
# does to the maintainer scripts and conffiles).
UPGRADE_VERSION=$VERSION+systest1
rm -rf "$OUT/repack" && dpkg-deb -R "$DEB" "$OUT/repack"
sed -i "s/^Version: .*/Version: $UPGRADE_VERSION/" "$OUT/repack/DEBIAN/control"
dpkg-deb -b --root-owner-group "$OUT/repack" "$SHARE/upgrade/l7fast_${UPGRADE_VERSION}_amd64.deb" >/dev/null
cat >"$SHARE/info.env" <<EOF
VERSION=$VERSION
UPGRADE_VERSION=$UPGRADE_VERSION
DKMS_VERSION=$DKMS_VERSION
K61=$K61
EOF
chmod -R a+rX "$SHARE"

# --- boot ------------------------------------------------------------------------------------------
qemu-img create -q -f qcow2 -F raw -b "$GUEST/rootfs.img" "$OUT/guest.qcow2"
log "booting $KREL under qemu (TCG, 2 vCPUs, 2 GiB; timeout ${TIMEOUT}s; console: $OUT/console.log)"
boot_guest() {
	timeout --foreground -k 10 "$TIMEOUT" \
		qemu-system-x86_64 -accel tcg -cpu max -m 2048 -smp 2 -nographic -no-reboot \
		-kernel "$GUEST/vmlinuz" -initrd "$GUEST/initrd.img" \
		-append "root=/dev/vda rw console=ttyS0 panic=-1 loglevel=4 systemd.show_status=0 l7fast.systest" \
		-drive "file=$OUT/guest.qcow2,if=virtio,format=qcow2,cache=unsafe" \
		-virtfs "local,path=$SHARE,mount_tag=systest,security_model=none,id=systest" \
		-nic none </dev/null >"$OUT/console.log" 2>&1
}
qrc=0
timed guest boot_guest || qrc=$?
tr -d '\r' <"$OUT/console.log" >"$OUT/console.txt"

# --- verdict ------------------------------------------------------------------------------------------
failed=0
for r in "${RESULTS[@]}"; do [[ $r == "L7S-TEST: FAIL"* ]] && failed=1; done
grep '^L7S-\(TEST\|INFO\)' "$SHARE/results/log" 2>/dev/null | sed 's/^L7S-TEST: \([A-Z]*\) /L7S-TEST: \1 guest\//' || true
grep -q '^L7S-TEST: FAIL' "$SHARE/results/log" 2>/dev/null && failed=1
if [ $qrc != 0 ]; then
	echo "L7S-TEST: FAIL guest/qemu: exited $qrc (124: timeout after ${TIMEOUT}s)"
	failed=1
fi
if ! grep -q '^L7S-GUEST-DONE' "$OUT/console.txt"; then
	echo "L7S-TEST: FAIL guest/finished: the guest test did not finish (console: $OUT/console.txt)"
	tail -n 15 "$OUT/console.txt" | sed 's/^/  console: /'
	failed=1
fi
if grep -E 'WARNING:|BUG:|Oops|Call Trace|general protection|Kernel panic' "$OUT/console.txt" | grep -v '^L7S-' | head -n 5 | sed 's/^/  kernel: /' | grep .; then
	failed=1
fi
grep -h '^L7S-SUMMARY' "$SHARE/results/log" 2>/dev/null || true
echo "system test durations: ${DURATIONS[*]}; total ${SECONDS}s"
if [ $failed = 0 ]; then
	echo "system test: PASS"
else
	echo "system test: FAIL (results: $SHARE/results, console: $OUT/console.txt)"
fi
exit $failed
