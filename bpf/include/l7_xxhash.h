/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * XXH64 for keys that live in a byte window (struct l7_window): the hash
 * ring-hash and Maglev load balancing use for request keys (header and
 * cookie values), computed where the parser left them, without a copy.
 * Compiles as BPF and natively from the same text; the daemon hashes its
 * keys with l7_xxh64() below, built from the very same step functions, and
 * the unit tests hold both to the published XXH64 vectors and to each other
 * (tests/unit/xxhash_test.cpp).
 *
 * Why not kmod/include/l7fast_purebpf.h's l7f_pb_xxh64(): its BPF contract
 * wants the input at the start of a map-value buffer of L7F_PB_BUF bytes,
 * so a key in the middle of the parser's scratch would need a copy first,
 * and it hashes at most 2048 bytes (longer input is cut, which would make
 * the kernel disagree with the slow path). Both compute standard XXH64, as
 * does the module kfunc l7f_xxh64() (the kernel's lib/xxhash): a data-plane
 * program may use whichever it has; the results are identical.
 *
 * BPF contract: as for every window reader, w->buf is map-value memory of
 * L7_WS_BUF + L7_WINDOW_SLACK bytes and every load is masked. The caller
 * passes off + len <= w->len (bytes of the key that lie past w->len would
 * read as zero). The 32-byte stripes run in L7_LOOP (bpf_loop), the tail
 * in fixed unrolled steps.
 */
#ifndef L7_XXHASH_H
#define L7_XXHASH_H

#include "l7_common.h"

#define L7_XXH_P1 0x9E3779B185EBCA87ULL
#define L7_XXH_P2 0xC2B2AE3D27D4EB4FULL
#define L7_XXH_P3 0x165667B19E3779F9ULL
#define L7_XXH_P4 0x85EBCA77C2B2AE63ULL
#define L7_XXH_P5 0x27D4EB2F165667C5ULL

L7_INLINE __u64 l7_xxh_rotl(__u64 x, unsigned int r)
{
	return (x << r) | (x >> (64 - r));
}

/* One lane of a 32-byte stripe. */
L7_INLINE __u64 l7_xxh_round(__u64 acc, __u64 input)
{
	acc += input * L7_XXH_P2;
	acc = l7_xxh_rotl(acc, 31);
	return acc * L7_XXH_P1;
}

L7_INLINE __u64 l7_xxh_merge(__u64 h, __u64 lane)
{
	h ^= l7_xxh_round(0, lane);
	return h * L7_XXH_P1 + L7_XXH_P4;
}

/* The accumulator after the stripes (len >= 32), or the short-input seed. */
L7_INLINE __u64 l7_xxh_converge(__u64 v1, __u64 v2, __u64 v3, __u64 v4)
{
	__u64 h = l7_xxh_rotl(v1, 1) + l7_xxh_rotl(v2, 7) + l7_xxh_rotl(v3, 12) +
		  l7_xxh_rotl(v4, 18);

	h = l7_xxh_merge(h, v1);
	h = l7_xxh_merge(h, v2);
	h = l7_xxh_merge(h, v3);
	return l7_xxh_merge(h, v4);
}

/* Tail steps: a whole little-endian word, a 4-byte half word, one byte. */
L7_INLINE __u64 l7_xxh_tail8(__u64 h, __u64 word)
{
	h ^= l7_xxh_round(0, word);
	return l7_xxh_rotl(h, 27) * L7_XXH_P1 + L7_XXH_P4;
}

L7_INLINE __u64 l7_xxh_tail4(__u64 h, __u32 half)
{
	h ^= (__u64)half * L7_XXH_P1;
	return l7_xxh_rotl(h, 23) * L7_XXH_P2 + L7_XXH_P3;
}

L7_INLINE __u64 l7_xxh_tail1(__u64 h, __u8 b)
{
	h ^= (__u64)b * L7_XXH_P5;
	return l7_xxh_rotl(h, 11) * L7_XXH_P1;
}

L7_INLINE __u64 l7_xxh_avalanche(__u64 h)
{
	h ^= h >> 33;
	h *= L7_XXH_P2;
	h ^= h >> 29;
	h *= L7_XXH_P3;
	h ^= h >> 32;
	return h;
}

/* ---- over a window -------------------------------------------------------- */

struct l7_xxh_scan {
	struct l7_window w;
	__u64 v1, v2, v3, v4;
	__u32 off;
	__u32 pad;
};

/*
 * Little-endian 8 bytes at i, all below w->len (the stripes are). Unlike
 * l7_load64() there is no fill branch: on its path the verifier would see a
 * constant word, the lanes would become different constants every
 * iteration and the bpf_loop callback would never converge (measured on
 * 6.18: over the 1M instruction limit for an 8 KiB key).
 */
L7_INLINE __u64 l7_xxh_word(const struct l7_window *w, __u32 i)
{
	__u64 v;

#if defined(__bpf__)
	v = *(const __u64 *)(w->buf + L7_IDX(i, L7_WMASK(w)));
#else
	memcpy(&v, w->buf + (i & L7_WMASK(w)), sizeof(v));
#endif
	return v;
}

L7_CALLBACK long l7_xxh_stripe_cb(__u32 i, void *ctx)
{
	struct l7_xxh_scan *s = (struct l7_xxh_scan *)ctx;
	__u32 p = s->off + i * 32;

	s->v1 = l7_xxh_round(s->v1, l7_xxh_word(&s->w, p));
	s->v2 = l7_xxh_round(s->v2, l7_xxh_word(&s->w, p + 8));
	s->v3 = l7_xxh_round(s->v3, l7_xxh_word(&s->w, p + 16));
	s->v4 = l7_xxh_round(s->v4, l7_xxh_word(&s->w, p + 24));
	return 0;
}

/* XXH64(w[off, off + len), seed); off + len <= w->len <= L7_WS_BUF. */
L7_INLINE __u64 l7_xxh64_window(const struct l7_window *w, __u32 off, __u32 len, __u64 seed)
{
	struct l7_xxh_scan s;
	__u64 h;
	__u32 t, rem;
	int k;

	L7_ZERO(s);
	s.w = *w;
	s.off = off;
	if (len >= 32) {
		s.v1 = seed + L7_XXH_P1 + L7_XXH_P2;
		s.v2 = seed + L7_XXH_P2;
		s.v3 = seed;
		s.v4 = seed - L7_XXH_P1;
		L7_LOOP(len / 32, l7_xxh_stripe_cb, &s);
		h = l7_xxh_converge(s.v1, s.v2, s.v3, s.v4);
	} else {
		h = seed + L7_XXH_P5;
	}
	h += len;

	t = off + (len & ~31u);
	rem = len & 31;
	L7_UNROLL
	for (k = 0; k < 3; k++) {
		if (rem >= 8) {
			h = l7_xxh_tail8(h, l7_load64(w, t, 0));
			t += 8;
			rem -= 8;
		}
	}
	if (rem >= 4) {
		h = l7_xxh_tail4(h, (__u32)l7_load64(w, t, 0));
		t += 4;
		rem -= 4;
	}
	L7_UNROLL
	for (k = 0; k < 3; k++) {
		if (rem) {
			h = l7_xxh_tail1(h, l7_at(w, t));
			t++;
			rem--;
		}
	}
	return l7_xxh_avalanche(h);
}

/*
 * XXH64 of a client address as RequestKey::SourceIp defines the key: the 4
 * (IPv4, in ip[0]) or 16 address bytes in network order, as struct
 * l7_conn_key stores them. `len` is 4 or 16; anything else hashes 16.
 */
L7_INLINE __u64 l7_xxh64_addr(const __u32 *ip, __u32 len, __u64 seed)
{
	__u64 h = seed + L7_XXH_P5;

	if (len == 4) {
		h += 4;
		h = l7_xxh_tail4(h, ip[0]);
	} else {
		h += 16;
		h = l7_xxh_tail8(h, (__u64)ip[0] | ((__u64)ip[1] << 32));
		h = l7_xxh_tail8(h, (__u64)ip[2] | ((__u64)ip[3] << 32));
	}
	return l7_xxh_avalanche(h);
}

#if !defined(__bpf__)
/* XXH64 of any buffer, for the daemon: the step functions above over plain
 * memory instead of a window. */
static inline __u64 l7_xxh64(const void *data, __u64 len, __u64 seed)
{
	const __u8 *p = (const __u8 *)data;
	__u64 h, rem = len, w;
	__u32 half;

	if (len >= 32) {
		__u64 v1 = seed + L7_XXH_P1 + L7_XXH_P2, v2 = seed + L7_XXH_P2;
		__u64 v3 = seed, v4 = seed - L7_XXH_P1, lane[4];

		for (; rem >= 32; rem -= 32, p += 32) {
			memcpy(lane, p, sizeof(lane));
			v1 = l7_xxh_round(v1, lane[0]);
			v2 = l7_xxh_round(v2, lane[1]);
			v3 = l7_xxh_round(v3, lane[2]);
			v4 = l7_xxh_round(v4, lane[3]);
		}
		h = l7_xxh_converge(v1, v2, v3, v4);
	} else {
		h = seed + L7_XXH_P5;
	}
	h += len;
	for (; rem >= 8; rem -= 8, p += 8) {
		memcpy(&w, p, sizeof(w));
		h = l7_xxh_tail8(h, w);
	}
	if (rem >= 4) {
		memcpy(&half, p, sizeof(half));
		h = l7_xxh_tail4(h, half);
		rem -= 4;
		p += 4;
	}
	for (; rem; rem--, p++)
		h = l7_xxh_tail1(h, *p);
	return l7_xxh_avalanche(h);
}
#endif

#endif /* L7_XXHASH_H */
