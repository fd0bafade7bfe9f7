/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The payload half of the kernel's HS verifier (l7_jwtverify.h): one scan
 * of a decoded JWT payload and the claim checks, in the reference's terms
 * (auth::Verifier::verify steps 6 and 7, daemon/src/auth/Jwt.cpp).
 *
 * The scan decides only a subset of JSON exactly and says so otherwise
 * (bail): a flat object whose values are strings without escapes, control
 * or non-ASCII bytes, integers, true/false/null, or arrays of those; member
 * names of the same kind of string, at most L7_JWT_MAX_MEMBERS of them,
 * none twice (compared by a 64-bit hash: equal hashes bail); "exp" and
 * "nbf" non-negative integers of at most 11 digits. Everything it accepts
 * the reference's strict reader accepts with the same claims: the native
 * build of this file is checked against the reference for that
 * (tests/unit/jwt_scan_test.cpp).
 *
 * Portable like l7_common.h: BPF (bpf_loop) and native (the tests).
 */
#ifndef L7_JWTSCAN_H
#define L7_JWTSCAN_H

#include "l7_common.h"

/* an 8-byte little-endian load at any byte address of a buffer */
L7_INLINE __u64 l7_jwt_load64(const __u8 *p)
{
#if defined(__bpf__)
	return *(const __u64 *)p;
#else
	__u64 v;

	memcpy(&v, p, sizeof(v));
	return v;
#endif
}

#define L7_JWT_PMASK (L7_JWT_PAYLOAD_BUF - 1)
#define L7_JWT_MAX_DIGITS 11
#define L7_JWT_AUD_STRS 8 /* aud strings the scan keeps; more: it bails */
#define L7_JWT_MAX_SECONDS (1ULL << 33) /* the reference's NumericDate ceiling */

/* claims the scan reads (l7_jwt_scan.claim, bit in .seen); in header
 * mode (l7_jwt_scan.hdr) the header members */
enum { L7_JC_NONE = 0, L7_JC_EXP, L7_JC_NBF, L7_JC_ISS, L7_JC_AUD, L7_JC_ALG, L7_JC_KID, L7_JC_TYP, L7_JC_CRIT };
/* alg, kid, typ: kept as strings (l7_jwt_scan.hs_off; a fourth slot keeps
 * a masked index in bounds) */
#define L7_JC_HDR_STRS 4
#define L7_JS_NOT_STR 0xffffffffu /* hs_len of a member whose value is not a string */

/* scan states */
enum {
	L7_JS_START = 0, /* before '{' */
	L7_JS_NAME1,     /* after '{': a name or '}' */
	L7_JS_NAME,      /* after ',': a name */
	L7_JS_IN_NAME,
	L7_JS_COLON,
	L7_JS_VALUE,     /* a member's value */
	L7_JS_ELEM1,     /* after '[': an element or ']' */
	L7_JS_ELEM,      /* after ',' in an array: an element */
	L7_JS_IN_STR,
	L7_JS_IN_NUM,
	L7_JS_IN_LIT,
	L7_JS_AFTER,     /* after a member's value: ',' or '}' */
	L7_JS_AFTER_EL,  /* after an element: ',' or ']' */
	L7_JS_END,       /* after the closing '}': white space only */
};

/* The kernel's HS verifier (l7_jwtverify.h): the decoded payload and MAC,
 * and the payload scan's state. */
struct l7_jwt_scan {
	__u32 pos;         /* next byte of the payload */
	__u32 len;         /* payload bytes */
	__u32 state;       /* L7_JS_* (above) */
	__u32 bail;        /* outside the subset the scan decides */
	__u32 members;     /* top-level members seen */
	__u32 claim;       /* which claim the value being read is (L7_JC_*) */
	__u32 seen;        /* claims seen, bit per L7_JC_* */
	__u32 aud_match;   /* an audience matched (after the scan) */
	__u32 aud_bad;     /* an aud element that is not a string */
	__u32 n_aud_str;   /* aud strings: the value, or the array's elements */
	__u32 aud_off[L7_JWT_AUD_STRS];
	__u32 aud_len[L7_JWT_AUD_STRS];
	__u32 str_start;   /* the string being read */
	__u32 digits;      /* digits of the number being read */
	__u32 neg;
	__u64 num;         /* its value */
	__u64 key;         /* the member name being read, first 8 bytes */
	__u64 key_hash;    /* and its hash */
	__u64 exp;         /* seconds */
	__u64 nbf;
	__u32 iss_off;
	__u32 iss_len;
	__u32 hdr;         /* header mode: alg, kid, typ, crit instead of the claims */
	__u32 hs_off[L7_JC_HDR_STRS]; /* header mode: alg, kid, typ's strings */
	__u32 hs_len[L7_JC_HDR_STRS]; /* (L7_JS_NOT_STR: not a string) */
	__u64 names[L7_JWT_MAX_MEMBERS]; /* member name hashes, duplicates bail */
};

struct l7_jwt_work {
	struct l7_jwt_scan sc;
	/* the token's dots (l7_jwtverify.h): kept here, not in a callback's
	 * stack context, where the verifier would track every count */
	__u32 n_dots;
	__u32 d1;
	__u32 d2;
	__u32 tok;     /* the token a cache miss leaves to the verifier: off | len << 16 */
	__u64 tok_hash; /* and its cache key's hash */
	__u64 tag;      /* l7_config.cache_tag when the verification began */
	/* the header's verdict (l7_jwtverify.h): L7_JK_* or L7_JWT_KID_UNKNOWN,
	 * and the keys to try for L7_JK_VERIFY, of key epoch `epoch` */
	__u32 kv;
	__u32 epoch;
	struct l7_jwt_keyset keys;
	struct l7_jwt_kid_key kk; /* l7_jwt_kids' key, built here (map memory) */
	__u8 mac[64];
	union {
		/* 32 bytes of slack: the cache entry's token copy is sized
		 * by a 2047 mask (l7_g_jwt_remember) */
		__u8 payload[L7_JWT_PAYLOAD_BUF + 32];
		/* once the payload is judged: the cache entry of a valid token */
		struct l7_jwt_entry entry;
	};
};
#ifndef __cplusplus
_Static_assert(sizeof(struct l7_jwt_entry) <= L7_JWT_PAYLOAD_BUF + 32 &&
		       __builtin_offsetof(struct l7_jwt_entry, token) + 2048 <= L7_JWT_PAYLOAD_BUF + 32,
	       "the cache entry is built over the payload");
#endif

struct l7_jwt_scanref {
	struct l7_jwt_work *wk;
	const struct l7_jwt_provider *p;
};

/* The payload's bytes [off, off + len) equal ref[0, ref_len) (<= L7_JWT_MAX_CLAIM). */
L7_INLINE int l7_jwt_claim_eq(const __u8 *payload, __u32 off, __u32 len, const __u8 *ref,
					   __u32 ref_len)
{
	__u32 i;
	__u64 x, y;

	if (len != ref_len || len > L7_JWT_MAX_CLAIM)
		return 0;
	L7_UNROLL for (i = 0; i < L7_JWT_MAX_CLAIM / 8; i++) {
		if (i * 8 >= len)
			break;
		x = l7_jwt_load64(payload + L7_IDX(off + i * 8, L7_JWT_PMASK));
		y = l7_jwt_load64(ref + i * 8);
		if (len - i * 8 < 8) {
			x = l7_low_bytes(x, len - i * 8);
			y = l7_low_bytes(y, len - i * 8);
		}
		if (x != y)
			return 0;
	}
	return 1;
}

L7_INLINE int l7_js_ws(__u8 b)
{
	return b == ' ' || b == '\t' || b == '\n' || b == '\r';
}

/* A value starts at b (the byte is consumed unless it is a number's). */
L7_INLINE void l7_js_value(struct l7_jwt_scan *sc, __u8 b, int elem)
{
	sc->str_start = sc->pos;
	if (b == '"') {
		sc->state = L7_JS_IN_STR;
	} else if (b == '-' || (b >= '0' && b <= '9')) {
		sc->state = L7_JS_IN_NUM;
		sc->neg = b == '-';
		sc->digits = b == '-' ? 0 : 1;
		sc->num = b == '-' ? 0 : b - '0';
		sc->key = b == '0'; /* a leading zero: no digit may follow */
	} else if (b == 't' || b == 'f' || b == 'n') {
		sc->state = L7_JS_IN_LIT;
		/* the rest of the literal, low byte first */
		sc->num = b == 't' ? 0x657572ULL : b == 'f' ? 0x65736c61ULL : 0x6c6c75ULL;
		sc->digits = b == 'f' ? 4 : 3;
	} else if (b == '[' && !elem) {
		sc->state = L7_JS_ELEM1;
	} else {
		sc->bail = 1;
	}
	/* exp and nbf must be numbers, iss a string (else no issuer
	 * matches); a non-string aud element fails the audience */
	if (sc->state != L7_JS_IN_NUM && (sc->claim == L7_JC_EXP || sc->claim == L7_JC_NBF))
		sc->bail = 1;
	if (sc->state != L7_JS_IN_STR && sc->claim == L7_JC_ISS)
		sc->iss_len = 0xffffffffu;
	if (sc->state != L7_JS_IN_STR && sc->state != L7_JS_ELEM1 && sc->claim == L7_JC_AUD)
		sc->aud_bad |= elem;
	if (sc->state != L7_JS_IN_STR && sc->claim >= L7_JC_ALG && sc->claim <= L7_JC_TYP)
		sc->hs_len[L7_IDX(sc->claim - L7_JC_ALG, 3)] = L7_JS_NOT_STR;
}

L7_INLINE void l7_js_value_end(struct l7_jwt_scan *sc, int elem)
{
	sc->state = elem ? L7_JS_AFTER_EL : L7_JS_AFTER;
}

/* One step of the payload scan: the byte at sc->pos. */
L7_CALLBACK long l7_jwt_scan_cb(__u32 i, void *ctx)
{
	struct l7_jwt_scanref *r = (struct l7_jwt_scanref *)ctx;
	struct l7_jwt_work *wk = r->wk;
	struct l7_jwt_scan *sc = &wk->sc;
	__u32 pos = sc->pos, n, j;
	int elem;
	__u8 b;

	if (sc->bail || pos >= sc->len || pos >= L7_JWT_PAYLOAD_BUF)
		return 1;
	b = wk->payload[L7_IDX(pos, L7_JWT_PMASK)];
	sc->pos = pos + 1;
	elem = sc->claim >> 8; /* inside an array */
	switch (sc->state) {
	case L7_JS_START:
	case L7_JS_END:
		if (l7_js_ws(b))
			return 0;
		if (sc->state == L7_JS_START && b == '{')
			sc->state = L7_JS_NAME1;
		else
			sc->bail = 1;
		return 0;
	case L7_JS_NAME1:
	case L7_JS_NAME:
		if (l7_js_ws(b))
			return 0;
		if (b == '}' && sc->state == L7_JS_NAME1) {
			sc->state = L7_JS_END;
		} else if (b == '"') {
			sc->state = L7_JS_IN_NAME;
			sc->str_start = sc->pos;
			sc->key = 0;
			sc->key_hash = 0xcbf29ce484222325ULL;
		} else {
			sc->bail = 1;
		}
		return 0;
	case L7_JS_IN_NAME:
		if (b == '"') {
			n = pos - sc->str_start;
			if (sc->members >= L7_JWT_MAX_MEMBERS) {
				sc->bail = 1;
				return 1;
			}
			L7_UNROLL for (j = 0; j < L7_JWT_MAX_MEMBERS; j++)
				if (j < sc->members && sc->names[j] == sc->key_hash)
					sc->bail = 1;
			sc->names[L7_IDX(sc->members, L7_JWT_MAX_MEMBERS - 1)] = sc->key_hash;
			sc->members++;
			sc->claim = L7_JC_NONE;
			if (sc->hdr) {
				if (n == 3 && sc->key == 0x676c61) /* "alg" */
					sc->claim = L7_JC_ALG;
				else if (n == 3 && sc->key == 0x64696b) /* "kid" */
					sc->claim = L7_JC_KID;
				else if (n == 3 && sc->key == 0x707974) /* "typ" */
					sc->claim = L7_JC_TYP;
				else if (n == 4 && sc->key == 0x74697263) /* "crit" */
					sc->claim = L7_JC_CRIT;
			} else if (n == 3) {
				if (sc->key == 0x707865) /* "exp" */
					sc->claim = L7_JC_EXP;
				else if (sc->key == 0x66626e) /* "nbf" */
					sc->claim = L7_JC_NBF;
				else if (sc->key == 0x737369) /* "iss" */
					sc->claim = L7_JC_ISS;
				else if (sc->key == 0x647561) /* "aud" */
					sc->claim = L7_JC_AUD;
			}
			sc->seen |= 1u << sc->claim;
			sc->state = L7_JS_COLON;
		} else if (b == '\\' || b < 0x20 || b >= 0x80) {
			sc->bail = 1;
		} else {
			n = pos - sc->str_start;
			if (n < 8)
				sc->key |= (__u64)b << (8 * n);
			sc->key_hash = (sc->key_hash ^ b) * 0x100000001b3ULL;
		}
		return 0;
	case L7_JS_COLON:
		if (l7_js_ws(b))
			return 0;
		if (b == ':')
			sc->state = L7_JS_VALUE;
		else
			sc->bail = 1;
		return 0;
	case L7_JS_VALUE:
		if (l7_js_ws(b))
			return 0;
		l7_js_value(sc, b, 0);
		if (sc->state == L7_JS_ELEM1)
			sc->claim |= 0x100;
		return 0;
	case L7_JS_ELEM1:
	case L7_JS_ELEM:
		if (l7_js_ws(b))
			return 0;
		if (b == ']' && sc->state == L7_JS_ELEM1) {
			sc->claim &= 0xff;
			sc->state = L7_JS_AFTER;
			return 0;
		}
		sc->claim &= 0xff;
		l7_js_value(sc, b, 1);
		sc->claim |= 0x100;
		return 0;
	case L7_JS_IN_STR:
		if (b == '"') {
			n = pos - sc->str_start;
			switch (sc->claim & 0xff) {
			case L7_JC_ISS:
				if (!elem) {
					sc->iss_off = sc->str_start;
					sc->iss_len = n;
				}
				break;
			case L7_JC_AUD:
				/* compared after the scan (l7_jwt_aud_cb) */
				if (sc->n_aud_str >= L7_JWT_AUD_STRS) {
					sc->bail = 1;
					break;
				}
				sc->aud_off[L7_IDX(sc->n_aud_str, L7_JWT_AUD_STRS - 1)] = sc->str_start;
				sc->aud_len[L7_IDX(sc->n_aud_str, L7_JWT_AUD_STRS - 1)] = n;
				sc->n_aud_str++;
				break;
			case L7_JC_ALG:
			case L7_JC_KID:
			case L7_JC_TYP:
				if (!elem) {
					sc->hs_off[L7_IDX((sc->claim & 0xff) - L7_JC_ALG, 3)] = sc->str_start;
					sc->hs_len[L7_IDX((sc->claim & 0xff) - L7_JC_ALG, 3)] = n;
				}
				break;
			}
			l7_js_value_end(sc, elem);
		} else if (b == '\\' || b < 0x20 || b >= 0x80) {
			sc->bail = 1;
		}
		return 0;
	case L7_JS_IN_NUM:
		if (b >= '0' && b <= '9') {
			if (sc->key || sc->digits >= L7_JWT_MAX_DIGITS) {
				/* 01, or longer than exp and nbf take */
				if (sc->key || (sc->claim & 0xff) == L7_JC_EXP || (sc->claim & 0xff) == L7_JC_NBF)
					sc->bail = 1;
			}
			if (sc->digits == 0)
				sc->key = b == '0';
			sc->digits++;
			sc->num = sc->num * 10 + (b - '0');
			return 0;
		}
		/* fractions and exponents are the slow path's */
		if (!sc->digits || b == '.' || b == 'e' || b == 'E') {
			sc->bail = 1;
			return 0;
		}
		if ((sc->claim & 0xff) == L7_JC_EXP || (sc->claim & 0xff) == L7_JC_NBF) {
			if (sc->neg) {
				sc->bail = 1;
				return 0;
			}
			if ((sc->claim & 0xff) == L7_JC_EXP)
				sc->exp = sc->num;
			else
				sc->nbf = sc->num;
		}
		/* the byte ends the number: read it again after the value */
		sc->pos = pos;
		l7_js_value_end(sc, elem);
		return 0;
	case L7_JS_IN_LIT:
		if (b != (sc->num & 0xff)) {
			sc->bail = 1;
			return 0;
		}
		sc->num >>= 8;
		if (--sc->digits == 0)
			l7_js_value_end(sc, elem);
		return 0;
	case L7_JS_AFTER:
		if (l7_js_ws(b))
			return 0;
		if (b == ',')
			sc->state = L7_JS_NAME;
		else if (b == '}')
			sc->state = L7_JS_END;
		else
			sc->bail = 1;
		return 0;
	case L7_JS_AFTER_EL:
		if (l7_js_ws(b))
			return 0;
		if (b == ',') {
			sc->state = L7_JS_ELEM;
		} else if (b == ']') {
			sc->claim &= 0xff;
			sc->state = L7_JS_AFTER;
		} else {
			sc->bail = 1;
		}
		return 0;
	}
	sc->bail = 1;
	return 1;
}

/* aud string i / L7_JWT_MAX_AUDS against audience i % L7_JWT_MAX_AUDS */
L7_CALLBACK long l7_jwt_aud_cb(__u32 i, void *ctx)
{
	struct l7_jwt_scanref *r = (struct l7_jwt_scanref *)ctx;
	struct l7_jwt_scan *sc = &r->wk->sc;
	const struct l7_jwt_provider *p = r->p;
	__u32 e = i / L7_JWT_MAX_AUDS, a = i % L7_JWT_MAX_AUDS;

	if (e >= sc->n_aud_str || e >= L7_JWT_AUD_STRS)
		return 1;
	if (a >= p->n_aud)
		return 0;
	if (l7_jwt_claim_eq(r->wk->payload, sc->aud_off[e], sc->aud_len[e], p->aud[a], p->aud_len[a])) {
		sc->aud_match = 1;
		return 1;
	}
	return 0;
}

/* What the claims say (l7_jwt_judge). */
enum { L7_JV_OK = 0, L7_JV_REJECT = 1, L7_JV_SHAPE = 2 };

/*
 * Scans wk->payload[0, len) and checks its claims for provider p at
 * wall-clock time now_ns (Unix epoch): L7_JV_OK, L7_JV_REJECT with *detail
 * (L7_ANS_DETAIL_*), or L7_JV_SHAPE when the scan does not decide it.
 */
L7_INLINE int l7_jwt_judge(struct l7_jwt_work *wk, const struct l7_jwt_provider *p, __u32 len, __u64 now_ns,
			   __u32 *detail)
{
	struct l7_jwt_scan *sc = &wk->sc;
	struct l7_jwt_scanref sr;
	__u64 t;

	L7_ZERO(*sc);
	if (len == 0 || len > L7_JWT_PAYLOAD_BUF)
		return L7_JV_SHAPE;
	sc->len = len;
	sr.wk = wk;
	sr.p = p;
	L7_LOOP(L7_JWT_PAYLOAD_BUF, l7_jwt_scan_cb, &sr);
	if (sc->bail || sc->state != L7_JS_END || sc->pos != sc->len)
		return L7_JV_SHAPE;

	if (!(sc->seen & (1u << L7_JC_EXP)) && (p->flags & L7_JP_REQUIRE_EXP)) {
		*detail = L7_ANS_DETAIL_MISSING_EXP;
		return L7_JV_REJECT;
	}
	if (sc->seen & (1u << L7_JC_EXP)) {
		t = sc->exp < L7_JWT_MAX_SECONDS ? sc->exp : L7_JWT_MAX_SECONDS;
		if (now_ns >= (t + p->skew_s) * 1000000000ULL) {
			*detail = L7_ANS_DETAIL_EXPIRED;
			return L7_JV_REJECT;
		}
	}
	if (sc->seen & (1u << L7_JC_NBF)) {
		t = sc->nbf < L7_JWT_MAX_SECONDS ? sc->nbf : L7_JWT_MAX_SECONDS;
		/* nbf - skew before 0: no constraint */
		if (t > p->skew_s && now_ns < (t - p->skew_s) * 1000000000ULL) {
			*detail = L7_ANS_DETAIL_NOT_YET_VALID;
			return L7_JV_REJECT;
		}
	}
	if ((p->flags & L7_JP_ISSUER) && (!(sc->seen & (1u << L7_JC_ISS)) ||
					   !l7_jwt_claim_eq(wk->payload, sc->iss_off, sc->iss_len, p->iss, p->iss_len))) {
		*detail = L7_ANS_DETAIL_BAD_ISSUER;
		return L7_JV_REJECT;
	}
	if (p->n_aud && !sc->aud_bad)
		L7_LOOP(L7_JWT_AUD_STRS * L7_JWT_MAX_AUDS, l7_jwt_aud_cb, &sr);
	if (p->n_aud && (sc->aud_bad || !sc->aud_match)) {
		*detail = L7_ANS_DETAIL_BAD_AUDIENCE;
		return L7_JV_REJECT;
	}
	return L7_JV_OK;
}

/* n (<= 8) bytes of the decoded buffer at off, low byte first */
L7_INLINE __u64 l7_jwt_word(const struct l7_jwt_work *wk, __u32 off, __u32 n)
{
	return l7_low_bytes(l7_jwt_load64(wk->payload + L7_IDX(off, L7_JWT_PMASK)), n);
}

/* n (<= 8) bytes at off with ASCII letters lower-cased; other bytes get
 * bit 5 set, which leaves '+', '/' and digits as they are and can only
 * turn control bytes into them, and a scanned string holds none */
L7_INLINE __u64 l7_jwt_lower(const struct l7_jwt_work *wk, __u32 off, __u32 n)
{
	return l7_low_bytes(l7_jwt_load64(wk->payload + L7_IDX(off, L7_JWT_PMASK)) | (L7_ONES * 0x20), n);
}

/*
 * Whether the typ at [off, off + len) of the decoded header is one the
 * reference accepts (auth::acceptable_typ): "JWT" or "at+jwt", case
 * aside, "application/" ahead of either allowed.
 */
L7_INLINE int l7_jwt_typ_ok(const struct l7_jwt_work *wk, __u32 off, __u32 len)
{
	if (len > 12 && l7_jwt_lower(wk, off, 8) == 0x746163696c707061ULL /* "applicat" */ &&
	    l7_jwt_lower(wk, off + 8, 4) == 0x2f6e6f69ULL /* "ion/" */) {
		off += 12;
		len -= 12;
	}
	if (len == 3)
		return l7_jwt_lower(wk, off, 3) == 0x74776aULL; /* "jwt" */
	if (len == 6)
		return l7_jwt_lower(wk, off, 6) == 0x74776a2b7461ULL; /* "at+jwt" */
	return 0;
}

/* The algorithm named by [off, off + len): L7_JA_*, or L7_JA_N for a name
 * l7fast does not know (auth::alg_from_name, case-sensitive) */
L7_INLINE __u32 l7_jwt_alg_of(const struct l7_jwt_work *wk, __u32 off, __u32 len)
{
	__u64 x;

	if (len != 5)
		return L7_JA_N;
	x = l7_jwt_word(wk, off, 5);
	if (x == 0x3635325348ULL) /* "HS256" */
		return L7_JA_HS256;
	if (x == 0x3438335348ULL) /* "HS384" */
		return L7_JA_HS384;
	if (x == 0x3231355348ULL) /* "HS512" */
		return L7_JA_HS512;
	if (x == 0x3635325352ULL) /* "RS256" */
		return L7_JA_RS256;
	if (x == 0x3635325345ULL) /* "ES256" */
		return L7_JA_ES256;
	return L7_JA_N;
}

/*
 * Scans the decoded JOSE header wk->payload[0, len) and checks it as the
 * reference does (auth::Verifier::check_header, steps 2 and 3) for a
 * provider accepting the algorithms `algs` (bit per L7_JA_*):
 *  - L7_JV_OK: *alg is the header's (accepted); its kid is
 *    wk->sc.hs_off/hs_len[1] (length 0: none, as the reference reads
 *    an absent kid);
 *  - L7_JV_REJECT with *detail: malformed (no alg, an alg, kid or typ that
 *    is not a string, a typ it does not accept, crit, an empty header) or
 *    alg_not_allowed;
 *  - L7_JV_SHAPE: outside the subset the scan decides (the slow path's).
 */
L7_INLINE int l7_jwt_judge_header(struct l7_jwt_work *wk, __u32 len, __u32 algs, __u32 *alg, __u32 *detail)
{
	struct l7_jwt_scan *sc = &wk->sc;
	struct l7_jwt_scanref sr;
	__u32 a;

	L7_ZERO(*sc);
	*detail = L7_ANS_DETAIL_MALFORMED;
	/* no JSON at all */
	if (len == 0)
		return L7_JV_REJECT;
	if (len > L7_JWT_PAYLOAD_BUF)
		return L7_JV_SHAPE;
	sc->len = len;
	sc->hdr = 1;
	sr.wk = wk;
	sr.p = 0;
	L7_LOOP(L7_JWT_PAYLOAD_BUF, l7_jwt_scan_cb, &sr);
	if (sc->bail || sc->state != L7_JS_END || sc->pos != sc->len)
		return L7_JV_SHAPE;
	if (!(sc->seen & (1u << L7_JC_ALG)) || sc->hs_len[0] == L7_JS_NOT_STR || sc->hs_len[1] == L7_JS_NOT_STR)
		return L7_JV_REJECT;
	if ((sc->seen & (1u << L7_JC_TYP)) &&
	    (sc->hs_len[2] == L7_JS_NOT_STR || !l7_jwt_typ_ok(wk, sc->hs_off[2], sc->hs_len[2])))
		return L7_JV_REJECT;
	if (sc->seen & (1u << L7_JC_CRIT))
		return L7_JV_REJECT;
	a = l7_jwt_alg_of(wk, sc->hs_off[0], sc->hs_len[0]);
	if (a >= L7_JA_N || !((algs >> a) & 1)) {
		*detail = L7_ANS_DETAIL_ALG_NOT_ALLOWED;
		return L7_JV_REJECT;
	}
	*alg = a;
	return L7_JV_OK;
}

#endif /* L7_JWTSCAN_H */
