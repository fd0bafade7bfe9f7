#!/bin/bash
# A private D-Bus system bus for l7fast's tests, so l7fastd and l7fastctl can
# be exercised without touching the host's bus.
#
#   scripts/dbus/private-bus.sh start DIR [--open] [--admin-gid GID]
#   scripts/dbus/private-bus.sh stop DIR
#
# start writes DIR/bus.conf, runs dbus-daemon on DIR/bus, records its pid in
# DIR/pid and prints the line to eval:
#   export DBUS_SYSTEM_BUS_ADDRESS=unix:path=DIR/bus
#
# The bus runs Debian's system bus policy (default deny) plus this tree's
# systemd/org.l7fast.Manager1.conf, and nothing from /etc/dbus-1 or
# /usr/share/dbus-1/system.d. With --open it allows everything instead, so
# that tests can reach l7fastd's own access checks behind the bus policy.
#
# The bus policy names the group "l7fast". If the host has no such group and
# --admin-gid is given, dbus-daemon runs in a private mount namespace whose
# /etc/group has "l7fast:x:GID:" added (the host's file is not touched);
# whoever else must resolve the group (l7fastd) needs the same (see
# scripts/dbus/l7fast_bus.py).
#
# Needs root (for --admin-gid and to own org.l7fast.Manager1 as root) and
# dbus-daemon (Debian: dbus-daemon, or dbus on bookworm).

TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
L7F_LOG_PREFIX=private-bus
# shellcheck source=scripts/lib/common.sh
. "$TOP/scripts/lib/common.sh"
POLICY=$TOP/systemd/org.l7fast.Manager1.conf
SYSTEM_CONF=/usr/share/dbus-1/system.conf


write_config() { # DIR OPEN
	local dir=$1 open=$2
	if [ "$open" = 1 ]; then
		cat >"$dir/bus.conf" <<-CONF
		<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN"
		 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
		<busconfig>
		  <type>system</type>
		  <listen>unix:path=$dir/bus</listen>
		  <auth>EXTERNAL</auth>
		  <policy context="default">
		    <allow user="*"/>
		    <allow own="*"/>
		    <allow send_type="method_call"/>
		    <allow send_destination="*"/>
		    <allow receive_sender="*"/>
		  </policy>
		</busconfig>
		CONF
	else
		[ -r "$SYSTEM_CONF" ] || die "$SYSTEM_CONF missing (apt install dbus-system-bus-common)"
		[ -r "$POLICY" ] || die "$POLICY missing"
		sed -e "s|<listen>.*</listen>|<listen>unix:path=$dir/bus</listen>|" \
		    -e '/<user>/d' -e '/<pidfile>/d' -e '/<includedir>/d' \
		    -e '/<include .*contexts\/dbus_contexts/d' \
		    -e '/<standard_system_servicedirs/d' -e '/<servicehelper>/d' \
		    -e "s|</busconfig>|<include>$POLICY</include></busconfig>|" \
		    "$SYSTEM_CONF" >"$dir/bus.conf"
	fi
}

cmd=${1:-}
dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || die "usage: $0 start DIR [--open] [--admin-gid GID] | stop DIR"
shift 2

case $cmd in
start)
	open=0
	admin_gid=
	while [ $# -gt 0 ]; do
		case $1 in
		--open) open=1 ;;
		--admin-gid) admin_gid=${2:?--admin-gid needs a gid}; shift ;;
		*) die "unknown option $1" ;;
		esac
		shift
	done
	command -v dbus-daemon >/dev/null || die "dbus-daemon missing (apt install dbus-daemon)"
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	chmod 755 "$dir"
	rm -f "$dir/bus"
	write_config "$dir" "$open"
	launch=(dbus-daemon --config-file="$dir/bus.conf" --nofork --nopidfile)
	if [ -n "$admin_gid" ] && ! getent group l7fast >/dev/null; then
		{ cat /etc/group; echo "l7fast:x:$admin_gid:"; } >"$dir/group"
		launch=(unshare --mount --propagation private -- /bin/sh -c \
			'mount --bind "$0" /etc/group && exec "$@"' "$dir/group" "${launch[@]}")
	fi
	"${launch[@]}" >"$dir/dbus-daemon.log" 2>&1 </dev/null &
	echo $! >"$dir/pid"
	for _ in $(seq 100); do
		[ -S "$dir/bus" ] && break
		kill -0 "$(cat "$dir/pid")" 2>/dev/null || break
		sleep 0.05
	done
	[ -S "$dir/bus" ] || { cat "$dir/dbus-daemon.log" >&2; die "dbus-daemon did not start"; }
	echo "export DBUS_SYSTEM_BUS_ADDRESS=unix:path=$dir/bus"
	;;
stop)
	if [ -f "$dir/pid" ]; then
		pid=$(cat "$dir/pid")
		kill "$pid" 2>/dev/null || true
		for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
		rm -f "$dir/pid"
	fi
	rm -f "$dir/bus"
	;;
*)
	die "unknown command $cmd"
	;;
esac
