/* What the differential parser target exchanges with its BPF program
 * (bpf/fuzz_parse.bpf.c) and its native twin (native_window.c): one parse of
 * a window and, for a chunked body, the framer run over the bytes after the
 * head that are in the window. */
#ifndef L7FAST_FUZZ_PARSE_DIFF_H
#define L7FAST_FUZZ_PARSE_DIFF_H

struct fuzz_parse_args {
	__u32 is_request;
	__u32 len;
};

struct fuzz_frame {
	__s32 parse_status;   /* enum l7_parse_status */
	__s32 frame_error;    /* the framer rejected a byte */
	__u32 frame_consumed; /* body bytes the framer consumed */
	__u32 pad;
	struct l7_body_state body;
};

#endif
