# shellcheck shell=bash
# Sourced (never run) by the scripts that build Debian roots with debootstrap
# and run things in them with chroot:
#   scripts/system/build-rootfs.sh   the system test's guest (then an image)
#   scripts/fresh-machine-test.sh    a fresh machine for the README's commands
# after scripts/lib/common.sh (log, die, apt_install, missing_packages):
#
#   . "$TOP/scripts/lib/common.sh"
#   # shellcheck source=scripts/lib/rootfs.sh
#   . "$TOP/scripts/lib/rootfs.sh"
#   trap rootfs_umount_all EXIT
#
# What is here:
#   rootfs_key [-f FUNCTION]... [LINE]...   the cache key of a recipe
#   rootfs_lock FILE                        one builder per cache at a time
#   rootfs_debootstrap ROOT DEBS LOG SUITE URI [PACKAGE]...
#   in_root COMMAND...                      runs it in $ROOT (chroot)
#   rootfs_mount / rootfs_bind / rootfs_rbind / rootfs_umount_all
#   rootfs_chroot_mounts ROOT [ARCHIVES]    /proc /sys /dev /dev/pts (+ apt cache)
#   rootfs_mounts_under DIR                 what is mounted at or below DIR
#   rootfs_remove DIR...                    rm -rf, refused while anything is
#                                           mounted below (a bind of /sys or
#                                           /dev would be deleted through)
#   rootfs_keep_newest N DIR...             removes all but the N newest

# rootfs_key [-f FUNCTION]... [LINE]...: a 16-hex-digit key over the lines
# (one per argument) followed by the definitions of the functions (declare
# -f, in the order given): a recipe is its package lists and settings plus
# the functions that configure the tree.
rootfs_key() {
	local lines=() funcs=()
	while [ $# -gt 0 ]; do
		case $1 in
		-f) funcs+=("$2"); shift 2 ;;
		*) lines+=("$1"); shift ;;
		esac
	done
	{
		[ ${#lines[@]} = 0 ] || printf '%s\n' "${lines[@]}"
		[ ${#funcs[@]} = 0 ] || declare -f "${funcs[@]}"
	} | sha256sum | cut -c1-16
}

# rootfs_lock FILE: holds an exclusive lock on FILE until the script exits,
# waiting (and saying so) while another builder holds it.
rootfs_lock() {
	mkdir -p "$(dirname "$1")"
	exec {ROOTFS_LOCK_FD}>"$1"
	if ! flock -n "$ROOTFS_LOCK_FD"; then
		log "waiting for $1 (another run holds it)"
		flock "$ROOTFS_LOCK_FD"
	fi
}

# rootfs_debootstrap ROOT DEBS LOG SUITE URI [PACKAGE]...: a minbase root of
# SUITE from URI in ROOT (created, must not exist or be empty), with the
# packages added (--include); downloaded .debs are kept in DEBS (an absolute
# path, also usable as the root's /var/cache/apt/archives). Installs
# debootstrap on the host when it is missing. The root keeps debootstrap's
# own /etc/apt/sources.list (one line: deb URI SUITE main).
rootfs_debootstrap() {
	local root=$1 debs=$2 logf=$3 suite=$4 uri=$5 include
	shift 5
	case $debs in /*) ;; *) die "rootfs_debootstrap: $debs is not an absolute path" ;; esac
	mkdir -p "$root" "$debs/partial" "$(dirname "$logf")"
	# shellcheck disable=SC2046
	apt_install "$logf" $(missing_packages debootstrap)
	include=$(IFS=,; echo "$*")
	log "debootstrap $suite from $uri (log: $logf)"
	debootstrap --variant=minbase --cache-dir="$debs" ${include:+"--include=$include"} \
		"$suite" "$root" "$uri" >>"$logf" 2>&1 ||
		{ tail -n 30 "$logf" >&2; die "debootstrap failed"; }
}

# in_root COMMAND...: runs it in the tree $ROOT, non-interactively.
# shellcheck disable=SC2153 # ROOT is the caller's
in_root() { chroot "$ROOT" env DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8 "$@"; }

# --- mounts ----------------------------------------------------------------------
# Every mount made here is remembered and undone by rootfs_umount_all, in
# reverse order, lazily (a process still using one cannot keep it attached
# to the tree). Each is made a slave mount: nothing mounted or unmounted
# below it propagates back to the host's own mounts, even where the host's
# are shared.
ROOTFS_MOUNTS=()

# rootfs_mount DIR mount-arguments...: mkdir DIR, mount ... DIR.
rootfs_mount() {
	local dir=$1
	shift
	mkdir -p "$dir"
	mount "$@" "$dir" || die "mount $* $dir failed"
	ROOTFS_MOUNTS+=("$dir")
	mount --make-rslave "$dir"
}
rootfs_bind() { rootfs_mount "$2" --bind "$1"; }
# With everything mounted below SRC (e.g. /sys with its cgroup hierarchies).
rootfs_rbind() { rootfs_mount "$2" --rbind "$1"; }

rootfs_umount_all() {
	local i
	for ((i = ${#ROOTFS_MOUNTS[@]} - 1; i >= 0; i--)); do
		umount -l "${ROOTFS_MOUNTS[$i]}" 2>/dev/null || true
	done
	ROOTFS_MOUNTS=()
}

# rootfs_chroot_mounts ROOT [ARCHIVES]: /proc, /sys, /dev and /dev/pts of
# the host in ROOT, and ARCHIVES (a host directory) as its apt download cache.
rootfs_chroot_mounts() {
	rootfs_bind /proc "$1/proc"
	rootfs_bind /sys "$1/sys"
	rootfs_bind /dev "$1/dev"
	rootfs_bind /dev/pts "$1/dev/pts"
	[ -z "${2:-}" ] || rootfs_bind "$2" "$1/var/cache/apt/archives"
}

# rootfs_mounts_under DIR: the mount points at or below DIR, one per line.
rootfs_mounts_under() {
	local dir
	dir=$(realpath -m "$1")
	findmnt -rn -o TARGET | while IFS= read -r t; do
		# findmnt escapes blanks and the like as \xNN
		t=$(printf '%b' "$t")
		case $t in "$dir" | "$dir"/*) printf '%s\n' "$t" ;; esac
	done
}

# rootfs_remove DIR...: rm -rf each, refused (die) while anything is mounted
# at or below it; never leaves its file system.
rootfs_remove() {
	local d m
	for d in "$@"; do
		[ -e "$d" ] || [ -L "$d" ] || continue
		m=$(rootfs_mounts_under "$d")
		[ -z "$m" ] || die "not removing $d: still mounted below it: $(tr "\n" " " <<<"$m")"
		rm -rf --one-file-system -- "$d"
	done
}

# rootfs_keep_newest N DIR...: removes all but the N most recently modified.
rootfs_keep_newest() {
	local n=$1 d
	shift
	[ $# -gt "$n" ] || return 0
	# shellcheck disable=SC2012 # the names are ours (rootfs-<hex key>)
	ls -1dt "$@" | tail -n +"$((n + 1))" | while IFS= read -r d; do rootfs_remove "$d"; done
}
