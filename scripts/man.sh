#!/bin/bash
# Renders the man pages (docs/man/pages) into build/man with pandoc, as the
# packages do, so that they can be read from a checkout:
#   make man && man -l build/man/l7fastd.8
# (docs/man/*.md are their Markdown sources: `man -l` shows those raw.)
# Installs pandoc when it is missing (as root; apt).
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/lib/common.sh
. "$TOP/scripts/lib/common.sh"
OUT=${1:-$TOP/build/man}
mapfile -t need < <(missing_packages pandoc man-db groff-base)
if [ ${#need[@]} -gt 0 ]; then
	log "installing ${need[*]}"
	mkdir -p "$TOP/build"
	apt_install "$TOP/build/man-deps.log" "${need[@]}"
fi
version=$(sed -n 's/^project(l7fast VERSION \([0-9.]*\).*/\1/p' "$TOP/CMakeLists.txt")
[ -n "$version" ] || die "no version in $TOP/CMakeLists.txt (project(l7fast VERSION ...))"
"$TOP/docs/man/gen-man.sh" "$OUT" "$version"
grep -v -e '^#' -e '^[[:space:]]*$' "$TOP/docs/man/pages" | while read -r page _; do
	log "man -l ${OUT#"$PWD"/}/$page"
done
