#!/bin/busybox sh
# /init of the test initramfs: load l7fast.ko, run the kfunc tests, unload,
# check the kernel log, power off.  Results go to the serial console as
# "L7F-..." lines for scripts/kmod/run-matrix.sh.
/bin/busybox --install -s /bin
export PATH=/bin:/sbin
mkdir -p /proc /sys /dev /tmp /sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
# The kernel's request_module() (crypto templates, sha512) runs /sbin/modprobe.
ln -sf /bin/modprobe /sbin/modprobe
ip link set lo up

res() { echo "L7F-TEST: $1 guest/$2${3:+: $3}"; }

echo "L7F-GUEST: kernel $(uname -r)"
# What kmod's modprobe does for MODULE_SOFTDEP; busybox ignores softdeps.
for m in $(modinfo -F softdep l7fast 2>/dev/null | sed 's/pre://'); do
	modprobe "$m" 2>/dev/null || echo "L7F-INFO: softdep $m not loaded"
done
if modprobe l7fast; then
	res PASS insmod
	for f in /sys/kernel/l7fast/*; do
		echo "L7F-INFO: sysfs ${f##*/}=$(cat "$f")"
	done
	/bin/kfunc_test --bench
	rc=$?
	[ "$rc" = 0 ] || res FAIL kfunc_test "exit status $rc"
	/bin/dataplane_load || res FAIL dataplane_load "exit status $?"
	# the data plane's decision with the module's kfuncs against the
	# reference (tests/kernel): its tallies and figures as info lines
	if /bin/l7fast_kernel_tests >/tmp/kernel-tests.log 2>&1; then
		res PASS kernel-tests "$(grep -c '^\[       OK \]' /tmp/kernel-tests.log) tests"
	else
		res FAIL kernel-tests "exit status $? (its failures below)"
		grep -E -A6 'Failure|^\[  FAILED' /tmp/kernel-tests.log | head -n 80 | sed 's/^/L7F-INFO: kernel-tests: /'
		# a verifier's refusal: the end of its log
		grep -m1 -B16 'END PROG LOAD LOG' /tmp/kernel-tests.log | sed 's/^/L7F-INFO: kernel-tests: verifier: /'
	fi
	grep -E '^  |^L7F-INFO' /tmp/kernel-tests.log | sed 's/^L7F-INFO: //; s/^ */L7F-INFO: kernel-tests: /'
	# Programs and maps are freed after an RCU grace period / in a
	# workqueue, and each program holds a module reference until then.
	n=0
	until rmmod l7fast 2>/dev/null || [ $n -ge 50 ]; do
		n=$((n + 1))
		sleep 0.2
	done
	if [ -e /sys/module/l7fast ] && ! rmmod l7fast; then
		res FAIL rmmod "module still in use after 10 s"
	else
		res PASS rmmod "after $n retries"
	fi
	if [ -e /sys/module/l7fast ]; then
		res FAIL rmmod-gone "module still present"
	else
		res PASS rmmod-gone
	fi
else
	res FAIL insmod "modprobe l7fast failed"
fi

if dmesg | grep -E 'WARNING:|BUG:|Oops|Call Trace|general protection|refcount_t:|UBSAN:|KASAN:|kmemleak'; then
	res FAIL dmesg-clean "kernel warnings in dmesg"
else
	res PASS dmesg-clean
fi
echo L7F-DMESG-BEGIN
dmesg | grep -iE 'l7fast|bpf|taint|crypto|error|fail' | tail -n 40
echo L7F-DMESG-END
echo L7F-GUEST-DONE
poweroff -f
