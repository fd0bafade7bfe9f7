/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Request header mutation in the data plane: which field lines of a parsed
 * head a struct l7_mutation removes, and where its lines go. The rule is
 * semantics/Mutation.hpp's, byte for byte:
 *
 *   out = head[0, insert_at) without the dropped lines
 *         + add[0, set_len) + forwarded-claim lines + add[set_len, add_len)
 *         + head[insert_at, hdr_len)            (the final CRLF)
 *
 * A line is dropped when its name, lower-cased, equals one of remove_name[]
 * (the compiler puts set names and forwarded-claim names there too). The
 * parser (l7_http.h) guarantees the shape the rule needs: CRLF line ends,
 * a token name directly followed by ':', at most L7_MAX_HEADERS - 1 field
 * lines, header i on line i + 1.
 *
 * Compiles as BPF and natively: tests/unit/mutation_kernel_test.cpp applies
 * the plan to generated heads and compares with mutate_request_head(). The
 * byte moves themselves (bpf_msg_pop_data / bpf_msg_push_data) are in
 * l7fast.bpf.c, l7_req_mutate().
 */
#ifndef L7_MUTATE_H
#define L7_MUTATE_H

#include "l7_http.h"

struct l7_mut_plan {
	__u64 drop;      /* bit i: field line i (l7_msg.hdr[i]) is removed */
	__u32 removed;   /* bytes of the removed lines */
	__u32 insert_at; /* offset of the head's final CRLF (before any change) */
};

/* The byte range of field line i: [*off, *off + *len), CRLF included. */
L7_INLINE void l7_mut_line(const struct l7_msg *m, __u32 i, __u32 *off, __u32 *len)
{
	__u32 start = m->hdr[L7_IDX(i, L7_MAX_HEADERS - 1)].name_off;
	__u32 end = (__u32)m->line_end[L7_IDX(i + 1, L7_LINE_MASK)] + 2;

	*off = start;
	*len = end > start ? end - start : 0;
}

/* Is field line i's name one the mutation removes? */
L7_INLINE int l7_mut_drops(const struct l7_ws *ws, const struct l7_hdr *h,
			   const struct l7_mutation *mu)
{
	__u32 j, k;

	for (j = 0; j < L7_MUT_MAX_REMOVE; j++) {
		__u32 jj = L7_IDX(j, L7_MUT_MAX_REMOVE - 1);

		if (j >= mu->n_remove)
			break;
		if (mu->remove_hash[jj] != h->name_hash || mu->remove_len[jj] != h->name_len)
			continue;
		for (k = 0; k < L7_MAX_HDR_NAME; k++) {
			if (k >= h->name_len)
				return 1;
			if (l7_lower(l7_wat(ws, h->name_off + k)) !=
			    mu->remove_name[jj][L7_IDX(k, L7_MAX_HDR_NAME - 1)])
				break;
		}
		if (k == L7_MAX_HDR_NAME)
			return 1;
	}
	return 0;
}

struct l7_mut_ctx {
	const struct l7_ws *ws;
	const struct l7_mutation *mu;
	struct l7_mut_plan *plan;
};

L7_CALLBACK long l7_mut_plan_cb(__u32 i, void *ctx)
{
	struct l7_mut_ctx *c = (struct l7_mut_ctx *)ctx;
	const struct l7_msg *m = &c->ws->msg;
	__u32 off, len;

	if (i >= m->n_hdrs || i >= L7_MAX_HEADERS - 1)
		return 1;
	if (!l7_mut_drops(c->ws, &m->hdr[L7_IDX(i, L7_MAX_HEADERS - 1)], c->mu))
		return 0;
	l7_mut_line(m, i, &off, &len);
	c->plan->drop |= 1ull << L7_IDX(i, 63);
	c->plan->removed += len;
	return 0;
}

/* Fills *plan for the head parsed in ws (l7_parse_head() returned OK). */
L7_INLINE void l7_mut_make_plan(const struct l7_ws *ws, const struct l7_mutation *mu,
			   struct l7_mut_plan *plan)
{
	struct l7_mut_ctx c = { .ws = ws, .mu = mu, .plan = plan };

	plan->drop = 0;
	plan->removed = 0;
	plan->insert_at = ws->msg.hdr_len - 2;
	if (mu->n_remove)
		L7_LOOP(L7_MAX_HEADERS - 1, l7_mut_plan_cb, &c);
}

#endif /* L7_MUTATE_H */
