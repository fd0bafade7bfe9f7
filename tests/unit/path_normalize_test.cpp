// Path normalisation (semantics/PathNormalize.hpp) and the parser's flag that
// sends paths not in normal form to the slow path (l7_http.h): the two must
// agree — a path the parser calls normal is returned unchanged.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "semantics/PathNormalize.hpp"
#include "proxy/Http.hpp"

using l7fast::policy::normalize_target;

namespace {

std::string norm(std::string_view t)
{
    auto r = normalize_target(t);
    return r.error.empty() ? r.target : "error: " + r.error;
}

bool parser_says_normal(const std::string& target)
{
    std::string req = "GET " + target + " HTTP/1.1\r\nHost: x\r\n\r\n";
    l7_msg m{};
    int st = l7fast::proxy::parse_head({req.data(), req.size()}, true, &m);
    EXPECT_EQ(st, L7_P_OK) << target;
    return !(m.flags & L7_MF_PATH_NOT_NORMAL);
}

}  // namespace

TEST(PathNormalize, DotSegmentsSlashesAndEscapes)
{
    EXPECT_EQ(norm("/"), "/");
    EXPECT_EQ(norm("/a/b"), "/a/b");
    EXPECT_EQ(norm("/a/b/"), "/a/b/");
    EXPECT_EQ(norm("/a/../admin"), "/admin");
    EXPECT_EQ(norm("/public/../admin/x"), "/admin/x");
    EXPECT_EQ(norm("/../../admin"), "/admin");
    EXPECT_EQ(norm("/a/./b"), "/a/b");
    EXPECT_EQ(norm("/a/b/.."), "/a/");
    EXPECT_EQ(norm("/a/b/."), "/a/b/");
    EXPECT_EQ(norm("//admin"), "/admin");
    EXPECT_EQ(norm("/a//b///c"), "/a/b/c");
    EXPECT_EQ(norm("/%61dmin"), "/admin");
    EXPECT_EQ(norm("/%2e%2e/admin"), "/admin");
    EXPECT_EQ(norm("/a/%2E/b"), "/a/b");
    EXPECT_EQ(norm("/%7Euser"), "/~user");
    EXPECT_EQ(norm("/a%20b"), "/a%20b");
    EXPECT_EQ(norm("/a%c3%a9"), "/a%C3%A9");
    EXPECT_EQ(norm("/.well-known/x"), "/.well-known/x");
    EXPECT_EQ(norm("/a/...b/..."), "/a/...b/...");
    EXPECT_EQ(norm("/a/../b?x=/../y&z=%41"), "/b?x=/../y&z=%41");
    EXPECT_EQ(norm("*"), "*");
}

TEST(PathNormalize, AmbiguousShapesAreRejected)
{
    EXPECT_EQ(norm("/admin%2Fx"), "error: encoded slash or backslash in the request path");
    EXPECT_EQ(norm("/admin%2fx"), "error: encoded slash or backslash in the request path");
    EXPECT_EQ(norm("/admin%5cx"), "error: encoded slash or backslash in the request path");
    EXPECT_EQ(norm("/admin\\x"), "error: backslash in the request path");
    EXPECT_EQ(norm("/a%"), "error: truncated percent-escape in the request path");
    EXPECT_EQ(norm("/a%4"), "error: truncated percent-escape in the request path");
    EXPECT_EQ(norm("/a%zz"), "error: malformed percent-escape in the request path");
}

TEST(PathNormalize, TheParserFlagsExactlyThePathsNormalisationChanges)
{
    // the kernel takes only flagged-normal paths and matches them raw: a
    // path it takes must be its own normal form
    for (const char* t : {"/", "/a", "/a/b/", "/.well-known/x", "/a/...", "/a/.b", "/a?x=/../", "/a?%2F",
                          "/a..b/c.", "/x/y.z/"}) {
        EXPECT_TRUE(parser_says_normal(t)) << t;
        EXPECT_EQ(norm(t), t);
    }
    for (const char* t : {"//a", "/a//b", "/a/./b", "/a/../b", "/..", "/.", "/a/..", "/a/.", "/a/.?x", "/a/..?x",
                          "/%61", "/a%20b", "/a\\b", "/a/./"}) {
        EXPECT_FALSE(parser_says_normal(t)) << t;
    }
    // random paths over the interesting alphabet: normal per the parser
    // implies unchanged by the normaliser, and normalising twice is stable
    std::mt19937 rng(20261130);
    const std::string alphabet = "/./a%2e5Fb?";
    for (int i = 0; i < 20000; i++) {
        std::string t = "/";
        const int n = static_cast<int>(rng() % 12);
        for (int k = 0; k < n; k++)
            t += alphabet[rng() % alphabet.size()];
        auto r = normalize_target(t);
        if (parser_says_normal(t)) {
            EXPECT_EQ(r.target, t) << t;
        }
        if (r.error.empty()) {
            EXPECT_TRUE(parser_says_normal(r.target) || r.target.find('%') != std::string::npos) << t << " -> "
                                                                                                 << r.target;
            EXPECT_EQ(norm(r.target), r.target) << t;
        }
    }
}
