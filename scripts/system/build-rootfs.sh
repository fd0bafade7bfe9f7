#!/bin/bash
# Builds (once, then cached) the Debian 12 guest of the system test: a
# debootstrap root with systemd, the 6.12 kernel and headers from
# bookworm-backports, DKMS and the runtime dependencies of the packages under
# test, as a raw ext4 image plus the kernel and initrd to boot it with.
#
#   scripts/system/build-rootfs.sh [dependency...]
# Each dependency is a Debian relation as in a Depends: field, e.g. the
# Depends of the .debs under test ("libbpf1 (>= 1:0.6.0), libc6 (>= 2.34)").
# Prints the directory holding rootfs.img, vmlinuz, initrd.img, kernel.txt
# (guest kernel release) and kernel-6.1.txt (release of the 6.1 headers).
#
# Caching: the root tree is keyed by the recipe (package lists and guest
# configuration below). Dependencies the cached tree does not satisfy are
# installed into it (apt-get satisfy); the image is rebuilt from the tree only
# when the tree changed. One build at a time per cache directory (a lock).
# The debootstrap, cache key and chroot helpers are shared with
# scripts/fresh-machine-test.sh (scripts/lib/rootfs.sh). Environment:
#   L7F_SYS_CACHE   cache directory (default <top>/build/cache/system)
#   L7F_SYS_KEEP    number of trees to keep (default 2)

TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
L7F_LOG_PREFIX=rootfs
# shellcheck source=scripts/lib/common.sh
. "$TOP/scripts/lib/common.sh"
# shellcheck source=scripts/lib/rootfs.sh
. "$TOP/scripts/lib/rootfs.sh"
CACHE=${L7F_SYS_CACHE:-$TOP/build/cache/system}
EXTRA_DEPS=("$@")

# --- the recipe (the cache key covers exactly this part) ----------------------
SUITE=bookworm
IMAGE_SIZE=6G
# systemd as PID 1, D-Bus, DKMS and its compiler, the tools the guest test
# uses, and the libraries l7fastd links (so a new daemon rarely changes the
# tree).
BASE_PACKAGES=(
	systemd systemd-sysv dbus udev kmod iproute2 procps util-linux
	python3 curl bpftool less e2fsprogs initramfs-tools zstd xz-utils
	dkms dwarves gcc make libc6-dev
	libbpf1 libnl-3-200 libnl-genl-3-200 libssl3 libsystemd0 libstdc++6
	libtomlplusplus3
)
# The kernel DKMS must build for, from bookworm-backports.
BACKPORTS_PACKAGES=(linux-image-amd64 linux-headers-amd64)
# bookworm's own kernel headers (6.1): DKMS must refuse that kernel.
BOOKWORM_HEADERS_META=linux-headers-amd64

# Writes the guest's configuration into $ROOT.
configure_guest() {
	echo l7fast-systest >"$ROOT/etc/hostname"
	printf '127.0.0.1 localhost\n127.0.1.1 l7fast-systest\n::1 localhost\n' >"$ROOT/etc/hosts"
	printf '%s\n' '/dev/vda / ext4 defaults,errors=remount-ro 0 1' \
		'systest /mnt/systest 9p trans=virtio,version=9p2000.L,msize=262144,nofail 0 0' >"$ROOT/etc/fstab"
	mkdir -p "$ROOT/mnt/systest"
	# A fixed machine id: no first-boot logic (systemd-firstboot would prompt).
	in_root systemd-machine-id-setup >/dev/null
	# Nothing runs in the guest but the test: no timers, no logins.
	local u
	for u in apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer \
		getty@tty1.service serial-getty@ttyS0.service console-getty.service \
		systemd-networkd-wait-online.service; do
		ln -sf /dev/null "$ROOT/etc/systemd/system/$u"
	done
	cat >"$ROOT/etc/systemd/system/l7fast-systest.service" <<'UNIT'
[Unit]
Description=l7fast system test (tests/system/guest, driven by tests/system/run.sh)
ConditionKernelCommandLine=l7fast.systest
RequiresMountsFor=/mnt/systest
After=multi-user.target
SuccessAction=poweroff
FailureAction=poweroff

[Service]
Type=oneshot
ExecStart=/bin/bash /mnt/systest/guest/systest.sh
StandardOutput=journal+console
StandardError=journal+console
TimeoutStartSec=infinity

[Install]
WantedBy=multi-user.target
UNIT
	mkdir -p "$ROOT/etc/systemd/system/multi-user.target.wants"
	ln -sf /etc/systemd/system/l7fast-systest.service \
		"$ROOT/etc/systemd/system/multi-user.target.wants/l7fast-systest.service"
}

# The guest's apt configuration (used while building; harmless offline).
configure_apt() {
	cat >"$ROOT/etc/apt/sources.list.d/debian.sources" <<SRC
Types: deb
URIs: $URI
Suites: $SUITE $SUITE-updates $SUITE-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
	rm -f "$ROOT/etc/apt/sources.list"
	# The archive may be a dated snapshot: accept its old Release files.
	printf '%s\n' 'Acquire::Check-Valid-Until "false";' 'APT::Install-Recommends "false";' \
		>"$ROOT/etc/apt/apt.conf.d/90l7fast-systest"
}
RECIPE_VERSION=1
# --- end of the recipe ---------------------------------------------------------

# Only the result directory goes to standard output.
exec 3>&1 1>&2

[ "$(id -u)" = 0 ] || die "must run as root (debootstrap, chroot)"
URI=$(debian_uri)
[ -n "$URI" ] || die "no bookworm archive in /etc/apt/sources.list{,.d/}: debootstrap needs its URI"
KEY=$(rootfs_key "$RECIPE_VERSION $SUITE $IMAGE_SIZE $URI" "${BASE_PACKAGES[@]}" \
	"${BACKPORTS_PACKAGES[@]}" "$BOOKWORM_HEADERS_META" -f configure_guest -f configure_apt)
DIR=$CACHE/rootfs-$KEY
ROOT=$DIR/root
mkdir -p "$CACHE/debs/partial"
rootfs_lock "$CACHE/.lock"

trap rootfs_umount_all EXIT
chroot_mounts() {
	rootfs_chroot_mounts "$ROOT" "$CACHE/debs"
	# No service may start inside the chroot.
	printf '#!/bin/sh\nexit 101\n' >"$ROOT/usr/sbin/policy-rc.d"
	chmod 755 "$ROOT/usr/sbin/policy-rc.d"
}
chroot_unmount() { rootfs_umount_all; rm -f "$ROOT/usr/sbin/policy-rc.d"; }

# Installs what the tree lacks to satisfy EXTRA_DEPS; returns 0 when it
# changed the tree.
add_extras() {
	local plan
	[ ${#EXTRA_DEPS[@]} -gt 0 ] || return 1
	plan=$(in_root apt-get satisfy -s "${EXTRA_DEPS[@]}" 2>&1) ||
		{ echo "$plan" >&2; die "apt-get satisfy -s failed in the guest tree"; }
	grep -q '^Inst ' <<<"$plan" || return 1
	log "adding $(sed -n 's/^Inst \([^ ]*\).*/\1/p' <<<"$plan" | tr '\n' ' ')to the guest tree"
	chroot_mounts
	{ in_root apt-get update && in_root apt-get satisfy -y "${EXTRA_DEPS[@]}"; } >"$DIR/apt-extra.log" 2>&1 ||
		{ chroot_unmount; tail -n 30 "$DIR/apt-extra.log" >&2; die "apt-get satisfy in the guest tree failed"; }
	in_root apt-get clean
	chroot_unmount
	return 0
}

make_image() {
	log "making the ext4 image ($IMAGE_SIZE, sparse)"
	in_root dpkg-query -W -f='${Package} ${Version}\n' >"$DIR/packages.txt"
	rm -f "$DIR/rootfs.img"
	mkfs.ext4 -q -F -L l7root -E lazy_itable_init=1 -d "$ROOT" "$DIR/rootfs.img.tmp" "$IMAGE_SIZE" ||
		die "mkfs.ext4 -d failed"
	mv "$DIR/rootfs.img.tmp" "$DIR/rootfs.img"
}

if [ -f "$DIR/.complete" ]; then
	if add_extras || [ ! -f "$DIR/rootfs.img" ]; then make_image; fi
	touch "$DIR/.complete"
	echo "$DIR" >&3
	exit 0
fi

rootfs_remove "$DIR"
rootfs_debootstrap "$ROOT" "$CACHE/debs" "$DIR/debootstrap.log" "$SUITE" "$URI" "${BASE_PACKAGES[@]}"
configure_apt

log "installing the 6.12 kernel and headers (bookworm-backports) and the 6.1 headers (log: $DIR/apt.log)"
chroot_mounts
{
	in_root apt-get update &&
	in_root apt-get install -y -t "$SUITE-backports" "${BACKPORTS_PACKAGES[@]}" &&
	k61=$(in_root apt-cache depends "$BOOKWORM_HEADERS_META/$SUITE" |
		awk '/Depends: linux-headers-6\.1/ { print $2; exit }') &&
	in_root apt-get install -y "$k61"
} >"$DIR/apt.log" 2>&1 || { chroot_unmount; tail -n 30 "$DIR/apt.log" >&2; die "apt-get in the chroot failed"; }
in_root apt-get clean
chroot_unmount

KREL=$(cd "$ROOT/boot" && ls vmlinuz-6.12.* | sed 's/^vmlinuz-//' | sort -V | tail -n 1)
[ -n "$KREL" ] || die "no 6.12 kernel in the guest"
[ -d "$ROOT/usr/src/linux-headers-$KREL" ] || die "no headers for $KREL in the guest"
K61=$(cd "$ROOT/usr/src" && ls -d linux-headers-6.1.*-amd64 | sed 's/^linux-headers-//' | head -n 1)
[ -n "$K61" ] || die "no 6.1 headers in the guest"

log "configuring the guest ($KREL)"
configure_guest
echo "$KREL" >"$DIR/kernel.txt"
echo "$K61" >"$DIR/kernel-6.1.txt"
cp "$ROOT/boot/vmlinuz-$KREL" "$DIR/vmlinuz"
cp "$ROOT/boot/initrd.img-$KREL" "$DIR/initrd.img"
add_extras || true
make_image
touch "$DIR/.complete"

# Keep the newest trees only.
rootfs_keep_newest "${L7F_SYS_KEEP:-2}" "$CACHE"/rootfs-*
log "guest ready: $DIR"
echo "$DIR" >&3
