// Consistent hashing with bounded loads (Envoy's hash_balance_factor;
// Mirrokni et al., arXiv:1608.01350, with the random-jump probing of
// arXiv:1908.08762). Slow path only: it needs every endpoint's count of
// active requests, which the kernel does not keep.
//
// Semantics follow ThreadAwareLoadBalancerBase::BoundedLoadHashingLoadBalancer
// (source/extensions/load_balancing_policies/common/thread_aware_lb_impl.cc):
//  - an endpoint of normalised weight w may carry
//      slots = max(ceil(ceil((cluster_active + 1) * factor / 100) * w), 1)
//    active requests; its overload is active / slots;
//  - the endpoint the ring/table chose is kept unless its overload is > 1;
//  - otherwise the endpoints are visited in a pseudo-random order seeded by
//    the key hash (std::mt19937, Fisher-Yates with Envoy's uniform draw), so
//    a key always probes the same sequence; the first endpoint with
//    overload <= 1 wins, else the least overloaded one (the chosen endpoint
//    first among equals).
// Deviation: slot arithmetic is 64-bit (Envoy's 32-bit product can wrap
// beyond ~43 million active requests at factor 100).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace l7fast::lb {

class BoundedLoad {
public:
    // Active requests of an endpoint (index into the cluster's endpoints).
    using ActiveRequests = std::function<uint32_t(uint32_t endpoint)>;

    // normalized: NormalizedWeights::weight of the cluster; balance_factor:
    // percent, >= 100 (HashBalancer checks it).
    BoundedLoad(std::vector<double> normalized, uint32_t balance_factor);

    // The endpoint for a request whose key hash is `hash` and whose
    // ring/table endpoint is `hashed`; cluster_active is the cluster's active
    // requests (Envoy's upstream_rq_active), usually the sum over endpoints.
    uint32_t choose(uint64_t hash, uint32_t hashed, const ActiveRequests& active,
                    uint64_t cluster_active) const;

    // active / slots for one endpoint (exposed for tests and telemetry).
    double overload(uint32_t endpoint, uint32_t active, uint64_t cluster_active) const;

    uint32_t balance_factor() const { return factor_; }

private:
    std::vector<double> weights_;
    uint32_t factor_;
};

}  // namespace l7fast::lb
