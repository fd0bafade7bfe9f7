/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Token-bucket arithmetic of route rate limits: the slow path's
 * (proxy/RateLimiter), written to compile as BPF too (no helpers, no calls,
 * no maps here: it could run under a bpf_spin_lock), so that kernel rate
 * limits would admit the same requests from the same bucket state. No
 * data-plane program includes it yet: rate-limited routes are placed in
 * user space.
 *
 * Fixed point: a bucket holds milli-tokens; a request takes one token
 * (L7_BUCKET_MILLI). `rate` tokens per second refill rate milli-tokens per
 * millisecond, i.e. elapsed_ns * rate / 1e6 milli-tokens, up to the capacity
 * burst * 1000; the time behind a fraction of a milli-token is carried over
 * (last_ns advances by the time the credited milli-tokens stand for). Every
 * product is bounded: the elapsed time is capped at the
 * time that refills the bucket completely, so elapsed_ns * rate stays below
 * burst * 1000 * 1e6 + rate < 2^63 for any __u32 rate and burst.
 */
#ifndef L7_BUCKET_H
#define L7_BUCKET_H

#include "l7_common.h"

#define L7_BUCKET_MILLI 1000ULL         /* milli-tokens per token (per request) */
#define L7_BUCKET_NS_PER_MS 1000000ULL  /* ns per ms: rate milli-tokens per ms */
/* l7_bucket_take(): no token will ever be available (rate or burst 0) */
#define L7_BUCKET_NEVER (~0ULL)

struct l7_bucket {
	__u64 tokens_milli; /* milli-tokens left after the last take */
	__u64 last_ns;      /* time of the last take; 0: a fresh bucket (full) */
};

/*
 * Refills `b` up to `now_ns` (a monotonic clock, never 0) and takes one
 * token. Returns 0 when a token was taken; otherwise the bucket keeps what
 * it has and the return value is the number of milliseconds until a token
 * is available (at least 1), or L7_BUCKET_NEVER. A clock that goes back
 * refills nothing and does not move last_ns back. `b` is always written
 * back: refill and carry persist when no token was taken.
 */
L7_INLINE __u64 l7_bucket_take(struct l7_bucket *b, __u64 now_ns, __u32 rate, __u32 burst)
{
	__u64 cap = (__u64)burst * L7_BUCKET_MILLI;
	__u64 tokens = b->tokens_milli;
	__u64 deficit;

	if (b->last_ns == 0) {
		tokens = cap;
		b->last_ns = now_ns;
	} else if (now_ns > b->last_ns) {
		__u64 elapsed = now_ns - b->last_ns;
		__u64 missing = tokens < cap ? cap - tokens : 0;

		/* missing * 1e6 < 2^32 * 1000 * 1e6 < 2^63: no overflow; past
		 * full_ns the refill is at least `missing` */
		if (rate) {
			__u64 full_ns = missing * L7_BUCKET_NS_PER_MS / rate + 1;

			if (elapsed >= full_ns) {
				tokens = cap;
				b->last_ns = now_ns;
			} else {
				__u64 refill = elapsed * rate / L7_BUCKET_NS_PER_MS;

				/* last_ns moves only by the time the credited
				 * milli-tokens stand for: the remainder counts
				 * next time, so frequent calls at low rates
				 * still refill */
				tokens += refill;
				b->last_ns += refill * L7_BUCKET_NS_PER_MS / rate;
			}
		} else {
			b->last_ns = now_ns;
		}
	}
	if (tokens > cap)  /* burst lowered by a reload */
		tokens = cap;
	if (tokens >= L7_BUCKET_MILLI) {
		b->tokens_milli = tokens - L7_BUCKET_MILLI;
		return 0;
	}
	b->tokens_milli = tokens;
	if (!rate || !burst)
		return L7_BUCKET_NEVER;
	deficit = L7_BUCKET_MILLI - tokens;
	return (deficit + rate - 1) / rate;
}

#endif /* L7_BUCKET_H */
