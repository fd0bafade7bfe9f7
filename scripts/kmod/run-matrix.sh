#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# Kernel-module matrix: builds l7fast.ko against Debian's 6.1 (bookworm)
# and 6.12 (bookworm-backports) kernels, boots each kernel under qemu (TCG)
# with a busybox initramfs, runs the kfunc test vectors and benchmarks in
# the guest, and fails on any FAIL, missing result or kernel warning.
#
# Run as root on Debian 12 from anywhere in the tree:
#     scripts/kmod/run-matrix.sh
# Environment:
#     L7F_KMOD_KERNELS   kernel series to test (default "6.1 6.12")
#     L7F_KMOD_BUILD     build directory        (default <top>/build/kmod)
#     L7F_KMOD_CACHE     download cache         (default <top>/build/cache/kmod)
#     L7F_KMOD_TIMEOUT   seconds per guest boot (default 420)
#     L7F_KMOD_NO_APT=1  skip apt-get update/install (offline re-runs)
#     L7F_KERNEL_TESTS   the tests that need the module (default
#                        <top>/build/tests/l7fast_kernel_tests: make build)

TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
L7F_LOG_PREFIX=kmod
# shellcheck source=scripts/lib/common.sh
. "$TOP/scripts/lib/common.sh"
BUILD=${L7F_KMOD_BUILD:-$TOP/build/kmod}
CACHE=${L7F_KMOD_CACHE:-$TOP/build/cache/kmod}
KERNELS=${L7F_KMOD_KERNELS:-"6.1 6.12"}
TIMEOUT=${L7F_KMOD_TIMEOUT:-420}
KERNEL_TESTS=${L7F_KERNEL_TESTS:-$TOP/build/tests/l7fast_kernel_tests}
BACKPORTS_LIST=/etc/apt/sources.list.d/l7fast-bookworm-backports.sources

# Tools the harness needs; all from bookworm main.
APT_PACKAGES=(
	make gcc-12 gcc libc6-dev bc flex bison python3 pkg-config
	clang llvm bpftool libbpf-dev libelf-dev zlib1g-dev
	libnl-3-dev libnl-genl-3-dev
	dwarves kmod xz-utils zstd cpio busybox-static qemu-system-x86
	ca-certificates
)

# --- apt ------------------------------------------------------------------

apt_setup() {
	local uri want
	[ "$(id -u)" = 0 ] || die "must run as root (apt, debootstrap-free kernel extraction)"
	# shellcheck disable=SC1091
	. /etc/os-release
	[ "${VERSION_CODENAME:-}" = bookworm ] ||
		die "this harness targets Debian 12 (bookworm), found ${VERSION_CODENAME:-unknown}"
	[ "${L7F_KMOD_NO_APT:-0}" = 1 ] && return 0

	uri=$(debian_uri)
	[ -n "$uri" ] || die "no bookworm archive in /etc/apt/sources.list{,.d/}: cannot derive the mirror for bookworm-backports"
	want=$(printf 'Types: deb\nURIs: %s\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' "$uri")
	if [ ! -f "$BACKPORTS_LIST" ] || [ "$(cat "$BACKPORTS_LIST")" != "$want" ]; then
		log "adding bookworm-backports from $uri"
		printf '%s\n' "$want" >"$BACKPORTS_LIST"
	fi
	log "apt-get update"
	apt-get -o DPkg::Lock::Timeout=300 update -qq >"$BUILD/apt-update.log" 2>&1 ||
		{ cat "$BUILD/apt-update.log" >&2; die "apt-get update failed"; }
	if ! dpkg-query -W -f='${Status}\n' "${APT_PACKAGES[@]}" 2>/dev/null |
		awk '$3 != "installed" { bad = 1 } END { exit bad }' ||
		[ "$(dpkg-query -W -f='${Status}\n' "${APT_PACKAGES[@]}" 2>/dev/null | wc -l)" -ne "${#APT_PACKAGES[@]}" ]; then
		log "installing ${APT_PACKAGES[*]}"
		DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends \
			"${APT_PACKAGES[@]}" >"$BUILD/apt-install.log" 2>&1 ||
			{ tail -n 30 "$BUILD/apt-install.log" >&2; die "apt-get install failed"; }
	fi
}

# --- kernel packages -------------------------------------------------------

# Sets K_ABI (e.g. 6.1.0-57-amd64), K_VER (package version), K_APT (apt
# options selecting the suite) and K_KBUILD (kbuild package) for a series.
resolve_kernel() {
	local series=$1 dep
	case $series in
	6.1) K_APT=() ;;
	6.12) K_APT=(-t bookworm-backports) ;;
	*) die "unknown kernel series $series (known: 6.1 6.12)" ;;
	esac
	dep=$(apt-cache "${K_APT[@]}" depends linux-image-amd64 |
		awk '/Depends: linux-image-/ { print $2; exit }')
	K_ABI=${dep#linux-image-}
	[[ $K_ABI == "$series".* ]] ||
		die "linux-image-amd64 for $series resolves to '$dep'"
	K_VER=$(apt-cache "${K_APT[@]}" show --no-all-versions "linux-image-$K_ABI-unsigned" |
		awk '/^Version:/ { print $2; exit }')
	K_KBUILD=$(apt-cache "${K_APT[@]}" show --no-all-versions "linux-headers-$K_ABI" |
		sed -n 's/^Depends: //p' | tr ',' '\n' | grep -o 'linux-kbuild-[^ ]*' | head -n 1)
	[ -n "$K_VER" ] && [ -n "$K_KBUILD" ] || die "cannot resolve packages of $K_ABI"
}

# Downloads pkg=version into the cache unless it is there already.
fetch_deb() {
	local pkg=$1 ver=$2
	if ! compgen -G "$CACHE/debs/${pkg}_${ver//:/%3a}_*.deb" >/dev/null; then
		log "downloading $pkg $ver"
		(cd "$CACHE/debs" && apt-get download -q "$pkg=$ver" >/dev/null 2>"$BUILD/apt-download.log") ||
			{ cat "$BUILD/apt-download.log" >&2; die "apt-get download $pkg=$ver failed"; }
	fi
	compgen -G "$CACHE/debs/${pkg}_${ver//:/%3a}_*.deb" | head -n 1
}

# Module directories the guest needs: crypto templates and algorithms.
GUEST_MODULE_DIRS="kernel/crypto kernel/arch/x86/crypto kernel/lib"

# Extracts the kernel image (boot files and the module subset) and the
# headers into $CACHE/kernels/<abi>/root; sets KDIR, KROOT.
prepare_kernel() {
	local root=$CACHE/kernels/$K_ABI-$K_VER/root stamp deb pkg patt
	stamp=$root/.l7f-extracted
	KROOT=$root
	KDIR=$root/usr/src/linux-headers-$K_ABI
	if [ ! -f "$stamp" ]; then
		log "$K_ABI: extracting packages"
		rm -rf "$root" && mkdir -p "$root"
		deb=$(fetch_deb "linux-image-$K_ABI-unsigned" "$K_VER")
		patt=(./boot/ "./lib/modules/$K_ABI/modules.builtin" "./lib/modules/$K_ABI/modules.builtin.modinfo" "./lib/modules/$K_ABI/modules.order")
		for d in $GUEST_MODULE_DIRS; do patt+=("./lib/modules/$K_ABI/$d/"); done
		dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$root" "${patt[@]}"
		for pkg in "linux-headers-$K_ABI" "linux-headers-${K_ABI%-amd64}-common" "$K_KBUILD"; do
			dpkg-deb -x "$(fetch_deb "$pkg" "$K_VER")" "$root"
		done
		# The arch headers include the -common tree by its installed path.
		sed -i "s|^include /usr/src/|include $root/usr/src/|" "$KDIR/Makefile"
		touch "$stamp"
	fi
	[ -f "$KDIR/vmlinux" ] && [ -x "$(kbuild_btfids)" ] || prepare_btf_tools
}

kbuild_btfids() {
	echo "$KROOT/usr/lib/$K_KBUILD/tools/bpf/resolve_btfids/resolve_btfids"
}

# Debian's 6.1 headers ship neither vmlinux nor resolve_btfids, without
# which kbuild emits no module BTF and kfuncs cannot be registered: take
# vmlinux (with .BTF) out of vmlinuz and build resolve_btfids from the
# matching linux-source package.
prepare_btf_tools() {
	local series src srcdir
	series=$(echo "$K_ABI" | cut -d. -f1-2)
	srcdir=$CACHE/src/linux-source-$series-$K_VER
	src=$srcdir/linux-source-$series
	if [ ! -f "$srcdir/.l7f-extracted" ]; then
		log "$K_ABI: extracting linux-source-$series (resolve_btfids, extract-vmlinux)"
		rm -rf "$srcdir" && mkdir -p "$srcdir"
		dpkg-deb --fsys-tarfile "$(fetch_deb "linux-source-$series" "$K_VER")" |
			tar -xO "./usr/src/linux-source-$series.tar.xz" |
			tar -xJ -C "$srcdir" --wildcards \
				"linux-source-$series/tools/*" "linux-source-$series/scripts/*" \
				"linux-source-$series/include/*" "linux-source-$series/arch/x86/include/*" \
				"linux-source-$series/Makefile"
		touch "$srcdir/.l7f-extracted"
	fi
	if [ ! -x "$(kbuild_btfids)" ]; then
		log "$K_ABI: building resolve_btfids"
		make -s -C "$src/tools/bpf/resolve_btfids" -j"$(nproc)" >"$BUILD/resolve_btfids-$K_ABI.log" 2>&1 ||
			{ tail -n 30 "$BUILD/resolve_btfids-$K_ABI.log" >&2; die "resolve_btfids build failed"; }
		install -D -m755 "$src/tools/bpf/resolve_btfids/resolve_btfids" "$(kbuild_btfids)"
	fi
	if [ ! -f "$KDIR/vmlinux" ]; then
		log "$K_ABI: extracting vmlinux BTF from vmlinuz"
		sh "$src/scripts/extract-vmlinux" "$KROOT/boot/vmlinuz-$K_ABI" >"$KDIR/vmlinux.tmp"
		# grep reads everything: with pipefail, `grep -q` exiting early can
		# fail the pipeline through readelf's SIGPIPE
		readelf -S "$KDIR/vmlinux.tmp" | grep '\.BTF ' >/dev/null || die "no .BTF in vmlinuz of $K_ABI"
		mv "$KDIR/vmlinux.tmp" "$KDIR/vmlinux"
	fi
}

# --- builds ----------------------------------------------------------------

build_module() {
	local out=$BUILD/$K_ABI/module
	log "$K_ABI: building l7fast.ko"
	rm -rf "$out"
	make -C "$TOP/kmod" KDIR="$KDIR" OUT="$out" >"$BUILD/$K_ABI/module-build.log" 2>&1 ||
		{ tail -n 40 "$BUILD/$K_ABI/module-build.log" >&2; die "$K_ABI: module build failed"; }
	if grep -q 'Skipping BTF generation' "$BUILD/$K_ABI/module-build.log"; then
		die "$K_ABI: kbuild skipped module BTF"
	fi
	readelf -S "$out/l7fast.ko" | grep '\.BTF ' >/dev/null || die "$K_ABI: l7fast.ko has no .BTF"
	MODULE=$out/l7fast.ko
}

build_tests() {
	log "building the static test binary"
	make -C "$TOP/tests/kmod" OUT="$BUILD/test" -j"$(nproc)" >"$BUILD/test-build.log" 2>&1 ||
		{ tail -n 40 "$BUILD/test-build.log" >&2; die "test build failed"; }
	"$BUILD/test/purebpf_test" >"$BUILD/purebpf-host.log" 2>&1 ||
		{ cat "$BUILD/purebpf-host.log" >&2; die "pure-BPF reference code fails natively"; }
	log "host: $(tail -n 1 "$BUILD/purebpf-host.log")"
	[ -x "$KERNEL_TESTS" ] ||
		die "no $KERNEL_TESTS: build the tree first (make build; make test-kmod does)"
}

# Copies dynamically linked program $1 to $2 inside initramfs stage $3,
# without its debug info, with the shared libraries it loads (at the
# paths the dynamic loader looks them up).
stage_program() {
	local prog=$1 dest=$2 stage=$3 lib
	mkdir -p "$(dirname "$stage$dest")"
	strip --strip-debug -o "$stage$dest" "$prog"
	for lib in $(ldd "$prog" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }'); do
		[ -e "$stage$lib" ] && continue
		mkdir -p "$(dirname "$stage$lib")"
		cp -L "$lib" "$stage$lib"
	done
}

build_initramfs() {
	local stage=$BUILD/$K_ABI/initramfs mods f
	rm -rf "$stage"
	mkdir -p "$stage"/{bin,sbin,dev,proc,sys,tmp}
	cp /bin/busybox "$stage/bin/busybox"
	cp "$BUILD/test/kfunc_test" "$stage/bin/kfunc_test"
	cp "$BUILD/test/dataplane_load" "$stage/bin/dataplane_load"
	stage_program "$KERNEL_TESTS" /bin/l7fast_kernel_tests "$stage"
	install -m755 "$TOP/tests/kmod/guest-init.sh" "$stage/init"
	mods=$stage/lib/modules/$K_ABI
	mkdir -p "$mods/extra"
	cp -a "$KROOT/lib/modules/$K_ABI/." "$mods/"
	cp "$MODULE" "$mods/extra/"
	# busybox modprobe reads plain .ko files only.
	find "$mods" -name '*.ko.xz' -exec xz -d -f {} +
	find "$mods" -name '*.ko.zst' -exec zstd -q -d --rm -f {} +
	depmod -b "$stage" "$K_ABI"
	(cd "$stage" && find . | cpio -o -H newc --quiet | gzip -1) >"$BUILD/$K_ABI/initrd.gz"
	f=$(du -h "$BUILD/$K_ABI/initrd.gz" | cut -f1)
	log "$K_ABI: initramfs $f"
}

# --- boot and verdict ------------------------------------------------------

boot_guest() {
	local abi=$1 root=$2 log=$BUILD/$1/console.log
	timeout -k 10 "$TIMEOUT" \
		qemu-system-x86_64 -accel tcg -cpu max -m 1024 -smp 1 -nographic -no-reboot \
		-kernel "$root/boot/vmlinuz-$abi" -initrd "$BUILD/$abi/initrd.gz" \
		-append "console=ttyS0 quiet panic=-1" </dev/null >"$log" 2>&1
}

# Prints the verdict for one guest log; returns non-zero on failure.
judge() {
	local abi=$1 rc=$2 secs=$3 log=$BUILD/$1/console.log bad=0 summary
	tr -d '\r' <"$log" >"$log.txt"
	summary=$(grep -m1 '^L7F-SUMMARY:' "$log.txt" || true)
	grep '^L7F-TEST: \(FAIL\|SKIP\)' "$log.txt" | sed "s/^/  [$abi] /" || true
	grep '^L7F-INFO:' "$log.txt" | sed "s/^/  [$abi] /" || true
	if [ "$rc" -ne 0 ]; then log "$abi: qemu exited with $rc (124 = timeout)"; bad=1; fi
	grep -q '^L7F-GUEST-DONE' "$log.txt" || { log "$abi: guest did not finish"; bad=1; }
	[ -n "$summary" ] || { log "$abi: no test summary"; bad=1; }
	grep -q '^L7F-TEST: FAIL' "$log.txt" && bad=1
	for need in insmod dataplane-kfuncs dataplane-plain kernel-tests rmmod rmmod-gone dmesg-clean; do
		grep -q "^L7F-TEST: PASS guest/$need\(:\|\$\)" "$log.txt" ||
			{ log "$abi: missing PASS guest/$need"; bad=1; }
	done
	if grep -E 'WARNING:|BUG:|Oops|Call Trace|general protection|Kernel panic' "$log.txt" |
		grep -v '^L7F-' | sed "s/^/  [$abi] kernel: /" | grep .; then
		bad=1
	fi
	printf 'L7F-KERNEL: %s %s: %s in %ss — %s\n' "$abi" "${KVERS[$abi]}" \
		"$([ $bad = 0 ] && echo PASS || echo FAIL)" "$secs" \
		"${summary#L7F-SUMMARY: }"
	return $bad
}

main() {
	local series pids=() abi rc=0 t0 failed=0
	declare -gA KVERS=() KROOTS=() STARTED=()
	mkdir -p "$BUILD" "$CACHE/debs"
	apt_setup
	build_tests
	local abis=()
	for series in $KERNELS; do
		resolve_kernel "$series"
		log "$series: $K_ABI ($K_VER)"
		mkdir -p "$BUILD/$K_ABI"
		prepare_kernel
		build_module
		build_initramfs
		abis+=("$K_ABI")
		KVERS[$K_ABI]=$K_VER
		KROOTS[$K_ABI]=$KROOT
	done

	# One vCPU per guest, guests side by side: the machine has two cores.
	for abi in "${abis[@]}"; do
		log "$abi: booting under qemu (TCG)"
		STARTED[$abi]=$SECONDS
		boot_guest "$abi" "${KROOTS[$abi]}" &
		pids+=($!)
	done
	local i=0 verdicts=()
	for abi in "${abis[@]}"; do
		rc=0
		wait "${pids[$i]}" || rc=$?
		i=$((i + 1))
		t0=${STARTED[$abi]}
		echo "==== $abi ===="
		sed -n '/^L7F-BENCH:/p' "$BUILD/$abi/console.log" | tr -d '\r'
		judge "$abi" "$rc" "$((SECONDS - t0))" >"$BUILD/$abi/verdict.txt" || failed=1
		cat "$BUILD/$abi/verdict.txt"
		verdicts+=("$(grep '^L7F-KERNEL:' "$BUILD/$abi/verdict.txt")")
	done
	echo "==== kernel matrix (${SECONDS}s total) ===="
	printf '%s\n' "${verdicts[@]}"
	if [ $failed = 0 ]; then
		echo "kmod matrix: PASS (${abis[*]})"
	else
		echo "kmod matrix: FAIL (logs: $BUILD/<kernel>/console.log)"
	fi
	# Totals over all guests; a kernel that failed outside the test
	# program counts as one more failure.
	local np=0 nf=0 ns=0 p f s
	for abi in "${abis[@]}"; do
		read -r p f s < <(sed -n 's/^L7F-SUMMARY: \([0-9]*\) passed, \([0-9]*\) failed, \([0-9]*\) skipped.*/\1 \2 \3/p' \
			"$BUILD/$abi/console.log.txt" | head -n 1) || true
		np=$((np + ${p:-0})) nf=$((nf + ${f:-1})) ns=$((ns + ${s:-0}))
		grep -q 'PASS in' "$BUILD/$abi/verdict.txt" || [ "${f:-1}" != 0 ] || nf=$((nf + 1))
		p='' f='' s=''
	done
	echo "kmod: $np passed, $nf failed, $ns skipped"
	return $failed
}

main "$@"
