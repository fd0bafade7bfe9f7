// SPDX-License-Identifier: GPL-2.0-only
/*
 * In the kmod matrix's guests: loads the data plane object (bpf/l7fast.bpf.c,
 * as l7fastd embeds it) with the kernel's verifier, once with l7fast.ko's
 * kfuncs switched on (cfg_kfuncs = 1: the HS verifier of
 * bpf/include/l7_jwtverify.h) where the daemon's probe says socket programs
 * can call them, and once without, which must load on every kernel. Prints
 * L7F-TEST lines for scripts/kmod/run-matrix.sh and the verifier's last
 * lines on a failure.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "l7fast_probe.h"
#include "l7fast.skel.h"

#define TAIL 65536
static char tail[TAIL];
static size_t tail_len;

static int keep_tail(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	char *line = NULL;
	size_t n, keep;
	int r;

	(void)level;
	r = vasprintf(&line, fmt, ap);
	if (r <= 0) {
		free(line);
		return 0;
	}
	n = (size_t)r;
	/* the verifier's log comes as one message: keep its end */
	keep = n < TAIL / 2 ? n : TAIL / 2;
	if (tail_len + keep >= TAIL) {
		memmove(tail, tail + tail_len - TAIL / 4, TAIL / 4);
		tail_len = TAIL / 4;
	}
	memcpy(tail + tail_len, line + n - keep, keep);
	tail_len += keep;
	tail[tail_len] = 0;
	free(line);
	return 0;
}

/* 0 when the object loads with cfg_kfuncs = kfuncs. */
static int load(int kfuncs)
{
	LIBBPF_OPTS(bpf_object_open_opts, o, .pin_root_path = "/sys/fs/bpf/l7fast-test");
	struct l7fast_bpf *skel;
	int ncpus = libbpf_num_possible_cpus(), err;

	tail_len = 0;
	tail[0] = 0;
	skel = l7fast_bpf__open_opts(&o);
	if (!skel)
		return -errno;
	skel->rodata->cfg_kfuncs = kfuncs;
	bpf_map__set_max_entries(skel->maps.l7_scratch, (ncpus > 0 ? ncpus : 1) * 4);
	err = l7fast_bpf__load(skel);
	l7fast_bpf__destroy(skel);
	return err;
}

/* the kept log's last 60 lines, each cut at 200 bytes */
static void print_tail(void)
{
	const char *start[60], *p = tail;
	size_t n = 0, i;

	while (*p) {
		start[n % 60] = p;
		n++;
		p = strchr(p, '\n');
		if (!p)
			break;
		p++;
	}
	for (i = n > 60 ? n - 60 : 0; i < n; i++) {
		const char *l = start[i % 60], *e = strchr(l, '\n');
		int len = e ? (int)(e - l) : (int)strlen(l);

		printf("  %.*s\n", len > 200 ? 200 : len, l);
	}
}

static void report(const char *name, int err, const char *note)
{
	if (!err) {
		printf("L7F-TEST: PASS guest/%s%s%s\n", name, note ? ": " : "", note ? note : "");
		return;
	}
	printf("L7F-TEST: FAIL guest/%s: %s; libbpf/verifier said (last lines, cut at 200 bytes):\n", name,
	       strerror(-err));
	print_tail();
}

int main(void)
{
	struct l7fast_probe_result r;
	int err;

	libbpf_set_print(keep_tail);
	mkdir("/sys/fs/bpf", 0755);
	if (mount("bpf", "/sys/fs/bpf", "bpf", 0, NULL) && errno != EBUSY)
		printf("L7F-INFO: mounting bpffs: %s\n", strerror(errno));
	mkdir("/sys/fs/bpf/l7fast-test", 0700);

	memset(&r, 0, sizeof(r));
	if (l7fast_probe_socket_kfuncs(&r) == L7FAST_PROBE_AVAILABLE) {
		err = load(1);
		report("dataplane-kfuncs", err, "the HS verifier passes the verifier");
	} else {
		printf("L7F-INFO: socket programs cannot call l7fast.ko here: %s\n", r.reason);
		report("dataplane-kfuncs", 0, "not available here (the daemon loads the object without)");
	}
	err = load(0);
	report("dataplane-plain", err, NULL);
	return 0;
}
