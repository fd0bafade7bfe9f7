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

#define B64_INVALID 0xff

static const char b64url_alphabet[64] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

static inline u8 b64url_val(u8 c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '-')
		return 62;
	if (c == '_')
		return 63;
	return B64_INVALID;
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
