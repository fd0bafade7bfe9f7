#include "auth/JwtCache.hpp"

#include <time.h>

#include <algorithm>
#include <cstring>

#include "common/KernelHash.hpp"

namespace l7fast::auth {

CacheClock cache_clock_now()
{
    CacheClock c;
    timespec ts{};
    ::clock_gettime(CLOCK_BOOTTIME, &ts);
    c.boot_ns = static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
    c.wall = std::chrono::system_clock::now();
    return c;
}

std::optional<CacheEntry> cache_entry(const Result& r, uint32_t gen, uint32_t provider, uint64_t seed,
                                      uint32_t max_token, const CacheClock& clock,
                                      std::chrono::nanoseconds max_ttl)
{
    using std::chrono::nanoseconds;
    if (!r.ok() || r.token.empty() || r.token.size() > max_token || r.token.size() > L7_JWT_MAX_TOKEN ||
        gen >= L7_GENS || provider >= L7_MAX_JWT_PROVIDERS || max_ttl <= nanoseconds{0})
        return std::nullopt;
    // time left, in the verifier's terms; valid_until is max() without exp
    nanoseconds left = max_ttl;
    if (r.valid_until != std::chrono::system_clock::time_point::max()) {
        if (r.valid_until <= clock.wall)
            return std::nullopt;
        left = std::min(left, std::chrono::duration_cast<nanoseconds>(r.valid_until - clock.wall));
    }
    if (r.valid_from != std::chrono::system_clock::time_point::min() && clock.wall < r.valid_from)
        return std::nullopt;
    if (left <= nanoseconds{0})
        return std::nullopt;

    CacheEntry out;
    const std::string_view token = r.token;
    out.key.hash = policy::kernel::match_hash(seed, token, false);
    out.key.gen = static_cast<__u16>(gen);
    out.key.provider = static_cast<__u16>(provider);
    out.key.len = static_cast<__u32>(token.size());
    out.entry.exp_ns = clock.boot_ns + static_cast<uint64_t>(left.count());
    // nbf - clock_skew is at or before clock.wall (checked above), so in
    // boot time it is now or earlier; 0 when it falls before boot
    out.entry.nbf_ns = 0;
    if (r.valid_from != std::chrono::system_clock::time_point::min()) {
        const auto ago = static_cast<uint64_t>(std::chrono::duration_cast<nanoseconds>(clock.wall - r.valid_from).count());
        out.entry.nbf_ns = clock.boot_ns > ago ? clock.boot_ns - ago : 0;
    }
    out.entry.token_len = static_cast<__u16>(token.size());
    out.entry.fwd_len = 0;
    std::memcpy(out.entry.token, token.data(), token.size());
    return out;
}

}  // namespace l7fast::auth
