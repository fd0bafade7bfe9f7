/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Runs a DFA compiled by the daemon's safe regex engine
 * (daemon/src/semantics/SafeRegex.cpp: path_regex patterns) over a byte window:
 * one table lookup per byte, so the cost is linear in the input whatever the
 * pattern. Compiles as BPF and natively; the unit tests hold this runner to
 * SafeRegex::full_match() on random patterns and strings
 * (tests/unit/safe_regex_test.cpp). No data-plane program includes it yet:
 * routes with path_regex are placed in user space.
 *
 * Tables (what SafeRegex exposes, copied by the daemon into map values of the
 * capacities below):
 *   byte_class[256]              byte -> equivalence class
 *   trans[L7_DFA_TRANS_MAX]      next state = trans[state * n_classes + class]
 *   accept[L7_DFA_ACCEPT_BYTES]  state s accepts iff bit s % 8 of accept[s / 8]
 *   start, dead                  initial state; the state no input leaves
 *                                 and that never accepts (the scan stops there)
 * BPF contract: the three arrays are map-value memory of at least those
 * capacities; the window is the usual L7_WS_BUF + L7_WINDOW_SLACK scratch and
 * off + len <= w->len. Every DFA SafeRegex accepts fits: at most
 * L7_DFA_MAX_STATES states and 95 classes (the 94 visible ASCII bytes one by
 * one, and the rest), 24320 transitions; SafeRegex::fits_kernel() checks it.
 */
#ifndef L7_DFA_H
#define L7_DFA_H

#include "l7_common.h"

#define L7_DFA_MAX_STATES 256   /* SafeRegex's hard cap, dead state included */
#define L7_DFA_TRANS_MAX 32768  /* n_states * n_classes the kernel holds (64 KiB of __u16) */
#define L7_DFA_ACCEPT_BYTES (L7_DFA_MAX_STATES / 8)

struct l7_dfa {
	const __u8 *byte_class;
	const __u16 *trans;
	const __u8 *accept;
	__u32 n_classes;
	__u32 start;
	__u32 dead;
	__u32 pad;
};

struct l7_dfa_scan {
	struct l7_window w;
	struct l7_dfa d;
	__u32 off;
	__u32 len;
	__u32 state;
	__u32 pad;
};

L7_INLINE __u32 l7_dfa_step(const struct l7_dfa *d, __u32 state, __u8 b)
{
	__u32 cls = d->byte_class[b];

	return d->trans[L7_IDX(state * d->n_classes + cls, L7_DFA_TRANS_MAX - 1)];
}

/* Eight bytes per iteration: one window load, then a table step per byte. */
L7_CALLBACK long l7_dfa_cb(__u32 i, void *ctx)
{
	struct l7_dfa_scan *s = (struct l7_dfa_scan *)ctx;
	__u32 p = i * 8;
	__u32 st = s->state;
	__u64 x;
	int k;

	if (p >= s->len)
		return 1;
	x = l7_load64(&s->w, s->off + p, 0);
	L7_UNROLL
	for (k = 0; k < 8; k++) {
		if (p + k < s->len)
			st = l7_dfa_step(&s->d, st, (__u8)(x >> (8 * k)));
	}
	s->state = st;
	return st == s->d.dead;
}

L7_INLINE int l7_dfa_accepts(const struct l7_dfa *d, __u32 state)
{
	return (d->accept[L7_IDX(state >> 3, L7_DFA_ACCEPT_BYTES - 1)] >> (state & 7)) & 1;
}

/* 1 if the whole of w[off, off + len) is in the DFA's language. */
L7_INLINE int l7_dfa_match(const struct l7_dfa *d, const struct l7_window *w, __u32 off, __u32 len)
{
	struct l7_dfa_scan s;

	L7_ZERO(s);
	s.w = *w;
	s.d = *d;
	s.off = off;
	s.len = len;
	s.state = d->start;
	L7_LOOP((len + 7) / 8, l7_dfa_cb, &s);
	return l7_dfa_accepts(d, s.state);
}

#endif /* L7_DFA_H */
