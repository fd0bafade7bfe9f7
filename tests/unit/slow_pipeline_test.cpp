// The slow path's request pipeline (proxy/Pipeline.hpp): per-policy state
// built once (verifiers, hash tables, rate limiters surviving a reload),
// the stage order match → JWT → RBAC → rate limit → direct/forward, the
// upstream head, endpoint choice and connect-retry order; and the GetStats
// additions that report what the pipeline answered.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>
#include <openssl/evp.h>
#include <systemd/sd-bus.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <set>
#include <string>

#include "auth/Base64Url.hpp"
#include "control/BusCodec.hpp"
#include "control/CtlRender.hpp"
#include "lb/KeyHash.hpp"
#include "semantics/Router.hpp"
#include "proxy/Pipeline.hpp"
#include "proxy/ProxyServer.hpp"

using namespace l7fast;
using namespace l7fast::proxy;
using Clock = std::chrono::system_clock;

namespace {

const std::string kSecret = "0123456789abcdef0123456789abcdef";  // 32 bytes: HS256's minimum

std::string hs256(const std::string& payload_json, const std::string& secret = kSecret)
{
    const std::string input = auth::base64url_encode(R"({"alg":"HS256","typ":"JWT"})") + "." +
                              auth::base64url_encode(payload_json);
    unsigned char mac[64];
    size_t n = 0;
    EXPECT_NE(EVP_Q_mac(nullptr, "HMAC", nullptr, "SHA256", nullptr, secret.data(), secret.size(),
                        reinterpret_cast<const unsigned char*>(input.data()), input.size(), mac, sizeof(mac), &n),
              nullptr);
    return input + "." + auth::base64url_encode(std::string_view(reinterpret_cast<char*>(mac), n));
}

int64_t now_s() { return std::chrono::duration_cast<std::chrono::seconds>(Clock::now().time_since_epoch()).count(); }

policy::SocketAddress addr(const char* text)
{
    std::string why;
    auto a = policy::SocketAddress::parse(text, &why);
    EXPECT_TRUE(a) << why;
    return *a;
}

policy::Policy base_policy()
{
    policy::Policy p;
    p.listeners.push_back({"web", addr("127.0.0.1:8080"), {}});
    policy::Cluster app;
    app.name = "app";
    app.endpoints = {{addr("127.0.0.1:9001"), 1}, {addr("127.0.0.1:9002"), 1}, {addr("127.0.0.1:9003"), 1}};
    p.clusters.push_back(app);

    policy::JwtProvider idp;
    idp.name = "idp";
    idp.issuer = "https://idp";
    idp.algorithms = {"HS256"};
    idp.keys.push_back({"", "HS256", kSecret, "", {}});
    idp.forward_claims = {{"sub", "x-user"}, {"groups", "x-groups"}};
    p.jwt_providers.push_back(idp);
    return p;
}

policy::Route route(const std::string& name)
{
    policy::Route r;
    r.name = name;
    r.clusters = {{"app", 1}};
    return r;
}

std::shared_ptr<PolicyRuntime> runtime(policy::Policy p, const PolicyRuntime* previous = nullptr)
{
    auto rt = std::make_shared<PolicyRuntime>();
    rt->router = std::make_shared<policy::Router>(std::move(p));
    auto e = build_pipeline_state(*rt, previous);
    EXPECT_FALSE(e) << e->str();
    return rt;
}

// A request with its own storage for the header fields.
struct Req {
    std::vector<std::pair<std::string, std::string>> lines;
    std::vector<policy::HeaderField> fields;
    policy::RequestView view;

    Req(std::string method, std::string target, std::vector<std::pair<std::string, std::string>> hdrs)
        : lines(std::move(hdrs)), method_(std::move(method)), target_(std::move(target))
    {
        lines.insert(lines.begin(), {"Host", "test"});
        for (const auto& [k, v] : lines)
            fields.push_back({k, v});
        view.method = method_;
        view.target = target_;
        view.headers = fields;
        view.client_family = AF_INET;
        view.client_ip = {10, 1, 2, 3};
    }

private:
    std::string method_, target_;
};

std::string bearer(const std::string& payload) { return "Bearer " + hs256(payload); }

std::string valid_payload(const std::string& extra = "")
{
    return R"({"iss":"https://idp","sub":"alice","exp":)" + std::to_string(now_s() + 600) + extra + "}";
}

}  // namespace

// ---- client address ---------------------------------------------------------------

TEST(SlowPipeline, ClientAddressFromTheConnectionKey)
{
    policy::RequestView v;
    l7_conn_key k{};
    k.family = AF_INET;
    inet_pton(AF_INET, "192.0.2.7", &k.client_ip[0]);
    inet_pton(AF_INET, "127.0.0.1", &k.server_ip[0]);
    set_client_address(v, k);
    EXPECT_EQ(v.client_family, AF_INET);
    EXPECT_EQ((std::array<uint8_t, 4>{v.client_ip[0], v.client_ip[1], v.client_ip[2], v.client_ip[3]}),
              (std::array<uint8_t, 4>{192, 0, 2, 7}));

    l7_conn_key m{};
    m.family = AF_INET6;
    inet_pton(AF_INET6, "::ffff:198.51.100.9", m.client_ip);
    set_client_address(v, m);
    EXPECT_EQ(v.client_family, AF_INET);
    EXPECT_EQ(v.client_ip[0], 198);
    EXPECT_EQ(v.client_ip[3], 9);
    EXPECT_EQ(v.client_ip[4], 0);

    l7_conn_key six{};
    six.family = AF_INET6;
    inet_pton(AF_INET6, "2001:db8::1", six.client_ip);
    set_client_address(v, six);
    EXPECT_EQ(v.client_family, AF_INET6);
    EXPECT_EQ(v.client_ip[0], 0x20);
    EXPECT_EQ(v.client_ip[15], 1);

    // a source condition sees it
    policy::Cidr c = *policy::Cidr::parse("2001:db8::/32", nullptr);
    EXPECT_TRUE(c.contains(v.client_family, v.client_ip.data()));
}

// ---- per-policy state ----------------------------------------------------------------

TEST(SlowPipeline, BadProviderFailsTheBuildWithItsLocation)
{
    policy::Policy p = base_policy();
    p.jwt_providers[0].keys.clear();  // no keys at all
    p.jwt_providers[0].where = {"policy.toml", 12, 1};
    auto rt = std::make_shared<PolicyRuntime>();
    rt->router = std::make_shared<policy::Router>(std::move(p));
    const std::string e = build_pipeline_state(*rt, nullptr).value_or(policy::PolicyError{}).str();
    EXPECT_EQ(e.rfind("policy.toml:12:1: jwt_provider \"idp\": ", 0), 0u) << e;
}

TEST(SlowPipeline, MissingJwksFileFailsTheBuild)
{
    policy::Policy p = base_policy();
    p.jwt_providers[0].jwks_file = "/nonexistent/l7fast-test.jwks";
    auto rt = std::make_shared<PolicyRuntime>();
    rt->router = std::make_shared<policy::Router>(std::move(p));
    const std::string e = build_pipeline_state(*rt, nullptr).value_or(policy::PolicyError{}).str();
    EXPECT_NE(e.find("jwt_provider \"idp\""), std::string::npos) << e;
    EXPECT_NE(e.find("/nonexistent/l7fast-test.jwks"), std::string::npos) << e;
}

TEST(SlowPipeline, BadHashClusterFailsTheBuild)
{
    policy::Policy p = base_policy();
    p.clusters[0].lb = policy::LbPolicy::RingHash;
    p.clusters[0].hash_balance_factor = 50;
    p.clusters[0].where = {"policy.toml", 3, 1};
    auto rt = std::make_shared<PolicyRuntime>();
    rt->router = std::make_shared<policy::Router>(std::move(p));
    const std::string e = build_pipeline_state(*rt, nullptr).value_or(policy::PolicyError{}).str();
    EXPECT_EQ(e.rfind("policy.toml:3:1: cluster \"app\": ", 0), 0u) << e;
}

TEST(SlowPipeline, StateIsBuiltOncePerPolicy)
{
    policy::Policy p = base_policy();
    policy::Cluster ring = p.clusters[0];
    ring.name = "ring";
    ring.lb = policy::LbPolicy::RingHash;
    ring.hash_key = policy::RequestKey{policy::RequestKey::Kind::Header, "x-user"};
    p.clusters.push_back(ring);
    auto a = route("a");
    a.jwt = "idp";
    a.rate_limit = policy::RateLimit{10, 10, std::nullopt, 100};
    auto b = route("b");
    b.clusters = {{"ring", 1}, {"app", 3}};
    p.routes = {a, b};
    auto rt = runtime(p);
    ASSERT_EQ(rt->verifiers.size(), 1u);
    ASSERT_EQ(rt->balancers.size(), 2u);
    EXPECT_EQ(rt->balancers[0], nullptr);
    ASSERT_NE(rt->balancers[1], nullptr);
    EXPECT_EQ(rt->balancers[1]->policy(), policy::LbPolicy::RingHash);
    ASSERT_EQ(rt->limiters.size(), 2u);
    EXPECT_NE(rt->limiters[0], nullptr);
    EXPECT_EQ(rt->limiters[1], nullptr);
    EXPECT_EQ(rt->route_jwt[0], std::optional<size_t>(0));
    EXPECT_EQ(rt->route_jwt[1], std::nullopt);
    EXPECT_EQ(rt->route_clusters[1], (std::vector<size_t>{1, 0}));
}

TEST(SlowPipeline, RateLimitBucketsSurviveAReloadWhenNameAndLimitAreUnchanged)
{
    policy::Policy p = base_policy();
    auto keep = route("keep");
    keep.rate_limit = policy::RateLimit{1, 2, std::nullopt, 100};
    auto change = route("change");
    change.rate_limit = policy::RateLimit{1, 2, std::nullopt, 100};
    auto gone = route("gone");
    gone.rate_limit = policy::RateLimit{1, 2, std::nullopt, 100};
    p.routes = {keep, change, gone};
    auto old_rt = runtime(p);

    // spend "keep"'s budget in the old generation
    const uint64_t t = 1'000'000'000;
    EXPECT_EQ(old_rt->limiters[0]->take(std::nullopt, t), 0u);
    EXPECT_EQ(old_rt->limiters[0]->take(std::nullopt, t), 0u);
    EXPECT_GT(old_rt->limiters[0]->take(std::nullopt, t), 0u);

    policy::Policy q = base_policy();
    auto moved_keep = keep;  // same name and limit, now second in order
    auto changed = change;
    changed.rate_limit->burst = 3;
    auto fresh = route("fresh");
    fresh.rate_limit = policy::RateLimit{1, 2, std::nullopt, 100};
    q.routes = {changed, moved_keep, fresh};
    auto new_rt = runtime(q, old_rt.get());
    EXPECT_EQ(new_rt->limiters[1], old_rt->limiters[0]);
    EXPECT_GT(new_rt->limiters[1]->take(std::nullopt, t), 0u) << "the budget spent before the reload stays spent";
    EXPECT_NE(new_rt->limiters[0], old_rt->limiters[1]);
    EXPECT_EQ(new_rt->limiters[0]->burst(), 3u);
    EXPECT_NE(new_rt->limiters[2], nullptr);
    EXPECT_NE(new_rt->limiters[2], old_rt->limiters[2]);

    // a key change is a different limit
    policy::Policy r = base_policy();
    auto keyed = keep;
    keyed.rate_limit->key = policy::RequestKey{policy::RequestKey::Kind::SourceIp, ""};
    r.routes = {keyed};
    auto keyed_rt = runtime(r, new_rt.get());
    EXPECT_NE(keyed_rt->limiters[0], new_rt->limiters[1]);
}

// ---- the stages, in order ---------------------------------------------------------------

TEST(SlowPipeline, JwtStageMissingInvalidAndValid)
{
    policy::Policy p = base_policy();
    auto r = route("api");
    r.jwt = "idp";
    p.routes = {r};
    auto rt = runtime(p);

    Req none("GET", "/", {});
    RequestAuth a0(*rt, none.view, Clock::now());
    Verdict v = decide(*rt, 0, none.view, a0, 1);
    EXPECT_EQ(v.kind, Verdict::Kind::JwtMissing);
    EXPECT_EQ(local_status(rt->policy().routes[0], v), 401);
    const auto resp = local_response_for(rt->policy().routes[0], v, false);
    EXPECT_NE(resp.bytes.find("www-authenticate: Bearer realm=\"l7fast\"\r\n"), std::string::npos) << resp.bytes;
    EXPECT_EQ(resp.bytes.find("invalid_token"), std::string::npos);

    Req basic("GET", "/", {{"Authorization", "Basic dXNlcjpwYXNz"}});
    RequestAuth a1(*rt, basic.view, Clock::now());
    EXPECT_EQ(decide(*rt, 0, basic.view, a1, 1).kind, Verdict::Kind::JwtMissing);

    Req expired("GET", "/", {{"Authorization", bearer(R"({"iss":"https://idp","exp":1000})")}});
    RequestAuth a2(*rt, expired.view, Clock::now());
    v = decide(*rt, 0, expired.view, a2, 1);
    EXPECT_EQ(v.kind, Verdict::Kind::JwtInvalid);
    EXPECT_EQ(v.jwt_reason, auth::Reason::Expired);
    EXPECT_NE(local_response_for(rt->policy().routes[0], v, true).bytes.find("error=\"invalid_token\""),
              std::string::npos);

    Req forged("GET", "/", {{"Authorization", "Bearer " + hs256(valid_payload(), std::string(32, 'x'))}});
    RequestAuth a3(*rt, forged.view, Clock::now());
    EXPECT_EQ(decide(*rt, 0, forged.view, a3, 1).kind, Verdict::Kind::JwtInvalid);

    Req good("GET", "/", {{"Authorization", bearer(valid_payload())}});
    RequestAuth a4(*rt, good.view, Clock::now());
    v = decide(*rt, 0, good.view, a4, 1);
    EXPECT_EQ(v.kind, Verdict::Kind::Forward);
    ASSERT_NE(v.claims, nullptr);
    EXPECT_TRUE(v.claims->equals("sub", "alice"));
}

TEST(SlowPipeline, ClaimConditionsRouteWithTheVerifiedToken)
{
    policy::Policy p = base_policy();
    auto admin = route("admin");
    admin.jwt = "idp";
    admin.match.claims = {{"role", policy::ClaimCondition::Kind::Exact, "admin"}};
    auto rest = route("rest");
    p.routes = {admin, rest};
    auto rt = runtime(p);

    Req adm("GET", "/", {{"Authorization", bearer(valid_payload(R"(,"role":["user","admin"])"))}});
    RequestAuth a(*rt, adm.view, Clock::now());
    EXPECT_EQ(rt->router->route(adm.view, a.lookup()), std::optional<uint32_t>(0));

    Req user("GET", "/", {{"Authorization", bearer(valid_payload(R"(,"role":"user")"))}});
    RequestAuth b(*rt, user.view, Clock::now());
    EXPECT_EQ(rt->router->route(user.view, b.lookup()), std::optional<uint32_t>(1));

    Req bad("GET", "/", {{"Authorization", "Bearer x.y.z"}});
    RequestAuth c(*rt, bad.view, Clock::now());
    EXPECT_EQ(rt->router->route(bad.view, c.lookup()), std::optional<uint32_t>(1));
}

TEST(SlowPipeline, RbacRunsAfterJwtAndSeesItsClaims)
{
    policy::Policy p = base_policy();
    auto r = route("api");
    r.jwt = "idp";
    policy::Rbac rbac;
    rbac.mode = policy::Rbac::Mode::FirstMatch;
    rbac.default_action = policy::RbacRule::Action::Deny;
    rbac.deny_status = 404;
    rbac.deny_body = "nope\n";
    policy::RbacRule allow;
    allow.action = policy::RbacRule::Action::Allow;
    allow.when.claims = {{"scope", policy::ClaimCondition::Kind::Exact, "read"}};
    rbac.rules = {allow};
    r.rbac = rbac;
    p.routes = {r};
    auto rt = runtime(p);

    // no token: the JWT stage answers before RBAC
    Req none("GET", "/", {});
    RequestAuth a0(*rt, none.view, Clock::now());
    EXPECT_EQ(decide(*rt, 0, none.view, a0, 1).kind, Verdict::Kind::JwtMissing);

    Req reader("GET", "/", {{"Authorization", bearer(valid_payload(R"(,"scope":"read")"))}});
    RequestAuth a1(*rt, reader.view, Clock::now());
    Verdict v = decide(*rt, 0, reader.view, a1, 1);
    EXPECT_EQ(v.kind, Verdict::Kind::Forward);
    EXPECT_EQ(v.rbac_rule, 0);

    Req other("GET", "/", {{"Authorization", bearer(valid_payload(R"(,"scope":"write")"))}});
    RequestAuth a2(*rt, other.view, Clock::now());
    v = decide(*rt, 0, other.view, a2, 1);
    EXPECT_EQ(v.kind, Verdict::Kind::RbacDenied);
    EXPECT_EQ(v.rbac_rule, -1);
    EXPECT_EQ(local_status(rt->policy().routes[0], v), 404);
    const auto resp = local_response_for(rt->policy().routes[0], v, false);
    EXPECT_EQ(resp.bytes.rfind("HTTP/1.1 404 Not Found\r\n", 0), 0u);
    EXPECT_EQ(resp.bytes.substr(resp.head_size), "nope\n");
}

TEST(SlowPipeline, RateLimitAfterRbacThenDirectResponse)
{
    policy::Policy p = base_policy();
    auto r = route("ping");
    r.clusters.clear();
    r.direct_response = policy::DirectResponse{204, {}, ""};
    r.rate_limit = policy::RateLimit{1, 2, policy::RequestKey{policy::RequestKey::Kind::Header, "x-key"}, 10};
    policy::Rbac rbac;
    rbac.default_action = policy::RbacRule::Action::Allow;
    policy::RbacRule deny;
    deny.action = policy::RbacRule::Action::Deny;
    deny.when.methods = {"DELETE"};
    rbac.rules = {deny};
    r.rbac = rbac;
    p.routes = {r};
    auto rt = runtime(p);

    const uint64_t t = 5'000'000'000;
    Req del("DELETE", "/", {{"x-key", "a"}});
    for (int i = 0; i < 5; i++) {
        RequestAuth a(*rt, del.view, Clock::now());
        EXPECT_EQ(decide(*rt, 0, del.view, a, t).kind, Verdict::Kind::RbacDenied) << "denied requests take no token";
    }
    Req get("GET", "/", {{"x-key", "a"}});
    for (int i = 0; i < 2; i++) {
        RequestAuth a(*rt, get.view, Clock::now());
        EXPECT_EQ(decide(*rt, 0, get.view, a, t).kind, Verdict::Kind::Direct);
    }
    RequestAuth a(*rt, get.view, Clock::now());
    Verdict v = decide(*rt, 0, get.view, a, t);
    EXPECT_EQ(v.kind, Verdict::Kind::RateLimited);
    EXPECT_GT(v.retry_after_ms, 0u);
    EXPECT_LE(v.retry_after_ms, 1000u);
    EXPECT_EQ(local_status(rt->policy().routes[0], v), 429);
    EXPECT_NE(local_response_for(rt->policy().routes[0], v, false).bytes.find("retry-after: 1\r\n"), std::string::npos);

    // another key has its own bucket; a second later the first has a token again
    Req other("GET", "/", {{"x-key", "b"}});
    RequestAuth b(*rt, other.view, Clock::now());
    EXPECT_EQ(decide(*rt, 0, other.view, b, t).kind, Verdict::Kind::Direct);
    RequestAuth c(*rt, get.view, Clock::now());
    EXPECT_EQ(decide(*rt, 0, get.view, c, t + 1'000'000'000).kind, Verdict::Kind::Direct);
    EXPECT_EQ(local_status(rt->policy().routes[0], decide(*rt, 0, other.view, b, t + 2'000'000'000)), 204);
}

// ---- forwarding ----------------------------------------------------------------------

TEST(SlowPipeline, UpstreamHeadCarriesMutationAndForwardedClaims)
{
    policy::Policy p = base_policy();
    auto plain = route("plain");
    auto r = route("api");
    r.jwt = "idp";
    r.request_headers.remove = {"x-internal"};
    r.request_headers.set = {{"x-env", "prod"}};
    r.request_headers.add = {{"x-tag", "a"}};
    p.routes = {plain, r};
    auto rt = runtime(p);

    const std::string head =
        "GET /x HTTP/1.1\r\nHost: test\r\nX-User: mallory\r\nX-Internal: 1\r\nAccept: */*\r\n\r\n";
    EXPECT_FALSE(upstream_request_head(*rt, 0, head, nullptr).rewritten);

    policy::Claims claims;
    claims.members["sub"] = {"alice"};
    claims.members["groups"] = {"a", "b"};
    const UpstreamHead h = upstream_request_head(*rt, 1, head, &claims);
    ASSERT_TRUE(h.rewritten);
    ASSERT_TRUE(h.ok);
    EXPECT_EQ(h.bytes,
              "GET /x HTTP/1.1\r\nHost: test\r\nAccept: */*\r\n"
              "x-env: prod\r\nx-user: alice\r\nx-groups: a, b\r\nx-tag: a\r\n\r\n");

    // a client-supplied forwarded-claim header never passes, even without the claim
    policy::Claims no_sub;
    const UpstreamHead h2 = upstream_request_head(*rt, 1, head, &no_sub);
    EXPECT_EQ(h2.bytes.find("mallory"), std::string::npos);
}

// Clusters 0 app (round robin), 1 ring (ring hash on x-user), 2 maglev
// (Maglev, 251 slots, on `maglev_key`), each over app's three endpoints.
static std::shared_ptr<PolicyRuntime> hash_clusters_runtime(policy::RequestKey maglev_key)
{
    policy::Policy p = base_policy();
    policy::Cluster ring = p.clusters[0];
    ring.name = "ring";
    ring.lb = policy::LbPolicy::RingHash;
    ring.hash_key = policy::RequestKey{policy::RequestKey::Kind::Header, "x-user"};
    policy::Cluster mag = ring;
    mag.name = "maglev";
    mag.lb = policy::LbPolicy::Maglev;
    mag.maglev_table_size = 251;
    mag.hash_key = std::move(maglev_key);
    p.clusters.push_back(ring);
    p.clusters.push_back(mag);
    p.routes = {route("a")};
    return runtime(p);
}

TEST(SlowPipeline, EndpointChoiceRoundRobinAndHashed)
{
    auto rt = hash_clusters_runtime(policy::RequestKey{policy::RequestKey::Kind::SourceIp, ""});

    uint64_t rr = 0;
    EndpointInputs in;
    in.rr_counter = [&] { return rr++; };
    in.random32 = [] { return 7u; };
    uint64_t r64 = 0;
    in.random64 = [&] { return r64 += 0x9e3779b97f4a7c15ull; };

    Req req("GET", "/", {{"X-User", "alice"}});
    EXPECT_EQ(choose_endpoint(*rt, 0, req.view, nullptr, in), std::optional<size_t>(0));
    EXPECT_EQ(choose_endpoint(*rt, 0, req.view, nullptr, in), std::optional<size_t>(1));

    // same key, same endpoint: the table's answer for XXH64 of the value
    const auto e = choose_endpoint(*rt, 1, req.view, nullptr, in);
    ASSERT_TRUE(e);
    EXPECT_EQ(*e, *rt->balancers[1]->choose(lb::key_hash(std::string_view("alice"))));
    for (int i = 0; i < 20; i++)
        EXPECT_EQ(choose_endpoint(*rt, 1, req.view, nullptr, in), e);
    // different keys spread over the endpoints
    std::set<size_t> seen;
    for (int i = 0; i < 200; i++) {
        Req k("GET", "/", {{"X-User", "user" + std::to_string(i)}});
        seen.insert(*choose_endpoint(*rt, 1, k.view, nullptr, in));
    }
    EXPECT_EQ(seen.size(), 3u);
    // without the key: random placement
    std::set<size_t> keyless;
    Req nokey("GET", "/", {});
    for (int i = 0; i < 200; i++)
        keyless.insert(*choose_endpoint(*rt, 1, nokey.view, nullptr, in));
    EXPECT_EQ(keyless.size(), 3u);

    // Maglev on the source address: 4 bytes for IPv4
    const auto m = choose_endpoint(*rt, 2, req.view, nullptr, in);
    const uint8_t ip[4] = {10, 1, 2, 3};
    EXPECT_EQ(*m, *rt->balancers[2]->choose(lb::key_hash(std::span<const uint8_t>(ip, 4))));
}

TEST(SlowPipeline, BoundedLoadMovesOffAnOverloadedEndpoint)
{
    policy::Policy p = base_policy();
    p.clusters[0].lb = policy::LbPolicy::RingHash;
    p.clusters[0].hash_key = policy::RequestKey{policy::RequestKey::Kind::Header, "x-user"};
    p.clusters[0].hash_balance_factor = 100;
    p.routes = {route("a")};
    auto rt = runtime(p);
    Req req("GET", "/", {{"X-User", "alice"}});
    EndpointInputs in;
    in.random64 = [] { return 1ull; };
    const size_t home = *choose_endpoint(*rt, 0, req.view, nullptr, in);
    in.active = [&](uint32_t e) { return e == home ? 10u : 0u; };
    EXPECT_NE(*choose_endpoint(*rt, 0, req.view, nullptr, in), home);
}

TEST(SlowPipeline, RetryOrderSkipsTheFailedAndUnchoosableEndpoints)
{
    policy::Cluster c;
    c.endpoints.resize(4);
    EXPECT_EQ(retry_endpoints(c, 2, 0), (std::vector<size_t>{}));
    EXPECT_EQ(retry_endpoints(c, 2, 2), (std::vector<size_t>{3, 0}));
    EXPECT_EQ(retry_endpoints(c, 2, 10), (std::vector<size_t>{3, 0, 1}));
    c.lb = policy::LbPolicy::Weighted;
    c.endpoints[3].weight = 0;
    EXPECT_EQ(retry_endpoints(c, 2, 10), (std::vector<size_t>{0, 1}));
    policy::Cluster one;
    one.endpoints.resize(1);
    EXPECT_TRUE(retry_endpoints(one, 0, 3).empty());
}

TEST(SlowPipeline, EndpointsThatAreOutAreNeverChosen)
{
    auto rt = hash_clusters_runtime(policy::RequestKey{policy::RequestKey::Kind::Header, "x-user"});

    uint64_t rr = 0;
    EndpointInputs in;
    in.rr_counter = [&] { return rr++; };
    in.random32 = [] { return 7u; };
    in.random64 = [] { return 1ull; };
    std::vector<bool> up{true, false, true};
    in.available = [&](uint32_t e) { return bool(up.at(e)); };

    // round robin: endpoint 1 is skipped, the others still alternate
    Req req("GET", "/", {{"X-User", "alice"}});
    std::vector<size_t> order;
    for (int i = 0; i < 6; i++)
        order.push_back(*choose_endpoint(*rt, 0, req.view, nullptr, in));
    EXPECT_EQ(std::count(order.begin(), order.end(), size_t{1}), 0);
    EXPECT_EQ(std::count(order.begin(), order.end(), size_t{0}), 3);
    EXPECT_EQ(std::count(order.begin(), order.end(), size_t{2}), 3);

    // hashed: a key whose endpoint is in keeps it; the keys of the endpoint
    // that is out move, and all of them to endpoints that are in
    for (size_t c : {size_t{1}, size_t{2}}) {
        size_t kept = 0, moved = 0;
        for (int i = 0; i < 300; i++) {
            Req k("GET", "/", {{"X-User", "user" + std::to_string(i)}});
            std::vector<bool> all{true, true, true};
            in.available = [&](uint32_t e) { return bool(all.at(e)); };
            const size_t home = *choose_endpoint(*rt, c, k.view, nullptr, in);
            in.available = [&](uint32_t e) { return bool(up.at(e)); };
            const size_t now = *choose_endpoint(*rt, c, k.view, nullptr, in);
            EXPECT_NE(now, 1u) << "cluster " << c << " key " << i;
            if (home != 1) {
                EXPECT_EQ(now, home) << "cluster " << c << " key " << i;
                kept++;
            } else {
                moved++;
            }
            // the same key, asked again, gets the same answer (the subset
            // table is built once per set of endpoints that are in)
            EXPECT_EQ(*choose_endpoint(*rt, c, k.view, nullptr, in), now);
        }
        EXPECT_GT(kept, 0u);
        EXPECT_GT(moved, 0u);
    }

    // none in: no endpoint, for every balancer
    up = {false, false, false};
    in.available = [&](uint32_t e) { return bool(up.at(e)); };
    for (size_t c = 0; c < 3; c++)
        EXPECT_EQ(choose_endpoint(*rt, c, req.view, nullptr, in), std::nullopt) << c;
}

TEST(SlowPipeline, HashSubsetTableIsTheTableOverTheEndpointsThatAreIn)
{
    policy::Policy p = base_policy();
    p.clusters[0].lb = policy::LbPolicy::Maglev;
    p.clusters[0].maglev_table_size = 251;
    p.clusters[0].hash_key = policy::RequestKey{policy::RequestKey::Kind::Header, "x-user"};
    policy::Cluster two = p.clusters[0];
    two.name = "two";
    two.endpoints = {p.clusters[0].endpoints[0], p.clusters[0].endpoints[2]};
    p.clusters.push_back(two);
    p.routes = {route("a")};
    auto rt = runtime(p);
    const std::vector<bool> in{true, false, true};
    // a key of endpoint 1 goes where a cluster of just endpoints 0 and 2 sends it
    size_t checked = 0;
    for (uint64_t h = 1; h < 4000; h += 7) {
        const uint64_t key = h * 0x9e3779b97f4a7c15ull;
        if (*rt->balancers[0]->choose(key) != 1)
            continue;
        const uint32_t sub = *rt->balancers[1]->choose(key);
        EXPECT_EQ(*rt->balancers[0]->choose_available(key, in), sub == 0 ? 0u : 2u) << key;
        checked++;
    }
    EXPECT_GT(checked, 50u);
}

TEST(SlowPipeline, RetryOrderSkipsEndpointsThatAreOut)
{
    policy::Cluster c;
    c.endpoints.resize(4);
    const auto out3 = [](uint32_t e) { return e != 3; };
    EXPECT_EQ(retry_endpoints(c, 2, 10, out3), (std::vector<size_t>{0, 1}));
    EXPECT_EQ(retry_endpoints(c, 2, 1, out3), (std::vector<size_t>{0}));
    const auto none = [](uint32_t) { return false; };
    EXPECT_TRUE(retry_endpoints(c, 0, 10, none).empty());
}

// ---- telemetry ---------------------------------------------------------------------------

TEST(SlowPipeline, GetStatsCarriesRejectionsAndDirectResponses)
{
    // a bus over a socket pair whose peer never answers: enough to build
    // and read back a message
    int fds[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    sd_bus* bus = nullptr;
    ASSERT_GE(sd_bus_new(&bus), 0);
    ASSERT_GE(sd_bus_set_fd(bus, fds[0], fds[0]), 0);
    ASSERT_GE(sd_bus_start(bus), 0);
    sd_bus_message* m = nullptr;
    ASSERT_GE(sd_bus_message_new_method_call(bus, &m, "org.l7fast.Manager1", "/org/l7fast/Manager1",
                                             "org.l7fast.Manager1", "GetStats"),
              0);
    control::StatsSnapshot in;
    control::RouteStats rs;
    rs.name = "api";
    rs.jwt_missing = 1;
    rs.jwt_invalid = 2;
    rs.rbac_denied = 3;
    rs.rate_limited = 4;
    rs.direct_responses = 5;
    rs.status[4] = 10;
    in.routes.push_back(rs);
    control::RouteStats quiet;
    quiet.name = "quiet";
    in.routes.push_back(quiet);
    ASSERT_GE(control::codec::append_stats(m, in), 0);
    ASSERT_GE(sd_bus_message_seal(m, 1, 0), 0);
    ASSERT_GE(sd_bus_message_rewind(m, true), 0);
    control::StatsSnapshot out;
    ASSERT_GE(control::codec::read_stats(m, &out), 0);
    ASSERT_EQ(out.routes.size(), 2u);
    EXPECT_EQ(out.routes[0].jwt_missing, 1u);
    EXPECT_EQ(out.routes[0].jwt_invalid, 2u);
    EXPECT_EQ(out.routes[0].rbac_denied, 3u);
    EXPECT_EQ(out.routes[0].rate_limited, 4u);
    EXPECT_EQ(out.routes[0].direct_responses, 5u);
    sd_bus_message_unref(m);
    sd_bus_close_unref(bus);
    close(fds[1]);

    const std::string text = control::render_stats(out);
    EXPECT_NE(text.find("ANSWERED BY POLICY"), std::string::npos) << text;
    EXPECT_NE(text.find("RATE LIMITED"), std::string::npos);
    // only routes that answered something are listed there
    const std::string tail = text.substr(text.find("ANSWERED BY POLICY"));
    EXPECT_EQ(tail.find("quiet"), std::string::npos) << text;
}
