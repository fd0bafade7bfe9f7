#include "lb/HashBalancer.hpp"

#include "l7_lb.h"

namespace l7fast::lb {

std::optional<HashBalancer> HashBalancer::build(const policy::Cluster& cluster, std::string* why)
{
    auto fail = [&](std::string reason) -> std::optional<HashBalancer> {
        if (why)
            *why = std::move(reason);
        return std::nullopt;
    };
    if (cluster.lb != policy::LbPolicy::RingHash && cluster.lb != policy::LbPolicy::Maglev)
        return fail("cluster " + cluster.name + " does not use ring_hash or maglev");
    if (cluster.hash_balance_factor != 0 && cluster.hash_balance_factor < 100)
        return fail("hash_balance_factor must be 0 (off) or at least 100 (percent), not " +
                    std::to_string(cluster.hash_balance_factor));

    const auto targets = hash_targets(cluster.endpoints);
    auto weights = normalize_weights(targets, why);
    if (!weights)
        return std::nullopt;

    HashBalancer b;
    b.policy_ = cluster.lb;
    if (cluster.lb == policy::LbPolicy::RingHash) {
        auto ring = RingHash::build(targets, cluster.ring_min_size, cluster.ring_max_size, why);
        if (!ring)
            return std::nullopt;
        b.table_ = std::move(*ring);
    } else {
        auto table = Maglev::build(targets, cluster.maglev_table_size, why);
        if (!table)
            return std::nullopt;
        b.table_ = std::move(*table);
    }
    if (cluster.hash_balance_factor != 0)
        b.bounded_.emplace(weights->weight, cluster.hash_balance_factor);
    b.weights_ = std::move(weights->weight);
    return b;
}

std::optional<uint32_t> HashBalancer::choose(uint64_t key_hash) const
{
    return std::visit([key_hash](const auto& t) { return t.choose(key_hash); }, table_);
}

std::optional<uint32_t> HashBalancer::choose(uint64_t key_hash, const ActiveRequests& active,
                                             std::optional<uint64_t> cluster_active) const
{
    const auto hashed = choose(key_hash);
    if (!hashed || !bounded_)
        return hashed;
    uint64_t total = 0;
    if (cluster_active) {
        total = *cluster_active;
    } else {
        for (uint32_t i = 0; i < weights_.size(); i++)
            total += active(i);
    }
    return bounded_->choose(key_hash, *hashed, active, total);
}

std::optional<std::string> HashBalancer::kernel_refusal() const
{
    if (weights_.empty())
        return "cluster has no endpoints";
    if (bounded_)
        return "hash_balance_factor (bounded load) needs active request counts";
    if (const auto* r = ring(); r && !r->fits_kernel())
        return "ring of " + std::to_string(r->size()) + " points (kernel limit " +
               std::to_string(L7_LB_RING_MAX) + ")";
    if (const auto* m = maglev(); m && !m->fits_kernel())
        return "maglev table of " + std::to_string(m->table_size()) + " slots (kernel limit " +
               std::to_string(L7_LB_MAGLEV_MAX) + ")";
    return std::nullopt;
}

}  // namespace l7fast::lb
