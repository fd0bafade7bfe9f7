// The verified-token cache's entries (l7_jwt_key / l7_jwt_entry in
// bpf/include/l7fast_abi.h, admitted by bpf/include/l7_jwtcache.h): what the
// slow path stores after the reference verifier accepted a token, so that
// the kernel admits later requests carrying the very same bytes.
//
// The kernel compares deadlines with bpf_ktime_get_boot_ns(); the verifier
// works in wall-clock time. An entry's deadlines are the verifier's own
// (exp + clock_skew, nbf - clock_skew: Result::valid_until/valid_from)
// moved to boot time by the offset between the two clocks when the entry is
// made, and an entry never lives longer than kJwtCacheMaxTtl, which bounds
// how far a later step of the wall clock can make the two paths disagree
// (and how long a token without exp is admitted without a fresh check).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

#include "auth/Jwt.hpp"
#include "l7fast_abi.h"

namespace l7fast::auth {

inline constexpr std::chrono::seconds kJwtCacheMaxTtl{L7_JWT_CACHE_TTL_S};

// Both clocks, read as close together as possible: boot first, then wall
// (a later wall reading only makes deadlines earlier).
struct CacheClock {
    uint64_t boot_ns = 0;  // CLOCK_BOOTTIME, what bpf_ktime_get_boot_ns() reads
    std::chrono::system_clock::time_point wall;
};
CacheClock cache_clock_now();

struct CacheEntry {
    l7_jwt_key key{};
    l7_jwt_entry entry{};
};

// The entry for a token `r` that verify() accepted (at clock.wall or
// earlier) for provider `provider`, to be admitted in data-plane generation
// slot `gen` whose keyed hash seed is `seed`. nullopt when it must not be
// cached: not accepted, empty, longer than max_token or L7_JWT_MAX_TOKEN,
// or already outside its validity at clock.wall.
std::optional<CacheEntry> cache_entry(const Result& r, uint32_t gen, uint32_t provider, uint64_t seed,
                                      uint32_t max_token, const CacheClock& clock,
                                      std::chrono::nanoseconds max_ttl = kJwtCacheMaxTtl);

}  // namespace l7fast::auth
