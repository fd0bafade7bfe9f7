// Hostile input never crashes the loader, never escapes as an exception, and
// whatever it accepts the Router and the compiler can handle.
#include <gtest/gtest.h>

#include <sys/socket.h>

#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "semantics/Mutation.hpp"
#include "compiler/PolicyCompiler.hpp"
#include "loader/PolicyLoader.hpp"
#include "proxy/RateLimiter.hpp"
#include "semantics/Rbac.hpp"
#include "semantics/Responses.hpp"
#include "semantics/Router.hpp"

using namespace l7fast::policy;

namespace {

constexpr uint64_t kFuzzSeed = 7;  // fixed: a failure reproduces

std::string read(const std::string& path)
{
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// Runs every reference action of every route on one request, the way the
// slow path's pipeline will.
void exercise(const Router& router, const RequestView& view)
{
    Claims claims;
    claims.members = {{"sub", {"alice"}}, {"role", {"admin"}}, {"scope", {"read", "write"}}};
    const ClaimsLookup lookup = [&](const JwtProvider&) { return &claims; };
    (void)router.route(view, lookup);
    const std::string head = "GET /api/x?y HTTP/1.1\r\nHost: example.com\r\nx-canary: 1\r\n\r\n";
    for (const Route& route : router.policy().routes) {
        ASSERT_NO_THROW((void)conditions_hold(route.match, view, &claims));
        if (route.rbac) {
            const RbacDecision d = evaluate(*route.rbac, view, &claims);
            ASSERT_GE(d.rule, -1);
            ASSERT_LT(d.rule, static_cast<int>(route.rbac->rules.size()));
            ASSERT_FALSE(rbac_denied(*route.rbac, true).bytes.empty());
        }
        if (route.rate_limit) {
            RateLimiter limiter(*route.rate_limit);
            const std::optional<std::string> key =
                route.rate_limit->key ? request_key(*route.rate_limit->key, view, &claims) : std::nullopt;
            ASSERT_EQ(limiter.take(key, 1), 0u) << "a fresh bucket admits";
        }
        if (route.direct_response) {
            const LocalResponse r = direct_response(*route.direct_response, false);
            ASSERT_LE(r.head_size, r.bytes.size());
        }
        std::vector<ForwardedHeader> forwarded;
        if (route.jwt)
            if (const JwtProvider* p = router.policy().find_jwt_provider(*route.jwt))
                forwarded = forwarded_claim_headers(*p, &claims);
        ASSERT_TRUE(mutate_request_head(head, route.request_headers, forwarded));
        ASSERT_TRUE(mutate_response_head("HTTP/1.1 200 OK\r\n\r\n", route.response_headers));
    }
}

// Loads `text`; checks the result is either a policy or well-formed errors,
// and that an accepted policy can be routed, evaluated and compiled.
void check(const std::string& text)
{
    PolicyLoadResult r(std::vector<PolicyError>{});
    ASSERT_NO_THROW(r = PolicyLoader::load_string(text, "fuzz.toml"));
    if (!r.ok()) {
        ASSERT_FALSE(r.errors().empty());
        ASSERT_LE(r.errors().size(), PolicyLoader::kMaxErrors);
        for (const PolicyError& e : r.errors()) {
            ASSERT_EQ(e.file, "fuzz.toml");
            ASSERT_FALSE(e.message.empty());
            ASSERT_LT(e.str().size(), 2000u) << "messages quote values shortened";
        }
        return;
    }
    const Policy& p = r.policy();
    const CompiledTables t = compile(p, 1, [](const SocketAddress&) { return std::optional<uint32_t>(0); });
    ASSERT_EQ(t.placement.size(), p.routes.size());
    const Router router(p);
    const HeaderField headers[] = {{"Host", "example.com"}, {"x-canary", "1"}, {"Cookie", "session=s"}};
    (void)router.route({"GET", "/api/x?y", headers, 0});
    RequestView view{"GET", "/api/x?y=1", headers, 0};
    view.client_family = AF_INET;
    view.client_ip = {10, 1, 2, 3};
    exercise(router, view);
}

std::string mutate(std::string s, std::mt19937_64& rng)
{
    static const std::vector<std::string> kTokens{
        "[", "]", "[[", "]]", "{", "}", "=", "\"", "'", "\n", ",", ".", "#", "\\", "\\u0000", "0", "-1",
        "99999999999999999999", "true", "1.5", "1979-05-27", "route", "match", "headers", "name", "\xff", "\xc3",
        "jwt_provider", "rbac", "rules", "claims", "query", "source", "path_regex", "(", ")", "*", "+", "{", "|",
        "absent", "prefix", "set", "add", "remove", "direct_response", "rate_limit", "key", "maglev", "ring_hash",
        "HS256", "RS256", "none", "::/0", "/33", "\\r\\n", "content-length", "host"};
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int i = 0; i < edits && !s.empty(); i++) {
        const size_t at = rng() % s.size();
        switch (rng() % 5) {
        case 0:
            s[at] = static_cast<char>(rng() % 256);
            break;
        case 1:
            s.erase(at, 1 + rng() % 8);
            break;
        case 2:
            s.insert(at, kTokens[rng() % kTokens.size()]);
            break;
        case 3: {  // duplicate a slice
            const size_t len = std::min<size_t>(1 + rng() % 64, s.size() - at);
            s.insert(rng() % s.size(), s.substr(at, len));
            break;
        }
        default:
            s.resize(at);
            break;
        }
    }
    return s;
}

}  // namespace

TEST(PolicyFuzz, MutatedPolicies)
{
    const std::vector<std::string> seeds{
        read(std::string(L7FAST_TEST_DATA) + "/policy/full.toml"),
        read(std::string(L7FAST_TEST_DATA) + "/../../packaging/policy.toml"),
        read(std::string(L7FAST_TEST_DATA) + "/policy/suite.toml"),
    };
    ASSERT_FALSE(seeds[0].empty());
    std::mt19937_64 rng(kFuzzSeed);
    size_t accepted = 0;
    for (int i = 0; i < 20000; i++) {
        const std::string text = mutate(seeds[i % seeds.size()], rng);
        SCOPED_TRACE("iteration " + std::to_string(i));
        check(text);
        if (HasFatalFailure())
            return;
        accepted += PolicyLoader::load_string(text, "fuzz.toml").ok();
    }
    // mutations that only touch comments or values still load: both paths run
    EXPECT_GT(accepted, 100u);
}

TEST(PolicyFuzz, RandomBytes)
{
    std::mt19937_64 rng(kFuzzSeed + 1);
    for (int i = 0; i < 3000; i++) {
        std::string text(rng() % 512, '\0');
        for (char& c : text)
            c = static_cast<char>(rng() % 4 ? "[]{}=\"\n .,#abc0"[rng() % 16] : rng() % 256);
        check(text);
        if (HasFatalFailure())
            return;
    }
}

TEST(PolicyFuzz, PathologicalShapes)
{
    check(std::string(100000, '[') + std::string(100000, ']'));                   // deep nesting
    check("a = " + std::string(100000, '[') + std::string(100000, ']') + "\n");  // deep arrays
    check("x = {" + std::string(50000, '{'));
    check("[[listener]]\nname = \"" + std::string(1 << 20, 'n') + "\"\naddress = \"127.0.0.1:1\"\n");
    check("[[listener]]\nname = \"web\"\naddress = \"127.0.0.1:" + std::string(100000, '9') + "\"\n");
    check("[daemon]\npool_max = 99999999999999999999999\n");
    check("[daemon]\npool_max = -9223372036854775808\n");
    check(std::string("[[listener]]\nname = \"a\0b\"\n", 26));
    check("\xEF\xBB\xBF[[listener]]\nname = \"bom\"\naddress = \"127.0.0.1:1\"\n");
    check("[[listener]]\nname = \"\xC3\x28\"\n");  // invalid UTF-8

    std::string many;
    for (int i = 0; i < 20000; i++)
        many += "[[route]]\nname = \"r" + std::to_string(i) + "\"\nbogus = 1\n";
    check(many);  // tens of thousands of errors, capped

    std::string wide = "[[listener]]\nname = \"web\"\naddress = \"127.0.0.1:8080\"\n"
                       "[[cluster]]\nname = \"app\"\nendpoints = [ { address = \"127.0.0.1:9001\" } ]\n";
    for (int i = 0; i < 3000; i++)
        wide += "[[route]]\nname = \"r" + std::to_string(i) + "\"\ncluster = \"app\"\n[route.match]\npath_prefix = \"/" +
                std::string(i % 300, 'p') + "\"\n";
    check(wide);  // valid, beyond every kernel limit
}

TEST(PolicyFuzz, SocketAddressParse)
{
    std::mt19937_64 rng(kFuzzSeed + 2);
    const std::string alphabet = "0123456789abcdef:.[]%/ -";
    for (int i = 0; i < 20000; i++) {
        std::string s(rng() % 48, ' ');
        for (char& c : s)
            c = alphabet[rng() % alphabet.size()];
        std::string why;
        const auto a = SocketAddress::parse(s, &why);
        if (a) {
            // what parses prints as something that parses to the same address
            std::string again;
            ASSERT_EQ(SocketAddress::parse(a->str(), &again), a) << s;
        } else {
            ASSERT_FALSE(why.empty()) << s;
        }
    }
    EXPECT_EQ(SocketAddress::parse("1.2.3.4:5", nullptr)->port, 5u);
}

TEST(PolicyFuzz, CidrParse)
{
    std::mt19937_64 rng(kFuzzSeed + 3);
    const std::string alphabet = "0123456789abcdef:./f";
    for (int i = 0; i < 20000; i++) {
        std::string s(rng() % 40, ' ');
        for (char& c : s)
            c = alphabet[rng() % alphabet.size()];
        std::string why;
        const auto c = Cidr::parse(s, &why);
        if (c) {
            ASSERT_EQ(Cidr::parse(c->str(), nullptr), c) << s;
            ASSERT_TRUE(c->contains(c->family, c->ip.data())) << s;
        } else {
            ASSERT_FALSE(why.empty()) << s;
        }
    }
}

TEST(PolicyFuzz, RequestPartsAndMutations)
{
    std::mt19937_64 rng(kFuzzSeed + 4);
    const std::string alphabet = "ab=&;?: \t\r\nX-";
    HeaderMutation m;
    m.remove = {"a", "x-b"};
    m.set = {{"x-a", "v"}};
    m.add = {{"b", ""}};
    const std::vector<ForwardedHeader> fwd{{"ab", "c"}, {"x", std::nullopt}};
    for (int i = 0; i < 20000; i++) {
        std::string s(rng() % 64, ' ');
        for (char& c : s)
            c = alphabet[rng() % alphabet.size()];
        (void)request_query_param(s, "a");
        const HeaderField f[] = {{"Cookie", s}, {"cookie", s}};
        if (auto v = request_cookie(f, "a")) {
            ASSERT_TRUE(v->data() >= s.data() && v->data() + v->size() <= s.data() + s.size());
        }
        const std::string head = "GET / HTTP/1.1\r\n" + s + "\r\n\r\n";
        if (auto out = mutate_request_head(head, m, fwd)) {
            ASSERT_TRUE(out->ends_with("x-a: v\r\nab: c\r\nb: \r\n\r\n"));
            ASSERT_TRUE(out->starts_with("GET / HTTP/1.1\r\n"));
        }
    }
}

TEST(PolicyFuzz, BucketInvariants)
{
    std::mt19937_64 rng(kFuzzSeed + 5);
    for (int i = 0; i < 2000; i++) {
        const auto rate = static_cast<uint32_t>(rng() % 3 ? rng() % 2000 + 1 : rng());
        const auto burst = static_cast<uint32_t>(rng() % 3 ? rng() % 100 + 1 : rng());
        __u64 b = 0;
        uint64_t now = 1 + rng() % 1000;
        uint64_t taken = 0;
        const uint64_t start = now;
        for (int j = 0; j < 200; j++) {
            now += rng() % 4 ? rng() % 2'000'000 : rng() % (uint64_t{1} << 40);
            const uint64_t wait = l7_bucket_take(&b, now, rate, burst);
            // the mark never runs ahead of the clock it was taken at
            ASSERT_LE(b, l7_bucket_clock(now, rate));
            if (wait == 0) {
                taken++;
            } else {
                ASSERT_LE(wait, 1000u);
                // after `wait` ms a token is there
                __u64 probe = b;
                ASSERT_EQ(l7_bucket_take(&probe, now + wait * 1'000'000, rate, burst), 0u);
                if (wait > 1) {
                    probe = b;
                    ASSERT_NE(l7_bucket_take(&probe, now + (wait - 1) * 1'000'000, rate, burst), 0u);
                }
            }
        }
        // never more than the burst plus what the rate refilled
        const long double allowed = burst + static_cast<long double>(now - start) * rate / 1e9L + 1;
        ASSERT_LE(static_cast<long double>(taken), allowed) << rate << " " << burst;
    }
}
