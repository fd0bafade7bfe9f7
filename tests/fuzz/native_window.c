/* The parser and chunk framer compiled natively with the kernel's window
 * (L7_SCRATCH_SIZE, not the slow path's 64 KiB): the native twin of
 * bpf/fuzz_parse.bpf.c, doing the same steps in the same order. C, in a
 * translation unit of its own, because struct l7_ws's size depends on the
 * window. */
#define L7_WS_BUF L7_SCRATCH_SIZE
#include "l7_http.h"
#include "parse_diff.h"
#include "native_window.h"

static struct l7_ws ws;

const struct l7_msg *native_window_parse(const unsigned char *data, unsigned len, int is_request,
					 struct fuzz_frame *out)
{
	__u32 pos, end;

	ws.len = len > L7_WS_BUF ? L7_WS_BUF : len;
	memcpy(ws.buf, data, ws.len);
	out->parse_status = l7_parse_head(&ws, is_request);
	out->frame_error = 0;
	out->frame_consumed = 0;
	if (out->parse_status != L7_P_OK || ws.msg.body_kind != L7_BODY_CHUNKED)
		return &ws.msg;
	l7_body_init(&out->body, L7_BODY_CHUNKED, 0);
	pos = ws.msg.hdr_len;
	end = ws.len;
	while (pos < end && !out->body.done) {
		if (out->body.phase == L7_CH_DATA) {
			__u64 take = end - pos;

			if (take > out->body.remaining)
				take = out->body.remaining;
			pos += (__u32)take;
			out->body.remaining -= take;
			if (!out->body.remaining)
				out->body.phase = L7_CH_DATA_CR;
			continue;
		}
		if (l7_chunk_byte(&out->body, ws.buf[pos & L7_WS_MASK]) != L7_B_OK) {
			out->frame_error = 1;
			break;
		}
		pos++;
	}
	out->frame_consumed = pos - ws.msg.hdr_len;
	return &ws.msg;
}
