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

/* A record of the event ring, or NULL when the ring is full (a stalled
 * daemon has not read it): counted (events_lost), and the daemon's sweep
 * takes up what a lost hand-over or retirement asked for. */
static __always_inline struct l7_event *l7_event_reserve(void)
{
	struct l7_event *e = bpf_ringbuf_reserve(&l7_events, sizeof(*e), 0);

	if (!e)
		l7_count(L7_C_EVENTS_LOST);
	return e;
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

static __always_inline struct l7_scratch *l7_scratch_try(__u32 i)
{
	__u32 k = bpf_get_smp_processor_id() * L7_SCRATCH_SLOTS + i;
	struct l7_scratch *s = bpf_map_lookup_elem(&l7_scratch, &k);

	if (s && __sync_val_compare_and_swap(&s->busy, 0, 1) == 0) {
		/* for code given s as a global function's argument, which
		 * some helpers do not take as map memory (l7_g_jwt_remember) */
		s->self = k;
		return s;
	}
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
