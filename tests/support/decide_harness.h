/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * What tests/support/bpf/decide_harness.bpf.c reads and writes in its .bss,
 * shared with tests/support/BpfDecider.cpp (which writes and reads them
 * through the skeleton's mmapped .bss).
 */
#ifndef L7_TESTS_DECIDE_HARNESS_H
#define L7_TESTS_DECIDE_HARNESS_H

/* upstream picks per request: the decision's own, then DH_PICKS - 1 more
 * of l7_pick_pool on the route it chose */
#define DH_PICKS 4

struct dh_args {
	__u32 len;        /* request bytes in the harness's input */
	__u32 listener;   /* stable listener id of the client's connection */
	__u32 n_clusters; /* clusters whose round-robin counter is set before each pick */
	__u32 pad;
	__u64 rr[DH_PICKS]; /* that counter's value for pick i */
	/* what bpf_get_prandom_u32() returns in pick i: random[2i], then random[2i+1] */
	__u32 random[2 * DH_PICKS];
	/* what bpf_ktime_get_boot_ns() returns (the JWT cache's deadlines, the
	 * HS verifier's clock); 0: the kernel's own */
	__u64 now_ns;
	/* the client's address (l7_conn_key: family, client_ip) */
	__u32 client_ip[4];
	__u32 family;
	__u32 pad2;
};

struct dh_out {
	__u32 status;      /* 0: decided; else the harness could not run */
	__u32 kind;        /* enum l7_decision_kind */
	__u32 reason;      /* enum l7_reason of a hand-over */
	__u32 route_key;   /* gen * L7_MAX_ROUTES + route, once routed */
	__u32 route_flags;
	__u32 rbac_rule;   /* a denial the kernel answers: the deciding rule's
			    * position in its route; 0xffffffff: the default */
	__u32 pool[DH_PICKS]; /* pool of pick i; 0xffffffff: none */
	__u32 answer;      /* an answer (kind L7_D_ANSWER): enum l7_answer_kind */
	__u32 resp;        /* and its key in l7_responses */
	__u32 detail;      /* L7_ANS_BAD_TOKEN: L7_ANS_DETAIL_* */
	__u32 pad;
};

#endif
