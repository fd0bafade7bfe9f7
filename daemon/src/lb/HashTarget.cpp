#include "lb/HashTarget.hpp"

#include <algorithm>
#include <limits>

#include "l7_lb.h"

namespace l7fast::lb {

std::vector<HashTarget> hash_targets(std::span<const policy::Endpoint> endpoints)
{
    std::vector<HashTarget> out;
    out.reserve(endpoints.size());
    for (const auto& ep : endpoints)
        out.push_back({ep.address.str(), ep.weight});
    return out;
}

std::optional<NormalizedWeights> normalize_weights(std::span<const HashTarget> targets,
                                                   std::string* why)
{
    auto fail = [&](std::string reason) -> std::optional<NormalizedWeights> {
        if (why)
            *why = std::move(reason);
        return std::nullopt;
    };
    if (targets.size() > L7_LB_MAX_ENDPOINTS)
        return fail("more than " + std::to_string(L7_LB_MAX_ENDPOINTS) +
                    " endpoints in one consistent-hash cluster");
    uint64_t sum = 0;
    for (size_t i = 0; i < targets.size(); i++) {
        if (targets[i].weight == 0)
            return fail("endpoint " + targets[i].name + " has weight 0 (consistent hashing needs >= 1)");
        sum += targets[i].weight;
        if (sum > std::numeric_limits<uint32_t>::max())
            return fail("endpoint weights sum to more than 4294967295");
    }
    NormalizedWeights out;
    out.weight.reserve(targets.size());
    for (const auto& t : targets) {
        // the same double operations as Envoy (weight * 1.0 / sum), so the
        // ring and table come out bit for bit the same
        const double w = t.weight * 1.0 / static_cast<double>(sum);
        out.weight.push_back(w);
        out.min = std::min(out.min, w);
        out.max = std::max(out.max, w);
    }
    return out;
}

}  // namespace l7fast::lb
