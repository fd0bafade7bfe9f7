// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * The HTTP parser and chunk framer exactly as the data plane compiles them
 * (bpf/include/l7_http.h, -target bpf, verified by this kernel), run on one
 * input per bpf_prog_test_run by tests/fuzz/fuzz_http_diff.cpp. A syscall
 * program needs no socket: user space writes the input into the workspace's
 * buffer (the object's .bss, mmapped through the skeleton) and reads the
 * result back.
 *
 * The workspace is declared as bytes: the skeleton would otherwise name
 * struct l7_ws, whose size in user space is the slow path's window. Its
 * msg (first) and buf (last) members are at the same offsets in both.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "l7_http.h"
#include "parse_diff.h"

__u8 ws_mem[sizeof(struct l7_ws)] __attribute__((aligned(8)));
struct fuzz_frame out;

#define ws (*(struct l7_ws *)ws_mem)

struct frame_pos {
	__u32 pos;
	__u32 end;
};

/* BodyFramer::feed for a chunked body, over ws.buf[pos, end) */
static long frame_cb(__u32 i, void *ctx)
{
	struct frame_pos *f = ctx;
	struct l7_body_state *b = &out.body;
	__u64 take;

	if (f->pos >= f->end || b->done)
		return 1;
	if (b->phase == L7_CH_DATA) {
		take = f->end - f->pos;
		if (take > b->remaining)
			take = b->remaining;
		f->pos += (__u32)take;
		b->remaining -= take;
		if (!b->remaining)
			b->phase = L7_CH_DATA_CR;
		return 0;
	}
	if (l7_chunk_byte(b, ws.buf[L7_IDX(f->pos, L7_WS_MASK)]) != L7_B_OK) {
		out.frame_error = 1;
		return 1;
	}
	f->pos++;
	return 0;
}

SEC("syscall")
int fuzz_parse(struct fuzz_parse_args *args)
{
	struct frame_pos f;

	ws.len = args->len > L7_WS_BUF ? L7_WS_BUF : args->len;
	out.parse_status = l7_parse_head(&ws, args->is_request ? 1 : 0);
	out.frame_error = 0;
	out.frame_consumed = 0;
	if (out.parse_status != L7_P_OK || ws.msg.body_kind != L7_BODY_CHUNKED)
		return 0;
	l7_body_init(&out.body, L7_BODY_CHUNKED, 0);
	f.pos = ws.msg.hdr_len;
	f.end = ws.len;
	bpf_loop(L7_WS_BUF + 1, frame_cb, &f, 0);
	out.frame_consumed = f.pos - ws.msg.hdr_len;
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
