// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * What one HTTP head costs the data plane's parser, as this kernel runs it:
 * bpf/include/l7_http.h compiled exactly as bpf/l7fast.bpf.c compiles it,
 * run `iters` times over one head by a BPF_PROG_TYPE_SYSCALL program
 * (tests/bench/parse_cost.cpp drives it). The clock is read once per batch,
 * so the figure is the parser's own cost, not a system call's.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "l7_http.h"

struct parse_cost_args {
	__u32 is_request;
	__u32 len;
	__u32 iters;
	__u32 strict; /* the strict stages alone */
};

__u8 ws_mem[sizeof(struct l7_ws)] __attribute__((aligned(8)));
__u64 elapsed_ns;
__s32 status;

#define ws (*(struct l7_ws *)ws_mem)

static long parse_once(__u32 i, void *ctx)
{
	const struct parse_cost_args *a = ctx;

	ws.len = a->len > L7_WS_BUF ? L7_WS_BUF : a->len;
	if (a->strict)
		status = l7_parse_head_strict(&ws, a->is_request ? 1 : 0);
	else
		status = l7_parse_head(&ws, a->is_request ? 1 : 0);
	return 0;
}

SEC("syscall")
int parse_cost(struct parse_cost_args *args)
{
	struct parse_cost_args a = *args;
	__u64 t0 = bpf_ktime_get_ns();

	bpf_loop(a.iters, parse_once, &a, 0);
	elapsed_ns = bpf_ktime_get_ns() - t0;
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
