#!/bin/sh
# Renders the man pages listed in docs/man/pages from their Markdown sources
# with pandoc:  docs/man/gen-man.sh OUTDIR VERSION
# The Markdown is the single source (docs/policy.md is l7fast.toml(5)); only
# the generated roff is shipped. The date comes from SOURCE_DATE_EPOCH when set
# (reproducible package builds), else from the last commit, else today.
set -eu
out=${1:?usage: gen-man.sh OUTDIR VERSION}
version=${2:?usage: gen-man.sh OUTDIR VERSION}
top=$(cd "$(dirname "$0")/../.." && pwd)
if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
	SOURCE_DATE_EPOCH=$(git -C "$top" log -1 --format=%ct 2>/dev/null || date +%s)
fi
date=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%d)
mkdir -p "$out"
grep -v -e '^#' -e '^[[:space:]]*$' "$top/docs/man/pages" | while read -r page src; do
	pandoc --standalone --from markdown --to man \
		--metadata footer="l7fast $version" --metadata date="$date" \
		"$top/$src" --output "$out/$page"
	# groff must render it without a single warning (lintian checks the same).
	command -v man >/dev/null || continue
	warn=$(LC_ALL=C.UTF-8 MANROFFSEQ='' MANWIDTH=80 \
		man --warnings -E UTF-8 -l -Tutf8 -Z "$out/$page" 2>&1 >/dev/null || true)
	if [ -n "$warn" ]; then
		printf '%s (%s): groff warnings:\n%s\n' "$page" "$src" "$warn" >&2
		exit 1
	fi
done
