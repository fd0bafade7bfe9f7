/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Token buckets of route rate limits, one arithmetic for the data plane
 * (bpf/lib/decide.h) and the slow path (proxy/RateLimiter), written to
 * compile as BPF and as C++ (no helpers, no maps here).
 *
 * A bucket is one __u64, so that the kernel and the daemon can share it
 * with compare-and-swap (the daemon through an mmapped array): the
 * "empty mark" E, a point on the route's milli-token clock
 *
 *	V(now) = L7_BUCKET_ORIGIN + now_ms * rate + (now_ns mod 1 ms) * rate / 1e6
 *
 * which counts the milli-tokens the rate has refilled since the clock's
 * start (rounded down: the fraction counts with the next nanoseconds, never
 * lost). The bucket holds min(burst * 1000, V - E) milli-tokens; a request
 * takes 1000 (L7_BUCKET_MILLI) by moving E to V - left. A fresh bucket is
 * E = 0, full: V is at least L7_BUCKET_ORIGIN (2^62) > any capacity.
 * Bounds: now_ms * rate < 2^62 for 146 years of uptime at the highest rate
 * the policy allows (1e6); burst * 1000 < 2^42.
 *
 * A take that found no token changes nothing. Giving a token back
 * (l7_bucket_refund: a request the kernel admitted and then handed to the
 * slow path, which takes its own) moves E back by 1000, which restores the
 * bucket exactly as if the take had not happened.
 */
#ifndef L7_BUCKET_H
#define L7_BUCKET_H

#include "l7_common.h"

#define L7_BUCKET_MILLI 1000ULL         /* milli-tokens per token (per request) */
#define L7_BUCKET_NS_PER_MS 1000000ULL  /* ns per ms: rate milli-tokens per ms */
#define L7_BUCKET_ORIGIN (1ULL << 62)   /* V at clock 0 */
/* l7_bucket_take(): no token will ever be available (rate or burst 0) */
#define L7_BUCKET_NEVER (~0ULL)
/* l7_bucket_take_shared(): every compare-and-swap lost its race */
#define L7_BUCKET_BUSY (~0ULL - 1)
#define L7_BUCKET_TRIES 4               /* compare-and-swap attempts in BPF */

/* The route's milli-token clock at `now_ns` (a monotonic clock). */
L7_INLINE __u64 l7_bucket_clock(__u64 now_ns, __u32 rate)
{
	return L7_BUCKET_ORIGIN + now_ns / L7_BUCKET_NS_PER_MS * rate +
	       now_ns % L7_BUCKET_NS_PER_MS * rate / L7_BUCKET_NS_PER_MS;
}

/*
 * The decision for a bucket whose empty mark is `e`, at clock `v`: 0 when a
 * token is there (*next: the mark after taking it), otherwise the
 * milliseconds until one is (at least 1; at most 1000 for rate >= 1), or
 * L7_BUCKET_NEVER. A mark ahead of the clock (another taker's clock read
 * later than this one's) is an empty bucket.
 */
L7_INLINE __u64 l7_bucket_decide(__u64 e, __u64 v, __u32 rate, __u32 burst, __u64 *next)
{
	__u64 cap = (__u64)burst * L7_BUCKET_MILLI;
	__u64 tokens = v > e ? v - e : 0;

	if (tokens > cap)
		tokens = cap;
	if (tokens >= L7_BUCKET_MILLI) {
		*next = v - tokens + L7_BUCKET_MILLI;
		return 0;
	}
	if (!rate || !burst)
		return L7_BUCKET_NEVER;
	return (L7_BUCKET_MILLI - tokens + rate - 1) / rate;
}

/* Takes a token from a bucket nobody else writes (the slow path's keyed
 * buckets): as l7_bucket_decide(). */
L7_INLINE __u64 l7_bucket_take(__u64 *bucket, __u64 now_ns, __u32 rate, __u32 burst)
{
	__u64 next = 0;
	__u64 wait = l7_bucket_decide(*bucket, l7_bucket_clock(now_ns, rate), rate, burst, &next);

	if (!wait)
		*bucket = next;
	return wait;
}

/*
 * Takes a token from a bucket the kernel and the daemon share: as
 * l7_bucket_decide(), or L7_BUCKET_BUSY after `tries` lost races (each lost
 * race is another taker's success: lock-free). The clock is read after the
 * mark, so that a mark never runs ahead of this taker's clock; `now` reads
 * it (bpf_ktime_get_ns, or CLOCK_MONOTONIC in the daemon: the same clock).
 */
#define L7_BUCKET_TAKE_SHARED(bucket, now, rate, burst, tries, out)			\
	do {										\
		__u64 e_, next_ = 0, wait_;						\
		int try_;								\
											\
		(out) = L7_BUCKET_BUSY;							\
		for (try_ = 0; try_ < (tries); try_++) {				\
			e_ = *(volatile __u64 *)(bucket);				\
			wait_ = l7_bucket_decide(e_, l7_bucket_clock((now), (rate)),	\
						 (rate), (burst), &next_);		\
			if (wait_ ||							\
			    __sync_val_compare_and_swap((bucket), e_, next_) == e_) {	\
				(out) = wait_;						\
				break;							\
			}								\
		}									\
	} while (0)

/* Gives back the token a take returned 0 for (see above). */
L7_INLINE void l7_bucket_refund(__u64 *bucket)
{
	__sync_fetch_and_add(bucket, (__u64)0 - L7_BUCKET_MILLI);
}

#endif /* L7_BUCKET_H */
