/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Strict HTTP/1.1 message-head parser (RFC 9112), shared by the BPF data plane
 * and the slow path. One implementation, so the kernel and user space cannot
 * disagree about where a message ends or what it says; the only difference
 * between the builds is the window size (L7_SCRATCH_SIZE in BPF, up to
 * L7_USER_MAX_HDR_BLOCK natively).
 *
 * The parser never guesses. Anything ambiguous is an error with the HTTP
 * status the slow path answers with; ARCHITECTURE.md ("HTTP acceptance
 * rules") lists every rule. In the kernel an error simply means "let the slow
 * path deal with it".
 *
 * Cost model: the header block is scanned 8 bytes at a time (SWAR); the fast
 * stages take plain heads a word and a field line at a time; the strict
 * stages, for everything else, look at bytes individually in words that
 * contain a control character, inside field names, and around OWS.
 */
#ifndef L7_HTTP_H
#define L7_HTTP_H

#include "l7_common.h"

enum l7_parse_status {
	L7_P_OK = 0,
	L7_P_MORE = 1,  /* header block not complete yet */
	L7_P_ERROR = 2, /* msg->status says how to answer, msg->error why */
};

enum l7_parse_error {
	L7_PE_NONE = 0,
	L7_PE_BARE_CR,
	L7_PE_BARE_LF,
	L7_PE_CTL,
	L7_PE_TOO_MANY_LINES,
	L7_PE_TOO_LARGE,
	L7_PE_EMPTY_LINE_FIRST,
	L7_PE_BAD_METHOD,
	L7_PE_BAD_TARGET,
	L7_PE_BAD_VERSION,
	L7_PE_VERSION_UNSUPPORTED,
	L7_PE_BAD_STATUS,
	L7_PE_OBS_FOLD,
	L7_PE_BAD_NAME,
	L7_PE_NO_COLON,
	L7_PE_LONG_OWS,
	L7_PE_NO_HOST,
	L7_PE_DUP_HOST,
	L7_PE_BAD_HOST,
	L7_PE_BAD_CONTENT_LENGTH,
	L7_PE_DUP_CONTENT_LENGTH,
	L7_PE_DUP_TRANSFER_ENCODING,
	L7_PE_UNKNOWN_CODING,
	L7_PE_TE_AND_CL,
	L7_PE_TE_HTTP10,
	L7_PE_BAD_CONNECTION,
	L7_PE_HTTPS_TARGET, /* absolute-form with "https": 421, l7fast listens in cleartext */
	L7_PE_COUNT,
};

/* One name per enum l7_parse_error, in its order: the cause of a 400 in the
 * access log (reason=bad_request:<name>) and in l7fast_requests_refused_total. */
#define L7_PARSE_ERROR_NAMES "none", "bare_cr", "bare_lf", "control_byte", "too_many_lines", \
	"too_large", "empty_line_first", "bad_method", "bad_target", "bad_version", \
	"version_unsupported", "bad_status", "obs_fold", "bad_field_name", "no_colon", "long_ows", \
	"no_host", "duplicate_host", "bad_host", "bad_content_length", "duplicate_content_length", \
	"duplicate_transfer_encoding", "unknown_coding", "transfer_encoding_and_content_length", \
	"transfer_encoding_http10", "bad_connection", "https_target"

enum l7_msg_flags {
	L7_MF_CLOSE = 1u << 0,       /* connection closes after this exchange */
	L7_MF_UPGRADE = 1u << 1,     /* Upgrade requested */
	L7_MF_EXPECT_100 = 1u << 2,  /* Expect: 100-continue */
	L7_MF_EXPECT_OTHER = 1u << 3,
	L7_MF_HAS_CL = 1u << 4,
	L7_MF_HAS_TE = 1u << 5,
	L7_MF_HTTP10 = 1u << 6,
	L7_MF_HAS_QUERY = 1u << 7,
	L7_MF_KEEP_ALIVE = 1u << 8,  /* Connection: keep-alive */
	/* The path (target up to '?') is not in normal form: it has a
	 * percent-escape, a backslash, an empty segment ("//") or a dot
	 * segment ("." or ".."). The kernel matches raw bytes, so such a
	 * request goes to the slow path, which normalises or rejects it
	 * (ARCHITECTURE.md, "Path normalisation"). */
	L7_MF_PATH_NOT_NORMAL = 1u << 9,
	/* The target is in absolute-form ("http://authority/path?query",
	 * RFC 9112 3.2.2): auth_off/auth_len say where the authority is, and
	 * the request is routed and forwarded by it, not by Host. The kernel
	 * hands such a request to the slow path, which rewrites it to
	 * origin-form (ARCHITECTURE.md, "HTTP acceptance rules"). */
	L7_MF_ABSOLUTE_FORM = 1u << 10,
};

#define L7_NONE 0xffffu
#define L7_MAX_LINES 64 /* request/status line + 63 field lines */
#define L7_LINE_MASK (L7_MAX_LINES - 1)
#define L7_MAX_METHOD_LEN 24
#define L7_MAX_OWS 32

struct l7_hdr {
	__u16 name_off;
	__u16 name_len;
	__u16 val_off;
	__u16 val_len;
	__u32 name_hash; /* l7_name_hash() of the name (requests only: 0 in a response) */
	__u32 pad;
};

struct l7_msg {
	__u16 status;       /* response: status code; error: status to answer */
	__u16 error;        /* enum l7_parse_error */
	__u16 method;       /* enum l7_method */
	__u16 version;      /* 10 or 11 */
	__u32 hdr_len;      /* bytes of the head including the final CRLF */
	__u32 flags;        /* enum l7_msg_flags */
	__u16 target_off;   /* the request-target as received */
	__u16 target_len;
	__u16 path_off;     /* the path: target_off, or after an absolute-form's authority */
	__u16 path_len;     /* the path up to '?' (0: an absolute-form without one, i.e. "/") */
	__u16 auth_off;     /* absolute-form: the authority (host[:port]); else 0 */
	__u16 auth_len;
	__u16 auth_host_len; /* the authority without ":port" */
	__u16 host_idx;     /* header index of Host, or L7_NONE */
	__u16 host_len;     /* Host value without ":port" */
	__u16 n_lines;      /* lines before the empty line, start line included */
	__u16 n_hdrs;
	__u8 body_kind;     /* enum l7_body_kind */
	__u8 pad;
	__u64 content_length;
	__u16 line_end[L7_MAX_LINES]; /* offset of the CR ending each line */
	struct l7_hdr hdr[L7_MAX_HEADERS];
};

/* State of one byte scan, reset before each. */
struct l7_bscan {
	__u32 pos;
	__u32 end;
	__u32 found;  /* where the scan stopped, or L7_NONE */
	__u32 aux;
	__u32 bad;    /* stopped on an invalid byte */
	__u32 acc;    /* hash or flags, per scan */
	__u64 num;
	__u64 num2;
};

/*
 * Parser workspace: the bytes, the result and all scan state. The scan state
 * lives here rather than in locals on purpose: in BPF this is map memory,
 * whose contents the verifier does not track, so each stage is verified once
 * instead of once per combination of values the previous stages produced.
 */
struct l7_ws {
	struct l7_msg msg;
	struct l7_bscan b;
	__u32 len;          /* valid bytes in buf */
	__u32 line_start;
	__u32 pending_cr;
	__u32 result;       /* enum l7_parse_status while scanning lines */
	__u32 is_request;   /* the head being parsed is a request's */
	__u8 buf[L7_WS_BUF + L7_WINDOW_SLACK];
};

/* bpf_loop() wants its context on the stack: a reference to the workspace */
struct l7_wsref {
	struct l7_ws *ws;
};

L7_INLINE struct l7_window l7_ws_window(const struct l7_ws *ws)
{
	struct l7_window w;

	L7_ZERO(w);
	w.buf = ws->buf;
	w.len = ws->len;
	return w;
}

L7_INLINE __u8 l7_wat(const struct l7_ws *ws, __u32 i)
{
	return ws->buf[L7_IDX(i, L7_WS_MASK)];
}

L7_INLINE __u64 l7_wload(const struct l7_ws *ws, __u32 i, __u8 fill)
{
	struct l7_window w = l7_ws_window(ws);

	return l7_load64(&w, i, fill);
}

/* The 8 bytes at i as they are, for callers that know i + 8 <= ws->len. */
L7_INLINE __u64 l7_wraw(const struct l7_ws *ws, __u32 i)
{
	__u64 v;

#if defined(__bpf__)
	v = *(const __u64 *)(ws->buf + L7_IDX(i, L7_WS_MASK));
#else
	memcpy(&v, ws->buf + (i & L7_WS_MASK), sizeof(v));
#endif
	return v;
}

L7_INLINE int l7_fail(struct l7_ws *ws, __u16 status, __u16 error)
{
	ws->msg.status = status;
	ws->msg.error = error;
	ws->result = L7_P_ERROR;
	return 1;
}

L7_INLINE void l7_bscan_reset(struct l7_ws *ws, __u32 pos, __u32 end)
{
	ws->b.pos = pos;
	ws->b.end = end;
	ws->b.found = L7_NONE;
	ws->b.aux = 0;
	ws->b.bad = 0;
	ws->b.acc = 0;
	ws->b.num = 0;
	ws->b.num2 = 0;
}

/* RFC 9110 tchar */
L7_INLINE int l7_is_tchar(__u8 c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
		return 1;
	switch (c) {
	case '!': case '#': case '$': case '%': case '&': case '\'': case '*':
	case '+': case '-': case '.': case '^': case '_': case '`': case '|':
	case '~':
		return 1;
	}
	return 0;
}

/* Unkeyed identity of a lower-cased header name: the low 32 bits of the
 * word-at-a-time string hash with seed 0 (l7_hash_window, l7_hash_str in
 * the compiler); every use verifies the bytes, so collisions only cost
 * time. */
L7_INLINE __u32 l7_name_hash(const struct l7_ws *ws, __u32 off, __u32 len)
{
	struct l7_window w = l7_ws_window(ws);

	return (__u32)l7_hash_window(&w, off, len > L7_MAX_MATCH_STR ? L7_MAX_MATCH_STR : len, 0, 1);
}

/* ---- stage 1: line ends; control characters, bare CR and LF ------------- */

/* Words per stage-1 callback: a word without control characters costs one
 * test, so most of a head goes by eight words a call. */
#define L7_LINE_WORDS 8

/* One word of stage 1 at `off`; 1: the scan stops (end of the head, an
 * error, or the end of the bytes). */
/* The LF at p ended a line (its CR is at p - 1): records it, or ends the
 * head at an empty line. 1: the scan stops. */
L7_INLINE long l7_line_done(struct l7_ws *ws, __u32 p)
{
	struct l7_msg *m = &ws->msg;
	__u32 n = m->n_lines;

	ws->pending_cr = 0;
	if (p - 1 == ws->line_start) {
		if (n == 0)
			return l7_fail(ws, 400, L7_PE_EMPTY_LINE_FIRST);
		m->hdr_len = p + 1;
		ws->result = L7_P_OK;
		return 1;
	}
	if (n >= L7_MAX_LINES)
		return l7_fail(ws, 431, L7_PE_TOO_MANY_LINES);
	m->line_end[L7_IDX(n, L7_LINE_MASK)] = (__u16)(p - 1);
	m->n_lines = (__u16)(n + 1);
	ws->line_start = p + 1;
	return 0;
}

/* Bytes below 0x20, exact per byte. */
L7_INLINE __u64 l7_ctl_mask(__u64 x)
{
	__u64 t = (x & (L7_ONES * 127)) + L7_ONES * (0x80 - 0x20);

	return ~t & ~x & L7_HIGHS;
}

/* One word of stage 1 at `off`; 1: the scan stops (end of the head, an
 * error, or the end of the bytes). A word whose only control characters
 * are HTAB and CRLF pairs (the common case) is taken by masks, its line
 * ends one per LF; any other word byte by byte, which gives the exact
 * error of the first byte at fault. */
L7_INLINE long l7_lines_word_masks(struct l7_ws *ws, __u32 off)
{
	__u64 w, valid, cr, lf, ctl;
	__u32 n;
	int k;

	if (off >= ws->len)
		return 1;
	n = ws->len - off < 8 ? ws->len - off : 8;
	valid = l7_low_highs(n);
	/* fill with 'A': a harmless byte that keeps the SWAR tests quiet */
	w = l7_wload(ws, off, 'A');
	ctl = (l7_ctl_mask(w) | l7_eq_mask(w, 0x7f)) & valid;
	if (!ctl) {
		if (ws->pending_cr)
			return l7_fail(ws, 400, L7_PE_BARE_CR);
		return 0;
	}
	cr = l7_eq_mask(w, '\r') & valid;
	lf = l7_eq_mask(w, '\n') & valid;
	/* every LF after a CR (the one pending from the last word in byte 0),
	 * every CR before an LF or at the end of the bytes so far */
	if (!(ctl & ~(cr | lf | l7_eq_mask(w, '\t'))) &&
	    lf == (((cr << 8) | (ws->pending_cr ? 0x80ULL : 0)) & valid)) {
		for (k = 0; k < 4; k++) {
			__u32 at;

			if (!lf)
				break;
			at = l7_lowest_byte(lf);
			lf &= lf - 1;
			if (l7_line_done(ws, off + at))
				return 1;
		}
		ws->pending_cr = !!(cr & (0x80ULL << (8 * (n - 1))));
		return 0;
	}
	L7_UNROLL
	for (k = 0; k < 8; k++) {
		__u32 p = off + k;
		__u8 b = (__u8)(w >> (8 * k));

		if (p >= ws->len)
			break;
		if (ws->pending_cr) {
			if (b != '\n')
				return l7_fail(ws, 400, L7_PE_BARE_CR);
			if (l7_line_done(ws, p))
				return 1;
			continue;
		}
		if (b == '\r') {
			ws->pending_cr = 1;
			continue;
		}
		if (b == '\n')
			return l7_fail(ws, 400, L7_PE_BARE_LF);
		if (b == '\t' || (b >= 0x20 && b != 0x7f))
			continue;
		return l7_fail(ws, 400, L7_PE_CTL);
	}
	return 0;
}

/* Bytes equal to 0x7f, exact per byte. */
L7_INLINE __u64 l7_del_mask(__u64 x)
{
	return ((x & (L7_ONES * 127)) + L7_ONES) & ~x & L7_HIGHS;
}

/*
 * A whole word of stage 1 (8 bytes before ws->len), by masks only: most
 * words of a head hold no control character, and most of the others end
 * lines with CRLF pairs. Anything else (and the last, partial word) goes to
 * l7_lines_word_masks, which gives the exact error. Same results, a third
 * of the instructions.
 */
L7_INLINE long l7_lines_word(struct l7_ws *ws, __u32 off)
{
	__u64 w, bad, cr, lf;
	__u32 pending;
	int k;

	if (off >= ws->len || ws->len - off < 8)
		return l7_lines_word_masks(ws, off);
	w = l7_wraw(ws, off);
	bad = l7_ctl_mask(w) | l7_del_mask(w);
	pending = ws->pending_cr;
	if (!bad && !pending)
		return 0;
	cr = l7_eq_mask(w, '\r');
	lf = l7_eq_mask(w, '\n');
	if ((bad & ~(cr | lf | l7_eq_mask(w, '\t'))) || lf != ((cr << 8) | (pending ? 0x80ULL : 0)))
		return l7_lines_word_masks(ws, off);
	for (k = 0; k < 4; k++) {
		if (!lf)
			break;
		if (l7_line_done(ws, off + l7_lowest_byte(lf)))
			return 1;
		lf &= lf - 1;
	}
	ws->pending_cr = (__u32)(cr >> 63);
	return 0;
}

L7_CALLBACK long l7_lines_cb(__u32 idx, void *ctx)
{
	struct l7_ws *ws = ((struct l7_wsref *)ctx)->ws;
	int j;

	L7_UNROLL
	for (j = 0; j < L7_LINE_WORDS; j++)
		if (l7_lines_word(ws, (idx * L7_LINE_WORDS + j) * 8))
			return 1;
	return 0;
}

L7_STEP int l7_step_lines(struct l7_ws *ws)
{
	struct l7_wsref r = { .ws = ws };

	if (!ws)
		return L7_P_ERROR;
	ws->result = L7_P_MORE;
	ws->pending_cr = 0;
	ws->line_start = 0;
	L7_LOOP(L7_WS_BUF / (8 * L7_LINE_WORDS) + 1, l7_lines_cb, &r);
	if (ws->result == L7_P_MORE && ws->len >= L7_WS_BUF) {
		l7_fail(ws, 431, L7_PE_TOO_LARGE);
		return L7_P_ERROR;
	}
	return (int)ws->result;
}

/* ---- stage 2: request line / status line -------------------------------- */

/* method token up to SP */
L7_CALLBACK long l7_method_cb(__u32 i, void *ctx)
{
	struct l7_ws *ws = ((struct l7_wsref *)ctx)->ws;
	__u32 p = ws->b.pos + i;
	__u8 c;

	if (p >= ws->b.end || i > L7_MAX_METHOD_LEN)
		return 1;
	c = l7_wat(ws, p);
	if (c == ' ') {
		ws->b.found = p;
		return 1;
	}
	if (!l7_is_tchar(c)) {
		ws->b.bad = 1;
		return 1;
	}
	return 0;
}

/*
 * Path shape, tracked in b.acc while scanning the path (before any '?'):
 * bit 0: the previous byte was '/'; bits 1-2: the current segment so far
 * (0 empty, 1 ".", 2 "..", 3 anything else); bit 3: not normal.
 */
#define L7_PS_SLASH 1u
#define L7_PS_SEG_SHIFT 1
#define L7_PS_SEG_MASK (3u << L7_PS_SEG_SHIFT)
#define L7_PS_OTHER (3u << L7_PS_SEG_SHIFT)
#define L7_PS_BAD 8u

/* the path segment ending here is "." or ".." */
#define L7_PS_DOT_SEG(acc) \
	(((acc) & L7_PS_SEG_MASK) == (1u << L7_PS_SEG_SHIFT) || \
	 ((acc) & L7_PS_SEG_MASK) == (2u << L7_PS_SEG_SHIFT))

L7_INLINE __u32 l7_path_shape_step(__u32 acc, __u8 b)
{
	__u32 seg = (acc & L7_PS_SEG_MASK) >> L7_PS_SEG_SHIFT;

	if (b == '/') {
		if ((acc & L7_PS_SLASH) || L7_PS_DOT_SEG(acc))
			acc |= L7_PS_BAD;
		return (acc & L7_PS_BAD) | L7_PS_SLASH;
	}
	if (b == '.')
		return (acc & L7_PS_BAD) | ((seg < 2 ? seg + 1 : 3) << L7_PS_SEG_SHIFT);
	if (b == '%' || b == '\\')
		acc |= L7_PS_BAD;
	return (acc & L7_PS_BAD) | L7_PS_OTHER;
}

/* request-target up to SP: visible ASCII only; first '?' in b.aux; the
 * path's shape in b.acc */
L7_CALLBACK long l7_target_cb(__u32 idx, void *ctx)
{
	struct l7_ws *ws = ((struct l7_wsref *)ctx)->ws;
	__u32 off = ws->b.pos + idx * 8;
	__u64 w;
	int k;

	if (off >= ws->b.end)
		return 1;
	w = l7_wload(ws, off, 'A');
	/* the path is scanned byte by byte (its shape); the query only for
	 * its end and invalid bytes */
	if (ws->b.aux != L7_NONE &&
	    !(l7_has_byte(w, ' ') | l7_has_byte(w, '\t') | l7_has_byte(w, 0x7f) | (w & L7_HIGHS)))
		return 0;
	L7_UNROLL
	for (k = 0; k < 8; k++) {
		__u32 p = off + k;
		__u8 b = (__u8)(w >> (8 * k));

		if (p >= ws->b.end)
			return 1;
		if (b == ' ') {
			if (ws->b.aux == L7_NONE && L7_PS_DOT_SEG(ws->b.acc))
				ws->b.acc |= L7_PS_BAD;
			ws->b.found = p;
			return 1;
		}
		if (b <= 0x20 || b >= 0x7f) {
			ws->b.bad = 1;
			return 1;
		}
		if (ws->b.aux == L7_NONE) {
			if (b == '?') {
				if (L7_PS_DOT_SEG(ws->b.acc))
					ws->b.acc |= L7_PS_BAD;
				ws->b.aux = p;
			} else {
				ws->b.acc = l7_path_shape_step(ws->b.acc, b);
			}
		}
	}
	return 0;
}

L7_INLINE __u16 l7_method_id(const struct l7_ws *ws, __u32 len)
{
	__u64 v = l7_low_bytes(l7_wload(ws, 0, 0), len < 8 ? len : 0);

	switch (len) {
	case 3:
		if (v == 0x544547ULL) return L7_M_GET;         /* "GET" */
		if (v == 0x545550ULL) return L7_M_PUT;         /* "PUT" */
		break;
	case 4:
		if (v == 0x44414548ULL) return L7_M_HEAD;      /* "HEAD" */
		if (v == 0x54534f50ULL) return L7_M_POST;      /* "POST" */
		break;
	case 5:
		if (v == 0x4843544150ULL) return L7_M_PATCH;   /* "PATCH" */
		if (v == 0x4543415254ULL) return L7_M_TRACE;   /* "TRACE" */
		break;
	case 6:
		if (v == 0x4554454c4544ULL) return L7_M_DELETE; /* "DELETE" */
		break;
	case 7:
		if (v == 0x534e4f4954504fULL) return L7_M_OPTIONS; /* "OPTIONS" */
		if (v == 0x5443454e4e4f43ULL) return L7_M_CONNECT; /* "CONNECT" */
		break;
	}
	return L7_M_OTHER;
}

/* "HTTP/1.1" / "HTTP/1.0" and "HTTP/" as little-endian words */
#define L7_HTTP11 0x312e312f50545448ULL
#define L7_HTTP10 0x302e312f50545448ULL
#define L7_HTTP_SLASH 0x2f50545448ULL

/* HTTP-version at [at, end); bad_status is the status for a malformed one */
L7_INLINE int l7_parse_version(struct l7_ws *ws, __u32 at, __u32 end, __u16 bad_status)
{
	__u64 v = l7_wload(ws, at, 0);

	if (end - at == 8 && v == L7_HTTP11) {
		ws->msg.version = 11;
		return 0;
	}
	if (end - at == 8 && v == L7_HTTP10) {
		ws->msg.version = 10;
		ws->msg.flags |= L7_MF_HTTP10;
		return 0;
	}
	/* HTTP/d.d of another version is well-formed, just not ours */
	if (end - at == 8 && (v & 0xffffffffffULL) == L7_HTTP_SLASH) {
		__u8 a = (__u8)(v >> 40), dot = (__u8)(v >> 48), b = (__u8)(v >> 56);

		if (a >= '0' && a <= '9' && dot == '.' && b >= '0' && b <= '9')
			return l7_fail(ws, bad_status == 400 ? 505 : bad_status,
				       L7_PE_VERSION_UNSUPPORTED);
	}
	return l7_fail(ws, bad_status, L7_PE_BAD_VERSION);
}

/* below, with the other field scans */
L7_CALLBACK long l7_host_cb(__u32 i, void *ctx);

/* absolute-form (RFC 9112 3.2.2): "http://" in any case (RFC 3986 3.1),
 * an authority, then the path and query, if any */
#define L7_LIT_HTTP_SCHEME 0x2f2f3a70747468ULL     /* "http://" */
#define L7_LIT_HTTPS_SCHEME 0x2f2f3a7370747468ULL  /* "https://" */
#define L7_HTTP_SCHEME_LEN 7
#define L7_MAX_AUTHORITY 255 /* as a Host value */

/* an absolute-form's authority runs to the first '/', '?' or SP */
L7_CALLBACK long l7_authority_end_cb(__u32 i, void *ctx)
{
	struct l7_ws *ws = ((struct l7_wsref *)ctx)->ws;
	__u32 p = ws->b.pos + i;
	__u8 c;

	if (p >= ws->b.end || i > L7_MAX_AUTHORITY)
		return 1;
	c = l7_wat(ws, p);
	if (c == '/' || c == '?' || c == ' ') {
		ws->b.found = p;
		return 1;
	}
	return 0;
}

/*
 * A target at t that is not origin-form must be absolute-form with the http
 * scheme and an authority that would be a valid Host value: 1-255 bytes, a
 * host that is not empty, no userinfo ('@'). "https://" is 421: l7fast
 * listens in cleartext and would forward the request in cleartext, which an
 * https target forbids (RFC 9110 4.2.2, 7.4). Records the authority; the
 * path starts where it ends.
 */
L7_INLINE int l7_parse_authority(struct l7_ws *ws, __u32 t, __u32 end)
{
	struct l7_wsref r = { .ws = ws };
	struct l7_msg *m = &ws->msg;
	__u64 scheme = l7_lower64(l7_wload(ws, t, 0));
	__u32 a = t + L7_HTTP_SCHEME_LEN, ae, hl;

	if (scheme == L7_LIT_HTTPS_SCHEME)
		return l7_fail(ws, 421, L7_PE_HTTPS_TARGET);
	if (l7_low_bytes(scheme, L7_HTTP_SCHEME_LEN) != L7_LIT_HTTP_SCHEME)
		return l7_fail(ws, 400, L7_PE_BAD_TARGET);
	l7_bscan_reset(ws, a, end);
	L7_LOOP(L7_MAX_AUTHORITY + 2, l7_authority_end_cb, &r);
	ae = ws->b.found;
	/* empty, longer than 255 bytes, or no SP after it */
	if (ae == L7_NONE || ae == a)
		return l7_fail(ws, 400, L7_PE_BAD_TARGET);
	l7_bscan_reset(ws, a, ae);
	L7_LOOP(L7_MAX_AUTHORITY + 1, l7_host_cb, &r);
	hl = ws->b.found != L7_NONE ? ws->b.found : ae - a;
	if (ws->b.bad || ws->b.aux == 1 || hl == 0)
		return l7_fail(ws, 400, L7_PE_BAD_TARGET);
	m->flags |= L7_MF_ABSOLUTE_FORM;
	m->auth_off = (__u16)a;
	m->auth_len = (__u16)(ae - a);
	m->auth_host_len = (__u16)hl;
	return 0;
}

L7_INLINE int l7_parse_request_line(struct l7_ws *ws)
{
	struct l7_wsref r = { .ws = ws };
	struct l7_msg *m = &ws->msg;
	__u32 end = m->line_end[0], sp1, sp2, t, path;

	l7_bscan_reset(ws, 0, end);
	L7_LOOP(L7_MAX_METHOD_LEN + 2, l7_method_cb, &r);
	sp1 = ws->b.found;
	if (ws->b.bad || sp1 == L7_NONE || sp1 == 0)
		return l7_fail(ws, 400, L7_PE_BAD_METHOD);
	m->method = l7_method_id(ws, sp1);

	/* origin-form, "*" for OPTIONS, or absolute-form (RFC 9112 3.2); the
	 * authority-form of CONNECT is refused with the rest */
	t = sp1 + 1;
	path = t;
	if (l7_wat(ws, t) != '/' &&
	    !(m->method == L7_M_OPTIONS && l7_wat(ws, t) == '*' && l7_wat(ws, t + 1) == ' ')) {
		if (l7_parse_authority(ws, t, end))
			return 1;
		path = (__u32)m->auth_off + m->auth_len;
	}
	/* the path's bytes and shape, and the query's bytes */
	l7_bscan_reset(ws, path, end);
	ws->b.aux = L7_NONE;
	L7_LOOP(L7_WS_BUF / 8 + 1, l7_target_cb, &r);
	sp2 = ws->b.found;
	if (ws->b.bad || sp2 == L7_NONE || sp2 <= t || sp2 >= end)
		return l7_fail(ws, 400, L7_PE_BAD_TARGET);
	m->target_off = (__u16)t;
	m->target_len = (__u16)(sp2 - t);
	m->path_off = (__u16)path;
	if (ws->b.aux != L7_NONE) {
		m->path_len = (__u16)(ws->b.aux - path);
		m->flags |= L7_MF_HAS_QUERY;
	} else {
		m->path_len = (__u16)(sp2 - path);
	}
	if (ws->b.acc & L7_PS_BAD)
		m->flags |= L7_MF_PATH_NOT_NORMAL;
	return l7_parse_version(ws, sp2 + 1, end, 400);
}

/* HTTP-version SP 3DIGIT [ SP reason-phrase ]; some servers omit the SP
 * before an empty reason-phrase, which is harmless to accept. */
L7_INLINE int l7_parse_status_line(struct l7_ws *ws)
{
	struct l7_msg *m = &ws->msg;
	__u32 end = m->line_end[0], code = 0;
	int k;

	if (end < 12 || l7_wat(ws, 8) != ' ')
		return l7_fail(ws, 502, L7_PE_BAD_STATUS);
	if (l7_parse_version(ws, 0, 8, 502))
		return 1;
	for (k = 9; k < 12; k++) {
		__u8 c = l7_wat(ws, k);

		if (c < '0' || c > '9')
			return l7_fail(ws, 502, L7_PE_BAD_STATUS);
		code = code * 10 + (c - '0');
	}
	if ((end > 12 && l7_wat(ws, 12) != ' ') || code < 100)
		return l7_fail(ws, 502, L7_PE_BAD_STATUS);
	m->status = (__u16)code;
	return 0;
}

L7_STEP int l7_step_start_line(struct l7_ws *ws, int is_request)
{
	if (!ws)
		return 1;
	return is_request ? l7_parse_request_line(ws) : l7_parse_status_line(ws);
}

/* ---- stage 3: header fields ----------------------------------------------- */

/* The lower-cased bytes [off, off+len) equal a literal of len <= 24 bytes
 * given as little-endian words a, b, c. */
L7_INLINE int l7_lit_eq(const struct l7_window *w, __u32 off, __u32 len, __u64 a, __u64 b,
			__u64 c)
{
	__u64 x = l7_lower64(l7_load64(w, off, 0));

	if (len < 8)
		return l7_low_bytes(x, len) == a;
	if (x != a)
		return 0;
	if (len == 8)
		return 1;
	x = l7_lower64(l7_load64(w, off + 8, 0));
	if (len < 16)
		return l7_low_bytes(x, len - 8) == b;
	if (x != b)
		return 0;
	if (len == 16)
		return 1;
	x = l7_lower64(l7_load64(w, off + 16, 0));
	if (len < 24)
		return l7_low_bytes(x, len - 16) == c;
	return x == c;
}

L7_INLINE int l7_ws_lit(const struct l7_ws *ws, __u32 off, __u32 len, __u32 want, __u64 a,
			__u64 b, __u64 c)
{
	struct l7_window w = l7_ws_window(ws);

	return len == want && l7_lit_eq(&w, off, len, a, b, c);
}

#define L7_LIT_HOST 0x74736f68ULL              /* "host" */
#define L7_LIT_CONTENT_ 0x2d746e65746e6f63ULL  /* "content-" */
#define L7_LIT_LENGTH 0x6874676e656cULL        /* "length" */
#define L7_LIT_TRANSFER 0x726566736e617274ULL  /* "transfer" */
#define L7_LIT__ENCODIN 0x6e69646f636e652dULL  /* "-encodin" */
#define L7_LIT_G 0x67ULL                       /* "g" */
#define L7_LIT_CONNECTI 0x697463656e6e6f63ULL  /* "connecti" */
#define L7_LIT_ON 0x6e6fULL                    /* "on" */
#define L7_LIT_UPGRADE 0x65646172677075ULL     /* "upgrade" */
#define L7_LIT_EXPECT 0x746365707865ULL        /* "expect" */
#define L7_LIT_CHUNKED 0x64656b6e756863ULL     /* "chunked" */
#define L7_LIT_CLOSE 0x65736f6c63ULL           /* "close" */
#define L7_LIT_KEEP_ALI 0x696c612d7065656bULL  /* "keep-ali" */
#define L7_LIT_VE 0x6576ULL                    /* "ve" */
#define L7_LIT_100_CONT 0x746e6f632d303031ULL  /* "100-cont" */
#define L7_LIT_INUE 0x65756e69ULL              /* "inue" */


#define L7_MAX_NAME_SCAN 256

/* field-name up to ':' */
L7_CALLBACK long l7_name_cb(__u32 i, void *ctx)
{
	struct l7_ws *ws = ((struct l7_wsref *)ctx)->ws;
	__u32 p = ws->b.pos + i;
	__u8 c;

	if (p >= ws->b.end)
		return 1;
	if (i >= L7_MAX_NAME_SCAN) {
		ws->b.aux = 1; /* too long */
		return 1;
	}
	c = l7_wat(ws, p);
	if (c == ':') {
		ws->b.found = p;
		return 1;
	}
	if (!l7_is_tchar(c)) {
		ws->b.bad = 1;
		return 1;
	}
	return 0;
}

/* leading OWS: advances b.pos over SP/HTAB */
L7_CALLBACK long l7_ows_fwd_cb(__u32 i, void *ctx)
{
	struct l7_ws *ws = ((struct l7_wsref *)ctx)->ws;
	__u8 c;

	if (ws->b.pos >= ws->b.end)
		return 1;
	c = l7_wat(ws, ws->b.pos);
	if (c != ' ' && c != '\t')
		return 1;
	if (i >= L7_MAX_OWS) {
		ws->b.bad = 1;
		return 1;
	}
	ws->b.pos++;
	return 0;
}

/* trailing OWS: moves b.end back over SP/HTAB, not below b.pos */
L7_CALLBACK long l7_ows_back_cb(__u32 i, void *ctx)
{
	struct l7_ws *ws = ((struct l7_wsref *)ctx)->ws;
	__u8 c;

	if (ws->b.end <= ws->b.pos)
		return 1;
	c = l7_wat(ws, ws->b.end - 1);
	if (c != ' ' && c != '\t')
		return 1;
	if (i >= L7_MAX_OWS) {
		ws->b.bad = 1;
		return 1;
	}
	ws->b.end--;
	return 0;
}

L7_CALLBACK long l7_digits_cb(__u32 i, void *ctx)
{
	struct l7_ws *ws = ((struct l7_wsref *)ctx)->ws;
	__u32 p = ws->b.pos + i;
	__u8 c;

	if (p >= ws->b.end)
		return 1;
	c = l7_wat(ws, p);
	if (c < '0' || c > '9') {
		ws->b.bad = 1;
		return 1;
	}
	ws->b.num = ws->b.num * 10 + (c - '0');
	return 0;
}

/* uri-host [ ":" port ], a Host value or an absolute-form's authority;
 * b.found = offset of ':' from b.pos, b.aux = state of an IP-literal's
 * brackets. '@' is refused: no userinfo (RFC 9110 4.2.4). */
L7_CALLBACK long l7_host_cb(__u32 i, void *ctx)
{
	struct l7_ws *ws = ((struct l7_wsref *)ctx)->ws;
	__u32 p = ws->b.pos + i;
	__u8 c;

	if (p >= ws->b.end)
		return 1;
	c = l7_wat(ws, p);
	if (i == 0 && c == '[')
		ws->b.aux = 1;
	if (c == ']' && ws->b.aux == 1) {
		ws->b.aux = 2;
		return 0;
	}
	if (c == ':' && ws->b.aux != 1) {
		if (ws->b.found != L7_NONE) {
			ws->b.bad = 1;
			return 1;
		}
		ws->b.found = i;
		return 0;
	}
	if (ws->b.found != L7_NONE) {
		if (c < '0' || c > '9') {
			ws->b.bad = 1;
			return 1;
		}
		return 0;
	}
	if (c == ' ' || c == '\t' || c == '/' || c == '@' || c == '?' || c == '#' ||
	    c == '\\' || c >= 0x7f) {
		ws->b.bad = 1;
		return 1;
	}
	return 0;
}

/* Connection: comma-separated tokens; b.aux = start of the current token + 1
 * (0: between tokens), b.num = 1 once this element's token ended (until the
 * next comma), b.acc collects L7_MF_CLOSE/KEEP_ALIVE/UPGRADE. */
L7_INLINE void l7_conn_token(struct l7_ws *ws, __u32 start, __u32 end)
{
	__u32 len = end - start;

	if (l7_ws_lit(ws, start, len, 5, L7_LIT_CLOSE, 0, 0))
		ws->b.acc |= L7_MF_CLOSE;
	else if (l7_ws_lit(ws, start, len, 10, L7_LIT_KEEP_ALI, L7_LIT_VE, 0))
		ws->b.acc |= L7_MF_KEEP_ALIVE;
	else if (l7_ws_lit(ws, start, len, 7, L7_LIT_UPGRADE, 0, 0))
		ws->b.acc |= L7_MF_UPGRADE;
}

L7_CALLBACK long l7_conn_tokens_cb(__u32 i, void *ctx)
{
	struct l7_ws *ws = ((struct l7_wsref *)ctx)->ws;
	__u32 p = ws->b.pos + i;
	__u8 c;

	if (p >= ws->b.end) {
		if (ws->b.aux)
			l7_conn_token(ws, ws->b.aux - 1, p);
		return 1;
	}
	c = l7_wat(ws, p);
	if (l7_is_tchar(c)) {
		/* a second token in one list element ("close x"): whitespace
		 * only surrounds an element, it does not separate them */
		if (ws->b.num) {
			ws->b.bad = 1;
			return 1;
		}
		if (!ws->b.aux)
			ws->b.aux = p + 1;
		return 0;
	}
	if (ws->b.aux) {
		l7_conn_token(ws, ws->b.aux - 1, p);
		ws->b.aux = 0;
		ws->b.num = 1;
	}
	if (c == ',')
		ws->b.num = 0;
	else if (c != ' ' && c != '\t') {
		ws->b.bad = 1;
		return 1;
	}
	return 0;
}

/* What the parser itself must know about a field: framing, Host,
 * Connection, Upgrade, Expect. Other fields are only recorded. */
L7_INLINE int l7_known_field(struct l7_ws *ws, __u32 n)
{
	struct l7_wsref r = { .ws = ws };
	struct l7_msg *m = &ws->msg;
	const struct l7_hdr *h = &m->hdr[L7_IDX(n, L7_MAX_HEADERS - 1)];
	__u32 no = h->name_off, nl = h->name_len, vo = h->val_off, vl = h->val_len;

	if (l7_ws_lit(ws, no, nl, 4, L7_LIT_HOST, 0, 0)) {
		__u32 hl;

		if (m->host_idx != L7_NONE)
			return l7_fail(ws, 400, L7_PE_DUP_HOST);
		m->host_idx = (__u16)n;
		if (vl == 0 || vl > 255)
			return l7_fail(ws, 400, L7_PE_BAD_HOST);
		l7_bscan_reset(ws, vo, vo + vl);
		L7_LOOP(256, l7_host_cb, &r);
		hl = ws->b.found != L7_NONE ? ws->b.found : vl;
		if (ws->b.bad || ws->b.aux == 1 || hl == 0)
			return l7_fail(ws, 400, L7_PE_BAD_HOST);
		m->host_len = (__u16)hl;
	} else if (l7_ws_lit(ws, no, nl, 14, L7_LIT_CONTENT_, L7_LIT_LENGTH, 0)) {
		if (m->flags & L7_MF_HAS_CL)
			return l7_fail(ws, 400, L7_PE_DUP_CONTENT_LENGTH);
		m->flags |= L7_MF_HAS_CL;
		/* 18 digits cannot overflow 64 bits */
		if (vl == 0 || vl > 18)
			return l7_fail(ws, 400, L7_PE_BAD_CONTENT_LENGTH);
		l7_bscan_reset(ws, vo, vo + vl);
		L7_LOOP(19, l7_digits_cb, &r);
		if (ws->b.bad)
			return l7_fail(ws, 400, L7_PE_BAD_CONTENT_LENGTH);
		m->content_length = ws->b.num;
	} else if (l7_ws_lit(ws, no, nl, 17, L7_LIT_TRANSFER, L7_LIT__ENCODIN, L7_LIT_G)) {
		if (m->flags & L7_MF_HAS_TE)
			return l7_fail(ws, 400, L7_PE_DUP_TRANSFER_ENCODING);
		m->flags |= L7_MF_HAS_TE;
		/* only a lone "chunked" is understood; anything else (gzip,
		 * stacked codings, parameters) is refused */
		if (!l7_ws_lit(ws, vo, vl, 7, L7_LIT_CHUNKED, 0, 0))
			return l7_fail(ws, 501, L7_PE_UNKNOWN_CODING);
	} else if (l7_ws_lit(ws, no, nl, 10, L7_LIT_CONNECTI, L7_LIT_ON, 0)) {
		if (vl > L7_MAX_MATCH_STR)
			return l7_fail(ws, 400, L7_PE_BAD_CONNECTION);
		l7_bscan_reset(ws, vo, vo + vl);
		L7_LOOP(L7_MAX_MATCH_STR + 1, l7_conn_tokens_cb, &r);
		if (ws->b.bad)
			return l7_fail(ws, 400, L7_PE_BAD_CONNECTION);
		m->flags |= ws->b.acc;
	} else if (l7_ws_lit(ws, no, nl, 7, L7_LIT_UPGRADE, 0, 0)) {
		m->flags |= L7_MF_UPGRADE;
	} else if (l7_ws_lit(ws, no, nl, 6, L7_LIT_EXPECT, 0, 0)) {
		if (l7_ws_lit(ws, vo, vl, 12, L7_LIT_100_CONT, L7_LIT_INUE, 0))
			m->flags |= L7_MF_EXPECT_100;
		else
			m->flags |= L7_MF_EXPECT_OTHER;
	}
	return 0;
}

/* One field line: name, colon, OWS-trimmed value. */
L7_CALLBACK long l7_field_cb(__u32 idx, void *ctx)
{
	struct l7_ws *ws = ((struct l7_wsref *)ctx)->ws;
	struct l7_wsref r = { .ws = ws };
	struct l7_msg *m = &ws->msg;
	__u32 line = idx + 1, start, end, colon, n;
	struct l7_hdr *h;
	__u8 c0;

	if (line >= m->n_lines)
		return 1;
	start = m->line_end[L7_IDX(line - 1, L7_LINE_MASK)] + 2;
	end = m->line_end[L7_IDX(line, L7_LINE_MASK)];
	if (end <= start)
		return l7_fail(ws, 400, L7_PE_NO_COLON);
	c0 = l7_wat(ws, start);
	if (c0 == ' ' || c0 == '\t')
		return l7_fail(ws, 400, L7_PE_OBS_FOLD);

	l7_bscan_reset(ws, start, end);
	L7_LOOP(L7_MAX_NAME_SCAN + 1, l7_name_cb, &r);
	if (ws->b.bad)
		return l7_fail(ws, 400, L7_PE_BAD_NAME);
	colon = ws->b.found;
	if (colon == L7_NONE)
		return ws->b.aux ? l7_fail(ws, 431, L7_PE_BAD_NAME)
				 : l7_fail(ws, 400, L7_PE_NO_COLON);
	if (colon == start)
		return l7_fail(ws, 400, L7_PE_BAD_NAME);

	n = m->n_hdrs;
	if (n >= L7_MAX_HEADERS)
		return l7_fail(ws, 431, L7_PE_TOO_MANY_LINES);
	h = &m->hdr[L7_IDX(n, L7_MAX_HEADERS - 1)];
	h->name_off = (__u16)start;
	h->name_len = (__u16)(colon - start);
	h->name_hash = ws->is_request ? l7_name_hash(ws, start, colon - start) : 0;

	l7_bscan_reset(ws, colon + 1, end);
	L7_LOOP(L7_MAX_OWS + 1, l7_ows_fwd_cb, &r);
	L7_LOOP(L7_MAX_OWS + 1, l7_ows_back_cb, &r);
	if (ws->b.bad)
		return l7_fail(ws, 400, L7_PE_LONG_OWS);
	h->val_off = (__u16)ws->b.pos;
	h->val_len = (__u16)(ws->b.end > ws->b.pos ? ws->b.end - ws->b.pos : 0);
	m->n_hdrs = (__u16)(n + 1);
	return l7_known_field(ws, n);
}

L7_STEP int l7_step_fields(struct l7_ws *ws)
{
	struct l7_wsref r = { .ws = ws };

	if (!ws)
		return 1;
	ws->result = L7_P_OK;
	L7_LOOP(L7_MAX_LINES, l7_field_cb, &r);
	return ws->result == L7_P_ERROR;
}

/* ---- the fast stages ---------------------------------------------------- */

/*
 * Most heads are plain: a known method, a target the strict scan passes, an
 * HTTP/1.1 or 1.0 version, and field lines "Name: value" whose name is
 * letters, digits and '-', with at most one space after the colon and none
 * at the end of the line. The fast stages take exactly those, word at a
 * time and one callback per field line instead of one per byte, and hand
 * everything else to the strict stages (L7_P_SLOW), which decide it; stage
 * 1 (line ends, control characters) is the same for both. Whatever the fast
 * stages accept, the strict ones accept with the very same l7_msg: the
 * fuzzers check it (tests/fuzz: http_parse runs both natively, http_diff
 * runs them as BPF against the native build).
 */
#define L7_P_SLOW 3 /* between the stages only: the strict stages decide */
#define L7_FAST_NAME_WORDS 8  /* names up to 64 bytes */
#define L7_FAST_HOST_WORDS 8  /* Host values up to 64 bytes */

/* The low n bytes of x are letters, digits or '-' (a subset of tchar). */
L7_INLINE int l7_fast_name_word(__u64 x, __u32 n)
{
	__u64 want = l7_low_highs(n);
	__u64 ok = l7_between(x, '0' - 1, '9' + 1) | l7_between(x | (L7_ONES * 0x20), 'a' - 1, 'z' + 1) |
		   l7_eq_mask(x, '-');

	return (ok & want) == want;
}

/* The low n bytes of x are digits. */
L7_INLINE int l7_fast_digits(__u64 x, __u32 n)
{
	__u64 want = l7_low_highs(n);

	return (l7_between(x, '0' - 1, '9' + 1) & want) == want;
}

L7_INLINE int l7_fast_is_ows(__u8 c)
{
	return c == ' ' || c == '\t';
}

/* Host [":" port]: what l7_host_cb accepts, without IP literals; sets
 * host_len. 1: not decided here. */
L7_INLINE int l7_fast_host(struct l7_ws *ws, __u32 vo, __u32 vl)
{
	__u32 colon = L7_NONE, k;

	if (vl == 0 || vl > L7_FAST_HOST_WORDS * 8)
		return 1;
	L7_UNROLL
	for (k = 0; k < L7_FAST_HOST_WORDS; k++) {
		__u32 p = vo + k * 8, n;
		__u64 x, bad, cm;

		if (k * 8 >= vl)
			break;
		n = vl - k * 8 < 8 ? vl - k * 8 : 8;
		x = l7_wload(ws, p, 'a');
		bad = (l7_eq_mask(x, ' ') | l7_eq_mask(x, '\t') | l7_eq_mask(x, '/') | l7_eq_mask(x, '@') |
		       l7_eq_mask(x, '?') | l7_eq_mask(x, '#') | l7_eq_mask(x, '\\') | l7_eq_mask(x, '[') |
		       l7_eq_mask(x, ']') | (x & L7_HIGHS)) & l7_low_highs(n);
		if (bad)
			return 1;
		cm = l7_eq_mask(x, ':') & l7_low_highs(n);
		if (colon == L7_NONE && cm) {
			__u32 at = l7_lowest_byte(cm);

			colon = k * 8 + at;
			cm &= ~(0x80ULL << (8 * at));
			/* the port: digits only, after the colon in this word */
			if (at + 1 < n && !l7_fast_digits(x >> (8 * (at + 1)), n - at - 1))
				return 1;
		} else if (colon != L7_NONE && !l7_fast_digits(x, n)) {
			return 1;
		}
		if (cm)
			return 1; /* a second ':' */
	}
	if (colon == 0)
		return 1;
	ws->msg.host_len = (__u16)(colon == L7_NONE ? vl : colon);
	return 0;
}

#define L7_LIT_KEEP_ALIVE_LEN 10

/* l7_known_field for the fields the fast stages decide; 1: not here. The
 * name's length and its first two words, lower-cased and cut to the name,
 * come from the name scan: a line whose name is none of these costs one
 * switch. */
L7_INLINE int l7_fast_known_field(struct l7_ws *ws, __u32 n, __u32 nl, __u64 lw0, __u64 lw1)
{
	struct l7_msg *m = &ws->msg;
	const struct l7_hdr *h = &m->hdr[L7_IDX(n, L7_MAX_HEADERS - 1)];
	__u32 vo = h->val_off, vl = h->val_len, k;
	__u64 v = 0;

	switch (nl) {
	case 4:
		if (lw0 != L7_LIT_HOST)
			return 0;
		if (m->host_idx != L7_NONE || l7_fast_host(ws, vo, vl))
			return 1;
		m->host_idx = (__u16)n;
		return 0;
	case 6:
		return lw0 == L7_LIT_EXPECT;
	case 7:
		return lw0 == L7_LIT_UPGRADE;
	case 10:
		if (lw0 != L7_LIT_CONNECTI || lw1 != L7_LIT_ON)
			return 0;
		if (l7_ws_lit(ws, vo, vl, 5, L7_LIT_CLOSE, 0, 0))
			m->flags |= L7_MF_CLOSE;
		else if (l7_ws_lit(ws, vo, vl, L7_LIT_KEEP_ALIVE_LEN, L7_LIT_KEEP_ALI, L7_LIT_VE, 0))
			m->flags |= L7_MF_KEEP_ALIVE;
		else
			return 1;
		return 0;
	case 14:
		if (lw0 != L7_LIT_CONTENT_ || lw1 != L7_LIT_LENGTH)
			return 0;
		if ((m->flags & L7_MF_HAS_CL) || vl == 0 || vl > 18 ||
		    !l7_fast_digits(l7_wload(ws, vo, '0'), vl < 8 ? vl : 8) ||
		    (vl > 8 && !l7_fast_digits(l7_wload(ws, vo + 8, '0'), vl < 16 ? vl - 8 : 8)) ||
		    (vl > 16 && !l7_fast_digits(l7_wload(ws, vo + 16, '0'), vl - 16)))
			return 1;
		for (k = 0; k < 18; k++) {
			if (k >= vl)
				break;
			v = v * 10 + (l7_wat(ws, vo + k) - '0');
		}
		m->flags |= L7_MF_HAS_CL;
		m->content_length = v;
		return 0;
	case 17:
		/* transfer-encoding: "transfer" "-encodin" and a 'g' or 'G';
		 * its one value l7_known_field takes, a lone "chunked" (any
		 * case), here too: the rest (a second line, other codings)
		 * to the strict stages, which refuse it */
		if (lw0 != L7_LIT_TRANSFER || lw1 != L7_LIT__ENCODIN ||
		    (l7_wat(ws, h->name_off + 16) | 0x20) != 'g')
			return 0;
		if ((m->flags & L7_MF_HAS_TE) || !l7_ws_lit(ws, vo, vl, 7, L7_LIT_CHUNKED, 0, 0))
			return 1;
		m->flags |= L7_MF_HAS_TE;
		return 0;
	}
	return 0;
}

/* One field line, as l7_field_cb would take it, or L7_P_SLOW. The name is
 * scanned a word at a time: its characters, the colon, its hash (requests)
 * and the words l7_fast_known_field dispatches on, in one pass. Loads are
 * raw: the masks keep only bytes before the line's end. */
L7_CALLBACK long l7_fast_field_cb(__u32 idx, void *ctx)
{
	struct l7_ws *ws = ((struct l7_wsref *)ctx)->ws;
	struct l7_msg *m = &ws->msg;
	__u32 line = idx + 1, start, end, colon = L7_NONE, vo, ve, n, k, nl;
	__u64 hash = l7_hash_init(0), lw0 = 0, lw1 = 0;
	struct l7_hdr *h;

	if (line >= m->n_lines)
		return 1;
	start = m->line_end[L7_IDX(line - 1, L7_LINE_MASK)] + 2;
	end = m->line_end[L7_IDX(line, L7_LINE_MASK)];
	if (end <= start)
		goto slow;
	L7_UNROLL
	for (k = 0; k < L7_FAST_NAME_WORDS; k++) {
		__u32 p = start + k * 8, avail, lim;
		__u64 x, cm, lw;

		if (p >= end)
			break;
		avail = end - p < 8 ? end - p : 8;
		x = l7_wraw(ws, p);
		cm = l7_eq_mask(x, ':') & l7_low_highs(avail);
		lim = cm ? l7_lowest_byte(cm) : avail;
		if (lim && !l7_fast_name_word(x, lim))
			goto slow;
		lw = lim < 8 ? l7_low_bytes(l7_lower64(x), lim) : l7_lower64(x);
		if (k == 0)
			lw0 = lw;
		else if (k == 1)
			lw1 = lw;
		if (lim)
			hash = l7_hash_word(hash, lw);
		if (cm) {
			colon = p + lim;
			break;
		}
	}
	if (colon == L7_NONE || colon == start)
		goto slow;
	nl = colon - start;
	vo = colon + 1;
	ve = end;
	if (vo < ve && l7_fast_is_ows(l7_wat(ws, vo)))
		vo++;
	if ((vo < ve && l7_fast_is_ows(l7_wat(ws, vo))) || (ve > vo && l7_fast_is_ows(l7_wat(ws, ve - 1))))
		goto slow;
	n = m->n_hdrs;
	if (n >= L7_MAX_HEADERS)
		goto slow;
	h = &m->hdr[L7_IDX(n, L7_MAX_HEADERS - 1)];
	h->name_off = (__u16)start;
	h->name_len = (__u16)nl;
	/* l7_name_hash: the hash of the lower-cased name, seed 0 */
	h->name_hash = ws->is_request ? (__u32)l7_hash_final(hash, nl) : 0;
	h->val_off = (__u16)vo;
	h->val_len = (__u16)(ve - vo);
	m->n_hdrs = (__u16)(n + 1);
	if (l7_fast_known_field(ws, n, nl, lw0, lw1))
		goto slow;
	return 0;
slow:
	ws->result = L7_P_SLOW;
	return 1;
}

/*
 * The request-target a word at a time, for the fast stage: what
 * l7_target_cb finds byte by byte (the SP that ends it in b.found, the
 * first '?' in b.aux, an invalid byte in b.bad, L7_PS_BAD in b.acc) from
 * masks. The path's shape: with S and D the masks of '/' and '.' in the
 * path and T those of '/' and of the byte that ends the path, "//" is
 * S[j-1] & S[j], a "." segment S[j-2] & D[j-1] & T[j], a ".." segment
 * S[j-3] & D[j-2] & D[j-1] & T[j]; the previous word's S and D (b.num,
 * b.num2) carry the look-behind across words.
 */
L7_CALLBACK long l7_fast_target_cb(__u32 idx, void *ctx)
{
	struct l7_ws *ws = ((struct l7_wsref *)ctx)->ws;
	__u32 off = ws->b.pos + idx * 8, avail, stop, qstop;
	__u64 w, valid, sp, keep, q, path, sl, dt, t, ps, pd, bad;

	if (off >= ws->b.end)
		return 1;
	avail = ws->b.end - off < 8 ? ws->b.end - off : 8;
	valid = l7_low_highs(avail);
	w = l7_wraw(ws, off);
	sp = l7_eq_mask(w, ' ') & valid;
	stop = sp ? l7_lowest_byte(sp) : avail;
	keep = l7_low_highs(stop);
	if ((l7_ctl_mask(w) | l7_del_mask(w) | (w & L7_HIGHS)) & keep) {
		ws->b.bad = 1;
		return 1;
	}
	if (ws->b.aux == L7_NONE) {
		q = l7_eq_mask(w, '?') & keep;
		qstop = q ? l7_lowest_byte(q) : stop;
		path = l7_low_highs(qstop);
		sl = l7_eq_mask(w, '/') & path;
		dt = l7_eq_mask(w, '.') & path;
		/* the byte that ends the path, when this word holds it */
		t = sl | (qstop < avail ? 0x80ULL << (8 * qstop) : 0);
		ps = ws->b.num;
		pd = ws->b.num2;
		bad = (((sl << 8) | (ps >> 56)) & sl) |
		      (((sl << 16) | (ps >> 48)) & ((dt << 8) | (pd >> 56)) & t) |
		      (((sl << 24) | (ps >> 40)) & ((dt << 16) | (pd >> 48)) & ((dt << 8) | (pd >> 56)) & t) |
		      ((l7_eq_mask(w, '%') | l7_eq_mask(w, '\\')) & path);
		if (bad)
			ws->b.acc |= L7_PS_BAD;
		ws->b.num = sl;
		ws->b.num2 = dt;
		if (q)
			ws->b.aux = off + qstop;
	}
	if (sp) {
		ws->b.found = off + stop;
		return 1;
	}
	return 0;
}

/* The request line, for the methods l7_method_id knows (CONNECT included),
 * an origin-form target and HTTP/1.1 or 1.0; else L7_P_SLOW. */
L7_INLINE int l7_fast_request_line(struct l7_ws *ws)
{
	struct l7_wsref r = { .ws = ws };
	struct l7_msg *m = &ws->msg;
	__u32 end = m->line_end[0], sp1, sp2;
	__u64 x = l7_wload(ws, 0, 'A'), sm;
	__u16 method;

	sm = l7_eq_mask(x, ' ');
	if (!sm)
		return L7_P_SLOW;
	sp1 = l7_lowest_byte(sm);
	method = sp1 >= 3 ? l7_method_id(ws, sp1) : (__u16)L7_M_OTHER;
	if (method == L7_M_OTHER || end < sp1 + 11)
		return L7_P_SLOW;
	sp2 = end - 9;
	if (l7_wat(ws, sp2) != ' ' || l7_wat(ws, sp1 + 1) != '/')
		return L7_P_SLOW;
	/* the target as the strict scan takes it: it must end at sp2 */
	l7_bscan_reset(ws, sp1 + 1, end);
	ws->b.aux = L7_NONE;
	L7_LOOP(L7_WS_BUF / 8 + 1, l7_fast_target_cb, &r);
	if (ws->b.bad || ws->b.found != sp2)
		return L7_P_SLOW;
	if (l7_parse_version(ws, sp2 + 1, end, 400))
		return L7_P_SLOW;
	m->method = method;
	m->target_off = (__u16)(sp1 + 1);
	m->target_len = (__u16)(sp2 - sp1 - 1);
	m->path_off = m->target_off;
	if (ws->b.aux != L7_NONE) {
		m->path_len = (__u16)(ws->b.aux - sp1 - 1);
		m->flags |= L7_MF_HAS_QUERY;
	} else {
		m->path_len = m->target_len;
	}
	if (ws->b.acc & L7_PS_BAD)
		m->flags |= L7_MF_PATH_NOT_NORMAL;
	return L7_P_OK;
}

/* Stages 2 and 3 the fast way: L7_P_OK, L7_P_ERROR (a status line the
 * strict stage would refuse too: it is the same code) or L7_P_SLOW. */
L7_STEP int l7_step_fast(struct l7_ws *ws, int is_request)
{
	struct l7_wsref r = { .ws = ws };
	int st;

	if (!ws)
		return L7_P_SLOW;
	if (is_request) {
		st = l7_fast_request_line(ws);
		if (st != L7_P_OK)
			return st;
	} else if (l7_parse_status_line(ws)) {
		return L7_P_ERROR;
	}
	ws->result = L7_P_OK;
	L7_LOOP(L7_MAX_LINES, l7_fast_field_cb, &r);
	return (int)ws->result;
}

/* What the stages after stage 1 set, cleared before the strict stages run
 * after the fast ones gave up. */
L7_INLINE void l7_msg_reset_fields(struct l7_msg *m)
{
	m->status = 0;
	m->error = 0;
	m->method = L7_M_OTHER;
	m->version = 0;
	m->flags = 0;
	m->target_off = 0;
	m->target_len = 0;
	m->path_off = 0;
	m->path_len = 0;
	m->auth_off = 0;
	m->auth_len = 0;
	m->auth_host_len = 0;
	m->host_idx = L7_NONE;
	m->host_len = 0;
	m->n_hdrs = 0;
	m->content_length = 0;
}

/* ---- entry points ------------------------------------------------------- */

L7_INLINE void l7_msg_reset(struct l7_msg *m)
{
	m->status = 0;
	m->error = 0;
	m->method = L7_M_OTHER;
	m->version = 0;
	m->hdr_len = 0;
	m->flags = 0;
	m->target_off = 0;
	m->target_len = 0;
	m->path_off = 0;
	m->path_len = 0;
	m->auth_off = 0;
	m->auth_len = 0;
	m->auth_host_len = 0;
	m->host_idx = L7_NONE;
	m->host_len = 0;
	m->n_lines = 0;
	m->n_hdrs = 0;
	m->body_kind = L7_BODY_NONE;
	m->content_length = 0;
}

/*
 * Parses the head of a request (is_request) or a response in
 * ws->buf[0, ws->len). Returns enum l7_parse_status; on L7_P_OK the head is
 * msg.hdr_len bytes and msg.body_kind / msg.content_length frame the body.
 * For responses the caller still applies the rules that depend on the
 * request (HEAD, 1xx, 204, 304): l7_response_body().
 */
L7_INLINE int l7_parse_head_with(struct l7_ws *ws, int is_request, int fast)
{
	struct l7_msg *m = &ws->msg;
	int st;

	l7_msg_reset(m);
	ws->is_request = (__u32)is_request;
	st = l7_step_lines(ws);
	if (st != L7_P_OK)
		return st;
	st = fast ? l7_step_fast(ws, is_request) : L7_P_SLOW;
	if (st == L7_P_ERROR)
		return st;
	if (st != L7_P_OK) {
		l7_msg_reset_fields(m);
		if (l7_step_start_line(ws, is_request) || l7_step_fields(ws))
			return L7_P_ERROR;
	}

	if (m->flags & L7_MF_HAS_TE) {
		if (m->flags & L7_MF_HAS_CL) {
			l7_fail(ws, is_request ? 400 : 502, L7_PE_TE_AND_CL);
			return L7_P_ERROR;
		}
		if (m->version == 10) {
			l7_fail(ws, is_request ? 400 : 502, L7_PE_TE_HTTP10);
			return L7_P_ERROR;
		}
		m->body_kind = L7_BODY_CHUNKED;
	} else if (m->flags & L7_MF_HAS_CL) {
		m->body_kind = m->content_length ? L7_BODY_LENGTH : L7_BODY_NONE;
	} else {
		m->body_kind = is_request ? L7_BODY_NONE : L7_BODY_UNTIL_CLOSE;
	}
	/* HTTP/1.0 closes unless it asked for keep-alive */
	if (m->version == 10 && !(m->flags & L7_MF_KEEP_ALIVE))
		m->flags |= L7_MF_CLOSE;
	if (is_request && m->host_idx == L7_NONE && m->version == 11) {
		l7_fail(ws, 400, L7_PE_NO_HOST);
		return L7_P_ERROR;
	}
	return L7_P_OK;
}

L7_INLINE int l7_parse_head(struct l7_ws *ws, int is_request)
{
	return l7_parse_head_with(ws, is_request, 1);
}

/* The strict stages alone: the reference the fuzzers hold the fast ones to. */
L7_INLINE int l7_parse_head_strict(struct l7_ws *ws, int is_request)
{
	return l7_parse_head_with(ws, is_request, 0);
}

/* Body framing of a response given the request it answers (RFC 9112 6.3). */
L7_INLINE void l7_response_body(struct l7_msg *resp, int req_was_head)
{
	__u16 st = resp->status;

	if (req_was_head || (st >= 100 && st < 200) || st == 204 || st == 304) {
		resp->body_kind = L7_BODY_NONE;
		resp->content_length = 0;
	}
	if (resp->body_kind == L7_BODY_UNTIL_CLOSE)
		resp->flags |= L7_MF_CLOSE;
}

/* ---- body framing (Content-Length and chunked) -------------------------- */

L7_INLINE void l7_body_init(struct l7_body_state *b, __u8 kind, __u64 length)
{
	b->kind = kind;
	b->phase = L7_CH_SIZE;
	b->digits = 0;
	b->done = kind == L7_BODY_NONE || (kind == L7_BODY_LENGTH && length == 0);
	b->line = 0;
	b->pad = 0;
	b->remaining = kind == L7_BODY_LENGTH ? length : 0;
}

#define L7_MAX_CHUNK_DIGITS 15 /* 60-bit sizes: no overflow, no ambiguity */
#define L7_MAX_CHUNK_LINE 4096 /* extension or trailer line */

enum l7_body_result {
	L7_B_OK = 0,
	L7_B_ERROR = -1,
};

L7_INLINE int l7_hexval(__u8 c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/*
 * Advances chunked framing over one byte that is not chunk data. Returns
 * L7_B_ERROR on malformed framing. The caller skips chunk data itself (it
 * never needs to read it): while phase == L7_CH_DATA, `remaining` bytes
 * belong to the chunk.
 */
L7_INLINE int l7_chunk_byte(struct l7_body_state *b, __u8 c)
{
	int v;

	switch (b->phase) {
	case L7_CH_SIZE:
		v = l7_hexval(c);
		if (v >= 0) {
			if (b->digits >= L7_MAX_CHUNK_DIGITS)
				return L7_B_ERROR;
			b->remaining = (b->remaining << 4) | (__u64)v;
			b->digits++;
			return L7_B_OK;
		}
		if (!b->digits)
			return L7_B_ERROR;
		if (c == '\r') {
			b->phase = L7_CH_SIZE_LF;
			return L7_B_OK;
		}
		if (c == ';' || c == ' ' || c == '\t') {
			b->phase = L7_CH_EXT;
			b->line = 0;
			return L7_B_OK;
		}
		return L7_B_ERROR;
	case L7_CH_EXT:
		if (c == '\r') {
			b->phase = L7_CH_SIZE_LF;
			return L7_B_OK;
		}
		if (c == '\n' || (c < 0x20 && c != '\t') || c == 0x7f ||
		    ++b->line > L7_MAX_CHUNK_LINE)
			return L7_B_ERROR;
		return L7_B_OK;
	case L7_CH_SIZE_LF:
		if (c != '\n')
			return L7_B_ERROR;
		b->digits = 0;
		if (b->remaining == 0) {
			b->phase = L7_CH_TRAILER;
			return L7_B_OK;
		}
		b->phase = L7_CH_DATA;
		return L7_B_OK;
	case L7_CH_DATA_CR:
		if (c != '\r')
			return L7_B_ERROR;
		b->phase = L7_CH_DATA_LF;
		return L7_B_OK;
	case L7_CH_DATA_LF:
		if (c != '\n')
			return L7_B_ERROR;
		b->phase = L7_CH_SIZE;
		b->remaining = 0;
		return L7_B_OK;
	case L7_CH_TRAILER:
		if (c == '\r') {
			b->phase = L7_CH_END_LF;
			return L7_B_OK;
		}
		if (!l7_is_tchar(c))
			return L7_B_ERROR;
		b->phase = L7_CH_TRAILER_NAME;
		b->line = 1;
		return L7_B_OK;
	case L7_CH_TRAILER_NAME:
		if (c == ':') {
			b->phase = L7_CH_TRAILER_LINE;
			return L7_B_OK;
		}
		if (!l7_is_tchar(c) || ++b->line > L7_MAX_CHUNK_LINE)
			return L7_B_ERROR;
		return L7_B_OK;
	case L7_CH_TRAILER_LINE:
		if (c == '\r') {
			b->phase = L7_CH_TRAILER_LF;
			return L7_B_OK;
		}
		if (c == '\n' || (c < 0x20 && c != '\t') || c == 0x7f ||
		    ++b->line > L7_MAX_CHUNK_LINE)
			return L7_B_ERROR;
		return L7_B_OK;
	case L7_CH_TRAILER_LF:
		if (c != '\n')
			return L7_B_ERROR;
		b->phase = L7_CH_TRAILER;
		return L7_B_OK;
	case L7_CH_END_LF:
		if (c != '\n')
			return L7_B_ERROR;
		b->phase = L7_CH_DONE;
		b->done = 1;
		return L7_B_OK;
	}
	return L7_B_ERROR;
}

#endif /* L7_HTTP_H */
