/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Route matching. Each condition kind contributes a bitmap of the routes it
 * admits; their AND is the set of candidate routes and the lowest set bit is
 * the first route in policy order. Cost is one pass over the request plus a
 * fixed number of map lookups per distinct prefix length and match header,
 * independent of how many routes there are.
 *
 * Routes with conditions the kernel cannot evaluate are compiled as "any" for
 * that condition and placed in user space: if such a route is the first
 * candidate, the slow path decides, which keeps first-match order exact.
 */
#ifndef L7_LIB_MATCH_H
#define L7_LIB_MATCH_H

#include "conn.h"

static __always_inline struct l7_bitmap *l7_bm_in(__u32 gen, __u32 space, __u32 idx)
{
	__u32 k = L7_BMI_INDEX(gen, space, idx);

	return bpf_map_lookup_elem(&l7_bitmaps, &k);
}

static __always_inline struct l7_bitmap *l7_bm(__u32 gen, __u32 idx)
{
	return l7_bm_in(gen, L7_SPACE_ROUTES, idx);
}

/*
 * The bitmap operations look at one word when the policy has at most 64
 * routes (or a route's rules end within the first 64: `nw` is the words
 * that can hold a set bit, s->ms.nwords), at all of them otherwise: a
 * policy of 10 routes pays for one word, not 16. The compiler leaves the
 * words beyond zero in every table. Two cases, not a loop bounded by nw:
 * the verifier tells two apart after the first test, but would follow
 * every exit of such a loop through every later one.
 */
static __always_inline void l7_bm_copy(struct l7_bitmap *d, const struct l7_bitmap *s, __u32 nw)
{
	int i;

	if (nw <= 1) {
		d->w[0] = s->w[0];
		return;
	}
	for (i = 0; i < L7_BM_WORDS; i++)
		d->w[i] = s->w[i];
}

static __always_inline void l7_bm_and(struct l7_bitmap *d, const struct l7_bitmap *s, __u32 nw)
{
	int i;

	if (nw <= 1) {
		d->w[0] &= s->w[0];
		return;
	}
	for (i = 0; i < L7_BM_WORDS; i++)
		d->w[i] &= s->w[i];
}

static __always_inline void l7_bm_or(struct l7_bitmap *d, const struct l7_bitmap *s, __u32 nw)
{
	int i;

	if (nw <= 1) {
		d->w[0] |= s->w[0];
		return;
	}
	for (i = 0; i < L7_BM_WORDS; i++)
		d->w[i] |= s->w[i];
}

static __always_inline int l7_bm_first(const struct l7_bitmap *b, __u32 nw)
{
	int i;

	for (i = 0; i < L7_BM_WORDS; i++) {
		__u64 x = b->w[i];
		int bit = 0;

		if (i && nw <= 1)
			break;
		if (!x)
			continue;
		if (!(x & 0xffffffffULL)) { bit += 32; x >>= 32; }
		if (!(x & 0xffffULL)) { bit += 16; x >>= 16; }
		if (!(x & 0xffULL)) { bit += 8; x >>= 8; }
		if (!(x & 0xfULL)) { bit += 4; x >>= 4; }
		if (!(x & 0x3ULL)) { bit += 2; x >>= 2; }
		if (!(x & 0x1ULL)) { bit += 1; }
		return i * 64 + bit;
	}
	return -1;
}

/*
 * Looks up a string condition and ORs the routes it admits into s->tmp;
 * returns 1 if it matched. Global, so it is verified once: `spec` packs the
 * match kind (bits 0-7), whether to lower-case (bit 8), the generation
 * (bit 9), the bitmap space (bit 10) and the kind's aux value (bits 16-31).
 */
#define L7_SPEC_SP(kind, lower, gen, space, aux)                                      \
	((__u32)(kind) | ((__u32)(lower) << 8) | ((__u32)((gen) & 1) << 9) |        \
	 ((__u32)((space) & 1) << 10) | ((__u32)(aux) << 16))
#define L7_SPEC(kind, lower, gen, aux) L7_SPEC_SP(kind, lower, gen, L7_SPACE_ROUTES, aux)

__noinline int l7_g_or_str(struct l7_scratch *s, __u32 spec, __u32 off, __u32 len, __u64 seed)
{
	struct l7_match_key k = {};
	struct l7_match_val *v;
	struct l7_window w;
	int lower = (spec >> 8) & 1;

	if (!s || len > L7_MAX_MATCH_STR)
		return 0;
	w.buf = s->ws.buf;
	w.len = s->ws.len;
	k.hash = l7_hash_window(&w, off, len, seed, lower);
	k.kind = spec & 0xff;
	k.aux = (__u16)(spec >> 16);
	k.gen = (spec >> 9) & 1;
	k.space = (spec >> 10) & 1;
	v = bpf_map_lookup_elem(&l7_match, &k);
	if (!v || v->len != len || !l7_window_eq(&w, off, len, v->str, lower))
		return 0;
	l7_bm_or(&s->tmp, &v->routes, s->ms.nwords);
	return 1;
}

/* bpf_loop context: the pointers; the state is in s->ms */
struct l7_match_ctx {
	struct l7_scratch *s;
	const struct l7_gen_meta *meta;
};

L7_CALLBACK long l7_prefix_cb(__u32 i, void *ctx)
{
	struct l7_match_ctx *m = ctx;
	const struct l7_gen_meta *meta = m->meta;
	__u32 len;

	if (i >= L7_MAX_PREFIX_LENS || i >= meta->n_prefix_lens)
		return 1;
	len = meta->prefix_lens[L7_IDX(i, L7_MAX_PREFIX_LENS - 1)];
	if (len > m->s->ms.path_len)
		return 1; /* ascending */
	l7_g_or_str(m->s, L7_SPEC_SP(L7_MK_PATH_PREFIX, 0, m->s->ms.gen, m->s->ms.space, len),
		    m->s->ms.path_off, len, m->s->ms.seed);
	return 0;
}

/* Header names are at most L7_MAX_HDR_NAME bytes: compare them word by word
 * against the meta copy (lower-cased on the request side). */
static __always_inline int l7_hdr_name_eq(const struct l7_window *w, const struct l7_hdr *h,
					  const __u8 *name)
{
	__u32 i;

	for (i = 0; i < L7_MAX_HDR_NAME / 8; i++) {
		__u64 x, y;

		if (i * 8 >= h->name_len)
			break;
		x = l7_lower64(l7_load64(w, h->name_off + i * 8, 0));
		y = *(const __u64 *)(name + i * 8);
		if (h->name_len - i * 8 < 8) {
			x = l7_low_bytes(x, h->name_len - i * 8);
			y = l7_low_bytes(y, h->name_len - i * 8);
		}
		if (x != y)
			return 0;
	}
	return 1;
}

/*
 * Whether header i's name is match name jj. A global function, verified
 * once on its own: inlined, its word loop was explored again for every
 * (header, name) pair of the collect loop, and 6.18.44's verifier no longer
 * prunes those paths (l7_req_msg went over 1M instructions).
 */
__noinline int l7_g_hdr_name_eq(struct l7_scratch *s, const struct l7_gen_meta *meta, __u32 i, __u32 jj)
{
	struct l7_window w;

	if (!s || !meta)
		return 0;
	w.buf = s->ws.buf;
	w.len = s->ws.len;
	return l7_hdr_name_eq(&w, &s->ws.msg.hdr[L7_IDX(i, L7_MAX_HEADERS - 1)],
			      meta->hdr_name[L7_IDX(jj, L7_MAX_MATCH_HDRS - 1)]);
}

L7_CALLBACK long l7_hdr_collect_cb(__u32 i, void *ctx)
{
	struct l7_match_ctx *m = ctx;
	const struct l7_gen_meta *meta = m->meta;
	struct l7_scratch *s = m->s;
	const struct l7_hdr *h;
	__u32 j;

	if (i >= s->ws.msg.n_hdrs || i >= L7_MAX_HEADERS)
		return 1;
	h = &s->ws.msg.hdr[L7_IDX(i, L7_MAX_HEADERS - 1)];
	for (j = 0; j < L7_MAX_MATCH_HDRS; j++) {
		__u32 jj = L7_IDX(j, L7_MAX_MATCH_HDRS - 1);

		if (j >= meta->n_match_hdrs)
			break;
		if ((__u32)meta->hdr_name_hash[jj] != h->name_hash ||
		    meta->hdr_name_len[jj] != h->name_len ||
		    !l7_g_hdr_name_eq(s, meta, i, jj))
			continue;
		if (s->hdr_val[jj] != L7_NONE)
			s->ms.dup = 1;
		s->hdr_val[jj] = (__u16)i;
	}
	return 0;
}

L7_CALLBACK long l7_hdr_match_cb(__u32 j, void *ctx)
{
	struct l7_match_ctx *m = ctx;
	const struct l7_gen_meta *meta = m->meta;
	struct l7_scratch *s = m->s;
	struct l7_bitmap *b;
	__u16 hi;

	if (j >= L7_MAX_MATCH_HDRS || j >= meta->n_match_hdrs)
		return 1;
	b = l7_bm_in(s->ms.gen, s->ms.space, L7_BMI_HDR_ANY(j));
	if (!b)
		return 1;
	l7_bm_copy(&s->tmp, b, s->ms.nwords);
	hi = s->hdr_val[L7_IDX(j, L7_MAX_MATCH_HDRS - 1)];
	if (hi != L7_NONE) {
		const struct l7_hdr *h = &s->ws.msg.hdr[L7_IDX(hi, L7_MAX_HEADERS - 1)];

		b = l7_bm_in(s->ms.gen, s->ms.space, L7_BMI_HDR_PRESENT(j));
		if (b)
			l7_bm_or(&s->tmp, b, s->ms.nwords);
		l7_g_or_str(s, L7_SPEC_SP(L7_MK_HDR_EXACT, 0, s->ms.gen, s->ms.space, j), h->val_off,
			    h->val_len, s->ms.seed);
	}
	l7_bm_and(&s->acc, &s->tmp, s->ms.nwords);
	return 0;
}

/*
 * Returns the index of the first route whose conditions admit the parsed
 * request in s->msg, -1 if none, or -2 if a header a route looks at appears
 * more than once (the slow path decides those: see ARCHITECTURE.md).
 */
static __always_inline int l7_match_route(struct l7_scratch *s, struct l7_config *cfg,
					  __u32 gen, __u32 listener_id)
{
	const struct l7_gen_meta *meta = &cfg->meta[gen & 1];
	struct l7_match_ctx m = {};
	struct l7_bitmap *b;
	__u32 nw;
	int i;

	m.s = s;
	m.meta = meta;
	s->ms.gen = gen;
	s->ms.space = L7_SPACE_ROUTES;
	s->ms.seed = meta->seed;
	s->ms.path_off = s->ws.msg.target_off;
	s->ms.path_len = s->ws.msg.path_len;
	s->ms.dup = 0;
	nw = (meta->n_routes + 63) / 64;
	s->ms.nwords = nw;

	b = l7_bm(gen, L7_BMI_LISTENER(listener_id & (L7_MAX_LISTENERS - 1)));
	if (!b)
		return -1;
	l7_bm_copy(&s->acc, b, nw);
	b = l7_bm(gen, L7_BMI_METHOD(s->ws.msg.method < L7_M_COUNT ? s->ws.msg.method : L7_M_OTHER));
	if (!b)
		return -1;
	l7_bm_and(&s->acc, b, nw);

	if (meta->flags & L7_GMF_HOST) {
		b = l7_bm(gen, L7_BMI_HOST_ANY);
		if (!b)
			return -1;
		l7_bm_copy(&s->tmp, b, nw);
		if (s->ws.msg.host_idx != L7_NONE) {
			const struct l7_hdr *h = &s->ws.msg.hdr[L7_IDX(s->ws.msg.host_idx, L7_MAX_HEADERS - 1)];

			l7_g_or_str(s, L7_SPEC(L7_MK_HOST_EXACT, 1, gen, 0), h->val_off,
				    s->ws.msg.host_len, s->ms.seed);
		}
		l7_bm_and(&s->acc, &s->tmp, nw);
	}

	if (meta->flags & L7_GMF_PATH) {
		b = l7_bm(gen, L7_BMI_PATH_ANY);
		if (!b)
			return -1;
		l7_bm_copy(&s->tmp, b, nw);
		if (meta->flags & L7_GMF_PATH_EXACT)
			l7_g_or_str(s, L7_SPEC(L7_MK_PATH_EXACT, 0, gen, 0), s->ms.path_off, s->ms.path_len,
				    s->ms.seed);
		if (meta->n_prefix_lens)
			L7_LOOP(L7_MAX_PREFIX_LENS, l7_prefix_cb, &m);
		l7_bm_and(&s->acc, &s->tmp, nw);
	}

	if (meta->n_match_hdrs) {
		for (i = 0; i < L7_MAX_MATCH_HDRS; i++)
			s->hdr_val[i] = L7_NONE;
		L7_LOOP(L7_MAX_HEADERS, l7_hdr_collect_cb, &m);
		if (s->ms.dup)
			return -2;
		L7_LOOP(L7_MAX_MATCH_HDRS, l7_hdr_match_cb, &m);
	}
	return l7_bm_first(&s->acc, nw);
}

#endif /* L7_LIB_MATCH_H */
