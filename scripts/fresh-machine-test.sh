#!/bin/bash
# Proves that a fresh Debian 12 machine can run the README's commands exactly
# as written. CI runs on a machine that already has what earlier runs
# installed, so a green CI can hide a missing install step; this runs them in
# a minimal Debian 12 root that has only what a new user has before following
# the README: the base system (debootstrap --variant=minbase, with its own
# one-line /etc/apt/sources.list and empty package lists) plus git, make and
# ca-certificates. Everything else the commands must install themselves.
#
# Each run starts from a pristine copy of the cached root, clones the current
# commit (HEAD; not the work tree's uncommitted changes, nor its build/) into
# /root/l7fast in it, and runs there, as root, via chroot with a clean
# environment (env -i HOME PATH TERM=dumb LANG=C.UTF-8), one after the other
# and each even when an earlier one failed:
#   make demo    make test    make deb    make rpm
# The root has /proc, /sys (with the host's cgroup v2 hierarchy), /dev,
# /dev/pts, a fresh bpffs on /sys/fs/bpf, and tmpfs on /run and /tmp, so the
# e2e suite (BPF on cgroups, network namespaces) and the qemu suites (TCG;
# debootstrap inside) really run. It shares the host's kernel and network
# (ports 8080, 9001, 9002 of the demo must be free on the host). Long-running
# (make test: about an hour); not part of `make test`.
#
#   scripts/fresh-machine-test.sh [--only CMD...] [--keep] [--shell]
#                                 [--worktree | --overlay PATH...]
#     --only CMD...   run only these (of: demo test deb rpm), e.g. --only demo
#     --keep          keep the root (build/fresh/root) after the run
#     --shell         open an interactive shell in the prepared root instead
#                     of running the commands (debugging)
#     --worktree      also copy the work tree's uncommitted changes (tracked
#                     and untracked-but-not-ignored files) into the clone:
#                     tests work in progress, not what CI would test
#     --overlay PATH...  the same for these paths only (e.g. scripts/lib
#                     packaging), when other work in progress would break
#                     the build
#     --help
# Run as root (debootstrap, chroot, mounts). Environment:
#   L7F_FRESH_CACHE   cache (default <top>/build/cache/fresh): the minbase
#                     root, keyed by its recipe below, and apt-archives/, a
#                     download cache mounted on the root's
#                     /var/cache/apt/archives (.debs only: nothing installed)
#   L7F_FRESH_OUT     output (default <top>/build/fresh): root/ (the run's
#                     copy), logs/<cmd>.log, summary.txt
#   L7F_FRESH_KEEP    cached roots to keep (default 2)
# Output: a progress line per log line of the project's scripts, then the
# summary (per command: exit status, PASS/FAIL, wall time; the test suite's
# own summary for make test, the demo's summary lines for make demo), also in
# summary.txt. Exit status 0 only when every command passed.
# Shares the debootstrap, cache key and chroot helpers with the system test's
# guest builder (scripts/lib/rootfs.sh, scripts/system/build-rootfs.sh).

TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
L7F_LOG_PREFIX=fresh
# shellcheck source=scripts/lib/common.sh
. "$TOP/scripts/lib/common.sh"
# shellcheck source=scripts/lib/rootfs.sh
. "$TOP/scripts/lib/rootfs.sh"
CACHE=${L7F_FRESH_CACHE:-$TOP/build/cache/fresh}
OUT=${L7F_FRESH_OUT:-$TOP/build/fresh}
ALL=(demo test deb rpm)

usage() { sed -n '2,/^$/{s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }

CMDS=()
KEEP=0
SHELL_ONLY=0
WORKTREE=0
OVERLAY=()
while [ $# -gt 0 ]; do
	case $1 in
	--only)
		shift
		while [ $# -gt 0 ] && [[ $1 != --* ]]; do
			case " ${ALL[*]} " in
			*" ${1#make } "*) CMDS+=("${1#make }") ;;
			*) die "--only: unknown command '$1' (known: ${ALL[*]})" ;;
			esac
			shift
		done
		[ ${#CMDS[@]} -gt 0 ] || die "--only needs at least one of: ${ALL[*]}"
		continue
		;;
	--keep) KEEP=1 ;;
	--shell) SHELL_ONLY=1 ;;
	--worktree) WORKTREE=1 ;;
	--overlay)
		shift
		while [ $# -gt 0 ] && [[ $1 != --* ]]; do OVERLAY+=("${1%/}"); shift; done
		[ ${#OVERLAY[@]} -gt 0 ] || die "--overlay needs at least one path"
		WORKTREE=1
		continue
		;;
	-h | --help) usage; exit 0 ;;
	*) usage >&2; die "unknown argument '$1'" ;;
	esac
	shift
done
[ ${#CMDS[@]} -gt 0 ] || CMDS=("${ALL[@]}")

# --- the recipe of the cached root (the cache key covers exactly this part) ----
SUITE=bookworm
# What a user who cloned the repository has, and nothing of the project's
# dependencies: the point is that the README's commands install those.
PACKAGES=(git make ca-certificates)
# Writes the root's configuration; $VALID_UNTIL_OFF is 1 when the host's
# archive is a dated snapshot whose Release files have expired.
configure_fresh() {
	# debootstrap's own sources.list (one-line format) stays, as on a real
	# fresh install.
	[ -s "$ROOT/etc/apt/sources.list" ] || die "debootstrap wrote no /etc/apt/sources.list"
	if [ "$VALID_UNTIL_OFF" = 1 ]; then
		echo 'Acquire::Check-Valid-Until "false";' >"$ROOT/etc/apt/apt.conf.d/90l7fast-snapshot"
	fi
	# Lists debootstrap used while building, if any: the machine starts with
	# none and must run apt-get update itself.
	find "$ROOT/var/lib/apt/lists" -maxdepth 1 -type f ! -name lock -delete
	# The .debs debootstrap installed (they are in the download cache too).
	rm -f "$ROOT"/var/cache/apt/*.bin "$ROOT"/var/cache/apt/archives/*.deb
}
RECIPE_VERSION=1
# --- end of the recipe -----------------------------------------------------------

# The clean environment the commands run with (README: as root).
CLEAN_ENV=(HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin TERM=dumb LANG=C.UTF-8)
CLONE=/root/l7fast

[ "$(id -u)" = 0 ] || die "must run as root (debootstrap, chroot, mounts)"
mkdir -p "$OUT" "$CACHE"
OUT=$(realpath "$OUT")
CACHE=$(realpath "$CACHE")
rootfs_lock "$OUT/.lock"

# Processes whose root is the run's tree (or a tree below it): what the
# commands started and left behind (a daemon, a bus, a service a postinst
# started) must not outlive the run on this host.
# shellcheck disable=SC2317 # called from the EXIT trap
kill_root_procs() {
	local sig r root pid found
	[ -n "${ROOT:-}" ] && [ -d "$ROOT" ] || return 0
	for sig in TERM TERM KILL; do
		found=0
		for r in /proc/[0-9]*/root; do
			root=$(readlink "$r" 2>/dev/null) || continue
			case $root in "$ROOT" | "$ROOT"/*) ;; *) continue ;; esac
			pid=${r#/proc/}
			pid=${pid%/root}
			kill -s "$sig" "$pid" 2>/dev/null && found=1
		done
		[ "$found" = 1 ] || return 0
		sleep 2
	done
}
RUN_ROOT_MADE=0
# shellcheck disable=SC2317 # the EXIT trap
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	kill_root_procs
	rootfs_umount_all
	if [ "$RUN_ROOT_MADE" = 1 ]; then
		if [ -n "$(rootfs_mounts_under "$ROOT")" ]; then
			log "WARNING: still mounted below $ROOT (left in place): $(rootfs_mounts_under "$ROOT" | tr '\n' ' ')"
		elif [ "$KEEP" = 1 ]; then
			log "root kept for inspection: $ROOT"
		else
			rootfs_remove "$ROOT"
		fi
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- what is tested ----------------------------------------------------------------
command -v git >/dev/null || die "git is needed on the host (to clone $TOP)"
SHA=$(git -C "$TOP" rev-parse HEAD)
SUBJECT=$(git -C "$TOP" log -1 --format=%s HEAD | cut -c1-72)
DIRTY=$(git -C "$TOP" status --porcelain --untracked-files=normal -- "${OVERLAY[@]}")
NDIRTY=$(grep -c . <<<"$DIRTY" || true)
TESTED="$SHA ($SUBJECT)"
if [ $WORKTREE = 1 ]; then
	TESTED="$TESTED + the work tree's uncommitted changes ($NDIRTY paths${OVERLAY[*]:+ under ${OVERLAY[*]}})"
	log "testing $TESTED"
else
	log "testing commit $TESTED"
	if [ -n "$DIRTY" ]; then
		log "WARNING: the work tree has uncommitted changes ($NDIRTY paths, git status):" \
			"they are NOT tested, only the commit is (--worktree tests them)"
		head -n 20 <<<"$DIRTY" | sed 's/^/    /' >&2
	fi
fi

# --- the cached root ---------------------------------------------------------------
URI=$(debian_uri)
[ -n "$URI" ] || die "no bookworm archive in /etc/apt/sources.list{,.d/}: debootstrap needs its URI"
VALID_UNTIL_OFF=0
eval "$(apt-config shell HOST_VALID_UNTIL Acquire::Check-Valid-Until)"
case ${HOST_VALID_UNTIL:-} in false | no | off | 0) VALID_UNTIL_OFF=1 ;; esac
case $URI in *snapshot.debian.org*) VALID_UNTIL_OFF=1 ;; esac
KEY=$(rootfs_key "$RECIPE_VERSION $SUITE $URI valid-until-off=$VALID_UNTIL_OFF" "${PACKAGES[@]}" \
	-f configure_fresh -f rootfs_debootstrap)
DIR=$CACHE/rootfs-$KEY
ARCHIVES=$CACHE/apt-archives
mkdir -p "$ARCHIVES/partial"
(
	rootfs_lock "$CACHE/.lock"
	[ -f "$DIR/.complete" ] && exit 0
	ROOT=$DIR/root
	rootfs_remove "$DIR"
	rootfs_debootstrap "$ROOT" "$ARCHIVES" "$DIR/debootstrap.log" "$SUITE" "$URI" "${PACKAGES[@]}"
	configure_fresh
	# shellcheck disable=SC2016 # dpkg-query's format
	chroot "$ROOT" dpkg-query -W -f='${Package} ${Version}\n' >"$DIR/packages.txt"
	touch "$DIR/.complete"
	log "cached root ready: $DIR ($(wc -l <"$DIR/packages.txt") packages, $(du -sh "$ROOT" | cut -f1))"
	rootfs_keep_newest "${L7F_FRESH_KEEP:-2}" "$CACHE"/rootfs-*
)
log "cached root: $DIR ($(wc -l <"$DIR/packages.txt") packages)"

# --- this run's root ---------------------------------------------------------------
ROOT=$OUT/root
LOGS=$OUT/logs
if [ -e "$ROOT" ]; then
	m=$(rootfs_mounts_under "$ROOT")
	[ -z "$m" ] || die "the previous run's root still has mounts below it, not touching it: $(tr '\n' ' ' <<<"$m")(umount -l them first)"
	log "removing the previous run's root"
	rootfs_remove "$ROOT"
fi
log "copying the cached root to $ROOT"
cp -a --reflink=auto "$DIR/root" "$ROOT"
RUN_ROOT_MADE=1
# The machine's network configuration (how it resolves the archive's host).
cp -L /etc/resolv.conf "$ROOT/etc/resolv.conf"
cp -L /etc/hosts "$ROOT/etc/hosts"

log "cloning $TOP at ${SHA:0:12} into $CLONE"
git clone -q --no-hardlinks "$TOP" "$ROOT$CLONE"
[ "$(git -C "$ROOT$CLONE" rev-parse HEAD)" = "$SHA" ] || git -C "$ROOT$CLONE" checkout -q --detach "$SHA"
if [ $WORKTREE = 1 ]; then
	log "copying the work tree's uncommitted changes into the clone"
	# Changed since HEAD (staged or not), and new files; gone ones go.
	changed=$(cd "$TOP" && { git diff -z --name-only --no-renames HEAD -- "${OVERLAY[@]}"
		git ls-files -z --others --exclude-standard -- "${OVERLAY[@]}"; } | tr '\0' '\n')
	while IFS= read -r f; do
		[ -n "$f" ] || continue
		if [ -e "$TOP/$f" ] || [ -L "$TOP/$f" ]; then
			mkdir -p "$(dirname "$ROOT$CLONE/$f")"
			cp -a "$TOP/$f" "$ROOT$CLONE/$f"
		else
			rm -f "$ROOT$CLONE/$f"
		fi
	done <<<"$changed"
fi
[ ! -e "$ROOT$CLONE/build" ] || die "the clone has a build/ directory: it must not see the host's"

# --- mounts -------------------------------------------------------------------------
# The root itself is a mount point, as / is on a machine: `unshare --mount
# --propagation private` (the D-Bus tests' private bus) changes the
# propagation of /, which fails with EINVAL in a chroot whose / is not one.
rootfs_bind "$ROOT" "$ROOT"
rootfs_rbind /proc "$ROOT/proc"
rootfs_rbind /sys "$ROOT/sys"
rootfs_rbind /dev "$ROOT/dev"
# /dev/pts comes with /dev (--rbind); a host without its own gets one.
mountpoint -q "$ROOT/dev/pts" || rootfs_mount "$ROOT/dev/pts" -t devpts -o newinstance,ptmxmode=0666 devpts
rootfs_mount "$ROOT/run" -t tmpfs -o mode=0755,nosuid,nodev tmpfs
mkdir -m 1777 "$ROOT/run/lock"
rootfs_mount "$ROOT/tmp" -t tmpfs -o mode=1777,nosuid,nodev tmpfs
# A bpffs of its own, as systemd mounts one on a real machine: pins of the
# host's programs stay out, the run's stay in.
rootfs_mount "$ROOT/sys/fs/bpf" -t bpf -o mode=0700 bpf
rootfs_bind "$ARCHIVES" "$ROOT/var/cache/apt/archives"

# What the suites need, as seen from inside.
# shellcheck disable=SC2016 # awk programs
cg2=$(in_root awk '$3 == "cgroup2" { print $2; exit }' /proc/self/mounts)
[ -n "$cg2" ] || die "no cgroup v2 hierarchy visible in the root (host: $(findmnt -rn -t cgroup2 -o TARGET | head -n 1))"
if findmnt -rn -o TARGET /sys/fs/cgroup/unified >/dev/null 2>&1; then
	in_root test -f /sys/fs/cgroup/unified/cgroup.procs || die "/sys/fs/cgroup/unified is not visible in the root"
fi
# shellcheck disable=SC2016
in_root awk '$2 == "/sys/fs/bpf" && $3 == "bpf" { ok = 1 } END { exit !ok }' /proc/self/mounts ||
	die "no bpffs on /sys/fs/bpf in the root"
if [ -c /dev/kvm ]; then kvm="/dev/kvm present"; else kvm="no /dev/kvm (TCG only)"; fi
log "root ready: cgroup v2 at $cg2, bpffs at /sys/fs/bpf, $kvm, apt download cache $ARCHIVES"

if [ $SHELL_ONLY = 1 ]; then
	log "shell in $ROOT (cd $CLONE; exit to leave$([ $KEEP = 1 ] || echo ', the root is removed then: --keep keeps it'))"
	rc=0
	chroot "$ROOT" /usr/bin/env -i -C "$CLONE" "${CLEAN_ENV[@]}" "TERM=${TERM:-dumb}" PS1='fresh:\w# ' \
		/bin/bash --norc -i || rc=$?
	exit "$rc"
fi

# --- the commands --------------------------------------------------------------------
rm -rf "$LOGS" "$OUT/summary.txt"
mkdir -p "$LOGS"
# The project's log lines ("[deps 3s] ...", "[tests 12s] ...", demo's "== ...")
# and make's errors, as progress.
progress() {
	sed -u -E -n -e 's/\x1b\[[0-9;]*m//g' \
		-e "/^\[[A-Za-z0-9_.-]+( +[0-9]+s)?\] |^== |^make(\[[0-9]+\])?: \*\*\*/s/^/  $1| /p" >&2 || true
}
run_cmd() { # NAME: make NAME in the clone, as the README says; output to its log
	chroot "$ROOT" /usr/bin/env -i -C "$CLONE" "${CLEAN_ENV[@]}" make "$1" </dev/null 2>&1 |
		tee "$LOGS/$1.log" | progress "$1"
}
fmt_time() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

declare -A RC TIME
failed=0
for c in "${CMDS[@]}"; do
	log "make $c (log: ${LOGS#"$TOP"/}/$c.log)"
	t0=$SECONDS
	if run_cmd "$c"; then RC[$c]=0; else RC[$c]=$?; fi
	TIME[$c]=$((SECONDS - t0))
	[ "${RC[$c]}" = 0 ] || failed=$((failed + 1))
	log "make $c: $([ "${RC[$c]}" = 0 ] && echo PASS || echo "FAIL (exit ${RC[$c]})") in $(fmt_time "${TIME[$c]}")"
done

# --- summary ---------------------------------------------------------------------------
strip_ansi() { sed -E 's/\x1b\[[0-9;]*m//g' "$1"; }
details() { # NAME: the command's own summary, or its log's tail when it has none
	local f=$LOGS/$1.log s='' tail=0
	case $1 in
	demo) s=$(strip_ansi "$f" | awk '/^== Summary/ { on = 1; next } on && /^== / { exit } on') ;;
	test)
		s=$(strip_ansi "$f" | awk '/^l7fast test summary/ { on = 1 } on && !/^make(\[[0-9]+\])?: /')
		# a suite's FAIL alone does not say what failed: the failing checks too
		if [ "${RC[test]}" != 0 ]; then
			local fails
			fails=$(strip_ansi "$f" | grep -E 'L7S-TEST: FAIL|^FAILED |\[  FAILED  \]|^[^ ].*: FAIL( |$)' |
				grep -v '=== suite' | head -n 20 || true)
			[ -z "$fails" ] || s+=$'\n'"what failed (the first 20 lines that say so):"$'\n'"$fails"
		fi
		;;
	deb | rpm) [ "${RC[$1]}" != 0 ] ||
		s=$(strip_ansi "$f" | grep -E '\] (built: |lintian: clean)|packages and .* checked;' | sed 's/^ *//' || true) ;;
	esac
	[ -n "$s" ] || tail=1
	[ "${RC[$1]}" = 0 ] || [ "$1" = test ] || tail=1
	[ -z "$s" ] || printf '%s\n' "$s"
	if [ $tail = 1 ]; then
		echo "(last lines of the log)"
		strip_ansi "$f" | grep -v '^[[:space:]]*$' | tail -n 15
	fi
}
{
	echo
	echo "l7fast fresh-machine test: Debian 12 minbase + ${PACKAGES[*]}, $SUITE from $URI"
	echo "tested: $TESTED"
	[ $WORKTREE = 1 ] || [ -z "$DIRTY" ] || echo "(the work tree's uncommitted changes were not tested)"
	for c in "${CMDS[@]}"; do
		printf '  make %-5s %s  exit %-3s %8s  log: %s\n' "$c" "$([ "${RC[$c]}" = 0 ] && echo PASS || echo FAIL)" \
			"${RC[$c]}" "$(fmt_time "${TIME[$c]}")" "${LOGS#"$TOP"/}/$c.log"
	done
	for c in "${CMDS[@]}"; do
		echo
		echo "--- make $c ---"
		details "$c" | sed 's/^/  /'
	done
	echo
	if [ $failed = 0 ]; then
		echo "FRESH MACHINE: ALL ${#CMDS[@]} PASSED (${CMDS[*]})"
	else
		echo "FRESH MACHINE: $failed OF ${#CMDS[@]} FAILED"
	fi
} | tee "$OUT/summary.txt"
exit $((failed > 0))
