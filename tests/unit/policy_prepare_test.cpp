// proxy/Prepare: `l7fastctl check` accepts exactly what a reload accepts.
// The loader alone once passed a provider whose jwks_file did not exist and
// one whose JWKS key had an invalid "n"; l7fastd refused to start on them.
#include "proxy/Prepare.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/TempDir.hpp"

using l7fast::test::TempDir;
namespace proxy = l7fast::proxy;

namespace {

const char* const kRoutes = R"(
[[listener]]
name = "web"
address = "127.0.0.1:18080"

[[cluster]]
name = "app"
endpoints = [ { address = "127.0.0.1:19090" } ]

[[route]]
name = "api"
cluster = "app"
jwt = "idp"
)";

std::string provider(const std::string& jwks_file)
{
    return "[[jwt_provider]]\nname = \"idp\"\nissuer = \"https://idp.example.com\"\n"
           "jwks_file = \"" + jwks_file + "\"\nalgorithms = [\"RS256\", \"HS256\"]\n";
}

struct Checked {
    l7fast::policy::PolicyLoadResult result;
    std::vector<std::string> warnings;
};

Checked check(const TempDir& dir, const std::string& text)
{
    std::vector<std::string> warnings;
    auto file = dir.write("policy.toml", text);
    auto r = proxy::check_policy_files(file, "", &warnings);
    return {std::move(r), std::move(warnings)};
}

// the loader's own checks pass on every policy of these tests
void expect_loader_accepts(const TempDir& dir, const std::string& text)
{
    auto r = l7fast::policy::PolicyLoader::load(dir.write("loader.toml", text), "");
    ASSERT_TRUE(r.ok()) << r.error_text();
}

}  // namespace

TEST(PolicyPrepare, CheckRefusesAMissingJwksFileWithItsLocation)
{
    TempDir dir;
    const std::string text = provider((dir.path() / "absent.jwks").string()) + kRoutes;
    expect_loader_accepts(dir, text);
    Checked c = check(dir, text);
    ASSERT_FALSE(c.result.ok());
    ASSERT_EQ(c.result.errors().size(), 1u);
    const auto& e = c.result.errors()[0];
    EXPECT_EQ(e.file, (dir.path() / "policy.toml").string());
    EXPECT_EQ(e.line, 1u);
    EXPECT_EQ(e.key, "jwt_provider \"idp\"");
    EXPECT_NE(e.message.find("absent.jwks"), std::string::npos) << e.message;
}

TEST(PolicyPrepare, CheckRefusesAJwksKeyWithAnInvalidModulus)
{
    TempDir dir;
    auto jwks = dir.write("idp.jwks", R"({"keys":[{"kty":"RSA","kid":"x","n":"not*base64url","e":"AQAB"}]})");
    const std::string text = provider(jwks.string()) + kRoutes;
    expect_loader_accepts(dir, text);
    Checked c = check(dir, text);
    ASSERT_FALSE(c.result.ok());
    EXPECT_NE(c.result.error_text().find("key 0 (kid \"x\"): n is not base64url"), std::string::npos)
        << c.result.error_text();
}

TEST(PolicyPrepare, CheckAcceptsWhatAReloadAccepts)
{
    TempDir dir;
    // an HS256 key of 32 bytes ("0123456789abcdef0123456789abcdef")
    auto jwks = dir.write("idp.jwks",
                          R"({"keys":[{"kty":"oct","kid":"x","alg":"HS256",)"
                          R"("k":"MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY"}]})");
    Checked c = check(dir, provider(jwks.string()) + kRoutes);
    ASSERT_TRUE(c.result.ok()) << c.result.error_text();
    EXPECT_TRUE(c.warnings.empty());
}

// A JWKS file the caller may not read: tests/e2e/test_cli.py (as nobody; the
// unit tests run as root, who reads every file).
