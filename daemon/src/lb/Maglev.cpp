#include "lb/Maglev.hpp"

#include <algorithm>
#include <numeric>

#include "l7_lb.h"
#include "lb/KeyHash.hpp"

namespace l7fast::lb {

bool Maglev::is_prime(uint64_t n)
{
    if (n < 2)
        return false;
    for (uint64_t d = 2; d * d <= n; d++)
        if (n % d == 0)
            return false;
    return true;
}

std::optional<Maglev> Maglev::build(std::span<const HashTarget> targets, uint64_t table_size,
                                    std::string* why)
{
    auto fail = [&](std::string reason) -> std::optional<Maglev> {
        if (why)
            *why = std::move(reason);
        return std::nullopt;
    };
    if (table_size > kMaxTableSize)
        return fail("maglev: table size " + std::to_string(table_size) + " > " +
                    std::to_string(kMaxTableSize));
    if (!is_prime(table_size))
        return fail("maglev: table size " + std::to_string(table_size) + " is not a prime number");
    auto weights = normalize_weights(targets, why);
    if (!weights)
        return std::nullopt;

    Maglev m;
    m.table_size_ = table_size;
    m.per_endpoint_.assign(targets.size(), 0);
    if (targets.empty())
        return m;

    // The fill order must not depend on the order the endpoints are listed
    // in, or reordering a policy would move keys.
    std::vector<uint32_t> order(targets.size());
    std::iota(order.begin(), order.end(), 0u);
    std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
        return targets[a].name < targets[b].name;
    });

    struct Entry {
        uint32_t endpoint;
        uint64_t offset;
        uint64_t skip;
        double weight;
        double target = 0.0;
        uint64_t next = 0;
    };
    std::vector<Entry> entries;
    entries.reserve(order.size());
    for (uint32_t i : order) {
        const auto& name = targets[i].name;
        entries.push_back({i, xxh64(name, 0) % table_size, xxh64(name, 1) % (table_size - 1) + 1,
                           weights->weight[i]});
    }

    constexpr uint16_t kFree = L7_LB_NONE;
    m.table_.assign(table_size, kFree);
    const double max_w = weights->max;
    uint64_t filled = 0;
    for (uint32_t round = 1; filled < table_size; ++round) {
        for (size_t k = 0; k < entries.size() && filled < table_size; k++) {
            Entry& e = entries[k];
            if (round * e.weight < e.target)
                continue;
            e.target += max_w;
            uint64_t slot = (e.offset + e.skip * e.next) % table_size;
            while (m.table_[slot] != kFree) {
                e.next++;
                slot = (e.offset + e.skip * e.next) % table_size;
            }
            m.table_[slot] = static_cast<uint16_t>(e.endpoint);
            e.next++;
            m.per_endpoint_[e.endpoint]++;
            filled++;
        }
    }
    return m;
}

std::optional<uint32_t> Maglev::choose(uint64_t hash) const
{
    if (table_.empty())
        return std::nullopt;
    return table_[hash % table_size_];
}

bool Maglev::fits_kernel() const
{
    return !table_.empty() && table_size_ <= L7_LB_MAGLEV_MAX &&
           per_endpoint_.size() <= L7_LB_MAX_ENDPOINTS;
}

}  // namespace l7fast::lb
