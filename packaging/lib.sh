# Shared by build-deb.sh and build-rpm.sh (sourced; expects TOP and log/die).

# The project version, from CMakeLists.txt (the one source of it).
project_version() {
	sed -n 's/^project(l7fast VERSION \([0-9.]*\).*/\1/p' "$TOP/CMakeLists.txt"
}

# The DKMS module version, from kmod/dkms.conf (owned by kmod/).
dkms_version() {
	sed -n 's/^PACKAGE_VERSION="\([^"]*\)"$/\1/p' "$TOP/kmod/dkms.conf"
}

# Tracked and untracked-but-not-ignored files under the given paths (all if
# none) that exist in the work tree, NUL-separated, relative to TOP.
work_tree_files() {
	git -C "$TOP" ls-files -z --cached --others --exclude-standard -- "$@" |
		while IFS= read -r -d '' f; do [ -e "$TOP/$f" ] && printf '%s\0' "$f"; done
}

# stage_source DIR: copies the source to package into DIR.
#   L7F_SRC=REV           the committed tree of REV instead of the work tree
#   L7F_SRC_OVERLAY=paths with L7F_SRC: these paths from the work tree on top
#   L7F_POLICY=FILE       default policy instead of packaging/policy.toml
stage_source() {
	local dir=$1 policy=${L7F_POLICY:-$TOP/packaging/policy.toml}
	[ -f "$policy" ] || die "$policy (the default policy) is missing"
	rm -rf "$dir"
	mkdir -p "$dir"
	if [ -n "${L7F_SRC:-}" ]; then
		git -C "$TOP" archive --format=tar "$L7F_SRC" | tar -xf - -C "$dir"
		if [ -n "${L7F_SRC_OVERLAY:-}" ]; then
			# shellcheck disable=SC2086
			(cd "$TOP" && work_tree_files $L7F_SRC_OVERLAY | tar --null -T - -cf - | tar -xf - -C "$dir")
		fi
	else
		(cd "$TOP" && work_tree_files | tar --null -T - -cf - | tar -xf - -C "$dir")
	fi
	cp "$policy" "$dir/packaging/policy.toml"
}

# tree_hash DIR: one hash over every file's path and content.
tree_hash() {
	(cd "$1" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)
}

# install_build_deps LOG extra-packages...: the Build-Depends of
# packaging/debian/control (the same toolchain builds the RPM) plus extras.
# apt resolves the relations itself (build-dep on the source directory), so
# virtual names such as dh-sequence-dkms (dh-dkms) and debhelper-compat
# (debhelper) become the packages that provide them.
install_build_deps() {
	local logf=$1 plan missing
	shift
	[ "${L7F_NO_APT:-0}" = 1 ] && return 0
	if ! plan=$(apt-get build-dep -s "$TOP/packaging/" 2>&1); then
		log "apt-get update (the package lists cannot resolve the build dependencies)"
		[ "$(id -u)" = 0 ] || die "cannot resolve the build dependencies; as root: apt-get update"
		apt-get -o DPkg::Lock::Timeout=300 update -qq >"$logf" 2>&1 ||
			{ tail -n 30 "$logf" >&2; die "apt-get update failed (log: $logf)"; }
		plan=$(apt-get build-dep -s "$TOP/packaging/" 2>&1) ||
			{ echo "$plan" >&2; die "apt-get build-dep cannot satisfy packaging/debian/control"; }
	fi
	missing=$(sed -n 's/^Inst \([^ ]*\).*/\1/p' <<<"$plan" | tr '\n' ' ')
	if [ -n "$missing" ]; then
		[ "$(id -u)" = 0 ] || die "missing build dependencies (run as root to install them): $missing"
		log "installing the build dependencies of packaging/debian/control: $missing"
		DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 build-dep -y -qq \
			--no-install-recommends "$TOP/packaging/" >"$logf" 2>&1 ||
			{ tail -n 30 "$logf" >&2; die "apt-get build-dep $TOP/packaging/ failed (log: $logf)"; }
	fi
	# shellcheck disable=SC2046
	apt_install "$logf" $(missing_packages "$@")
}
