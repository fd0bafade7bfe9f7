#!/bin/bash
# Host test of systemd/org.l7fast.Manager1.conf, no daemon needed: a private
# dbus-daemon runs Debian's system bus configuration with only our policy
# added; dbus-test-tool stands in for l7fastd (it answers every call), and
# dbus-send calls each method as root, as an unprivileged user, and as an
# unprivileged member of the l7fast group (a private mount namespace gives
# /etc/group that group; the host's is not touched).
#
#   tests/system/dbus-policy.sh            (as root)

TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
L7F_LOG_PREFIX=dbus-policy
# shellcheck source=scripts/lib/common.sh
. "$TOP/scripts/lib/common.sh"
POLICY=$TOP/systemd/org.l7fast.Manager1.conf
NAME=org.l7fast.Manager1
OBJ=/org/l7fast/Manager1
NOBODY=65534
L7GID=64999

if [ "${1:-}" != --in-namespace ]; then
	[ "$(id -u)" = 0 ] || { echo "dbus-policy: must run as root" >&2; exit 1; }
	for t in dbus-daemon dbus-send dbus-test-tool setpriv unshare; do
		command -v "$t" >/dev/null || { echo "dbus-policy: $t missing (dbus, dbus-tests, util-linux)" >&2; exit 1; }
	done
	exec unshare --mount --propagation private "$0" --in-namespace
fi

TMP=$(mktemp -d /tmp/l7f-dbus.XXXXXX)
pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	rm -rf "$TMP"
}
trap cleanup EXIT
chmod 755 "$TMP"

{ cat /etc/group; echo "l7fast:x:$L7GID:"; } >"$TMP/group"
mount --bind "$TMP/group" /etc/group

sed -e "s|<listen>.*</listen>|<listen>unix:path=$TMP/bus</listen>|" \
    -e '/<user>/d' -e '/<pidfile>/d' -e '/<includedir>/d' \
    -e '/<include .*\/etc\//d' \
    -e "s|</busconfig>|<include>$POLICY</include></busconfig>|" \
    /usr/share/dbus-1/system.conf >"$TMP/bus.conf"
dbus-daemon --config-file="$TMP/bus.conf" --nofork --nopidfile \
	--print-address=3 3>"$TMP/address" 2>"$TMP/daemon.log" &
pids+=($!)
for _ in $(seq 50); do [ -S "$TMP/bus" ] && break; sleep 0.1; done
[ -S "$TMP/bus" ] || { cat "$TMP/daemon.log" >&2; echo "dbus-policy: bus did not start" >&2; exit 1; }
export DBUS_SYSTEM_BUS_ADDRESS=unix:path=$TMP/bus

fails=0
check() { # check NAME expected-rc command...
	local name=$1 want=$2 rc=0 out
	shift 2
	out=$("$@" 2>&1) || rc=$?
	if { [ "$want" = ok ] && [ $rc = 0 ]; } ||
	   { [ "$want" = denied ] && [ $rc != 0 ] && grep -q 'AccessDenied' <<<"$out"; }; then
		echo "PASS dbus-policy/$name"
	else
		echo "FAIL dbus-policy/$name (want $want, rc=$rc): $out"
		fails=$((fails + 1))
	fi
}

as_root()   { "$@"; }
as_nobody() { setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups "$@"; }
as_admin()  { setpriv --reuid=$NOBODY --regid=$NOBODY --groups=$L7GID "$@"; }
call=(dbus-send --system --print-reply --reply-timeout=5000 --dest=$NAME $OBJ)
busd=(dbus-send --system --print-reply --dest=org.freedesktop.DBus /)

# Nobody but root may own the name.
check own-nobody denied as_nobody "${busd[@]}" org.freedesktop.DBus.RequestName string:$NAME uint32:0
dbus-test-tool echo --system --name=$NAME >"$TMP/echo.log" 2>&1 &
pids+=($!)
for _ in $(seq 50); do
	"${busd[@]}" org.freedesktop.DBus.NameHasOwner string:$NAME 2>/dev/null | grep -q 'boolean true' && break
	sleep 0.1
done
check own-root ok "${busd[@]}" org.freedesktop.DBus.GetNameOwner string:$NAME

for m in GetStatus GetStats ListRoutes DumpConfig; do
	check "$m-root" ok as_root "${call[@]}" $NAME.$m
	check "$m-user" ok as_nobody "${call[@]}" $NAME.$m
done
check Explain-user ok as_nobody "${call[@]}" $NAME.Explain 'string:{"method":"GET","url":"/"}'
check CheckPolicy-user ok as_nobody "${call[@]}" $NAME.CheckPolicy string:/etc/l7fast/policy.toml
check Reload-root ok as_root "${call[@]}" $NAME.Reload
check Reload-user denied as_nobody "${call[@]}" $NAME.Reload
check Reload-l7fast-group ok as_admin "${call[@]}" $NAME.Reload
check SetLogLevel-root ok as_root "${call[@]}" $NAME.SetLogLevel string:info
check SetLogLevel-user denied as_nobody "${call[@]}" $NAME.SetLogLevel string:debug
check SetLogLevel-l7fast-group ok as_admin "${call[@]}" $NAME.SetLogLevel string:info
for m in Drain Undrain; do
	check "$m-root" ok as_root "${call[@]}" $NAME.$m string:10.0.0.5:8080
	check "$m-user" denied as_nobody "${call[@]}" $NAME.$m string:10.0.0.5:8080
	check "$m-l7fast-group" ok as_admin "${call[@]}" $NAME.$m string:10.0.0.5:8080
done
check Introspect-user ok as_nobody "${call[@]}" org.freedesktop.DBus.Introspectable.Introspect
check Ping-user ok as_nobody "${call[@]}" org.freedesktop.DBus.Peer.Ping
check Get-user ok as_nobody "${call[@]}" org.freedesktop.DBus.Properties.Get string:$NAME string:Version
check GetAll-user ok as_nobody "${call[@]}" org.freedesktop.DBus.Properties.GetAll string:$NAME
check Set-user denied as_nobody "${call[@]}" org.freedesktop.DBus.Properties.Set string:$NAME string:Generation variant:uint64:1
check Set-l7fast-group denied as_admin "${call[@]}" org.freedesktop.DBus.Properties.Set string:$NAME string:Generation variant:uint64:1
check unknown-method-user denied as_nobody "${call[@]}" $NAME.Shutdown
check unknown-method-l7fast-group denied as_admin "${call[@]}" $NAME.Shutdown

if [ $fails = 0 ]; then echo "dbus-policy: PASS"; else echo "dbus-policy: FAIL ($fails)"; exit 1; fi
