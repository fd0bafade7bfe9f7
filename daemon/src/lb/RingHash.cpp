#include "lb/RingHash.hpp"

#include <algorithm>
#include <cmath>

#include "l7_lb.h"
#include "lb/KeyHash.hpp"

namespace l7fast::lb {

std::optional<RingHash> RingHash::build(std::span<const HashTarget> targets, uint64_t min_size,
                                        uint64_t max_size, std::string* why)
{
    auto fail = [&](std::string reason) -> std::optional<RingHash> {
        if (why)
            *why = std::move(reason);
        return std::nullopt;
    };
    if (min_size == 0)
        return fail("ring hash: minimum ring size must be at least 1");
    if (max_size > kMaxRingSize)
        return fail("ring hash: maximum ring size (" + std::to_string(max_size) +
                    ") > " + std::to_string(kMaxRingSize));
    if (min_size > max_size)
        return fail("ring hash: minimum ring size (" + std::to_string(min_size) +
                    ") > maximum ring size (" + std::to_string(max_size) + ")");
    auto weights = normalize_weights(targets, why);
    if (!weights)
        return std::nullopt;

    RingHash ring;
    ring.per_endpoint_.assign(targets.size(), 0);
    if (targets.empty())
        return ring;

    const double min_w = weights->min;
    const double scale = std::min(std::ceil(min_w * static_cast<double>(min_size)) / min_w,
                                  static_cast<double>(max_size));
    ring.target_size_ = static_cast<uint64_t>(std::ceil(scale));

    struct Point {
        uint64_t hash;
        uint16_t endpoint;
    };
    std::vector<Point> points;
    points.reserve(ring.target_size_);
    // Running sums over the whole ring, as Envoy keeps them: an endpoint's
    // fractional share carries over to the next one.
    double current = 0.0;
    double target = 0.0;
    std::string key;
    for (size_t i = 0; i < targets.size(); i++) {
        key = targets[i].name;
        key += '_';
        const size_t prefix = key.size();
        target += scale * weights->weight[i];
        uint64_t n = 0;
        while (current < target) {
            key.resize(prefix);
            key += std::to_string(n);
            points.push_back({xxh64(key, 0), static_cast<uint16_t>(i)});
            ++n;
            ++current;
        }
        ring.per_endpoint_[i] = n;
    }
    std::sort(points.begin(), points.end(), [](const Point& a, const Point& b) {
        return a.hash != b.hash ? a.hash < b.hash : a.endpoint < b.endpoint;
    });
    ring.hashes_.reserve(points.size());
    ring.endpoints_.reserve(points.size());
    for (const auto& p : points) {
        ring.hashes_.push_back(p.hash);
        ring.endpoints_.push_back(p.endpoint);
    }
    return ring;
}

size_t RingHash::find(uint64_t hash) const
{
    const auto it = std::lower_bound(hashes_.begin(), hashes_.end(), hash);
    return it == hashes_.end() ? 0 : static_cast<size_t>(it - hashes_.begin());
}

std::optional<uint32_t> RingHash::choose(uint64_t hash) const
{
    if (hashes_.empty())
        return std::nullopt;
    return endpoints_[find(hash)];
}

bool RingHash::fits_kernel() const
{
    return !hashes_.empty() && hashes_.size() <= L7_LB_RING_MAX &&
           per_endpoint_.size() <= L7_LB_MAX_ENDPOINTS;
}

}  // namespace l7fast::lb
