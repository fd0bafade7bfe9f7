/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Portability layer for code that is compiled both as BPF (clang -target bpf)
 * and natively (l7fastd, unit tests, fuzzers): loops, inlining and the byte
 * window the parsers read from.
 *
 * In BPF, the window is a per-CPU scratch map value and every index is masked
 * with L7_SCRATCH_SIZE - 1, which is what lets the verifier accept variable
 * offsets without a bounds check per byte. Natively the window has a
 * caller-chosen power-of-two size (`mask + 1`) and the very same code runs.
 */
#ifndef L7_COMMON_H
#define L7_COMMON_H

#include "l7fast_abi.h"

#if defined(__bpf__)
#include <bpf/bpf_helpers.h>
#define L7_INLINE static __always_inline
#define L7_CALLBACK static
#define L7_LOOP(n, cb, ctx) bpf_loop((n), (cb), (ctx), 0)
#define L7_UNROLL _Pragma("unroll")
#define L7_STEP __attribute__((noinline))
/* Masks an index in a way the compiler cannot drop, so the verifier sees the
 * bound on the very register used for the access. */
#define L7_IDX(x, mask)                              \
	({                                           \
		__u32 _l7_v = (__u32)(x);            \
		asm volatile("" : "+r"(_l7_v));      \
		_l7_v & (mask);                      \
	})
#else
#include <string.h>
#define L7_INLINE static inline
#define L7_CALLBACK static
#define L7_UNROLL
typedef long (*l7_loop_fn)(__u32 index, void *ctx);
static inline long l7_native_loop(__u32 n, l7_loop_fn cb, void *ctx)
{
	__u32 i;

	for (i = 0; i < n; i++)
		if (cb(i, ctx))
			return i + 1;
	return n;
}
#define L7_LOOP(n, cb, ctx) l7_native_loop((n), (cb), (ctx))
#define L7_IDX(x, mask) ((__u32)(x) & (mask))
#define L7_STEP static inline
#endif

/* A word another party (the daemon through its mapping, another CPU)
 * changes concurrently: read or written once, as it is. */
#ifndef READ_ONCE
#define READ_ONCE(x) (*(const volatile __typeof__(x) *)&(x))
#endif
#ifndef WRITE_ONCE
#define WRITE_ONCE(x, v) (*(volatile __typeof__(x) *)&(x) = (v))
#endif

/*
 * Size of the byte window the parsers read: the BPF scratch in the kernel,
 * the largest header block the slow path accepts natively. A build can pick
 * another power of two (the differential tests build the kernel's size
 * natively).
 */
#ifndef L7_WS_BUF
#if defined(__bpf__)
#define L7_WS_BUF L7_SCRATCH_SIZE
#else
#define L7_WS_BUF L7_USER_MAX_HDR_BLOCK
#endif
#endif
#define L7_WS_MASK (L7_WS_BUF - 1)
#define L7_WINDOW_SLACK 16
/* zero a struct in C, C++ and BPF alike (no designated initialisers: C++
 * wants them complete and in order) */
#define L7_ZERO(x) __builtin_memset(&(x), 0, sizeof(x))
#define L7_WMASK(c) ((__u32)L7_WS_MASK)

/* A byte window: `buf` holds `len` valid bytes and L7_WS_BUF + L7_WINDOW_SLACK
 * addressable bytes, so an 8-byte load at any masked offset stays inside. */
struct l7_window {
	const __u8 *buf;
	__u32 len;
	__u32 pad;
};

L7_INLINE __u8 l7_at(const struct l7_window *w, __u32 i)
{
	return w->buf[L7_IDX(i, L7_WMASK(w))];
}

/* Little-endian 8-byte load at byte offset i; bytes at or past w->len are
 * replaced by `fill` so SWAR tests never see stale scratch contents. */
L7_INLINE __u64 l7_load64(const struct l7_window *w, __u32 i, __u8 fill)
{
	__u64 v;
	__u32 valid;

#if defined(__bpf__)
	v = *(const __u64 *)(w->buf + L7_IDX(i, L7_WMASK(w)));
#else
	memcpy(&v, w->buf + (i & L7_WMASK(w)), sizeof(v));
#endif
	valid = w->len > i ? w->len - i : 0;
	if (valid < 8) {
		__u64 keep = valid ? (~0ULL >> (64 - 8 * valid)) : 0;

		v = (v & keep) | (((__u64)fill * 0x0101010101010101ULL) & ~keep);
	}
	return v;
}

#define L7_ONES 0x0101010101010101ULL
#define L7_HIGHS 0x8080808080808080ULL

/* Non-zero iff some byte of x equals c (exact existence test). */
L7_INLINE __u64 l7_has_byte(__u64 x, __u8 c)
{
	__u64 y = x ^ (L7_ONES * c);

	return (y - L7_ONES) & ~y & L7_HIGHS;
}

/* Non-zero iff some byte of x is < n, for n <= 128. */
L7_INLINE __u64 l7_has_less(__u64 x, __u8 n)
{
	return (x - L7_ONES * n) & ~x & L7_HIGHS;
}

/* Bytes of x in m < b < n (m < 128, n <= 128) get their high bit set, with
 * no carry between bytes; bytes >= 0x80 never do. */
L7_INLINE __u64 l7_between(__u64 x, __u8 m, __u8 n)
{
	__u64 t = x & (L7_ONES * 127);

	return ((L7_ONES * (127 + n) - t) & ~x & (t + L7_ONES * (127 - m))) & L7_HIGHS;
}

/* Bytes of x equal to c get their high bit set (exact per byte). */
L7_INLINE __u64 l7_eq_mask(__u64 x, __u8 c)
{
	__u64 y = x ^ (L7_ONES * c);
	__u64 t = (y & (L7_ONES * 127)) + L7_ONES * 127;

	return ~(t | y | (L7_ONES * 127));
}

/* The high bits of the low n bytes (n in 0..8). */
L7_INLINE __u64 l7_low_highs(__u32 n)
{
	return n >= 8 ? L7_HIGHS : (n ? L7_HIGHS & (~0ULL >> (64 - 8 * n)) : 0);
}

/*
 * Index of the lowest byte of a non-zero high-bit mask, without a branch:
 * its lowest high bit alone is 0x80 << 8k, and 2^8k times
 * 0x0001020304050607 has k in its top byte. Branches here gave the
 * verifier eight values to carry through every line-end loop that calls
 * this, and 6.18.44's verifier no longer prunes them (over 1M instructions
 * for l7_req_msg); one unknown scalar in 0..7 is one state.
 */
L7_INLINE __u32 l7_lowest_byte(__u64 mask)
{
	__u64 low = mask & (0 - mask);

	return (__u32)(((low >> 7) * 0x0001020304050607ULL) >> 56) & 7;
}

/* ASCII lower-casing of 8 bytes at once; other bytes are unchanged. */
L7_INLINE __u64 l7_lower64(__u64 x)
{
	__u64 h = x & ~L7_HIGHS;
	__u64 ge_a = h + L7_ONES * (0x80 - 'A');
	__u64 ge_z1 = h + L7_ONES * (0x80 - 'Z' - 1);
	__u64 upper = ge_a & ~ge_z1 & ~x & L7_HIGHS;

	return x | (upper >> 2);
}

L7_INLINE __u8 l7_lower(__u8 c)
{
	return (c >= 'A' && c <= 'Z') ? (__u8)(c + 32) : c;
}

/* Keyed 64-bit hash over little-endian words. The state after k whole words
 * is kept so the hashes of several prefixes of one string cost one pass. */
#define L7_HASH_M1 0x9E3779B97F4A7C15ULL
#define L7_HASH_M2 0xC2B2AE3D27D4EB4FULL

L7_INLINE __u64 l7_hash_init(__u64 seed)
{
	return seed ^ L7_HASH_M2;
}

L7_INLINE __u64 l7_hash_word(__u64 h, __u64 w)
{
	h ^= w * L7_HASH_M1;
	h = (h << 31) | (h >> 33);
	return h * L7_HASH_M2;
}

L7_INLINE __u64 l7_hash_final(__u64 h, __u32 len)
{
	h ^= (__u64)len * L7_HASH_M1;
	h ^= h >> 29;
	h *= L7_HASH_M2;
	h ^= h >> 32;
	return h;
}

/* Keep the low n bytes (n in 0..7) of a little-endian word. */
L7_INLINE __u64 l7_low_bytes(__u64 w, __u32 n)
{
	return n ? (w & (~0ULL >> (64 - 8 * n))) : 0;
}


#define L7_STR_WORDS (L7_MAX_MATCH_STR / 8)

struct l7_strscan {
	struct l7_window w;
	const __u8 *str;
	__u64 h;
	__u32 off;
	__u32 len;
	__u32 lower;
	__u32 diff;
};

L7_INLINE __u64 l7_str_word(const struct l7_strscan *c, __u32 i)
{
	__u64 x = l7_load64(&c->w, c->off + i * 8, 0);

	if (c->lower)
		x = l7_lower64(x);
	if (c->len - i * 8 < 8)
		x = l7_low_bytes(x, c->len - i * 8);
	return x;
}

L7_CALLBACK long l7_hash_cb(__u32 i, void *ctx)
{
	struct l7_strscan *c = (struct l7_strscan *)ctx;

	if (i * 8 >= c->len)
		return 1;
	c->h = l7_hash_word(c->h, l7_str_word(c, i));
	return 0;
}

/* Keyed hash of w[off, off+len), len <= L7_MAX_MATCH_STR, optionally
 * lower-cased. Equal to l7_hash_str() over the same bytes. Strings of up
 * to 16 bytes (most names, hosts and prefixes) take no loop: a loop
 * iteration costs a call in BPF. */
L7_INLINE __u64 l7_hash_window(const struct l7_window *w, __u32 off, __u32 len, __u64 seed,
			       int lower)
{
	struct l7_strscan c;

	L7_ZERO(c);
	c.w = *w;
	c.h = l7_hash_init(seed);
	c.off = off;
	c.len = len;
	c.lower = (__u32)lower;
	if (len <= 16) {
		if (len)
			c.h = l7_hash_word(c.h, l7_str_word(&c, 0));
		if (len > 8)
			c.h = l7_hash_word(c.h, l7_str_word(&c, 1));
	} else {
		L7_LOOP(L7_STR_WORDS, l7_hash_cb, &c);
	}
	return l7_hash_final(c.h, len);
}

L7_CALLBACK long l7_eq_cb(__u32 i, void *ctx)
{
	struct l7_strscan *c = (struct l7_strscan *)ctx;
	__u64 y;

	if (i * 8 >= c->len)
		return 1;
#if defined(__bpf__)
	y = *(const __u64 *)(c->str + L7_IDX(i, L7_STR_WORDS - 1) * 8);
#else
	memcpy(&y, c->str + i * 8, sizeof(y));
#endif
	if (c->len - i * 8 < 8)
		y = l7_low_bytes(y, c->len - i * 8);
	if (l7_str_word(c, i) != y) {
		c->diff = 1;
		return 1;
	}
	return 0;
}

/* w[off, off+len) equals str[0, len), len <= L7_MAX_MATCH_STR; str is
 * L7_MAX_MATCH_STR bytes, zero-padded; `lower` lower-cases the window side. */
L7_INLINE int l7_window_eq(const struct l7_window *w, __u32 off, __u32 len, const __u8 *str,
			   int lower)
{
	struct l7_strscan c;

	L7_ZERO(c);
	c.w = *w;
	c.str = str;
	c.off = off;
	c.len = len;
	c.lower = (__u32)lower;
	if (len <= 16) {
		/* as l7_eq_cb, without the loop */
		if (len)
			l7_eq_cb(0, &c);
		if (len > 8 && !c.diff)
			l7_eq_cb(1, &c);
	} else {
		L7_LOOP(L7_STR_WORDS, l7_eq_cb, &c);
	}
	return !c.diff;
}

#if !defined(__bpf__)
/* Native twin of l7_hash_window() for the policy compiler. */
static inline __u64 l7_hash_str(__u64 seed, const void *p, __u32 len, int lower)
{
	const __u8 *b = (const __u8 *)p;
	__u64 h = l7_hash_init(seed);
	__u32 i;

	for (i = 0; i < len; i += 8) {
		__u64 x = 0;
		__u32 n = len - i < 8 ? len - i : 8;

		memcpy(&x, b + i, n);
		if (lower)
			x = l7_lower64(x);
		h = l7_hash_word(h, x);
	}
	return l7_hash_final(h, len);
}
#endif

/* ---- telemetry classes, shared by the data plane and the slow path ------ */

/* Bucket of l7_route_stats.latency for a latency in ns (see L7_LAT_BUCKETS):
 * floor(log2(ns >> 10)), at most the last bucket, by halving the range. */
L7_INLINE __u32 l7_lat_bucket(__u64 ns)
{
	__u32 b = 0;

	ns >>= 10;
	if (ns >> (L7_LAT_BUCKETS - 1))
		return L7_LAT_BUCKETS - 1;
	if (ns >> 8) { b += 8; ns >>= 8; }
	if (ns >> 4) { b += 4; ns >>= 4; }
	if (ns >> 2) { b += 2; ns >>= 2; }
	if (ns >> 1)
		b += 1;
	return b;
}

/* Index into l7_route_stats.status: 1..5 for 1xx..5xx, 0 otherwise. */
L7_INLINE __u32 l7_status_class(__u32 st)
{
	/* comparisons, not st / 100: the verifier must see the bound */
	if (st >= 600 || st < 100)
		return 0;
	if (st >= 500)
		return 5;
	if (st >= 400)
		return 4;
	if (st >= 300)
		return 3;
	if (st >= 200)
		return 2;
	return 1;
}

/* l7_route_stats.codes' index of status `st`, or L7_N_KERNEL_CODES when the
 * data plane counts it by its class only. */
L7_INLINE __u32 l7_code_slot(__u32 st)
{
#define L7_CODE_CASE(i, code) \
	case code:            \
		return i;
	switch (st) {
		L7_KERNEL_CODES(L7_CODE_CASE)
	}
#undef L7_CODE_CASE
	return L7_N_KERNEL_CODES;
}

#endif /* L7_COMMON_H */
