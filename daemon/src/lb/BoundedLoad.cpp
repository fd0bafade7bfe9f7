#include "lb/BoundedLoad.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

namespace l7fast::lb {

BoundedLoad::BoundedLoad(std::vector<double> normalized, uint32_t balance_factor)
    : weights_(std::move(normalized)), factor_(balance_factor)
{
}

double BoundedLoad::overload(uint32_t endpoint, uint32_t active, uint64_t cluster_active) const
{
    const uint64_t total_slots = ((cluster_active + 1) * factor_ + 99) / 100;
    const uint64_t slots = std::max<uint64_t>(
        static_cast<uint64_t>(std::ceil(static_cast<double>(total_slots) * weights_[endpoint])), 1);
    return static_cast<double>(active) / static_cast<double>(slots);
}

uint32_t BoundedLoad::choose(uint64_t hash, uint32_t hashed, const ActiveRequests& active,
                             uint64_t cluster_active) const
{
    double least = overload(hashed, active(hashed), cluster_active);
    if (least <= 1.0)
        return hashed;

    const auto n = static_cast<uint32_t>(weights_.size());
    std::vector<uint32_t> order(n);
    std::iota(order.begin(), order.end(), 0u);
    // std::mt19937 is specified exactly by the standard (and seeded with
    // the hash mod 2^32, as Envoy's 64-bit seed is), so every build probes
    // the same sequence; std::uniform_int_distribution is not specified, so
    // the draw is Envoy's own.
    std::mt19937 rng(static_cast<std::mt19937::result_type>(hash));
    auto uniform = [&rng](uint32_t k) {
        const uint64_t bucket = (static_cast<uint64_t>(std::mt19937::max()) + 1) / k;
        uint32_t x = k;
        while (x >= k)
            x = static_cast<uint32_t>(rng() / bucket);
        return x;
    };
    uint32_t best = hashed;
    for (uint32_t i = 0; i < n; i++) {
        const uint32_t j = uniform(n - i);
        std::swap(order[i], order[i + j]);
        const uint32_t candidate = order[i];
        if (candidate == hashed)
            continue;
        const double load = overload(candidate, active(candidate), cluster_active);
        if (load <= 1.0)
            return candidate;
        if (load < least) {
            least = load;
            best = candidate;
        }
    }
    return best;
}

}  // namespace l7fast::lb
