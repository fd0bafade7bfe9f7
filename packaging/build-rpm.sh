#!/bin/bash
# make rpm: builds l7fast-<version>-1.x86_64.rpm and
# l7fast-dkms-<version>-1.noarch.rpm from this tree with packaging/l7fast.spec,
# lists them (rpm -qlp) and runs rpmlint. Works on Debian: the build
# dependencies come from apt (the same as for the .deb), so rpmbuild runs
# with --nodeps.
#
#   packaging/build-rpm.sh
# Environment: L7F_RPM_OUT=DIR (default <top>/build/packaging/rpm),
# L7F_RPM_REUSE=1 (skip the build when the staged source is unchanged), and
# L7F_NO_APT, L7F_POLICY, L7F_SRC, L7F_SRC_OVERLAY as for build-deb.sh.
# Output: DIR/*.rpm, DIR/rpmlint.txt, DIR/contents.txt, DIR/build.log

TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
L7F_LOG_PREFIX=rpm
# shellcheck source=scripts/lib/common.sh
. "$TOP/scripts/lib/common.sh"
OUT=${L7F_RPM_OUT:-$TOP/build/packaging/rpm}
# shellcheck source=packaging/lib.sh
. "$TOP/packaging/lib.sh"

VERSION=$(project_version)
DKMS_VERSION=$(dkms_version)
SPEC_VERSION=$(sed -n 's/^Version: *//p' "$TOP/packaging/l7fast.spec")
[ "$SPEC_VERSION" = "$VERSION" ] ||
	die "packaging/l7fast.spec is at $SPEC_VERSION but CMakeLists.txt at $VERSION"
[ -n "$DKMS_VERSION" ] || die "no PACKAGE_VERSION in kmod/dkms.conf"
SPEC_DKMS_VERSION=$(sed -n 's/^%global dkms_version *//p' "$TOP/packaging/l7fast.spec")
[ "$SPEC_DKMS_VERSION" = "$DKMS_VERSION" ] ||
	die "packaging/l7fast.spec has dkms_version $SPEC_DKMS_VERSION but kmod/dkms.conf $DKMS_VERSION"

mkdir -p "$OUT"
# elfutils: eu-strip, which find-debuginfo uses to split the debug info.
install_build_deps "$OUT/apt.log" rpm rpmlint elfutils

RPMTOP=$OUT/rpmbuild
rm -rf "$RPMTOP"
mkdir -p "$RPMTOP"/{SOURCES,SPECS,BUILD,RPMS,SRPMS}
stage_source "$RPMTOP/stage/l7fast-$VERSION"
HASH=$(tree_hash "$RPMTOP/stage")
RPMS=("$OUT/l7fast-$VERSION-1.x86_64.rpm" "$OUT/l7fast-dkms-$VERSION-1.noarch.rpm")
if [ "${L7F_RPM_REUSE:-0}" = 1 ] && [ -f "$OUT/source.sha256" ] &&
	[ "$(cat "$OUT/source.sha256")" = "$HASH" ] && [ -f "${RPMS[0]}" ] && [ -f "${RPMS[1]}" ]; then
	log "source unchanged since the last build: reusing ${RPMS[*]##*/}"
	exit 0
fi
rm -f "$OUT/source.sha256"
tar -C "$RPMTOP/stage" -czf "$RPMTOP/SOURCES/l7fast-$VERSION.tar.gz" "l7fast-$VERSION"
cp "$TOP/systemd/l7fast.sysusers" "$RPMTOP/SOURCES/"
cp "$TOP/packaging/l7fast.spec" "$RPMTOP/SPECS/"

log "rpmbuild (log: $OUT/build.log)"
rm -f "$OUT"/*.rpm
# Debian's rpm runs brp-compress (bash code) with dash: make it bash.
rpmbuild -ba --nodeps \
	--define "_topdir $RPMTOP" \
	--define "__brp_compress bash /usr/lib/rpm/brp-compress" \
	"$RPMTOP/SPECS/l7fast.spec" >"$OUT/build.log" 2>&1 ||
	{ tail -n 40 "$OUT/build.log" >&2; die "rpmbuild failed"; }
find "$RPMTOP/RPMS" "$RPMTOP/SRPMS" -name '*.rpm' -exec mv {} "$OUT/" \;

for r in "${RPMS[@]}"; do [ -f "$r" ] || die "$r was not built"; done
for r in "${RPMS[@]}"; do echo "== ${r##*/}"; rpm -qlp "$r"; rpm -qp --scripts "$r"; done >"$OUT/contents.txt" 2>&1

log "rpmlint"
rc=0
# The -debuginfo package is left out, as distributions' review tools do.
rpmlint -c "$TOP/packaging/rpmlint.toml" "${RPMS[@]}" "$OUT/l7fast-$VERSION-1.src.rpm" "$TOP/packaging/l7fast.spec" >"$OUT/rpmlint.txt" 2>&1 || rc=$?
sed 's/^/  rpmlint: /' "$OUT/rpmlint.txt" >&2
[ $rc = 0 ] || die "rpmlint reports errors"
echo "$HASH" >"$OUT/source.sha256"
log "built: ${RPMS[*]}"
