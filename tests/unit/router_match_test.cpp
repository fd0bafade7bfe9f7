// Router: the reference semantics of matching (docs/policy.md, "Matching").
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "loader/PolicyLoader.hpp"
#include "semantics/Router.hpp"

using namespace l7fast::policy;

namespace {

constexpr const char* kPrelude = R"(
[[listener]]
name = "web"
address = "127.0.0.1:8080"
[[listener]]
name = "admin"
address = "127.0.0.1:8081"
[[cluster]]
name = "app"
endpoints = [ { address = "127.0.0.1:9001" } ]
)";

Router router_for(const std::string& routes)
{
    PolicyLoadResult r = PolicyLoader::load_string(std::string(kPrelude) + routes, "router.toml");
    if (!r.ok())
        ADD_FAILURE() << r.error_text();
    return Router(std::move(r).policy());
}

struct Request {
    std::string method = "GET";
    std::string target = "/";
    std::vector<std::pair<std::string, std::string>> headers{};
    uint32_t listener = 0;
};

std::optional<uint32_t> route(const Router& router, const Request& rq)
{
    std::vector<HeaderField> fields;
    for (const auto& [n, v] : rq.headers)
        fields.push_back({n, v});
    return router.route({rq.method, rq.target, fields, rq.listener});
}

}  // namespace

TEST(RouterMatch, EmptyMatchTakesEveryRequest)
{
    Router r = router_for("[[route]]\nname = \"all\"\ncluster = \"app\"\n");
    EXPECT_EQ(route(r, {}), 0u);
    EXPECT_EQ(route(r, {.method = "PURGE", .target = "*"}), 0u);
    EXPECT_EQ(route(r, {.listener = 1}), 0u);
}

TEST(RouterMatch, NoRouteWhenNothingApplies)
{
    Router r = router_for("[[route]]\nname = \"a\"\ncluster = \"app\"\n[route.match]\npath_exact = \"/a\"\n");
    EXPECT_EQ(route(r, {.target = "/b"}), std::nullopt);
    Router empty = router_for("");
    EXPECT_EQ(route(empty, {}), std::nullopt);
}

TEST(RouterMatch, FirstApplicableRouteWins)
{
    Router r = router_for(R"(
[[route]]
name = "narrow"
cluster = "app"
[route.match]
path_prefix = "/api/v1/"
[[route]]
name = "wide"
cluster = "app"
[route.match]
path_prefix = "/api/"
[[route]]
name = "narrower-but-later"
cluster = "app"
[route.match]
path_exact = "/api/v1/users"
)");
    EXPECT_EQ(route(r, {.target = "/api/v1/users"}), 0u);
    EXPECT_EQ(route(r, {.target = "/api/v2/users"}), 1u);
    EXPECT_TRUE(r.matches(2, {"GET", "/api/v1/users", {}, 0}));
}

TEST(RouterMatch, ListenersRestrictWhereARouteApplies)
{
    Router r = router_for(R"(
[[route]]
name = "admin-only"
listeners = ["admin"]
cluster = "app"
[[route]]
name = "rest"
cluster = "app"
)");
    EXPECT_EQ(route(r, {.listener = 1}), 0u);
    EXPECT_EQ(route(r, {.listener = 0}), 1u);
}

TEST(RouterMatch, MethodsAreCaseSensitiveTokens)
{
    Router r = router_for(R"(
[[route]]
name = "read"
cluster = "app"
[route.match]
method = ["GET", "HEAD", "PURGE"]
)");
    EXPECT_EQ(route(r, {.method = "GET"}), 0u);
    EXPECT_EQ(route(r, {.method = "HEAD"}), 0u);
    EXPECT_EQ(route(r, {.method = "PURGE"}), 0u);
    EXPECT_EQ(route(r, {.method = "get"}), std::nullopt);
    EXPECT_EQ(route(r, {.method = "POST"}), std::nullopt);
}

TEST(RouterMatch, ConnectIsNeverRouted)
{
    Router r = router_for("[[route]]\nname = \"all\"\ncluster = \"app\"\n");
    EXPECT_EQ(route(r, {.method = "CONNECT", .target = "/"}), std::nullopt);
    EXPECT_TRUE(r.matches(0, {"CONNECT", "/", {}, 0}));  // the route itself admits it
}

TEST(RouterMatch, HostIgnoresPortAndCase)
{
    Router r = router_for(R"(
[[route]]
name = "example"
cluster = "app"
[route.match]
host = "Example.COM"
[[route]]
name = "v6"
cluster = "app"
[route.match]
host = "[::1]"
)");
    EXPECT_EQ(route(r, {.headers = {{"Host", "example.com"}}}), 0u);
    EXPECT_EQ(route(r, {.headers = {{"host", "EXAMPLE.com:8080"}}}), 0u);
    EXPECT_EQ(route(r, {.headers = {{"HOST", "example.com:"}}}), 0u);
    EXPECT_EQ(route(r, {.headers = {{"Host", "[::1]:8080"}}}), 1u);
    EXPECT_EQ(route(r, {.headers = {{"Host", "[::1]"}}}), 1u);
    EXPECT_EQ(route(r, {.headers = {{"Host", "example.com.evil"}}}), std::nullopt);
    EXPECT_EQ(route(r, {.headers = {{"Host", "www.example.com"}}}), std::nullopt);
    EXPECT_EQ(route(r, {.headers = {{"Host", ""}}}), std::nullopt);
    EXPECT_EQ(route(r, {}), std::nullopt) << "no Host field: no host condition holds";
    EXPECT_EQ(route(r, {.headers = {{"X-Host", "example.com"}}}), std::nullopt);
}

TEST(RouterMatch, RequestHostNormalisation)
{
    std::vector<HeaderField> h{{"Accept", "*/*"}, {"hOsT", "A.B.c:80"}};
    EXPECT_EQ(request_host(h), "a.b.c");
    std::vector<HeaderField> v6{{"Host", "[FE80::1]:443"}};
    EXPECT_EQ(request_host(v6), "[fe80::1]");
    EXPECT_EQ(request_host({}), std::nullopt);
}

TEST(RouterMatch, PathExactIsByteEqualityWithoutQuery)
{
    Router r = router_for(R"(
[[route]]
name = "health"
cluster = "app"
[route.match]
path_exact = "/healthz"
)");
    EXPECT_EQ(route(r, {.target = "/healthz"}), 0u);
    EXPECT_EQ(route(r, {.target = "/healthz?verbose=1"}), 0u);
    EXPECT_EQ(route(r, {.target = "/healthz?"}), 0u);
    EXPECT_EQ(route(r, {.target = "/healthz/"}), std::nullopt);
    EXPECT_EQ(route(r, {.target = "/Healthz"}), std::nullopt);
    EXPECT_EQ(route(r, {.target = "/%68ealthz"}), std::nullopt) << "no percent-decoding";
    EXPECT_EQ(request_path("/a?b?c"), "/a");
}

TEST(RouterMatch, PathPrefixIsBytePrefixNotSegmentAware)
{
    Router r = router_for(R"(
[[route]]
name = "api"
cluster = "app"
[route.match]
path_prefix = "/api"
)");
    EXPECT_EQ(route(r, {.target = "/api"}), 0u);
    EXPECT_EQ(route(r, {.target = "/api/users"}), 0u);
    EXPECT_EQ(route(r, {.target = "/apix"}), 0u);
    EXPECT_EQ(route(r, {.target = "/ap"}), std::nullopt);
    EXPECT_EQ(route(r, {.target = "/ap?i"}), std::nullopt) << "the query is not part of the path";
    EXPECT_EQ(route(r, {.target = "/API"}), std::nullopt);
}

TEST(RouterMatch, HeaderPresentIgnoresNameCaseAndValue)
{
    Router r = router_for(R"(
[[route]]
name = "debug"
cluster = "app"
[route.match]
headers = [ { name = "X-Debug", present = true } ]
)");
    EXPECT_EQ(route(r, {.headers = {{"x-debug", ""}}}), 0u);
    EXPECT_EQ(route(r, {.headers = {{"X-DEBUG", "anything"}}}), 0u);
    EXPECT_EQ(route(r, {.headers = {{"x-debug", "1"}, {"x-debug", "2"}}}), 0u);
    EXPECT_EQ(route(r, {.headers = {{"x-debugger", "1"}}}), std::nullopt);
    EXPECT_EQ(route(r, {}), std::nullopt);
}

TEST(RouterMatch, HeaderExactComparesTheCombinedValue)
{
    Router r = router_for(R"(
[[route]]
name = "canary"
cluster = "app"
[route.match]
headers = [ { name = "x-canary", exact = "1" } ]
[[route]]
name = "pair"
cluster = "app"
[route.match]
headers = [ { name = "x-tag", exact = "a, b" } ]
)");
    EXPECT_EQ(route(r, {.headers = {{"X-Canary", "1"}}}), 0u);
    EXPECT_EQ(route(r, {.headers = {{"x-canary", "01"}}}), std::nullopt);
    EXPECT_EQ(route(r, {.headers = {{"x-canary", "1"}, {"x-canary", "1"}}}), std::nullopt)
        << "two field lines are the value \"1, 1\"";
    EXPECT_EQ(route(r, {.headers = {{"x-tag", "a"}, {"X-Tag", "b"}}}), 1u);
    EXPECT_EQ(route(r, {.headers = {{"x-tag", "a, b"}}}), 1u);
    EXPECT_EQ(route(r, {.headers = {{"x-tag", "b"}, {"x-tag", "a"}}}), std::nullopt) << "order matters";
    EXPECT_EQ(route(r, {.headers = {{"x-tag", "A, B"}}}), std::nullopt) << "values are case-sensitive";
}

TEST(RouterMatch, AllConditionsMustHold)
{
    Router r = router_for(R"(
[[route]]
name = "all"
listeners = ["web"]
cluster = "app"
[route.match]
method = "POST"
host = "api.example.com"
path_prefix = "/v1/"
headers = [ { name = "x-a", exact = "1" }, { name = "x-b", present = true } ]
)");
    const Request ok{.method = "POST",
                     .target = "/v1/x",
                     .headers = {{"Host", "api.example.com"}, {"x-a", "1"}, {"x-b", ""}},
                     .listener = 0};
    EXPECT_EQ(route(r, ok), 0u);
    Request rq = ok;
    rq.listener = 1;
    EXPECT_EQ(route(r, rq), std::nullopt);
    rq = ok;
    rq.method = "GET";
    EXPECT_EQ(route(r, rq), std::nullopt);
    rq = ok;
    rq.headers[0].second = "example.com";
    EXPECT_EQ(route(r, rq), std::nullopt);
    rq = ok;
    rq.target = "/v2/x";
    EXPECT_EQ(route(r, rq), std::nullopt);
    rq = ok;
    rq.headers.pop_back();
    EXPECT_EQ(route(r, rq), std::nullopt);
    rq = ok;
    rq.headers[1].second = "2";
    EXPECT_EQ(route(r, rq), std::nullopt);
}

// ---- upstream choice ----------------------------------------------------------

TEST(RouterChoice, WeightedClustersUseCumulativeWeights)
{
    Route route;
    route.clusters = {{"a", 90}, {"b", 0}, {"c", 10}};
    // x = random % 100; a: x < 90, b never (cum stays 90), c: 90 <= x < 100
    EXPECT_EQ(Router::choose_cluster(route, 0), 0u);
    EXPECT_EQ(Router::choose_cluster(route, 89), 0u);
    EXPECT_EQ(Router::choose_cluster(route, 90), 2u);
    EXPECT_EQ(Router::choose_cluster(route, 99), 2u);
    EXPECT_EQ(Router::choose_cluster(route, 100), 0u);
    EXPECT_EQ(Router::choose_cluster(route, 4294967295u), 2u);  // 4294967295 % 100 = 95
    route.clusters = {{"only", 7}};
    EXPECT_EQ(Router::choose_cluster(route, 12345), 0u);
    route.clusters = {{"a", 0}, {"b", 0}};
    EXPECT_EQ(Router::choose_cluster(route, 12345), 0u) << "weights summing to 0: first cluster, as in the kernel";
    route.clusters.clear();
    EXPECT_EQ(Router::choose_cluster(route, 1), std::nullopt);
}

TEST(RouterChoice, EndpointsRoundRobinOrWeighted)
{
    Cluster c;
    c.endpoints.resize(3);
    for (uint64_t n = 0; n < 7; n++)
        EXPECT_EQ(Router::choose_endpoint(c, n, 999), n % 3);

    c.lb = LbPolicy::Weighted;
    c.endpoints[0].weight = 3;
    c.endpoints[1].weight = 0;
    c.endpoints[2].weight = 1;
    EXPECT_EQ(Router::choose_endpoint(c, 0, 0), 0u);
    EXPECT_EQ(Router::choose_endpoint(c, 0, 2), 0u);
    EXPECT_EQ(Router::choose_endpoint(c, 0, 3), 2u);
    EXPECT_EQ(Router::choose_endpoint(c, 0, 4), 0u);

    for (Endpoint& e : c.endpoints)
        e.weight = 0;
    EXPECT_EQ(Router::choose_endpoint(c, 5, 0), 2u) << "all weights 0: round robin, as in the kernel";
    c.endpoints.clear();
    EXPECT_EQ(Router::choose_endpoint(c, 0, 0), std::nullopt);
}
