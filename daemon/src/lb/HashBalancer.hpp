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
#include <optional>
#include <string>
#include <variant>

#include "lb/BoundedLoad.hpp"
#include "lb/Maglev.hpp"
#include "lb/RingHash.hpp"
#include "policy/Policy.hpp"

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

    // Why this cluster's endpoint choice cannot run in the kernel (bounded
    // load, ring or table above the kernel's capacity, no endpoints);
    // nullopt when it can.
    std::optional<std::string> kernel_refusal() const;

    const RingHash* ring() const { return std::get_if<RingHash>(&table_); }
    const Maglev* maglev() const { return std::get_if<Maglev>(&table_); }

private:
    policy::LbPolicy policy_ = policy::LbPolicy::RingHash;
    std::variant<RingHash, Maglev> table_;
    std::vector<double> weights_;
    std::optional<BoundedLoad> bounded_;
};

}  // namespace l7fast::lb
