// Differential test: a JWT route's refusals as the kernel decides them
// (bpf/include/l7_jwtcache.h through bpf/lib/decide.h, run by this kernel in
// the decision harness: tests/support/BpfDecider.hpp) against the reference,
// auth::extract_token() on the request as the slow path parses it
// (proxy::parse_head). Whenever the kernel sends a 401 itself, the reference
// refuses the request, and the kernel's bytes are the ones the slow path
// sends (semantics/Responses unauthorized(), with or without
// error="invalid_token" as the reference's status says); a token the kernel
// looks up in its cache is the token the reference extracts; a request the
// kernel refuses but may not answer (it asks to close) goes to the slow path
// under the refusal's reason. A request without any token is always the
// kernel's to answer. Needs root and BPF.
#include <gtest/gtest.h>

#include <unistd.h>

#include <array>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "auth/Jwt.hpp"
#include "compiler/PolicyCompiler.hpp"
#include "config/Text.hpp"
#include "loader/PolicyLoader.hpp"
#include "proxy/Http.hpp"
#include "semantics/Responses.hpp"
#include "support/BpfDecider.hpp"

using namespace l7fast;
using namespace l7fast::policy;
using namespace l7fast::testing;

namespace {

constexpr uint64_t kTestSeed = 20261204;  // fixed: a failure reproduces

// One provider (HS256, one key) and its route of the same name.
std::string provider_and_route(const std::string& name, const std::string& from, uint32_t max_token_bytes)
{
    return "[[jwt_provider]]\nname = \"" + name + "\"\n" + from + "algorithms = [\"HS256\"]\n" +
           "keys = [ { alg = \"HS256\", secret_base64url = \"c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3JldA\" } ]\n" +
           "max_token_bytes = " + std::to_string(max_token_bytes) + "\n[[route]]\nname = \"" + name +
           "\"\nmatch = { path_prefix = \"/" + name + "\" }\ncluster = \"app\"\njwt = \"" + name + "\"\n";
}

// Three providers: the default Authorization "Bearer " prefix with a small
// max_token_bytes, a header without a prefix at the loader's minimum, and a
// prefix without a trailing space whose max_token_bytes is beyond what the
// kernel's cache holds (L7_JWT_MAX_TOKEN).
std::string policy_text()
{
    return "[[listener]]\nname = \"web\"\naddress = \"127.0.0.1:8080\"\n"
           "[[cluster]]\nname = \"app\"\nendpoints = [ { address = \"127.0.0.1:9001\" } ]\n" +
           provider_and_route("bearer", "", 100) +
           provider_and_route("plain", "from = { header = \"x-token\" }\n", 64) +
           provider_and_route("colon", "from = { header = \"x-jwt\", prefix = \"JWT:\" }\n", 4000);
}

struct Case {
    std::string path;
    std::string header;  // the provider's header name
    std::string scheme;  // the provider's prefix as configured
    uint32_t max_bytes = 0;
};

const std::array<Case, 3> kCases{{
    {"/bearer", "Authorization", "Bearer ", 100},
    {"/plain", "X-Token", "", 64},
    {"/colon", "X-JWT", "JWT:", 4000},
}};

class Generator {
public:
    explicit Generator(uint64_t seed) : rng_(seed) {}
    uint32_t below(size_t n) { return static_cast<uint32_t>(rng_() % n); }

    std::string token(size_t n)
    {
        static constexpr std::string_view kChars =
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.";
        std::string s(n, 'x');
        for (char& c : s)
            c = kChars[below(kChars.size())];
        return s;
    }

    // A length near one of the limits that matter, or anything up to 5000.
    size_t length(const Case& c)
    {
        const std::array<size_t, 9> near{0, 1, 7, c.max_bytes, L7_JWT_MAX_TOKEN, 63, 64, 100, 4000};
        const size_t base = near[below(near.size())];
        switch (below(4)) {
        case 0: return base;
        case 1: return base + 1;
        case 2: return base ? base - 1 : 0;
        default: return below(5000);
        }
    }

    // The provider's header value: a scheme (the provider's, in another
    // case, another one or none), what separates it from the token, and
    // the token.
    std::string value(const Case& c)
    {
        static const std::vector<std::string> kSchemes{"Bearer", "bearer", "BEARER", "Basic", "Token", "JWT:",
                                                       "jwt:", "Bearer:", "Bear", "B", ""};
        static const std::vector<std::string> kSeparators{"", " ", "  ", "\t", " \t"};
        std::string scheme = below(2) ? trim_right(c.scheme) : kSchemes[below(kSchemes.size())];
        const std::string sep = below(2) && !c.scheme.empty() && c.scheme.back() == ' ' ? " "
                                                                                         : kSeparators[below(kSeparators.size())];
        return scheme + sep + token(length(c));
    }

    // A request for case c; `close`: it asks to close the connection.
    std::string request(const Case& c, bool* close)
    {
        std::string w = "GET " + c.path + "/x HTTP/1.1\r\nHost: example.com\r\n";
        const uint32_t copies = below(10) == 0 ? 0 : below(12) == 0 ? 2 : 1;
        for (uint32_t i = 0; i < copies; i++)
            w += (below(2) ? c.header : lower_copy(c.header)) + ": " + value(c) + "\r\n";
        if (below(3) == 0)
            w += "X-Other: " + token(below(40)) + "\r\n";
        *close = below(8) == 0;
        if (*close)
            w += "Connection: close\r\n";
        return w + "\r\n";
    }

private:
    static std::string trim_right(std::string s)
    {
        while (!s.empty() && s.back() == ' ')
            s.pop_back();
        return s;
    }
    static std::string lower_copy(std::string s)
    {
        for (char& ch : s)
            if (ch >= 'A' && ch <= 'Z')
                ch = static_cast<char>(ch - 'A' + 'a');
        return s;
    }
    std::mt19937_64 rng_;
};

// The reference's view of a request: the slow path's parse of the head.
struct Parsed {
    std::string head;
    l7_msg m{};
    std::vector<HeaderField> fields;
    bool ok = false;

    explicit Parsed(std::string h) : head(std::move(h))
    {
        ok = proxy::parse_head(head, true, &m) == L7_P_OK;
        for (uint32_t i = 0; ok && i < m.n_hdrs; i++)
            fields.push_back({std::string_view(head).substr(m.hdr[i].name_off, m.hdr[i].name_len),
                              std::string_view(head).substr(m.hdr[i].val_off, m.hdr[i].val_len)});
    }
    RequestView view() const { return {"GET", "/", fields, 0}; }
};

const JwtProvider& provider_of(const Policy& p, const Case& c)
{
    const Route& r = p.routes.at(&c - kCases.data());
    return *p.find_jwt_provider(*r.jwt);
}

TEST(JwtKernelDifferential, RefusalsAgreeWithTheReference)
{
    if (geteuid() != 0)
        GTEST_SKIP() << "runs the data plane's decision in the kernel: needs root";
    PolicyLoadResult loaded = PolicyLoader::load_string(policy_text(), "jwt-differential.toml");
    ASSERT_TRUE(loaded.ok()) << loaded.error_text();
    const Policy policy = std::move(loaded).policy();
    const CompiledTables t = compile(policy, kTestSeed, [](const SocketAddress&) { return std::optional<uint32_t>(0); });
    for (size_t r = 0; r < t.placement.size(); r++) {
        ASSERT_TRUE(t.placement[r].kernel) << policy.routes[r].name << ": " << t.placement[r].reason;
        ASSERT_TRUE(t.placement[r].kernel_unauthorized) << policy.routes[r].name;
    }
    BpfDecider kernel;
    kernel.install(t);

    Generator gen(kTestSeed);
    // outcome name -> count, for the summary and the coverage below
    std::map<std::string, size_t> tally;
    size_t no_header = 0;
    for (size_t n = 0; n < 6000; n++) {
        const Case& c = kCases[gen.below(kCases.size())];
        bool close = false;
        const Parsed req(gen.request(c, &close));
        ASSERT_TRUE(req.ok) << req.head;
        const auth::Extraction ref = auth::extract_token(provider_of(policy, c), req.view());
        const Decision d = kernel.decide(req.head, 0, {});
        const std::string where = "request:\n" + req.head + "reference: " +
                                  std::string(auth::reason_name(ref.reason));
        size_t copies = 0;
        for (const HeaderField& f : req.fields)
            copies += text::iequals(f.name, c.header);
        // no token at all is always the kernel's to refuse
        if (copies == 0) {
            no_header++;
            ASSERT_EQ(ref.status, auth::Status::Missing) << where;
            ASSERT_EQ(d.verdict, close ? Verdict::SlowPath : Verdict::Unauthorized) << "reason " << d.reason << "\n" << where;
            ASSERT_EQ(d.reason, L7_R_JWT_NONE) << where;
        }

        if (d.verdict == Verdict::Unauthorized) {
            ASSERT_FALSE(close) << where;
            ASSERT_NE(ref.status, auth::Status::Ok) << "the kernel refused a token the reference takes\n" << where;
            ASSERT_EQ(d.token_presented, ref.status == auth::Status::Invalid) << where;
            ASSERT_LT(d.response, t.responses.size()) << where;
            const LocalResponse expected = unauthorized(d.token_presented, false);
            const l7_response& sent = t.responses[d.response];
            ASSERT_EQ(std::string(reinterpret_cast<const char*>(sent.bytes), sent.len), expected.bytes) << where;
            tally[d.token_presented ? "kernel 401 invalid_token" : "kernel 401 no token"]++;
            continue;
        }
        ASSERT_EQ(d.verdict, Verdict::SlowPath) << where;
        switch (d.reason) {
        case L7_R_JWT_NONE:
            ASSERT_TRUE(close) << "a refusal the kernel holds the answer to, not answered\n" << where;
            ASSERT_EQ(ref.status, auth::Status::Missing) << where;
            tally["slow path 401 no token (asks to close)"]++;
            break;
        case L7_R_JWT_BAD:
            ASSERT_TRUE(close) << "a refusal the kernel holds the answer to, not answered\n" << where;
            ASSERT_EQ(ref.status, auth::Status::Invalid) << where;
            ASSERT_TRUE(ref.reason == auth::Reason::Malformed || ref.reason == auth::Reason::TooLarge) << where;
            tally["slow path 401 invalid_token (asks to close)"]++;
            break;
        case L7_R_JWT_MISS:
            // the kernel looked its token up: the very token the reference
            // extracts (the cache would admit it by those bytes)
            ASSERT_EQ(ref.status, auth::Status::Ok) << where;
            ASSERT_EQ(copies, 1u) << where;
            tally["slow path: a token to verify"]++;
            break;
        case L7_R_JWT_OTHER:
            tally[std::string("slow path: the shape is its to read (reference ") +
                  std::string(auth::reason_name(ref.reason)) + ")"]++;
            break;
        case L7_R_UNSUPPORTED:
            // a repeated match header: the route pass hands it over
            ASSERT_GT(copies, 1u) << where;
            tally["slow path: the token header repeated"]++;
            break;
        default:
            FAIL() << "unexpected hand-over reason " << d.reason << "\n" << where;
        }
    }
    for (const auto& [what, count] : tally)
        std::printf("  %-60s %zu\n", what.c_str(), count);
    // a run worth something: every outcome occurs (fixed seed: exact)
    EXPECT_GT(no_header, 0u);
    EXPECT_GT(tally["kernel 401 no token"], 0u);
    EXPECT_GT(tally["kernel 401 invalid_token"], 0u);
    EXPECT_GT(tally["slow path 401 no token (asks to close)"], 0u);
    EXPECT_GT(tally["slow path 401 invalid_token (asks to close)"], 0u);
    EXPECT_GT(tally["slow path: a token to verify"], 0u);
    EXPECT_GT(tally["slow path: the token header repeated"], 0u);
}

}  // namespace
