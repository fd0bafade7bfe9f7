#!/bin/bash
# make deb: builds l7fast_<version>_amd64.deb and l7fast-dkms_<version>_all.deb
# from this tree (tracked and untracked-but-not-ignored files, so it works the
# same in a clean clone and in a work tree) and runs lintian on them.
#
#   packaging/build-deb.sh
# Environment:
#   L7F_DEB_OUT=DIR   output directory (default <top>/build/packaging/deb)
#   L7F_DEB_REUSE=1   skip the build when the staged source is unchanged
#   L7F_NO_APT=1      do not install build dependencies
#   L7F_POLICY=FILE   default policy to package instead of packaging/policy.toml
#   L7F_SRC=REV       package the committed tree of REV (e.g. HEAD) instead of
#                     the work tree; L7F_SRC_OVERLAY="path..." then copies
#                     those paths from the work tree on top (work in progress
#                     of other components stays out of a packaging test)
# Output: DIR/*.deb, DIR/lintian.txt, DIR/build.log

TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
L7F_LOG_PREFIX=deb
# shellcheck source=scripts/lib/common.sh
. "$TOP/scripts/lib/common.sh"
OUT=${L7F_DEB_OUT:-$TOP/build/packaging/deb}
# shellcheck source=packaging/lib.sh
. "$TOP/packaging/lib.sh"

mkdir -p "$OUT"
# first: dpkg-parsechangelog below is dpkg-dev's, which a fresh machine lacks
install_build_deps "$OUT/apt.log" dpkg-dev lintian

VERSION=$(project_version)
[ -n "$VERSION" ] || die "no project version in CMakeLists.txt"
CHANGELOG_VERSION=$(dpkg-parsechangelog -l "$TOP/packaging/debian/changelog" -S Version)
[ "$CHANGELOG_VERSION" = "$VERSION" ] ||
	die "packaging/debian/changelog is at $CHANGELOG_VERSION but CMakeLists.txt at $VERSION: add a changelog entry (dch -v $VERSION)"

STAGE=$OUT/src/l7fast-$VERSION
stage_source "$STAGE"
rm -rf "$STAGE/debian"
cp -r "$TOP/packaging/debian" "$STAGE/debian"
HASH=$(tree_hash "$STAGE")

DEBS=("$OUT/l7fast_${VERSION}_amd64.deb" "$OUT/l7fast-dkms_${VERSION}_all.deb")
if [ "${L7F_DEB_REUSE:-0}" = 1 ] && [ -f "$OUT/source.sha256" ] &&
	[ "$(cat "$OUT/source.sha256")" = "$HASH" ] && [ -f "${DEBS[0]}" ] && [ -f "${DEBS[1]}" ]; then
	log "source unchanged since the last build: reusing ${DEBS[*]##*/}"
	exit 0
fi

log "dpkg-buildpackage (log: $OUT/build.log)"
rm -f "$OUT"/*.deb "$OUT"/*.changes "$OUT"/*.buildinfo "$OUT/source.sha256"
(cd "$STAGE" && DEB_BUILD_OPTIONS="parallel=$(nproc) ${DEB_BUILD_OPTIONS:-}" \
	dpkg-buildpackage -b -us -uc) >"$OUT/build.log" 2>&1 ||
	{ tail -n 40 "$OUT/build.log" >&2; die "dpkg-buildpackage failed"; }
mv "$OUT"/src/*.deb "$OUT"/src/*.changes "$OUT"/src/*.buildinfo "$OUT/"
for d in "${DEBS[@]}"; do [ -f "$d" ] || die "$d was not built"; done

# Errors and warnings fail; info and pedantic tags would be printed too.
# Overrides: packaging/debian/*.lintian-overrides, each with its reason.
log "lintian"
rc=0
lintian --fail-on error,warning --info --display-info --pedantic \
	"$OUT/l7fast_${VERSION}_amd64.changes" >"$OUT/lintian.raw" 2>&1 || rc=$?
grep -v 'running with root privileges' "$OUT/lintian.raw" >"$OUT/lintian.txt" || true
if [ -s "$OUT/lintian.txt" ]; then sed 's/^/  lintian: /' "$OUT/lintian.txt" >&2; else log "lintian: clean (0 tags, pedantic)"; fi
[ $rc = 0 ] || die "lintian reports errors or warnings"

echo "$HASH" >"$OUT/source.sha256"
log "built: ${DEBS[*]}"
