// The slow path's rate limit of one route (docs/policy.md,
// "[route.rate_limit]"): token buckets with the data plane's own arithmetic
// (bpf/include/l7_bucket.h), one per key value, at most max_keys of them
// (the least recently used is dropped to make room; a dropped key starts
// again with a full bucket), plus one bucket shared by every request that
// has no key. The keyless bucket of a route the kernel rate-limits is the
// kernel's own (SharedBucket): both take from it with compare-and-swap, so a
// request counts once whichever path serves it. So are the buckets of a
// keyed limit's keys of up to L7_RATE_KEY_MAX bytes when the kernel keeps
// them (SharedBucket::take_key; its table evicts as the kernel's LRU does);
// longer keys, which the kernel hands over, stay here. Not thread-safe
// otherwise: one per route on the daemon's io_context.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "l7_bucket.h"
#include "config/Policy.hpp"
#include "dataplane/Abi.hpp"

namespace l7fast::policy {

class RateLimiter {
public:
    // Keys longer than this are stored as their SHA-256 digest, so hostile
    // header values cannot make a bucket table of max_keys * 64 KiB.
    static constexpr size_t kMaxKeyBytes = L7_RATE_KEY_MAX;

    // `shared`: the keyless bucket lives there (a fresh, full one: its
    // entry is reset to 0 here), and with take_key the keys' buckets.
    explicit RateLimiter(const RateLimit& limit, std::optional<dataplane::SharedBucket> shared = std::nullopt);
    RateLimiter(uint32_t rate, uint32_t burst, uint32_t max_keys);

    // Takes a token for a request whose key (request_key()) is `key`;
    // nullopt: the shared bucket of requests without the key. `now_ns` is a
    // monotonic clock (never 0); a SharedBucket reads CLOCK_MONOTONIC itself,
    // as the kernel does. Returns 0 when the request is admitted, else the
    // milliseconds until a token is available (l7_bucket_take()).
    uint64_t take(std::optional<std::string_view> key, uint64_t now_ns);

    // The kernel's bucket of requests without the key (and, keyed, its
    // table of keys' buckets), if the kernel shares the whole limit: a keyed
    // limit only when the kernel keeps its keys' buckets too.
    std::optional<uint32_t> kernel_bucket() const
    {
        if (!shared_ || (keyed_ && !kernel_keys()))
            return std::nullopt;
        return shared_->id;
    }
    // Whether the kernel keeps the buckets of keys of up to L7_RATE_KEY_MAX bytes.
    bool kernel_keys() const { return shared_ && shared_->take_key; }

    size_t keys() const { return index_.size(); }
    uint32_t rate() const { return rate_; }
    uint32_t burst() const { return burst_; }
    uint32_t max_keys() const { return max_keys_; }

private:
    struct SeededHash {
        uint64_t seed;
        size_t operator()(std::string_view s) const;
    };
    using Lru = std::list<std::pair<std::string, __u64>>;  // most recently used first (l7_bucket.h)

    uint32_t rate_;
    uint32_t burst_;
    uint32_t max_keys_;
    bool keyed_ = false;  // the limit has a key
    __u64 keyless_ = 0;
    std::optional<dataplane::SharedBucket> shared_;
    Lru lru_;
    uint64_t take_key_failed_ = 0;
    // views into lru_'s strings (list nodes never move); a seeded hash, so
    // clients cannot choose colliding keys
    std::unordered_map<std::string_view, Lru::iterator, SeededHash> index_;
};

}  // namespace l7fast::policy
