/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * RBAC rules of a kernel-placed route (semantics/Rbac.hpp is the reference).
 *
 * Every kernel route's rules are bits [rule_first, rule_first + rule_count)
 * of bitmap space L7_SPACE_RULES, built from the same condition kinds as
 * route sets (method, path exact/prefix, header present/exact), so a
 * second pass of the route matcher over space 1 gives the set of rules that
 * hold. (Rules have no host condition: the policy has none, and the
 * compiler keeps a hand-built one in user space.) Rules with any condition the kernel cannot evaluate exactly keep
 * their whole route in user space (PolicyCompiler), so here every rule bit
 * is exact: no superset.
 *
 *  - first_match: the lowest rule in the range that holds decides;
 *    L7_BMI_DENY says whether it denies.
 *  - deny_overrides: any deny rule in the range that holds denies; else any
 *    allow rule that holds allows.
 *  - no rule holds: L7_RF_RBAC_DEFAULT_DENY decides.
 *
 * A denial names its deciding rule as Rbac::evaluate() does (s->ms.deny_bit
 * below): the rule that decided under first_match, the lowest deny rule that
 * holds under deny_overrides, none for the default action. The kernel
 * answers it with the route's resp_deny (decide.h); where it cannot, the
 * slow path evaluates the same rules and sends the same bytes.
 */
#ifndef L7_LIB_RBAC_H
#define L7_LIB_RBAC_H

#include "match.h"

/* Bits [lo, hi) of bitmap word i. */
static __always_inline __u64 l7_range_mask(__u32 i, __u32 lo, __u32 hi)
{
	__u32 wlo = i * 64, whi = wlo + 64;
	__u64 m = ~0ULL;

	if (hi <= wlo || lo >= whi)
		return 0;
	if (lo > wlo)
		m &= ~0ULL << (lo - wlo);
	if (hi < whi)
		m &= ~0ULL >> (whi - hi);
	return m;
}

/* The index of the one bit set in b, branch-free. */
static __always_inline __u32 l7_bit_index(__u64 b)
{
	return (!!(b & 0xffffffff00000000ULL) << 5) | (!!(b & 0xffff0000ffff0000ULL) << 4) |
	       (!!(b & 0xff00ff00ff00ff00ULL) << 3) | (!!(b & 0xf0f0f0f0f0f0f0f0ULL) << 2) |
	       (!!(b & 0xccccccccccccccccULL) << 1) | !!(b & 0xaaaaaaaaaaaaaaaaULL);
}

/* bpf_loop context; the loop's state is in s->ms, out of the verifier's
 * sight, so the word loop is verified once rather than per word */
struct l7_rbac_ctx {
	struct l7_scratch *s;
	const struct l7_bitmap *deny;
};

L7_CALLBACK long l7_rule_word_cb(__u32 i, void *ctx)
{
	struct l7_rbac_ctx *c = ctx;
	struct l7_scratch *s = c->s;
	__u32 w = L7_IDX(i, L7_BM_WORDS - 1);
	__u64 hit, deny;

	if (i >= L7_BM_WORDS || i >= s->ms.nwords)
		return 1;
	hit = s->acc.w[w] & l7_range_mask(i, s->ms.rule_lo, s->ms.rule_hi);
	if (!hit)
		return 0;
	deny = hit & c->deny->w[w];
	if (deny && !s->ms.any_deny) {
		s->ms.any_deny = 1;
		s->ms.deny_bit = w * 64 + l7_bit_index(deny & (~deny + 1));
	}
	if (!s->ms.found) {
		s->ms.found = 1;
		s->ms.first_bit = w * 64 + l7_bit_index(hit & (~hit + 1)); /* the lowest rule that holds */
		s->ms.first_deny = s->ms.first_bit == s->ms.deny_bit && s->ms.any_deny;
	}
	return 0;
}

/*
 * The rules pass. Must follow l7_match_route() on the same scratch: it
 * reuses the path bounds and the header positions that pass collected
 * (s->ms, s->hdr_val), and a request repeating a match header never gets
 * here (the route pass already sent it to the slow path). Returns 1 when
 * the rules allow the request, 0 when they deny it, -1 when the tables are
 * unusable (the slow path decides); on 0, s->ms.deny_bit is the deciding
 * rule's bit, L7_NO_RULE for the default action. `rules` packs rule_first
 * (bits 0-15) and rule_count (bits 16-31); `flags` are the route's L7_RF_*.
 */
__noinline int l7_g_rbac(struct l7_scratch *s, struct l7_config *cfg, __u32 gen, __u32 flags,
			 __u32 rules)
{
	const struct l7_gen_meta *meta;
	struct l7_match_ctx m = {};
	struct l7_rbac_ctx rc = {};
	struct l7_bitmap *b;

	if (!s || !cfg)
		return -1;
	s->ms.rule_lo = rules & 0xffff;
	s->ms.rule_hi = s->ms.rule_lo + (rules >> 16);
	if (s->ms.rule_hi > L7_MAX_RULES)
		return -1;
	gen &= 1;
	meta = &cfg->meta[gen];
	m.s = s;
	m.meta = meta;
	s->ms.gen = gen;
	s->ms.space = L7_SPACE_RULES;
	/* only the words up to the route's last rule matter (see match.h) */
	s->ms.nwords = (s->ms.rule_hi + 63) / 64;

	b = l7_bm_in(gen, L7_SPACE_RULES,
		     L7_BMI_METHOD(s->ws.msg.method < L7_M_COUNT ? s->ws.msg.method : L7_M_OTHER));
	if (!b)
		return -1;
	l7_bm_copy(&s->acc, b, s->ms.nwords);

	if (meta->flags & L7_GMF_RULE_PATH) {
		b = l7_bm_in(gen, L7_SPACE_RULES, L7_BMI_PATH_ANY);
		if (!b)
			return -1;
		l7_bm_copy(&s->tmp, b, s->ms.nwords);
		l7_g_or_str(s, L7_SPEC_SP(L7_MK_PATH_EXACT, 0, gen, L7_SPACE_RULES, 0), s->ms.path_off,
			    s->ms.path_len, s->ms.seed);
		L7_LOOP(L7_MAX_PREFIX_LENS, l7_prefix_cb, &m);
		l7_bm_and(&s->acc, &s->tmp, s->ms.nwords);
	}

	if (meta->n_match_hdrs)
		L7_LOOP(L7_MAX_MATCH_HDRS, l7_hdr_match_cb, &m);

	rc.s = s;
	rc.deny = l7_bm_in(gen, L7_SPACE_RULES, L7_BMI_DENY);
	if (!rc.deny)
		return -1;
	s->ms.found = 0;
	s->ms.first_deny = 0;
	s->ms.any_deny = 0;
	s->ms.deny_bit = L7_NO_RULE;
	L7_LOOP(L7_BM_WORDS, l7_rule_word_cb, &rc);
	if (!s->ms.found)
		return !(flags & L7_RF_RBAC_DEFAULT_DENY);
	if (flags & L7_RF_RBAC_DENY_OVERRIDES)
		return !s->ms.any_deny;
	return !s->ms.first_deny;
}

#endif /* L7_LIB_RBAC_H */
