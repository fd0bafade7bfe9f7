// SPDX-License-Identifier: GPL-2.0-only
/*
 * Strict base64url (RFC 4648 section 5).  Strictness matters because JWS
 * compares signatures over the encoded form: an accepting decoder that
 * ignores trailing bits or stray bytes lets many encodings map to one
 * value, which breaks any cache keyed on the token bytes.
 */
#include <linux/errno.h>
#include <linux/kernel.h>
#include "l7fast_internal.h"

static const char b64url_alphabet[64] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/*
 * Decoding table: value + 1 for the 64 alphabet bytes, 0 for every other
 * byte, so that no initialiser overrides another.  One load per character
 * instead of a chain of range checks.
 */
#define B64(c, v) [(u8)(c)] = (v) + 1
static const u8 b64url_dec[256] = {
	B64('A', 0), B64('B', 1), B64('C', 2), B64('D', 3), B64('E', 4),
	B64('F', 5), B64('G', 6), B64('H', 7), B64('I', 8), B64('J', 9),
	B64('K', 10), B64('L', 11), B64('M', 12), B64('N', 13), B64('O', 14),
	B64('P', 15), B64('Q', 16), B64('R', 17), B64('S', 18), B64('T', 19),
	B64('U', 20), B64('V', 21), B64('W', 22), B64('X', 23), B64('Y', 24),
	B64('Z', 25), B64('a', 26), B64('b', 27), B64('c', 28), B64('d', 29),
	B64('e', 30), B64('f', 31), B64('g', 32), B64('h', 33), B64('i', 34),
	B64('j', 35), B64('k', 36), B64('l', 37), B64('m', 38), B64('n', 39),
	B64('o', 40), B64('p', 41), B64('q', 42), B64('r', 43), B64('s', 44),
	B64('t', 45), B64('u', 46), B64('v', 47), B64('w', 48), B64('x', 49),
	B64('y', 50), B64('z', 51), B64('0', 52), B64('1', 53), B64('2', 54),
	B64('3', 55), B64('4', 56), B64('5', 57), B64('6', 58), B64('7', 59),
	B64('8', 60), B64('9', 61), B64('-', 62), B64('_', 63),
};
#undef B64

/* 0..63, or 0xff (bit 7 set) for a byte outside the alphabet. */
static inline u8 b64url_val(u8 c)
{
	return b64url_dec[c] - 1;
}

int l7f_b64url_decode_buf(const u8 *src, u32 slen, u8 *dst, u32 dlen,
			  u32 flags)
{
	u32 body = slen, npad = 0, rem, out_len, i, o = 0;
	u8 bad = 0, a, b, c, d;

	if (flags & ~(L7F_B64_PAD_REQUIRED | L7F_B64_PAD_FORBIDDEN))
		return -EINVAL;
	if ((flags & L7F_B64_PAD_REQUIRED) && (flags & L7F_B64_PAD_FORBIDDEN))
		return -EINVAL;
	if (slen > L7F_DATA_MAX)
		return -E2BIG;

	if (slen && src[slen - 1] == '=') {
		npad = (slen > 1 && src[slen - 2] == '=') ? 2 : 1;
		body = slen - npad;
	}
	rem = body % 4;
	if (npad) {
		/* Padding completes the last quantum exactly, nothing else. */
		if ((flags & L7F_B64_PAD_FORBIDDEN) || slen % 4 ||
		    rem + npad != 4)
			return -EINVAL;
	} else if ((flags & L7F_B64_PAD_REQUIRED) && rem) {
		return -EINVAL;
	}
	if (rem == 1)
		return -EINVAL;

	out_len = body / 4 * 3 + (rem ? rem - 1 : 0);
	if (out_len > dlen)
		return -ENOSPC;

	for (i = 0; i + 4 <= body; i += 4) {
		a = b64url_val(src[i]);
		b = b64url_val(src[i + 1]);
		c = b64url_val(src[i + 2]);
		d = b64url_val(src[i + 3]);
		/* Valid values are < 64, so bit 7 marks an invalid byte. */
		bad |= a | b | c | d;
		dst[o++] = a << 2 | b >> 4;
		dst[o++] = b << 4 | c >> 2;
		dst[o++] = c << 6 | d;
	}
	if (rem >= 2) {
		a = b64url_val(src[i]);
		b = b64url_val(src[i + 1]);
		bad |= a | b;
		dst[o++] = a << 2 | b >> 4;
		if (rem == 3) {
			c = b64url_val(src[i + 2]);
			bad |= c;
			dst[o++] = b << 4 | c >> 2;
			/* Non-canonical: bits below the last byte must be 0. */
			if (c & 0x03)
				return -EINVAL;
		} else if (b & 0x0f) {
			return -EINVAL;
		}
	}
	if (bad & 0xc0)
		return -EINVAL;
	return out_len;
}

int l7f_b64url_encode_buf(const u8 *src, u32 slen, u8 *dst, u32 dlen,
			  u32 flags)
{
	u32 out_len, i, o = 0, v;

	if (flags & ~L7F_B64_PAD)
		return -EINVAL;
	if (slen > L7F_DATA_MAX)
		return -E2BIG;
	out_len = (flags & L7F_B64_PAD) ? L7F_B64_ENC_LEN_PAD(slen) :
					  L7F_B64_ENC_LEN_NOPAD(slen);
	if (out_len > dlen)
		return -ENOSPC;

	for (i = 0; i + 3 <= slen; i += 3) {
		v = src[i] << 16 | src[i + 1] << 8 | src[i + 2];
		dst[o++] = b64url_alphabet[v >> 18];
		dst[o++] = b64url_alphabet[(v >> 12) & 0x3f];
		dst[o++] = b64url_alphabet[(v >> 6) & 0x3f];
		dst[o++] = b64url_alphabet[v & 0x3f];
	}
	if (slen - i == 1) {
		v = src[i] << 16;
		dst[o++] = b64url_alphabet[v >> 18];
		dst[o++] = b64url_alphabet[(v >> 12) & 0x3f];
	} else if (slen - i == 2) {
		v = src[i] << 16 | src[i + 1] << 8;
		dst[o++] = b64url_alphabet[v >> 18];
		dst[o++] = b64url_alphabet[(v >> 12) & 0x3f];
		dst[o++] = b64url_alphabet[(v >> 6) & 0x3f];
	}
	while (o < out_len)	/* at most two '=' */
		dst[o++] = '=';
	return out_len;
}
