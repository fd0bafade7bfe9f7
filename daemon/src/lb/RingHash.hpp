// Envoy's ring hash ("ketama"): every endpoint is placed on a 64-bit ring
// at the XXH64 hashes of "<name>_0", "<name>_1", ..., as many points as its
// share of the ring; a key goes to the first point at or after its hash,
// wrapping past the top. Built by the daemon; the kernel searches the same
// arrays with l7_lb_ring_pick() (bpf/include/l7_lb.h).
//
// Semantics follow source/extensions/load_balancing_policies/ring_hash/
// ring_hash_lb.cc (Envoy main, read in 2026):
//  - scale = min(ceil(min_w * min_size) / min_w, max_size), where min_w is
//    the smallest normalised weight; endpoint i gets points while a running
//    count stays below the running sum of scale * w_i, so the least-weighted
//    endpoint gets a whole number of points and the ring has about
//    ceil(scale) points;
//  - the lookup is ketama's binary search (first point >= hash, else point 0).
// Deviations, all invisible unless two points have the same 64-bit hash:
//  - points with equal hashes are ordered by endpoint index (Envoy's
//    std::sort leaves their order unspecified);
//  - only the address is hashed (no use_hostname_for_hashing, no "envoy.lb"
//    hash_key metadata), only XXH64 (no MURMUR_HASH_2), no localities or
//    priorities, and every endpoint is in the ring (no health-based ring).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "lb/HashTarget.hpp"

namespace l7fast::lb {

class RingHash {
public:
    // Envoy's bounds for minimum_ring_size / maximum_ring_size.
    static constexpr uint64_t kMaxRingSize = 8388608;

    // nullopt with a reason for min_size 0, min_size > max_size, max_size
    // above kMaxRingSize, or invalid weights (normalize_weights()). No
    // targets: an empty ring, choose() returns nullopt.
    static std::optional<RingHash> build(std::span<const HashTarget> targets, uint64_t min_size,
                                         uint64_t max_size, std::string* why);

    // The endpoint (index into the targets) for a key hash; nullopt only for
    // an empty ring.
    std::optional<uint32_t> choose(uint64_t hash) const;
    // Index of the point choose() lands on (< size()); 0 for an empty ring.
    size_t find(uint64_t hash) const;

    size_t size() const { return hashes_.size(); }
    bool empty() const { return hashes_.empty(); }
    // The ring as the data plane stores it: point hashes ascending and the
    // endpoint of each point (l7_lb_ring_pick's `hash` and `ep`).
    std::span<const uint64_t> hashes() const { return hashes_; }
    std::span<const uint16_t> endpoints() const { return endpoints_; }
    // Points per endpoint (Envoy's min/max_hashes_per_host stats).
    const std::vector<uint64_t>& points_per_endpoint() const { return per_endpoint_; }
    // Envoy's `size` stat: ceil(scale), the ring size aimed at.
    uint64_t target_size() const { return target_size_; }
    // Small enough for the kernel (L7_LB_RING_MAX points).
    bool fits_kernel() const;

private:
    std::vector<uint64_t> hashes_;
    std::vector<uint16_t> endpoints_;
    std::vector<uint64_t> per_endpoint_;
    uint64_t target_size_ = 0;
};

}  // namespace l7fast::lb
