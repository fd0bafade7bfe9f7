/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Connection keys and per-CPU scratch space. */
#ifndef L7_LIB_CONN_H
#define L7_LIB_CONN_H

#include "l7_http.h"
#include "l7_maps.h"
#include "l7_mutate.h"

#define AF_INET 2
#define AF_INET6 10

/*
 * Fills a struct l7_conn_key from any context with the socket address fields
 * (bpf_sock_ops, sk_msg_md, __sk_buff). `active` says whether this socket is
 * the connection's active opener. remote_port is network order in the upper
 * half of a 32-bit field on every one of these contexts, hence bpf_ntohl.
 * IPv4-mapped IPv6 addresses become plain IPv4, so a dual-stack client and
 * an IPv4 listener compute the same key.
 */
#define L7_KEY_FROM_CTX(k, ctx, active)                                                   \
	do {                                                                              \
		__u32 l_[4], r_[4];                                                       \
		__u16 lp_ = (__u16)(ctx)->local_port;                                     \
		__u16 rp_ = (__u16)bpf_ntohl((ctx)->remote_port);                         \
		__builtin_memset((k), 0, sizeof(*(k)));                                   \
		(k)->family = (__u16)(ctx)->family;                                       \
		if ((ctx)->family == AF_INET6) {                                          \
			l_[0] = (ctx)->local_ip6[0];                                      \
			l_[1] = (ctx)->local_ip6[1];                                      \
			l_[2] = (ctx)->local_ip6[2];                                      \
			l_[3] = (ctx)->local_ip6[3];                                      \
			r_[0] = (ctx)->remote_ip6[0];                                     \
			r_[1] = (ctx)->remote_ip6[1];                                     \
			r_[2] = (ctx)->remote_ip6[2];                                     \
			r_[3] = (ctx)->remote_ip6[3];                                     \
			if (!l_[0] && !l_[1] && l_[2] == bpf_htonl(0xffff) && !r_[0] &&   \
			    !r_[1] && r_[2] == bpf_htonl(0xffff)) {                       \
				(k)->family = AF_INET;                                    \
				l_[0] = l_[3];                                            \
				r_[0] = r_[3];                                            \
				l_[1] = l_[2] = l_[3] = 0;                                \
				r_[1] = r_[2] = r_[3] = 0;                                \
			}                                                                 \
		} else {                                                                  \
			l_[0] = (ctx)->local_ip4;                                         \
			r_[0] = (ctx)->remote_ip4;                                        \
			l_[1] = l_[2] = l_[3] = 0;                                        \
			r_[1] = r_[2] = r_[3] = 0;                                        \
		}                                                                         \
		if (active) {                                                             \
			__builtin_memcpy((k)->client_ip, l_, 16);                         \
			__builtin_memcpy((k)->server_ip, r_, 16);                         \
			(k)->client_port = lp_;                                           \
			(k)->server_port = rp_;                                           \
		} else {                                                                  \
			__builtin_memcpy((k)->client_ip, r_, 16);                         \
			__builtin_memcpy((k)->server_ip, l_, 16);                         \
			(k)->client_port = rp_;                                           \
			(k)->server_port = lp_;                                           \
		}                                                                         \
	} while (0)

static __always_inline void l7_count(__u32 counter)
{
	__u64 *v = bpf_map_lookup_elem(&l7_counters, &counter);

	if (v)
		*v += 1;
}

static __always_inline struct l7_config *l7_cfg(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&l7_config, &zero);
}

/* The l7_conns entry (and its l7_conn_sync) a socket's reference names, or
 * null when the reference is not a client's or the entry has been freed and
 * perhaps reused since (gen). */
static __always_inline struct l7_conn *l7_conn_of(const struct l7_sk_ref *r,
						  struct l7_conn_sync **sync)
{
	struct l7_conn *c;
	__u32 idx;

	if (!r || r->kind != L7_REF_CLIENT)
		return 0;
	idx = r->idx;
	c = bpf_map_lookup_elem(&l7_conns, &idx);
	if (!c || c->state != L7_CONN_USED || c->gen != r->gen)
		return 0;
	*sync = bpf_map_lookup_elem(&l7_conn_sync, &idx);
	if (!*sync)
		return 0;
	return c;
}

/*
 * Per-CPU scratch: the header window, the parse result and bitmaps, too big
 * for the 512-byte stack. Programs can be preempted (PREEMPT_DYNAMIC) and
 * SK_SKB runs in softirq on top of SK_MSG, so an entry is claimed with a
 * compare-and-swap on `busy` rather than assumed free; with none free the
 * message takes the slow path. A plain array indexed by CPU, not a per-CPU
 * one: a per-CPU value is limited to 32 KiB, less than the window.
 */

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
	__u32 pad;
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
	struct l7_decision dec;
	struct l7_claim_state claim;
	struct l7_match_state ms;
	struct l7_frame_state fr;
	struct l7_bitmap acc;
	struct l7_bitmap tmp;
	__u16 hdr_val[L7_MAX_MATCH_HDRS]; /* header index per match header */
	struct l7_mut_plan mut;           /* request mutation (l7_mutate.h) */
	struct l7_ws ws;                  /* bytes under inspection + parse */
};

/* programs use; nobody else. L7_SCRATCH_SLOTS per possible CPU (sized by
 * the daemon before load). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, L7_SCRATCH_SLOTS);
	__type(key, __u32);
	__type(value, struct l7_scratch);
} l7_scratch SEC(".maps");

static __always_inline struct l7_scratch *l7_scratch_try(__u32 i)
{
	__u32 k = bpf_get_smp_processor_id() * L7_SCRATCH_SLOTS + i;
	struct l7_scratch *s = bpf_map_lookup_elem(&l7_scratch, &k);

	if (s && __sync_val_compare_and_swap(&s->busy, 0, 1) == 0)
		return s;
	return 0;
}

static __always_inline struct l7_scratch *l7_scratch_get(void)
{
	/* written out: a loop would keep its counter where the verifier
	 * cannot see it change */
	struct l7_scratch *s = l7_scratch_try(0);

	if (!s)
		s = l7_scratch_try(1);
	if (!s)
		s = l7_scratch_try(2);
	if (!s)
		s = l7_scratch_try(3);
	if (!s)
		l7_count(L7_C_SCRATCH_BUSY);
	return s;
}

static __always_inline void l7_scratch_put(struct l7_scratch *s)
{
	/* only this CPU ever touches its own entry */
	*(volatile __u64 *)&s->busy = 0;
}

#endif /* L7_LIB_CONN_H */
