// config/Describe: what `l7fastctl routes`/`check` and ListRoutes show of a
// route's match. A route with only a path_regex once showed "*", and absent
// and prefix header conditions looked like present ones.
#include "config/Describe.hpp"

#include <gtest/gtest.h>

#include <string>

#include "loader/PolicyLoader.hpp"

using namespace l7fast::policy;

namespace {

std::string described(const std::string& match)
{
    auto r = PolicyLoader::load_string(R"(
[[listener]]
name = "web"
address = "127.0.0.1:18080"
[[cluster]]
name = "app"
endpoints = [ { address = "127.0.0.1:19090" } ]
[[jwt_provider]]
name = "idp"
algorithms = ["HS256"]
keys = [ { kid = "k", alg = "HS256", secret_base64url = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY" } ]
[[route]]
name = "r"
cluster = "app"
jwt = "idp"
match = )" + match + "\n",
                                       "describe.toml");
    EXPECT_TRUE(r.ok()) << r.error_text();
    return r.ok() ? describe_match(r.policy().routes.at(0).match) : "";
}

}  // namespace

TEST(DescribeMatch, NothingAskedIsAStar)
{
    EXPECT_EQ(describe_match(RouteMatch{}), "*");
}

TEST(DescribeMatch, PathKindsAreDistinct)
{
    EXPECT_EQ(described(R"({ path_regex = "/v2/[a-z]+" })"), "regex=/v2/[a-z]+");
    EXPECT_EQ(described(R"({ path_prefix = "/v1" })"), "prefix=/v1");
    EXPECT_EQ(described(R"({ path_exact = "/v1/x" })"), "path=/v1/x");
}

TEST(DescribeMatch, HeaderConditionsAreDistinct)
{
    EXPECT_EQ(described(R"({ headers = [ { name = "x-a", present = true }, { name = "x-b", absent = true }, )"
                        R"({ name = "x-c", exact = "v 1" }, { name = "x-d", prefix = "v" } ] })"),
              R"(header:x-a !header:x-b header:x-c="v 1" header:x-d^=v)");
}

TEST(DescribeMatch, QuerySourceAndClaimsAreShown)
{
    // (TOML inline tables are one line)
    EXPECT_EQ(described(R"({ method = ["GET", "HEAD"], host = "api.example.com", )"
                        R"(query = [ { name = "debug", present = true }, { name = "v", exact = "2" } ], )"
                        R"(source = ["10.0.0.0/8", "::1/128"], )"
                        R"(claims = [ { name = "role", exact = "admin" }, { name = "sub", present = true } ] })"),
              "method=GET|HEAD host=api.example.com query:debug query:v=2 source=10.0.0.0/8,::1/128 "
              "claim:role=admin claim:sub");
}
