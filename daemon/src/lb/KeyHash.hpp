// The hash of a load-balancing key and of an endpoint's ring/Maglev name:
// XXH64 (Envoy's HashUtil::xxHash64). One implementation with the data
// plane: bpf/include/l7_xxhash.h, whose window variant the kernel runs on
// request bytes (the module kfunc l7f_xxh64 computes the same function).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace l7fast::lb {

uint64_t xxh64(std::string_view bytes, uint64_t seed = 0);
uint64_t xxh64(std::span<const uint8_t> bytes, uint64_t seed = 0);

// The hash a ring-hash / Maglev cluster looks up for a request key: XXH64
// with seed 0 of the key bytes exactly as RequestKey defines them (a header
// or cookie value as sent; a source address as 4 or 16 bytes, network order).
inline uint64_t key_hash(std::string_view key) { return xxh64(key, 0); }
inline uint64_t key_hash(std::span<const uint8_t> key) { return xxh64(key, 0); }

}  // namespace l7fast::lb
