// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * The data plane's request decision exactly as l7fast.bpf.c compiles it
 * (bpf/lib/decide.h: the parser, match.h, rbac.h, the JWT admission and
 * select.h), verified and run by this kernel on one request per
 * bpf_prog_test_run (tests/support/BpfDecider.cpp). The maps are this
 * object's own copies of bpf/include/l7_maps.h's, filled by the daemon's
 * own table writer (dataplane/Tables.cpp, what Dataplane::stage runs).
 *
 * Three things come from the test instead of the kernel, so that the slow
 * path's reference can be asked the same question: the random draws
 * (bpf_get_prandom_u32 is redirected to args.random), the round-robin
 * counters (set to args.rr before each pick) and, when args.now_ns is set,
 * the clock (bpf_ktime_get_boot_ns: the HS verifier's claims). With
 * weak_hash set at load time, string conditions are hashed by the tests'
 * colliding hash (the policy compiler is given the same one), to exercise
 * the exact comparison behind every hash hit. With cfg_kfuncs set (where
 * l7fast.ko is loaded: tests/kernel), the HS verifier calls its kfuncs.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "l7_http.h"
#include "decide_harness.h"

const volatile __u32 weak_hash = 0;

struct dh_args args;
struct dh_out out;
__u8 input[L7_SCRATCH_SIZE];
struct l7_conn conn;
__u32 draw_next;

static __always_inline __u32 dh_random(void)
{
	__u32 i = draw_next++;

	return args.random[i & (2 * DH_PICKS - 1)];
}
#define bpf_get_prandom_u32 dh_random

static __always_inline __u64 dh_now(void)
{
	return args.now_ns ? args.now_ns : bpf_ktime_get_boot_ns();
}
#define bpf_ktime_get_boot_ns dh_now

/* the tests' colliding hash: len % 3 plus the number of odd bytes
 * (CompilerDifferential's `weak`; lower-casing keeps a byte's parity) */
struct dh_weak {
	const struct l7_window *w;
	__u32 off;
	__u32 len;
	__u64 h;
};

static long dh_weak_cb(__u32 i, void *ctx)
{
	struct dh_weak *x = ctx;

	if (i >= x->len)
		return 1;
	x->h += x->w->buf[L7_IDX(x->off + i, L7_WS_MASK)] & 1;
	return 0;
}

static __always_inline __u64 dh_hash_window(const struct l7_window *w, __u32 off, __u32 len, __u64 seed,
					    int lower)
{
	struct dh_weak x = { .w = w, .off = off, .len = len, .h = len % 3 };

	if (!weak_hash)
		return l7_hash_window(w, off, len, seed, lower);
	bpf_loop(L7_MAX_MATCH_STR, dh_weak_cb, &x, 0);
	return x.h;
}
#define l7_hash_window dh_hash_window

#include "l7_maps.h"
#include "lib/decide.h"

static __always_inline void dh_set_rr(__u32 gen, __u64 rr)
{
	__u32 i;

	for (i = 0; i < L7_MAX_CLUSTERS; i++) {
		__u32 k = gen * L7_MAX_CLUSTERS + i;
		__u64 *v;

		if (i >= args.n_clusters)
			break;
		v = bpf_map_lookup_elem(&l7_rr, &k);
		if (v)
			*v = rr;
	}
}

SEC("syscall")
int decide(void *ctx)
{
	struct l7_config *cfg = l7_cfg();
	struct l7_scratch *s;
	struct l7_route *r;
	__u32 len = args.len, gen, i, rk;
	long pool;

	out.status = 1;
	if (!cfg)
		return 0;
	s = l7_scratch_get();
	if (!s)
		return 0;
	out.status = 2;
	if (len > L7_SCRATCH_SIZE)
		len = L7_SCRATCH_SIZE;
	if (bpf_probe_read_kernel(s->ws.buf, len, input))
		goto done;
	gen = cfg->active_gen & 1;
	__builtin_memset(&conn, 0, sizeof(conn));
	conn.state = L7_CONN_USED;
	conn.listener_id = args.listener;
	conn.last_slot = L7_NO_SLOT;
	conn.key.family = (__u16)args.family;
	for (i = 0; i < 4; i++)
		conn.key.client_ip[i] = args.client_ip[i];

	dh_set_rr(gen, args.rr[0]);
	draw_next = 0;
	l7_g_decide(s, len, &conn, cfg);
	out.kind = s->dec.kind;
	out.reason = s->dec.reason;
	out.answer = s->dec.answer;
	out.resp = s->dec.resp;
	out.detail = s->dec.detail;
	out.route_key = s->dec.route_key;
	out.route_flags = s->dec.route_flags;
	out.pool[0] = s->dec.pool;
	rk = s->dec.route_key;
	out.rbac_rule = L7_NO_RULE;
	if (s->dec.kind == L7_D_ANSWER && s->dec.answer == L7_ANS_DENY && s->dec.rbac_rule != L7_NO_RULE) {
		r = bpf_map_lookup_elem(&l7_routes, &rk);
		if (r)
			out.rbac_rule = s->dec.rbac_rule % L7_MAX_RULES - r->rule_first;
	}
	for (i = 1; i < DH_PICKS; i++) {
		out.pool[i] = L7_NO_POOL;
		if (s->dec.pool == L7_NO_POOL)
			continue;
		r = bpf_map_lookup_elem(&l7_routes, &rk);
		if (!r)
			continue;
		dh_set_rr(gen, args.rr[i]);
		draw_next = 2 * i;
		pool = l7_pick_pool(r, gen, s, &conn.key);
		if (pool >= 0)
			out.pool[i] = (__u32)pool;
	}
	out.status = 0;
done:
	l7_scratch_put(s);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
