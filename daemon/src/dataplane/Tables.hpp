// A compiled policy's tables in one generation of the data plane's maps
// (bpf/include/l7_maps.h): the route and rule sets, string conditions,
// routes, mutations, the kernel's answers, JWT providers, hash tables,
// clusters, endpoints and listeners. The
// part of Dataplane::stage that does not depend on which object the maps
// belong to: the data plane's own, or a test harness's that runs the real
// matcher over them (tests/support/BpfDecider.hpp).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
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
        listeners = -1, jwt_providers = -1, jwt_headers = -1, jwt_kids = -1;

    // The maps of a loaded object, by name; throws DataplaneError when one
    // is missing.
    static TableMaps of(const ::bpf_object* obj);
};

// A JWS header segment the kernel's HS verifier recognises (l7_jwt_hdr).
struct JwtHeaderEntry {
    uint32_t provider = 0;
    std::string segment;            // base64url, as a token carries it
    uint8_t mac_len = 0;            // 32, 48, 64
    std::vector<uint32_t> key_ids;  // l7fast.ko key ids: every key of the header's kid and alg
};

// A kid of a provider's keys (l7_jwt_kids): what the kernel does with a
// token naming it, per algorithm.
struct JwtKidEntry {
    uint32_t provider = 0;
    std::string kid;  // at most L7_JWT_MAX_KID bytes; empty: a key without a kid
    bool all = false;  // the entry that says every kid of the provider is in the map (kid empty)
    std::array<uint8_t, L7_JA_N> verdict{};  // L7_JK_*, by L7_JA_*
    std::array<l7_jwt_keyset, 3> hs{};       // L7_JA_HS256 .. HS512 with L7_JK_VERIFY
};

class TableWriter {
public:
    TableWriter() = default;
    explicit TableWriter(const TableMaps& maps) : maps_(maps) {}

    // Writes `t` into generation `gen` (0/1), which readers must not be
    // using. Listener ids in `t` (policy order) become the stable ids in
    // `listener_ids`. Throws DataplaneError.
    void write(const policy::CompiledTables& t, std::span<const uint32_t> listener_ids, uint32_t gen);
    // Replaces generation `gen`'s entries of l7_jwt_headers with `headers`,
    // of key epoch `epoch`, keyed by the generation's string seed. Returns
    // the number written: a malformed entry (a segment over L7_JWT_MAX_HDR,
    // no key or too many, a MAC length other than 32, 48, 64) or one the
    // map refuses is left out (its tokens go to user space), with a warning
    // for the latter. Throws DataplaneError when the old entries cannot go.
    size_t write_jwt_headers(uint32_t gen, uint64_t seed, uint32_t epoch, const std::vector<JwtHeaderEntry>& headers);
    // Replaces generation `gen`'s entries of l7_jwt_kids with `kids`, of key
    // epoch `epoch`: the provider-wide ("all") entries go first and come
    // last, so that the kernel never takes a kid it has not found yet for an
    // unknown one. Returns the number written; one the map refuses is left
    // out with a warning, and its provider's "all" entry with it. Throws
    // DataplaneError when the old entries cannot go.
    size_t write_jwt_kids(uint32_t gen, uint32_t epoch, const std::vector<JwtKidEntry>& kids);
    // Deletes the entries of generation `gen` (every one: nullopt) from a
    // map keyed by l7_jwt_key (l7_jwt_cache, l7_jwt_headers).
    static void delete_jwt_gen(int fd, const char* name, std::optional<uint32_t> gen);
    // Deletes generation `gen`'s entries (every one: nullopt) of
    // l7_jwt_kids (`fd`), the "all" entries first.
    static void delete_kids_gen(int fd, std::optional<uint32_t> gen);
    // The l7_match keys already in the map (a previous daemon's, adopted),
    // so that the next write of their generation deletes them.
    void adopt_strings();

private:
    TableMaps maps_;
    // match keys written per generation, so a later write can delete them
    std::vector<l7_match_key> strings_[L7_GENS];
};

}  // namespace l7fast::dataplane
