/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Request header mutation on SK_MSG (local clients): rewrites the request
 * head in the message itself before it is redirected. Which lines go and
 * what is inserted is l7_mutate.h's plan (the rule of semantics/Mutation.hpp);
 * here are the byte moves:
 *
 *   1. bpf_msg_push_data() opens the inserted block at the final CRLF and
 *      bpf_msg_pull_data() on exactly that range makes it writable in place
 *      (a pushed element is never marked copy, so the pull does not copy);
 *      the bytes are stored one by one (SK_MSG has no store_bytes helper);
 *   2. bpf_msg_pop_data() removes the dropped lines from the last to the
 *      first, so the offsets of the lines still to go stay valid (they all
 *      precede the inserted block).
 *
 * The push comes first because it is the step that allocates: when it fails
 * the message is untouched and the slow path can still take the request.
 * A failure after that leaves a message that must not be forwarded.
 *
 * SK_SKB (remote clients) never mutates: an skb cannot grow in place here,
 * those requests go to the slow path (L7_R_MUTATION).
 */
#ifndef L7_LIB_MUTATE_H
#define L7_LIB_MUTATE_H

#include "conn.h"

enum l7_mut_result {
	L7_MUT_DONE = 0,      /* the message holds the rewritten request */
	L7_MUT_UNTOUCHED = 1, /* not rewritten and unchanged: the slow path can take it */
	L7_MUT_BROKEN = 2,    /* failed half-way: the message must not be forwarded */
};

/* Plans the mutation of the route the decision chose (s->dec.route_key)
 * into s->mut. Global: verified once, and it does not touch the message. */
__noinline int l7_g_mut_plan(struct l7_scratch *s)
{
	struct l7_mutation *mu;
	__u32 key;

	if (!s)
		return -1;
	key = s->dec.route_key;
	mu = bpf_map_lookup_elem(&l7_mutations, &key);
	if (!mu)
		return -1;
	l7_mut_make_plan(&s->ws, mu, &s->mut);
	return 0;
}

/* Stores src[from, from + len) (indexes masked with `mask`, the size of the
 * source array minus one) at message offset off. The mask stays on each
 * index (L7_IDX): older verifiers (6.1) do not keep the callers' bounds on
 * `from` across stack spills nor learn them from comparisons between two
 * registers, so the mask is all they see of it. */
static __always_inline int l7_msg_write(struct sk_msg_md *msg, __u32 off, const __u8 *src,
					__u32 from, __u32 len, __u32 mask)
{
	__u8 *p, *end;
	__u32 i;

	if (!len)
		return 0;
	if (len > mask + 1 || bpf_msg_pull_data(msg, off, off + len, 0))
		return -1;
	p = (__u8 *)(long)msg->data;
	end = (__u8 *)(long)msg->data_end;
	/* the pull leaves exactly [off, off + len) between data and data_end.
	 * The loop is bounded by that range, not by len: len stays unrefined,
	 * so the verifier's states after the loop do not multiply by its value */
	if ((__u64)(end - p) != len)
		return -1;
	for (i = 0; i < L7_MUT_MAX_ADD; i++) {
		if (p + i + 1 > end)
			break;
		p[i] = src[L7_IDX(from + i, mask)];
	}
	return 0;
}

/*
 * Rewrites the head of the request at the start of msg (parsed in s->ws,
 * routed to s->dec.route_key). `fwd`/`fwd_len`: the forwarded-claim lines
 * of the request's verified token (struct l7_jwt_entry.fwd), inserted after
 * the set lines; none until the kernel has a token cache. *delta: how much
 * the message grew (negative when it shrank).
 */
static __always_inline int l7_req_mutate(struct sk_msg_md *msg, struct l7_scratch *s,
					 const __u8 *fwd, __u32 fwd_len, long *delta)
{
	struct l7_mutation *mu;
	__u32 key = s->dec.route_key, at, add, set, rest, i, j, off, len;

	if (!fwd)
		fwd_len = 0;
	mu = bpf_map_lookup_elem(&l7_mutations, &key);
	if (!mu || l7_g_mut_plan(s))
		return L7_MUT_UNTOUCHED;
	set = mu->set_len;
	add = mu->add_len;
	if (add > L7_MUT_MAX_ADD || set > add || fwd_len > L7_JWT_MAX_FWD)
		return L7_MUT_UNTOUCHED;
	rest = add - set;
	add += fwd_len;
	at = s->mut.insert_at;
	if (add) {
		if (bpf_msg_push_data(msg, at, add, 0))
			return L7_MUT_UNTOUCHED;
		if (l7_msg_write(msg, at, mu->add, 0, set, L7_MUT_MAX_ADD - 1) ||
		    (fwd && l7_msg_write(msg, at + set, fwd, 0, fwd_len, L7_JWT_MAX_FWD - 1)) ||
		    l7_msg_write(msg, at + set + fwd_len, mu->add, set, rest, L7_MUT_MAX_ADD - 1))
			return bpf_msg_pop_data(msg, at, add, 0) ? L7_MUT_BROKEN : L7_MUT_UNTOUCHED;
	}
	for (j = 0; j < L7_MAX_HEADERS - 1; j++) {
		i = L7_MAX_HEADERS - 2 - j;
		if (!((s->mut.drop >> i) & 1))
			continue;
		l7_mut_line(&s->ws.msg, i, &off, &len);
		if (bpf_msg_pop_data(msg, off, len, 0))
			return L7_MUT_BROKEN;
	}
	*delta = (long)add - (long)s->mut.removed;
	return L7_MUT_DONE;
}

#endif /* L7_LIB_MUTATE_H */
