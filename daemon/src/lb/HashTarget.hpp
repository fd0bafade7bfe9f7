// What consistent hashing (ring hash, Maglev) knows about an endpoint: the
// name that is hashed to place it and its weight, plus Envoy's weight
// normalisation that both tables share.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "config/Policy.hpp"

namespace l7fast::lb {

struct HashTarget {
    // Hashed to place the endpoint: its address as Envoy prints it
    // (Address::asString(): "10.0.0.1:80", "[::1]:80"), so a ring or table
    // built here places endpoints exactly where Envoy would.
    std::string name;
    uint32_t weight = 1;
};

// The cluster's endpoints, in order, named by SocketAddress::str().
std::vector<HashTarget> hash_targets(std::span<const policy::Endpoint> endpoints);

// Envoy's normalizeHostWeights(): weight[i] = weight_i / sum of weights.
struct NormalizedWeights {
    std::vector<double> weight;
    double min = 1.0;  // as Envoy starts them: 1.0 and 0.0 with no endpoints
    double max = 0.0;
};

// nullopt with a reason when a weight is 0, the weights sum to more than
// 2^32 - 1 (Envoy's limit) or there are more than L7_LB_MAX_ENDPOINTS
// targets. No targets is not an error: the tables are then empty.
std::optional<NormalizedWeights> normalize_weights(std::span<const HashTarget> targets,
                                                   std::string* why);

}  // namespace l7fast::lb
