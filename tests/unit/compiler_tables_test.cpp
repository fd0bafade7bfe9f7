// PolicyCompiler: table layouts (bpf/include/l7fast_abi.h) and placement.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <sys/socket.h>

#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>

#include "l7_lb.h"
#include "lb/HashBalancer.hpp"
#include "lb/KeyHash.hpp"
#include "common/KernelHash.hpp"
#include "compiler/PolicyCompiler.hpp"
#include "semantics/Responses.hpp"
#include "loader/PolicyLoader.hpp"

using namespace l7fast::policy;

namespace {

constexpr uint64_t kSeed = 0x5eed5eed12345678ULL;

constexpr const char* kPrelude = R"(
[[listener]]
name = "web"
address = "127.0.0.1:8080"
[[listener]]
name = "v6"
address = "[::1]:8443"
[[listener]]
name = "any"
address = "0.0.0.0:9000"
[[cluster]]
name = "app"
endpoints = [ { address = "127.0.0.1:9001" }, { address = "127.0.0.1:9002" } ]
[[cluster]]
name = "canary"
lb = "weighted"
endpoints = [ { address = "127.0.0.1:9003", weight = 3 }, { address = "127.0.0.1:9004", weight = 1 } ]
)";

Policy load(const std::string& routes)
{
    PolicyLoadResult r = PolicyLoader::load_string(std::string(kPrelude) + routes, "compiler.toml");
    if (!r.ok())
        ADD_FAILURE() << r.error_text();
    return r.ok() ? std::move(r).policy() : Policy{};
}

// Pool ids in order of first request, like a pool manager would hand out.
struct PoolIds {
    std::map<SocketAddress, uint32_t> ids;
    std::set<SocketAddress> exhausted;
    PoolIdFn fn()
    {
        return [this](const SocketAddress& a) -> std::optional<uint32_t> {
            if (exhausted.count(a))
                return std::nullopt;
            return ids.emplace(a, static_cast<uint32_t>(ids.size())).first->second;
        };
    }
};

CompiledTables compile_policy(const Policy& p, PoolIds& pools)
{
    return compile(p, kSeed, pools.fn());
}

std::set<uint32_t> bits(const l7_bitmap& b)
{
    std::set<uint32_t> out;
    for (uint32_t i = 0; i < L7_MAX_ROUTES; i++)
        if (b.w[i / 64] & (1ULL << (i % 64)))
            out.insert(i);
    return out;
}

std::set<uint32_t> range(uint32_t from, uint32_t to)
{
    std::set<uint32_t> out;
    for (uint32_t i = from; i < to; i++)
        out.insert(i);
    return out;
}

const l7_match_val* find_string(const CompiledTables& t, l7_match_kind kind, uint16_t aux, const std::string& s,
                                bool lower = false, uint16_t space = L7_SPACE_ROUTES)
{
    const uint64_t hash = kernel::match_hash(t.seed, s, lower);
    for (const auto& [k, v] : t.strings)
        if (k.kind == kind && k.aux == aux && k.hash == hash && k.gen == 0 && k.space == space)
            return &v;
    return nullptr;
}

// The parser's header-name identity (l7_name_hash: the seed-0 word hash of
// the lower-cased name, low 32 bits), written out independently of
// l7_common.h.
uint32_t name_hash_lower(const std::string& s)
{
    const uint64_t m1 = 0x9E3779B97F4A7C15ULL, m2 = 0xC2B2AE3D27D4EB4FULL;
    uint64_t h = m2;
    for (size_t i = 0; i < s.size(); i += 8) {
        uint64_t w = 0;
        for (size_t j = 0; j < 8 && i + j < s.size(); j++) {
            char c = s[i + j];
            w |= uint64_t(uint8_t(c >= 'A' && c <= 'Z' ? c + 32 : c)) << (8 * j);
        }
        h ^= w * m1;
        h = (h << 31) | (h >> 33);
        h *= m2;
    }
    h ^= uint64_t(s.size()) * m1;
    h ^= h >> 29;
    h *= m2;
    h ^= h >> 32;
    return uint32_t(h);
}

std::string route_block(const std::string& name, const std::string& match, const std::string& extra = "")
{
    return "[[route]]\nname = \"" + name + "\"\ncluster = \"app\"\n" + extra + "[route.match]\n" + match + "\n";
}

}  // namespace

TEST(CompilerTables, LayoutOfASmallPolicy)
{
    const Policy p = load(R"(
[[route]]
name = "health"
cluster = "app"
[route.match]
method = "GET"
path_exact = "/healthz"
[[route]]
name = "api"
listeners = ["web"]
cluster = "app"
[route.match]
host = "API.example.com"
path_prefix = "/api/"
[[route]]
name = "canary"
clusters = [ { name = "app", weight = 90 }, { name = "canary", weight = 10 } ]
[route.match]
headers = [ { name = "X-Canary", exact = "1" } ]
[[route]]
name = "rest"
cluster = "app"
)");
    PoolIds pools;
    const CompiledTables t = compile_policy(p, pools);

    ASSERT_EQ(t.placement.size(), 4u);
    for (const RoutePlacement& pl : t.placement)
        EXPECT_TRUE(pl.kernel) << pl.reason;
    EXPECT_TRUE(t.notes.empty());

    EXPECT_EQ(t.seed, kSeed);
    EXPECT_EQ(t.meta.seed, kSeed);
    EXPECT_EQ(t.meta.n_routes, 4u);
    EXPECT_EQ(t.meta.flags, static_cast<uint32_t>(L7_GMF_HOST | L7_GMF_PATH | L7_GMF_PATH_EXACT));
    ASSERT_EQ(t.meta.n_prefix_lens, 1u);
    EXPECT_EQ(t.meta.prefix_lens[0], 5u);
    ASSERT_EQ(t.meta.n_match_hdrs, 1u);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(t.meta.hdr_name[0]), t.meta.hdr_name_len[0]), "x-canary");
    EXPECT_EQ(t.meta.hdr_name_hash[0], name_hash_lower("x-canary"));
    EXPECT_EQ(t.meta.hdr_name[0][8], 0) << "zero-padded";

    ASSERT_EQ(t.bitmaps.size(), static_cast<size_t>(L7_BMI_PER_SPACE));
    EXPECT_EQ(bits(t.bitmaps[L7_BMI_LISTENER(0)]), (std::set<uint32_t>{0, 1, 2, 3}));
    EXPECT_EQ(bits(t.bitmaps[L7_BMI_LISTENER(1)]), (std::set<uint32_t>{0, 2, 3}));
    EXPECT_EQ(bits(t.bitmaps[L7_BMI_LISTENER(2)]), (std::set<uint32_t>{0, 2, 3}));
    EXPECT_TRUE(bits(t.bitmaps[L7_BMI_LISTENER(3)]).empty());
    EXPECT_EQ(bits(t.bitmaps[L7_BMI_METHOD(L7_M_GET)]), (std::set<uint32_t>{0, 1, 2, 3}));
    EXPECT_EQ(bits(t.bitmaps[L7_BMI_METHOD(L7_M_POST)]), (std::set<uint32_t>{1, 2, 3}));
    EXPECT_EQ(bits(t.bitmaps[L7_BMI_METHOD(L7_M_OTHER)]), (std::set<uint32_t>{1, 2, 3}));
    EXPECT_TRUE(bits(t.bitmaps[L7_BMI_METHOD(L7_M_CONNECT)]).empty()) << "CONNECT is never routed";
    EXPECT_EQ(bits(t.bitmaps[L7_BMI_HOST_ANY]), (std::set<uint32_t>{0, 2, 3}));
    EXPECT_EQ(bits(t.bitmaps[L7_BMI_PATH_ANY]), (std::set<uint32_t>{2, 3}));
    EXPECT_EQ(bits(t.bitmaps[L7_BMI_HDR_ANY(0)]), (std::set<uint32_t>{0, 1, 3}));
    EXPECT_TRUE(bits(t.bitmaps[L7_BMI_HDR_PRESENT(0)]).empty());
    EXPECT_TRUE(bits(t.bitmaps[L7_BMI_HDR_ANY(1)]).empty()) << "unused header slots stay empty";

    ASSERT_EQ(t.strings.size(), 4u);
    const l7_match_val* health = find_string(t, L7_MK_PATH_EXACT, 0, "/healthz");
    ASSERT_NE(health, nullptr);
    EXPECT_EQ(bits(health->routes), std::set<uint32_t>{0});
    EXPECT_EQ(health->len, 8u);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(health->str), 8), "/healthz");
    for (size_t i = 8; i < L7_MAX_MATCH_STR; i++)
        ASSERT_EQ(health->str[i], 0) << "zero-padded at " << i;
    const l7_match_val* api = find_string(t, L7_MK_PATH_PREFIX, 5, "/api/");
    ASSERT_NE(api, nullptr);
    EXPECT_EQ(bits(api->routes), std::set<uint32_t>{1});
    const l7_match_val* host = find_string(t, L7_MK_HOST_EXACT, 0, "api.example.com", true);
    ASSERT_NE(host, nullptr);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(host->str), host->len), "api.example.com");
    const l7_match_val* canary = find_string(t, L7_MK_HDR_EXACT, 0, "1");
    ASSERT_NE(canary, nullptr);
    EXPECT_EQ(bits(canary->routes), std::set<uint32_t>{2});

    ASSERT_EQ(t.routes.size(), 4u);
    for (uint32_t i = 0; i < 4; i++) {
        EXPECT_EQ(t.routes[i].flags, static_cast<uint32_t>(L7_RF_VALID | L7_RF_KERNEL));
        EXPECT_EQ(t.routes[i].stats_id, i);
    }
    EXPECT_EQ(t.routes[0].n_targets, 1u);
    EXPECT_EQ(t.routes[0].cluster[0], 0u);
    EXPECT_EQ(t.routes[0].total_weight, 1u);
    EXPECT_EQ(t.routes[0].cum_weight[0], 1u);
    EXPECT_EQ(t.routes[2].n_targets, 2u);
    EXPECT_EQ(t.routes[2].cluster[0], 0u);
    EXPECT_EQ(t.routes[2].cluster[1], 1u);
    EXPECT_EQ(t.routes[2].cum_weight[0], 90u);
    EXPECT_EQ(t.routes[2].cum_weight[1], 100u);
    EXPECT_EQ(t.routes[2].total_weight, 100u);

    ASSERT_EQ(t.clusters.size(), 2u);
    EXPECT_EQ(t.clusters[0].lb, L7_LB_ROUND_ROBIN);
    EXPECT_EQ(t.clusters[0].n_endpoints, 2u);
    EXPECT_EQ(t.clusters[0].first_endpoint, 0u);
    EXPECT_EQ(t.clusters[1].lb, L7_LB_WEIGHTED);
    EXPECT_EQ(t.clusters[1].n_endpoints, 2u);
    EXPECT_EQ(t.clusters[1].first_endpoint, 2u);
    EXPECT_EQ(t.clusters[1].total_weight, 4u);
    ASSERT_EQ(t.endpoints.size(), 4u);
    EXPECT_EQ(t.endpoints[2].weight, 3u);
    EXPECT_EQ(t.endpoints[2].cum_weight, 3u);
    EXPECT_EQ(t.endpoints[3].cum_weight, 4u);
    std::string why;
    EXPECT_EQ(t.endpoints[0].pool_id, pools.ids.at(*SocketAddress::parse("127.0.0.1:9001", &why)));
    EXPECT_EQ(t.endpoints[3].pool_id, pools.ids.at(*SocketAddress::parse("127.0.0.1:9004", &why)));

    ASSERT_EQ(t.listeners.size(), 3u);
    const auto& [k4, v4] = t.listeners[0];
    EXPECT_EQ(k4.ip[0], htonl(0x7f000001));
    EXPECT_EQ(k4.ip[1] | k4.ip[2] | k4.ip[3], 0u);
    EXPECT_EQ(k4.port, 8080u);
    EXPECT_EQ(k4.family, AF_INET);
    EXPECT_EQ(v4.id, 0u);
    const auto& [k6, v6] = t.listeners[1];
    EXPECT_EQ(k6.ip[0] | k6.ip[1] | k6.ip[2], 0u);
    EXPECT_EQ(k6.ip[3], htonl(1));
    EXPECT_EQ(k6.port, 8443u);
    EXPECT_EQ(k6.family, AF_INET6);
    EXPECT_EQ(v6.id, 1u);
    const auto& [kw, vw] = t.listeners[2];
    EXPECT_EQ(kw.ip[0] | kw.ip[1] | kw.ip[2] | kw.ip[3], 0u) << "wildcard: all-zero ip";
    EXPECT_EQ(vw.id, 2u);
}

TEST(CompilerTables, MethodWithoutKernelClassIsOtherAndUser)
{
    const Policy p = load(route_block("purge", "method = [\"PURGE\", \"GET\"]"));
    PoolIds pools;
    const CompiledTables t = compile_policy(p, pools);
    EXPECT_FALSE(t.placement[0].kernel);
    EXPECT_EQ(t.placement[0].reason, "method PURGE has no kernel method class");
    EXPECT_EQ(t.routes[0].flags, static_cast<uint32_t>(L7_RF_VALID));
    EXPECT_EQ(bits(t.bitmaps[L7_BMI_METHOD(L7_M_OTHER)]), std::set<uint32_t>{0});
    EXPECT_EQ(bits(t.bitmaps[L7_BMI_METHOD(L7_M_GET)]), std::set<uint32_t>{0});
    EXPECT_TRUE(bits(t.bitmaps[L7_BMI_METHOD(L7_M_POST)]).empty());
}

TEST(CompilerTables, KernelMethodClasses)
{
    EXPECT_EQ(kernel_method_class("GET"), L7_M_GET);
    EXPECT_EQ(kernel_method_class("TRACE"), L7_M_TRACE);
    EXPECT_EQ(kernel_method_class("CONNECT"), L7_M_CONNECT);
    EXPECT_EQ(kernel_method_class("get"), L7_M_OTHER);
    EXPECT_EQ(kernel_method_class("GETS"), L7_M_OTHER);
    EXPECT_EQ(kernel_method_class(""), L7_M_OTHER);
}

TEST(CompilerTables, OffloadFalseKeepsExactBitsButPlacesInUserSpace)
{
    const Policy p = load(route_block("slow", "path_exact = \"/slow\"", "offload = false\n"));
    PoolIds pools;
    const CompiledTables t = compile_policy(p, pools);
    EXPECT_FALSE(t.placement[0].kernel);
    EXPECT_EQ(t.placement[0].reason, "offload = false");
    EXPECT_TRUE(bits(t.bitmaps[L7_BMI_PATH_ANY]).empty());
    ASSERT_NE(find_string(t, L7_MK_PATH_EXACT, 0, "/slow"), nullptr);
    EXPECT_TRUE(pools.ids.empty()) << "no pool is taken for clusters only user-space routes use";
    EXPECT_EQ(t.clusters[0].n_endpoints, 0u);
}

TEST(CompilerTables, KernelDataplaneOffPlacesEverythingInUserSpace)
{
    Policy p = load(route_block("a", ""));
    p.daemon.kernel_dataplane = false;
    PoolIds pools;
    const CompiledTables t = compile_policy(p, pools);
    EXPECT_FALSE(t.placement[0].kernel);
    EXPECT_EQ(t.placement[0].reason, "kernel_dataplane = false");
}

TEST(CompilerTables, LongStringsBecomeAnyAndUser)
{
    // hand-built: the loader refuses hosts longer than 253 bytes
    Policy p = load(route_block("path", "path_exact = \"/" + std::string(256, 'p') + "\"") +
                    route_block("prefix", "path_prefix = \"/" + std::string(300, 'q') + "\"") +
                    route_block("host", "") +
                    route_block("value", "headers = [ { name = \"x-v\", exact = \"" + std::string(257, 'v') + "\" } ]") +
                    route_block("name", "headers = [ { name = \"x-" + std::string(63, 'n') + "\", present = true } ]") +
                    route_block("fits", "path_exact = \"/" + std::string(255, 'p') + "\""));
    p.routes[2].match.host = std::string(257, 'h');
    PoolIds pools;
    const CompiledTables t = compile_policy(p, pools);
    EXPECT_EQ(t.placement[0].reason, "path longer than 256 bytes");
    EXPECT_EQ(t.placement[1].reason, "path longer than 256 bytes");
    EXPECT_EQ(t.placement[2].reason, "host longer than 256 bytes");
    EXPECT_EQ(t.placement[3].reason, "header value longer than 256 bytes");
    EXPECT_EQ(t.placement[4].reason, "header name longer than 64 bytes");
    EXPECT_TRUE(t.placement[5].kernel) << t.placement[5].reason;
    EXPECT_EQ(bits(t.bitmaps[L7_BMI_PATH_ANY]), (std::set<uint32_t>{0, 1, 2, 3, 4}));
    EXPECT_EQ(bits(t.bitmaps[L7_BMI_HOST_ANY]), (std::set<uint32_t>{0, 1, 2, 3, 4, 5}));
    EXPECT_EQ(t.meta.n_prefix_lens, 0u);
    ASSERT_EQ(t.meta.n_match_hdrs, 1u) << "the 65-byte name has no slot";
    EXPECT_EQ(bits(t.bitmaps[L7_BMI_HDR_PRESENT(0)]), std::set<uint32_t>{3})
        << "an exact value too long to compare still requires the header";
    EXPECT_EQ(bits(t.bitmaps[L7_BMI_HDR_ANY(0)]), (std::set<uint32_t>{0, 1, 2, 4, 5}));
    EXPECT_EQ(t.strings.size(), 1u);
}

TEST(CompilerTables, SeventeenthPrefixLengthGoesToUserSpace)
{
    std::string routes;
    for (int i = 0; i < 17; i++)
        routes += route_block("p" + std::to_string(i), "path_prefix = \"/" + std::string(i, 'x') + "\"");
    routes += route_block("again", "path_prefix = \"/yy\"");
    PoolIds pools;
    const CompiledTables t = compile_policy(load(routes), pools);
    ASSERT_EQ(t.meta.n_prefix_lens, 16u);
    for (uint32_t i = 0; i < 16; i++) {
        EXPECT_EQ(t.meta.prefix_lens[i], i + 1);
        EXPECT_TRUE(t.placement[i].kernel) << i;
    }
    EXPECT_EQ(t.placement[16].reason, "more than 16 distinct path-prefix lengths");
    EXPECT_TRUE(t.placement[17].kernel) << "a length that has a slot";
    EXPECT_EQ(bits(t.bitmaps[L7_BMI_PATH_ANY]), std::set<uint32_t>{16});
}

TEST(CompilerTables, SeventeenthHeaderNameGoesToUserSpace)
{
    std::string routes;
    for (int i = 0; i < 17; i++)
        routes += route_block("h" + std::to_string(i),
                              "headers = [ { name = \"x-h" + std::to_string(i) + "\", present = true } ]");
    PoolIds pools;
    const CompiledTables t = compile_policy(load(routes), pools);
    ASSERT_EQ(t.meta.n_match_hdrs, 16u);
    EXPECT_EQ(t.placement[16].reason, "more than 16 distinct header names");
    EXPECT_TRUE(t.placement[15].kernel);
    for (uint32_t h = 0; h < 16; h++) {
        EXPECT_EQ(bits(t.bitmaps[L7_BMI_HDR_PRESENT(h)]), std::set<uint32_t>{h});
        std::set<uint32_t> others = range(0, 17);
        others.erase(h);
        EXPECT_EQ(bits(t.bitmaps[L7_BMI_HDR_ANY(h)]), others) << h;
    }
}

TEST(CompilerTables, TargetLimits)
{
    std::string nine = "clusters = [";
    std::string prelude_clusters;
    for (int i = 0; i < 9; i++) {
        prelude_clusters += "[[cluster]]\nname = \"c" + std::to_string(i) + "\"\nendpoints = [ { address = \"127.0.0.1:" +
                            std::to_string(9100 + i) + "\" } ]\n";
        nine += std::string(i ? ", " : "") + "{ name = \"c" + std::to_string(i) + "\", weight = 1 }";
    }
    nine += "]\n";
    const Policy p = load(prelude_clusters + "[[route]]\nname = \"nine\"\n" + nine);
    PoolIds pools;
    const CompiledTables t = compile_policy(p, pools);
    EXPECT_EQ(t.placement[0].reason, "more than 8 weighted clusters");
    EXPECT_EQ(t.routes[0].n_targets, 0u);
}

TEST(CompilerTables, ClusterWithoutFreePoolGoesToUserSpace)
{
    const Policy p = load(route_block("a", "path_exact = \"/a\"") +
                          "[[route]]\nname = \"b\"\ncluster = \"canary\"\n");
    PoolIds pools;
    std::string why;
    pools.exhausted.insert(*SocketAddress::parse("127.0.0.1:9004", &why));
    const CompiledTables t = compile_policy(p, pools);
    EXPECT_TRUE(t.placement[0].kernel);
    EXPECT_EQ(t.placement[1].reason, "no free upstream pool for 127.0.0.1:9004");
    EXPECT_EQ(t.clusters[1].n_endpoints, 0u);
}

TEST(CompilerTables, ClustersAndEndpointsBeyondTheTables)
{
    Policy p = load(route_block("first", ""));
    // 256 more clusters: the last one has index 257
    for (int i = 0; i < 256; i++) {
        Cluster c;
        c.name = "extra" + std::to_string(i);
        std::string why;
        c.endpoints.push_back({*SocketAddress::parse("10.0.0.1:" + std::to_string(1000 + i), &why), 1});
        p.clusters.push_back(c);
    }
    Route late = p.routes[0];
    late.name = "late";
    late.clusters = {{"extra255", 1}};
    p.routes.push_back(late);
    // a cluster with 1100 endpoints cannot fit L7_MAX_ENDPOINTS
    Cluster big;
    big.name = "big";
    for (int i = 0; i < 1100; i++) {
        std::string why;
        big.endpoints.push_back({*SocketAddress::parse("10.1." + std::to_string(i / 250) + "." +
                                                           std::to_string(i % 250 + 1) + ":80", &why), 1});
    }
    p.clusters[1] = big;
    Route to_big = p.routes[0];
    to_big.name = "to-big";
    to_big.clusters = {{"big", 1}};
    p.routes.push_back(to_big);
    PoolIds pools;
    const CompiledTables t = compile_policy(p, pools);
    EXPECT_TRUE(t.placement[0].kernel) << t.placement[0].reason;
    EXPECT_EQ(t.placement[1].reason, "cluster extra255 is beyond the first 256 clusters");
    EXPECT_EQ(t.placement[2].reason, "cluster big has endpoints beyond the first 1024");
    EXPECT_EQ(t.clusters.size(), 256u);
}

TEST(CompilerTables, MoreThan1024Routes)
{
    Policy p = load(route_block("r", "path_exact = \"/0\""));
    for (int i = 1; i < 1100; i++) {
        Route r = p.routes[0];
        r.name = "r" + std::to_string(i);
        r.match.path = "/" + std::to_string(i);
        p.routes.push_back(r);
    }
    PoolIds pools;
    const CompiledTables t = compile_policy(p, pools);
    ASSERT_EQ(t.placement.size(), 1100u);
    EXPECT_EQ(t.routes.size(), 1024u);
    EXPECT_EQ(t.meta.n_routes, 1024u);
    EXPECT_TRUE(t.placement[1022].kernel);
    EXPECT_FALSE(t.placement[1023].kernel);
    EXPECT_EQ(t.placement[1023].reason,
              "the policy has more than 1024 routes: the kernel's last route stands for this and every later route");
    EXPECT_EQ(t.placement[1024].reason, "beyond the first 1024 routes");
    EXPECT_EQ(t.placement[1099].reason, "beyond the first 1024 routes");
    // the stand-in admits every request no earlier route takes
    EXPECT_EQ(bits(t.bitmaps[L7_BMI_PATH_ANY]), std::set<uint32_t>{1023});
    EXPECT_EQ(bits(t.bitmaps[L7_BMI_METHOD(L7_M_OTHER)]), range(0, 1024));
    EXPECT_EQ(bits(t.bitmaps[L7_BMI_LISTENER(0)]), range(0, 1024));
    EXPECT_EQ(t.strings.size(), 1023u);
}

TEST(CompilerTables, StringTableCapacity)
{
    Policy p = load(route_block("r", "host = \"h0.example\"\npath_exact = \"/0\"\n"
                                     "headers = [ { name = \"x-v\", exact = \"0\" } ]"));
    for (int i = 1; i < 700; i++) {
        Route r = p.routes[0];
        r.name = "r" + std::to_string(i);
        r.match.host = "h" + std::to_string(i) + ".example";
        r.match.path = "/" + std::to_string(i);
        r.match.headers[0].value = std::to_string(i);
        p.routes.push_back(r);
    }
    PoolIds pools;
    const CompiledTables t = compile_policy(p, pools);
    EXPECT_EQ(t.strings.size(), kMaxMatchStrings);
    // 682 routes * 3 strings = 2046; route 682 gets its host and path in, not its value
    EXPECT_TRUE(t.placement[681].kernel);
    EXPECT_EQ(t.placement[682].reason, "more than 2048 distinct string conditions");
    EXPECT_EQ(bits(t.bitmaps[L7_BMI_HDR_PRESENT(0)]).count(682), 1u);
    EXPECT_EQ(bits(t.bitmaps[L7_BMI_HOST_ANY]).count(683), 1u);
    EXPECT_EQ(bits(t.bitmaps[L7_BMI_HOST_ANY]).count(681), 0u);
}

TEST(CompilerTables, ListenersBeyond64)
{
    Policy p = load(route_block("r", ""));
    for (int i = 0; i < 64; i++) {
        std::string why;
        p.listeners.push_back({"l" + std::to_string(i), *SocketAddress::parse("127.0.1.1:" + std::to_string(2000 + i), &why), {}});
    }
    Route r = p.routes[0];
    r.name = "late-listener";
    r.listeners = {"l63"};  // index 66
    p.routes.push_back(r);
    PoolIds pools;
    const CompiledTables t = compile_policy(p, pools);
    EXPECT_EQ(t.listeners.size(), 64u);
    ASSERT_EQ(t.listener_placement.size(), 67u);
    EXPECT_TRUE(t.listener_placement[63].kernel);
    EXPECT_EQ(t.listener_placement[64].reason, "beyond the first 64 listeners");
    EXPECT_EQ(t.placement[1].reason, "its listeners are beyond the first 64");
    for (uint32_t l = 0; l < 64; l++)
        EXPECT_EQ(bits(t.bitmaps[L7_BMI_LISTENER(l)]), std::set<uint32_t>{0}) << l;
}

TEST(CompilerTables, CollisionsChangeTheSeed)
{
    const Policy p = load(route_block("a", "path_exact = \"/a\"") + route_block("b", "path_exact = \"/b\""));
    PoolIds pools;
    // collides under the first seed only
    CompileOptions options;
    options.string_hash = [](uint64_t seed, std::string_view s, bool lower) {
        return seed == kSeed ? uint64_t{7} : kernel::match_hash(seed, s, lower);
    };
    const CompiledTables t = compile(p, kSeed, pools.fn(), options);
    EXPECT_NE(t.seed, kSeed);
    EXPECT_EQ(t.meta.seed, t.seed);
    ASSERT_EQ(t.notes.size(), 1u);
    EXPECT_NE(t.notes[0].find("made 1 string conditions collide; recompiled with seed " + std::to_string(t.seed)),
              std::string::npos)
        << t.notes[0];
    EXPECT_TRUE(t.placement[0].kernel);
    EXPECT_TRUE(t.placement[1].kernel);
    EXPECT_EQ(t.strings.size(), 2u);
}

TEST(CompilerTables, PersistentCollisionsGoToUserSpace)
{
    const Policy p = load(route_block("a", "path_exact = \"/a\"") + route_block("b", "path_exact = \"/b\"") +
                          route_block("a-again", "path_exact = \"/a\""));
    PoolIds pools;
    CompileOptions options;
    options.string_hash = [](uint64_t, std::string_view, bool) { return uint64_t{7}; };
    options.seed_attempts = 3;
    const CompiledTables t = compile(p, kSeed, pools.fn(), options);
    ASSERT_EQ(t.notes.size(), 3u);
    EXPECT_NE(t.notes[2].find("1 string conditions still collided"), std::string::npos) << t.notes[2];
    EXPECT_TRUE(t.placement[0].kernel);
    EXPECT_FALSE(t.placement[1].kernel);
    EXPECT_NE(t.placement[1].reason.find("its condition \"/b\" collides with \"/a\""), std::string::npos) << t.placement[1].reason;
    EXPECT_TRUE(t.placement[2].kernel) << "the same string shares the entry";
    EXPECT_EQ(bits(t.bitmaps[L7_BMI_PATH_ANY]), std::set<uint32_t>{1});
    ASSERT_EQ(t.strings.size(), 1u);
    EXPECT_EQ(bits(t.strings[0].second.routes), (std::set<uint32_t>{0, 2}));
}

TEST(CompilerTables, DeterministicForOneSeed)
{
    const Policy p = load(route_block("a", "host = \"a.example\"\npath_prefix = \"/x\"") + route_block("b", ""));
    PoolIds pools1, pools2;
    const CompiledTables a = compile(p, 1, pools1.fn());
    const CompiledTables b = compile(p, 1, pools2.fn());
    ASSERT_EQ(a.strings.size(), b.strings.size());
    for (size_t i = 0; i < a.strings.size(); i++)
        EXPECT_EQ(std::memcmp(&a.strings[i], &b.strings[i], sizeof(a.strings[i])), 0);
    EXPECT_EQ(std::memcmp(a.bitmaps.data(), b.bitmaps.data(), a.bitmaps.size() * sizeof(l7_bitmap)), 0);
    const CompiledTables c = compile(p, 2, pools1.fn());
    EXPECT_NE(a.strings[0].first.hash, c.strings[0].first.hash) << "the seed keys the hash";
}

// The compiler hashes with l7_hash_str, the kernel with l7_hash_window over
// request bytes: they must agree for every length, offset and case.
TEST(CompilerTables, StringHashMatchesTheKernelWindowHash)
{
    std::mt19937_64 rng(42);
    for (int i = 0; i < 2000; i++) {
        const uint32_t len = static_cast<uint32_t>(rng() % (L7_MAX_MATCH_STR + 1));
        const uint32_t off = static_cast<uint32_t>(rng() % 64);
        std::string window(off + len + rng() % 16, '\0');
        for (char& c : window)
            c = static_cast<char>(rng() % 2 ? 'A' + rng() % 26 : rng() % 256);
        const bool lower = rng() % 2;
        const uint64_t seed = rng();
        std::string s = window.substr(off, len);
        if (lower)
            for (char& c : s)
                c = (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c;
        ASSERT_EQ(kernel::window_hash(window, off, len, seed, lower), kernel::match_hash(seed, s, false))
            << "len " << len << " off " << off;
        uint8_t padded[L7_MAX_MATCH_STR] = {};
        std::memcpy(padded, s.data(), len);
        ASSERT_TRUE(kernel::window_eq(window, off, len, padded, lower));
    }
}

TEST(CompilerTables, TheShippedDefaultPolicyRunsInTheKernel)
{
    PolicyLoadResult r =
        PolicyLoader::load(std::string(L7FAST_TEST_DATA) + "/../../packaging/policy.toml", "");
    ASSERT_TRUE(r.ok()) << r.error_text();
    PoolIds pools;
    const CompiledTables t = compile_policy(r.policy(), pools);
    for (size_t i = 0; i < t.placement.size(); i++)
        EXPECT_TRUE(t.placement[i].kernel) << r.policy().routes[i].name << ": " << t.placement[i].reason;
}

// Every policy feature the kernel tables cannot express places its route in
// user space (the reference pipeline enforces it there) and never narrows
// the route's bits beyond what the kernel can check.
JwtProvider jwt_provider(const std::string& name)
{
    JwtProvider p;
    p.name = name;
    p.algorithms = {"HS256"};
    JwtKey k;
    k.alg = "HS256";
    k.secret = std::string(32, 'k');
    p.keys.push_back(k);
    return p;
}

TEST(CompilerTables, JwtRoutesAreAdmittedFromTheTokenCache)
{
    Policy p = load(route_block("a", "path_prefix = \"/a\"") + route_block("b", "path_prefix = \"/b\"") +
                    route_block("c", "path_prefix = \"/c\""));
    ASSERT_EQ(p.routes.size(), 3u);
    p.jwt_providers.push_back(jwt_provider("one"));
    p.jwt_providers.push_back(jwt_provider("two"));
    p.jwt_providers[1].from = {RequestKey::Kind::Header, "X-Token"};
    p.jwt_providers[1].from_prefix = "";
    p.jwt_providers[1].max_token_bytes = 100000;
    p.jwt_providers.push_back(jwt_provider("unused"));
    p.routes[0].jwt = "one";
    p.routes[1].jwt = "two";
    PoolIds pools;
    const CompiledTables t = compile_policy(p, pools);
    for (int r = 0; r < 3; r++)
        EXPECT_TRUE(t.placement[r].kernel) << r << ": " << t.placement[r].reason;
    EXPECT_EQ(t.routes[0].flags & L7_RF_JWT, unsigned(L7_RF_JWT));
    EXPECT_EQ(t.routes[0].jwt_provider, 0);
    EXPECT_EQ(t.routes[1].flags & L7_RF_JWT, unsigned(L7_RF_JWT));
    EXPECT_EQ(t.routes[1].jwt_provider, 1);
    EXPECT_EQ(t.routes[2].flags & L7_RF_JWT, 0u);
    ASSERT_EQ(t.jwt_providers.size(), 3u);
    // the token headers are match headers (the matcher finds their lines),
    // which every route admits in any shape
    ASSERT_EQ(t.meta.n_match_hdrs, 2u);
    const l7_jwt_provider& one = t.jwt_providers[0];
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(t.meta.hdr_name[one.hdr])), "authorization");
    EXPECT_EQ(one.prefix_len, 7);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(one.prefix), one.prefix_len), "bearer ");
    EXPECT_EQ(one.max_token, 4096 < L7_JWT_MAX_TOKEN ? 4096 : L7_JWT_MAX_TOKEN);
    const l7_jwt_provider& two = t.jwt_providers[1];
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(t.meta.hdr_name[two.hdr])), "x-token");
    EXPECT_NE(one.hdr, two.hdr);
    EXPECT_EQ(two.prefix_len, 0);
    EXPECT_EQ(two.max_token, L7_JWT_MAX_TOKEN);
    // no kernel route uses it: its tokens are never cached
    EXPECT_EQ(t.jwt_providers[2].max_token, 0);
    for (uint32_t h = 0; h < t.meta.n_match_hdrs; h++)
        EXPECT_EQ(bits(t.bitmaps[L7_BMI_HDR_ANY(h)]).size(), 3u);

    // a provider shared with a user-placed route stays out of the kernel
    // unless a kernel route uses it
    Policy q = p;
    q.routes[0].offload = false;
    const CompiledTables u = compile_policy(q, pools);
    EXPECT_FALSE(u.placement[0].kernel);
    EXPECT_EQ(u.routes[0].flags & L7_RF_JWT, 0u);
    EXPECT_EQ(u.jwt_providers[0].max_token, 0);
}

// Which providers the kernel's HS verifier takes (l7_jwt_provider.flags
// L7_JP_VERIFY), and why not the others (l7fastctl status).
TEST(CompilerTables, KernelJwtVerificationPerProvider)
{
    Policy p = load(route_block("a", "path_prefix = \"/a\"") + route_block("b", "path_prefix = \"/b\"") +
                    route_block("c", "path_prefix = \"/c\""));
    p.jwt_providers.push_back(jwt_provider("hs"));
    p.jwt_providers.push_back(jwt_provider("off"));
    p.jwt_providers[1].verify_in_kernel = false;
    p.jwt_providers.push_back(jwt_provider("rs"));
    p.jwt_providers[2].algorithms = {"RS256"};
    p.routes[0].jwt = "hs";
    p.routes[1].jwt = "off";
    p.routes[2].jwt = "rs";
    PoolIds pools;
    const CompiledTables t = compile_policy(p, pools);
    ASSERT_EQ(t.jwt_verify_reason.size(), 3u);
    EXPECT_EQ(t.jwt_verify_reason[0], "");
    EXPECT_EQ(t.jwt_providers[0].flags & L7_JP_VERIFY, unsigned(L7_JP_VERIFY));
    // the operator's choice: l7fastd verifies each new token, the cache admits it after that
    EXPECT_EQ(t.jwt_verify_reason[1], "verify_in_kernel = false");
    EXPECT_EQ(t.jwt_providers[1].flags & L7_JP_VERIFY, 0u);
    EXPECT_GT(t.jwt_providers[1].max_token, 0u) << "still admitted from the verified-token cache";
    EXPECT_EQ(t.jwt_verify_reason[2], "it accepts no HS256/384/512 tokens");
    EXPECT_EQ(t.jwt_providers[2].flags & L7_JP_VERIFY, 0u);
    for (int r = 0; r < 3; r++)
        EXPECT_TRUE(t.placement[r].kernel) << r << ": " << t.placement[r].reason;
}

TEST(CompilerTables, FeaturesWithoutKernelSupportGoToUserSpace)
{
    const Policy base = load(route_block("r", "path_prefix = \"/a\""));
    ASSERT_EQ(base.routes.size(), 1u);
    std::vector<std::pair<std::string, std::function<void(Policy&)>>> cases = {
        {"path_regex", [](Policy& p) { p.routes[0].match.path_kind = PathMatch::Regex; }},
        {"header absence", [](Policy& p) {
             p.routes[0].match.headers.push_back({"x-a", HeaderCondition::Kind::Absent, ""});
         }},
        {"header prefix", [](Policy& p) {
             p.routes[0].match.headers.push_back({"x-a", HeaderCondition::Kind::Prefix, "v"});
         }},
        {"query", [](Policy& p) { p.routes[0].match.query.push_back({"q", QueryCondition::Kind::Present, ""}); }},
        {"source", [](Policy& p) { p.routes[0].match.sources.push_back(Cidr{AF_INET, {}, 0}); }},
        {"claim", [](Policy& p) { p.routes[0].match.claims.push_back({"sub", ClaimCondition::Kind::Present, ""}); }},
        // JWT routes are admitted from the verified-token cache unless
        // their provider needs something the kernel does not do
        {"tokens from a cookie", [](Policy& p) {
             p.jwt_providers.push_back(jwt_provider("corp"));
             p.jwt_providers[0].from = {RequestKey::Kind::Cookie, "token"};
             p.jwt_providers[0].from_prefix.clear();
             p.routes[0].jwt = "corp";
         }},
        {"forwarded claims", [](Policy& p) {
             p.jwt_providers.push_back(jwt_provider("corp"));
             p.jwt_providers[0].forward_claims.push_back({"sub", "x-user"});
             p.routes[0].jwt = "corp";
         }},
        {"token prefix longer than 16", [](Policy& p) {
             p.jwt_providers.push_back(jwt_provider("corp"));
             p.jwt_providers[0].from_prefix = "Authentication-Bearer ";
             p.routes[0].jwt = "corp";
         }},
        {"JWT provider corp does not exist", [](Policy& p) { p.routes[0].jwt = "corp"; }},
        {"RBAC rule rule0: path_regex", [](Policy& p) {
             p.routes[0].rbac = Rbac{};
             p.routes[0].rbac->rules.push_back({"", RbacRule::Action::Allow, {}, {}});
             p.routes[0].rbac->rules[0].when.path_kind = PathMatch::Regex;
             p.routes[0].rbac->rules[0].when.path = "/a.*";
         }},
        {"RBAC rule r1: header absence", [](Policy& p) {
             p.routes[0].rbac = Rbac{};
             p.routes[0].rbac->rules.push_back({"r0", RbacRule::Action::Allow, {}, {}});
             p.routes[0].rbac->rules.push_back({"r1", RbacRule::Action::Deny, {}, {}});
             p.routes[0].rbac->rules[1].when.headers.push_back({"x-a", HeaderCondition::Kind::Absent, ""});
         }},
        {"RBAC rule r0: header prefix", [](Policy& p) {
             p.routes[0].rbac = Rbac{};
             p.routes[0].rbac->rules.push_back({"r0", RbacRule::Action::Deny, {}, {}});
             p.routes[0].rbac->rules[0].when.headers.push_back({"x-a", HeaderCondition::Kind::Prefix, "v"});
         }},
        {"RBAC rule r0: query", [](Policy& p) {
             p.routes[0].rbac = Rbac{};
             p.routes[0].rbac->rules.push_back({"r0", RbacRule::Action::Deny, {}, {}});
             p.routes[0].rbac->rules[0].when.query.push_back({"q", QueryCondition::Kind::Present, ""});
         }},
        {"RBAC rule r0: source", [](Policy& p) {
             p.routes[0].rbac = Rbac{};
             p.routes[0].rbac->rules.push_back({"r0", RbacRule::Action::Deny, {}, {}});
             p.routes[0].rbac->rules[0].when.sources.push_back(Cidr{AF_INET, {}, 0});
         }},
        {"RBAC rule r0: claim", [](Policy& p) {
             p.routes[0].rbac = Rbac{};
             p.routes[0].rbac->rules.push_back({"r0", RbacRule::Action::Allow, {}, {}});
             p.routes[0].rbac->rules[0].when.claims.push_back({"sub", ClaimCondition::Kind::Present, ""});
         }},
        {"RBAC rule r0: method PURGE has no kernel method class", [](Policy& p) {
             p.routes[0].rbac = Rbac{};
             p.routes[0].rbac->rules.push_back({"r0", RbacRule::Action::Deny, {}, {}});
             p.routes[0].rbac->rules[0].when.methods = {"GET", "PURGE"};
         }},
        {"RBAC rule r0: header value longer than 256", [](Policy& p) {
             p.routes[0].rbac = Rbac{};
             p.routes[0].rbac->rules.push_back({"r0", RbacRule::Action::Deny, {}, {}});
             p.routes[0].rbac->rules[0].when.headers.push_back(
                 {"x-a", HeaderCondition::Kind::Exact, std::string(257, 'v')});
         }},
        {"RBAC rule r0: host conditions in RBAC rules", [](Policy& p) {
             p.routes[0].rbac = Rbac{};
             p.routes[0].rbac->rules.push_back({"r0", RbacRule::Action::Deny, {}, {}});
             p.routes[0].rbac->rules[0].when.host = "a.example";
         }},
        {"RBAC rule r0: two conditions on header x-a", [](Policy& p) {
             p.routes[0].rbac = Rbac{};
             p.routes[0].rbac->rules.push_back({"r0", RbacRule::Action::Deny, {}, {}});
             p.routes[0].rbac->rules[0].when.headers.push_back({"x-a", HeaderCondition::Kind::Exact, "1"});
             p.routes[0].rbac->rules[0].when.headers.push_back({"x-a", HeaderCondition::Kind::Exact, "2"});
         }},
        {"rate limit without a kernel bucket",
         [](Policy& p) { p.routes[0].rate_limit = RateLimit{10, 10, std::nullopt, 10}; }},
        {"direct responses over 1024 bytes are sent from user space", [](Policy& p) {
             p.routes[0].direct_response = DirectResponse{};
             p.routes[0].direct_response->body = std::string(1000, 'b');
         }},
        {"response header mutation runs in user space",
         [](Policy& p) { p.routes[0].response_headers.set.push_back({"x-b", "1"}); }},
        {"response header mutation runs in user space",
         [](Policy& p) { p.routes[0].response_headers.remove.push_back("x-b"); }},
        {"header mutation removes 9 header names", [](Policy& p) {
             for (int i = 0; i < 9; i++)
                 p.routes[0].request_headers.remove.push_back("x-" + std::to_string(i));
         }},
        {"header mutation names a header longer than 64 bytes",
         [](Policy& p) { p.routes[0].request_headers.remove.push_back(std::string(65, 'x')); }},
        {"header mutation adds 513 bytes",
         [](Policy& p) { p.routes[0].request_headers.add.push_back({"x-big", std::string(504, 'v')}); }},
        {"per-route timeout", [](Policy& p) { p.routes[0].timeout = std::chrono::milliseconds(5); }},
        {"cookie hash keys", [](Policy& p) {
             p.clusters[0].lb = LbPolicy::RingHash;
             p.clusters[0].hash_key = RequestKey{RequestKey::Kind::Cookie, "session"};
         }},
        {"bounded load", [](Policy& p) {
             p.clusters[0].lb = LbPolicy::Maglev;
             p.clusters[0].hash_key = RequestKey{RequestKey::Kind::Header, "x-user"};
             p.clusters[0].hash_balance_factor = 150;
         }},
        {"without a hash_key", [](Policy& p) { p.clusters[0].lb = LbPolicy::RingHash; }},
    };
    for (auto& [what, change] : cases) {
        Policy p = base;
        change(p);
        PoolIds pools;
        const CompiledTables t = compile_policy(p, pools);
        EXPECT_FALSE(t.placement[0].kernel) << what;
        EXPECT_NE(t.placement[0].reason.find(what), std::string::npos)
            << what << ": " << t.placement[0].reason;
    }
    // a direct response the kernel can send: its keep-alive bytes, the
    // slow path's (semantics/Responses.hpp), in t.responses
    {
        Policy p = base;
        p.routes[0].clusters.clear();
        p.routes[0].direct_response = DirectResponse{};
        p.routes[0].direct_response->status = 404;
        p.routes[0].direct_response->headers.push_back({"X-A", "1"});
        p.routes[0].direct_response->body = "nope\n";
        PoolIds pools;
        const CompiledTables t = compile_policy(p, pools);
        ASSERT_TRUE(t.placement[0].kernel) << t.placement[0].reason;
        EXPECT_TRUE(t.routes[0].flags & L7_RF_DIRECT);
        ASSERT_EQ(t.routes[0].resp_direct, 0u);
        ASSERT_EQ(t.responses.size(), 1u);
        const std::string want =
            "HTTP/1.1 404 Not Found\r\nx-a: 1\r\ncontent-type: text/plain\r\ncontent-length: 5\r\n\r\nnope\n";
        const l7_response& r = t.responses[0];
        EXPECT_EQ(std::string(reinterpret_cast<const char*>(r.bytes), r.len), want);
        EXPECT_EQ(r.head_len, want.size() - 5);
        EXPECT_EQ(r.status, 404);
        for (size_t i = r.len; i < sizeof(r.bytes); i++)
            ASSERT_EQ(r.bytes[i], 0) << i;
    }
    // RBAC with rules the kernel evaluates exactly stays in the kernel
    const auto with_rbac = [&](const std::string& deny_body) {
        Policy p = base;
        p.routes[0].rbac = Rbac{};
        p.routes[0].rbac->deny_body = deny_body;
        p.routes[0].rbac->rules.push_back({"r0", RbacRule::Action::Deny, {}, {}});
        p.routes[0].rbac->rules[0].when.methods = {"DELETE"};
        return p;
    };
    {
        const Policy p = with_rbac("forbidden\n");
        PoolIds pools;
        const CompiledTables t = compile_policy(p, pools);
        EXPECT_TRUE(t.placement[0].kernel) << t.placement[0].reason;
        EXPECT_TRUE(t.routes[0].flags & L7_RF_RBAC);
        EXPECT_TRUE(t.placement[0].kernel_denials);
        // its denial is the kernel's to send: the slow path's keep-alive bytes
        ASSERT_EQ(t.routes[0].resp_deny, 0u);
        ASSERT_EQ(t.responses.size(), 1u);
        const std::string want = "HTTP/1.1 403 Forbidden\r\ncontent-type: text/plain\r\ncontent-length: 10\r\n\r\n"
                                 "forbidden\n";
        EXPECT_EQ(rbac_denied(*p.routes[0].rbac, false).bytes, want);
        const l7_response& r = t.responses[0];
        EXPECT_EQ(std::string(reinterpret_cast<const char*>(r.bytes), r.len), want);
        EXPECT_EQ(r.head_len, want.size() - 10);
        EXPECT_EQ(r.status, 403);
    }
    // a denial too long for the kernel is the slow path's; the route, and
    // the decision, stay in the kernel
    {
        const Policy p = with_rbac(std::string(L7_MAX_RESP_BYTES, 'x'));
        PoolIds pools;
        const CompiledTables t = compile_policy(p, pools);
        EXPECT_TRUE(t.placement[0].kernel) << t.placement[0].reason;
        EXPECT_TRUE(t.routes[0].flags & L7_RF_RBAC);
        EXPECT_FALSE(t.placement[0].kernel_denials);
        EXPECT_EQ(t.routes[0].resp_deny, L7_RESP_NONE);
        EXPECT_TRUE(t.responses.empty());
    }
    // a path_regex route admits every path in the tables (a superset), even
    // when its pattern's length is a prefix length of the policy: compiled
    // as a literal prefix, "/a.*" would hide the route from "/abc" and let
    // a later kernel route take requests that are the regex route's
    {
        const Policy p = load(route_block("re", "path_regex = \"/a.*\"") + route_block("p", "path_prefix = \"/api\""));
        ASSERT_EQ(p.routes.size(), 2u);
        PoolIds pools;
        const CompiledTables t = compile_policy(p, pools);
        EXPECT_FALSE(t.placement[0].kernel);
        EXPECT_TRUE(bits(t.bitmaps[L7_BMI_PATH_ANY]).count(0));
        EXPECT_EQ(t.placement[0].reason, "path_regex runs in user space");
    }
    // request header mutation: in the kernel, with its table
    {
        Policy p = base;
        p.routes[0].request_headers.remove.push_back("X-B");
        p.routes[0].request_headers.set.push_back({"x-c", "1"});
        p.routes[0].request_headers.add.push_back({"x-d", "2"});
        PoolIds pools;
        const CompiledTables t = compile_policy(p, pools);
        EXPECT_TRUE(t.placement[0].kernel) << t.placement[0].reason;
        EXPECT_TRUE(t.routes[0].flags & L7_RF_MUTATE);
        ASSERT_EQ(t.mutations.size(), 1u);
        EXPECT_EQ(t.mutations[0].first, 0u);
        EXPECT_EQ(t.mutations[0].second.n_remove, 2u);
        EXPECT_EQ(std::string(reinterpret_cast<const char*>(t.mutations[0].second.add),
                              t.mutations[0].second.add_len),
                  "x-c: 1\r\nx-d: 2\r\n");
        EXPECT_FALSE(t.routes.size() > 1 && (t.routes[1].flags & L7_RF_MUTATE));
    }
    {
        PoolIds pools;
        const CompiledTables t = compile_policy(base, pools);
        EXPECT_FALSE(t.routes[0].flags & L7_RF_MUTATE);
        EXPECT_TRUE(t.mutations.empty());
    }
    // an absence condition must not be compiled as "present"
    Policy p = base;
    p.routes[0].match.headers.push_back({"x-a", HeaderCondition::Kind::Absent, ""});
    PoolIds pools;
    const CompiledTables t = compile_policy(p, pools);
    ASSERT_GE(t.meta.n_match_hdrs, 0u);
    for (uint32_t h = 0; h < t.meta.n_match_hdrs; h++)
        EXPECT_TRUE(bits(t.bitmaps[L7_BMI_HDR_PRESENT(h)]).empty());
}

// RBAC rules of kernel routes: consecutive bits of space 1 in policy order,
// the route's range and mode in l7_route, conditions in space 1's sets and
// strings (never in the route space), header slots and prefix lengths
// shared with routes (routes first).
TEST(CompilerTables, KeylessRateLimitsRunInTheKernelOnTheLimitersBucket)
{
    Policy p = load(route_block("limited", "path_prefix = \"/a\"") + route_block("keyed", "path_prefix = \"/k\"") +
                    route_block("other", "path_prefix = \"/o\""));
    ASSERT_EQ(p.routes.size(), 3u);
    p.routes[0].rate_limit = RateLimit{7, 30, std::nullopt, 10};
    p.routes[1].rate_limit = RateLimit{7, 30, RequestKey{RequestKey::Kind::Header, "x-key"}, 10};
    p.routes[2].rate_limit = RateLimit{7, 30, std::nullopt, 10};
    PoolIds pools;
    CompileOptions options;
    // the daemon's limiters: route 0 has kernel bucket 1234, route 2 none
    options.rate_bucket = [](size_t r) { return r == 0 ? std::optional<uint32_t>(1234) : std::nullopt; };
    const CompiledTables t = compile(p, kSeed, pools.fn(), options);
    EXPECT_TRUE(t.placement[0].kernel) << t.placement[0].reason;
    EXPECT_TRUE(t.placement[0].kernel_limited);
    const l7_route& r = t.routes[0];
    EXPECT_TRUE(r.flags & L7_RF_RATE);
    EXPECT_EQ(r.bucket, 1234u);
    EXPECT_EQ(r.rate, 7u);
    EXPECT_EQ(r.burst, 30u);
    // the 429 is the slow path's keep-alive bytes: a wait is at most 1 s
    // at rate >= 1, so retry-after is always 1
    ASSERT_LT(r.resp_limited, t.responses.size());
    const l7_response& resp = t.responses[r.resp_limited];
    const std::string want = too_many_requests(1000, false).bytes;
    EXPECT_EQ(want, too_many_requests(1, false).bytes);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(resp.bytes), resp.len), want);
    EXPECT_EQ(resp.status, 429);
    EXPECT_EQ(resp.head_len, want.size() - std::string("too many requests\n").size());

    // a keyed one whose limiter has no kernel table of its keys
    EXPECT_FALSE(t.placement[1].kernel);
    EXPECT_EQ(t.placement[1].reason, "keyed rate limit without a kernel table (l7fastd runs it in user space)");
    EXPECT_FALSE(t.routes[1].flags & L7_RF_RATE);
    EXPECT_FALSE(t.placement[2].kernel);
    EXPECT_EQ(t.placement[2].reason, "rate limit without a kernel bucket (l7fastd runs it in user space)");
    EXPECT_EQ(t.routes[2].resp_limited, L7_RESP_NONE);

    // without a data plane's buckets every rate limit is user space's
    EXPECT_FALSE(compile_policy(p, pools).placement[0].kernel);
}

TEST(CompilerTables, KeyedRateLimitsRunInTheKernelKeyedByAHeaderOrTheSourceAddress)
{
    Policy p = load(route_block("by-header", "path_prefix = \"/h\"") + route_block("by-source", "path_prefix = \"/s\"") +
                    route_block("by-cookie", "path_prefix = \"/c\"") + route_block("by-claim", "path_prefix = \"/j\""));
    ASSERT_EQ(p.routes.size(), 4u);
    p.routes[0].rate_limit = RateLimit{7, 30, RequestKey{RequestKey::Kind::Header, "X-Key"}, 10};
    p.routes[1].rate_limit = RateLimit{7, 30, RequestKey{RequestKey::Kind::SourceIp, ""}, 10};
    p.routes[2].rate_limit = RateLimit{7, 30, RequestKey{RequestKey::Kind::Cookie, "s"}, 10};
    p.routes[3].rate_limit = RateLimit{7, 30, RequestKey{RequestKey::Kind::Claim, "sub"}, 10};
    PoolIds pools;
    CompileOptions options;
    options.rate_bucket = [](size_t r) { return std::optional<uint32_t>(100 + static_cast<uint32_t>(r)); };
    const CompiledTables t = compile(p, kSeed, pools.fn(), options);
    ASSERT_TRUE(t.placement[0].kernel) << t.placement[0].reason;
    ASSERT_TRUE(t.placement[1].kernel) << t.placement[1].reason;
    EXPECT_EQ(t.routes[0].flags & (L7_RF_RATE | L7_RF_RATE_KEYED), L7_RF_RATE | L7_RF_RATE_KEYED);
    EXPECT_EQ(t.routes[0].bucket, 100u);
    // the key header has a match header slot, the one the route names
    const uint16_t slot = t.routes[0].rate_key;
    ASSERT_LT(slot, t.meta.n_match_hdrs);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(t.meta.hdr_name[slot]), t.meta.hdr_name_len[slot]), "x-key");
    EXPECT_EQ(t.routes[1].flags & (L7_RF_RATE | L7_RF_RATE_KEYED), L7_RF_RATE | L7_RF_RATE_KEYED);
    EXPECT_EQ(t.routes[1].rate_key, L7_RATE_KEY_SOURCE);
    EXPECT_EQ(t.routes[1].bucket, 101u);
    EXPECT_FALSE(t.placement[2].kernel);
    EXPECT_EQ(t.placement[2].reason, "rate limits keyed by a cookie run in user space");
    EXPECT_FALSE(t.placement[3].kernel);
    EXPECT_NE(t.placement[3].reason.find("rate limits keyed by a claim run in user space"), std::string::npos)
        << t.placement[3].reason;
}

TEST(CompilerTables, AKernelRateLimitWithoutRoomForIts429StaysInTheKernel)
{
    // the generation's answers are full of direct responses: the route
    // still takes its tokens in the kernel, the slow path sends its 429
    std::string text;
    for (int i = 0; i < L7_MAX_RESPONSES; i++)
        text += "[[route]]\nname = \"d" + std::to_string(i) + "\"\ndirect_response = { status = 204 }\n" +
                "[route.match]\npath_exact = \"/d" + std::to_string(i) + "\"\n";
    text += route_block("limited", "path_prefix = \"/a\"");
    Policy p = load(text);
    const size_t r = p.routes.size() - 1;
    p.routes[r].rate_limit = RateLimit{5, 5, std::nullopt, 10};
    PoolIds pools;
    CompileOptions options;
    options.rate_bucket = [](size_t) { return std::optional<uint32_t>(3); };
    const CompiledTables t = compile(p, kSeed, pools.fn(), options);
    ASSERT_EQ(t.responses.size(), static_cast<size_t>(L7_MAX_RESPONSES));
    EXPECT_TRUE(t.placement[r].kernel) << t.placement[r].reason;
    EXPECT_FALSE(t.placement[r].kernel_limited);
    EXPECT_TRUE(t.routes[r].flags & L7_RF_RATE);
    EXPECT_EQ(t.routes[r].bucket, 3u);
    EXPECT_EQ(t.routes[r].resp_limited, L7_RESP_NONE);
}

TEST(CompilerTables, RbacRulesGoToTheRuleSpace)
{
    const Policy p = load(R"(
[[route]]
name = "plain"
cluster = "app"
[route.match]
path_prefix = "/p"
headers = [ { name = "x-a", present = true } ]

[[route]]
name = "first"
cluster = "app"
[route.match]
path_prefix = "/a"
[route.rbac]
default = "deny"
rules = [
  { action = "allow", method = ["GET", "HEAD"] },
  { action = "deny", path_prefix = "/a/admin" },
  { name = "guests", action = "deny", headers = [ { name = "x-role", exact = "guest" } ] },
]

[[route]]
name = "user-space"
cluster = "app"
[route.match]
path_prefix = "/u"
[route.rbac]
rules = [ { action = "deny", path_prefix = "/u/secret/" }, { name = "lan", action = "allow", source = "10.0.0.0/8" } ]

[[route]]
name = "overrides"
cluster = "app"
[route.match]
path_prefix = "/b"
[route.rbac]
mode = "deny_overrides"
rules = [ { action = "deny", headers = [ { name = "x-block", present = true } ] }, { action = "allow", path_exact = "/b/ok" } ]

[[route]]
name = "no-rules"
cluster = "app"
[route.rbac]
default = "deny"
)");
    ASSERT_EQ(p.routes.size(), 5u);
    PoolIds pools;
    const CompiledTables t = compile_policy(p, pools);
    ASSERT_EQ(t.routes.size(), 5u);

    EXPECT_TRUE(t.placement[0].kernel);
    EXPECT_EQ(t.routes[0].flags & (L7_RF_RBAC | L7_RF_RBAC_DENY_OVERRIDES | L7_RF_RBAC_DEFAULT_DENY), 0u);

    ASSERT_TRUE(t.placement[1].kernel) << t.placement[1].reason;
    EXPECT_EQ(t.routes[1].flags, L7_RF_VALID | L7_RF_KERNEL | L7_RF_RBAC | L7_RF_RBAC_DEFAULT_DENY);
    EXPECT_EQ(t.routes[1].rule_first, 0u);
    EXPECT_EQ(t.routes[1].rule_count, 3u);
    EXPECT_EQ(t.routes[1].resp_deny, 0u);

    // a rule the kernel cannot evaluate: the whole route, rules not compiled
    EXPECT_FALSE(t.placement[2].kernel);
    EXPECT_EQ(t.placement[2].reason, "RBAC rule lan: source address conditions run in user space");
    EXPECT_EQ(t.routes[2].flags & L7_RF_RBAC, 0u);
    EXPECT_EQ(t.routes[2].rule_count, 0u);

    ASSERT_TRUE(t.placement[3].kernel) << t.placement[3].reason;
    EXPECT_EQ(t.routes[3].flags, L7_RF_VALID | L7_RF_KERNEL | L7_RF_RBAC | L7_RF_RBAC_DENY_OVERRIDES);
    EXPECT_EQ(t.routes[3].rule_first, 3u);
    EXPECT_EQ(t.routes[3].rule_count, 2u);

    ASSERT_TRUE(t.placement[4].kernel) << t.placement[4].reason;
    EXPECT_EQ(t.routes[4].flags, L7_RF_VALID | L7_RF_KERNEL | L7_RF_RBAC | L7_RF_RBAC_DEFAULT_DENY);
    EXPECT_EQ(t.routes[4].rule_first, 5u);
    EXPECT_EQ(t.routes[4].rule_count, 0u);
    EXPECT_EQ(t.n_rules, 5u);

    // header slots: the route's first, then the rules' in route order
    ASSERT_EQ(t.meta.n_match_hdrs, 3u);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(t.meta.hdr_name[0]), t.meta.hdr_name_len[0]), "x-a");
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(t.meta.hdr_name[1]), t.meta.hdr_name_len[1]), "x-role");
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(t.meta.hdr_name[2]), t.meta.hdr_name_len[2]), "x-block");
    // prefix lengths of routes and compiled rules alike
    std::set<uint16_t> lens(t.meta.prefix_lens, t.meta.prefix_lens + t.meta.n_prefix_lens);
    EXPECT_TRUE(lens.count(8)) << "/a/admin";
    EXPECT_TRUE(t.meta.flags & L7_GMF_RULE_PATH);

    const auto& rb = t.rule_bitmaps;
    ASSERT_EQ(rb.size(), static_cast<size_t>(L7_BMI_PER_SPACE));
    EXPECT_EQ(bits(rb[L7_BMI_METHOD(L7_M_GET)]), (std::set<uint32_t>{0, 1, 2, 3, 4}));
    EXPECT_EQ(bits(rb[L7_BMI_METHOD(L7_M_HEAD)]), (std::set<uint32_t>{0, 1, 2, 3, 4}));
    EXPECT_EQ(bits(rb[L7_BMI_METHOD(L7_M_POST)]), (std::set<uint32_t>{1, 2, 3, 4}));
    EXPECT_EQ(bits(rb[L7_BMI_METHOD(L7_M_OTHER)]), (std::set<uint32_t>{1, 2, 3, 4}));
    EXPECT_TRUE(bits(rb[L7_BMI_METHOD(L7_M_CONNECT)]).empty());
    EXPECT_EQ(bits(rb[L7_BMI_DENY]), (std::set<uint32_t>{1, 2, 3}));
    EXPECT_EQ(bits(rb[L7_BMI_HOST_ANY]), range(0, 5));
    EXPECT_EQ(bits(rb[L7_BMI_PATH_ANY]), (std::set<uint32_t>{0, 2, 3}));
    EXPECT_EQ(bits(rb[L7_BMI_HDR_ANY(0)]), range(0, 5));
    EXPECT_EQ(bits(rb[L7_BMI_HDR_ANY(1)]), (std::set<uint32_t>{0, 1, 3, 4}));
    EXPECT_EQ(bits(rb[L7_BMI_HDR_ANY(2)]), (std::set<uint32_t>{0, 1, 2, 4}));
    EXPECT_EQ(bits(rb[L7_BMI_HDR_PRESENT(2)]), (std::set<uint32_t>{3}));
    EXPECT_TRUE(bits(rb[L7_BMI_HDR_PRESENT(1)]).empty());
    for (uint32_t l = 0; l < L7_MAX_LISTENERS; l++)
        EXPECT_TRUE(bits(rb[L7_BMI_LISTENER(l)]).empty());
    // routes never see rule bits: every route is "any" for the rules' headers
    EXPECT_EQ(bits(t.bitmaps[L7_BMI_HDR_ANY(1)]), range(0, 5));
    EXPECT_EQ(bits(t.bitmaps[L7_BMI_HDR_ANY(2)]), range(0, 5));
    EXPECT_TRUE(bits(t.bitmaps[L7_BMI_DENY]).empty());

    const l7_match_val* v = find_string(t, L7_MK_PATH_PREFIX, 8, "/a/admin", false, L7_SPACE_RULES);
    ASSERT_NE(v, nullptr);
    EXPECT_EQ(bits(v->routes), (std::set<uint32_t>{1}));
    EXPECT_EQ(find_string(t, L7_MK_PATH_PREFIX, 8, "/a/admin"), nullptr) << "not in the route space";
    v = find_string(t, L7_MK_HDR_EXACT, 1, "guest", false, L7_SPACE_RULES);
    ASSERT_NE(v, nullptr);
    EXPECT_EQ(bits(v->routes), (std::set<uint32_t>{2}));
    v = find_string(t, L7_MK_PATH_EXACT, 0, "/b/ok", false, L7_SPACE_RULES);
    ASSERT_NE(v, nullptr);
    EXPECT_EQ(bits(v->routes), (std::set<uint32_t>{4}));
    // the rules of the user-space route were not compiled
    EXPECT_EQ(find_string(t, L7_MK_PATH_PREFIX, 10, "/u/secret/", false, L7_SPACE_RULES), nullptr);
    // the route space has its own prefix entry for "/a", the rule space none
    EXPECT_NE(find_string(t, L7_MK_PATH_PREFIX, 2, "/a"), nullptr);
    EXPECT_EQ(find_string(t, L7_MK_PATH_PREFIX, 2, "/a", false, L7_SPACE_RULES), nullptr);
}

// The per-generation limits on rules and the tables they share with routes.
TEST(CompilerTables, RbacLimitsPlaceTheRouteInUserSpace)
{
    auto with_rules = [](Route r, size_t n, const std::function<void(RbacRule&, size_t)>& shape) {
        r.rbac = Rbac{};
        for (size_t i = 0; i < n; i++) {
            RbacRule rule;
            rule.name = "k" + std::to_string(i);
            rule.action = i % 2 ? RbacRule::Action::Allow : RbacRule::Action::Deny;
            shape(rule, i);
            r.rbac->rules.push_back(rule);
        }
        return r;
    };
    const Policy base = load(route_block("r", "path_prefix = \"/a\""));
    ASSERT_EQ(base.routes.size(), 1u);

    {  // 1024 rule bits per generation: the 5th route of 256 rules does not fit
        Policy p = base;
        p.routes.clear();
        for (int i = 0; i < 5; i++) {
            Route r = base.routes[0];
            r.name = "r" + std::to_string(i);
            p.routes.push_back(with_rules(r, 256, [](RbacRule& rule, size_t j) {
                rule.when.methods = {j % 3 ? "GET" : "POST"};
            }));
        }
        PoolIds pools;
        const CompiledTables t = compile_policy(p, pools);
        for (int i = 0; i < 4; i++) {
            EXPECT_TRUE(t.placement[i].kernel) << i << ": " << t.placement[i].reason;
            EXPECT_EQ(t.routes[i].rule_first, 256u * i);
        }
        EXPECT_FALSE(t.placement[4].kernel);
        EXPECT_EQ(t.placement[4].reason, "more than 1024 RBAC rules in kernel routes");
        EXPECT_EQ(t.n_rules, 1024u);
    }
    {  // path-prefix lengths: routes take the 16 slots first
        Policy p = base;
        p.routes.clear();
        for (int i = 0; i < 16; i++) {
            Route r = base.routes[0];
            r.name = "len" + std::to_string(i);
            r.match.path = "/" + std::string(i + 1, 'p');
            p.routes.push_back(r);
        }
        Route r = base.routes[0];
        r.name = "rbac";
        p.routes.push_back(with_rules(r, 2, [](RbacRule& rule, size_t j) {
            rule.when.path_kind = PathMatch::Prefix;
            rule.when.path = j ? "/pp" : "/" + std::string(40, 'q');  // 3 is a route's length, 41 is not
        }));
        PoolIds pools;
        const CompiledTables t = compile_policy(p, pools);
        for (int i = 0; i < 16; i++)
            EXPECT_TRUE(t.placement[i].kernel) << t.placement[i].reason;
        EXPECT_FALSE(t.placement[16].kernel);
        EXPECT_EQ(t.placement[16].reason, "RBAC rule k0: more than 16 distinct path-prefix lengths");
    }
    {  // header names: routes take the 16 slots first
        Policy p = base;
        for (int i = 0; i < 16; i++)
            p.routes[0].match.headers.push_back({"x-h" + std::to_string(i), HeaderCondition::Kind::Present, ""});
        Route r = base.routes[0];
        r.name = "rbac";
        p.routes.push_back(with_rules(r, 2, [](RbacRule& rule, size_t j) {
            rule.when.headers.push_back({j ? "x-h3" : "x-other", HeaderCondition::Kind::Exact, "1"});
        }));
        PoolIds pools;
        const CompiledTables t = compile_policy(p, pools);
        EXPECT_TRUE(t.placement[0].kernel) << t.placement[0].reason;
        EXPECT_FALSE(t.placement[1].kernel);
        EXPECT_EQ(t.placement[1].reason, "RBAC rule k0: more than 16 distinct header names");
    }
    {  // one string in both spaces is two entries, not a collision
        Policy p = base;
        p.routes[0].match.path_kind = PathMatch::Exact;
        p.routes[0].match.path = "/a/x";
        p.routes[0] = with_rules(p.routes[0], 1, [](RbacRule& rule, size_t) {
            rule.when.path_kind = PathMatch::Exact;
            rule.when.path = "/a/x";
        });
        PoolIds pools;
        const CompiledTables t = compile_policy(p, pools);
        EXPECT_TRUE(t.placement[0].kernel) << t.placement[0].reason;
        EXPECT_TRUE(t.notes.empty());
        EXPECT_NE(find_string(t, L7_MK_PATH_EXACT, 0, "/a/x"), nullptr);
        EXPECT_NE(find_string(t, L7_MK_PATH_EXACT, 0, "/a/x", false, L7_SPACE_RULES), nullptr);
    }
    {  // rule strings that keep colliding: the route goes to user space
        Policy p = base;
        p.routes[0] = with_rules(p.routes[0], 2, [](RbacRule& rule, size_t j) {
            rule.when.path_kind = PathMatch::Exact;
            rule.when.path = j ? "/y" : "/x";
        });
        CompileOptions options;
        options.string_hash = [](uint64_t, std::string_view v, bool) { return uint64_t{v.size()}; };
        PoolIds pools;
        const CompiledTables t = compile(p, kSeed, pools.fn(), options);
        EXPECT_FALSE(t.placement[0].kernel);
        EXPECT_NE(t.placement[0].reason.find("an RBAC rule's condition \"/y\" collides with \"/x\""),
                  std::string::npos)
            << t.placement[0].reason;
        EXPECT_EQ(t.routes[0].flags & L7_RF_RBAC, 0u);
    }
}

// ---- ring hash and Maglev ------------------------------------------------------------

namespace {

constexpr const char* kHashClusters = R"(
[[cluster]]
name = "ring"
lb = "ring_hash"
hash_key = { header = "X-User" }
ring_min_size = 2048
endpoints = [ { address = "127.0.0.1:9101", weight = 2 }, { address = "127.0.0.1:9102" },
              { address = "[::1]:9103", weight = 3 } ]
[[cluster]]
name = "mag"
lb = "maglev"
hash_key = { source_ip = true }
maglev_table_size = 251
endpoints = [ { address = "127.0.0.1:9101" }, { address = "127.0.0.1:9104" } ]
[[cluster]]
name = "mag-default"
lb = "maglev"
hash_key = { header = "x-tenant" }
endpoints = [ { address = "127.0.0.1:9105" }, { address = "127.0.0.1:9106" }, { address = "127.0.0.1:9107" } ]
[[route]]
name = "ring"
cluster = "ring"
match = { path_prefix = "/ring" }
[[route]]
name = "tenant"
cluster = "app"
match = { headers = [ { name = "X-Tenant", exact = "gold" } ] }
[[route]]
name = "mag"
clusters = [ { name = "mag", weight = 1 }, { name = "mag-default", weight = 1 } ]
match = { path_prefix = "/mag" }
)";

size_t cluster_index(const Policy& p, const std::string& name)
{
    for (size_t i = 0; i < p.clusters.size(); i++)
        if (p.clusters[i].name == name)
            return i;
    ADD_FAILURE() << "no cluster " << name;
    return 0;
}

int match_header_index(const CompiledTables& t, const std::string& name)
{
    for (uint32_t h = 0; h < t.meta.n_match_hdrs; h++)
        if (std::string(reinterpret_cast<const char*>(t.meta.hdr_name[h]), t.meta.hdr_name_len[h]) == name)
            return static_cast<int>(h);
    return -1;
}

}  // namespace

TEST(CompilerTables, ConsistentHashClustersCarryTheReferenceTables)
{
    const Policy p = load(kHashClusters);
    PoolIds pools;
    const CompiledTables t = compile_policy(p, pools);
    ASSERT_EQ(t.placement.size(), 3u);
    for (const auto& pl : t.placement)
        EXPECT_TRUE(pl.kernel) << pl.reason;
    ASSERT_EQ(t.lb_tables.size(), 3u);

    // the route header and the hash key header share the match header space
    const int tenant = match_header_index(t, "x-tenant");
    const int user = match_header_index(t, "x-user");
    ASSERT_GE(tenant, 0);
    ASSERT_GE(user, 0);
    EXPECT_EQ(t.meta.n_match_hdrs, 2u);
    // no route looks at x-user: every route is in its "any" set
    EXPECT_EQ(bits(t.bitmaps[L7_BMI_HDR_ANY(user)]), range(0, 3));
    EXPECT_TRUE(bits(t.bitmaps[L7_BMI_HDR_PRESENT(user)]).empty());

    std::mt19937_64 rng(7);
    std::set<uint32_t> tables;
    for (const char* name : {"ring", "mag", "mag-default"}) {
        SCOPED_TRACE(name);
        const Cluster& pc = p.clusters[cluster_index(p, name)];
        const l7_cluster& c = t.clusters.at(cluster_index(p, name));
        std::string why;
        const auto ref = l7fast::lb::HashBalancer::build(pc, &why);
        ASSERT_TRUE(ref) << why;
        ASSERT_LT(c.table, t.lb_tables.size());
        EXPECT_TRUE(tables.insert(c.table).second) << "two clusters share a table";
        const l7_lb_table& tab = *t.lb_tables[c.table];
        EXPECT_EQ(c.n_endpoints, pc.endpoints.size());
        for (uint32_t e = 0; e < c.n_endpoints; e++)
            EXPECT_EQ(t.endpoints.at(c.first_endpoint + e).pool_id, pools.ids.at(pc.endpoints[e].address));
        if (pc.hash_key->kind == RequestKey::Kind::SourceIp) {
            EXPECT_EQ(c.key_kind, L7_LBK_SOURCE_IP);
        } else {
            EXPECT_EQ(c.key_kind, L7_LBK_HEADER);
            EXPECT_EQ(static_cast<int>(c.key_hdr), match_header_index(t, pc.hash_key->name));
        }
        if (const auto* ring = ref->ring()) {
            EXPECT_EQ(c.lb, L7_LB_RING_HASH);
            ASSERT_EQ(c.table_size, ring->size());
            EXPECT_GE(c.table_size, 2048u);
            for (size_t i = 0; i < ring->size(); i++) {
                ASSERT_EQ(tab.hash[i], ring->hashes()[i]) << i;
                ASSERT_EQ(tab.ep[i], ring->endpoints()[i]) << i;
            }
            for (size_t i = ring->size(); i < L7_LB_TABLE_RING; i++)
                ASSERT_EQ(tab.hash[i], 0u) << i;
        } else {
            const auto* m = ref->maglev();
            ASSERT_NE(m, nullptr);
            EXPECT_EQ(c.lb, L7_LB_MAGLEV);
            ASSERT_EQ(c.table_size, m->table_size());
            for (size_t i = 0; i < m->table_size(); i++)
                ASSERT_EQ(tab.ep[i], m->table()[i]) << i;
        }
        // the kernel's lookup over the compiled table chooses what the slow
        // path chooses, for keys as the slow path hashes them
        for (int k = 0; k < 2000; k++) {
            const uint64_t h = l7fast::lb::key_hash("user-" + std::to_string(rng()));
            const uint32_t kernel = c.lb == L7_LB_RING_HASH ? l7_lb_ring_pick(tab.hash, tab.ep, c.table_size, h)
                                                             : l7_lb_maglev_pick(tab.ep, c.table_size, h);
            ASSERT_EQ(std::optional<uint32_t>(kernel), ref->choose(h)) << k;
        }
    }
}

TEST(CompilerTables, ConsistentHashingThatStaysInUserSpace)
{
    // cookie keys and bounded load: user space, with the reason, and no table
    for (const std::string& extra :
         {std::string("hash_key = { cookie = \"s\" }\n"),
          std::string("hash_key = { header = \"x-user\" }\nhash_balance_factor = 150\n"),
          std::string("hash_key = { source_ip = true }\nring_min_size = 70000\nring_max_size = 70000\n")}) {
        SCOPED_TRACE(extra);
        const Policy p = load("[[cluster]]\nname = \"h\"\nlb = \"ring_hash\"\n" + extra +
                              "endpoints = [ { address = \"127.0.0.1:9201\" } ]\n"
                              "[[route]]\nname = \"h\"\ncluster = \"h\"\n");
        PoolIds pools;
        const CompiledTables t = compile_policy(p, pools);
        ASSERT_EQ(t.placement.size(), 1u);
        EXPECT_FALSE(t.placement[0].kernel);
        EXPECT_NE(t.placement[0].reason.find("cluster h chooses its endpoint in user space"), std::string::npos)
            << t.placement[0].reason;
        EXPECT_TRUE(t.lb_tables.empty());
        EXPECT_TRUE(pools.ids.empty()) << "no pool for an upstream only the slow path uses";
    }

    // more hashing clusters than tables: the first L7_MAX_LB_TABLES get one
    std::string body;
    for (int i = 0; i <= L7_MAX_LB_TABLES; i++) {
        const std::string n = std::to_string(i);
        body += "[[cluster]]\nname = \"h" + n + "\"\nlb = \"maglev\"\nmaglev_table_size = 7\n"
                "hash_key = { source_ip = true }\nendpoints = [ { address = \"127.0.0.1:" +
                std::to_string(9300 + i) + "\" } ]\n[[route]]\nname = \"r" + n + "\"\ncluster = \"h" + n +
                "\"\nmatch = { path_prefix = \"/" + n + "/\" }\n";
    }
    const Policy p = load(body);
    PoolIds pools;
    const CompiledTables t = compile_policy(p, pools);
    ASSERT_EQ(t.placement.size(), L7_MAX_LB_TABLES + 1u);
    EXPECT_EQ(t.lb_tables.size(), static_cast<size_t>(L7_MAX_LB_TABLES));
    for (int i = 0; i < L7_MAX_LB_TABLES; i++)
        EXPECT_TRUE(t.placement[i].kernel) << i << ": " << t.placement[i].reason;
    EXPECT_FALSE(t.placement[L7_MAX_LB_TABLES].kernel);
    EXPECT_NE(t.placement[L7_MAX_LB_TABLES].reason.find("more than 8 ring-hash / Maglev clusters"),
              std::string::npos)
        << t.placement[L7_MAX_LB_TABLES].reason;
}

TEST(CompilerTables, HashKeyHeaderBeyondTheMatchHeaders)
{
    std::string routes;
    for (int i = 0; i < L7_MAX_MATCH_HDRS; i++)
        routes += route_block("m" + std::to_string(i), "headers = [ { name = \"x-h" + std::to_string(i) +
                                                           "\", present = true } ]");
    const Policy p = load(routes +
                          "[[cluster]]\nname = \"h\"\nlb = \"ring_hash\"\nhash_key = { header = \"x-user\" }\n"
                          "endpoints = [ { address = \"127.0.0.1:9201\" } ]\n"
                          "[[route]]\nname = \"h\"\ncluster = \"h\"\n");
    PoolIds pools;
    const CompiledTables t = compile_policy(p, pools);
    ASSERT_EQ(t.placement.size(), L7_MAX_MATCH_HDRS + 1u);
    EXPECT_TRUE(t.placement[0].kernel) << t.placement[0].reason;
    EXPECT_FALSE(t.placement.back().kernel);
    EXPECT_NE(t.placement.back().reason.find("x-user is beyond the 16 distinct header names"), std::string::npos)
        << t.placement.back().reason;
}

// The two 401s of kernel JWT routes: stored once per generation with the
// slow path's bytes and shared by every JWT route; both or neither, when
// the answer table has room for both.
TEST(CompilerTables, JwtRoutesShareTheTwoKernel401sOrLeaveBothToUserSpace)
{
    const auto policy_with = [](int direct) {
        std::string s = R"(
[[jwt_provider]]
name = "idp"
algorithms = ["HS256"]
keys = [ { alg = "HS256", secret_base64url = "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3JldA" } ]
)";
        for (int i = 0; i < direct; i++)
            s += "[[route]]\nname = \"d" + std::to_string(i) + "\"\ndirect_response = { status = 204 }\n" +
                 "[route.match]\npath_exact = \"/d" + std::to_string(i) + "\"\n";
        s += route_block("jwt-a", "path_prefix = \"/a\"", "jwt = \"idp\"\n");
        s += route_block("jwt-b", "path_prefix = \"/b\"", "jwt = \"idp\"\n");
        return load(s);
    };
    for (const int direct : {3, L7_MAX_RESPONSES - 2, L7_MAX_RESPONSES - 1}) {
        const Policy p = policy_with(direct);
        PoolIds pools;
        const CompiledTables t = compile_policy(p, pools);
        const bool fits = direct + 2 <= L7_MAX_RESPONSES;
        ASSERT_EQ(t.responses.size(), static_cast<size_t>(direct + (fits ? 2 : 0))) << direct;
        for (int r = direct; r < direct + 2; r++) {
            ASSERT_TRUE(t.placement[r].kernel) << t.placement[r].reason;
            EXPECT_EQ(t.placement[r].kernel_unauthorized, fits) << direct;
            const l7_route& kr = t.routes[r];
            if (!fits) {
                EXPECT_EQ(kr.resp_no_token, L7_RESP_NONE);
                EXPECT_EQ(kr.resp_bad_token, L7_RESP_NONE);
                continue;
            }
            EXPECT_EQ(kr.resp_no_token, static_cast<uint32_t>(direct));
            EXPECT_EQ(kr.resp_bad_token, static_cast<uint32_t>(direct + 1));
            for (const auto& [at, presented] : {std::pair{kr.resp_no_token, false}, std::pair{kr.resp_bad_token, true}}) {
                const l7_response& resp = t.responses[at];
                EXPECT_EQ(resp.status, 401);
                EXPECT_EQ(std::string(reinterpret_cast<const char*>(resp.bytes), resp.len),
                          unauthorized(presented, false).bytes);
            }
        }
    }
}
