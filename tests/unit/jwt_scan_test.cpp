// The payload half of the kernel's HS verifier (bpf/include/l7_jwtscan.h,
// compiled natively: the same code the data plane runs) against the
// reference verifier (auth/Jwt.hpp). The scan may hand a payload to the
// slow path (L7_JV_SHAPE); whatever it decides must be what the reference
// decides for the same token at the same instant: admitted when the
// reference admits, and refused with the reference's reason otherwise.
// Hand-written payloads cover every branch of the scan and every claim
// boundary; seeded mutations of them cover the rest. The same for the
// header half (l7_jwt_judge_header) against Verifier::check_header.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "auth/Jwt.hpp"
#include "auth/JwtKernel.hpp"
#include "compiler/PolicyCompiler.hpp"
#include "l7_jwtscan.h"
#include "support/Hs256.hpp"

using namespace l7fast;
using Clock = std::chrono::system_clock;

namespace {

constexpr const char* kSecret = "l7fast-unit-test-hs256-secret-0123456789";
constexpr int64_t kNow = 1800000000;  // seconds
constexpr int64_t kSkew = 60;

std::string sign(std::string_view payload) { return test_support::hs256_token(std::string(payload), kSecret); }

struct Fixture {
    policy::JwtProvider provider;
    std::unique_ptr<auth::Verifier> verifier;
    l7_jwt_provider kernel{};
};

Fixture make_fixture(std::optional<std::string> issuer, std::vector<std::string> audiences, bool require_exp)
{
    Fixture s;
    s.provider.name = "p";
    s.provider.algorithms = {"HS256"};
    policy::JwtKey k;
    k.alg = "HS256";
    k.secret = kSecret;
    s.provider.keys = {k};
    s.provider.issuer = std::move(issuer);
    s.provider.audiences = std::move(audiences);
    s.provider.require_exp = require_exp;
    s.provider.clock_skew = std::chrono::seconds{kSkew};
    std::string why;
    auto v = auth::Verifier::create(s.provider, &why);
    EXPECT_TRUE(v) << why;
    s.verifier = std::make_unique<auth::Verifier>(std::move(*v));
    EXPECT_EQ(policy::kernel_jwt_verify(s.provider, s.kernel), "");
    return s;
}

auth::Reason reason_of(uint32_t detail)
{
    if (detail < L7_ANS_DETAIL_EXPIRED || detail > L7_ANS_DETAIL_MISSING_EXP)
        ADD_FAILURE() << "detail " << detail << " is not one of the scan's";
    return auth::kernel_refusal_reason(detail);
}

struct Outcome {
    int verdict = L7_JV_SHAPE;
    uint32_t detail = 0;
};

// The kernel's scan and claim checks, as the data plane runs them.
Outcome kernel(const Fixture& s, std::string_view payload, int64_t now_s)
{
    auto wk = std::make_unique<l7_jwt_work>();
    Outcome o;
    if (payload.size() > L7_JWT_PAYLOAD_BUF)
        return o;
    std::memcpy(wk->payload, payload.data(), payload.size());
    o.verdict = l7_jwt_judge(wk.get(), &s.kernel, static_cast<__u32>(payload.size()),
                             static_cast<__u64>(now_s) * 1000000000ull, &o.detail);
    return o;
}

// Checks agreement; returns whether the scan decided (not L7_JV_SHAPE).
bool agree(const Fixture& s, std::string_view payload, int64_t now_s = kNow)
{
    const Outcome k = kernel(s, payload, now_s);
    const auth::Result r = s.verifier->verify(sign(payload), Clock::time_point{std::chrono::seconds{now_s}});
    if (k.verdict == L7_JV_OK)
        EXPECT_TRUE(r.ok()) << "kernel admits, reference says " << auth::reason_name(r.reason) << ": " << payload;
    else if (k.verdict == L7_JV_REJECT)
        EXPECT_EQ(auth::reason_name(r.reason), auth::reason_name(reason_of(k.detail))) << payload;
    else
        EXPECT_EQ(k.verdict, L7_JV_SHAPE) << payload;
    return k.verdict != L7_JV_SHAPE;
}

std::string num(int64_t v) { return std::to_string(v); }

// One of `seeds` with one to three bytes replaced, inserted (from
// `alphabet`) or erased, as `rng` says.
std::string mutated(const std::vector<std::string>& seeds, const std::string& alphabet, std::mt19937& rng)
{
    std::string p = seeds[rng() % seeds.size()];
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits && !p.empty(); e++) {
        const size_t at = rng() % p.size();
        const char c = alphabet[rng() % alphabet.size()];
        switch (rng() % 3) {
        case 0: p[at] = c; break;
        case 1: p.insert(p.begin() + static_cast<std::ptrdiff_t>(at), c); break;
        default: p.erase(at, 1); break;
        }
    }
    return p;
}

}  // namespace

TEST(JwtKernelScan, DecidesTypicalPayloadsAsTheReference)
{
    const Fixture s = make_fixture("https://issuer.test", {"api", "web"}, true);
    const std::string exp = num(kNow + 600);
    // what JWT libraries write: compact, spaced, with arrays and literals
    for (const std::string& p : std::vector<std::string>{
             R"({"iss":"https://issuer.test","aud":"api","sub":"alice","exp":)" + exp + "}",
             R"({"iss": "https://issuer.test", "aud": ["x", "web"], "sub": "bob", "exp": )" + exp + R"(, "iat": 1700000000})",
             "{\n  \"exp\": " + exp + ",\n\t\"iss\":\"https://issuer.test\",\r\n \"aud\":[\"api\"] }",
             R"({"iss":"https://issuer.test","aud":"api","exp":)" + exp +
                 R"(,"admin":true,"guest":false,"team":null,"roles":["a","b"],"n":[1,-2,0],"neg":-5,"e":[]})",
         })
        EXPECT_TRUE(agree(s, p)) << "the scan should decide " << p;
}

TEST(JwtKernelScan, ClaimBoundariesAreTheReferences)
{
    const Fixture s = make_fixture("https://issuer.test", {"api"}, true);
    const auto with = [](const std::string& claims) {
        return R"({"iss":"https://issuer.test","aud":"api",)" + claims + "}";
    };
    // exp + skew is the first instant the token is expired; nbf - skew the first it is valid
    for (int64_t d : {-kSkew - 2, -kSkew - 1, -kSkew, -kSkew + 1, int64_t{0}, int64_t{1}})
        EXPECT_TRUE(agree(s, with(R"("exp":)" + num(kNow + d)))) << d;
    for (int64_t d : {kSkew - 1, kSkew, kSkew + 1, int64_t{0}, int64_t{-1}})
        EXPECT_TRUE(agree(s, with(R"("exp":)" + num(kNow + 600) + R"(,"nbf":)" + num(kNow + d)))) << d;
    // nbf - skew before the epoch, exp 0, the NumericDate ceiling (2^33 s)
    EXPECT_TRUE(agree(s, with(R"("exp":)" + num(kNow + 600) + R"(,"nbf":30)")));
    EXPECT_TRUE(agree(s, with(R"("exp":0)")));
    EXPECT_TRUE(agree(s, with(R"("exp":99999999999)")));
    EXPECT_TRUE(agree(s, with(R"("exp":99999999999)"), (int64_t{1} << 33) + kSkew + 1));
    EXPECT_TRUE(agree(s, with(R"("exp":99999999999)"), (int64_t{1} << 33) + kSkew - 1));
    // missing exp, wrong issuer, issuer of another type, audiences
    EXPECT_TRUE(agree(s, with(R"("sub":"x")")));
    EXPECT_TRUE(agree(s, R"({"iss":"https://issuer.tes","aud":"api","exp":)" + num(kNow + 600) + "}"));
    EXPECT_TRUE(agree(s, R"({"iss":"https://issuer.testx","aud":"api","exp":)" + num(kNow + 600) + "}"));
    EXPECT_TRUE(agree(s, R"({"aud":"api","exp":)" + num(kNow + 600) + "}"));
    EXPECT_TRUE(agree(s, R"({"iss":1,"aud":"api","exp":)" + num(kNow + 600) + "}"));
    EXPECT_TRUE(agree(s, R"({"iss":["https://issuer.test"],"aud":"api","exp":)" + num(kNow + 600) + "}"));
    EXPECT_TRUE(agree(s, R"({"iss":"https://issuer.test","aud":"apix","exp":)" + num(kNow + 600) + "}"));
    EXPECT_TRUE(agree(s, R"({"iss":"https://issuer.test","aud":[],"exp":)" + num(kNow + 600) + "}"));
    EXPECT_TRUE(agree(s, R"({"iss":"https://issuer.test","aud":["api",1],"exp":)" + num(kNow + 600) + "}"));
    EXPECT_TRUE(agree(s, R"({"iss":"https://issuer.test","aud":null,"exp":)" + num(kNow + 600) + "}"));
    EXPECT_TRUE(agree(s, R"({"iss":"https://issuer.test","exp":)" + num(kNow + 600) + "}"));
    // without issuer, audiences and require_exp nothing but the times counts
    const Fixture open = make_fixture(std::nullopt, {}, false);
    EXPECT_TRUE(agree(open, "{}"));
    EXPECT_TRUE(agree(open, R"({"sub":"x"})"));
    EXPECT_TRUE(agree(open, R"({"exp":)" + num(kNow - 3600) + "}"));
}

TEST(JwtKernelScan, LeavesWhatItCannotDecideExactlyToTheSlowPath)
{
    const Fixture s = make_fixture("https://issuer.test", {"api"}, true);
    const std::string tail = R"("iss":"https://issuer.test","aud":"api","exp":)" + num(kNow + 600);
    for (const std::string& p : std::vector<std::string>{
             "{" + tail + R"(,"a":{"b":1}})",                 // nested object
             "{" + tail + R"(,"a":[[1]]})",                   // nested array
             "{" + tail + R"(,"a":"x\"y"})",                  // an escape
             "{" + tail + ",\"a\":\"\xc3\xa9\"}",             // non-ASCII
             "{" + tail + R"(,"a":1.5})",                     // a fraction
             "{" + tail + R"(,"a":1e3})",                     // an exponent
             "{" + tail + R"(,"a":1,"a":2})",                 // a duplicate name
             "{" + tail + R"(,"exp":1})",                     // a duplicate claim
             "{" + tail + R"(,"a":01})",                      // invalid JSON: leading zero
             "{" + tail + R"(,"a":-})",                       // invalid JSON
             "{" + tail + R"(,"a":tru})",                     // invalid literal
             "{" + tail + R"(,"a":truex})",                   // invalid literal
             "{" + tail + R"(,})",                            // trailing comma
             "{" + tail + R"(,"a":[1,]})",                    // trailing comma in an array
             "{" + tail,                                      // unterminated
             "{" + tail + "} x",                              // bytes after the object
             "[" + tail + "]",                                // not an object
             R"({"iss":"https://issuer.test","aud":"api","exp":")" + num(kNow + 600) + "\"}",  // exp a string
             R"({"iss":"https://issuer.test","aud":"api","exp":-1})",                          // negative exp
             R"({"iss":"https://issuer.test","aud":"api","exp":100000000000})",                // 12 digits
             R"({"iss":"https://issuer.test","aud":"api","exp":1.8e9})",                       // exp a float
             "{" + tail + R"(,"m1":0,"m2":0,"m3":0,"m4":0,"m5":0,"m6":0,"m7":0,"m8":0,"m9":0,"m10":0,"m11":0,"m12":0,"m13":0,"m14":0})",
             "{" + tail + R"(,"a\u0041":1})",                 // an escape in a name
         }) {
        EXPECT_FALSE(agree(s, p)) << "the scan should leave this to the slow path: " << p;
    }
}

// Seeded mutations of valid payloads: every decision the scan makes is the
// reference's (deterministic: fixed seed, fixed count).
TEST(JwtKernelScan, MutatedPayloadsNeverDisagree)
{
    const Fixture s = make_fixture("https://issuer.test", {"api", "web"}, true);
    const std::vector<std::string> seeds = {
        R"({"iss":"https://issuer.test","aud":["api","x"],"sub":"alice","exp":)" + num(kNow + 600) +
            R"(,"nbf":)" + num(kNow - 10) + R"(,"ok":true,"n":null,"k":[1,false]})",
        R"({ "exp" : )" + num(kNow + 30) + R"( , "iss" : "https://issuer.test" , "aud" : "web" })",
    };
    const std::string alphabet = "{}[],:\" \t\n0123456789-.etrufalsnxiadpbw\\e";
    std::mt19937 rng(20261205);
    size_t decided = 0, total = 0;
    for (int round = 0; round < 20000; round++) {
        const std::string p = mutated(seeds, alphabet, rng);
        total++;
        if (agree(s, p, kNow + static_cast<int64_t>(rng() % 200) - 100))
            decided++;
        if (HasFailure())
            break;
    }
    // not a rate: the mutations are fixed by the seed; the scan decides
    // most of them (a change of the scan that bails on everything fails)
    EXPECT_GT(decided, total / 4);
}

namespace {

// A provider accepting HS256 and RS256 (not HS384, HS512, ES256).
struct HeaderFixture {
    std::unique_ptr<auth::Verifier> verifier;
    uint32_t algs = 0;
};

HeaderFixture make_header_fixture()
{
    policy::JwtProvider provider;
    provider.name = "p";
    provider.algorithms = {"HS256", "RS256"};
    policy::JwtKey k;
    k.alg = "HS256";
    k.kid = "k1";
    k.secret = kSecret;
    provider.keys = {k};
    std::string why;
    auto v = auth::Verifier::create(provider, &why);
    EXPECT_TRUE(v) << why;
    HeaderFixture f;
    f.verifier = std::make_unique<auth::Verifier>(std::move(*v));
    l7_jwt_provider kp{};
    EXPECT_EQ(policy::kernel_jwt_verify(provider, kp), "");
    f.algs = kp.algs;
    return f;
}

// Checks the header scan against the reference; returns whether it decided.
bool agree_header(const HeaderFixture& f, std::string_view json)
{
    auto wk = std::make_unique<l7_jwt_work>();
    if (json.size() > L7_JWT_PAYLOAD_BUF)
        return false;
    std::memcpy(wk->payload, json.data(), json.size());
    uint32_t alg = L7_JA_N, detail = 0;
    const int v = l7_jwt_judge_header(wk.get(), static_cast<__u32>(json.size()), f.algs, &alg, &detail);
    std::optional<auth::Alg> ref_alg;
    std::string_view ref_kid;
    const auth::Reason ref = f.verifier->check_header(json, &ref_alg, &ref_kid);
    if (v == L7_JV_OK) {
        EXPECT_EQ(auth::reason_name(ref), "ok") << json;
        EXPECT_TRUE(ref_alg && static_cast<uint32_t>(*ref_alg) == alg) << json;
        const std::string_view kid(reinterpret_cast<const char*>(wk->payload) + wk->sc.hs_off[1],
                                   wk->sc.hs_len[1]);
        EXPECT_EQ(kid, ref_kid) << json;
    } else if (v == L7_JV_REJECT) {
        EXPECT_TRUE(detail == L7_ANS_DETAIL_MALFORMED || detail == L7_ANS_DETAIL_ALG_NOT_ALLOWED) << detail;
        EXPECT_EQ(auth::reason_name(ref), auth::reason_name(auth::kernel_refusal_reason(detail))) << json;
    } else {
        EXPECT_EQ(v, L7_JV_SHAPE) << json;
    }
    return v != L7_JV_SHAPE;
}

}  // namespace

TEST(JwtKernelHeaderScan, DecidesHeadersAsTheReference)
{
    const HeaderFixture f = make_header_fixture();
    for (const std::string& h : std::vector<std::string>{
             // accepted, in the forms libraries and tools write
             R"({"alg":"HS256","typ":"JWT","kid":"k1"})",
             R"({"kid": "k1", "alg": "HS256"})",
             R"({"alg":"HS256"})",
             R"({"alg":"HS256","kid":""})",
             R"({"alg":"HS256","kid":"no-such-kid","cty":"JWT","x5t":null,"n":[1,"a",true]})",
             " {\n\t\"alg\" : \"RS256\" ,\r\n \"kid\":\"k1\" } ",
             // typ as the reference takes it: media types case aside, "application/" optional
             R"({"alg":"HS256","typ":"jwt"})",
             R"({"alg":"HS256","typ":"Jwt"})",
             R"({"alg":"HS256","typ":"application/jwt"})",
             R"({"alg":"HS256","typ":"APPLICATION/JWT"})",
             R"({"alg":"HS256","typ":"at+jwt"})",
             R"({"alg":"HS256","typ":"application/AT+JWT"})",
             // malformed: typ
             R"({"alg":"HS256","typ":"JWS"})",
             R"({"alg":"HS256","typ":"application/"})",
             R"({"alg":"HS256","typ":"application/application/jwt"})",
             R"({"alg":"HS256","typ":"applicationXjwt"})",
             R"({"alg":"HS256","typ":"at-jwt"})",
             R"({"alg":"HS256","typ":"jwtx"})",
             R"({"alg":"HS256","typ":""})",
             R"({"alg":"HS256","typ":1})",
             R"({"alg":"HS256","typ":null})",
             R"({"alg":"HS256","typ":["JWT"]})",
             // malformed: alg, kid, crit, no JSON object
             R"({"typ":"JWT"})",
             R"({})",
             R"({"alg":1})",
             R"({"alg":null})",
             R"({"alg":["HS256"]})",
             R"({"alg":"HS256","kid":7})",
             R"({"alg":"HS256","kid":["k1"]})",
             R"({"alg":"HS256","crit":["exp"]})",
             R"({"alg":"none","crit":"x"})",
             "",
             // algorithms the provider does not accept, or l7fast does not know
             R"({"alg":"none"})",
             R"({"alg":"None","kid":"k1"})",
             R"({"alg":"HS384"})",
             R"({"alg":"HS512","kid":"k1"})",
             R"({"alg":"ES256"})",
             R"({"alg":"hs256"})",
             R"({"alg":"HS2566"})",
             R"({"alg":"HS25"})",
             R"({"alg":""})",
             R"({"alg":"PS256","typ":"JWT"})",
         })
        EXPECT_TRUE(agree_header(f, h)) << "the scan should decide " << h;
}

TEST(JwtKernelHeaderScan, LeavesWhatItCannotDecideExactlyToTheSlowPath)
{
    const HeaderFixture f = make_header_fixture();
    for (const std::string& h : std::vector<std::string>{
             R"({"alg":"HS256","kid":"k\u0031"})",      // an escape in a compared string
             R"({"alg":"HS\u0032""56"})",               // (and invalid JSON)
             R"({"alg":"HS256","jwk":{"kty":"oct"}})",  // a nested object
             R"({"alg":"HS256","alg":"none"})",         // a duplicate
             R"({"alg":"HS256","x":1.5})",              // a fraction
             "{\"alg\":\"HS256\",\"kid\":\"\xc3\xa9\"}",  // non-ASCII
             R"({"alg":"HS256")",                       // unterminated
             R"(["alg","HS256"])",                      // not an object
         })
        EXPECT_FALSE(agree_header(f, h)) << "the scan should leave this to the slow path: " << h;
}

TEST(JwtKernelHeaderScan, MutatedHeadersNeverDisagree)
{
    const HeaderFixture f = make_header_fixture();
    const std::vector<std::string> seeds = {
        R"({"alg":"HS256","typ":"JWT","kid":"k1"})",
        R"({"typ": "application/at+jwt", "alg": "RS256", "crit": ["b64"]})",
    };
    const std::string alphabet = "{}[],:\" \t\n01-.etrufalsnHS256RkidcypJWT/+\\";
    std::mt19937 rng(20261206);
    size_t decided = 0, total = 0;
    for (int round = 0; round < 20000; round++) {
        const std::string h = mutated(seeds, alphabet, rng);
        total++;
        if (agree_header(f, h))
            decided++;
        if (HasFailure())
            break;
    }
    // fixed by the seed, as above: a scan that bails on everything fails
    EXPECT_GT(decided, total / 4);
}
