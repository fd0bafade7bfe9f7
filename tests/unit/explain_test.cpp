// `l7fastctl explain` (control/Explain): the route each request takes and
// why, the stages, the upstream choice, the answer and the plane, computed
// by the code the slow path runs; its request codec for D-Bus; its text.
// The e2e test (tests/e2e/test_cli.py) holds it to what a running daemon
// really answers on the differential test's generated requests.
#include "control/Explain.hpp"

#include <gtest/gtest.h>

#include <string>

#include "auth/JsonReader.hpp"
#include "lb/HashBalancer.hpp"
#include "lb/KeyHash.hpp"
#include "loader/PolicyLoader.hpp"
#include "proxy/Prepare.hpp"
#include "support/Hs256.hpp"

using namespace l7fast;
using namespace l7fast::control;

namespace {

const std::string kSecret = "0123456789abcdef0123456789abcdef";

const char* kPolicy = R"(
[[listener]]
name = "web"
address = "127.0.0.1:18080"
[[listener]]
name = "admin"
address = "127.0.0.1:18081"

[[cluster]]
name = "app"
endpoints = [ { address = "127.0.0.1:19001" } ]
[[cluster]]
name = "ring"
lb = "ring_hash"
hash_key = { header = "x-user" }
endpoints = [ { address = "127.0.0.1:19011" }, { address = "127.0.0.1:19012" }, { address = "127.0.0.1:19013" } ]

[[jwt_provider]]
name = "idp"
issuer = "https://idp"
algorithms = ["HS256"]
keys = [ { alg = "HS256", secret_base64url = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY" } ]

[[route]]
name = "health"
direct_response = { status = 200, body = "ok\n" }
match = { path_exact = "/healthz" }

[[route]]
name = "regex"
cluster = "app"
match = { path_regex = "/v[12]/[a-z]+", method = ["PUT"] }

[[route]]
name = "secure"
cluster = "app"
jwt = "idp"
match = { path_prefix = "/secure/" }

[[route]]
name = "rbac"
cluster = "app"
match = { path_prefix = "/rbac/" }
[route.rbac]
default = "deny"
rules = [ { name = "readers", action = "allow", method = ["GET"] } ]

[[route]]
name = "mut"
cluster = "app"
match = { path_prefix = "/mut/" }
[route.request_headers]
remove = ["x-debug"]
add = [ { name = "x-via", value = "l7fast" } ]

[[route]]
name = "limited"
cluster = "app"
match = { path_prefix = "/limited/" }
[route.rate_limit]
rate = 1
burst = 1
key = { header = "x-user" }

[[route]]
name = "hash"
cluster = "ring"
match = { path_prefix = "/hash/" }

[[route]]
name = "api"
cluster = "app"
listeners = ["web"]
match = { path_prefix = "/api/", headers = [ { name = "x-tenant", exact = "a" } ] }
)";

class Explained {
public:
    explicit Explained(std::string json) : json_(std::move(json))
    {
        ok_ = doc_.parse(json_, auth::json::Limits{1 << 20, 16, 1 << 16});
        EXPECT_TRUE(ok_) << doc_.error() << "\n" << json_;
    }
    // The value at a dotted path ("plane.reason"), as text: strings as is,
    // numbers as written, true/false/null as words; "<absent>" when not there.
    std::string at(const std::string& path) const
    {
        if (!ok_)
            return "<bad json>";
        const auth::json::Node* n = &doc_.root();
        size_t start = 0;
        while (n && start <= path.size()) {
            const size_t dot = path.find('.', start);
            n = doc_.find(*n, std::string_view(path).substr(start, dot - start));
            if (dot == std::string::npos)
                break;
            start = dot + 1;
        }
        if (!n)
            return "<absent>";
        switch (n->type) {
        case auth::json::Type::Null: return "null";
        case auth::json::Type::True: return "true";
        case auth::json::Type::False: return "false";
        case auth::json::Type::Number:
        case auth::json::Type::String: return std::string(n->text);
        default: return "<container>";
        }
    }
    // The conditions of route entry i as "condition=held" words.
    std::string conditions(size_t i) const
    {
        const auth::json::Node* routes = doc_.find(doc_.root(), "routes");
        std::string out;
        size_t k = 0;
        for (const auto& r : doc_.children(*routes)) {
            if (k++ != i)
                continue;
            for (const auto& c : doc_.children(*doc_.find(r, "conditions")))
                out += (out.empty() ? "" : " ") + std::string(doc_.find(c, "condition")->text) + "=" +
                       (doc_.find(c, "held")->type == auth::json::Type::True ? "held" : "failed");
        }
        return out;
    }
    size_t routes_tried() const
    {
        size_t n = 0;
        for (const auto& r : doc_.children(*doc_.find(doc_.root(), "routes"))) {
            (void)r;
            n++;
        }
        return n;
    }
    const std::string& json() const { return json_; }

private:
    std::string json_;
    auth::json::Document doc_;
    bool ok_ = false;
};

class ExplainTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        auto r = policy::PolicyLoader::load_string(kPolicy, "explain.toml");
        ASSERT_TRUE(r.ok()) << r.error_text();
        placement_ = offline_placement(r.policy());
        std::optional<policy::PolicyError> err;
        rt_ = proxy::prepare_runtime(std::move(r).policy(), nullptr, &err);
        ASSERT_TRUE(rt_) << (err ? err->str() : "");
        context_.policy_source = "explain.toml";
    }

    Explained run(ExplainRequest req)
    {
        std::string error;
        auto json = explain(*rt_, req, placement_, context_, &error);
        EXPECT_TRUE(json) << error;
        return Explained(json.value_or("{}"));
    }
    std::string refused(ExplainRequest req)
    {
        std::string error;
        auto json = explain(*rt_, req, placement_, context_, &error);
        EXPECT_FALSE(json) << *json;
        return error;
    }

    std::shared_ptr<proxy::PolicyRuntime> rt_;
    ExplainPlacement placement_;
    ExplainContext context_;
};

ExplainRequest get(std::string url, std::vector<std::pair<std::string, std::string>> headers = {})
{
    ExplainRequest r;
    r.method = "GET";
    r.url = std::move(url);
    r.headers = std::move(headers);
    return r;
}

}  // namespace

TEST_F(ExplainTest, NoRouteIsA404ForTheSlowPathWithEveryRouteTried)
{
    const Explained e = run(get("http://example.com/nowhere"));
    EXPECT_EQ(e.at("route"), "null");
    EXPECT_EQ(e.at("response.status"), "404");
    EXPECT_EQ(e.at("response.reason"), "no_route");
    EXPECT_EQ(e.at("plane.plane"), "user");
    EXPECT_EQ(e.at("plane.reason"), "to_slow_path_no_route");
    EXPECT_EQ(e.routes_tried(), rt_->policy().routes.size());
    EXPECT_EQ(e.conditions(0), "path=/healthz=failed");
    // the URL's authority became the Host header
    EXPECT_EQ(e.at("request.host_from"), "url");
    EXPECT_EQ(run(get("/nowhere")).at("request.host_from"), "placeholder");
    EXPECT_NE(e.json().find(R"({"name":"Host","value":"example.com"})"), std::string::npos) << e.json();
}

TEST_F(ExplainTest, EveryConditionIsEvaluatedAndShown)
{
    // the regex route: the method fails, the path holds; both are shown
    const Explained e = run(get("/v1/users"));
    EXPECT_EQ(e.conditions(1), "method=PUT=failed regex=/v[12]/[a-z]+=held");
    ExplainRequest put = get("/v1/users");
    put.method = "PUT";
    const Explained p = run(put);
    EXPECT_EQ(p.at("route"), "regex");
    EXPECT_EQ(p.at("plane.reason"), "to_slow_path_route_user");
    EXPECT_NE(p.at("plane.why").find("path_regex runs in user space"), std::string::npos) << p.at("plane.why");
}

TEST_F(ExplainTest, AUserRouteTheKernelCannotRuleOutSendsALaterKernelRouteToTheSlowPath)
{
    // /v1/x is not what the regex takes, but the kernel evaluates only the
    // regex route's method: a PUT to /api/... makes it a kernel candidate
    ExplainRequest r = get("/api/x", {{"X-Tenant", "a"}});
    r.method = "PUT";
    const Explained e = run(r);
    EXPECT_EQ(e.at("route"), "api");
    EXPECT_EQ(e.at("plane.reason"), "to_slow_path_route_user");
    EXPECT_NE(e.at("plane.why").find("it picks route api"), std::string::npos) << e.at("plane.why");
    // a GET is ruled out by the kernel's method tables: the kernel takes it
    const Explained g = run(get("/api/x", {{"X-Tenant", "a"}}));
    EXPECT_EQ(g.at("route"), "api");
    EXPECT_EQ(g.at("plane.plane"), "kernel");
    EXPECT_EQ(g.at("plane.reason"), "null");
    EXPECT_EQ(g.at("upstream.endpoint"), "127.0.0.1:19001");
    EXPECT_EQ(g.at("response.by"), "upstream");
}

TEST_F(ExplainTest, ListenerScopeIsPartOfTheMatch)
{
    ExplainRequest r = get("/api/x", {{"X-Tenant", "a"}});
    r.listener = "admin";
    const Explained e = run(r);
    EXPECT_EQ(e.at("route"), "null");
    r.listener = "admn";
    EXPECT_EQ(refused(r), "no listener named \"admn\" (did you mean \"admin\"?)");
}

TEST_F(ExplainTest, JwtMissingInvalidAndValid)
{
    const Explained none = run(get("/secure/a"));
    EXPECT_EQ(none.at("route"), "secure");
    EXPECT_EQ(none.at("response.status"), "401");
    EXPECT_EQ(none.at("response.reason"), "jwt_missing");
    // the kernel sends the 401, to local and remote clients
    EXPECT_EQ(none.at("plane.plane"), "kernel");
    EXPECT_EQ(none.at("plane.reason"), "null");
    EXPECT_NE(none.at("plane.why").find("the kernel sends its 401 itself"), std::string::npos) << none.at("plane.why");
    EXPECT_EQ(none.at("plane.remote_clients"),
              "kernel");
    // another scheme is no token either; the scheme alone is a malformed
    // one, which the slow path reads
    const Explained basic = run(get("/secure/a", {{"Authorization", "Basic dXNlcjpwYXNz"}}));
    EXPECT_EQ(basic.at("response.reason"), "jwt_missing");
    EXPECT_EQ(basic.at("plane.plane"), "kernel");
    const Explained bare = run(get("/secure/a", {{"Authorization", "Bearer"}}));
    EXPECT_EQ(bare.at("response.reason"), "jwt_malformed");
    EXPECT_EQ(bare.at("plane.reason"), "to_slow_path_jwt_other");
    // a request that asks to close gets its 401 with connection: close,
    // from the slow path
    const Explained closing = run(get("/secure/a", {{"Connection", "close"}}));
    EXPECT_EQ(closing.at("plane.reason"), "to_slow_path_jwt_none");
    const Explained closing_bad =
        run(get("/secure/a", {{"Connection", "close"}, {"Authorization", "Bearer " + std::string(20000, 'a')}}));
    EXPECT_EQ(closing_bad.at("response.reason"), "jwt_too_large");
    EXPECT_EQ(closing_bad.at("plane.reason"), "to_slow_path_jwt_bad");

    ExplainRequest forged = get("/secure/a");
    forged.token = test_support::hs256_token(R"({"iss":"https://idp","exp":4102444800})", std::string(32, 'x'));
    const Explained bad = run(forged);
    EXPECT_EQ(bad.at("response.status"), "401");
    EXPECT_EQ(bad.at("response.reason"), "jwt_bad_signature");
    EXPECT_EQ(bad.at("plane.reason"), "to_slow_path_jwt_miss");
    EXPECT_EQ(bad.at("plane.then"), "null");

    ExplainRequest good = get("/secure/a");
    good.token = test_support::hs256_token(R"({"iss":"https://idp","exp":4102444800})", kSecret);
    const Explained ok = run(good);
    EXPECT_EQ(ok.at("response.by"), "upstream");
    EXPECT_EQ(ok.at("plane.reason"), "to_slow_path_jwt_miss");
    EXPECT_EQ(ok.at("plane.then"), "kernel: requests with the same token, until it expires");
    // --token went where the provider looks
    EXPECT_NE(ok.json().find(R"({"name":"authorization","value":"Bearer )"), std::string::npos) << ok.json();
}

TEST_F(ExplainTest, RbacNamesTheDecidingRule)
{
    const Explained g = run(get("/rbac/a"));
    EXPECT_EQ(g.at("response.by"), "upstream");
    ExplainRequest post = get("/rbac/a");
    post.method = "POST";
    const Explained p = run(post);
    EXPECT_EQ(p.at("response.status"), "403");
    EXPECT_EQ(p.at("response.reason"), "rbac_denied:default");
    // a kernel route's denial is the kernel's to send, to local and remote clients
    EXPECT_EQ(p.at("plane.plane"), "kernel");
    EXPECT_EQ(p.at("plane.reason"), "null");
    EXPECT_EQ(p.at("plane.remote_clients"),
              "kernel");
    // ... in its keep-alive form only
    post.headers.push_back({"Connection", "close"});
    const Explained c = run(post);
    EXPECT_EQ(c.at("response.status"), "403");
    EXPECT_EQ(c.at("plane.reason"), "to_slow_path_rbac_deny");
    EXPECT_EQ(c.at("plane.why"), "RBAC denies and the request asks to close the connection: the slow path "
                                 "answers 403 with connection: close");
    EXPECT_NE(g.json().find(R"("stage":"rbac","mode":"first_match","rule":"readers","allowed":true)"),
              std::string::npos)
        << g.json();
}

TEST_F(ExplainTest, DirectResponseMutationAndRateLimit)
{
    const Explained h = run(get("/healthz"));
    EXPECT_EQ(h.at("response.status"), "200");
    EXPECT_EQ(h.at("response.reason"), "direct_response");
    EXPECT_EQ(h.at("plane.plane"), "kernel");
    EXPECT_EQ(h.at("plane.remote_clients"),
              "kernel");
    const Explained hc = run(get("/healthz", {{"Connection", "close"}}));
    EXPECT_EQ(hc.at("plane.plane"), "user");
    EXPECT_EQ(hc.at("plane.reason"), "to_slow_path_answer_close");

    const Explained m = run(get("http://h/mut/a", {{"X-Debug", "1"}}));
    EXPECT_NE(m.json().find(R"("upstream_head":"GET /mut/a HTTP/1.1\r\nHost: h\r\nx-via: l7fast\r\n\r\n")"),
              std::string::npos)
        << m.json();

    // explain takes no token: the bucket of burst 1 never empties
    for (int i = 0; i < 3; i++) {
        const Explained l = run(get("/limited/a", {{"X-User", "u1"}}));
        EXPECT_EQ(l.at("response.by"), "upstream");
        EXPECT_NE(l.json().find(R"("stage":"rate_limit","rate":1,"burst":1,"key":"header:x-user","key_value":"u1",)"
                                R"("bucket":"user space")"),
                  std::string::npos)
            << l.json();
    }
}

TEST_F(ExplainTest, HashedEndpointIsTheBalancersChoice)
{
    const Explained e = run(get("/hash/a", {{"X-User", "alice"}}));
    const uint64_t h = lb::key_hash(std::string("alice"));
    const auto& balancer = *rt_->balancers.at(1);
    const uint32_t pick = balancer.choose(h).value();
    EXPECT_EQ(e.at("upstream.endpoint"), rt_->policy().clusters.at(1).endpoints.at(pick).address.str());
    EXPECT_EQ(e.at("upstream.hash.value"), "alice");
    EXPECT_EQ(e.at("upstream.hash.ring_point"), std::to_string(balancer.ring()->find(h)));
    EXPECT_EQ(e.at("upstream.hash.ring_size"), std::to_string(balancer.ring()->size()));
    const Explained nokey = run(get("/hash/a"));
    EXPECT_EQ(nokey.at("upstream.endpoint"), "null");
    EXPECT_EQ(nokey.at("upstream.hash.value"), "null");
}

TEST_F(ExplainTest, RefusedBeforeAnyRoute)
{
    const Explained slash = run(get("/a%2Fb"));
    EXPECT_EQ(slash.at("refused.status"), "400");
    EXPECT_EQ(slash.at("response.reason"), "bad_request:encoded_slash");
    EXPECT_EQ(slash.at("route"), "null");
    const Explained cl = run(get("/a", {{"Content-Length", "1"}, {"Content-Length", "2"}}));
    EXPECT_EQ(cl.at("response.status"), "400");
    EXPECT_EQ(cl.at("response.reason").rfind("bad_request:", 0), 0u) << cl.at("response.reason");
    EXPECT_EQ(cl.at("plane.reason"), "to_slow_path_parse");
    ExplainRequest connect = get("/a");
    connect.method = "CONNECT";
    EXPECT_EQ(run(connect).at("response.status"), "501");
    // a path not in normal form is matched normalised, by the slow path
    const Explained dots = run(get("/x/../api/./y", {{"X-Tenant", "a"}}));
    EXPECT_EQ(dots.at("normalized_target"), "/api/y");
    EXPECT_EQ(dots.at("route"), "api");
    EXPECT_EQ(dots.at("plane.reason"), "to_slow_path_path_not_normal");
    // the first reason in the data plane's order is the one named: the
    // size is checked before the path's form
    const Explained big = run(get("/x/../api/y", {{"X-Tenant", "a"}, {"Content-Length", "100000"}}));
    EXPECT_EQ(big.at("plane.reason"), "to_slow_path_too_big");
    EXPECT_EQ(big.at("route"), "api");
}

TEST_F(ExplainTest, BadRequestsAreRefusedWithWhatToDo)
{
    ExplainRequest r = get("/a");
    r.source = "10.0.0.300";
    EXPECT_EQ(refused(r), "--source: \"10.0.0.300\" is not an IPv4 or IPv6 address");
    EXPECT_EQ(refused(get("a b")), "the URL must be non-empty, without spaces or control characters");
    EXPECT_EQ(refused(get("ftp://x/")), "the URL must be a path (/a?b) or http://host/path, got \"ftp://x/\"");
    EXPECT_NE(refused(get("/a", {{"X-A\r\nX-B", "1"}})).find("give it as 'Name: value'"), std::string::npos);
    ExplainRequest m = get("/a");
    m.method = "G T";
    EXPECT_EQ(refused(m), "the method must be one token (e.g. GET), got \"G T\"");
}

TEST(ExplainRequestCodec, RoundTripAndHostileInput)
{
    ExplainRequest r;
    r.method = "POST";
    r.url = "http://h/a?b=1";
    r.headers = {{"X-A", "1"}, {"Cookie", "a=\"b\""}};
    r.source = "::1";
    r.token = "t";
    r.listener = "web";
    std::string error;
    auto back = parse_explain_request(explain_request_json(r), &error);
    ASSERT_TRUE(back) << error;
    EXPECT_EQ(back->method, r.method);
    EXPECT_EQ(back->url, r.url);
    EXPECT_EQ(back->headers, r.headers);
    EXPECT_EQ(back->source, r.source);
    EXPECT_EQ(back->token, r.token);
    EXPECT_EQ(back->listener, r.listener);

    EXPECT_FALSE(parse_explain_request(R"({"method":"GET","evil":1})", &error));
    EXPECT_EQ(error, "unknown member \"evil\" (or \"headers\" not an array)");
    EXPECT_FALSE(parse_explain_request(R"({"method":1})", &error));
    EXPECT_EQ(error, "\"method\" must be a string");
    EXPECT_FALSE(parse_explain_request(R"({"headers":[["a","b","c"]]})", &error));
    EXPECT_EQ(error, "each header must be [name, value]");
    EXPECT_FALSE(parse_explain_request(R"({"headers":[["a",1]]})", &error));
    EXPECT_FALSE(parse_explain_request("[]", &error));
    EXPECT_FALSE(parse_explain_request("{", &error));
    std::string many = R"({"headers":[)";
    for (size_t i = 0; i <= kExplainMaxHeaders; i++)
        many += std::string(i ? "," : "") + R"(["a","b"])";
    many += "]}";
    EXPECT_FALSE(parse_explain_request(many, &error));
}

TEST_F(ExplainTest, TextNamesTheRouteTheStagesAndThePlane)
{
    ExplainRequest r = get("/rbac/a");
    r.method = "POST";
    std::string error;
    auto json = explain(*rt_, r, placement_, context_, &error);
    ASSERT_TRUE(json) << error;
    std::string text;
    ASSERT_TRUE(render_explain_text(*json, &text, &error)) << error;
    EXPECT_NE(text.find("Request:   POST /rbac/a  (listener web, client 127.0.0.1)\n"), std::string::npos) << text;
    EXPECT_NE(text.find("  0 health: no  [kernel]\n      FAILED path=/healthz\n"), std::string::npos) << text;
    EXPECT_NE(text.find("Route:     rbac\n"), std::string::npos) << text;
    EXPECT_NE(text.find("  rbac        first_match: rule default denies\n"), std::string::npos) << text;
    EXPECT_NE(text.find("Response:  403 from l7fast (rbac_denied:default)\n"), std::string::npos) << text;
    EXPECT_NE(text.find("Handled:   kernel: "), std::string::npos) << text;
    EXPECT_FALSE(render_explain_text("not json", &text, &error));
}
