/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The request decision, shared by SK_MSG and SK_SKB (bpf/l7fast.bpf.c) and
 * run as it is by the tests' harness (tests/support/bpf/decide_harness.bpf.c):
 * parse the head in scratch, match a route, admit its JWT, apply its RBAC
 * rules, take its rate limit's token, then answer with the route's direct
 * response or pick the endpoint and claim a pooled connection to it. A
 * refusal the kernel holds the bytes of (a 401 for no token or an empty or
 * too large one, an RBAC denial, a 429) is answered too.
 */
#ifndef L7_LIB_DECIDE_H
#define L7_LIB_DECIDE_H

#include "l7_http.h"
#include "conn.h"
#include "match.h"
#include "rbac.h"
#include "select.h"
#include "l7_jwtcache.h"
#include "l7_bucket.h"

enum l7_decision_kind {
	L7_D_KERNEL = 0,    /* forward on the slot */
	L7_D_PASS = 1,      /* to the slow path (the reason says why) */
	L7_D_ANSWER = 2,    /* the route answers itself: l7_responses[resp] */
};

/*
 * Global (non-static) subprograms are verified once, on their own, instead of
 * at every call site: the parser, the matcher and the decision are most of
 * the instructions. They must not change packet data (kernels before 6.12
 * cannot track that through global calls), so the programs copy bytes into
 * scratch first.
 */
__noinline int l7_g_parse(struct l7_scratch *s, __u32 len, __u32 is_request)
{
	if (!s)
		return L7_P_ERROR;
	s->ws.len = len > L7_SCRATCH_SIZE ? L7_SCRATCH_SIZE : len;
	return l7_parse_head(&s->ws, is_request);
}

__noinline int l7_g_match(struct l7_scratch *s, struct l7_config *cfg, __u32 gen,
			  __u32 listener_id)
{
	if (!s || !cfg)
		return -1;
	return l7_match_route(s, cfg, gen & 1, listener_id);
}

/*
 * The request's token from its route's bucket, the one the daemon's slow
 * path takes from too (RateLimiter, mmapped). 0: taken (d->bucket says
 * where, for l7_rate_refund); 1: no token, d set to answer the 429 or to
 * pass it (a request that asks to close, a 429 the generation's answers
 * had no room for); -1: pass (d->reason).
 */
static __always_inline int l7_rate_take(struct l7_decision *d, const struct l7_route *r, __u32 gen)
{
	__u32 b = r->bucket;
	__u64 *bucket = bpf_map_lookup_elem(&l7_buckets, &b);
	__u64 wait;

	if (!bucket) {
		d->reason = L7_R_ROUTE_USER;
		return -1;
	}
	L7_BUCKET_TAKE_SHARED(bucket, bpf_ktime_get_ns(), r->rate, r->burst, L7_BUCKET_TRIES, wait);
	if (wait == L7_BUCKET_BUSY) {
		d->reason = L7_R_RATE_BUSY;
		return -1;
	}
	if (!wait) {
		d->bucket = b + 1;
		return 0;
	}
	d->reason = L7_R_RATE_LIMITED;
	/* the 429 to a request that asks to close says so, and a 429 the
	 * generation's answers had no room for: the slow path's */
	if (d->close || r->resp_limited >= L7_MAX_RESPONSES)
		return 1;
	d->resp = gen * L7_MAX_RESPONSES + r->resp_limited;
	d->answer = L7_ANS_LIMITED;
	d->kind = L7_D_ANSWER;
	return 1;
}

/* A request the kernel took a token for goes to the slow path after all,
 * which takes its own: the kernel's goes back (bpf/include/l7_bucket.h). */
static __always_inline void l7_rate_refund(struct l7_decision *d)
{
	__u32 b = d->bucket - 1;
	__u64 *bucket;

	if (!d->bucket)
		return;
	d->bucket = 0;
	bucket = bpf_map_lookup_elem(&l7_buckets, &b);
	if (bucket)
		l7_bucket_refund(bucket);
}

/* Parses the request in scratch and decides where it goes (s->dec). */
__noinline int l7_g_decide(struct l7_scratch *s, __u32 n, struct l7_conn *c,
			   struct l7_config *cfg)
{
	struct l7_decision *d;
	struct l7_route *r;
	struct l7_msg *m;
	__u32 gen, rk;
	long pool;
	int r_idx, st, v;

	if (!s || !c || !cfg)
		return -1;
	d = &s->dec;
	m = &s->ws.msg;
	__builtin_memset(d, 0, sizeof(*d));
	d->kind = L7_D_PASS;
	d->pool = L7_NO_POOL;
	st = l7_g_parse(s, n, 1);
	if (st == L7_P_MORE) {
		d->reason = n >= L7_SCRATCH_SIZE ? L7_R_TOO_BIG : L7_R_INCOMPLETE;
		return 0;
	}
	if (st != L7_P_OK) {
		d->reason = L7_R_PARSE;
		return 0;
	}
	d->head_len = m->hdr_len;
	d->body_kind = m->body_kind;
	d->cl = m->content_length;
	d->req_head = m->method == L7_M_HEAD;
	d->close = !!(m->flags & L7_MF_CLOSE);
	/* chunked bodies have no length to pass the request by */
	if ((m->flags & (L7_MF_UPGRADE | L7_MF_EXPECT_OTHER)) || m->method == L7_M_CONNECT ||
	    m->body_kind == L7_BODY_CHUNKED || m->content_length > (1ULL << 30)) {
		d->reason = L7_R_UNSUPPORTED;
		return 0;
	}
	d->total = m->hdr_len + (m->body_kind == L7_BODY_LENGTH ? m->content_length : 0);
	/* Bulk uploads stream through the slow path, which has back-pressure:
	 * socket-to-socket ingress has none, and a redirect to another socket's
	 * egress can be cut short by a non-blocking sender, after which the
	 * sender re-sends bytes this program already accounted for. */
	if (d->total > cfg->ingress_budget) {
		d->reason = L7_R_TOO_BIG;
		return 0;
	}
	/* host conditions match Host, which an absolute-form target overrides
	 * (RFC 9112 3.2.2): the slow path routes it by the authority */
	if (m->flags & L7_MF_ABSOLUTE_FORM) {
		d->reason = L7_R_ABSOLUTE_FORM;
		return 0;
	}
	/* the tables match raw bytes: only a normal-form path is matched here */
	if (m->flags & L7_MF_PATH_NOT_NORMAL) {
		d->reason = L7_R_PATH;
		return 0;
	}
	gen = cfg->active_gen & 1;
	r_idx = l7_g_match(s, cfg, gen, c->listener_id);
	if (r_idx == -2) {
		d->reason = L7_R_UNSUPPORTED;
		return 0;
	}
	if (r_idx < 0 || r_idx >= L7_MAX_ROUTES) {
		d->reason = L7_R_NO_ROUTE;
		return 0;
	}
	rk = gen * L7_MAX_ROUTES + (__u32)r_idx;
	r = bpf_map_lookup_elem(&l7_routes, &rk);
	if (!r || !(r->flags & L7_RF_VALID)) {
		d->reason = L7_R_NO_ROUTE;
		return 0;
	}
	d->stats_id = r->stats_id;
	d->route_key = rk;
	d->route_flags = r->flags;
	if (!(r->flags & L7_RF_KERNEL)) {
		d->reason = L7_R_ROUTE_USER;
		return 0;
	}
	if (r->flags & L7_RF_JWT) {
		st = l7_g_jwt_admit(s, cfg, gen, r->jwt_provider);
		/* not cached, or past its cached deadline: the kernel verifies
		 * HS tokens itself where it can (L7_R_JWT_MISS: it cannot
		 * here), and caches the ones it admits */
		if (st == L7_R_JWT_MISS || st == L7_R_JWT_EXPIRED) {
			v = l7_g_jwt_verify(s, cfg, gen, r->jwt_provider, s->jwt.tok);
			if (v != L7_R_JWT_MISS)
				st = v;
			if (st == L7_R_NONE)
				l7_g_jwt_remember(s, cfg, gen, r->jwt_provider, s->jwt.tok);
		}
		if (st != L7_R_NONE) {
			d->reason = (__u32)st;
			/* a refusal the kernel sends, as for RBAC denials below */
			if ((st != L7_R_JWT_NONE && st != L7_R_JWT_BAD) || d->close)
				return 0;
			d->answer = st == L7_R_JWT_NONE ? L7_ANS_NO_TOKEN : L7_ANS_BAD_TOKEN;
			d->resp = st == L7_R_JWT_NONE ? r->resp_no_token : r->resp_bad_token;
			if (d->resp >= L7_MAX_RESPONSES)
				return 0;
			d->resp += gen * L7_MAX_RESPONSES;
			d->kind = L7_D_ANSWER;
			return 0;
		}
	}
	if (r->flags & L7_RF_RBAC) {
		st = l7_g_rbac(s, cfg, gen, r->flags, r->rule_first | ((__u32)r->rule_count << 16));
		if (st != 1) {
			d->reason = L7_R_RBAC_DENY;
			/* undecidable, a request that asks to close (its answer
			 * says so and the connection ends) or a denial the
			 * kernel does not hold: the slow path sends it */
			if (st != 0 || d->close || r->resp_deny >= L7_MAX_RESPONSES)
				return 0;
			d->resp = gen * L7_MAX_RESPONSES + r->resp_deny;
			d->answer = L7_ANS_DENY;
			d->rbac_rule = s->ms.deny_bit < L7_MAX_RULES ? gen * L7_MAX_RULES + s->ms.deny_bit
								     : L7_NO_RULE;
			d->kind = L7_D_ANSWER;
			return 0;
		}
	}
	if (r->flags & L7_RF_DIRECT) {
		/* the answer to a request that asks to close says so, and the
		 * connection ends: the slow path sends that one
		 * (ClientSession::answer_for_policy) */
		if (d->close) {
			d->reason = L7_R_ANSWER_CLOSE;
			return 0;
		}
		if (r->resp_direct >= L7_MAX_RESPONSES) {
			d->reason = L7_R_ROUTE_USER;
			return 0;
		}
		if ((r->flags & L7_RF_RATE) && l7_rate_take(d, r, gen))
			return 0;
		d->resp = gen * L7_MAX_RESPONSES + r->resp_direct;
		d->answer = L7_ANS_DIRECT;
		d->kind = L7_D_ANSWER;
		return 0;
	}
	/* the token first, as the slow path takes it: a request refused
	 * here never holds a pooled connection */
	if ((r->flags & L7_RF_RATE) && l7_rate_take(d, r, gen))
		return 0;
	pool = l7_pick_pool(r, gen, s, &c->key);
	if (pool < 0) {
		d->reason = pool == L7_PICK_DOWN ? L7_R_ENDPOINT_DOWN : L7_R_POOL_MISS;
		l7_rate_refund(d);
		return 0;
	}
	d->pool = (__u32)pool;
	d->slot = l7_g_claim(s, c, (__u32)pool);
	if (d->slot == L7_NO_SLOT) {
		d->reason = L7_R_POOL_MISS;
		l7_rate_refund(d);
		return 0;
	}
	d->kind = L7_D_KERNEL;
	return 0;
}

#endif /* L7_LIB_DECIDE_H */
