// Hostile input never crashes the loader, never escapes as an exception, and
// whatever it accepts the Router and the compiler can handle.
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "policy/PolicyCompiler.hpp"
#include "policy/PolicyLoader.hpp"
#include "policy/Router.hpp"

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

// Loads `text`; checks the result is either a policy or well-formed errors,
// and that an accepted policy can be routed and compiled.
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
    const HeaderField headers[] = {{"Host", "example.com"}, {"x-canary", "1"}};
    (void)router.route({"GET", "/api/x?y", headers, 0});
}

std::string mutate(std::string s, std::mt19937_64& rng)
{
    static const std::vector<std::string> kTokens{
        "[", "]", "[[", "]]", "{", "}", "=", "\"", "'", "\n", ",", ".", "#", "\\", "\\u0000", "0", "-1",
        "99999999999999999999", "true", "1.5", "1979-05-27", "route", "match", "headers", "name", "\xff", "\xc3"};
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
