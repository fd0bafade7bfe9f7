/* SPDX-License-Identifier: (GPL-2.0-only WITH Linux-syscall-note) OR BSD-2-Clause */
/*
 * Daemon-side probe: can socket programs (SK_MSG/SK_SKB) call l7fast.ko's
 * kfuncs on the running kernel with the loaded module?  It loads a tiny
 * SK_MSG program and never attaches it.  Needs CAP_BPF/CAP_SYS_ADMIN.
 *
 * No global state is touched (libbpf's print callback is left alone, so
 * libbpf may log the expected verifier refusal on 6.1 through it).
 *
 * Build: clang -g -O2 -target bpf -I<kmod/include> -c l7fast_probe.bpf.c
 *        bpftool gen skeleton l7fast_probe.bpf.o name l7fast_probe_bpf \
 *            > l7fast_probe.skel.h
 *        cc -c l7fast_probe.c -I<dir of the skeleton> -I<kmod/include>
 * or `make -C kmod/probe OUT=<dir>` which builds libl7fast_probe.a.
 */
#ifndef L7FAST_PROBE_H
#define L7FAST_PROBE_H

#ifdef __cplusplus
extern "C" {
#endif

enum l7fast_probe_status {
	L7FAST_PROBE_AVAILABLE = 0,
	L7FAST_PROBE_NO_MODULE,		/* l7fast.ko not loaded / no BTF */
	L7FAST_PROBE_ABI_MISMATCH,	/* module lacks the probed kfunc */
	L7FAST_PROBE_REJECTED,		/* verifier refuses the call (< 6.2) */
	L7FAST_PROBE_ERROR,		/* anything else, see reason */
};

struct l7fast_probe_result {
	enum l7fast_probe_status status;
	char reason[512];
};

/* Returns result->status; result->reason is a sentence for logs and UIs. */
enum l7fast_probe_status
l7fast_probe_socket_kfuncs(struct l7fast_probe_result *result);

#ifdef __cplusplus
}
#endif

#endif /* L7FAST_PROBE_H */
