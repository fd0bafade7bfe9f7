/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * HS256/384/512 JWTs verified in the kernel with l7fast.ko's kfuncs
 * (ARCHITECTURE.md §3, "JWT verified in the kernel"), for a token the
 * verified-token cache does not hold. The reference is auth::Verifier
 * (daemon/src/auth/Jwt.cpp); this code decides only what it can decide
 * exactly as the reference does, and hands everything else to the slow
 * path under a reason:
 *
 *  - three parts, else 401 malformed (the reference's first check after
 *    the size);
 *  - the header: a segment the daemon recognised with the reference
 *    (l7_jwt_headers: alg an HMAC the provider accepts, every key of that
 *    kid and alg in the module, of the current key epoch). Any other header is
 *    decoded and scanned (l7_g_jwt_header, l7_jwt_judge_header): not
 *    base64url, no JSON object, an alg, kid or typ that is not a string, a
 *    typ the reference refuses, crit: 401 malformed; an alg the provider
 *    does not accept: 401 alg_not_allowed; then its kid is looked up in
 *    l7_jwt_kids: the keys to try (L7_JK_VERIFY), no key of that alg
 *    (alg_mismatch), or not there while the map holds every kid of the
 *    provider (unknown_kid), each a 401 after the parts are decoded, as in
 *    the reference. A header outside the scan's subset (an escape, nesting,
 *    a duplicate), a kid the slow path verifies (RS256, ES256, a key the
 *    module lacks) or an entry of another key epoch is L7_R_JWT_HEADER;
 *  - the signature and the payload decoded (l7f_b64url_decode, no
 *    padding): either not canonical base64url is 401 malformed, a
 *    signature of another length than the MAC's 401 bad_signature, as in
 *    the reference (one longer than any MAC is decoded where the payload
 *    goes next: only its form matters);
 *  - the MAC by l7f_hmac_verify (constant time) with every key of the
 *    header's kid and alg; none matches: 401 bad_signature. A module error
 *    (a key gone) or a key epoch that changed meanwhile: L7_R_JWT_MODULE;
 *    an empty payload then is 401 malformed;
 *  - the payload scanned once: a flat JSON object whose values are strings
 *    without escapes, control or non-ASCII bytes, integers, literals, or
 *    arrays of those; names without escapes, at most L7_JWT_MAX_MEMBERS,
 *    none twice (by a 64-bit hash: equal hashes bail); exp and nbf
 *    non-negative integers of at most 11 digits. Anything else (nested
 *    objects, fractions, escapes, a duplicate) is L7_R_JWT_SHAPE;
 *  - the claims in the reference's order: missing_exp, expired,
 *    not_yet_valid, bad_issuer, bad_audience, each a 401 the kernel sends;
 *    wall-clock time is bpf_ktime_get_boot_ns() + l7_config.wall_off_ns.
 *
 * cfg_kfuncs is set at load time when socket programs can call the module
 * here (l7fast_probe_socket_kfuncs); without it every kfunc call below is
 * dead code the verifier drops, so one object loads on every kernel.
 * Included by l7_jwtcache.h.
 */
#ifndef L7_JWTVERIFY_H
#define L7_JWTVERIFY_H

#include "l7fast_kfuncs.h"

const volatile __u32 cfg_kfuncs = 0;

#ifndef EBADMSG
#define EBADMSG 74
#endif
#ifndef EINVAL
#define EINVAL 22
#endif

#define L7_JWT_MAX_SIG 86 /* base64url of a 64-byte MAC, unpadded: the longest s->jwt.mac takes */

struct l7_jwt_dots {
	struct l7_window w;
	struct l7_jwt_work *wk;
	__u32 off;
	__u32 len;
};

/* The token's dots, a word at a time: n (stops at 3), the first two. */
L7_CALLBACK long l7_jwt_dots_cb(__u32 i, void *ctx)
{
	struct l7_jwt_dots *c = ctx;
	__u64 x, y, t;
	__u32 j, left;

	if (i >= L7_JWT_WORDS || i * 8 >= c->len)
		return 1;
	x = l7_load64(&c->w, c->off + i * 8, 0);
	left = c->len - i * 8;
	if (left < 8)
		x = l7_low_bytes(x, left);
	/* exact: a byte of y is zero iff that byte of x is '.' */
	y = x ^ (L7_ONES * '.');
	t = ((y & (L7_ONES * 0x7f)) + L7_ONES * 0x7f) | y;
	if ((~t & L7_HIGHS) == 0)
		return 0;
	L7_UNROLL for (j = 0; j < 8; j++) {
		if (((x >> (8 * j)) & 0xff) != '.' || j >= left)
			continue;
		c->wk->n_dots++;
		if (c->wk->n_dots == 1)
			c->wk->d1 = i * 8 + j;
		else if (c->wk->n_dots == 2)
			c->wk->d2 = i * 8 + j;
	}
	return c->wk->n_dots > 2;
}

/* a header entry's segment (struct l7_jwt_hdr.seg) */
L7_JWT_EQ_CB(l7_jwt_seg_cb, L7_JWT_MAX_HDR / 8)

/* Window bytes from off as kfunc memory: the masked offset plus any length
 * up to L7_JWT_MAX_TOKEN stays inside the scratch entry (l7_scratch.h puts
 * the JWT work area after the window); callers pass only lengths within
 * the window's valid bytes. */
#define L7_JWT_WIN_PTR(s, off) ((s)->ws.buf + L7_IDX((off), L7_WS_MASK))

/*
 * Whether a key of s->jwt.keys (the header's kid and alg) verifies the MAC
 * in s->jwt.mac over window bytes [off, off + n) (the signing input): 1
 * yes, 0 none of them (every key tried, as the reference does), -1 an
 * l7fast.ko error (a key gone). Global: verified once, whatever its
 * caller's state.
 */
__noinline int l7_g_jwt_mac(struct l7_scratch *s, __u32 off, __u32 n)
{
	__u32 ml, n_keys, j;
	int v, ok = 0, err = 0;
	__u8 *src;

	if (!cfg_kfuncs || !s)
		return -1;
	ml = s->jwt.keys.mac_len;
	n_keys = s->jwt.keys.n_keys;
	if (ml > sizeof(s->jwt.mac) || n_keys > L7_JWT_HDR_KEYS || n > L7_JWT_MAX_TOKEN || off + n > s->ws.len)
		return -1;
	src = L7_JWT_WIN_PTR(s, off);
	L7_UNROLL for (j = 0; j < L7_JWT_HDR_KEYS; j++) {
		if (j < n_keys && !ok && !err) {
			v = l7f_hmac_verify(s->jwt.keys.key_id[j], src, n, s->jwt.mac, ml);
			if (v == 0)
				ok = 1;
			else if (v != -EBADMSG)
				err = 1;
		}
	}
	return err ? -1 : ok;
}

/* s->jwt.kv besides L7_JK_VERIFY and L7_JK_MISMATCH: a kid none of the
 * provider's keys has (Reason::UnknownKid) */
#define L7_JWT_KID_UNKNOWN 3

/*
 * A header segment l7_jwt_headers does not hold, at window bytes seg (off
 * | len << 16): decoded and scanned (l7_jwt_judge_header), its kid looked
 * up in l7_jwt_kids. Returns L7_R_JWT_BAD with s->dec.detail (the
 * reference refuses the header itself: malformed, alg_not_allowed),
 * L7_R_NONE with s->jwt.kv (and for L7_JK_VERIFY s->jwt.keys, of key epoch
 * s->jwt.epoch) for what the reference decides after decoding the other
 * parts, or L7_R_JWT_HEADER when the kernel cannot say: a header outside
 * the scan's subset, a kid the slow path verifies (RS256, ES256, a key the
 * module lacks), or a kid not found while the map does not hold every kid
 * of this key epoch. Uses s->jwt.payload. Global: verified once.
 */
__noinline int l7_g_jwt_header(struct l7_scratch *s, struct l7_config *cfg, __u32 gen, __u32 provider, __u32 seg)
{
	__u32 off = seg & 0xffff, len = seg >> 16, kid_off, kid_len, epoch, pk, sk, a = 0, detail = 0, v, i;
	const struct l7_jwt_provider *p;
	const struct l7_jwt_keyset *ks;
	const struct l7_jwt_kid *e;
	struct l7_jwt_kid_key *kk;
	struct l7_scratch *sv;
	int r = 0;

	if (!cfg_kfuncs || !s || !cfg || provider >= L7_MAX_JWT_PROVIDERS)
		return L7_R_JWT_HEADER;
	if (len > L7_JWT_MAX_TOKEN || off + len > s->ws.len)
		return L7_R_JWT_HEADER;
	gen &= 1;
	pk = gen * L7_MAX_JWT_PROVIDERS + provider;
	p = bpf_map_lookup_elem(&l7_jwt_providers, &pk);
	if (!p)
		return L7_R_JWT_HEADER;
	/* the reference decodes the header first: not canonical base64url is Malformed */
	if (len) {
		r = l7f_b64url_decode(L7_JWT_WIN_PTR(s, off), len, s->jwt.payload, L7_JWT_PAYLOAD_BUF,
				      L7F_B64_PAD_FORBIDDEN);
		if (r == -EINVAL) {
			s->dec.detail = L7_ANS_DETAIL_MALFORMED;
			return L7_R_JWT_BAD;
		}
		if (r < 0 || r > L7_JWT_PAYLOAD_BUF)
			return L7_R_JWT_HEADER;
	}
	switch (l7_jwt_judge_header(&s->jwt, (__u32)r, p->algs, &a, &detail)) {
	case L7_JV_OK:
		break;
	case L7_JV_REJECT:
		s->dec.detail = detail;
		return L7_R_JWT_BAD;
	default:
		return L7_R_JWT_HEADER;
	}

	/* the kid, looked up by its bytes (map memory as the key: kernels
	 * before 6.4 take no global function's argument memory there) */
	kid_off = s->jwt.sc.hs_off[1];
	kid_len = s->jwt.sc.hs_len[1];
	epoch = READ_ONCE(cfg->key_epoch);
	sk = (__u32)s->self;
	sv = bpf_map_lookup_elem(&l7_scratch, &sk);
	if (!sv)
		return L7_R_JWT_HEADER;
	kk = &sv->jwt.kk;
	__builtin_memset(kk, 0, sizeof(*kk));
	kk->gen = (__u16)gen;
	kk->provider = (__u16)provider;
	if (kid_len <= L7_JWT_MAX_KID) {
		kk->len = (__u16)kid_len;
		L7_UNROLL for (i = 0; i < L7_JWT_MAX_KID / 8; i++)
			if (i * 8 < kid_len)
				kk->word[i] = l7_jwt_word(&s->jwt, kid_off + i * 8, kid_len - i * 8 < 8 ? kid_len - i * 8 : 8);
		e = bpf_map_lookup_elem(&l7_jwt_kids, kk);
		if (e) {
			if (e->epoch != epoch || a >= L7_JA_N)
				return L7_R_JWT_HEADER;
			/* verdict[] and its padding are 8 bytes: the mask keeps the
			 * verifier in bounds, a < L7_JA_N keeps it in verdict[] */
			v = e->verdict[L7_IDX(a, 7)];
			if (v == L7_JK_MISMATCH) {
				s->jwt.kv = L7_JK_MISMATCH;
				return L7_R_NONE;
			}
			if (v != L7_JK_VERIFY || a > L7_JA_HS512)
				return L7_R_JWT_HEADER;
			ks = a == L7_JA_HS256 ? &e->hs[0] : a == L7_JA_HS384 ? &e->hs[1] : &e->hs[2];
			s->jwt.keys = *ks;
			s->jwt.epoch = epoch;
			s->jwt.kv = L7_JK_VERIFY;
			return L7_R_NONE;
		}
	}
	/* not found: unknown, when the map holds every kid of the provider
	 * (the entry of length L7_JWT_KIDS_ALL, written last, of this epoch) */
	__builtin_memset(kk, 0, sizeof(*kk));
	kk->gen = (__u16)gen;
	kk->provider = (__u16)provider;
	kk->len = L7_JWT_KIDS_ALL;
	e = bpf_map_lookup_elem(&l7_jwt_kids, kk);
	if (!e || e->epoch != epoch)
		return L7_R_JWT_HEADER;
	s->jwt.kv = L7_JWT_KID_UNKNOWN;
	return L7_R_NONE;
}

/* l7_jwt_judge (l7_jwtscan.h) on the decoded payload s->jwt.payload[0, len)
 * at wall-clock time now: L7_JV_*, s->dec.detail for a rejection. Global:
 * the scan's callbacks are verified once. */
__noinline int l7_g_jwt_judge(struct l7_scratch *s, const struct l7_jwt_provider *p, __u32 len, __u64 now)
{
	if (!cfg_kfuncs || !s || !p)
		return L7_JV_SHAPE;
	return l7_jwt_judge(&s->jwt, p, len, now, &s->dec.detail);
}

/*
 * Verifies the token at window bytes [off, off + len) (tok: off | len << 16,
 * a global function takes five arguments) for `provider` of generation
 * `gen` (the cache did not hold it). Returns L7_R_NONE (valid), L7_R_JWT_BAD
 * with s->dec.detail set (a 401 the kernel sends), or the reason to hand
 * the request to the slow path. Global: verified once.
 */
__noinline int l7_g_jwt_verify(struct l7_scratch *s, struct l7_config *cfg, __u32 gen, __u32 provider,
			       __u32 tok)
{
	__u32 off = tok & 0xffff, len = tok >> 16;
	const struct l7_jwt_provider *p;
	const struct l7_jwt_hdr *h;
	/* the loops' contexts, one at a time: the call chain below
	 * (l7_g_jwt_header, its scan) needs the stack */
	union {
		struct l7_jwt_dots d;
		struct l7_strscan hs;
		struct l7_jwt_cmp sg;
	} u;
	struct l7_jwt_key k;
	struct l7_window w;
	__u32 pk, epoch, ml, sl, pay_off, pay_len, d1, d2, j;
	__u8 *src;
	int r, ok, sig, hit;

	if (!cfg_kfuncs)
		return L7_R_JWT_MISS;
	if (!s || !cfg || provider >= L7_MAX_JWT_PROVIDERS || len > L7_JWT_MAX_TOKEN)
		return L7_R_JWT_OTHER;
	/* read before the key epoch: an entry l7_g_jwt_remember stores for
	 * this verification is admitted only while neither changed since */
	s->jwt.tag = READ_ONCE(cfg->cache_tag);
	gen &= 1;
	pk = gen * L7_MAX_JWT_PROVIDERS + provider;
	p = bpf_map_lookup_elem(&l7_jwt_providers, &pk);
	if (!p || !(p->flags & L7_JP_VERIFY))
		return L7_R_JWT_MISS;
	w.buf = s->ws.buf;
	w.len = s->ws.len;
	w.pad = 0;
	if (off + len > w.len)
		return L7_R_JWT_OTHER;

	/* three parts */
	L7_ZERO(u.d);
	u.d.w = w;
	u.d.wk = &s->jwt;
	u.d.off = off;
	u.d.len = len;
	s->jwt.n_dots = 0;
	L7_LOOP(L7_JWT_WORDS, l7_jwt_dots_cb, &u.d);
	d1 = s->jwt.d1;
	d2 = s->jwt.d2;
	/* not three parts: the reference's first check after the size */
	if (s->jwt.n_dots != 2) {
		s->dec.detail = L7_ANS_DETAIL_MALFORMED;
		return L7_R_JWT_BAD;
	}
	if (d2 >= len || d1 >= d2)
		return L7_R_JWT_SHAPE;

	/* the header: a segment the daemon recognised, of this key epoch, or
	 * else decoded and scanned here */
	hit = 0;
	if (d1 > 0 && d1 <= L7_JWT_MAX_HDR) {
		L7_ZERO(u.hs);
		u.hs.w = w;
		u.hs.h = l7_hash_init(cfg->meta[gen].seed);
		u.hs.off = off;
		u.hs.len = d1;
		L7_LOOP(L7_JWT_MAX_HDR / 8, l7_hash_cb, &u.hs);
		L7_ZERO(k);
		k.hash = l7_hash_final(u.hs.h, d1);
		k.gen = (__u16)gen;
		k.provider = (__u16)provider;
		k.len = d1;
		h = bpf_map_lookup_elem(&l7_jwt_headers, &k);
		if (h && h->len == d1 && h->epoch == READ_ONCE(cfg->key_epoch)) {
			L7_ZERO(u.sg);
			u.sg.w = w;
			u.sg.ref = h->seg;
			u.sg.off = off;
			u.sg.len = d1;
			L7_LOOP(L7_JWT_MAX_HDR / 8, l7_jwt_seg_cb, &u.sg);
			hit = !u.sg.diff;
		}
		if (hit) {
			s->jwt.keys.mac_len = h->mac_len;
			s->jwt.keys.n_keys = h->n_keys;
			L7_UNROLL for (j = 0; j < L7_JWT_HDR_KEYS; j++)
				s->jwt.keys.key_id[j] = h->key_id[j];
			s->jwt.epoch = h->epoch;
			s->jwt.kv = L7_JK_VERIFY;
		}
	}
	if (!hit) {
		r = l7_g_jwt_header(s, cfg, gen, provider, off | d1 << 16);
		if (r != L7_R_NONE)
			return r;
	}
	epoch = s->jwt.epoch;
	ml = s->jwt.keys.mac_len;

	/*
	 * The signature and the payload, decoded, as the reference does
	 * before any key is looked at: either not canonical base64url is
	 * Malformed (the kfunc's -EINVAL is exactly the reference's refusal;
	 * -ENOSPC, which it says before looking at the bytes, cannot happen
	 * with these buffers). A signature longer than any MAC is decoded
	 * where the payload goes next: only its form matters.
	 */
	sl = len - d2 - 1;
	if (sl > L7_JWT_MAX_TOKEN || ml > sizeof(s->jwt.mac))
		return L7_R_JWT_SHAPE;
	sig = 0;
	src = L7_JWT_WIN_PTR(s, off + d2 + 1);
	if (sl > L7_JWT_MAX_SIG)
		sig = l7f_b64url_decode(src, sl, s->jwt.payload, L7_JWT_PAYLOAD_BUF, L7F_B64_PAD_FORBIDDEN);
	else if (sl)
		sig = l7f_b64url_decode(src, sl, s->jwt.mac, sizeof(s->jwt.mac), L7F_B64_PAD_FORBIDDEN);
	if (sig < 0 && sig != -EINVAL)
		return L7_R_JWT_SHAPE;
	pay_off = off + d1 + 1;
	pay_len = d2 - d1 - 1;
	if (pay_len > L7_JWT_MAX_TOKEN)
		return L7_R_JWT_SHAPE;
	r = 0;
	if (pay_len) {
		src = L7_JWT_WIN_PTR(s, pay_off);
		r = l7f_b64url_decode(src, pay_len, s->jwt.payload, L7_JWT_PAYLOAD_BUF, L7F_B64_PAD_FORBIDDEN);
		if ((r < 0 && r != -EINVAL) || r > L7_JWT_PAYLOAD_BUF)
			return L7_R_JWT_SHAPE;
	}
	if (sig == -EINVAL || r == -EINVAL) {
		s->dec.detail = L7_ANS_DETAIL_MALFORMED;
		return L7_R_JWT_BAD;
	}

	/* the key, as the reference looks for it: the kid, then its alg */
	if (s->jwt.kv != L7_JK_VERIFY) {
		s->dec.detail = s->jwt.kv == L7_JK_MISMATCH ? L7_ANS_DETAIL_ALG_MISMATCH : L7_ANS_DETAIL_UNKNOWN_KID;
		return L7_R_JWT_BAD;
	}
	/* the reference compares lengths first */
	if (sl > L7_JWT_MAX_SIG || sig != (int)ml) {
		s->dec.detail = L7_ANS_DETAIL_BAD_SIGNATURE;
		return L7_R_JWT_BAD;
	}

	/* the MAC over header.payload, by every key of the header's kid and alg */
	ok = l7_g_jwt_mac(s, off, d2);
	/* a key that changed under the call decided nothing */
	if (ok < 0 || READ_ONCE(cfg->key_epoch) != epoch)
		return L7_R_JWT_MODULE;
	if (!ok) {
		s->dec.detail = L7_ANS_DETAIL_BAD_SIGNATURE;
		return L7_R_JWT_BAD;
	}
	/* an empty payload is no JSON object */
	if (r == 0) {
		s->dec.detail = L7_ANS_DETAIL_MALFORMED;
		return L7_R_JWT_BAD;
	}

	/* the payload: a flat object of the subset l7_jwtscan.h decides, its claims */
	switch (l7_g_jwt_judge(s, p, (__u32)r, bpf_ktime_get_boot_ns() + (__u64)READ_ONCE(cfg->wall_off_ns))) {
	case L7_JV_OK:
		return L7_R_NONE;
	case L7_JV_REJECT:
		return L7_R_JWT_BAD;
	}
	return L7_R_JWT_SHAPE;
}

/*
 * Stores the token l7_g_jwt_verify just admitted (window bytes tok: off |
 * len << 16; its cache key hash in s->jwt.tok_hash) in the verified-token
 * cache of generation slot `gen`, so that its next requests are admitted
 * by l7_g_jwt_admit without a second verification: until exp + clock_skew
 * (moved to boot time by l7_config.wall_off_ns, as the check used it), at
 * most L7_JWT_CACHE_TTL_S, nbf already reached (boot time only moves
 * forward), under the tag read before the verification began. Keys
 * rotated or a policy activated since then renewed the tag: such an entry
 * is never admitted. Returns 1 when stored. Global: called by the decision
 * after the verifier returned (the call chain's stack is bounded).
 */
__noinline int l7_g_jwt_remember(struct l7_scratch *s, struct l7_config *cfg, __u32 gen, __u32 provider,
				 __u32 tok)
{
	__u32 off = tok & 0xffff, len = tok >> 16, pk;
	const struct l7_jwt_provider *p;
	struct l7_jwt_entry *e;
	struct l7_scratch *sv;
	struct l7_jwt_key k;
	__u64 now, until, t;
	__s64 exp_ns;
	__u32 sk;

	if (!cfg_kfuncs || !s || !cfg || provider >= L7_MAX_JWT_PROVIDERS)
		return 0;
	if (len == 0 || len > L7_JWT_MAX_TOKEN || off + len > s->ws.len)
		return 0;
	gen &= 1;
	pk = gen * L7_MAX_JWT_PROVIDERS + provider;
	p = bpf_map_lookup_elem(&l7_jwt_providers, &pk);
	if (!p || len > p->max_token)
		return 0;
	now = bpf_ktime_get_boot_ns();
	until = now + L7_JWT_CACHE_TTL_S * 1000000000ULL;
	if (s->jwt.sc.seen & (1u << L7_JC_EXP)) {
		t = s->jwt.sc.exp < L7_JWT_MAX_SECONDS ? s->jwt.sc.exp : L7_JWT_MAX_SECONDS;
		exp_ns = (__s64)((t + p->skew_s) * 1000000000ULL) - READ_ONCE(cfg->wall_off_ns);
		if (exp_ns <= (__s64)now)
			return 0;
		if ((__u64)exp_ns < until)
			until = (__u64)exp_ns;
	}
	/* s itself, as map memory: bpf_map_update_elem takes its value from
	 * there (Linux 6.1 refuses a global function's memory argument) */
	sk = (__u32)s->self;
	sv = bpf_map_lookup_elem(&l7_scratch, &sk);
	if (!sv)
		return 0;
	e = &sv->jwt.entry;
	e->exp_ns = until;
	e->nbf_ns = 0;
	e->tag = s->jwt.tag;
	e->token_len = (__u16)len;
	e->fwd_len = 0;
	e->pad = 0;
	/* len <= L7_JWT_MAX_TOKEN (above): the mask only shows the verifier
	 * a bound that survives the stack */
	if (bpf_probe_read_kernel(e->token, L7_IDX(len, 2047), L7_JWT_WIN_PTR(s, off)))
		return 0;
	L7_ZERO(k);
	k.hash = s->jwt.tok_hash;
	k.gen = (__u16)gen;
	k.provider = (__u16)provider;
	k.len = len;
	return bpf_map_update_elem(&l7_jwt_cache, &k, e, BPF_ANY) == 0;
}

#endif /* L7_JWTVERIFY_H */
