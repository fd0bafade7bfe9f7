/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Consistent-hash endpoint selection for the data plane: lookups in the
 * tables l7fastd builds (daemon/src/lb/RingHash.cpp, Maglev.cpp, Envoy's
 * semantics). The daemon computes the tables; the kernel only searches
 * them. Compiles as BPF and natively: the unit tests run these very
 * functions against the daemon's reference lookups on random keys
 * (tests/unit/lb_kernel_test.cpp).
 *
 * Key hash: XXH64, seed 0, of the key bytes (l7_xxhash.h, or the module
 * kfunc l7f_xxh64(): identical results).
 *
 * Table layout the functions expect (the daemon fills it, one table per
 * cluster and generation; which map holds it is the data plane's choice):
 *   ring:   __u64 hash[L7_LB_RING_MAX]   point hashes, ascending, n used
 *           __u16 ep[L7_LB_RING_MAX]     endpoint index (in the cluster's
 *                                        endpoint list) of each point
 *   maglev: __u16 ep[L7_LB_MAGLEV_MAX]   endpoint index per slot, size used
 * BPF contract: each array is map-value memory of at least the capacity
 * named above, whatever n/size is: the verifier checks the masked index
 * against the capacity, not against n.
 *
 * Placement (what the daemon checks, HashBalancer::kernel_refusal()):
 * clusters whose ring has more than L7_LB_RING_MAX points, whose Maglev
 * table is larger than L7_LB_MAGLEV_MAX, with more than L7_LB_MAX_ENDPOINTS
 * endpoints or with a hash_balance_factor (bounded load needs per-endpoint
 * active request counts) are chosen by the slow path.
 */
#ifndef L7_LB_H
#define L7_LB_H

#include "l7_common.h"

/* No endpoint: empty table or a size outside the kernel's capacity. */
#define L7_LB_NONE 0xffffu
/* Endpoint indexes are __u16 and L7_LB_NONE is reserved. */
#define L7_LB_MAX_ENDPOINTS 0xfffeu

/*
 * Ring capacity: 2^16 points (640 KiB per ring: 8-byte hash + 2-byte
 * endpoint). Envoy's default minimum_ring_size is 1024 and a ring only
 * grows past the minimum when the smallest normalised weight needs more
 * points to get a whole one (e.g. weights 1:100 over 1024 points), so 2^16
 * covers every ordinary policy; larger rings stay in the slow path.
 * A power of two so that the search can mask its index.
 */
#define L7_LB_RING_SHIFT 16
#define L7_LB_RING_MAX (1u << L7_LB_RING_SHIFT)

/*
 * Maglev capacity: Envoy's default (and the paper's) table size, a prime;
 * 128 KiB per table. Any prime table_size up to this runs in the kernel.
 */
#define L7_LB_MAGLEV_MAX 65537u

/* Hides a value from the compiler so a range check it could prove is kept
 * for the verifier (which does not track the result of a modulo). */
#if defined(__bpf__)
#define L7_LB_OPAQUE(x) ({ __u64 _l7_o = (x); asm volatile("" : "+r"(_l7_o)); _l7_o; })
#else
#define L7_LB_OPAQUE(x) (x)
#endif

/*
 * 1 if a < b (unsigned), 0 otherwise, computed without a branch (the borrow
 * of a - b, Hacker's Delight 2-13). BPF has no set-on-condition
 * instruction, so a plain comparison becomes a conditional jump, and a jump
 * per search step lets the verifier walk every path through the search
 * (measured on 6.18: over its 1M instruction limit); without jumps it sees
 * one path. The difference is opaque so that the compiler cannot turn the
 * expression back into a comparison.
 */
L7_INLINE __u64 l7_lb_below(__u64 a, __u64 b)
{
	__u64 d = L7_LB_OPAQUE(a - b);

	return ((~a & b) | (~(a ^ b) & d)) >> 63;
}

/*
 * Index of the first point whose hash is >= key, or 0 when key is above
 * every point (the ring wraps): Envoy's ketama lookup. n in
 * 1..L7_LB_RING_MAX.
 *
 * Fixed-step search: each step advances `pos` (the count of points known to
 * be < key) by the next smaller power of two when that stays within n and
 * the point before the new position is < key. L7_LB_RING_SHIFT + 1 steps
 * whatever n is, unrolled, no bpf_loop; every index is masked to the
 * capacity (a step past n reads a point it then ignores).
 */
L7_INLINE __u32 l7_lb_ring_find(const __u64 *hash, __u32 n, __u64 key)
{
	__u32 pos = 0;
	int i;

	L7_UNROLL
	for (i = 0; i <= L7_LB_RING_SHIFT; i++) {
		__u32 step = L7_LB_RING_MAX >> i;
		__u32 next = pos + step;
		__u64 h = hash[L7_IDX(next - 1, L7_LB_RING_MAX - 1)];
		__u64 take = l7_lb_below(next, (__u64)n + 1) & l7_lb_below(h, key);

		pos += step & (__u32)(0 - take);
	}
	return pos < n ? pos : 0;
}

/* Endpoint index for key on a ring of n points; L7_LB_NONE if n is 0 or
 * above L7_LB_RING_MAX. */
L7_INLINE __u32 l7_lb_ring_pick(const __u64 *hash, const __u16 *ep, __u32 n, __u64 key)
{
	if (n == 0 || n > L7_LB_RING_MAX)
		return L7_LB_NONE;
	return ep[L7_IDX(l7_lb_ring_find(hash, n, key), L7_LB_RING_MAX - 1)];
}

/* Endpoint index for key in a Maglev table of `size` slots (a prime):
 * table[key % size]; L7_LB_NONE if size is 0 or above L7_LB_MAGLEV_MAX. */
L7_INLINE __u32 l7_lb_maglev_pick(const __u16 *table, __u32 size, __u64 key)
{
	__u64 slot;

	if (size == 0 || size > L7_LB_MAGLEV_MAX)
		return L7_LB_NONE;
	slot = L7_LB_OPAQUE(key % size);
	if (slot >= L7_LB_MAGLEV_MAX)
		return L7_LB_NONE;
	return table[slot];
}

#endif /* L7_LB_H */
