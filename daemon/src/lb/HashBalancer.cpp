#include "lb/HashBalancer.hpp"

#include <algorithm>

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
    b.cluster_ = cluster;
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

struct HashBalancer::Subset {
    std::vector<bool> in;
    std::vector<uint32_t> index;  // subset endpoint -> cluster endpoint
    std::optional<HashBalancer> table;
};

std::optional<uint32_t> HashBalancer::choose_available(uint64_t key_hash, const std::vector<bool>& in,
                                                       const ActiveRequests* active) const
{
    const size_t n = weights_.size();
    const bool all_in = in.size() == n && std::find(in.begin(), in.end(), false) == in.end();
    if (all_in)
        return active ? choose(key_hash, *active) : choose(key_hash);
    if (!bounded_) {
        const auto e = choose(key_hash);
        if (!e)
            return std::nullopt;
        if (*e < in.size() && in[*e])
            return e;
    }
    if (!subset_ || subset_->in != in) {
        auto sub = std::make_shared<Subset>();
        sub->in = in;
        policy::Cluster c = cluster_;
        c.endpoints.clear();
        for (uint32_t i = 0; i < n && i < in.size(); i++) {
            if (!in[i])
                continue;
            c.endpoints.push_back(cluster_.endpoints[i]);
            sub->index.push_back(i);
        }
        // a subset of a valid cluster's endpoints builds (weights >= 1 each);
        // an empty one chooses nothing
        if (!c.endpoints.empty())
            sub->table = build(c, nullptr);
        subset_ = std::move(sub);
    }
    const Subset& sub = *subset_;
    if (!sub.table)
        return std::nullopt;
    std::optional<uint32_t> e;
    if (active && sub.table->bounded()) {
        const ActiveRequests mapped = [&](uint32_t i) { return (*active)(sub.index.at(i)); };
        e = sub.table->choose(key_hash, mapped);
    } else {
        e = sub.table->choose(key_hash);
    }
    if (!e || *e >= sub.index.size())
        return std::nullopt;
    return sub.index[*e];
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
