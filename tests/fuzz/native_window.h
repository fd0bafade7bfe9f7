#ifndef L7FAST_FUZZ_NATIVE_WINDOW_H
#define L7FAST_FUZZ_NATIVE_WINDOW_H

#ifdef __cplusplus
extern "C" {
#endif

/* Parses data[0, min(len, L7_SCRATCH_SIZE)) as the kernel does; the result
 * stays valid until the next call. */
const struct l7_msg *native_window_parse(const unsigned char *data, unsigned len, int is_request,
					 struct fuzz_frame *out);

#ifdef __cplusplus
}
#endif

#endif
