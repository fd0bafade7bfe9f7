// control/ConfigDump: the effective configuration `l7fastctl dump` and D-Bus
// DumpConfig show: structured, every route's match and actions in order,
// clusters with their endpoints' connections, JWT providers without secrets;
// and the text form of any JSON document.
#include "control/ConfigDump.hpp"

#include <gtest/gtest.h>

#include <string>

#include "auth/JsonReader.hpp"
#include "loader/PolicyLoader.hpp"

namespace l7fast {
extern const char* const kDefaultPolicy;  // packaging/policy.toml, embedded
}

using namespace l7fast;
using auth::json::Document;
using auth::json::Node;

namespace {

const char* kSecret = "bDdmYXN0LXB1YmxpYy1kZW1vLXNlY3JldDogcmVwbGFjZSBpdCwgYW55b25lIGNhbiBtaW50IHRva2VucyBmb3IgaXQ";
const char* kSecretDecoded = "l7fast-public-demo-secret";

policy::Policy default_policy()
{
    auto r = policy::PolicyLoader::load_string(std::string(kDefaultPolicy) + R"(
[[route]]
name = "limited"
cluster = "app"
timeout_ms = 2500
[route.match]
path_regex = "/v2/[a-z]+"
query = [ { name = "debug", present = true } ]
[route.rate_limit]
rate = 10
burst = 20
key = { header = "x-tenant" }
[route.response_headers]
remove = [ "server" ]
)",
                                                "policy.toml");
    EXPECT_TRUE(r.ok()) << r.error_text();
    return r.ok() ? r.policy() : policy::Policy{};
}

// The member `key` of object n, or a failed test.
const Node& at(const Document& d, const Node& n, std::string_view key)
{
    const Node* c = d.find(n, key);
    EXPECT_TRUE(c) << key;
    static const Node none;
    return c ? *c : none;
}

// Element i of array n.
const Node& item(const Document& d, const Node& n, size_t i)
{
    size_t k = 0;
    for (const Node& c : d.children(n))
        if (k++ == i)
            return c;
    ADD_FAILURE() << "no element " << i;
    static const Node none;
    return none;
}

size_t count(const Document& d, const Node& n)
{
    size_t k = 0;
    for ([[maybe_unused]] const Node& c : d.children(n))
        k++;
    return k;
}

}  // namespace

TEST(ConfigDump, EveryRouteClusterAndProviderStructuredWithoutSecrets)
{
    const policy::Policy pol = default_policy();
    control::DumpFacts facts;
    facts.generation = 3;
    facts.applied_unix = 1764600000;
    facts.placement.resize(pol.routes.size());
    facts.placement[2].kernel = false;
    facts.placement[2].reason = "jwt: HS256 tokens are verified in user space";
    facts.placement[0].kernel = true;
    control::EndpointStats ep;
    ep.kernel_idle = 4;
    ep.kernel_busy = 1;
    ep.user_idle = 2;
    facts.endpoints["127.0.0.1:9001"] = ep;
    const std::string json = control::config_json(pol, facts);

    // never the secret, in any form
    EXPECT_EQ(json.find(kSecret), std::string::npos);
    EXPECT_EQ(json.find(kSecretDecoded), std::string::npos);
    EXPECT_EQ(json.find("secret"), std::string::npos);

    Document d;
    ASSERT_TRUE(d.parse(json, {1 << 20, 64, 1 << 16})) << d.error() << " at " << d.error_offset();
    const Node& root = d.root();
    EXPECT_EQ(at(d, root, "generation").text, "3");
    EXPECT_EQ(at(d, root, "applied_unix").text, "1764600000");
    EXPECT_EQ(at(d, item(d, at(d, root, "listeners"), 0), "address").text, "127.0.0.1:8080");

    const Node& routes = at(d, root, "routes");
    ASSERT_EQ(count(d, routes), pol.routes.size());
    // private: jwt, then rbac (with its rule), then the request header, then forward
    const Node& priv = item(d, routes, 2);
    EXPECT_EQ(at(d, priv, "name").text, "private");
    EXPECT_EQ(at(d, priv, "placement").text, "user");
    EXPECT_EQ(at(d, priv, "reason").text, "jwt: HS256 tokens are verified in user space");
    const Node& steps = at(d, priv, "actions");
    ASSERT_EQ(count(d, steps), 4u);
    EXPECT_EQ(at(d, item(d, steps, 0), "step").text, "jwt");
    EXPECT_EQ(at(d, item(d, steps, 0), "provider").text, "demo");
    const Node& rbac = item(d, steps, 1);
    EXPECT_EQ(at(d, rbac, "step").text, "rbac");
    EXPECT_EQ(at(d, rbac, "default").text, "allow");
    const Node& rule = item(d, at(d, rbac, "rules"), 0);
    EXPECT_EQ(at(d, rule, "name").text, "read-only");
    EXPECT_EQ(at(d, rule, "action").text, "deny");
    EXPECT_EQ(item(d, at(d, at(d, rule, "when"), "methods"), 0).text, "DELETE");
    const Node& add = item(d, at(d, at(d, item(d, steps, 2), "mutation"), "add"), 0);
    EXPECT_EQ(at(d, add, "name").text, "x-l7fast-route");
    EXPECT_EQ(at(d, add, "value").text, "private");
    EXPECT_EQ(at(d, item(d, steps, 3), "step").text, "forward");
    EXPECT_EQ(at(d, item(d, at(d, item(d, steps, 3), "clusters"), 0), "cluster").text, "app");

    // limited: every condition kind and the rate limit's key
    const Node& lim = item(d, routes, pol.routes.size() - 1);
    const Node& match = at(d, lim, "match");
    EXPECT_EQ(at(d, match, "summary").text, "regex=/v2/[a-z]+ query:debug");
    EXPECT_EQ(at(d, at(d, match, "path"), "kind").text, "regex");
    EXPECT_EQ(at(d, at(d, match, "path"), "value").text, "/v2/[a-z]+");
    EXPECT_EQ(at(d, item(d, at(d, match, "query"), 0), "name").text, "debug");
    const Node& lsteps = at(d, lim, "actions");
    ASSERT_EQ(count(d, lsteps), 3u);
    const Node& rl = item(d, lsteps, 0);
    EXPECT_EQ(at(d, rl, "step").text, "rate_limit");
    EXPECT_EQ(at(d, rl, "rate").text, "10");
    EXPECT_EQ(at(d, rl, "burst").text, "20");
    EXPECT_EQ(at(d, at(d, rl, "key"), "from").text, "header");
    EXPECT_EQ(at(d, at(d, rl, "key"), "name").text, "x-tenant");
    EXPECT_EQ(at(d, item(d, lsteps, 1), "timeout_ms").text, "2500");
    EXPECT_EQ(item(d, at(d, at(d, item(d, lsteps, 2), "mutation"), "remove"), 0).text, "server");

    // api: a weighted split
    const Node& split = at(d, item(d, at(d, item(d, routes, 4), "actions"), 0), "clusters");
    EXPECT_EQ(at(d, item(d, split, 1), "cluster").text, "canary");
    EXPECT_EQ(at(d, item(d, split, 1), "weight").text, "10");

    // clusters: the ring hash key, endpoints with the connections known
    const Node& clusters = at(d, root, "clusters");
    const Node& sessions = item(d, clusters, 2);
    EXPECT_EQ(at(d, sessions, "lb").text, "ring_hash");
    EXPECT_EQ(at(d, at(d, sessions, "hash_key"), "name").text, "x-user");
    const Node& e0 = item(d, at(d, item(d, clusters, 0), "endpoints"), 0);
    EXPECT_EQ(at(d, at(d, e0, "connections"), "kernel_idle").text, "4");
    EXPECT_EQ(at(d, at(d, e0, "connections"), "user_idle").text, "2");
    EXPECT_FALSE(d.find(item(d, at(d, item(d, clusters, 0), "endpoints"), 1), "connections"));

    // the provider: issuer, algorithms, the key's alg, no material
    const Node& demo = item(d, at(d, root, "jwt_providers"), 0);
    EXPECT_EQ(at(d, demo, "issuer").text, "l7fast-demo");
    const Node& key = item(d, at(d, demo, "keys"), 0);
    EXPECT_EQ(at(d, key, "alg").text, "HS256");
    EXPECT_EQ(count(d, key), 3u);  // kid, alg, where
    EXPECT_EQ(at(d, at(d, demo, "from"), "name").text, "authorization");
}

// A cluster's health check and outlier detection, between the load balancer's
// keys and the endpoints; defaults written out, "200-399" when no status is
// listed, nothing for a cluster without them.
TEST(ConfigDump, HealthCheckAndOutlierDetection)
{
    auto r = policy::PolicyLoader::load_string(R"([[listener]]
name = "web"
address = "127.0.0.1:8080"
[[cluster]]
name = "app"
endpoints = [ { address = "127.0.0.1:9001" } ]
health_check = { path = "/healthz", host = "app.internal", interval_ms = 2000, timeout_ms = 500, healthy_threshold = 1, unhealthy_threshold = 4, expected_status = [200, 204] }
outlier_detection = { consecutive_5xx = 3, consecutive_connect_failures = 0, base_ejection_ms = 1000, max_ejection_ms = 8000, max_ejection_percent = 34 }
[[cluster]]
name = "sticky"
lb = "maglev"
hash_key = { source_ip = true }
hash_balance_factor = 150
endpoints = [ { address = "127.0.0.1:9002" } ]
health_check = {}
outlier_detection = {}
[[cluster]]
name = "plain"
endpoints = [ { address = "127.0.0.1:9003" } ]
)",
                                               "t.toml");
    ASSERT_TRUE(r.ok()) << r.error_text();
    const std::string json = control::config_json(r.policy(), control::DumpFacts{});
    const size_t from = json.find("\"clusters\":");
    const size_t to = json.find(",\"jwt_providers\":");
    ASSERT_NE(from, std::string::npos) << json;
    ASSERT_NE(to, std::string::npos) << json;
    EXPECT_EQ(json.substr(from, to - from),
              "\"clusters\":["
              "{\"name\":\"app\",\"lb\":\"round_robin\","
              "\"health_check\":{\"path\":\"/healthz\",\"host\":\"app.internal\",\"interval_ms\":2000,"
              "\"timeout_ms\":500,\"healthy_threshold\":1,\"unhealthy_threshold\":4,\"expected_status\":[200,204]},"
              "\"outlier_detection\":{\"consecutive_5xx\":3,\"consecutive_connect_failures\":0,"
              "\"base_ejection_ms\":1000,\"max_ejection_ms\":8000,\"max_ejection_percent\":34},"
              "\"endpoints\":[{\"address\":\"127.0.0.1:9001\",\"weight\":1}],\"where\":\"t.toml:4:1\"},"
              "{\"name\":\"sticky\",\"lb\":\"maglev\",\"hash_key\":{\"from\":\"source_ip\"},"
              "\"maglev_table_size\":65537,\"hash_balance_factor\":150,"
              "\"health_check\":{\"path\":\"/\",\"interval_ms\":5000,\"timeout_ms\":1000,\"healthy_threshold\":2,"
              "\"unhealthy_threshold\":3,\"expected_status\":\"200-399\"},"
              "\"outlier_detection\":{\"consecutive_5xx\":5,\"consecutive_connect_failures\":5,"
              "\"base_ejection_ms\":30000,\"max_ejection_ms\":300000,\"max_ejection_percent\":50},"
              "\"endpoints\":[{\"address\":\"127.0.0.1:9002\",\"weight\":1}],\"where\":\"t.toml:9:1\"},"
              "{\"name\":\"plain\",\"lb\":\"round_robin\","
              "\"endpoints\":[{\"address\":\"127.0.0.1:9003\",\"weight\":1}],\"where\":\"t.toml:17:1\"}"
              "]");

    // and the document stays valid JSON with the new members in it
    Document d;
    ASSERT_TRUE(d.parse(json, {1 << 20, 64, 1 << 16})) << d.error() << " at " << d.error_offset();
    const Node& app = item(d, at(d, d.root(), "clusters"), 0);
    EXPECT_EQ(item(d, at(d, at(d, app, "health_check"), "expected_status"), 1).text, "204");
    EXPECT_EQ(at(d, at(d, app, "outlier_detection"), "max_ejection_percent").text, "34");
    const Node& sticky = item(d, at(d, d.root(), "clusters"), 1);
    EXPECT_EQ(at(d, at(d, sticky, "health_check"), "expected_status").text, "200-399");
    EXPECT_FALSE(d.find(at(d, sticky, "health_check"), "host")) << "no host: the endpoint's address is sent";
    const Node& plain = item(d, at(d, d.root(), "clusters"), 2);
    EXPECT_FALSE(d.find(plain, "health_check"));
    EXPECT_FALSE(d.find(plain, "outlier_detection"));
}

TEST(ConfigDump, TextFormOfAnyJson)
{
    std::string out, error;
    ASSERT_TRUE(control::render_json_as_text(
        R"({"a":1,"b":"x y","c":{"d":true,"e":[]},"f":[{"g":""},"h"],"i":{}})", &out, &error))
        << error;
    EXPECT_EQ(out,
              "a: 1\n"
              "b: x y\n"
              "c:\n"
              "  d: true\n"
              "  e: []\n"
              "f:\n"
              "  -\n"
              "    g: \"\"\n"
              "  - h\n"
              "i: {}\n");
    EXPECT_FALSE(control::render_json_as_text("{\"a\":", &out, &error));
    EXPECT_FALSE(error.empty());
}
