/*
 * The data plane's string hashes, callable from C++.
 *
 * bpf/include/l7_common.h and l7_http.h are C (implicit void* conversions,
 * out-of-order designated initialisers) and do not compile as C++, so this C
 * translation unit includes them and exports the few functions the policy
 * compiler needs. The compiler then hashes with the very code the kernel
 * runs; nothing is re-implemented.
 */
#ifndef L7FAST_POLICY_KERNEL_HASH_H
#define L7FAST_POLICY_KERNEL_HASH_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* l7_hash_str(): the keyed hash of an l7_match_key; `lower` lower-cases the
 * bytes first (ASCII only), as the kernel does for Host. */
uint64_t l7fast_match_hash(uint64_t seed, const void *bytes, uint32_t len, int lower);

/* l7_name_hash_step() from L7_NAME_HASH_INIT over the lower-cased bytes: the
 * identity the parser records for every header name (l7_hdr.name_hash). */
uint32_t l7fast_header_name_hash(const void *name, uint32_t len);

/*
 * What the data plane computes on request bytes, for tests that check the
 * compiler's tables against the kernel's own lookups: the bytes are placed
 * in a parser-sized window of `window_len` bytes (at most
 * L7_USER_MAX_HDR_BLOCK) and the string is window[off, off + len).
 *  l7_hash_window(): must equal l7fast_match_hash() over the same bytes.
 *  l7_window_eq(): compares against `str`, L7_MAX_MATCH_STR zero-padded bytes.
 * Both return 0 when the arguments do not describe a valid window.
 */
uint64_t l7fast_window_hash(const void *window, uint32_t window_len, uint32_t off, uint32_t len,
			    uint64_t seed, int lower);
int l7fast_window_eq(const void *window, uint32_t window_len, uint32_t off, uint32_t len,
		     const uint8_t *str, int lower);

#ifdef __cplusplus
}
#endif

#endif /* L7FAST_POLICY_KERNEL_HASH_H */
