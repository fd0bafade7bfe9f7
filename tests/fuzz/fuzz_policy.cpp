// Policy text through the loader (toml++ and every validation rule), and
// what it accepts through the compiler and the Router.
//
// Invariants: never a crash or an exception; a failed load has 1..kMaxErrors+1
// errors, each naming the file, with a position inside the text (line and
// column both set, or both 0 for an error about the file as a whole) and a
// message; an accepted policy compiles (twice, to identical tables) into
// tables within the kernel's limits: one placement per route and listener,
// route targets and cumulative weights consistent, clusters' endpoint
// ranges inside the endpoint table, match strings within L7_MAX_MATCH_STR
// and the map's capacity, and the Router accepts the policy.
#include <cstring>
#include <map>
#include <string>
#include <string_view>

#include "FuzzTarget.hpp"
#include "compiler/PolicyCompiler.hpp"
#include "loader/PolicyLoader.hpp"
#include "semantics/Router.hpp"

namespace l7fast::fuzz {
namespace {

using namespace l7fast::policy;

constexpr const char* kFile = "fuzz.toml";

void check_errors(const PolicyLoadResult& r, std::string_view text)
{
    const auto& errors = r.errors();
    FUZZ_CHECK(!errors.empty() && errors.size() <= PolicyLoader::kMaxErrors + 1);
    size_t lines = 1;
    for (char c : text)
        lines += c == '\n';
    for (const PolicyError& e : errors) {
        FUZZ_CHECK(e.file == kFile);
        FUZZ_CHECK(!e.message.empty());
        FUZZ_CHECK((e.line == 0) == (e.column == 0));
        FUZZ_CHECK(e.line <= lines);
        FUZZ_CHECK(e.str().rfind(std::string(kFile) + ":", 0) == 0);
    }
    FUZZ_CHECK(!r.error_text().empty());
}

bool same_tables(const CompiledTables& a, const CompiledTables& b)
{
    auto bytes_eq = [](const auto& x, const auto& y) {
        return x.size() == y.size() && (x.empty() || std::memcmp(x.data(), y.data(), x.size() * sizeof x[0]) == 0);
    };
    if (a.strings.size() != b.strings.size() || a.placement.size() != b.placement.size())
        return false;
    for (size_t i = 0; i < a.strings.size(); i++)
        if (std::memcmp(&a.strings[i].first, &b.strings[i].first, sizeof a.strings[i].first) ||
            std::memcmp(&a.strings[i].second, &b.strings[i].second, sizeof a.strings[i].second))
            return false;
    for (size_t i = 0; i < a.placement.size(); i++)
        if (a.placement[i].kernel != b.placement[i].kernel || a.placement[i].reason != b.placement[i].reason)
            return false;
    return a.seed == b.seed && std::memcmp(&a.meta, &b.meta, sizeof a.meta) == 0 && bytes_eq(a.bitmaps, b.bitmaps) &&
           bytes_eq(a.routes, b.routes) && bytes_eq(a.clusters, b.clusters) && bytes_eq(a.endpoints, b.endpoints);
}

void check_tables(const Policy& p, const CompiledTables& t)
{
    FUZZ_CHECK(t.placement.size() == p.routes.size());
    FUZZ_CHECK(t.listener_placement.size() == p.listeners.size());
    FUZZ_CHECK(t.routes.size() == std::min<size_t>(p.routes.size(), L7_MAX_ROUTES));
    FUZZ_CHECK(t.clusters.size() <= L7_MAX_CLUSTERS && t.clusters.size() <= p.clusters.size());
    FUZZ_CHECK(t.endpoints.size() <= L7_MAX_ENDPOINTS);
    FUZZ_CHECK(t.listeners.size() <= L7_MAX_LISTENERS);
    FUZZ_CHECK(t.strings.size() <= kMaxMatchStrings);
    FUZZ_CHECK(t.bitmaps.size() == L7_BMI_PER_SPACE);
    for (const auto& [key, val] : t.strings) {
        FUZZ_CHECK(key.gen == 0);
        FUZZ_CHECK(val.len <= L7_MAX_MATCH_STR);
    }
    for (size_t i = 0; i < t.routes.size(); i++) {
        const l7_route& r = t.routes[i];
        FUZZ_CHECK(!t.placement[i].kernel || (r.flags & L7_RF_KERNEL));
        FUZZ_CHECK(t.placement[i].kernel || !t.placement[i].reason.empty());
        if (!(r.flags & L7_RF_KERNEL))
            continue;
        FUZZ_CHECK(r.n_targets <= L7_MAX_TARGETS);
        uint32_t prev = 0;
        for (uint32_t k = 0; k < r.n_targets; k++) {
            FUZZ_CHECK(r.cluster[k] < t.clusters.size());
            FUZZ_CHECK(r.cum_weight[k] >= prev);
            prev = r.cum_weight[k];
        }
        FUZZ_CHECK(r.n_targets == 0 || prev == r.total_weight);
    }
    for (const l7_cluster& c : t.clusters)
        FUZZ_CHECK(static_cast<uint64_t>(c.first_endpoint) + c.n_endpoints <= t.endpoints.size());
    for (size_t i = 0; i < p.routes.size(); i++)
        FUZZ_CHECK(i < L7_MAX_ROUTES || !t.placement[i].kernel);
}

}  // namespace

int policy(const uint8_t* data, size_t size)
{
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    PolicyLoadResult r = PolicyLoader::load_string(text, kFile);
    if (!r.ok()) {
        check_errors(r, text);
        return 0;
    }
    FUZZ_CHECK(r.errors().empty());
    const Policy& p = r.policy();

    // pool ids as the daemon hands them out: stable per address, and a
    // bounded supply so exhaustion is exercised too
    std::map<SocketAddress, uint32_t> pools;
    const PoolIdFn pool_id = [&](const SocketAddress& a) -> std::optional<uint32_t> {
        auto it = pools.find(a);
        if (it != pools.end())
            return it->second;
        if (pools.size() >= 48)
            return std::nullopt;
        return pools.emplace(a, static_cast<uint32_t>(pools.size())).first->second;
    };
    const CompiledTables t = compile(p, 0x6c3766617374ULL, pool_id);
    check_tables(p, t);
    const CompiledTables again = compile(p, 0x6c3766617374ULL, pool_id);
    FUZZ_CHECK(same_tables(t, again));

    const Router router(p);
    FUZZ_CHECK(router.policy().routes.size() == p.routes.size());
    return 0;
}

}  // namespace l7fast::fuzz

L7FAST_FUZZ_ENTRY(policy)
