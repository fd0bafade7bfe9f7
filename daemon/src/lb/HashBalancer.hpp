// The reference endpoint choice of a ring-hash or Maglev cluster: the
// table built from the policy, bounded load on top when the cluster has a
// hash_balance_factor, and the data plane's placement rule. The slow path
// (Router) chooses with it; the policy compiler copies ring()/maglev() into
// the kernel's maps when kernel_refusal() is empty.
//
// A request without its key gets a random endpoint, as in Envoy: hash a
// random 64-bit number instead of the key (choose(random_u64)).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "lb/BoundedLoad.hpp"
#include "lb/Maglev.hpp"
#include "lb/RingHash.hpp"
#include "config/Policy.hpp"

namespace l7fast::lb {

class HashBalancer {
public:
    using ActiveRequests = BoundedLoad::ActiveRequests;

    // From a cluster with lb = RingHash or Maglev: ring_min_size /
    // ring_max_size, maglev_table_size, endpoint weights and
    // hash_balance_factor (0, or a percentage >= 100). nullopt with a reason
    // for another lb policy or an invalid setting (the caller adds the
    // cluster's location).
    static std::optional<HashBalancer> build(const policy::Cluster& cluster, std::string* why);

    policy::LbPolicy policy() const { return policy_; }
    size_t endpoint_count() const { return weights_.size(); }
    bool bounded() const { return bounded_.has_value(); }

    // The endpoint the table gives the key hash (what the kernel computes);
    // nullopt for a cluster without endpoints. Ignores bounded load.
    std::optional<uint32_t> choose(uint64_t key_hash) const;
    // With bounded load when the cluster has a hash_balance_factor (else as
    // above). cluster_active: the cluster's active requests; nullopt sums
    // active() over the endpoints.
    std::optional<uint32_t> choose(uint64_t key_hash, const ActiveRequests& active,
                                   std::optional<uint64_t> cluster_active = std::nullopt) const;

    // The choice when some endpoints are out (`in[e]`: endpoint e takes new
    // requests; as many entries as endpoints): a key keeps the table's
    // endpoint while that endpoint is in; a key whose endpoint is out gets
    // what the table built over the endpoints that are in gives it (built
    // once per set, with the cluster's own settings). Bounded load, when the
    // cluster has it, chooses among the endpoints that are in. nullopt when
    // none is. The kernel takes the first case and hands the second to the
    // slow path (bpf/lib/select.h).
    std::optional<uint32_t> choose_available(uint64_t key_hash, const std::vector<bool>& in,
                                             const ActiveRequests* active = nullptr) const;

    // Why this cluster's endpoint choice cannot run in the kernel (bounded
    // load, ring or table above the kernel's capacity, no endpoints);
    // nullopt when it can.
    std::optional<std::string> kernel_refusal() const;

    const RingHash* ring() const { return std::get_if<RingHash>(&table_); }
    const Maglev* maglev() const { return std::get_if<Maglev>(&table_); }

private:
    struct Subset;

    policy::Cluster cluster_;  // what it was built from (for subsets)
    mutable std::shared_ptr<Subset> subset_;  // the last subset table built
    policy::LbPolicy policy_ = policy::LbPolicy::RingHash;
    std::variant<RingHash, Maglev> table_;
    std::vector<double> weights_;
    std::optional<BoundedLoad> bounded_;
};

}  // namespace l7fast::lb
