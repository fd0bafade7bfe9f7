// A compiled policy's tables in one generation of the data plane's maps
// (bpf/include/l7_maps.h): the route and rule sets, string conditions,
// routes, mutations, the kernel's answers, JWT providers, hash tables,
// clusters, endpoints and listeners. The
// part of Dataplane::stage that does not depend on which object the maps
// belong to: the data plane's own, or a test harness's that runs the real
// matcher over them (tests/support/BpfDecider.hpp).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "dataplane/Abi.hpp"

struct bpf_object;

namespace l7fast::policy {
struct CompiledTables;
}

namespace l7fast::dataplane {

// The descriptors of the maps a TableWriter writes.
struct TableMaps {
    int bitmaps = -1, match = -1, routes = -1, mutations = -1, responses = -1, lb_tables = -1, clusters = -1, endpoints = -1,
        listeners = -1, jwt_providers = -1;

    // The maps of a loaded object, by name; throws DataplaneError when one
    // is missing.
    static TableMaps of(const ::bpf_object* obj);
};

class TableWriter {
public:
    TableWriter() = default;
    explicit TableWriter(const TableMaps& maps) : maps_(maps) {}

    // Writes `t` into generation `gen` (0/1), which readers must not be
    // using. Listener ids in `t` (policy order) become the stable ids in
    // `listener_ids`. Throws DataplaneError.
    void write(const policy::CompiledTables& t, std::span<const uint32_t> listener_ids, uint32_t gen);
    // The l7_match keys already in the map (a previous daemon's, adopted),
    // so that the next write of their generation deletes them.
    void adopt_strings();

private:
    TableMaps maps_;
    // match keys written per generation, so a later write can delete them
    std::vector<l7_match_key> strings_[L7_GENS];
};

}  // namespace l7fast::dataplane
