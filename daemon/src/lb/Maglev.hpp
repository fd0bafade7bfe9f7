// Envoy's Maglev table (Eisenbud et al., NSDI 2016, pseudocode listing 1,
// with Envoy's weighting): a prime number of slots, each naming an endpoint;
// a key goes to slot hash % size. Built by the daemon; the kernel reads the
// same array with l7_lb_maglev_pick() (bpf/include/l7_lb.h).
//
// Semantics follow source/extensions/load_balancing_policies/maglev/
// maglev_lb.cc:
//  - endpoints are taken in order of their names (so the table does not
//    depend on the order they are listed in);
//  - offset = XXH64(name, seed 0) % size, skip = XXH64(name, seed 1) %
//    (size - 1) + 1, the endpoint's j-th preferred slot is
//    (offset + skip * j) % size;
//  - the table is filled in rounds 1, 2, ...: an endpoint takes its next
//    free preferred slot in a round when round * w >= its target weight,
//    which then grows by the largest normalised weight, so an endpoint of
//    the largest weight takes a slot every round and one of a third of it
//    every third round.
// Deviations, invisible unless two endpoints have the same name: equal names
// are ordered by endpoint index (Envoy breaks the tie by pointer value).
// Only the address is hashed (no use_hostname_for_hashing or metadata
// hash_key), no localities or priorities, every endpoint is in the table.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "lb/HashTarget.hpp"

namespace l7fast::lb {

class Maglev {
public:
    static constexpr uint64_t kDefaultTableSize = 65537;
    // Envoy's bound on MaglevLbConfig.table_size.
    static constexpr uint64_t kMaxTableSize = 5000011;

    static bool is_prime(uint64_t n);

    // nullopt with a reason when table_size is not a prime or above
    // kMaxTableSize, or for invalid weights (normalize_weights()). No
    // targets: an empty table, choose() returns nullopt.
    static std::optional<Maglev> build(std::span<const HashTarget> targets, uint64_t table_size,
                                       std::string* why);

    // The endpoint (index into the targets) for a key hash: table[hash %
    // size]; nullopt only for an empty table.
    std::optional<uint32_t> choose(uint64_t hash) const;

    bool empty() const { return table_.empty(); }
    uint64_t table_size() const { return table_size_; }
    // The table as the data plane stores it (l7_lb_maglev_pick's `table`);
    // empty when there are no endpoints.
    std::span<const uint16_t> table() const { return table_; }
    // Slots per endpoint (Envoy's min/max_entries_per_host stats).
    const std::vector<uint64_t>& slots_per_endpoint() const { return per_endpoint_; }
    // Small enough for the kernel (L7_LB_MAGLEV_MAX slots).
    bool fits_kernel() const;

private:
    uint64_t table_size_ = 0;
    std::vector<uint16_t> table_;
    std::vector<uint64_t> per_endpoint_;
};

}  // namespace l7fast::lb
