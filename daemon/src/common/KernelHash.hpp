// The data plane's string hashes and comparisons, for the policy compiler
// and for tests that check the compiler's tables against the kernel's own
// lookups. Everything here calls the very code the BPF programs run
// (bpf/include/l7_common.h, l7_http.h); nothing is re-implemented.
#pragma once

#include <cstdint>
#include <string_view>

namespace l7fast::policy::kernel {

// l7_hash_str(): the keyed hash of an l7_match_key; `lower` lower-cases the
// bytes first (ASCII), as the kernel does for Host.
uint64_t match_hash(uint64_t seed, std::string_view bytes, bool lower);

// l7_name_hash() of a name (the seed-0 string hash of the lower-cased name,
// low 32 bits): the identity the parser records for each header line
// (l7_hdr.name_hash).
uint32_t header_name_hash(std::string_view name);

// What the kernel computes on request bytes: `window` is the request head
// (at most L7_USER_MAX_HDR_BLOCK bytes) and the string is
// window[off, off + len), len <= L7_MAX_MATCH_STR.
//  window_hash: l7_hash_window(); equals match_hash() over the same bytes.
//  window_eq: l7_window_eq() against `str`, L7_MAX_MATCH_STR zero-padded bytes.
// Both return 0 / false for arguments outside those bounds.
uint64_t window_hash(std::string_view window, uint32_t off, uint32_t len, uint64_t seed, bool lower);
bool window_eq(std::string_view window, uint32_t off, uint32_t len, const uint8_t* str, bool lower);

}  // namespace l7fast::policy::kernel
