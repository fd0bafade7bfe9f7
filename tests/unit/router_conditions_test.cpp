// Router and RBAC: the reference semantics of the suite's conditions
// (docs/policy.md, "MATCHING" and "[route.rbac]").
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <sys/socket.h>

#include <string>
#include <vector>

#include "loader/PolicyLoader.hpp"
#include "semantics/Rbac.hpp"
#include "semantics/Router.hpp"

using namespace l7fast::policy;

namespace {

constexpr const char* kPrelude = R"(
[[listener]]
name = "web"
address = "127.0.0.1:8080"
[[cluster]]
name = "app"
endpoints = [ { address = "127.0.0.1:9001" } ]
[[jwt_provider]]
name = "idp"
keys = [ { alg = "HS256", secret_base64url = "AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow" } ]
)";

Policy policy_for(const std::string& routes)
{
    PolicyLoadResult r = PolicyLoader::load_string(std::string(kPrelude) + routes, "router.toml");
    if (!r.ok())
        ADD_FAILURE() << r.error_text();
    return r.ok() ? std::move(r).policy() : Policy{};
}

Router router_for(const std::string& routes)
{
    return Router(policy_for(routes));
}

// A request with owned bytes; view() points into it.
struct Request {
    std::string method = "GET";
    std::string target = "/";
    std::vector<std::pair<std::string, std::string>> headers{};
    std::string client{};  // "10.1.2.3" or "::1"; empty: unknown
    std::vector<HeaderField> fields{};

    RequestView view()
    {
        fields.clear();
        for (const auto& [n, v] : headers)
            fields.push_back({n, v});
        RequestView v{method, target, fields, 0};
        if (client.find(':') != std::string::npos) {
            v.client_family = AF_INET6;
            inet_pton(AF_INET6, client.c_str(), v.client_ip.data());
        } else if (!client.empty()) {
            v.client_family = AF_INET;
            inet_pton(AF_INET, client.c_str(), v.client_ip.data());
        }
        return v;
    }
};

std::optional<uint32_t> route(const Router& r, Request rq, const ClaimsLookup& claims_for = {})
{
    return r.route(rq.view(), claims_for);
}

Claims claims(std::initializer_list<std::pair<const std::string, std::vector<std::string>>> members)
{
    Claims c;
    for (const auto& [k, v] : members)
        c.members.emplace(k, v);
    return c;
}

std::string route_with(const std::string& match, const std::string& extra = "")
{
    return "[[route]]\nname = \"r\"\ncluster = \"app\"\n" + extra + "[route.match]\n" + match + "\n";
}

}  // namespace

TEST(RouterConditions, HeaderAbsent)
{
    Router r = router_for(route_with("headers = [ { name = \"x-debug\", absent = true } ]"));
    EXPECT_EQ(route(r, {}), 0u);
    EXPECT_EQ(route(r, {.headers = {{"X-Other", "1"}}}), 0u);
    EXPECT_EQ(route(r, {.headers = {{"X-Debug", ""}}}), std::nullopt) << "present with an empty value";
    EXPECT_EQ(route(r, {.headers = {{"x-DEBUG", "1"}}}), std::nullopt);
}

TEST(RouterConditions, HeaderPrefixComparesTheCombinedValue)
{
    Router r = router_for(route_with("headers = [ { name = \"accept\", prefix = \"text/\" } ]"));
    EXPECT_EQ(route(r, {.headers = {{"Accept", "text/html"}}}), 0u);
    EXPECT_EQ(route(r, {.headers = {{"Accept", "text/"}}}), 0u);
    EXPECT_EQ(route(r, {.headers = {{"Accept", "Text/html"}}}), std::nullopt) << "case-sensitive value";
    EXPECT_EQ(route(r, {.headers = {{"Accept", "text"}}}), std::nullopt);
    EXPECT_EQ(route(r, {}), std::nullopt) << "absent";
    EXPECT_EQ(route(r, {.headers = {{"Accept", "text/html"}, {"Accept", "image/png"}}}), 0u)
        << "\"text/html, image/png\"";
    EXPECT_EQ(route(r, {.headers = {{"Accept", "image/png"}, {"Accept", "text/html"}}}), std::nullopt)
        << "\"image/png, text/html\"";

    Router spanning = router_for(route_with("headers = [ { name = \"x-tag\", prefix = \"a, b\" } ]"));
    EXPECT_EQ(route(spanning, {.headers = {{"X-Tag", "a"}, {"X-Tag", "b"}}}), 0u) << "the prefix spans two lines";
}

TEST(RouterConditions, QueryParameters)
{
    Router r = router_for(route_with("query = [ { name = \"v\", exact = \"2\" }, { name = \"debug\", present = true } ]"));
    EXPECT_EQ(route(r, {.target = "/x?v=2&debug"}), 0u);
    EXPECT_EQ(route(r, {.target = "/x?debug=&v=2"}), 0u);
    EXPECT_EQ(route(r, {.target = "/x?debug=0&v=2&v=3"}), 0u) << "the first pair counts";
    EXPECT_EQ(route(r, {.target = "/x?v=3&v=2&debug"}), std::nullopt) << "the first pair counts";
    EXPECT_EQ(route(r, {.target = "/x?v=2"}), std::nullopt);
    EXPECT_EQ(route(r, {.target = "/x?V=2&debug"}), std::nullopt) << "names are case-sensitive";
    EXPECT_EQ(route(r, {.target = "/x?v=%32&debug"}), std::nullopt) << "not percent-decoded";
    EXPECT_EQ(route(r, {.target = "/x?xv=2&debug"}), std::nullopt);
    EXPECT_EQ(route(r, {.target = "/x"}), std::nullopt);
    EXPECT_EQ(route(r, {.target = "/x?&&v=2&&debug&"}), 0u) << "empty pairs are skipped";
}

TEST(RouterConditions, QueryHelpers)
{
    EXPECT_EQ(request_query_param("/a?x=1&y=2", "y"), "2");
    EXPECT_EQ(request_query_param("/a?x", "x"), "");
    EXPECT_EQ(request_query_param("/a?x=a=b", "x"), "a=b") << "split at the first '='";
    EXPECT_EQ(request_query_param("/a?x=1?y=2", "y"), std::nullopt) << "only '&' separates pairs";
    EXPECT_EQ(request_query_param("/a?x=1?y=2", "x"), "1?y=2");
    EXPECT_EQ(request_query_param("/a", "a"), std::nullopt);
    EXPECT_EQ(request_query_param("/a?", ""), "") << "the empty pair has the empty name";
}

TEST(RouterConditions, SourceAddresses)
{
    Router r = router_for(route_with("source = [\"10.0.0.0/8\", \"192.168.1.7\", \"fd00::/8\"]"));
    EXPECT_EQ(route(r, {.client = "10.255.0.1"}), 0u);
    EXPECT_EQ(route(r, {.client = "11.0.0.1"}), std::nullopt);
    EXPECT_EQ(route(r, {.client = "192.168.1.7"}), 0u);
    EXPECT_EQ(route(r, {.client = "192.168.1.8"}), std::nullopt);
    EXPECT_EQ(route(r, {.client = "fd12::1"}), 0u);
    EXPECT_EQ(route(r, {.client = "fe80::1"}), std::nullopt);
    EXPECT_EQ(route(r, {.client = "::ffff:10.1.1.1"}), 0u) << "an IPv4-mapped client is its IPv4 address";
    EXPECT_EQ(route(r, {.client = "::ffff:11.1.1.1"}), std::nullopt);
    EXPECT_EQ(route(r, {}), std::nullopt) << "unknown client address";

    Router all6 = router_for(route_with("source = \"::/0\""));
    EXPECT_EQ(route(all6, {.client = "2001:db8::1"}), 0u);
    EXPECT_EQ(route(all6, {.client = "::ffff:10.1.1.1"}), std::nullopt) << "not an IPv6 client";
    EXPECT_EQ(route(all6, {.client = "10.1.1.1"}), std::nullopt);
    Router all4 = router_for(route_with("source = \"0.0.0.0/0\""));
    EXPECT_EQ(route(all4, {.client = "::ffff:1.2.3.4"}), 0u);
}

TEST(RouterConditions, CidrText)
{
    std::string why;
    EXPECT_EQ(Cidr::parse("10.0.0.0/8", &why)->str(), "10.0.0.0/8");
    EXPECT_EQ(Cidr::parse("2001:DB8::/32", &why)->str(), "2001:db8::/32");
    EXPECT_EQ(Cidr::parse("::1", &why)->str(), "::1/128");
    EXPECT_EQ(Cidr::parse("0.0.0.0/0", &why)->prefix_len, 0u);
    EXPECT_FALSE(Cidr::parse("10.0.0.0/", &why));
    EXPECT_FALSE(Cidr::parse("10.0.0.0/+8", &why));
    EXPECT_FALSE(Cidr::parse("10.0.0.0/0008", &why));
    EXPECT_FALSE(Cidr::parse("10.0.0.0/8/8", &why));
    EXPECT_FALSE(Cidr::parse("[::1]/128", &why));
    EXPECT_FALSE(Cidr::parse("", &why));
    const Cidr c = *Cidr::parse("10.128.0.0/9", &why);
    const uint8_t in[4] = {10, 200, 0, 1}, out[4] = {10, 127, 0, 1};
    EXPECT_TRUE(c.contains(AF_INET, in));
    EXPECT_FALSE(c.contains(AF_INET, out));
    EXPECT_FALSE(c.contains(AF_INET6, in)) << "wrong family";
    EXPECT_FALSE(c.contains(AF_INET, nullptr));
}

TEST(RouterConditions, PathRegexMatchesTheWholePath)
{
    Router r = router_for(route_with("path_regex = \"/users/[0-9]+\""));
    EXPECT_EQ(route(r, {.target = "/users/42"}), 0u);
    EXPECT_EQ(route(r, {.target = "/users/42?x=1"}), 0u) << "the query is not part of the path";
    EXPECT_EQ(route(r, {.target = "/users/42/"}), std::nullopt) << "the whole path";
    EXPECT_EQ(route(r, {.target = "/v1/users/42"}), std::nullopt);
    EXPECT_EQ(route(r, {.target = "/users/"}), std::nullopt);
}

TEST(RouterConditions, HandBuiltRegexRoutesAreCompiledByTheRouter)
{
    Policy p;
    p.listeners.push_back({"web", {}, {}});
    Route route;
    route.name = "r";
    route.match.path_kind = PathMatch::Regex;
    route.match.path = "/a+";
    p.routes.push_back(route);
    RbacRule rule;
    rule.when.path_kind = PathMatch::Regex;
    rule.when.path = "/b+";
    Rbac rbac;
    rbac.rules.push_back(rule);
    p.routes[0].rbac = rbac;
    const Router router(p);
    EXPECT_TRUE(router.policy().routes[0].match.path_regex);
    EXPECT_TRUE(router.policy().routes[0].rbac->rules[0].when.path_regex);
    EXPECT_EQ(router.route({"GET", "/aaa", {}, 0}), 0u);
    EXPECT_EQ(router.route({"GET", "/ab", {}, 0}), std::nullopt);
    // and evaluated without the Router: compiled on the spot
    EXPECT_TRUE(conditions_hold(rule.when, {"GET", "/bb", {}, 0}, nullptr));
    EXPECT_FALSE(conditions_hold(rule.when, {"GET", "/ba", {}, 0}, nullptr));
}

TEST(RouterConditions, ClaimsAreFetchedOnlyForAnOtherwiseMatchingRoute)
{
    Router r = router_for(route_with("path_prefix = \"/admin\"\nclaims = [ { name = \"role\", exact = \"admin\" }, "
                                     "{ name = \"sub\", present = true } ]",
                                     "jwt = \"idp\"\n") +
                          "[[route]]\nname = \"fallback\"\ncluster = \"app\"\n");
    int calls = 0;
    const Claims admin = claims({{"role", {"user", "admin"}}, {"sub", {"alice"}}});
    const Claims user = claims({{"role", {"user"}}, {"sub", {"bob"}}});
    const Claims no_sub = claims({{"role", {"admin"}}});
    const auto with = [&](const Claims* c) {
        return ClaimsLookup([&calls, c](const JwtProvider& p) {
            calls++;
            EXPECT_EQ(p.name, "idp");
            return c;
        });
    };
    EXPECT_EQ(route(r, {.target = "/public"}, with(&admin)), 1u);
    EXPECT_EQ(calls, 0) << "the path already fails: no verification";
    EXPECT_EQ(route(r, {.target = "/admin/x"}, with(&admin)), 0u) << "any element of an array";
    EXPECT_EQ(calls, 1);
    EXPECT_EQ(route(r, {.target = "/admin/x"}, with(&user)), 1u) << "falls through to the next route";
    EXPECT_EQ(route(r, {.target = "/admin/x"}, with(&no_sub)), 1u);
    EXPECT_EQ(route(r, {.target = "/admin/x"}, with(nullptr)), 1u) << "no valid token: no claim holds";
    EXPECT_EQ(route(r, {.target = "/admin/x"}), 1u) << "no lookup at all";
    EXPECT_TRUE(r.matches(0, Request{.target = "/admin"}.view(), with(&admin)));
}

TEST(RouterConditions, ClaimsEquals)
{
    const Claims c = claims({{"n", {"42"}}, {"b", {"true"}}, {"groups", {"a", "b"}}, {"obj", {}}});
    EXPECT_TRUE(c.equals("n", "42"));
    EXPECT_TRUE(c.equals("groups", "b"));
    EXPECT_FALSE(c.equals("groups", "a, b"));
    EXPECT_FALSE(c.equals("obj", ""));
    EXPECT_TRUE(c.has("obj"));
    EXPECT_FALSE(c.equals("missing", ""));
    EXPECT_FALSE(c.has("missing"));
}

TEST(RouterConditions, RequestKeys)
{
    Request rq{.headers = {{"X-User", "alice"},
                           {"x-user", "mallory"},
                           {"Cookie", "a=1; session=abc ;b"},
                           {"cookie", "session=later; c=\"q\""}},
               .client = "10.1.2.3"};
    const RequestView v = rq.view();
    const Claims c = claims({{"sub", {"s1", "s2"}}, {"empty", {}}});
    EXPECT_EQ(request_key({RequestKey::Kind::Header, "x-user"}, v, nullptr), "alice") << "the first line";
    EXPECT_EQ(request_key({RequestKey::Kind::Header, "x-none"}, v, nullptr), std::nullopt);
    EXPECT_EQ(request_key({RequestKey::Kind::Cookie, "session"}, v, nullptr), "abc") << "trimmed, the first cookie";
    EXPECT_EQ(request_key({RequestKey::Kind::Cookie, "c"}, v, nullptr), "\"q\"") << "as sent";
    EXPECT_EQ(request_key({RequestKey::Kind::Cookie, "b"}, v, nullptr), std::nullopt) << "no '='";
    EXPECT_EQ(request_key({RequestKey::Kind::Cookie, "Session"}, v, nullptr), std::nullopt) << "case-sensitive";
    EXPECT_EQ(request_key({RequestKey::Kind::SourceIp, ""}, v, nullptr), std::string("\x0a\x01\x02\x03", 4));
    EXPECT_EQ(request_key({RequestKey::Kind::Claim, "sub"}, v, &c), "s1");
    EXPECT_EQ(request_key({RequestKey::Kind::Claim, "empty"}, v, &c), std::nullopt);
    EXPECT_EQ(request_key({RequestKey::Kind::Claim, "sub"}, v, nullptr), std::nullopt);

    Request v6{.client = "2001:db8::1"};
    const std::optional<std::string> k6 = request_key({RequestKey::Kind::SourceIp, ""}, v6.view(), nullptr);
    ASSERT_TRUE(k6);
    EXPECT_EQ(k6->size(), 16u);
    Request mapped{.client = "::ffff:10.1.2.3"};
    EXPECT_EQ(request_key({RequestKey::Kind::SourceIp, ""}, mapped.view(), nullptr), std::string("\x0a\x01\x02\x03", 4));
    Request unknown{};
    EXPECT_EQ(request_key({RequestKey::Kind::SourceIp, ""}, unknown.view(), nullptr), std::nullopt);
}

// ---- RBAC ---------------------------------------------------------------------------

namespace {

Rbac rbac_of(const std::string& table, bool jwt = false)
{
    const Policy p = policy_for("[[route]]\nname = \"r\"\ncluster = \"app\"\n" +
                                std::string(jwt ? "jwt = \"idp\"\n" : "") + "[route.rbac]\n" + table + "\n");
    return p.routes.empty() || !p.routes[0].rbac ? Rbac{} : *p.routes[0].rbac;
}

RbacDecision decide(const Rbac& rbac, Request rq, const Claims* c = nullptr)
{
    return evaluate(rbac, rq.view(), c);
}

}  // namespace

TEST(Rbac, FirstMatchTakesTheFirstRuleThatHolds)
{
    const Rbac rbac = rbac_of(R"(rules = [
  { action = "allow", method = "GET", path_prefix = "/pub" },
  { action = "deny", path_prefix = "/pub/secret" },
  { action = "deny", source = "10.0.0.0/8" },
  { action = "allow", headers = [ { name = "x-admin", present = true } ] },
])");
    ASSERT_EQ(rbac.rules.size(), 4u);
    EXPECT_EQ(decide(rbac, {.target = "/pub/secret"}), (RbacDecision{true, 0})) << "an earlier allow wins";
    EXPECT_EQ(decide(rbac, {.method = "POST", .target = "/pub/secret"}), (RbacDecision{false, 1}));
    EXPECT_EQ(decide(rbac, {.target = "/x", .headers = {{"X-Admin", "1"}}, .client = "10.0.0.1"}),
              (RbacDecision{false, 2}));
    EXPECT_EQ(decide(rbac, {.target = "/x", .headers = {{"X-Admin", "1"}}, .client = "11.0.0.1"}),
              (RbacDecision{true, 3}));
    EXPECT_EQ(decide(rbac, {.target = "/x"}), (RbacDecision{true, -1})) << "the default (allow)";
}

TEST(Rbac, DenyOverridesAnyAllow)
{
    const Rbac rbac = rbac_of(R"(mode = "deny_overrides"
default = "deny"
rules = [
  { action = "allow", method = "GET", path_prefix = "/pub" },
  { name = "secret", action = "deny", path_prefix = "/pub/secret" },
  { action = "allow", query = [ { name = "token", exact = "t" } ] },
  { action = "deny", method = "DELETE" },
])");
    EXPECT_EQ(decide(rbac, {.target = "/pub/secret"}), (RbacDecision{false, 1})) << "deny despite the earlier allow";
    EXPECT_EQ(rbac.rules[1].name, "secret");
    EXPECT_EQ(decide(rbac, {.target = "/pub/a"}), (RbacDecision{true, 0}));
    EXPECT_EQ(decide(rbac, {.method = "POST", .target = "/x?token=t"}), (RbacDecision{true, 2}));
    EXPECT_EQ(decide(rbac, {.method = "DELETE", .target = "/x?token=t"}), (RbacDecision{false, 3}));
    EXPECT_EQ(decide(rbac, {.method = "POST", .target = "/x"}), (RbacDecision{false, -1})) << "the default (deny)";
}

TEST(Rbac, NoRulesMeansTheDefault)
{
    EXPECT_EQ(decide(rbac_of(""), {}), (RbacDecision{true, -1}));
    EXPECT_EQ(decide(rbac_of("default = \"deny\""), {}), (RbacDecision{false, -1}));
    EXPECT_EQ(decide(rbac_of("mode = \"deny_overrides\"\ndefault = \"deny\""), {}), (RbacDecision{false, -1}));
}

TEST(Rbac, ClaimRulesNeedTheVerifiedClaims)
{
    const Rbac rbac = rbac_of(R"(default = "deny"
rules = [
  { action = "allow", claims = [ { name = "scope", exact = "write" } ] },
  { action = "allow", method = "GET", claims = [ { name = "scope", present = true } ] },
])",
                              true);
    const Claims writer = claims({{"scope", {"read", "write"}}});
    const Claims reader = claims({{"scope", {"read"}}});
    EXPECT_EQ(decide(rbac, {.method = "POST"}, &writer), (RbacDecision{true, 0}));
    EXPECT_EQ(decide(rbac, {.method = "POST"}, &reader), (RbacDecision{false, -1}));
    EXPECT_EQ(decide(rbac, {.method = "GET"}, &reader), (RbacDecision{true, 1}));
    EXPECT_EQ(decide(rbac, {.method = "GET"}, nullptr), (RbacDecision{false, -1}));
}
