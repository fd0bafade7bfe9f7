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
 * The key of a keyed rate limit for the request in s, into s->rk as
 * policy::request_key gives it (the bytes, zero after them): 1 when the
 * request has it; 0 when not (it takes from the limit's keyless bucket); -1
 * when the key is longer than the kernel keeps (the slow path's bucket).
 * A header key is the value of its first field line, as the parser left it
 * (the compiler made the name a match header; a request carrying it twice
 * never gets here, the matcher passes it); the source address is 4 bytes
 * for IPv4 and IPv4-mapped IPv6, else 16 (as hashpick.h's).
 */
static __always_inline int l7_rate_key_of(struct l7_scratch *s, const struct l7_route *r,
					  const struct l7_conn_key *ck)
{
	struct l7_rate_key *k = &s->rk;
	const struct l7_hdr *hd;
	struct l7_strscan c;
	__u16 hi;

	__builtin_memset(k, 0, sizeof(*k));
	if (r->rate_key == L7_RATE_KEY_SOURCE) {
		const __u32 *ip = ck->client_ip;

		if (ck->family == AF_INET) {
			k->word[0] = ip[0];
			k->len = 4;
		} else if (!ip[0] && !ip[1] && ip[2] == bpf_htonl(0xffff)) {
			k->word[0] = ip[3];
			k->len = 4;
		} else {
			k->word[0] = ip[0] | (__u64)ip[1] << 32;
			k->word[1] = ip[2] | (__u64)ip[3] << 32;
			k->len = 16;
		}
		return 1;
	}
	hi = s->hdr_val[r->rate_key & (L7_MAX_MATCH_HDRS - 1)];
	if (hi == L7_NONE || hi >= s->ws.msg.n_hdrs)
		return 0;
	hd = &s->ws.msg.hdr[L7_IDX(hi, L7_MAX_HEADERS - 1)];
	if (hd->val_len > L7_RATE_KEY_MAX)
		return -1;
	L7_ZERO(c);
	c.w.buf = s->ws.buf;
	c.w.len = s->ws.len;
	c.off = hd->val_off;
	c.len = hd->val_len;
#define L7_RK_WORD(i) \
	if ((i) * 8 < c.len) \
		k->word[i] = l7_str_word(&c, (i))
	L7_RK_WORD(0);
	L7_RK_WORD(1);
	L7_RK_WORD(2);
	L7_RK_WORD(3);
	L7_RK_WORD(4);
	L7_RK_WORD(5);
	L7_RK_WORD(6);
	L7_RK_WORD(7);
#undef L7_RK_WORD
	k->len = c.len;
	return 1;
}

_Static_assert(L7_RATE_KEY_MAX == 8 * 8, "l7_rate_key_of copies eight words");

/* l7_rate_key_take()'s answer when the table is gone or no entry could be
 * made (besides l7_bucket_decide()'s and L7_BUCKET_BUSY) */
#define L7_RATE_KEY_GONE (~0ULL - 2)

/*
 * One token from the bucket of key `k` (on the stack: kernels before 6.4
 * take no other memory as a map key) in the keyed table at
 * l7_rate_keys[b]; a key seen for the first time gets a fresh (full) one.
 */
static __always_inline __u64 l7_rate_key_take(const struct l7_rate_key *k, __u32 b, __u32 rate, __u32 burst)
{
	void *keys = bpf_map_lookup_elem(&l7_rate_keys, &b);
	__u64 *bucket, fresh = 0, wait;

	if (!keys)
		return L7_RATE_KEY_GONE;
	bucket = bpf_map_lookup_elem(keys, k);
	if (!bucket) {
		/* EEXIST: another CPU made it meanwhile, the lookup finds it */
		bpf_map_update_elem(keys, k, &fresh, BPF_NOEXIST);
		bucket = bpf_map_lookup_elem(keys, k);
		if (!bucket)
			return L7_RATE_KEY_GONE;
	}
	L7_BUCKET_TAKE_SHARED(bucket, bpf_ktime_get_ns(), rate, burst, L7_BUCKET_TRIES, wait);
	return wait;
}

/* l7_rate_key_take() for the key in s->rk (global: the key's stack copy is
 * in its own frame); `refund`: gives a token back instead (a key evicted
 * meanwhile is a fresh bucket and gets nothing). */
__noinline long l7_g_rate_key(struct l7_scratch *s, __u32 b, __u32 rate, __u32 burst, __u32 refund)
{
	struct l7_rate_key k;
	void *keys;
	__u64 *bucket;

	if (!s)
		return (long)L7_RATE_KEY_GONE;
	__builtin_memcpy(&k, &s->rk, sizeof(k));
	if (!refund)
		return (long)l7_rate_key_take(&k, b, rate, burst);
	keys = bpf_map_lookup_elem(&l7_rate_keys, &b);
	bucket = keys ? bpf_map_lookup_elem(keys, &k) : NULL;
	if (bucket)
		l7_bucket_refund(bucket);
	return 0;
}

/*
 * The request's token from its route's bucket, the one the daemon's slow
 * path takes from too (RateLimiter: mmapped, or l7_rate_take_user for a
 * key's). 0: taken (d->bucket says where, for l7_rate_refund); 1: no token,
 * d set to answer the 429 or to pass it (a request that asks to close, a
 * 429 the generation's answers had no room for); -1: pass (d->reason).
 */
static __always_inline int l7_rate_take(struct l7_scratch *s, const struct l7_route *r, __u32 gen,
					const struct l7_conn_key *ck)
{
	struct l7_decision *d = &s->dec;
	__u32 b = r->bucket;
	__u64 *bucket;
	__u64 wait;
	int keyed = 0;

	if (r->flags & L7_RF_RATE_KEYED) {
		keyed = l7_rate_key_of(s, r, ck);
		if (keyed < 0) {
			d->reason = L7_R_RATE_KEY;
			return -1;
		}
	}
	if (keyed) {
		wait = (__u64)l7_g_rate_key(s, b, r->rate, r->burst, 0);
	} else {
		bucket = bpf_map_lookup_elem(&l7_buckets, &b);
		if (!bucket) {
			d->reason = L7_R_ROUTE_USER;
			return -1;
		}
		L7_BUCKET_TAKE_SHARED(bucket, bpf_ktime_get_ns(), r->rate, r->burst, L7_BUCKET_TRIES, wait);
	}
	if (wait == L7_RATE_KEY_GONE) {
		d->reason = L7_R_RATE_KEY;
		return -1;
	}
	if (wait == L7_BUCKET_BUSY) {
		d->reason = L7_R_RATE_BUSY;
		return -1;
	}
	if (!wait) {
		d->bucket = b + 1;
		d->bucket_keyed = (__u32)keyed;
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
 * which takes its own: the kernel's goes back (bpf/include/l7_bucket.h).
 * A key's bucket evicted meanwhile is a fresh one: nothing to give back. */
static __always_inline void l7_rate_refund(struct l7_scratch *s)
{
	struct l7_decision *d = &s->dec;
	__u32 b = d->bucket - 1;
	__u64 *bucket;

	if (!d->bucket)
		return;
	d->bucket = 0;
	if (d->bucket_keyed) {
		l7_g_rate_key(s, b, 0, 0, 1);
		return;
	}
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
		if ((r->flags & L7_RF_RATE) && l7_rate_take(s, r, gen, &c->key))
			return 0;
		d->resp = gen * L7_MAX_RESPONSES + r->resp_direct;
		d->answer = L7_ANS_DIRECT;
		d->kind = L7_D_ANSWER;
		return 0;
	}
	/* the token first, as the slow path takes it: a request refused
	 * here never holds a pooled connection */
	if ((r->flags & L7_RF_RATE) && l7_rate_take(s, r, gen, &c->key))
		return 0;
	pool = l7_pick_pool(r, gen, s, &c->key);
	if (pool < 0) {
		d->reason = pool == L7_PICK_DOWN ? L7_R_ENDPOINT_DOWN : L7_R_POOL_MISS;
		l7_rate_refund(s);
		return 0;
	}
	d->pool = (__u32)pool;
	d->slot = l7_g_claim(s, c, (__u32)pool);
	if (d->slot == L7_NO_SLOT) {
		d->reason = L7_R_POOL_MISS;
		l7_rate_refund(s);
		return 0;
	}
	d->kind = L7_D_KERNEL;
	return 0;
}

/*
 * The slow path's take from a key's bucket of a keyed rate limit (l7fastd's
 * RateLimiter, by BPF_PROG_RUN; here, so that the tests' harness has it
 * too): the map operations a user-space caller cannot do as one step,
 * finding or creating the key's entry and taking from it with
 * compare-and-swap, as l7_rate_take does. Returns 0 with a->wait
 * set; -ENOMEM when the table is gone or no entry could be made.
 */
SEC("syscall")
int l7_rate_take_user(struct l7_rate_take_args *a)
{
	struct l7_rate_key key;

	__builtin_memcpy(&key, &a->key, sizeof(key));
	/* a lost race is another taker's token: the daemon asks again */
	a->wait = l7_rate_key_take(&key, a->bucket, a->rate, a->burst);
	return a->wait == L7_RATE_KEY_GONE ? -12 /* -ENOMEM */ : 0;
}

#endif /* L7_LIB_DECIDE_H */
