# Sourced (never run) by every bash script of l7fast, first thing after its
# TOP is known:
#
#   . "$TOP/scripts/lib/common.sh"
#   L7F_LOG_PREFIX=deb          # optional: "[deb  12s] ..." in log lines
#
# It turns on strict mode (errexit, errtrace, nounset, pipefail) with an ERR
# trap, so that a command that fails where the script did not expect it says
# which command, file and line failed (and the function calls that led
# there), instead of ending the script with a bare exit status and an empty
# log. A script that runs commands whose failure it handles itself uses them
# where bash does not apply errexit (if, while, ||, &&), as usual.
#
# Also here, defined once for every script: log/die, the apt helpers, and
# the URI of the configured Debian archive (never a hard-coded host).

set -Eeuo pipefail

# The trap: $1 exit status, $2 the command, $3 its line, $4 its file.
l7f_on_err() {
	local rc=$1 cmd=$2 line=$3 src=$4 i
	printf '%s:%s: command failed (exit %s): %s\n' "${src#"${TOP:-}/"}" "$line" "$rc" "$cmd" >&2
	for ((i = 1; i < ${#FUNCNAME[@]} - 1; i++)); do
		printf '  in %s, called from %s:%s\n' "${FUNCNAME[$i]}" \
			"${BASH_SOURCE[$((i + 1))]#"${TOP:-}/"}" "${BASH_LINENO[$i]}" >&2
	done
}
trap 'l7f_on_err $? "$BASH_COMMAND" "$LINENO" "${BASH_SOURCE[0]}"' ERR

L7F_LOG_PREFIX=${L7F_LOG_PREFIX:-$(basename "$0" .sh)}
log() { printf '[%s %4ds] %s\n' "$L7F_LOG_PREFIX" "$SECONDS" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# Packages (names) of the arguments that are not installed, one per line.
missing_packages() {
	local p
	for p in "$@"; do
		dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep ' installed$' >/dev/null || echo "$p"
	done
}

# apt_install LOG package...: installs them (as root); on failure the log's
# tail and what to do. apt-get update first when the lists are missing or an
# install from the current lists fails (a fresh machine, or an archive that
# moved on).
apt_install() {
	local logf=$1
	shift
	[ $# -gt 0 ] || return 0
	[ "$(id -u)" = 0 ] || die "missing packages: $* (run as root, or install them with apt-get)"
	if ! DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq \
		--no-install-recommends "$@" >"$logf" 2>&1; then
		log "apt-get update (installing from the current package lists failed)"
		{ apt-get -o DPkg::Lock::Timeout=300 update -qq &&
			DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq \
				--no-install-recommends "$@"; } >>"$logf" 2>&1 ||
			{ tail -n 30 "$logf" >&2; die "apt-get install $* failed (log: $logf)"; }
	fi
}

# The URI of the configured Debian archive that serves bookworm, from the
# deb822 sources (/etc/apt/sources.list.d/*.sources, what cloud images use)
# or the one-line format (/etc/apt/sources.list, what the installer and
# debootstrap write). Empty when there is none.
debian_uri() {
	local files=() f
	for f in /etc/apt/sources.list.d/*.sources /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -r "$f" ] && files+=("$f")
	done
	[ ${#files[@]} -gt 0 ] || return 0
	awk '
		function flush() {
			if (uri != "" && suites ~ /(^|[ \t])bookworm([ \t]|$)/ && found == "") found = uri
			uri = ""; suites = ""
		}
		FNR == 1 { flush(); deb822 = FILENAME ~ /\.sources$/ }
		/^[ \t]*#/ { next }
		deb822 && /^[ \t]*$/ { flush(); next }
		deb822 && tolower($1) == "uris:"   { uri = $2; next }
		deb822 && tolower($1) == "suites:" { $1 = ""; suites = $0; next }
		# one-line format: deb [options] URI suite components...
		!deb822 && $1 == "deb" && found == "" {
			i = 2
			if ($2 ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
			if ($(i + 1) == "bookworm") found = $i
		}
		END { flush(); if (found != "") print found }
	' "${files[@]}"
}
