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

/* Picks the endpoint for a route (s: the parsed request, key: its
 * connection); returns its pool id or -1. */
static __always_inline long l7_pick_pool(const struct l7_route *r, __u32 gen,
					 struct l7_scratch *s, const struct l7_conn_key *key)
{
	struct l7_cluster *c;
	struct l7_endpoint *ep;
	__u32 ci = r->cluster[0], ck, e = 0, i;

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
		e = (__u32)pe;
	} else if (c->lb == L7_LB_WEIGHTED && c->total_weight) {
		__u32 x = bpf_get_prandom_u32() % c->total_weight;
		__u32 lo = 0, hi = c->n_endpoints - 1;

		for (i = 0; i < L7_MAX_BSEARCH; i++) {
			__u32 mid;

			if (lo >= hi)
				break;
			mid = (lo + hi) / 2;
			ep = l7_endpoint_at(gen, c->first_endpoint + mid);
			if (!ep)
				return -1;
			if (x < ep->cum_weight)
				hi = mid;
			else
				lo = mid + 1;
		}
		e = lo;
	} else {
		__u64 *rr = bpf_map_lookup_elem(&l7_rr, &ck);

		if (rr)
			e = (__u32)(__sync_fetch_and_add(rr, 1) % c->n_endpoints);
	}
	ep = l7_endpoint_at(gen, c->first_endpoint + e);
	if (!ep)
		return -1;
	return ep->pool_id;
}

/* Claims an idle pooled connection of `pool`: IDLE -> KBUSY. A connection
 * whose backend has closed it (L7_SF_PEER_CLOSED, set by sockops while the
 * slow path had it) is never claimed: it is retired (DEAD) and the daemon's
 * watcher, woken by the FIN, closes it. */
static __always_inline __u32 l7_claim_slot(__u32 pool)
{
	__u32 start = bpf_get_prandom_u32(), k;

	if (pool >= L7_MAX_POOLS)
		return L7_NO_SLOT;
	for (k = 0; k < L7_SLOTS_PER_POOL; k++) {
		__u32 id = pool * L7_SLOTS_PER_POOL + ((start + k) & (L7_SLOTS_PER_POOL - 1));
		struct l7_slot *s = bpf_map_lookup_elem(&l7_slots, &id);

		if (!s || s->state != L7_SLOT_IDLE ||
		    __sync_val_compare_and_swap(&s->state, L7_SLOT_IDLE, L7_SLOT_KBUSY) !=
			    L7_SLOT_IDLE)
			continue;
		if (!(s->flags & L7_SF_PEER_CLOSED))
			return id;
		s->state = L7_SLOT_DEAD;
	}
	return L7_NO_SLOT;
}

#endif /* L7_LIB_SELECT_H */
