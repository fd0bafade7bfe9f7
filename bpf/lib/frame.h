/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Reading message bytes into scratch, and body framing over a message.
 *
 * SK_MSG: msg->data covers only the first scatterlist entry, so a range is
 * linearised with bpf_msg_pull_data() first and then copied. SK_SKB: loopback
 * data sits in page frags (skb->data == data_end), so bytes are loaded with
 * bpf_skb_load_bytes(). Either way the parsers read from scratch.
 */
#ifndef L7_LIB_FRAME_H
#define L7_LIB_FRAME_H

#include "conn.h"

/* Windows of a chunked body that need reading, per program run; beyond that
 * the rest of the message is framed by the next run (SK_MSG) or relayed. */
#define L7_MAX_CHUNK_WINDOWS 8
#define L7_CHUNK_WINDOW 512

/* Linearises and copies msg bytes [off, off + want) to s->ws.buf. */
static __always_inline long l7_copy_msg_exact(struct sk_msg_md *msg, struct l7_scratch *s,
					      __u32 off, __u32 want)
{
	void *data, *end;
	__u64 n;

	if (bpf_msg_pull_data(msg, off, off + want, 0))
		return -1;
	data = (void *)(long)msg->data;
	end = (void *)(long)msg->data_end;
	n = end - data;
	if (n > want)
		n = want;
	if (n > L7_SCRATCH_SIZE)
		n = L7_SCRATCH_SIZE;
	if (!n)
		return 0;
	/* the same 1..L7_SCRATCH_SIZE, bounded on the register the helper
	 * gets: older verifiers (6.1) lose the bounds above when n is
	 * spilled between them and the call */
	n = L7_IDX(n - 1, L7_SCRATCH_SIZE - 1) + 1;
	if (bpf_probe_read_kernel(s->ws.buf, n, data))
		return -1;
	return (long)n;
}

/*
 * Copies up to `want` message bytes from `off` into scratch; returns how
 * many (>= 1 unless the message ends) or < 0. A range that straddles two
 * scatterlist elements makes bpf_msg_pull_data() copy both whole elements
 * into one atomic allocation, which can fail for large sends; shorter
 * ranges straddle less, and one byte never does.
 */
static __always_inline long l7_copy_msg(struct sk_msg_md *msg, struct l7_scratch *s, __u32 off,
					__u32 want)
{
	long n;

	if (want > L7_SCRATCH_SIZE)
		want = L7_SCRATCH_SIZE;
	if (!want)
		return 0;
	n = l7_copy_msg_exact(msg, s, off, want);
	if (n < 0 && want > 64)
		n = l7_copy_msg_exact(msg, s, off, 64);
	if (n < 0)
		n = l7_copy_msg_exact(msg, s, off, 1);
	return n;
}

static __always_inline long l7_copy_skb(struct __sk_buff *skb, struct l7_scratch *s, __u32 off,
					__u32 want)
{
	if (want > L7_SCRATCH_SIZE)
		want = L7_SCRATCH_SIZE;
	if (!want)
		return 0;
	/* the same 1..L7_SCRATCH_SIZE, in a form older verifiers (6.1) see as
	 * non-zero: they learn nothing from want != 0, and the helper takes
	 * no empty copy */
	want = L7_IDX(want - 1, L7_SCRATCH_SIZE - 1) + 1;
	if (bpf_skb_load_bytes(skb, off, s->ws.buf, want))
		return -1;
	return want;
}

struct l7_chunk_walk {
	struct l7_body_state *b;
	struct l7_window w;
	__u32 pos;
	__u32 err;
};

/* One step over the scratch window: skip chunk data, or feed one framing byte. */
L7_CALLBACK long l7_chunk_walk_cb(__u32 i, void *ctx)
{
	struct l7_chunk_walk *c = ctx;
	struct l7_body_state *b = c->b;

	if (b->done || c->pos >= c->w.len)
		return 1;
	if (b->phase == L7_CH_DATA) {
		__u32 left = c->w.len - c->pos;

		if (b->remaining > left) {
			b->remaining -= left;
			c->pos = c->w.len;
			return 1;
		}
		c->pos += (__u32)b->remaining;
		b->remaining = 0;
		b->phase = L7_CH_DATA_CR;
		return 0;
	}
	if (l7_chunk_byte(b, l7_at(&c->w, c->pos)) != L7_B_OK) {
		c->err = 1;
		return 1;
	}
	c->pos++;
	return 0;
}

/*
 * Advances body framing `b` over message bytes [pos, size). Returns the offset
 * where framing stopped: the end of the body (b->done), `size`, or an earlier
 * offset when the per-run window budget ran out. Returns < 0 on malformed
 * framing. `copy` reads message bytes into scratch.
 */
#define L7_DEFINE_FRAMER(name, ctx_t, copy)                                                  \
	static __always_inline long name(ctx_t *ctx, struct l7_scratch *s,                   \
					 struct l7_body_state *b, __u32 pos, __u32 size)    \
	{                                                                                   \
		int it;                                                                     \
                                                                                            \
		if (b->done)                                                                \
			return pos;                                                         \
		if (b->kind == L7_BODY_UNTIL_CLOSE)                                         \
			return size;                                                        \
		if (b->kind == L7_BODY_LENGTH) {                                            \
			__u64 left = size > pos ? size - pos : 0;                           \
			if (b->remaining > left) {                                          \
				b->remaining -= left;                                       \
				return size;                                                \
			}                                                                   \
			pos += (__u32)b->remaining;                                         \
			b->remaining = 0;                                                   \
			b->done = 1;                                                        \
			return pos;                                                         \
		}                                                                           \
		if (b->kind != L7_BODY_CHUNKED || !s)                                       \
			return -1;                                                          \
		s->fr.pos = pos;                                                            \
		s->fr.size = size;                                                          \
		for (it = 0; it < L7_MAX_CHUNK_WINDOWS; it++) {                             \
			struct l7_chunk_walk c = {};                                        \
			__u32 at = s->fr.pos, end = s->fr.size;                             \
			long n;                                                             \
                                                                                            \
			if (b->done || at >= end)                                           \
				break;                                                      \
			if (b->phase == L7_CH_DATA) {                                       \
				__u64 left = end - at;                                      \
				if (b->remaining >= left) {                                 \
					b->remaining -= left;                               \
					if (!b->remaining)                                  \
						b->phase = L7_CH_DATA_CR;                   \
					s->fr.pos = end;                                    \
					break;                                              \
				}                                                           \
				s->fr.pos = at + (__u32)b->remaining;                       \
				b->remaining = 0;                                           \
				b->phase = L7_CH_DATA_CR;                                   \
				continue;                                                   \
			}                                                                   \
			n = copy(ctx, s, at, end - at < L7_CHUNK_WINDOW ? end - at          \
								: L7_CHUNK_WINDOW);         \
			if (n <= 0) {                                                       \
				s->fr.err_pos = at;                                         \
				s->fr.err_phase = 0xffff;                                   \
				return -1;                                                  \
			}                                                                   \
			c.b = b;                                                            \
			c.w.buf = s->ws.buf;                                                \
			c.w.len = (__u32)n;                                                 \
			L7_LOOP(L7_CHUNK_WINDOW + 1, l7_chunk_walk_cb, &c);                 \
			if (c.err) {                                                        \
				s->fr.err_pos = at + c.pos;                                 \
				s->fr.err_phase = b->phase | ((__u32)l7_at(&c.w, c.pos) << 8); \
				return -1;                                                  \
			}                                                                   \
			s->fr.pos = at + c.pos;                                             \
		}                                                                           \
		return s->fr.pos;                                                           \
	}

L7_DEFINE_FRAMER(l7_frame_msg, struct sk_msg_md, l7_copy_msg)
L7_DEFINE_FRAMER(l7_frame_skb, struct __sk_buff, l7_copy_skb)

#endif /* L7_LIB_FRAME_H */
