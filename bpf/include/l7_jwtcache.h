/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * JWT admission from the verified-token cache (ARCHITECTURE.md §3, "JWT
 * routes"). The slow path verifies a
 * token with the reference verifier (daemon/src/auth/Jwt.*) and stores the
 * token's exact bytes here; the kernel admits a later request of a route of
 * the same provider and generation only when its token equals a stored one
 * byte for byte (the keyed hash only finds the entry) and the entry's
 * deadlines, in bpf_ktime_get_boot_ns() time, hold, and only under the
 * l7_config.cache_tag it was stored with. A request without a
 * token, and one whose token is empty or too large, are refused as the
 * reference's extract_token() refuses them (decide.h answers the 401 for
 * local clients). A miss goes to the kernel's own HS verifier where
 * l7fast.ko is there (l7_jwtverify.h). Everything else (a miss it does not
 * decide, an expired entry, an odd shape)
 * goes to the slow path, which answers 401 or verifies, stores and
 * forwards.
 *
 * Included by bpf/l7fast.bpf.c after lib/match.h: the token is the value of
 * the provider's match header, which the matcher located (s->hdr_val).
 */
#ifndef L7_JWTCACHE_H
#define L7_JWTCACHE_H

#include "lib/conn.h"

#define L7_JWT_WORDS (L7_JWT_MAX_TOKEN / 8)

/* Window bytes [off, off + len) against a stored copy `ref`, a word per
 * bpf_loop step (the branches stay in the callback); diff set when they
 * differ. One callback per bound on the copy's size. */
struct l7_jwt_cmp {
	struct l7_window w;
	const __u8 *ref;
	__u32 off;
	__u32 len;
	__u32 diff;
	__u32 pad;
};

#define L7_JWT_EQ_CB(name, words)                                          \
	L7_CALLBACK long name(__u32 i, void *ctx)                          \
	{                                                                  \
		struct l7_jwt_cmp *c = ctx;                                \
		__u64 x, y;                                                \
                                                                           \
		if (i >= (words) || i * 8 >= c->len)                       \
			return 1;                                          \
		x = l7_load64(&c->w, c->off + i * 8, 0);                   \
		y = *(const __u64 *)(c->ref + i * 8);                      \
		if (c->len - i * 8 < 8) {                                  \
			x = l7_low_bytes(x, c->len - i * 8);               \
			y = l7_low_bytes(y, c->len - i * 8);               \
		}                                                          \
		if (x != y) {                                              \
			c->diff = 1;                                       \
			return 1;                                          \
		}                                                          \
		return 0;                                                  \
	}

/* a cached token (struct l7_jwt_entry.token) */
L7_JWT_EQ_CB(l7_jwt_eq_cb, L7_JWT_WORDS)

#include "l7_jwtverify.h"

/* The provider's scheme prefix (<= 16 bytes, stored lower-cased) equals the
 * window at off, ASCII case-insensitively, as the reference compares it. */
static __always_inline int l7_jwt_prefix_eq(const struct l7_window *w, __u32 off,
					    const struct l7_jwt_provider *p)
{
	__u32 n = p->prefix_len;
	__u64 x, y;

	if (!n)
		return 1;
	x = l7_lower64(l7_load64(w, off, 0));
	y = *(const __u64 *)p->prefix;
	if (n < 8) {
		x = l7_low_bytes(x, n);
		y = l7_low_bytes(y, n);
	}
	if (x != y)
		return 0;
	if (n <= 8)
		return 1;
	x = l7_lower64(l7_load64(w, off + 8, 0));
	y = *(const __u64 *)(p->prefix + 8);
	if (n < 16) {
		x = l7_low_bytes(x, n - 8);
		y = l7_low_bytes(y, n - 8);
	}
	return x == y;
}

/*
 * Whether the parsed request in scratch carries a token of `provider` that
 * the cache admits in generation `gen`: L7_R_NONE if so; L7_R_JWT_MISS (not
 * in the cache: s->jwt.tok says where the token is, for l7_g_jwt_verify);
 * L7_R_JWT_NONE (no
 * token) and L7_R_JWT_BAD (an empty or too large one) when the reference
 * refuses it with a 401 the kernel can send; else the reason to hand the
 * request to the slow path. Global: verified once, on its own.
 */
__noinline int l7_g_jwt_admit(struct l7_scratch *s, struct l7_config *cfg, __u32 gen,
			      __u32 provider)
{
	struct l7_jwt_provider *p;
	struct l7_jwt_entry *e;
	struct l7_jwt_key k;
	struct l7_strscan hs;
	struct l7_jwt_cmp c;
	struct l7_window w;
	const struct l7_hdr *h;
	__u32 pk, hi, slot, off, len;
	__u64 now;

	if (!s || !cfg || provider >= L7_MAX_JWT_PROVIDERS)
		return L7_R_JWT_OTHER;
	gen &= 1;
	pk = gen * L7_MAX_JWT_PROVIDERS + provider;
	p = bpf_map_lookup_elem(&l7_jwt_providers, &pk);
	if (!p || !p->max_token || p->prefix_len > sizeof(p->prefix))
		return L7_R_JWT_OTHER;
	/* hdr_val is only reset when the generation has match headers; the
	 * provider's header is one of them */
	slot = p->hdr;
	if (slot >= L7_MAX_MATCH_HDRS || slot >= cfg->meta[gen].n_match_hdrs)
		return L7_R_JWT_OTHER;
	hi = s->hdr_val[L7_IDX(slot, L7_MAX_MATCH_HDRS - 1)];
	if (hi == L7_NONE)
		return L7_R_JWT_NONE;
	if (hi >= L7_MAX_HEADERS || hi >= s->ws.msg.n_hdrs)
		return L7_R_JWT_OTHER;
	h = &s->ws.msg.hdr[L7_IDX(hi, L7_MAX_HEADERS - 1)];
	w.buf = s->ws.buf;
	w.len = s->ws.len;
	w.pad = 0;
	/* Another scheme is no token (Reason::BadScheme); the scheme alone,
	 * "Bearer", is a malformed one (Reason::Malformed), which only a value
	 * no longer than the prefix can be: the parser trimmed the value, so
	 * the reference's trim() leaves it as it is. */
	if (h->val_len < p->prefix_len || !l7_jwt_prefix_eq(&w, h->val_off, p))
		return h->val_len > p->prefix_len ? L7_R_JWT_NONE : L7_R_JWT_OTHER;
	off = (__u32)h->val_off + p->prefix_len;
	len = (__u32)h->val_len - p->prefix_len;
	if (off + len > w.len)
		return L7_R_JWT_OTHER;
	/* nothing after the prefix (Reason::Malformed); more spaces after the
	 * scheme: the reference skips them, which is its business */
	if (!len) {
		s->dec.detail = L7_ANS_DETAIL_EMPTY;
		return L7_R_JWT_BAD;
	}
	if (l7_at(&w, off) == ' ' || l7_at(&w, off) == '\t')
		return L7_R_JWT_OTHER;
	/* longer than the provider takes (Reason::TooLarge), or than the
	 * cache holds */
	if (len > p->max_bytes) {
		s->dec.detail = L7_ANS_DETAIL_TOO_LARGE;
		return L7_R_JWT_BAD;
	}
	if (len > p->max_token || len > L7_JWT_MAX_TOKEN)
		return L7_R_JWT_OTHER;

	L7_ZERO(hs);
	hs.w = w;
	hs.h = l7_hash_init(cfg->meta[gen].seed);
	hs.off = off;
	hs.len = len;
	L7_LOOP(L7_JWT_WORDS, l7_hash_cb, &hs);
	L7_ZERO(k);
	k.hash = l7_hash_final(hs.h, len);
	k.gen = (__u16)gen;
	k.provider = (__u16)provider;
	k.len = len;
	e = bpf_map_lookup_elem(&l7_jwt_cache, &k);
	if (!e || e->token_len != len)
		goto miss;
	L7_ZERO(c);
	c.w = w;
	c.ref = e->token;
	c.off = off;
	c.len = len;
	L7_LOOP(L7_JWT_WORDS, l7_jwt_eq_cb, &c);
	if (c.diff)
		goto miss;
	/* verified under other keys or another policy (stored late) */
	if (e->tag != READ_ONCE(cfg->cache_tag))
		goto miss;
	now = bpf_ktime_get_boot_ns();
	if ((e->exp_ns && now >= e->exp_ns) || now < e->nbf_ns) {
		/* where it can, the kernel's verifier judges it afresh */
		s->jwt.tok = off | len << 16;
		s->jwt.tok_hash = k.hash;
		return L7_R_JWT_EXPIRED;
	}
	return L7_R_NONE;
miss:
	/* for l7_g_jwt_verify, which the decision calls next (not from here:
	 * the call chain's stack is bounded), and l7_g_jwt_remember */
	s->jwt.tok = off | len << 16;
	s->jwt.tok_hash = k.hash;
	return L7_R_JWT_MISS;
}

#endif /* L7_JWTCACHE_H */
