/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Endpoint choice of ring-hash and Maglev clusters in the kernel: the key
 * hash as the slow path computes it (daemon/src/proxy/Pipeline.cpp
 * choose_endpoint, lb/KeyHash.hpp) looked up in the table the daemon built
 * with the slow path's own code (lb/RingHash, lb/Maglev).
 *
 * Keys (policy::request_key):
 *  - a header: the value of its first field line, as the parser left it
 *    (l7_match_route collected it in s->hdr_val: the compiler made the name
 *    a match header; a request carrying it twice never gets here, the
 *    matcher passes it to the slow path);
 *  - the source address: 4 bytes for IPv4 and IPv4-mapped IPv6, else 16,
 *    network order (struct l7_conn_key already folds a mapped pair to IPv4;
 *    a mapped client towards a non-mapped server address is folded here).
 * A request without its key gets a random endpoint, as in the slow path
 * (and Envoy): a random 64-bit number is looked up instead of a key hash.
 *
 * XXH64 is the pure-BPF one (l7_xxhash.h) over the parser's window, not the
 * module kfunc: the key lies in the middle of the scratch, the kfunc would
 * need a copy first, and both compute the same function.
 */
#ifndef L7_LIB_HASHPICK_H
#define L7_LIB_HASHPICK_H

#include <bpf/bpf_endian.h>
#include "l7_lb.h"
#include "l7_xxhash.h"
#include "conn.h"

static __always_inline __u64 l7_source_key_hash(const struct l7_conn_key *k)
{
	const __u32 *ip = k->client_ip;

	if (k->family == AF_INET)
		return l7_xxh64_addr(ip, 4, 0);
	if (!ip[0] && !ip[1] && ip[2] == bpf_htonl(0xffff))
		return l7_xxh64_addr(&ip[3], 4, 0);
	return l7_xxh64_addr(ip, 16, 0);
}

/*
 * Endpoint index (in the cluster) for the request parsed in s, or -1.
 * `ck` is the cluster's l7_clusters key; must run after l7_match_route.
 * Global: verified once, not at every caller.
 */
__noinline int l7_g_hash_pick(struct l7_scratch *s, const struct l7_conn_key *key, __u32 gen,
			      __u32 ck)
{
	const struct l7_cluster *c;
	struct l7_lb_table *t;
	__u32 tk, e;
	__u64 h;

	if (!s || !key)
		return -1;
	c = bpf_map_lookup_elem(&l7_clusters, &ck);
	if (!c)
		return -1;
	tk = (gen & 1) * L7_MAX_LB_TABLES + (c->table & (L7_MAX_LB_TABLES - 1));
	t = bpf_map_lookup_elem(&l7_lb_tables, &tk);
	if (!t)
		return -1;

	if (c->key_kind == L7_LBK_SOURCE_IP) {
		h = l7_source_key_hash(key);
	} else {
		__u16 hi = s->hdr_val[c->key_hdr & (L7_MAX_MATCH_HDRS - 1)];

		if (hi == L7_NONE || hi >= s->ws.msg.n_hdrs) {
			h = ((__u64)bpf_get_prandom_u32() << 32) | bpf_get_prandom_u32();
		} else {
			const struct l7_hdr *hd = &s->ws.msg.hdr[L7_IDX(hi, L7_MAX_HEADERS - 1)];
			struct l7_window w = { .buf = s->ws.buf, .len = s->ws.len };

			if ((__u32)hd->val_off + hd->val_len > w.len)
				return -1;
			h = l7_xxh64_window(&w, hd->val_off, hd->val_len, 0);
		}
	}

	if (c->lb == L7_LB_RING_HASH)
		e = l7_lb_ring_pick(t->hash, t->ep, c->table_size, h);
	else if (c->lb == L7_LB_MAGLEV)
		e = l7_lb_maglev_pick(t->ep, c->table_size, h);
	else
		return -1;
	if (e >= c->n_endpoints)
		return -1;
	return (int)e;
}

#endif /* L7_LIB_HASHPICK_H */
