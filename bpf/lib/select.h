/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Route -> cluster -> endpoint -> pooled upstream connection. */
#ifndef L7_LIB_SELECT_H
#define L7_LIB_SELECT_H

#include "conn.h"
#include "hashpick.h"

#define L7_MAX_BSEARCH 11 /* log2(L7_MAX_ENDPOINTS) + 1 */

static __always_inline struct l7_endpoint *l7_endpoint_at(__u32 gen, __u32 idx)
{
	__u32 k = gen * L7_MAX_ENDPOINTS + (idx & (L7_MAX_ENDPOINTS - 1));

	return bpf_map_lookup_elem(&l7_endpoints, &k);
}

/* l7_pick_pool's answer when the endpoints it drew are out */
#define L7_PICK_DOWN (-2)
/* Draws per request in a round-robin or weighted cluster whose endpoints
 * are partly out: each draw is independent, so an endpoint that is in is
 * as likely as before among those in (rejection sampling); after the last
 * the slow path chooses. */
#define L7_PICK_TRIES 4

/* Whether the endpoint of pool `pool` takes new requests: the daemon sets
 * l7_pool.down while it is drained, failing its health check or ejected. */
static __always_inline int l7_pool_up(__u32 pool)
{
	__u32 k = pool;
	struct l7_pool *p = bpf_map_lookup_elem(&l7_pools, &k);

	return p && !READ_ONCE(p->down);
}

/* One draw of a round-robin or weighted cluster: an endpoint index. */
static __always_inline __u32 l7_draw_endpoint(const struct l7_cluster *c, __u32 gen, __u32 ck)
{
	struct l7_endpoint *ep;
	__u32 i;

	if (c->lb == L7_LB_WEIGHTED && c->total_weight) {
		__u32 x = bpf_get_prandom_u32() % c->total_weight;
		__u32 lo = 0, hi = c->n_endpoints - 1;

		for (i = 0; i < L7_MAX_BSEARCH; i++) {
			__u32 mid;

			if (lo >= hi)
				break;
			mid = (lo + hi) / 2;
			ep = l7_endpoint_at(gen, c->first_endpoint + mid);
			if (!ep)
				return L7_LB_NONE;
			if (x < ep->cum_weight)
				hi = mid;
			else
				lo = mid + 1;
		}
		return lo;
	}
	if (c->n_endpoints > 1) {
		__u64 *rr = bpf_map_lookup_elem(&l7_rr, &ck);

		if (rr)
			return (__u32)(__sync_fetch_and_add(rr, 1) % c->n_endpoints);
	}
	return 0;
}

/*
 * Picks the endpoint for a route (s: the parsed request, key: its
 * connection); returns its pool id, L7_PICK_DOWN when the endpoint chosen
 * is out and the kernel cannot choose another exactly as the slow path
 * would, or -1.
 *
 * Endpoints that are out: a ring-hash or Maglev key whose endpoint is out
 * goes to the slow path, which owns the table built over the endpoints that
 * are in (Pipeline.cpp choose_endpoint: a key keeps its endpoint while it
 * is in); round robin and weighted draw again, L7_PICK_TRIES times at most.
 */
static __always_inline long l7_pick_pool(const struct l7_route *r, __u32 gen,
					 struct l7_scratch *s, const struct l7_conn_key *key)
{
	struct l7_cluster *c;
	struct l7_endpoint *ep;
	__u32 ci = r->cluster[0], ck, e, i;

	if (r->n_targets > 1 && r->total_weight) {
		__u32 x = bpf_get_prandom_u32() % r->total_weight;

		for (i = 0; i < L7_MAX_TARGETS; i++) {
			if (i >= r->n_targets)
				break;
			if (x < r->cum_weight[i]) {
				ci = r->cluster[i];
				break;
			}
		}
	}
	ck = gen * L7_MAX_CLUSTERS + (ci & (L7_MAX_CLUSTERS - 1));
	c = bpf_map_lookup_elem(&l7_clusters, &ck);
	if (!c || !c->n_endpoints)
		return -1;
	if (c->lb == L7_LB_RING_HASH || c->lb == L7_LB_MAGLEV) {
		int pe = l7_g_hash_pick(s, key, gen, ck);

		if (pe < 0)
			return -1;
		ep = l7_endpoint_at(gen, c->first_endpoint + (__u32)pe);
		if (!ep)
			return -1;
		return l7_pool_up(ep->pool_id) ? (long)ep->pool_id : L7_PICK_DOWN;
	}
	/* unrolled: as a loop, clang entered it in the middle and closed it
	 * with a fall-through, which 6.1's check_cfg rejects as a back-edge */
	L7_UNROLL
	for (i = 0; i < L7_PICK_TRIES; i++) {
		e = l7_draw_endpoint(c, gen, ck);
		if (e == L7_LB_NONE)
			return -1;
		ep = l7_endpoint_at(gen, c->first_endpoint + e);
		if (!ep)
			return -1;
		if (l7_pool_up(ep->pool_id))
			return ep->pool_id;
	}
	return L7_PICK_DOWN;
}

/* Index (0..63) of the lowest set bit of x != 0. */
static __always_inline __u32 l7_lowest_bit(__u64 x)
{
	__u32 bit = 0;

	if (!(x & 0xffffffffULL)) { bit += 32; x >>= 32; }
	if (!(x & 0xffffULL)) { bit += 16; x >>= 16; }
	if (!(x & 0xffULL)) { bit += 8; x >>= 8; }
	if (!(x & 0xfULL)) { bit += 4; x >>= 4; }
	if (!(x & 0x3ULL)) { bit += 2; x >>= 2; }
	if (!(x & 0x1ULL))
		bit += 1;
	return bit;
}

/* Slot `id` of `pool` stops being idle: its hint bit goes. */
static __always_inline void l7_pool_unmark(struct l7_pool *p, const struct l7_slot *s, __u32 id)
{
	__sync_fetch_and_and(&p->idle[L7_IDX(s->pool_chunk, L7_POOL_MAX_CHUNKS - 1)],
			     ~(1ULL << (id & (L7_SLOT_CHUNK - 1))));
}

/* Slot `id` became idle (state already IDLE): its hint bit is set. */
static __always_inline void l7_pool_mark_idle(const struct l7_slot *s, __u32 id)
{
	__u32 pid = s->pool_id;
	struct l7_pool *p = bpf_map_lookup_elem(&l7_pools, &pid);
	__u64 bit = 1ULL << (id & (L7_SLOT_CHUNK - 1));
	__u64 *w;

	if (!p)
		return;
	w = &p->idle[L7_IDX(s->pool_chunk, L7_POOL_MAX_CHUNKS - 1)];
	if (!(*w & bit))
		__sync_fetch_and_or(w, bit);
}

/*
 * IDLE -> KBUSY on slot `id` if it belongs to `pool`. A connection whose
 * backend has closed it (L7_SF_PEER_CLOSED, set by sockops while it was in
 * use) is retired (DEAD) instead: the daemon's watcher, woken by the FIN,
 * closes it. Returns 1 when claimed.
 */
static __always_inline int l7_try_claim(struct l7_pool *p, __u32 pool, __u32 id)
{
	__u64 *st = bpf_map_lookup_elem(&l7_slot_state, &id);
	struct l7_slot *s = bpf_map_lookup_elem(&l7_slots, &id);

	if (!st || !s || s->pool_id != pool || *st != L7_SLOT_IDLE ||
	    __sync_val_compare_and_swap(st, L7_SLOT_IDLE, L7_SLOT_KBUSY) != L7_SLOT_IDLE)
		return 0;
	l7_pool_unmark(p, s, id);
	if (!(s->flags & L7_SF_PEER_CLOSED))
		return 1;
	*st = L7_SLOT_DEAD;
	return 0;
}

/* Claim attempts per request beyond the connection's own last slot: each
 * is one compare-and-swap on a slot whose idle bit was seen set. */
#define L7_CLAIM_TRIES 4

/* bpf_loop context of the chunk scan: the pointers (the counters live in
 * s->claim, map memory, so that the callback's verification converges) */
struct l7_claim_ctx {
	struct l7_pool *p;
	struct l7_scratch *s;
};

/* One chunk of the pool: its lowest idle bits, as long as tries are left. */
L7_CALLBACK long l7_claim_chunk_cb(__u32 i, void *ctx)
{
	struct l7_claim_ctx *x = ctx;
	struct l7_claim_state *cs = &x->s->claim;
	__u32 ci, n = cs->n;
	__u64 w;
	int k;

	if (i >= n || i >= L7_POOL_MAX_CHUNKS || cs->tries >= L7_CLAIM_TRIES)
		return 1;
	ci = L7_IDX((cs->first + i) % n, L7_POOL_MAX_CHUNKS - 1);
	w = x->p->idle[ci];
	for (k = 0; k < L7_CLAIM_TRIES; k++) {
		__u32 id;

		if (!w || cs->tries >= L7_CLAIM_TRIES)
			break;
		id = (__u32)x->p->chunk[ci] * L7_SLOT_CHUNK + l7_lowest_bit(w);
		w &= w - 1;
		cs->tries++;
		if (id < L7_MAX_SLOTS && l7_try_claim(x->p, cs->pool, id)) {
			cs->found = id;
			return 1;
		}
	}
	return 0;
}

/*
 * Claims an idle pooled connection of `pool` for connection `c`: first the
 * one its last kernel exchange used (a client that does not pipeline finds
 * it idle every time: no search, and the same upstream connection), then
 * the lowest idle bits of the pool's chunks, starting at a chunk chosen by
 * the connection so that claims from many CPUs spread out. On a miss the
 * pool's `miss` flag asks the daemon to grow it (one event until it has).
 * Global: verified once, not at every caller.
 */
__noinline __u32 l7_g_claim(struct l7_scratch *s, struct l7_conn *c, __u32 pool)
{
	struct l7_claim_ctx x = {};
	struct l7_claim_state *cs;
	struct l7_pool *p;
	struct l7_event *e;

	if (!s || !c || pool >= L7_MAX_POOLS)
		return L7_NO_SLOT;
	p = bpf_map_lookup_elem(&l7_pools, &pool);
	if (!p)
		return L7_NO_SLOT;
	if (c->last_slot < L7_MAX_SLOTS && l7_try_claim(p, pool, c->last_slot))
		return c->last_slot;
	cs = &s->claim;
	cs->pool = pool;
	cs->n = p->n_chunks;
	cs->first = c->gen + c->key.client_port;
	cs->tries = 0;
	cs->found = L7_NO_SLOT;
	x.p = p;
	x.s = s;
	if (cs->n)
		L7_LOOP(L7_POOL_MAX_CHUNKS, l7_claim_chunk_cb, &x);
	if (cs->found < L7_MAX_SLOTS) {
		c->last_slot = cs->found;
		return cs->found;
	}
	if (p->miss || __sync_val_compare_and_swap(&p->miss, 0, 1) != 0)
		return L7_NO_SLOT;
	e = l7_event_reserve();
	if (e) {
		__builtin_memset(e, 0, sizeof(*e));
		e->type = L7_EV_POOL_MISS;
		e->slot = pool;
		bpf_ringbuf_submit(e, 0);
	}
	return L7_NO_SLOT;
}

#endif /* L7_LIB_SELECT_H */
