// Where a provider finds its token (auth::extract_token) and the whole
// request check (auth::authenticate).
#include <gtest/gtest.h>

#include <chrono>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "auth/Base64Url.hpp"
#include "auth/Jwt.hpp"

using namespace l7fast;
using namespace l7fast::auth;
using Clock = std::chrono::system_clock;

namespace {

// RFC 7515 A.1 (HS256, exp 1300819380)
constexpr std::string_view kToken =
    "eyJ0eXAiOiJKV1QiLA0KICJhbGciOiJIUzI1NiJ9"
    ".eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ"
    ".dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
const Clock::time_point kNow{std::chrono::seconds{1300819380 - 10}};

struct Request {
    std::vector<std::pair<std::string, std::string>> headers;
    std::vector<policy::HeaderField> fields;

    explicit Request(std::vector<std::pair<std::string, std::string>> h) : headers(std::move(h))
    {
        for (const auto& [n, v] : headers)
            fields.push_back({n, v});
    }
    Request(std::initializer_list<std::pair<std::string, std::string>> h)
        : Request(std::vector<std::pair<std::string, std::string>>(h))
    {
    }
    Request(const Request&) = delete;  // fields point into headers
    policy::RequestView view() const { return {"GET", "/", fields}; }
};

policy::JwtProvider header_provider()
{
    policy::JwtProvider p;
    p.name = "idp";
    p.algorithms = {"HS256"};
    policy::JwtKey k;
    k.alg = "HS256";
    EXPECT_TRUE(base64url_decode("AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow",
                                 &k.secret));
    p.keys = {k};
    return p;
}

policy::JwtProvider cookie_provider(std::string name = "session")
{
    policy::JwtProvider p = header_provider();
    p.from = {policy::RequestKey::Kind::Cookie, std::move(name)};
    p.from_prefix.clear();
    return p;
}

Extraction extract(const policy::JwtProvider& p, std::vector<std::pair<std::string, std::string>> headers)
{
    const Request rq(std::move(headers));
    Extraction x = extract_token(p, rq.view());
    // the view points into the request, which dies here: keep a copy
    static thread_local std::string keep;
    keep.assign(x.token);
    x.token = keep;
    return x;
}

std::string token_of(const Extraction& x)
{
    EXPECT_EQ(x.status, Status::Ok) << reason_name(x.reason);
    return std::string(x.token);
}

const std::string kBearer = "Bearer " + std::string(kToken);

}  // namespace

TEST(JwtExtract, BearerHeader)
{
    const auto p = header_provider();
    EXPECT_EQ(token_of(extract(p, {{"Host", "x"}, {"Authorization", kBearer}})), kToken);
    EXPECT_EQ(token_of(extract(p, {{"authorization", "bearer " + std::string(kToken)}})), kToken);
    EXPECT_EQ(token_of(extract(p, {{"AUTHORIZATION", "BEARER " + std::string(kToken)}})), kToken);
    EXPECT_EQ(token_of(extract(p, {{"Authorization", "Bearer    " + std::string(kToken)}})), kToken);
    // only the first field line counts
    EXPECT_EQ(token_of(extract(p, {{"Authorization", kBearer}, {"Authorization", "Bearer other"}})), kToken);
    const Extraction second = extract(p, {{"Authorization", "Basic dXNlcjpwYXNz"}, {"Authorization", kBearer}});
    EXPECT_EQ(second.status, Status::Missing);
    EXPECT_EQ(second.reason, Reason::BadScheme);
}

TEST(JwtExtract, MissingAndWrongScheme)
{
    const auto p = header_provider();
    Extraction x = extract(p, {{"Host", "x"}});
    EXPECT_EQ(x.status, Status::Missing);
    EXPECT_EQ(x.reason, Reason::Missing);
    for (const char* other : {"Basic dXNlcjpwYXNz", "Token abc", "Bearerabc", "Bearer\tabc", "Beare abc", "", "abc"}) {
        x = extract(p, {{"Authorization", other}});
        EXPECT_EQ(x.status, Status::Missing) << other;
        EXPECT_EQ(x.reason, Reason::BadScheme) << other;
    }
    // the right scheme without a token is a malformed token, not a missing one
    for (const char* bare : {"Bearer", "bearer", "Bearer "}) {
        x = extract(p, {{"Authorization", bare}});
        EXPECT_EQ(x.status, Status::Invalid) << bare;
        EXPECT_EQ(x.reason, Reason::Malformed) << bare;
    }
}

TEST(JwtExtract, OtherHeaderWithoutPrefix)
{
    auto p = header_provider();
    p.from = {policy::RequestKey::Kind::Header, "x-jwt"};
    p.from_prefix.clear();
    EXPECT_EQ(token_of(extract(p, {{"Authorization", "Bearer nope"}, {"X-JWT", std::string(kToken)}})), kToken);
    EXPECT_EQ(extract(p, {{"Authorization", kBearer}}).reason, Reason::Missing);
}

TEST(JwtExtract, TooLargeIsInvalidNotMissing)
{
    auto p = header_provider();
    p.max_token_bytes = static_cast<uint32_t>(kToken.size());
    EXPECT_EQ(token_of(extract(p, {{"Authorization", kBearer}})), kToken);
    p.max_token_bytes = static_cast<uint32_t>(kToken.size() - 1);
    const Extraction x = extract(p, {{"Authorization", kBearer}});
    EXPECT_EQ(x.status, Status::Invalid);
    EXPECT_EQ(x.reason, Reason::TooLarge);
    const Extraction c = extract(cookie_provider(), {{"Cookie", "session=" + std::string(5000, 'a')}});
    EXPECT_EQ(c.status, Status::Invalid);
    EXPECT_EQ(c.reason, Reason::TooLarge);
}

TEST(JwtExtract, Cookie)
{
    const auto p = cookie_provider();
    const std::string t(kToken);
    EXPECT_EQ(token_of(extract(p, {{"Cookie", "session=" + t}})), t);
    EXPECT_EQ(token_of(extract(p, {{"Cookie", "a=1; session=" + t + "; b=2"}})), t);
    EXPECT_EQ(token_of(extract(p, {{"Cookie", "a=1;session=" + t + ";b=2"}})), t);
    EXPECT_EQ(token_of(extract(p, {{"Cookie", "a=1 ;\t session=" + t + " \t; b"}})), t);
    // every Cookie line, in order; the first cookie of the name wins
    EXPECT_EQ(token_of(extract(p, {{"Cookie", "a=1"}, {"Authorization", "x"}, {"cookie", "session=" + t}})), t);
    EXPECT_EQ(token_of(extract(p, {{"Cookie", "session=" + t + "; session=second"}})), t);
    EXPECT_EQ(token_of(extract(p, {{"Cookie", "session=" + t}, {"Cookie", "session=second"}})), t);
    // a value holding '=' is kept whole
    EXPECT_EQ(token_of(extract(p, {{"Cookie", "session=a=b"}})), "a=b");
    // names are case-sensitive and must match whole; pairs without '=' are skipped
    EXPECT_EQ(extract(p, {{"Cookie", "Session=" + t}}).reason, Reason::Missing);
    EXPECT_EQ(extract(p, {{"Cookie", "xsession=" + t + "; session_=x"}}).reason, Reason::Missing);
    EXPECT_EQ(extract(p, {{"Cookie", "session; other=1"}}).reason, Reason::Missing);
    EXPECT_EQ(extract(p, {{"Cookie", ""}}).reason, Reason::Missing);
    EXPECT_EQ(extract(p, {{"Set-Cookie", "session=" + t}}).reason, Reason::Missing);
    EXPECT_EQ(extract(p, {{"Authorization", kBearer}}).reason, Reason::Missing);
    // present but empty: malformed; quotes are kept (and make the token malformed later)
    const Extraction empty = extract(p, {{"Cookie", "session=; a=1"}});
    EXPECT_EQ(empty.status, Status::Invalid);
    EXPECT_EQ(empty.reason, Reason::Malformed);
    EXPECT_EQ(token_of(extract(p, {{"Cookie", "session=\"" + t + "\""}})), "\"" + t + "\"");
}

TEST(JwtAuthenticate, EndToEnd)
{
    std::string why;
    const auto v = Verifier::create(header_provider(), &why);
    ASSERT_TRUE(v) << why;
    const Request ok({{"Host", "x"}, {"Authorization", kBearer}});
    const Result r = authenticate(*v, ok.view(), kNow);
    ASSERT_TRUE(r.ok()) << reason_name(r.reason);
    EXPECT_EQ(r.token, kToken);
    EXPECT_EQ(r.claims.members.at("iss"), std::vector<std::string>{"joe"});

    const Request none({{"Host", "x"}});
    EXPECT_EQ(authenticate(*v, none.view(), kNow).status, Status::Missing);
    const Request basic({{"Authorization", "Basic dXNlcjpwYXNz"}});
    const Result b = authenticate(*v, basic.view(), kNow);
    EXPECT_EQ(b.status, Status::Missing);
    EXPECT_EQ(b.reason, Reason::BadScheme);
    EXPECT_EQ(www_authenticate("idp", b.reason), "Bearer realm=\"idp\"");
    const Request garbage({{"Authorization", "Bearer not.a.jwt"}});
    const Result g = authenticate(*v, garbage.view(), kNow);
    EXPECT_EQ(g.status, Status::Invalid);
    EXPECT_EQ(g.reason, Reason::Malformed);
    const Result late = authenticate(*v, ok.view(), Clock::now());
    EXPECT_EQ(late.status, Status::Invalid);
    EXPECT_EQ(late.reason, Reason::Expired);
    EXPECT_TRUE(late.token.empty());

    const auto cv = Verifier::create(cookie_provider(), &why);
    ASSERT_TRUE(cv) << why;
    const Request cookie({{"Cookie", "theme=dark; session=" + std::string(kToken)}});
    EXPECT_TRUE(authenticate(*cv, cookie.view(), kNow).ok());
    EXPECT_EQ(authenticate(*cv, ok.view(), kNow).status, Status::Missing);
}
