// PolicyLoader, the policy suite: JWT providers, RBAC, header mutation, rate
// limits, direct responses, hashing load balancers, query/source/claim/regex
// conditions. Valid policies, and every validation error with its exact
// message and position (docs/policy.md).
#include <gtest/gtest.h>

#include <sys/socket.h>

#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "loader/PolicyLoader.hpp"
#include "semantics/Router.hpp"

using namespace l7fast::policy;
namespace fs = std::filesystem;

namespace {

const fs::path kData = fs::path(L7FAST_TEST_DATA) / "policy";

// Six lines every case below is appended to: its own text starts on line 7.
constexpr const char* kBase =
    "[[listener]]\n"
    "name = \"web\"\n"
    "address = \"127.0.0.1:8080\"\n"
    "[[cluster]]\n"
    "name = \"app\"\n"
    "endpoints = [ { address = \"127.0.0.1:9001\" } ]\n";

constexpr const char* kSecret = "AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow";

std::string first_error(const std::string& text)
{
    PolicyLoadResult r = PolicyLoader::load_string(text, "t.toml");
    return r.ok() ? "(loaded without error)" : r.errors().front().str();
}

Policy load(const std::string& text)
{
    PolicyLoadResult r = PolicyLoader::load_string(kBase + text, "t.toml");
    if (!r.ok())
        ADD_FAILURE() << r.error_text();
    return r.ok() ? std::move(r).policy() : Policy{};
}

Cidr cidr(const std::string& text)
{
    return *Cidr::parse(text, nullptr);
}

}  // namespace

// ---- valid policies ------------------------------------------------------------------

TEST(PolicySuiteLoader, EveryKeyOfTheSuite)
{
    const fs::path file = kData / "suite.toml";
    PolicyLoadResult r = PolicyLoader::load(file, "");
    ASSERT_TRUE(r.ok()) << r.error_text();
    const Policy& p = r.policy();

    ASSERT_TRUE(p.daemon.metrics_address);
    EXPECT_EQ(p.daemon.metrics_address->str(), "127.0.0.1:9100");
    EXPECT_EQ(p.daemon.access_log_sample, 10u);

    ASSERT_EQ(p.clusters.size(), 4u);
    const Cluster& sticky = p.clusters[1];
    EXPECT_EQ(sticky.lb, LbPolicy::RingHash);
    EXPECT_EQ(sticky.hash_key, (RequestKey{RequestKey::Kind::Cookie, "session"}));
    EXPECT_EQ(sticky.ring_min_size, 64u);
    EXPECT_EQ(sticky.ring_max_size, 4096u);
    EXPECT_EQ(sticky.hash_balance_factor, 150u);
    EXPECT_EQ(sticky.endpoints[0].weight, 2u);
    EXPECT_EQ(sticky.endpoints[1].weight, 1u);
    const Cluster& maglev = p.clusters[2];
    EXPECT_EQ(maglev.lb, LbPolicy::Maglev);
    EXPECT_EQ(maglev.hash_key, (RequestKey{RequestKey::Kind::SourceIp, ""}));
    EXPECT_EQ(maglev.maglev_table_size, 251u);
    EXPECT_EQ(maglev.hash_balance_factor, 0u) << "off by default";
    EXPECT_EQ(p.clusters[3].hash_key, (RequestKey{RequestKey::Kind::Header, "x-user"})) << "lower-cased";
    EXPECT_EQ(p.clusters[3].maglev_table_size, 65537u) << "default";
    EXPECT_FALSE(p.clusters[0].hash_key);

    ASSERT_EQ(p.jwt_providers.size(), 3u);
    const JwtProvider& idp = p.jwt_providers[0];
    EXPECT_EQ(idp.name, "idp");
    EXPECT_EQ(idp.issuer, "https://idp.example");
    EXPECT_EQ(idp.audiences, (std::vector<std::string>{"api", "web"})) << "duplicates dropped";
    EXPECT_EQ(idp.algorithms, (std::vector<std::string>{"HS256", "RS256", "ES256"}));
    EXPECT_EQ(idp.jwks_file, "/etc/l7fast/idp.jwks");
    ASSERT_EQ(idp.keys.size(), 3u);
    EXPECT_EQ(idp.keys[0].kid, "hs");
    EXPECT_EQ(idp.keys[0].alg, "HS256");
    EXPECT_EQ(idp.keys[0].secret.size(), 64u) << "decoded";
    EXPECT_EQ(static_cast<unsigned char>(idp.keys[0].secret[0]), 0x03u);
    EXPECT_TRUE(idp.keys[0].pem.empty());
    EXPECT_EQ(idp.keys[1].alg, "RS256");
    EXPECT_TRUE(idp.keys[1].pem.starts_with("-----BEGIN PUBLIC KEY-----\n"));
    EXPECT_TRUE(idp.keys[1].secret.empty());
    EXPECT_EQ(idp.keys[2].kid, "") << "no kid";
    EXPECT_EQ(idp.keys[2].alg, "ES256");
    EXPECT_EQ(idp.keys[2].where.str(), file.string() + ":55:3");
    EXPECT_EQ(idp.from, (RequestKey{RequestKey::Kind::Header, "x-token"}));
    EXPECT_EQ(idp.from_prefix, "JWT ");
    EXPECT_EQ(idp.clock_skew.count(), 5);
    EXPECT_FALSE(idp.require_exp);
    EXPECT_EQ(idp.max_token_bytes, 8192u);
    ASSERT_EQ(idp.forward_claims.size(), 2u);
    EXPECT_EQ(idp.forward_claims[0].claim, "sub");
    EXPECT_EQ(idp.forward_claims[0].header, "x-user-id") << "lower-cased";
    EXPECT_EQ(idp.where.str(), file.string() + ":36:1");
    const JwtProvider& cookie = p.jwt_providers[1];
    EXPECT_EQ(cookie.from, (RequestKey{RequestKey::Kind::Cookie, "jwt"}));
    EXPECT_EQ(cookie.from_prefix, "");
    EXPECT_EQ(cookie.algorithms, std::vector<std::string>{"HS512"}) << "those of the keys";
    EXPECT_EQ(p.find_jwt_provider("cookie"), &p.jwt_providers[1]);
    EXPECT_EQ(p.find_jwt_provider("nope"), nullptr);

    ASSERT_EQ(p.routes.size(), 4u);
    const Route& admin = p.routes[0];
    EXPECT_EQ(admin.jwt, "idp");
    EXPECT_EQ(admin.timeout, std::chrono::milliseconds(2500));
    EXPECT_EQ(admin.connect_retries, 2u);
    EXPECT_FALSE(admin.direct_response);
    const RouteMatch& m = admin.match;
    EXPECT_EQ(m.path_kind, PathMatch::Regex);
    EXPECT_EQ(m.path, "/admin/[a-z]+");
    ASSERT_TRUE(m.path_regex) << "compiled by the loader";
    EXPECT_TRUE(m.path_regex->full_match("/admin/users"));
    EXPECT_FALSE(m.path_regex->full_match("/admin/users/1"));
    ASSERT_EQ(m.headers.size(), 2u);
    EXPECT_EQ(m.headers[0].name, "x-debug");
    EXPECT_EQ(m.headers[0].kind, HeaderCondition::Kind::Absent);
    EXPECT_EQ(m.headers[1].kind, HeaderCondition::Kind::Prefix);
    EXPECT_EQ(m.headers[1].value, "application/");
    ASSERT_EQ(m.query.size(), 2u);
    EXPECT_EQ(m.query[0].name, "v");
    EXPECT_EQ(m.query[0].kind, QueryCondition::Kind::Exact);
    EXPECT_EQ(m.query[0].value, "2");
    EXPECT_EQ(m.query[1].kind, QueryCondition::Kind::Present);
    EXPECT_EQ(m.sources, (std::vector<Cidr>{cidr("10.0.0.0/8"), cidr("fd00::/8"), cidr("192.168.1.7/32")}));
    ASSERT_EQ(m.claims.size(), 2u);
    EXPECT_EQ(m.claims[0].claim, "role");
    EXPECT_EQ(m.claims[0].kind, ClaimCondition::Kind::Exact);
    EXPECT_EQ(m.claims[0].value, "admin");
    EXPECT_EQ(m.claims[1].kind, ClaimCondition::Kind::Present);

    ASSERT_TRUE(admin.rbac);
    const Rbac& rbac = *admin.rbac;
    EXPECT_EQ(rbac.mode, Rbac::Mode::DenyOverrides);
    EXPECT_EQ(rbac.default_action, RbacRule::Action::Deny);
    EXPECT_EQ(rbac.deny_status, 404u);
    EXPECT_EQ(rbac.deny_body, "nope\n");
    ASSERT_EQ(rbac.rules.size(), 3u);
    EXPECT_EQ(rbac.rules[0].name, "writers");
    EXPECT_EQ(rbac.rules[0].action, RbacRule::Action::Allow);
    EXPECT_EQ(rbac.rules[0].when.methods, (std::vector<std::string>{"POST", "PUT"}));
    EXPECT_EQ(rbac.rules[0].when.claims[0].claim, "scope");
    EXPECT_EQ(rbac.rules[1].name, "rule1") << "default name";
    EXPECT_EQ(rbac.rules[1].action, RbacRule::Action::Deny);
    EXPECT_EQ(rbac.rules[1].when.path_kind, PathMatch::Prefix);
    EXPECT_EQ(rbac.rules[1].when.sources, std::vector<Cidr>{cidr("10.1.0.0/16")});
    EXPECT_EQ(rbac.rules[1].where.str(), file.string() + ":95:3");
    EXPECT_TRUE(rbac.rules[2].when.path_regex);
    EXPECT_EQ(rbac.rules[2].when.query[0].name, "ok");

    ASSERT_TRUE(admin.rate_limit);
    EXPECT_EQ(admin.rate_limit->rate, 50u);
    EXPECT_EQ(admin.rate_limit->burst, 100u);
    EXPECT_EQ(admin.rate_limit->key, (RequestKey{RequestKey::Kind::Claim, "sub"}));
    EXPECT_EQ(admin.rate_limit->max_keys, 1000u);

    EXPECT_EQ(admin.request_headers.remove, (std::vector<std::string>{"x-internal", "cookie"}));
    ASSERT_EQ(admin.request_headers.set.size(), 1u);
    EXPECT_EQ(admin.request_headers.set[0].name, "x-env");
    EXPECT_EQ(admin.request_headers.set[0].value, "prod");
    ASSERT_EQ(admin.request_headers.add.size(), 2u);
    EXPECT_EQ(admin.request_headers.add[1].name, "x-tag");
    EXPECT_EQ(admin.request_headers.add[1].value, "");
    EXPECT_EQ(admin.response_headers.remove, std::vector<std::string>{"server"});
    EXPECT_EQ(admin.response_headers.set[0].name, "x-frame-options");
    EXPECT_TRUE(admin.response_headers.add.empty());

    const Route& ping = p.routes[1];
    EXPECT_TRUE(ping.clusters.empty());
    ASSERT_TRUE(ping.direct_response);
    EXPECT_EQ(ping.direct_response->status, 200u);
    ASSERT_EQ(ping.direct_response->headers.size(), 1u);
    EXPECT_EQ(ping.direct_response->headers[0].name, "content-type");
    EXPECT_EQ(ping.direct_response->headers[0].value, "application/json");
    EXPECT_EQ(ping.direct_response->body, "{\"ok\":true}");
    ASSERT_TRUE(ping.rate_limit);
    EXPECT_EQ(ping.rate_limit->burst, 5u) << "burst defaults to rate";
    EXPECT_FALSE(ping.rate_limit->key);
    EXPECT_FALSE(ping.jwt);
    EXPECT_FALSE(ping.timeout);

    const Route& gone = p.routes[2];
    EXPECT_EQ(gone.direct_response->status, 410u);
    EXPECT_EQ(gone.direct_response->body, "");
    EXPECT_EQ(gone.rate_limit->key, (RequestKey{RequestKey::Kind::SourceIp, ""}));
    EXPECT_EQ(gone.rate_limit->max_keys, 65536u) << "default";
    EXPECT_EQ(p.routes[3].rate_limit->key, (RequestKey{RequestKey::Kind::Header, "x-api-key"}));
}

TEST(PolicySuiteLoader, JwtProviderDefaults)
{
    const Policy p = load(std::string("[[jwt_provider]]\nname = \"p\"\nkeys = [ { kid = \"k\", alg = \"HS256\", "
                                      "secret_base64url = \"") +
                          kSecret + "\" }, { kid = \"k2\", alg = \"HS512\", secret_base64url = \"" + kSecret +
                          "\" } ]\n");
    ASSERT_EQ(p.jwt_providers.size(), 1u);
    const JwtProvider& j = p.jwt_providers[0];
    EXPECT_FALSE(j.issuer);
    EXPECT_TRUE(j.audiences.empty());
    EXPECT_EQ(j.algorithms, (std::vector<std::string>{"HS256", "HS512"})) << "those of the keys, in order";
    EXPECT_EQ(j.from, (RequestKey{RequestKey::Kind::Header, "authorization"}));
    EXPECT_EQ(j.from_prefix, "Bearer ");
    EXPECT_EQ(j.clock_skew.count(), 60);
    EXPECT_TRUE(j.require_exp);
    EXPECT_EQ(j.max_token_bytes, 4096u);
    EXPECT_TRUE(j.verify_in_kernel);
    EXPECT_TRUE(j.jwks_file.empty());
    EXPECT_TRUE(j.forward_claims.empty());
}

TEST(PolicySuiteLoader, JwtProviderVerifiedInUserSpaceOnly)
{
    const Policy p = load(std::string("[[jwt_provider]]\nname = \"p\"\nkeys = [ { alg = \"HS256\", "
                                      "secret_base64url = \"") +
                          kSecret + "\" } ]\nverify_in_kernel = false\n");
    ASSERT_EQ(p.jwt_providers.size(), 1u);
    EXPECT_FALSE(p.jwt_providers[0].verify_in_kernel);
}

TEST(PolicySuiteLoader, TokenPrefixDependsOnTheHeader)
{
    const std::string keys = std::string("keys = [ { alg = \"HS256\", secret_base64url = \"") + kSecret + "\" } ]\n";
    const auto prefix = [&](const std::string& from) {
        const Policy p = load("[[jwt_provider]]\nname = \"p\"\n" + keys + "from = " + from + "\n");
        return p.jwt_providers.empty() ? std::string("(none)") : p.jwt_providers[0].from_prefix;
    };
    EXPECT_EQ(prefix("{ header = \"Authorization\" }"), "Bearer ");
    EXPECT_EQ(prefix("{ header = \"x-token\" }"), "");
    EXPECT_EQ(prefix("{ header = \"authorization\", prefix = \"\" }"), "");
    EXPECT_EQ(prefix("{ header = \"x-token\", prefix = \"Token \" }"), "Token ");
}

TEST(PolicySuiteLoader, DefaultsOfTheNewRouteKeys)
{
    const Policy p = load("[[route]]\nname = \"r\"\ncluster = \"app\"\n");
    ASSERT_EQ(p.routes.size(), 1u);
    const Route& r = p.routes[0];
    EXPECT_FALSE(r.jwt || r.rbac || r.rate_limit || r.direct_response || r.timeout);
    EXPECT_TRUE(r.request_headers.empty());
    EXPECT_TRUE(r.response_headers.empty());
    EXPECT_EQ(r.connect_retries, 0u);
    EXPECT_FALSE(p.daemon.metrics_address);
    EXPECT_EQ(p.daemon.access_log_sample, 0u);

    const Policy rbac = load("[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.rbac]\n");
    ASSERT_TRUE(rbac.routes[0].rbac);
    EXPECT_EQ(rbac.routes[0].rbac->mode, Rbac::Mode::FirstMatch);
    EXPECT_EQ(rbac.routes[0].rbac->default_action, RbacRule::Action::Allow);
    EXPECT_EQ(rbac.routes[0].rbac->deny_status, 403u);
    EXPECT_EQ(rbac.routes[0].rbac->deny_body, "forbidden\n");
}

TEST(PolicySuiteLoader, ProvidersAndRoutesInDifferentFiles)
{
    const std::vector<PolicySource> sources{
        {"main.toml", std::string(kBase) + "[[route]]\nname = \"r\"\ncluster = \"app\"\njwt = \"late\"\n"
                                           "request_headers = { set = [ { name = \"x-user\", value = \"v\" } ] }\n"},
        {"10.toml", std::string("[[jwt_provider]]\nname = \"late\"\nkeys = [ { alg = \"HS256\", secret_base64url = \"") +
                        kSecret + "\" } ]\nforward_claims = [ { claim = \"sub\", header = \"x-user\" } ]\n"},
    };
    PolicyLoadResult r = PolicyLoader::load_sources(sources);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error_text(), "main.toml:10:7: route \"r\".jwt: jwt_provider \"late\" forwards claim \"sub\" in header "
                              "\"x-user\", which this route's request_headers also changes; use another header\n");
    std::vector<PolicySource> fixed = sources;
    fixed[0].text = std::string(kBase) + "[[route]]\nname = \"r\"\ncluster = \"app\"\njwt = \"late\"\n";
    PolicyLoadResult ok = PolicyLoader::load_sources(fixed);
    ASSERT_TRUE(ok.ok()) << ok.error_text();
    EXPECT_EQ(ok.policy().jwt_providers[0].name, "late");
}

// ---- errors that do not fit the table -------------------------------------------------

TEST(PolicySuiteLoader, InvalidRegexPointsAtTheByte)
{
    // the engine decides the reason and the offset; the loader turns the
    // offset into the column of that byte
    const std::string text = std::string(kBase) + "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\n"
                                                  "path_regex = \"/a/(b\"\n";
    const std::string e = first_error(text);
    std::smatch m;
    ASSERT_TRUE(std::regex_match(e, m, std::regex(R"(t\.toml:11:(\d+): route "r"\.match\.path_regex: "/a/\(b" is not a )"
                                                  R"(valid regular expression: .+ \(at byte (\d+)\))")))
        << e;
    const int column = std::stoi(m[1]);
    const int offset = std::stoi(m[2]);
    EXPECT_LE(offset, 5);
    EXPECT_EQ(column, 14 + 1 + offset) << "the value starts at column 14";

    // with an escape in the string the byte cannot be located: the value's position
    const std::string escaped = std::string(kBase) + "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\n"
                                                     "path_regex = \"/\\u0061/(b\"\n";
    EXPECT_TRUE(first_error(escaped).starts_with("t.toml:11:14: ")) << first_error(escaped);
}

TEST(PolicySuiteLoader, OversizedValues)
{
    const std::string route = std::string(kBase) + "[[route]]\nname = \"r\"\n";
    EXPECT_EQ(first_error(route + "cluster = \"app\"\n[route.match]\npath_regex = \"" + std::string(1025, 'a') + "\"\n"),
              "t.toml:11:14: route \"r\".match.path_regex: the pattern is 1025 bytes long; at most 1024");
    EXPECT_EQ(first_error(route + "[route.direct_response]\nbody = \"" + std::string(65537, 'b') + "\"\n"),
              "t.toml:10:8: route \"r\".direct_response.body: the body is 65537 bytes long; at most 65536");
    EXPECT_EQ(first_error(route + "cluster = \"app\"\n[route.request_headers]\nset = [ { name = \"x\", value = \"" +
                          std::string(4097, 'v') + "\" } ]\n"),
              "t.toml:11:31: route \"r\".request_headers.set[0].value: the value is 4097 bytes long; at most 4096");
    std::string many = route + "cluster = \"app\"\n[route.request_headers]\nremove = [";
    for (int i = 0; i < 65; i++)
        many += "\"x-" + std::to_string(i) + "\", ";
    EXPECT_EQ(first_error(many + "]\n"), "t.toml:11:10: route \"r\".request_headers.remove: 65 entries; at most 64");
}

// ---- every validation error: exact message, exact position -------------------------

struct SuiteErrorCase {
    const char* name;
    const char* toml;      // appended to kBase: its first line is line 7
    const char* expected;  // the first error's str()
};

void PrintTo(const SuiteErrorCase& c, std::ostream* os)
{
    *os << c.name;
}

class PolicySuiteLoaderError : public testing::TestWithParam<SuiteErrorCase> {};

TEST_P(PolicySuiteLoaderError, FirstErrorIsExact)
{
    EXPECT_EQ(first_error(kBase + std::string(GetParam().toml)), GetParam().expected);
}

// clang-format off
const SuiteErrorCase kSuiteErrorCases[] = {
    // [daemon]
    {"metrics_address_name", "[daemon]\nmetrics_address = \"localhost:9100\"\n",
     "t.toml:8:19: daemon.metrics_address: \"localhost\" is not an IP address (names are not resolved; write "
     "e.g. \"127.0.0.1\")"},
    {"metrics_address_overlaps_listener", "[daemon]\nmetrics_address = \"0.0.0.0:8080\"\n",
     "t.toml:8:19: daemon.metrics_address: 0.0.0.0:8080 overlaps listener \"web\" on 127.0.0.1:8080 "
     "(t.toml:3:11); give the metrics listener its own port"},
    {"access_log_sample_negative", "[daemon]\naccess_log_sample = -1\n",
     "t.toml:8:21: daemon.access_log_sample: -1 is out of range 0..1000000 (log one request in N; 1 logs "
     "every request, 0 none)"},

    // clusters: hashing load balancers
    {"ring_hash_without_key", "[[cluster]]\nname = \"b\"\nlb = \"ring_hash\"\nendpoints = [ { address = \"127.0.0.1:9002\" } ]\n",
     "t.toml:7:1: cluster \"b\".hash_key: missing; lb = \"ring_hash\" hashes a request key, e.g. hash_key = "
     "{ header = \"x-user\" }, { cookie = \"session\" } or { source_ip = true }"},
    {"hash_key_on_round_robin", "[[cluster]]\nname = \"b\"\nhash_key = { source_ip = true }\nendpoints = [ { address = "
     "\"127.0.0.1:9002\" } ]\n",
     "t.toml:9:12: cluster \"b\".hash_key: only applies with lb = \"ring_hash\" or \"maglev\" (this cluster "
     "is round_robin)"},
    {"hash_key_claim", "[[cluster]]\nname = \"b\"\nlb = \"maglev\"\nhash_key = { claim = \"sub\" }\nendpoints = [ { address = "
     "\"127.0.0.1:9002\" } ]\n",
     "t.toml:10:22: cluster \"b\".hash_key.claim: a claim cannot choose the endpoint (only rate limits are "
     "keyed by claims); use a header, a cookie or source_ip"},
    {"hash_key_two_kinds", "[[cluster]]\nname = \"b\"\nlb = \"maglev\"\nhash_key = { header = \"x\", cookie = \"c\" }\nendpoints = "
     "[ { address = \"127.0.0.1:9002\" } ]\n",
     "t.toml:10:37: cluster \"b\".hash_key.cookie: give only one of \"header\", \"cookie\" and \"source_ip = "
     "true\""},
    {"hash_key_empty", "[[cluster]]\nname = \"b\"\nlb = \"maglev\"\nhash_key = {}\nendpoints = [ { address = "
     "\"127.0.0.1:9002\" } ]\n",
     "t.toml:10:12: cluster \"b\".hash_key: needs one of \"header\", \"cookie\" or \"source_ip = true\""},
    {"hash_key_source_ip_false", "[[cluster]]\nname = \"b\"\nlb = \"maglev\"\nhash_key = { source_ip = false }\nendpoints = [ { address "
     "= \"127.0.0.1:9002\" } ]\n",
     "t.toml:10:26: cluster \"b\".hash_key.source_ip: source_ip = false selects nothing; write source_ip = "
     "true or another key"},
    {"hash_key_bad_header", "[[cluster]]\nname = \"b\"\nlb = \"ring_hash\"\nhash_key = { header = \"x user\" }\nendpoints = [ { "
     "address = \"127.0.0.1:9002\" } ]\n",
     "t.toml:10:23: cluster \"b\".hash_key.header: \"x user\" is not a header field name (RFC 9110 token: "
     "letters, digits and !#$%&'*+-.^_`|~)"},
    {"hash_key_bad_cookie", "[[cluster]]\nname = \"b\"\nlb = \"ring_hash\"\nhash_key = { cookie = \"a;b\" }\nendpoints = [ { "
     "address = \"127.0.0.1:9002\" } ]\n",
     "t.toml:10:23: cluster \"b\".hash_key.cookie: \"a;b\" is not a cookie name (RFC 6265: a token)"},
    {"hash_key_unknown", "[[cluster]]\nname = \"b\"\nlb = \"ring_hash\"\nhash_key = { query = \"a\" }\nendpoints = [ { address = "
     "\"127.0.0.1:9002\" } ]\n",
     "t.toml:10:12: cluster \"b\".hash_key: needs one of \"header\", \"cookie\" or \"source_ip = true\""},
    {"ring_min_above_max", "[[cluster]]\nname = \"b\"\nlb = \"ring_hash\"\nhash_key = { source_ip = true }\nring_min_size = "
     "4096\nring_max_size = 1024\nendpoints = [ { address = \"127.0.0.1:9002\" } ]\n",
     "t.toml:11:17: cluster \"b\".ring_min_size: ring_min_size (4096) is more than ring_max_size (1024)"},
    {"ring_max_too_big", "[[cluster]]\nname = \"b\"\nlb = \"ring_hash\"\nhash_key = { source_ip = true }\nring_max_size = "
     "8388609\nendpoints = [ { address = \"127.0.0.1:9002\" } ]\n",
     "t.toml:11:17: cluster \"b\".ring_max_size: 8388609 is out of range 1..8388608"},
    {"ring_size_on_maglev", "[[cluster]]\nname = \"b\"\nlb = \"maglev\"\nhash_key = { source_ip = true }\nring_min_size = "
     "16\nendpoints = [ { address = \"127.0.0.1:9002\" } ]\n",
     "t.toml:11:17: cluster \"b\".ring_min_size: only applies with lb = \"ring_hash\" (this cluster is "
     "maglev)"},
    {"maglev_size_on_ring_hash", "[[cluster]]\nname = \"b\"\nlb = \"ring_hash\"\nhash_key = { source_ip = true }\nmaglev_table_size = "
     "13\nendpoints = [ { address = \"127.0.0.1:9002\" } ]\n",
     "t.toml:11:21: cluster \"b\".maglev_table_size: only applies with lb = \"maglev\" (this cluster is "
     "ring_hash)"},
    {"maglev_not_prime", "[[cluster]]\nname = \"b\"\nlb = \"maglev\"\nhash_key = { source_ip = true }\nmaglev_table_size = "
     "65536\nendpoints = [ { address = \"127.0.0.1:9002\" } ]\n",
     "t.toml:11:21: cluster \"b\".maglev_table_size: 65536 is not a prime number (Maglev's table size must "
     "be prime, e.g. 65537)"},
    {"maglev_table_too_small", "[[cluster]]\nname = \"b\"\nlb = \"maglev\"\nhash_key = { source_ip = true }\nmaglev_table_size = "
     "3\nendpoints = [ { address = \"127.0.0.1:9002\" }, { address = \"127.0.0.1:9003\" }, { address = "
     "\"127.0.0.1:9004\" } ]\n",
     "t.toml:11:21: cluster \"b\".maglev_table_size: maglev_table_size (3) must be larger than the number of "
     "endpoints (3)"},
    {"hash_balance_factor_low", "[[cluster]]\nname = \"b\"\nlb = \"ring_hash\"\nhash_key = { source_ip = true }\nhash_balance_factor = "
     "99\nendpoints = [ { address = \"127.0.0.1:9002\" } ]\n",
     "t.toml:11:23: cluster \"b\".hash_balance_factor: 99 is out of range 100..10000 (percent of the average "
     "load one endpoint may take; omit it for no bound)"},
    {"hash_balance_factor_on_weighted", "[[cluster]]\nname = \"b\"\nlb = \"weighted\"\nhash_balance_factor = 150\nendpoints = [ { address = "
     "\"127.0.0.1:9002\" } ]\n",
     "t.toml:10:23: cluster \"b\".hash_balance_factor: only applies with lb = \"ring_hash\" or \"maglev\" "
     "(this cluster is weighted)"},
    {"maglev_weight_zero", "[[cluster]]\nname = \"b\"\nlb = \"maglev\"\nhash_key = { source_ip = true }\nendpoints = [ { address = "
     "\"127.0.0.1:9002\", weight = 0 } ]\n",
     "t.toml:11:54: cluster \"b\".endpoints[0].weight: 0 is out of range 1..65535 (a hashing cluster cannot leave "
     "an endpoint out; remove it instead)"},

    // paths
    {"path_regex_and_prefix", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\npath_prefix = \"/a\"\npath_regex = "
     "\"/a.*\"\n",
     "t.toml:12:14: route \"r\".match.path_regex: give at most one of \"path_exact\", \"path_prefix\" and "
     "\"path_regex\""},
    {"path_regex_empty", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\npath_regex = \"\"\n",
     "t.toml:11:14: route \"r\".match.path_regex: empty; omit \"path_regex\" to match any path"},

    // header conditions
    {"header_prefix_empty", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\nheaders = [ { name = \"x\", prefix = \"\" } "
     "]\n",
     "t.toml:11:36: route \"r\".match.headers[0].prefix: an empty prefix matches every value; write present "
     "= true"},
    {"header_prefix_leading_space", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\nheaders = [ { name = \"x\", prefix = \" a\" "
     "} ]\n",
     "t.toml:11:36: route \"r\".match.headers[0].prefix: \" a\" starts with whitespace, which is removed "
     "from requests before comparing, so it could never match"},
    {"header_prefix_control", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\nheaders = [ { name = \"x\", prefix = "
     "\"a\\u0000\" } ]\n",
     "t.toml:11:36: route \"r\".match.headers[0].prefix: \"a\\x00\" contains byte 0x00, which no valid "
     "request carries"},
    {"header_absent_false", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\nheaders = [ { name = \"x\", absent = false "
     "} ]\n",
     "t.toml:11:36: route \"r\".match.headers[0].absent: absent = false is not a condition; write present = "
     "true to match requests with the header"},
    {"header_prefix_and_absent", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\nheaders = [ { name = \"x\", prefix = \"a\", "
     "absent = true } ]\n",
     "t.toml:11:50: route \"r\".match.headers[0].absent: give only one of \"exact\", \"prefix\", \"present\" "
     "and \"absent\""},
    {"header_duplicate", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\nheaders = [ { name = \"X-A\", present = "
     "true }, { name = \"x-a\", absent = true } ]\n",
     "t.toml:11:56: route \"r\".match.headers[1].name: header \"x-a\" already has a condition in headers[0]; "
     "a route takes one condition per header"},

    // query conditions
    {"query_name_with_equals", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\nquery = [ { name = \"a=b\", present = true "
     "} ]\n",
     "t.toml:11:20: route \"r\".match.query[0].name: \"a=b\" contains '=', which cannot be part of a "
     "parameter's name"},
    {"query_name_empty", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\nquery = [ { name = \"\", present = true } "
     "]\n",
     "t.toml:11:20: route \"r\".match.query[0].name: empty; give the parameter's name"},
    {"query_value_with_space", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\nquery = [ { name = \"q\", exact = \"a b\" } "
     "]\n",
     "t.toml:11:33: route \"r\".match.query[0].exact: \"a b\" contains a space: query parameters are "
     "compared byte for byte as sent; percent-encode it (e.g. %20)"},
    {"query_value_with_ampersand", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\nquery = [ { name = \"q\", exact = \"a&b\" } "
     "]\n",
     "t.toml:11:33: route \"r\".match.query[0].exact: \"a&b\" contains '&', which cannot be part of a "
     "parameter's value"},
    {"query_present_false", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\nquery = [ { name = \"q\", present = false } "
     "]\n",
     "t.toml:11:35: route \"r\".match.query[0].present: present = false (match when the parameter is absent) "
     "is not supported; put an earlier route with present = true instead"},
    {"query_neither", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\nquery = [ { name = \"q\" } ]\n",
     "t.toml:11:11: route \"r\".match.query[0]: needs exactly one of \"exact\" (a value) or \"present = "
     "true\""},
    {"query_both", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\nquery = [ { name = \"q\", exact = \"1\", "
     "present = true } ]\n",
     "t.toml:11:48: route \"r\".match.query[0].present: give either \"exact\" or \"present\", not both"},
    {"query_duplicate", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\nquery = [ { name = \"q\", present = true }, "
     "{ name = \"q\", exact = \"1\" } ]\n",
     "t.toml:11:52: route \"r\".match.query[1].name: parameter \"q\" already has a condition in query[0]; a "
     "route takes one condition per parameter"},
    {"query_empty", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\nquery = []\n",
     "t.toml:11:9: route \"r\".match.query: empty list; omit \"query\" to match any query"},
    {"query_unknown_key", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\nquery = [ { name = \"q\", prefix = \"1\" } "
     "]\n",
     "t.toml:11:11: route \"r\".match.query[0]: needs exactly one of \"exact\" (a value) or \"present = "
     "true\""},

    // source conditions
    {"source_host_bits", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\nsource = \"10.1.2.3/8\"\n",
     "t.toml:11:10: route \"r\".match.source: \"10.1.2.3/8\" has bits set after the first 8; write "
     "\"10.0.0.0/8\""},
    {"source_not_an_address", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\nsource = [\"10.0.0.0/8\", \"example.com\"]\n",
     "t.toml:11:25: route \"r\".match.source[1]: \"example.com\" is not an IPv4 or IPv6 address (write e.g. "
     "\"10.0.0.0/8\" or \"fd00::/8\")"},
    {"source_prefix_too_long", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\nsource = \"10.0.0.0/33\"\n",
     "t.toml:11:10: route \"r\".match.source: prefix length \"33\" is not a number in 0..32"},
    {"source_prefix_not_a_number", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\nsource = \"fd00::/x\"\n",
     "t.toml:11:10: route \"r\".match.source: prefix length \"x\" is not a number in 0..128"},
    {"source_v4_mapped", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\nsource = \"::ffff:10.0.0.0/104\"\n",
     "t.toml:11:10: route \"r\".match.source: \"::ffff:10.0.0.0/104\" is an IPv4-mapped prefix: clients' "
     "IPv4-mapped addresses are compared as IPv4, so write the IPv4 prefix"},
    {"source_empty", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\nsource = []\n",
     "t.toml:11:10: route \"r\".match.source: empty list; omit \"source\" to match any client"},
    {"source_number", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\nsource = 10\n",
     "t.toml:11:10: route \"r\".match.source: expected a string or an array of strings, got an integer"},

    // claim conditions
    {"claims_without_jwt", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.match]\nclaims = [ { name = \"role\", exact = "
     "\"admin\" } ]\n",
     "t.toml:11:10: route \"r\".match.claims: claims come from the route's verified token: add jwt = "
     "\"<provider>\" to the route"},
    {"claims_duplicate", "[[jwt_provider]]\nname = \"p\"\nkeys = [ { alg = \"HS256\", secret_base64url = "
     "\"AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow\" } "
     "]\n[[route]]\nname = \"r\"\ncluster = \"app\"\njwt = \"p\"\n[route.match]\nclaims = [ { name = "
     "\"role\", present = true }, { name = \"role\", exact = \"a\" } ]\n",
     "t.toml:15:56: route \"r\".match.claims[1].name: claim \"role\" already has a condition in claims[0]; "
     "give one condition per claim"},
    {"claims_present_false", "[[jwt_provider]]\nname = \"p\"\nkeys = [ { alg = \"HS256\", secret_base64url = "
     "\"AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow\" } "
     "]\n[[route]]\nname = \"r\"\ncluster = \"app\"\njwt = \"p\"\n[route.match]\nclaims = [ { name = "
     "\"role\", present = false } ]\n",
     "t.toml:15:39: route \"r\".match.claims[0].present: present = false (match when the claim is absent) is "
     "not supported"},
    {"claims_name_control", "[[jwt_provider]]\nname = \"p\"\nkeys = [ { alg = \"HS256\", secret_base64url = "
     "\"AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow\" } "
     "]\n[[route]]\nname = \"r\"\ncluster = \"app\"\njwt = \"p\"\n[route.match]\nclaims = [ { name = "
     "\"a\\tb\", present = true } ]\n",
     "t.toml:15:21: route \"r\".match.claims[0].name: \"a\\x09b\" contains a tab"},

    // routes
    {"jwt_unknown_provider", "[[jwt_provider]]\nname = \"p\"\nkeys = [ { alg = \"HS256\", secret_base64url = "
     "\"AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow\" } "
     "]\n[[route]]\nname = \"r\"\ncluster = \"app\"\njwt = \"q\"\n",
     "t.toml:13:7: route \"r\".jwt: no jwt_provider named \"q\" (did you mean \"p\"?)"},
    {"jwt_not_a_name", "[[route]]\nname = \"r\"\ncluster = \"app\"\njwt = \"a b\"\n",
     "t.toml:10:7: route \"r\".jwt: \"a b\" is not a valid name: use 1..64 letters, digits, '.', '_' or '-'"},
    {"direct_response_with_cluster", "[[route]]\nname = \"r\"\ncluster = \"app\"\ndirect_response = { status = 200 }\n",
     "t.toml:10:19: route \"r\".direct_response: give either \"direct_response\" or \"cluster\", not both: a "
     "direct response is not forwarded"},
    {"direct_response_with_request_headers", "[[route]]\nname = \"r\"\ndirect_response = { status = 200 }\nrequest_headers = { remove = [\"x\"] }\n",
     "t.toml:10:19: route \"r\".request_headers: has no effect with \"direct_response\": nothing is "
     "forwarded; remove it"},
    {"direct_response_with_timeout", "[[route]]\nname = \"r\"\ndirect_response = { status = 200 }\ntimeout_ms = 5\n",
     "t.toml:10:14: route \"r\".timeout_ms: has no effect with \"direct_response\": nothing is forwarded; "
     "remove it"},
    {"direct_response_status_1xx", "[[route]]\nname = \"r\"\ndirect_response = { status = 101 }\n",
     "t.toml:9:30: route \"r\".direct_response.status: 101 is out of range 200..599 (a final status; 1xx are "
     "interim)"},
    {"direct_response_204_body", "[[route]]\nname = \"r\"\ndirect_response = { status = 204, body = \"x\" }\n",
     "t.toml:9:42: route \"r\".direct_response.body: a 204 response has no body; remove \"body\""},
    {"direct_response_content_length", "[[route]]\nname = \"r\"\n[route.direct_response]\nheaders = [ { name = \"Content-Length\", value = "
     "\"3\" } ]\n",
     "t.toml:10:22: route \"r\".direct_response.headers[0].name: \"content-length\" cannot be changed: "
     "l7fast writes the framing and connection fields itself (host, content-length, transfer-encoding, "
     "connection, keep-alive, proxy-connection, te, trailer, upgrade)"},
    {"direct_response_header_crlf", "[[route]]\nname = \"r\"\n[route.direct_response]\nheaders = [ { name = \"x\", value = "
     "\"a\\r\\nSet-Cookie: x\" } ]\n",
     "t.toml:10:35: route \"r\".direct_response.headers[0].value: \"a\\x0D\\x0ASet-Cookie: x\" contains byte "
     "0x0D: field values cannot hold control characters other than tab"},
    {"direct_response_unknown", "[[route]]\nname = \"r\"\n[route.direct_response]\ncode = 200\n",
     "t.toml:10:1: route \"r\".direct_response.code: unknown key (did you mean \"body\"?); allowed here: "
     "status, headers, body"},
    {"timeout_ms_zero", "[[route]]\nname = \"r\"\ncluster = \"app\"\ntimeout_ms = 0\n",
     "t.toml:10:14: route \"r\".timeout_ms: 0 is out of range 1..86400000 (milliseconds, at most one day)"},
    {"connect_retries_too_many", "[[route]]\nname = \"r\"\ncluster = \"app\"\nconnect_retries = 17\n",
     "t.toml:10:19: route \"r\".connect_retries: 17 is out of range 0..16 (other endpoints tried)"},

    // [route.rbac]
    {"rbac_mode_unknown", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.rbac]\nmode = \"any\"\n",
     "t.toml:11:8: route \"r\".rbac.mode: \"any\" is not an RBAC mode; use \"first_match\" or "
     "\"deny_overrides\""},
    {"rbac_default_unknown", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.rbac]\ndefault = \"maybe\"\n",
     "t.toml:11:11: route \"r\".rbac.default: \"maybe\" is not an action; use \"allow\" or \"deny\""},
    {"rbac_deny_status_redirect", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.rbac]\ndeny_status = 302\n",
     "t.toml:11:15: route \"r\".rbac.deny_status: 302 is out of range 400..599 (a client or server error "
     "status)"},
    {"rbac_rules_empty", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.rbac]\nrules = []\n",
     "t.toml:11:9: route \"r\".rbac.rules: empty list; omit \"rules\" to let \"default\" decide every request"},
    {"rbac_rule_without_action", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.rbac]\nrules = [ { path_prefix = \"/a\" } ]\n",
     "t.toml:11:11: route \"r\".rbac.rules[0].action: missing; give action = \"allow\" or \"deny\""},
    {"rbac_rule_bad_action", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.rbac]\nrules = [ { action = \"permit\" } ]\n",
     "t.toml:11:22: route \"r\".rbac.rules[0].action: \"permit\" is not an action; use \"allow\" or \"deny\""},
    {"rbac_rule_duplicate_name", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.rbac]\nrules = [ { name = \"a\", action = \"allow\" "
     "}, { name = \"a\", action = \"deny\" } ]\n",
     "t.toml:11:54: route \"r\".rbac.rules[1].name: rule name \"a\" is already used by rules[0]"},
    {"rbac_rule_host", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.rbac]\nrules = [ { action = \"deny\", host = "
     "\"a.example\" } ]\n",
     "t.toml:11:30: route \"r\".rbac.rules[0].host: unknown key; allowed here: name, action, method, "
     "path_exact, path_prefix, path_regex, headers, query, source, claims"},
    {"rbac_rule_claims_without_jwt", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[[route.rbac.rules]]\naction = \"allow\"\nclaims = [ { "
     "name = \"scope\", present = true } ]\n",
     "t.toml:12:10: route \"r\".rbac.rules[0].claims: claims come from the route's verified token: add jwt = "
     "\"<provider>\" to the route"},
    {"rbac_rule_bad_method", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.rbac]\nrules = [ { action = \"deny\", method = "
     "\"delete\" } ]\n",
     "t.toml:11:39: route \"r\".rbac.rules[0].method: \"delete\": methods are case-sensitive and l7fast only "
     "routes upper-case ones; write \"DELETE\""},

    // [route.rate_limit]
    {"rate_limit_without_rate", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.rate_limit]\nburst = 5\n",
     "t.toml:10:1: route \"r\".rate_limit.rate: missing; give the requests per second, e.g. rate = 100"},
    {"rate_limit_rate_zero", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.rate_limit]\nrate = 0\n",
     "t.toml:11:8: route \"r\".rate_limit.rate: 0 is out of range 1..1000000 (requests per second)"},
    {"rate_limit_burst_too_big", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.rate_limit]\nrate = 1\nburst = 1000001\n",
     "t.toml:12:9: route \"r\".rate_limit.burst: 1000001 is out of range 1..1000000 (requests admitted at "
     "once)"},
    {"rate_limit_max_keys_without_key", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.rate_limit]\nrate = 1\nmax_keys = 10\n",
     "t.toml:12:12: route \"r\".rate_limit.max_keys: only applies with a \"key\" (without one every request "
     "shares one bucket)"},
    {"rate_limit_claim_without_jwt", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.rate_limit]\nrate = 1\nkey = { claim = \"sub\" }\n",
     "t.toml:12:17: route \"r\".rate_limit.key.claim: claims come from the route's verified token: add jwt = "
     "\"<provider>\" to the route"},
    {"rate_limit_key_string", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.rate_limit]\nrate = 1\nkey = \"source_ip\"\n",
     "t.toml:12:7: route \"r\".rate_limit.key: expected a table, got a string"},

    // header mutations
    {"mutation_remove_reserved", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.request_headers]\nremove = [\"x-a\", "
     "\"Connection\"]\n",
     "t.toml:11:18: route \"r\".request_headers.remove[1]: \"connection\" cannot be changed: l7fast writes "
     "the framing and connection fields itself (host, content-length, transfer-encoding, connection, "
     "keep-alive, proxy-connection, te, trailer, upgrade)"},
    {"mutation_remove_twice", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.request_headers]\nremove = [\"x-a\", \"X-A\"]\n",
     "t.toml:11:18: route \"r\".request_headers.remove[1]: \"x-a\" is listed twice"},
    {"mutation_set_reserved", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.request_headers]\nset = [ { name = \"Host\", value "
     "= \"x\" } ]\n",
     "t.toml:11:18: route \"r\".request_headers.set[0].name: \"host\" cannot be changed: l7fast writes the "
     "framing and connection fields itself (host, content-length, transfer-encoding, connection, keep-alive, "
     "proxy-connection, te, trailer, upgrade)"},
    {"mutation_set_crlf", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.request_headers]\nset = [ { name = \"x\", value = "
     "\"a\\r\\nb\" } ]\n",
     "t.toml:11:31: route \"r\".request_headers.set[0].value: \"a\\x0D\\x0Ab\" contains byte 0x0D: field "
     "values cannot hold control characters other than tab"},
    {"mutation_set_nul", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.request_headers]\nset = [ { name = \"x\", value = "
     "\"a\\u0000\" } ]\n",
     "t.toml:11:31: route \"r\".request_headers.set[0].value: \"a\\x00\" contains byte 0x00: field values "
     "cannot hold control characters other than tab"},
    {"mutation_set_padded", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.request_headers]\nset = [ { name = \"x\", value = "
     "\" a\" } ]\n",
     "t.toml:11:31: route \"r\".request_headers.set[0].value: \" a\" has leading or trailing whitespace, "
     "which recipients remove"},
    {"mutation_set_twice", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.request_headers]\nset = [ { name = \"x\", value = "
     "\"1\" }, { name = \"X\", value = \"2\" } ]\n",
     "t.toml:11:47: route \"r\".request_headers.set[1].name: \"x\" is set twice; set writes one line (use "
     "add for more)"},
    {"mutation_removed_and_set", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.request_headers]\nremove = [\"x\"]\nset = [ { name "
     "= \"x\", value = \"1\" } ]\n",
     "t.toml:12:18: route \"r\".request_headers.set[0].name: \"x\" is both removed and set; set already "
     "replaces every line of it"},
    {"mutation_set_without_value", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.request_headers]\nset = [ { name = \"x\" } ]\n",
     "t.toml:11:9: route \"r\".request_headers.set[0].value: missing; give the header's value (it may be "
     "empty)"},
    {"mutation_add_bad_name", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.request_headers]\nadd = [ { name = \"x y\", value = "
     "\"1\" } ]\n",
     "t.toml:11:18: route \"r\".request_headers.add[0].name: \"x y\" is not a header field name (RFC 9110 "
     "token: letters, digits and !#$%&'*+-.^_`|~)"},
    {"mutation_response_add", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.response_headers]\nadd = [ { name = \"x\", value = "
     "\"1\" } ]\n",
     "t.toml:11:7: route \"r\".response_headers.add: responses take only \"set\" and \"remove\": a response "
     "header is replaced, not repeated"},
    {"mutation_response_reserved", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.response_headers]\nremove = "
     "[\"transfer-encoding\"]\n",
     "t.toml:11:11: route \"r\".response_headers.remove[0]: \"transfer-encoding\" cannot be changed: l7fast "
     "writes the framing and connection fields itself (host, content-length, transfer-encoding, connection, "
     "keep-alive, proxy-connection, te, trailer, upgrade)"},
    {"mutation_unknown", "[[route]]\nname = \"r\"\ncluster = \"app\"\n[route.request_headers]\nappend = []\n",
     "t.toml:11:1: route \"r\".request_headers.append: unknown key; allowed here: remove, set, add"},
    {"mutation_forwarded_claim_conflict", "[[jwt_provider]]\nname = \"p\"\nkeys = [ { alg = \"HS256\", secret_base64url = "
     "\"AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow\" } "
     "]\nforward_claims = [ { claim = \"sub\", header = \"x-user\" } ]\n[[route]]\nname = \"r\"\ncluster = "
     "\"app\"\njwt = \"p\"\nrequest_headers = { remove = [\"X-User\"] }\n",
     "t.toml:14:7: route \"r\".jwt: jwt_provider \"p\" forwards claim \"sub\" in header \"x-user\", which "
     "this route's request_headers also changes; use another header"},

    // [[jwt_provider]]
    {"jwt_without_keys", "[[jwt_provider]]\nname = \"p\"\n",
     "t.toml:7:1: jwt_provider \"p\".keys: missing; a provider needs inline \"keys\" or a \"jwks_file\""},
    {"jwt_name_missing", "[[jwt_provider]]\nkeys = [ { alg = \"HS256\", secret_base64url = "
     "\"AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow\" } ]\n",
     "t.toml:7:1: jwt_provider[0].name: missing; every jwt_provider needs a unique name"},
    {"jwt_duplicate_name", "[[jwt_provider]]\nname = \"p\"\nkeys = [ { alg = \"HS256\", secret_base64url = "
     "\"AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow\" } "
     "]\n[[jwt_provider]]\nname = \"p\"\nkeys = [ { alg = \"HS256\", secret_base64url = "
     "\"AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow\" } ]\n",
     "t.toml:11:8: jwt_provider \"p\".name: jwt_provider name \"p\" is already used at t.toml:8:8; names "
     "must be unique across all files"},
    {"jwt_unknown_key", "[[jwt_provider]]\nname = \"p\"\nkeys = [ { alg = \"HS256\", secret_base64url = "
     "\"AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow\" } "
     "]\nissuers = [\"a\"]\n",
     "t.toml:10:1: jwt_provider \"p\".issuers: unknown key (did you mean \"issuer\"?); allowed here: name, "
     "issuer, audiences, algorithms, keys, jwks_file, from, clock_skew_s, require_exp, max_token_bytes, "
     "forward_claims, verify_in_kernel"},
    {"jwt_alg_none", "[[jwt_provider]]\nname = \"p\"\nkeys = [ { alg = \"none\", secret_base64url = "
     "\"AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow\" } ]\n",
     "t.toml:9:18: jwt_provider \"p\".keys[0].alg: \"none\" is never accepted: unsigned tokens would pass"},
    {"jwt_alg_lower_case", "[[jwt_provider]]\nname = \"p\"\nkeys = [ { alg = \"hs256\", secret_base64url = "
     "\"AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow\" } ]\n",
     "t.toml:9:18: jwt_provider \"p\".keys[0].alg: \"hs256\" is not a supported algorithm (did you mean "
     "\"HS256\"?); use HS256, HS384, HS512, RS256, ES256"},
    {"jwt_algorithms_unknown", "[[jwt_provider]]\nname = \"p\"\nkeys = [ { alg = \"HS256\", secret_base64url = "
     "\"AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow\" } "
     "]\nalgorithms = [\"HS256\", \"PS256\"]\n",
     "t.toml:10:24: jwt_provider \"p\".algorithms[1]: \"PS256\" is not a supported algorithm (did you mean "
     "\"HS256\"?); use HS256, HS384, HS512, RS256, ES256"},
    {"jwt_key_alg_not_accepted", "[[jwt_provider]]\nname = \"p\"\nkeys = [ { alg = \"HS256\", secret_base64url = "
     "\"AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow\" } "
     "]\nalgorithms = [\"RS256\"]\n",
     "t.toml:9:18: jwt_provider \"p\".keys[0].alg: \"HS256\" is not among this provider's algorithms "
     "(RS256); the key could never verify a token"},
    {"jwt_jwks_without_algorithms", "[[jwt_provider]]\nname = \"p\"\njwks_file = \"/etc/l7fast/keys.json\"\n",
     "t.toml:7:1: jwt_provider \"p\".algorithms: missing; keys from a jwks_file do not say which algorithms "
     "to trust; give them, e.g. [\"RS256\"]"},
    {"jwt_jwks_relative", "[[jwt_provider]]\nname = \"p\"\nalgorithms = \"RS256\"\njwks_file = \"keys.json\"\n",
     "t.toml:10:13: jwt_provider \"p\".jwks_file: \"keys.json\" must be an absolute path"},
    {"jwt_secret_padded", "[[jwt_provider]]\nname = \"p\"\nkeys = [ { alg = \"HS256\", secret_base64url = "
     "\"AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr==\" } ]\n",
     "t.toml:9:46: jwt_provider \"p\".keys[0].secret_base64url: "
     "the secret is padded with '='; write it without padding"},
    {"jwt_secret_base64", "[[jwt_provider]]\nname = \"p\"\nkeys = [ { alg = \"HS256\", secret_base64url = "
     "\"ab+/SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow\" } ]\n",
     "t.toml:9:46: jwt_provider \"p\".keys[0].secret_base64url: "
     "the secret is base64, not base64url: write '-' for '+' and '_' for '/'"},
    {"jwt_secret_not_canonical", "[[jwt_provider]]\nname = \"p\"\nkeys = [ { alg = \"HS256\", secret_base64url = "
     "\"AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLrx\" } ]\n",
     "t.toml:9:46: jwt_provider \"p\".keys[0].secret_base64url: "
     "the secret is not canonical base64url (RFC 4648 section 5: the URL-safe alphabet, no padding, unused bits zero)"},
    {"jwt_secret_short", "[[jwt_provider]]\nname = \"p\"\nkeys = [ { alg = \"HS384\", secret_base64url = "
     "\"AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLrA\" } ]\n",
     "t.toml:9:46: jwt_provider \"p\".keys[0].secret_base64url: "
     "HS384 secret has 32 bytes; RFC 7518 requires at least 48"},
    {"jwt_secret_missing", "[[jwt_provider]]\nname = \"p\"\nkeys = [ { alg = \"HS256\" } ]\n",
     "t.toml:9:10: jwt_provider \"p\".keys[0].secret_base64url: missing; give the shared secret, "
     "base64url-encoded"},
    {"jwt_pem_for_hmac", "[[jwt_provider]]\nname = \"p\"\nkeys = [ { alg = \"HS256\", pem = \"x\" } ]\n",
     "t.toml:9:33: jwt_provider \"p\".keys[0].pem: an HS256 key is given by \"secret_base64url\""},
    {"jwt_secret_for_rsa", "[[jwt_provider]]\nname = \"p\"\nkeys = [ { alg = \"RS256\", secret_base64url = "
     "\"AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow\" } ]\n",
     "t.toml:9:46: jwt_provider \"p\".keys[0].secret_base64url: an RS256 key is given by \"pem\""},
    {"jwt_pem_garbage", "[[jwt_provider]]\nname = \"p\"\nkeys = [ { alg = \"ES256\", pem = \"-----BEGIN PUBLIC "
     "KEY-----\\nAAAA\\n-----END PUBLIC KEY-----\\n\" } ]\n",
     "t.toml:9:33: jwt_provider \"p\".keys[0].pem: "
     "PEM public key does not decode"},
    {"jwt_pem_rsa_too_small", "[[jwt_provider]]\nname = \"p\"\nkeys = [ { alg = \"RS256\", pem = \"-----BEGIN PUBLIC "
     "KEY-----\\nMIGfMA0GCSqGSIb3DQEBAQUAA4GNADCBiQKBgQDqjLX8yM2l7EDnEpcs+Ukgn/1K\\nZfNa4Tp5xzxMH3XeFAO/FeN0Yt4a2dPyXwo+b5ML8LSkaVRXwXuGUPpOLbbVgBRk\\nxC6XIMF+Gxbu2iY/CGnAOZsBawYcCbkZSPIlhCPzwxP9W29fpiVTKDYxh/J6nrPk\\nfCz4kjp6XUqUUC++0QIDAQAB\\n-----END "
     "PUBLIC KEY-----\" } ]\n",
     "t.toml:9:33: jwt_provider \"p\".keys[0].pem: "
     "RSA modulus has 1024 bits; 2048 to 8192 are accepted"},
    {"jwt_pem_ec_wrong_curve", "[[jwt_provider]]\nname = \"p\"\nkeys = [ { alg = \"ES256\", pem = \"-----BEGIN PUBLIC "
     "KEY-----\\nMHYwEAYHKoZIzj0CAQYFK4EEACIDYgAElk8R8AdYZSHQJ3X11xwXvLMtbRUV64ef\\ninXfiGS6VkINreKL1yEiwuWZt57wCjXmawYLC+Mn7NX2WpdBUvydhiE0E94VD7qE\\nmJhNKo//ONFmiH/xsstg5uv55qrrprwH\\n-----END "
     "PUBLIC KEY-----\" } ]\n",
     "t.toml:9:33: jwt_provider \"p\".keys[0].pem: "
     "ES256 needs a key on P-256, not \"secp384r1\""},
    {"jwt_pem_ec_for_rsa", "[[jwt_provider]]\nname = \"p\"\nkeys = [ { alg = \"RS256\", pem = \"-----BEGIN PUBLIC "
     "KEY-----\\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE8ev5TfpYfH0puKU/W7xTiqKcIcew\\n6qeJgFWa/AW2KAh+BcStqmvMW0JpSJHPnn/bpSfcqZbPLWLxqH8EwBTlNg==\\n-----END "
     "PUBLIC KEY-----\" } ]\n",
     "t.toml:9:33: jwt_provider \"p\".keys[0].pem: "
     "RS256 needs an RSA public key"},
    {"jwt_kid_twice", "[[jwt_provider]]\nname = \"p\"\nkeys = [ { kid = \"a\", alg = \"HS256\", secret_base64url = "
     "\"AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow\" }, { kid = "
     "\"a\", alg = \"HS512\", secret_base64url = "
     "\"AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow\" } ]\n",
     "t.toml:9:157: jwt_provider \"p\".keys[1].kid: kid \"a\" is already used by keys[0]; key ids must be "
     "unique"},
    {"jwt_two_keys_without_kid", "[[jwt_provider]]\nname = \"p\"\nkeys = [ { alg = \"HS256\", secret_base64url = "
     "\"AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow\" }, { alg = "
     "\"HS512\", secret_base64url = "
     "\"AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow\" } ]\n",
     "t.toml:9:138: jwt_provider \"p\".keys[1]: keys[0] already has no kid; give each key a \"kid\" (a token "
     "without one is checked against the one key without one)"},
    {"jwt_keys_empty", "[[jwt_provider]]\nname = \"p\"\nkeys = []\n",
     "t.toml:9:8: jwt_provider \"p\".keys: empty list; omit \"keys\" when the keys come from jwks_file"},
    {"jwt_issuer_empty", "[[jwt_provider]]\nname = \"p\"\nkeys = [ { alg = \"HS256\", secret_base64url = "
     "\"AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow\" } ]\nissuer "
     "= \"\"\n",
     "t.toml:10:10: jwt_provider \"p\".issuer: empty; omit \"issuer\" to accept any"},
    {"jwt_audiences_empty", "[[jwt_provider]]\nname = \"p\"\nkeys = [ { alg = \"HS256\", secret_base64url = "
     "\"AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow\" } "
     "]\naudiences = []\n",
     "t.toml:10:13: jwt_provider \"p\".audiences: empty list; omit \"audiences\" to accept any audience"},
    {"jwt_from_both", "[[jwt_provider]]\nname = \"p\"\nkeys = [ { alg = \"HS256\", secret_base64url = "
     "\"AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow\" } ]\nfrom = "
     "{ header = \"x-token\", cookie = \"jwt\" }\n",
     "t.toml:10:39: jwt_provider \"p\".from.cookie: give either \"header\" or \"cookie\", not both"},
    {"jwt_from_cookie_prefix", "[[jwt_provider]]\nname = \"p\"\nkeys = [ { alg = \"HS256\", secret_base64url = "
     "\"AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow\" } ]\nfrom = "
     "{ cookie = \"jwt\", prefix = \"Bearer \" }\n",
     "t.toml:10:35: jwt_provider \"p\".from.prefix: only applies with \"header\": a cookie's value is the "
     "token"},
    {"jwt_from_neither", "[[jwt_provider]]\nname = \"p\"\nkeys = [ { alg = \"HS256\", secret_base64url = "
     "\"AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow\" } ]\nfrom = "
     "{ prefix = \"Bearer \" }\n",
     "t.toml:10:8: jwt_provider \"p\".from: needs \"header\" (e.g. { header = \"authorization\", prefix = "
     "\"Bearer \" }) or \"cookie\""},
    {"jwt_from_prefix_control", "[[jwt_provider]]\nname = \"p\"\nkeys = [ { alg = \"HS256\", secret_base64url = "
     "\"AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow\" } ]\nfrom = "
     "{ header = \"x-token\", prefix = \"a\\n\" }\n",
     "t.toml:10:39: jwt_provider \"p\".from.prefix: \"a\\x0A\" contains byte 0x0A, which no valid request "
     "carries"},
    {"jwt_clock_skew_too_big", "[[jwt_provider]]\nname = \"p\"\nkeys = [ { alg = \"HS256\", secret_base64url = "
     "\"AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow\" } "
     "]\nclock_skew_s = 3601\n",
     "t.toml:10:16: jwt_provider \"p\".clock_skew_s: 3601 is out of range 0..3600 (seconds of leeway for exp "
     "and nbf)"},
    {"jwt_max_token_bytes_small", "[[jwt_provider]]\nname = \"p\"\nkeys = [ { alg = \"HS256\", secret_base64url = "
     "\"AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow\" } "
     "]\nmax_token_bytes = 10\n",
     "t.toml:10:19: jwt_provider \"p\".max_token_bytes: 10 is out of range 64..65536 (longer tokens are "
     "refused)"},
    {"jwt_require_exp_string", "[[jwt_provider]]\nname = \"p\"\nkeys = [ { alg = \"HS256\", secret_base64url = "
     "\"AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow\" } "
     "]\nrequire_exp = \"yes\"\n",
     "t.toml:10:15: jwt_provider \"p\".require_exp: expected a boolean (true or false), got a string"},
    {"jwt_verify_in_kernel_string", "[[jwt_provider]]\nname = \"p\"\nkeys = [ { alg = \"HS256\", secret_base64url = "
     "\"AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow\" } "
     "]\nverify_in_kernel = \"no\"\n",
     "t.toml:10:20: jwt_provider \"p\".verify_in_kernel: expected a boolean (true or false), got a string"},
    {"jwt_forward_reserved", "[[jwt_provider]]\nname = \"p\"\nkeys = [ { alg = \"HS256\", secret_base64url = "
     "\"AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow\" } "
     "]\nforward_claims = [ { claim = \"sub\", header = \"Content-Length\" } ]\n",
     "t.toml:10:46: jwt_provider \"p\".forward_claims[0].header: \"content-length\" cannot be changed: "
     "l7fast writes the framing and connection fields itself (host, content-length, transfer-encoding, "
     "connection, keep-alive, proxy-connection, te, trailer, upgrade)"},
    {"jwt_forward_twice", "[[jwt_provider]]\nname = \"p\"\nkeys = [ { alg = \"HS256\", secret_base64url = "
     "\"AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow\" } "
     "]\nforward_claims = [ { claim = \"sub\", header = \"x-user\" }, { claim = \"email\", header = "
     "\"X-User\" } ]\n",
     "t.toml:10:86: jwt_provider \"p\".forward_claims[1].header: header \"x-user\" already carries claim "
     "\"sub\""},
    {"jwt_forward_token_header", "[[jwt_provider]]\nname = \"p\"\nkeys = [ { alg = \"HS256\", secret_base64url = "
     "\"AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow\" } "
     "]\nforward_claims = [ { claim = \"sub\", header = \"Authorization\" } ]\n",
     "t.toml:10:46: jwt_provider \"p\".forward_claims[0].header: header \"authorization\" carries the token "
     "itself"},
    {"jwt_forward_without_header", "[[jwt_provider]]\nname = \"p\"\nkeys = [ { alg = \"HS256\", secret_base64url = "
     "\"AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow\" } "
     "]\nforward_claims = [ { claim = \"sub\" } ]\n",
     "t.toml:10:20: jwt_provider \"p\".forward_claims[0].header: missing; give the request header it is sent "
     "in, e.g. \"x-user\""},
    {"jwt_provider_single_table", "[jwt_provider]\nname = \"p\"\n",
     "t.toml:7:1: jwt_provider: expected an array of tables ([[jwt_provider]]), got a table"},
};
// clang-format on

INSTANTIATE_TEST_SUITE_P(Cases, PolicySuiteLoaderError, testing::ValuesIn(kSuiteErrorCases),
                         [](const testing::TestParamInfo<SuiteErrorCase>& info) { return std::string(info.param.name); });
