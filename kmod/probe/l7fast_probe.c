// SPDX-License-Identifier: (GPL-2.0-only WITH Linux-syscall-note) OR BSD-2-Clause
#include "l7fast_probe.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "l7fast_probe.skel.h"

#define L7FAST_PROBE_KFUNC	"l7f_xxh64"
#define L7FAST_PROBE_LOG_SIZE	(64 * 1024)

static enum l7fast_probe_status
l7fast_probe_set(struct l7fast_probe_result *r, enum l7fast_probe_status s,
		 const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r->reason, sizeof(r->reason), fmt, ap);
	va_end(ap);
	r->status = s;
	return s;
}

/*
 * The verifier's reason: the last non-empty log line that is not the
 * closing "processed N insns" statistics line.
 */
static const char *l7fast_probe_reason_line(char *log)
{
	size_t len = strnlen(log, L7FAST_PROBE_LOG_SIZE - 1);
	char *line = log;
	int rounds;

	log[len] = '\0';
	for (rounds = 0; rounds < 2; rounds++) {
		while (len && (log[len - 1] == '\n' || log[len - 1] == ' '))
			log[--len] = '\0';
		line = strrchr(log, '\n');
		line = line ? line + 1 : log;
		if (strncmp(line, "processed ", 10) || line == log)
			break;
		len = (size_t)(line - log);
		log[len] = '\0';
	}
	return line;
}

static enum l7fast_probe_status
l7fast_probe_module_btf(struct l7fast_probe_result *r)
{
	struct btf *vmlinux, *mod;
	int id;

	if (access("/sys/kernel/btf/l7fast", R_OK))
		return l7fast_probe_set(r, L7FAST_PROBE_NO_MODULE,
					"l7fast.ko is not loaded (no /sys/kernel/btf/l7fast)");
	vmlinux = btf__load_vmlinux_btf();
	if (!vmlinux)
		return l7fast_probe_set(r, L7FAST_PROBE_ERROR,
					"kernel BTF unavailable: %s",
					strerror(errno));
	mod = btf__load_module_btf("l7fast", vmlinux);
	if (!mod) {
		btf__free(vmlinux);
		return l7fast_probe_set(r, L7FAST_PROBE_ERROR,
					"cannot read l7fast module BTF: %s",
					strerror(errno));
	}
	id = btf__find_by_name_kind(mod, L7FAST_PROBE_KFUNC, BTF_KIND_FUNC);
	btf__free(mod);
	btf__free(vmlinux);
	if (id < 0)
		return l7fast_probe_set(r, L7FAST_PROBE_ABI_MISMATCH,
					"l7fast.ko has no kfunc %s (ABI mismatch)",
					L7FAST_PROBE_KFUNC);
	return L7FAST_PROBE_AVAILABLE;
}

enum l7fast_probe_status
l7fast_probe_socket_kfuncs(struct l7fast_probe_result *r)
{
	struct l7fast_probe_bpf *skel;
	enum l7fast_probe_status s;
	char *log;
	int ret;

	memset(r, 0, sizeof(*r));
	s = l7fast_probe_module_btf(r);
	if (s != L7FAST_PROBE_AVAILABLE)
		return s;

	log = calloc(1, L7FAST_PROBE_LOG_SIZE);
	if (!log)
		return l7fast_probe_set(r, L7FAST_PROBE_ERROR, "out of memory");
	skel = l7fast_probe_bpf__open();
	if (!skel) {
		s = l7fast_probe_set(r, L7FAST_PROBE_ERROR,
				     "cannot open probe object: %s",
				     strerror(errno));
		goto out;
	}
	bpf_program__set_log_buf(skel->progs.l7fast_probe_sk_msg, log,
				 L7FAST_PROBE_LOG_SIZE);
	bpf_program__set_log_level(skel->progs.l7fast_probe_sk_msg, 1);
	ret = l7fast_probe_bpf__load(skel);
	if (!ret) {
		s = l7fast_probe_set(r, L7FAST_PROBE_AVAILABLE,
				     "SK_MSG programs can call l7fast kfuncs");
	} else if (strstr(log, "is not allowed")) {
		/* 6.1: "calling kernel function l7f_xxh64 is not allowed" */
		s = l7fast_probe_set(r, L7FAST_PROBE_REJECTED,
				     "kernel refuses module kfuncs in SK_MSG programs "
				     "(needs the common kfunc hook of Linux >= 6.2): %s",
				     l7fast_probe_reason_line(log));
	} else {
		s = l7fast_probe_set(r, L7FAST_PROBE_ERROR,
				     "SK_MSG probe failed to load (%s): %s",
				     strerror(-ret), l7fast_probe_reason_line(log));
	}
	l7fast_probe_bpf__destroy(skel);
out:
	free(log);
	return s;
}
