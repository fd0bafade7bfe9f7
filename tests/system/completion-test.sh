#!/bin/bash
# Checks the installed bash completion of l7fastctl (daemon/completion/,
# packaged by packaging/install.cmake): completion-test.sh FILE
set -uo pipefail
FILE=${1:?usage: completion-test.sh FILE}
for f in /usr/share/bash-completion/bash_completion; do
	[ -r "$f" ] || { echo "FAIL: $f missing (package bash-completion)"; exit 1; }
	# shellcheck source=/dev/null
	. "$f"
done
# shellcheck source=/dev/null
. "$FILE"
fails=0 n=0
expect() { # "words..." cword want...
	local line=$1 cword=$2
	shift 2
	COMP_WORDS=($line)
	[ "${line: -1}" = " " ] && COMP_WORDS+=("")
	COMP_CWORD=$cword
	COMP_LINE=$line COMP_POINT=${#line}
	COMPREPLY=()
	_l7fastctl
	local got="${COMPREPLY[*]}"
	n=$((n + 1))
	if [ "$got" = "$*" ]; then echo "PASS '$line' -> $got"; else echo "FAIL '$line' -> '$got', want '$*'"; fails=$((fails + 1)); fi
}
cd "$(mktemp -d)" && touch a.toml b.txt
expect "l7fastctl " 1 status reload stats routes dump check explain log-level drain undrain
expect "l7fastctl d" 1 dump drain
expect "l7fastctl u" 1 undrain
expect "l7fastctl l" 1 log-level
expect "l7fastctl log-level " 2 error warning notice info debug reset
expect "l7fastctl log-level d" 2 debug
expect "l7fastctl log-level debug " 3
expect "l7fastctl re" 1 reload
expect "l7fastctl st" 1 status stats
expect "l7fastctl status --" 2 --json --help --version
expect "l7fastctl check --p" 2 --policy-dir
expect "l7fastctl check " 2 a.toml
expect "l7fastctl e" 1 explain
expect "l7fastctl explain P" 2 POST PUT PATCH
expect "l7fastctl explain GET /a --so" 4 --source
expect "l7fastctl explain --policy " 3 a.toml
expect "l7fastctl status " 2
[ $fails = 0 ] && echo "$n completions as expected" || exit 1
