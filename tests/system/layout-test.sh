#!/bin/bash
# The .deb and .rpm must install the same files, up to each distribution's
# directories: layout-test.sh DEB DKMS_DEB RPM DKMS_RPM
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
L7F_LOG_PREFIX=layout
# shellcheck source=scripts/lib/common.sh
. "$TOP/scripts/lib/common.sh"
deb_files() { dpkg-deb -c "$1" | awk '$1 !~ /^d/ { sub(/^\.\//, "/", $6); print $6 }'; }
rpm_regular() { rpm -qp --qf '[%{FILEMODES:perms} %{FILENAMES}\n]' "$1" | awk '$1 !~ /^d/ && $1 !~ /^l/ { print $2 }'; }
normalize() { # distribution directories -> one spelling; documentation and licences are each distribution's
	sed -e 's|^/lib/systemd/|/usr/lib/systemd/|' \
	    -e 's|^/usr/lib/x86_64-linux-gnu/|/usr/LIBDIR/|' -e 's|^/usr/lib64/|/usr/LIBDIR/|' \
	    -e 's|\.gz$||' |
	grep -v -e '^/usr/share/doc/' -e '^/usr/share/licenses/' -e '^/usr/share/lintian/' -e '^/usr/lib/\.build-id/' |
	sort
}
rc=0
d=$(mktemp)
trap 'rm -f "$d"' EXIT
for pair in "$1 $3" "$2 $4"; do
	set -- $pair
	diff <(deb_files "$1" | normalize) <(rpm_regular "$2" | normalize) >"$d" ||
		{ echo "${1##*/} vs ${2##*/}:"; sed 's/^/  /' "$d"; rc=1; }
done
[ $rc = 0 ] && echo "same files in .deb and .rpm (after /lib vs /usr/lib, multiarch vs lib64)"
exit $rc
