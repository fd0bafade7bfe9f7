/* SPDX-License-Identifier: (GPL-2.0-only WITH Linux-syscall-note) OR BSD-2-Clause */
/*
 * Pure-C xxh64 and strict base64url decoding for data-plane programs that
 * cannot call l7fast.ko (socket programs on 6.1, or no module loaded), and
 * the baseline the kfuncs are measured against.
 *
 * Compiles as BPF (clang -target bpf) and natively; no kernel or libc
 * dependencies; every loop is bounded by L7F_PB_MAX.
 *
 * BPF contract: src points into map-value memory (a global or an array
 * map) of at least L7F_PB_BUF bytes, because the verifier checks the loop
 * bounds, not len, and 8-byte loads are unaligned (allowed for map values
 * on x86-64 and arm64, never for the stack).  dst likewise holds at least
 * L7F_PB_DST_BUF bytes.
 */
#ifndef L7FAST_PUREBPF_H
#define L7FAST_PUREBPF_H

#include <linux/types.h>

#define L7F_PB_MAX	2048U			/* longest input */
#define L7F_PB_BUF	(L7F_PB_MAX + 32U)	/* source buffer size */
#define L7F_PB_DST_BUF	(L7F_PB_MAX / 4U * 3U + 4U)

#ifdef __bpf__
#define L7F_PB_INLINE static __attribute__((always_inline)) inline
#else
#define L7F_PB_INLINE static inline
#endif

#define L7F_PB_P64_1 0x9E3779B185EBCA87ULL
#define L7F_PB_P64_2 0xC2B2AE3D27D4EB4FULL
#define L7F_PB_P64_3 0x165667B19E3779F9ULL
#define L7F_PB_P64_4 0x85EBCA77C2B2AE63ULL
#define L7F_PB_P64_5 0x27D4EB2F165667C5ULL

L7F_PB_INLINE __u64 l7f_pb_rotl64(__u64 x, unsigned int r)
{
	return (x << r) | (x >> (64 - r));
}

/* Little-endian loads; BPF on x86-64/arm64 is little-endian too. */
L7F_PB_INLINE __u64 l7f_pb_read64(const __u8 *p)
{
#ifdef __bpf__
	return *(const __u64 *)p;
#else
	__u64 v;

	__builtin_memcpy(&v, p, sizeof(v));
	return v;
#endif
}

L7F_PB_INLINE __u32 l7f_pb_read32(const __u8 *p)
{
#ifdef __bpf__
	return *(const __u32 *)p;
#else
	__u32 v;

	__builtin_memcpy(&v, p, sizeof(v));
	return v;
#endif
}

L7F_PB_INLINE __u64 l7f_pb_xxh64_round(__u64 acc, __u64 input)
{
	acc += input * L7F_PB_P64_2;
	acc = l7f_pb_rotl64(acc, 31);
	return acc * L7F_PB_P64_1;
}

L7F_PB_INLINE __u64 l7f_pb_xxh64_merge(__u64 acc, __u64 val)
{
	acc ^= l7f_pb_xxh64_round(0, val);
	return acc * L7F_PB_P64_1 + L7F_PB_P64_4;
}

/* XXH64 of src[0..len), len <= L7F_PB_MAX (longer input is cut there). */
L7F_PB_INLINE __u64 l7f_pb_xxh64(const __u8 *src, __u32 len, __u64 seed)
{
	__u64 v1, v2, v3, v4, h;
	__u32 i, off;

	if (len > L7F_PB_MAX)
		len = L7F_PB_MAX;

	if (len >= 32) {
		v1 = seed + L7F_PB_P64_1 + L7F_PB_P64_2;
		v2 = seed + L7F_PB_P64_2;
		v3 = seed;
		v4 = seed - L7F_PB_P64_1;
		for (i = 0; i < L7F_PB_MAX / 32; i++) {
			if (i * 32 + 32 > len)
				break;
			v1 = l7f_pb_xxh64_round(v1, l7f_pb_read64(src + i * 32));
			v2 = l7f_pb_xxh64_round(v2, l7f_pb_read64(src + i * 32 + 8));
			v3 = l7f_pb_xxh64_round(v3, l7f_pb_read64(src + i * 32 + 16));
			v4 = l7f_pb_xxh64_round(v4, l7f_pb_read64(src + i * 32 + 24));
		}
		h = l7f_pb_rotl64(v1, 1) + l7f_pb_rotl64(v2, 7) +
		    l7f_pb_rotl64(v3, 12) + l7f_pb_rotl64(v4, 18);
		h = l7f_pb_xxh64_merge(h, v1);
		h = l7f_pb_xxh64_merge(h, v2);
		h = l7f_pb_xxh64_merge(h, v3);
		h = l7f_pb_xxh64_merge(h, v4);
	} else {
		h = seed + L7F_PB_P64_5;
	}
	h += len;

	/*
	 * Derive the tail offset from len rather than from the loop so the
	 * verifier sees one tail path, not one per loop exit.
	 */
	off = len & ~31U;
	for (i = 0; i < 3; i++) {
		if (off + 8 > len)
			break;
		h ^= l7f_pb_xxh64_round(0, l7f_pb_read64(src + off));
		h = l7f_pb_rotl64(h, 27) * L7F_PB_P64_1 + L7F_PB_P64_4;
		off += 8;
	}
	if (off + 4 <= len) {
		h ^= (__u64)l7f_pb_read32(src + off) * L7F_PB_P64_1;
		h = l7f_pb_rotl64(h, 23) * L7F_PB_P64_2 + L7F_PB_P64_3;
		off += 4;
	}
	for (i = 0; i < 3; i++) {
		if (off >= len)
			break;
		h ^= src[off] * L7F_PB_P64_5;
		h = l7f_pb_rotl64(h, 11) * L7F_PB_P64_1;
		off++;
	}
	h ^= h >> 33;
	h *= L7F_PB_P64_2;
	h ^= h >> 29;
	h *= L7F_PB_P64_3;
	h ^= h >> 32;
	return h;
}

/*
 * base64url value + 1 per byte, 0 for bytes outside the alphabet (so the
 * table needs no overriding initialisers).  volatile keeps clang-14 from
 * placing it in .rodata.cst*, which libbpf 1.1 rejects.
 */
#define L7F_PB_B64(c, v) [c] = (v) + 1
static const volatile __u8 l7f_pb_b64url_rev[256] = {
	L7F_PB_B64('A', 0), L7F_PB_B64('B', 1), L7F_PB_B64('C', 2),
	L7F_PB_B64('D', 3), L7F_PB_B64('E', 4), L7F_PB_B64('F', 5),
	L7F_PB_B64('G', 6), L7F_PB_B64('H', 7), L7F_PB_B64('I', 8),
	L7F_PB_B64('J', 9), L7F_PB_B64('K', 10), L7F_PB_B64('L', 11),
	L7F_PB_B64('M', 12), L7F_PB_B64('N', 13), L7F_PB_B64('O', 14),
	L7F_PB_B64('P', 15), L7F_PB_B64('Q', 16), L7F_PB_B64('R', 17),
	L7F_PB_B64('S', 18), L7F_PB_B64('T', 19), L7F_PB_B64('U', 20),
	L7F_PB_B64('V', 21), L7F_PB_B64('W', 22), L7F_PB_B64('X', 23),
	L7F_PB_B64('Y', 24), L7F_PB_B64('Z', 25),
	L7F_PB_B64('a', 26), L7F_PB_B64('b', 27), L7F_PB_B64('c', 28),
	L7F_PB_B64('d', 29), L7F_PB_B64('e', 30), L7F_PB_B64('f', 31),
	L7F_PB_B64('g', 32), L7F_PB_B64('h', 33), L7F_PB_B64('i', 34),
	L7F_PB_B64('j', 35), L7F_PB_B64('k', 36), L7F_PB_B64('l', 37),
	L7F_PB_B64('m', 38), L7F_PB_B64('n', 39), L7F_PB_B64('o', 40),
	L7F_PB_B64('p', 41), L7F_PB_B64('q', 42), L7F_PB_B64('r', 43),
	L7F_PB_B64('s', 44), L7F_PB_B64('t', 45), L7F_PB_B64('u', 46),
	L7F_PB_B64('v', 47), L7F_PB_B64('w', 48), L7F_PB_B64('x', 49),
	L7F_PB_B64('y', 50), L7F_PB_B64('z', 51),
	L7F_PB_B64('0', 52), L7F_PB_B64('1', 53), L7F_PB_B64('2', 54),
	L7F_PB_B64('3', 55), L7F_PB_B64('4', 56), L7F_PB_B64('5', 57),
	L7F_PB_B64('6', 58), L7F_PB_B64('7', 59), L7F_PB_B64('8', 60),
	L7F_PB_B64('9', 61), L7F_PB_B64('-', 62), L7F_PB_B64('_', 63),
};
#undef L7F_PB_B64

/* Value 0..63, or >= 0x80 for a byte outside the alphabet. */
L7F_PB_INLINE __u8 l7f_pb_b64val(__u8 c)
{
	return (__u8)(l7f_pb_b64url_rev[c] - 1);
}

/* Same flags and results as l7f_b64url_decode() (L7F_B64_* values). */
#define L7F_PB_B64_PAD_REQUIRED		(1U << 0)
#define L7F_PB_B64_PAD_FORBIDDEN	(1U << 1)
#define L7F_PB_EINVAL	22
#define L7F_PB_ENOSPC	28
#define L7F_PB_E2BIG	7

L7F_PB_INLINE int l7f_pb_b64url_decode(const __u8 *src, __u32 slen,
				       __u8 *dst, __u32 dst_cap, __u32 flags)
{
	__u32 body = slen, npad = 0, rem, out_len, q, i;
	__u8 bad = 0, a, b, c, d;

	if (flags & ~(L7F_PB_B64_PAD_REQUIRED | L7F_PB_B64_PAD_FORBIDDEN))
		return -L7F_PB_EINVAL;
	if (slen > L7F_PB_MAX)
		return -L7F_PB_E2BIG;
	/*
	 * The masks are no-ops (slen <= L7F_PB_MAX, a power of two) that let
	 * 6.1's verifier bound the index after the 32-bit subtraction.
	 */
	if (slen && src[(slen - 1) & (L7F_PB_MAX - 1)] == '=') {
		npad = (slen > 1 && src[(slen - 2) & (L7F_PB_MAX - 1)] == '=') ?
		       2 : 1;
		body = slen - npad;
	}
	rem = body & 3;
	if (npad) {
		if ((flags & L7F_PB_B64_PAD_FORBIDDEN) || (slen & 3) ||
		    rem + npad != 4)
			return -L7F_PB_EINVAL;
	} else if ((flags & L7F_PB_B64_PAD_REQUIRED) && rem) {
		return -L7F_PB_EINVAL;
	}
	if (rem == 1)
		return -L7F_PB_EINVAL;
	out_len = body / 4 * 3 + (rem ? rem - 1 : 0);
	if (out_len > dst_cap)
		return -L7F_PB_ENOSPC;

	for (q = 0; q < L7F_PB_MAX / 4; q++) {
		if (q * 4 + 4 > body)
			break;
		a = l7f_pb_b64val(src[q * 4]);
		b = l7f_pb_b64val(src[q * 4 + 1]);
		c = l7f_pb_b64val(src[q * 4 + 2]);
		d = l7f_pb_b64val(src[q * 4 + 3]);
		bad |= a | b | c | d;
		dst[q * 3] = a << 2 | b >> 4;
		dst[q * 3 + 1] = b << 4 | c >> 2;
		dst[q * 3 + 2] = c << 6 | d;
	}
	if (rem >= 2) {
		/*
		 * As in xxh64: one tail path whatever the loop did.  body <
		 * L7F_PB_MAX here, so the mask only tells the verifier (6.1
		 * loses the bound of a spilled 32-bit value) what holds.
		 */
		i = body & ((L7F_PB_MAX - 1) & ~3U);
		q = (i >> 2) * 3;
		a = l7f_pb_b64val(src[i]);
		b = l7f_pb_b64val(src[i + 1]);
		bad |= a | b;
		dst[q] = a << 2 | b >> 4;
		if (rem == 3) {
			c = l7f_pb_b64val(src[i + 2]);
			bad |= c;
			dst[q + 1] = b << 4 | c >> 2;
			if (c & 0x03)
				return -L7F_PB_EINVAL;
		} else if (b & 0x0f) {
			return -L7F_PB_EINVAL;
		}
	}
	if (bad & 0xc0)
		return -L7F_PB_EINVAL;
	return (int)out_len;
}

#endif /* L7FAST_PUREBPF_H */
