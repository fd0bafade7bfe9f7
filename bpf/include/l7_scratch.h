/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The programs' scratch entry (the l7_scratch map, bpf/include/l7_maps.h):
 * the bytes under inspection and what the request decision, the matcher,
 * the framer and the pool claim keep between steps. BPF only; nobody
 * outside the programs reads it.
 */
#ifndef L7_SCRATCH_H
#define L7_SCRATCH_H

#include "l7_http.h"
#include "l7_mutate.h"
#include "l7_jwtscan.h"

#define L7_NO_POOL 0xffffffffu

/* What the request programs decided; filled by l7_g_decide() (lib/decide.h). */
struct l7_decision {
	__u32 kind;
	__u32 reason;
	__u32 slot;
	__u32 stats_id;
	__u64 total;     /* head + Content-Length body; head only if chunked */
	__u64 cl;
	__u32 head_len;
	__u32 body_kind;
	__u32 req_head;
	__u32 close;
	__u32 route_key;   /* gen * L7_MAX_ROUTES + route, once routed */
	__u32 route_flags; /* enum l7_route_flags of that route */
	__u32 pool;        /* the endpoint's pool once picked, else L7_NO_POOL */
	__u32 resp;        /* L7_D_ANSWER: key of the answer in l7_responses */
	__u32 answer;      /* L7_D_ANSWER: enum l7_answer_kind */
	__u32 detail;      /* L7_ANS_BAD_TOKEN: L7_ANS_DETAIL_* (l7_g_jwt_admit) */
	__u32 rbac_rule;   /* L7_ANS_DENY: gen * L7_MAX_RULES + the deciding
			    * rule's bit, L7_NO_RULE for the default action */
	__u32 bucket;      /* 1 + the l7_buckets entry a token was taken from
			    * (l7_rate_take); 0: none. A request handed to the
			    * slow path after all gives it back (l7_rate_refund). */
	__u32 bucket_keyed; /* that token is from the bucket of key rk
			     * (l7_rate_keys[bucket - 1]) */
};

/* Matcher state (kept in scratch, not on the 512-byte stack). */
struct l7_match_state {
	__u64 seed;
	__u32 gen;
	__u32 path_off;
	__u32 path_len;
	__u32 dup;
	__u32 space;     /* L7_SPACE_ROUTES or L7_SPACE_RULES (bpf/lib/rbac.h) */
	__u32 nwords;    /* bitmap words in use (match.h) */
	/* rules pass (bpf/lib/rbac.h): the route's rule range and what holds */
	__u32 rule_lo;
	__u32 rule_hi;
	__u32 found;
	__u32 first_deny;
	__u32 any_deny;
	__u32 first_bit;  /* the lowest rule that holds */
	__u32 deny_bit;   /* the lowest deny rule that holds */
};

/* Body framer cursor (message offsets), also kept out of the verifier's
 * sight so the framing loop does not fork states per offset. */
struct l7_frame_state {
	__u32 pos;
	__u32 size;
	__u32 err_pos;   /* where framing failed (traces) */
	__u32 err_phase;
};

/* Pool claim state (bpf/lib/select.h). */
struct l7_claim_state {
	__u32 pool;
	__u32 n;
	__u32 first;
	__u32 tries;
	__u32 found;
	__u32 pad;
};

struct l7_scratch {
	__u64 busy;
	__u64 self;                       /* its key in l7_scratch (l7_scratch_try) */
	struct l7_decision dec;
	struct l7_claim_state claim;
	struct l7_match_state ms;
	struct l7_frame_state fr;
	struct l7_bitmap acc;
	struct l7_bitmap tmp;
	__u16 hdr_val[L7_MAX_MATCH_HDRS]; /* header index per match header */
	struct l7_mut_plan mut;           /* request mutation (l7_mutate.h) */
	struct l7_rate_key rk;            /* a keyed rate limit's key (l7_rate_key_of) */
	struct l7_ws ws;                  /* bytes under inspection + parse */
	/* kernel JWT verification (l7_jwtverify.h). After the window on
	 * purpose: a kfunc given window bytes at any masked offset and up to
	 * L7_JWT_MAX_TOKEN long stays inside this entry (the data itself
	 * never leaves the window's valid bytes). */
	struct l7_jwt_work jwt;
};

_Static_assert(sizeof(struct l7_jwt_work) + L7_WINDOW_SLACK >= L7_JWT_MAX_TOKEN,
	       "the window's kfunc reads need this much after it");

#endif /* L7_SCRATCH_H */
