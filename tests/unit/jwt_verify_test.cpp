// JWT verification, the reference semantics (auth/Jwt.hpp): the RFC 7515
// Appendix A and RFC 7519 §3.1 examples verify; forgeries, confusion and
// claim violations fail with the reason telemetry will show.
#include <gtest/gtest.h>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "auth/Base64Url.hpp"
#include "auth/Jwt.hpp"

using namespace l7fast;
using namespace l7fast::auth;
using std::chrono::seconds;
using Clock = std::chrono::system_clock;

namespace {

// ---- RFC 7515 Appendix A (A.1 is also the RFC 7519 §3.1 example) ---------------

constexpr const char* kA1Token =
    "eyJ0eXAiOiJKV1QiLA0KICJhbGciOiJIUzI1NiJ9"
    ".eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ"
    ".dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
constexpr const char* kA1Key = "AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow";
constexpr const char* kA2Token =
    "eyJhbGciOiJSUzI1NiJ9"
    ".eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ"
    ".cC4hiUPoj9Eetdgtv3hF80EGrhuB__dzERat0XF9g2VtQgr9PJbu3XOiZj5RZmh7AAuHIm4Bh-0Qc_lF5YKt_O8W2Fp5jujGbds9uJ"
    "dbF9CUAr7t1dnZcAcQjbKBYNX4BAynRFdiuB--f_nZLgrnbyTyWzO75vRK5h6xBArLIARNPvkSjtQBMHlb1L07Qe7K0GarZRmB_"
    "eSN9383LcOLn6_dO--xi12jzDwusC-eOkHWEsqtFZESc6BfI7noOPqvhJ1phCnvWh6IeYI2w9QOYEUipUTI8np6LbgGY9Fs98rq"
    "Vt5AXLIhWkWywlVmtVrBp0igcN_IoypGlUPQGe77Rw";
constexpr const char* kA3Token =
    "eyJhbGciOiJFUzI1NiJ9"
    ".eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ"
    ".DtEhU3ljbEg8L38VWAfUAqOyKAM6-Xx-F4GawxaepmXFCgfTjDxw5djxLa8ISlSApmWQxfKTUJqPP3-Kg6NU1Q";
constexpr int64_t kA1Exp = 1300819380;

const Clock::time_point kBeforeA1Exp = Clock::time_point{seconds{kA1Exp - 3600}};

std::string b64d(std::string_view s)
{
    std::string out;
    EXPECT_TRUE(base64url_decode(s, &out)) << s;
    return out;
}

std::string read_file(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    EXPECT_TRUE(in) << path;
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::string data_file(const std::string& name) { return read_file(std::string(L7FAST_TEST_DATA) + "/jwt/" + name); }

policy::JwtKey hs_key(std::string secret, std::string kid = "", std::string alg = "HS256")
{
    policy::JwtKey k;
    k.kid = std::move(kid);
    k.alg = std::move(alg);
    k.secret = std::move(secret);
    return k;
}

policy::JwtKey pem_key(std::string alg, std::string pem, std::string kid = "")
{
    policy::JwtKey k;
    k.kid = std::move(kid);
    k.alg = std::move(alg);
    k.pem = std::move(pem);
    return k;
}

policy::JwtProvider provider(std::vector<std::string> algorithms, std::vector<policy::JwtKey> keys)
{
    policy::JwtProvider p;
    p.name = "test";
    p.algorithms = std::move(algorithms);
    p.keys = std::move(keys);
    return p;
}

Verifier make(const policy::JwtProvider& p)
{
    std::string why;
    auto v = Verifier::create(p, &why);
    EXPECT_TRUE(v) << why;
    if (!v)
        throw std::runtime_error(why);
    return std::move(*v);
}

std::string create_error(const policy::JwtProvider& p)
{
    std::string why;
    auto v = Verifier::create(p, &why);
    EXPECT_FALSE(v);
    return why;
}

Verifier a1_verifier() { return make(provider({"HS256"}, {hs_key(b64d(kA1Key))})); }

// ---- signing, for tokens the RFC does not give ------------------------------------

struct PkeyFree {
    void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyFree>;

std::string hmac(std::string_view alg_digest, std::string_view key, std::string_view data)
{
    unsigned char out[EVP_MAX_MD_SIZE];
    size_t len = 0;
    EXPECT_TRUE(EVP_Q_mac(nullptr, "HMAC", nullptr, std::string(alg_digest).c_str(), nullptr, key.data(), key.size(),
                          reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, sizeof out, &len));
    return std::string(reinterpret_cast<char*>(out), len);
}

std::string pkey_sign(EVP_PKEY* key, std::string_view data)
{
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    size_t len = 0;
    EXPECT_EQ(EVP_DigestSignInit(ctx, nullptr, EVP_sha256(), nullptr, key), 1);
    EXPECT_EQ(EVP_DigestSign(ctx, nullptr, &len, reinterpret_cast<const unsigned char*>(data.data()), data.size()), 1);
    std::string sig(len, '\0');
    EXPECT_EQ(EVP_DigestSign(ctx, reinterpret_cast<unsigned char*>(sig.data()), &len,
                             reinterpret_cast<const unsigned char*>(data.data()), data.size()),
              1);
    sig.resize(len);
    EVP_MD_CTX_free(ctx);
    if (!EVP_PKEY_is_a(key, "EC"))
        return sig;
    // DER ECDSA-Sig-Value to JWS r||s
    const auto* p = reinterpret_cast<const unsigned char*>(sig.data());
    ECDSA_SIG* es = d2i_ECDSA_SIG(nullptr, &p, static_cast<long>(sig.size()));
    EXPECT_TRUE(es);
    std::string raw(64, '\0');
    BN_bn2binpad(ECDSA_SIG_get0_r(es), reinterpret_cast<unsigned char*>(raw.data()), 32);
    BN_bn2binpad(ECDSA_SIG_get0_s(es), reinterpret_cast<unsigned char*>(raw.data()) + 32, 32);
    ECDSA_SIG_free(es);
    return raw;
}

std::string public_pem(EVP_PKEY* key)
{
    BIO* bio = BIO_new(BIO_s_mem());
    EXPECT_EQ(PEM_write_bio_PUBKEY(bio, key), 1);
    char* data = nullptr;
    const long len = BIO_get_mem_data(bio, &data);
    std::string pem(data, static_cast<size_t>(len));
    BIO_free(bio);
    return pem;
}

std::string private_pem(EVP_PKEY* key)
{
    BIO* bio = BIO_new(BIO_s_mem());
    EXPECT_EQ(PEM_write_bio_PrivateKey(bio, key, nullptr, nullptr, 0, nullptr, nullptr), 1);
    char* data = nullptr;
    const long len = BIO_get_mem_data(bio, &data);
    std::string pem(data, static_cast<size_t>(len));
    BIO_free(bio);
    return pem;
}

// Keys generated once per test binary run.
EVP_PKEY* rsa_key()
{
    static Pkey key(EVP_PKEY_Q_keygen(nullptr, nullptr, "RSA", size_t{2048}));
    return key.get();
}
EVP_PKEY* ec_key()
{
    static Pkey key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
    return key.get();
}

std::string join(std::string_view header_json, std::string_view payload_json)
{
    return base64url_encode(header_json) + "." + base64url_encode(payload_json);
}

std::string sign_hs(std::string_view header_json, std::string_view payload_json, std::string_view secret,
                    std::string_view digest = "SHA256")
{
    const std::string input = join(header_json, payload_json);
    return input + "." + base64url_encode(hmac(digest, secret, input));
}

std::string sign_pkey(std::string_view header_json, std::string_view payload_json, EVP_PKEY* key)
{
    const std::string input = join(header_json, payload_json);
    return input + "." + base64url_encode(pkey_sign(key, input));
}

const std::string kSecret(32, 'k');
const Clock::time_point kNow = Clock::time_point{seconds{1'700'000'000}};
const std::string kFutureExp = std::to_string(1'700'000'000 + 600);

// An HS256 provider with kSecret and a token factory for claims tests.
Verifier hs_verifier(std::function<void(policy::JwtProvider&)> tweak = {})
{
    auto p = provider({"HS256"}, {hs_key(kSecret)});
    if (tweak)
        tweak(p);
    return make(p);
}

std::string hs_token(std::string_view payload_json, std::string_view header_json = R"({"alg":"HS256","typ":"JWT"})")
{
    return sign_hs(header_json, payload_json, kSecret);
}

Reason reason_of(const Verifier& v, std::string_view token, Clock::time_point now = kNow)
{
    return v.verify(token, now).reason;
}

// Part i of a token, replaced.
std::string with_part(std::string_view token, int i, std::string_view part)
{
    std::vector<std::string> parts;
    size_t start = 0;
    for (;;) {
        const size_t dot = token.find('.', start);
        parts.emplace_back(token.substr(start, dot - start));
        if (dot == std::string_view::npos)
            break;
        start = dot + 1;
    }
    parts.at(static_cast<size_t>(i)) = std::string(part);
    std::string out;
    for (size_t k = 0; k < parts.size(); ++k)
        out += (k ? "." : "") + parts[k];
    return out;
}

std::string part(std::string_view token, int i)
{
    size_t start = 0;
    for (int k = 0; k < i; ++k)
        start = token.find('.', start) + 1;
    const size_t dot = token.find('.', start);
    return std::string(token.substr(start, dot == std::string_view::npos ? dot : dot - start));
}

}  // namespace

// ---- the RFC examples ------------------------------------------------------------

TEST(JwtVerify, Rfc7515A1Hs256)
{
    const Verifier v = a1_verifier();
    const Result r = v.verify(kA1Token, kBeforeA1Exp);
    ASSERT_EQ(r.reason, Reason::Ok) << reason_name(r.reason);
    EXPECT_EQ(r.status, Status::Ok);
    EXPECT_EQ(r.token, kA1Token);
    EXPECT_EQ(r.expires, Clock::time_point{seconds{kA1Exp}});
    EXPECT_EQ(r.valid_until, Clock::time_point{seconds{kA1Exp + 60}});
    EXPECT_EQ(r.claims.members.size(), 3u);
    EXPECT_EQ(r.claims.members.at("iss"), std::vector<std::string>{"joe"});
    EXPECT_EQ(r.claims.members.at("exp"), std::vector<std::string>{"1300819380"});
    EXPECT_EQ(r.claims.members.at("http://example.com/is_root"), std::vector<std::string>{"true"});
    // accepted up to exp + clock_skew, not at it
    EXPECT_TRUE(v.verify(kA1Token, Clock::time_point{seconds{kA1Exp + 59}}).ok());
    EXPECT_EQ(v.verify(kA1Token, Clock::time_point{seconds{kA1Exp + 60}}).reason, Reason::Expired);
}

TEST(JwtVerify, Rfc7519Section3_1Example)
{
    // RFC 7519 §3.1 shows the same JWS as RFC 7515 A.1: header
    // {"typ":"JWT",\r\n "alg":"HS256"} with the line break inside the JSON.
    EXPECT_EQ(b64d(part(kA1Token, 0)), "{\"typ\":\"JWT\",\r\n \"alg\":\"HS256\"}");
    EXPECT_EQ(b64d(part(kA1Token, 1)),
              "{\"iss\":\"joe\",\r\n \"exp\":1300819380,\r\n \"http://example.com/is_root\":true}");
    const Result r = a1_verifier().verify(kA1Token, kBeforeA1Exp);
    ASSERT_TRUE(r.ok());
    EXPECT_TRUE(r.claims.has("http://example.com/is_root"));
    // and, like any token past its exp, it is refused today
    EXPECT_EQ(a1_verifier().verify(kA1Token, Clock::now()).reason, Reason::Expired);
}

TEST(JwtVerify, Rfc7515A2Rs256)
{
    for (const char* pem : {"rfc7515-a2.pem", "rfc7515-a2-pkcs1.pem"}) {
        const Verifier v = make(provider({"RS256"}, {pem_key("RS256", data_file(pem))}));
        const Result r = v.verify(kA2Token, kBeforeA1Exp);
        EXPECT_EQ(r.reason, Reason::Ok) << pem << ": " << reason_name(r.reason);
        EXPECT_EQ(r.claims.members.at("iss"), std::vector<std::string>{"joe"});
    }
}

TEST(JwtVerify, Rfc7515A3Es256)
{
    const Verifier v = make(provider({"ES256"}, {pem_key("ES256", data_file("rfc7515-a3.pem"))}));
    const Result r = v.verify(kA3Token, kBeforeA1Exp);
    EXPECT_EQ(r.reason, Reason::Ok) << reason_name(r.reason);
    EXPECT_EQ(r.expires, Clock::time_point{seconds{kA1Exp}});
}

// ---- forgeries -------------------------------------------------------------------

struct Example {
    const char* token;
    std::function<Verifier()> verifier;
};

std::vector<Example> examples()
{
    return {
        {kA1Token, [] { return a1_verifier(); }},
        {kA2Token, [] { return make(provider({"RS256"}, {pem_key("RS256", data_file("rfc7515-a2.pem"))})); }},
        {kA3Token, [] { return make(provider({"ES256"}, {pem_key("ES256", data_file("rfc7515-a3.pem"))})); }},
    };
}

TEST(JwtVerify, FlippedSignatureBitFails)
{
    for (const Example& ex : examples()) {
        const Verifier v = ex.verifier();
        const std::string sig = b64d(part(ex.token, 2));
        for (size_t bit : {size_t{0}, size_t{7}, sig.size() * 4, sig.size() * 8 - 1}) {
            std::string bad = sig;
            bad[bit / 8] = static_cast<char>(bad[bit / 8] ^ (1 << (bit % 8)));
            EXPECT_EQ(reason_of(v, with_part(ex.token, 2, base64url_encode(bad)), kBeforeA1Exp),
                      Reason::BadSignature)
                << ex.token << " bit " << bit;
        }
    }
}

TEST(JwtVerify, FlippedPayloadBitFails)
{
    for (const Example& ex : examples()) {
        const Verifier v = ex.verifier();
        std::string payload = b64d(part(ex.token, 1));
        payload[8] = static_cast<char>(payload[8] ^ 0x01);  // "joe" -> "koe"
        EXPECT_EQ(reason_of(v, with_part(ex.token, 1, base64url_encode(payload)), kBeforeA1Exp),
                  Reason::BadSignature);
        // and the header's bytes are signed too
        EXPECT_NE(reason_of(v, with_part(ex.token, 0, base64url_encode(b64d(part(ex.token, 0)) + " ")),
                            kBeforeA1Exp),
                  Reason::Ok);
    }
}

TEST(JwtVerify, TruncatedOrExtendedSignatureFails)
{
    for (const Example& ex : examples()) {
        const Verifier v = ex.verifier();
        const std::string sig = b64d(part(ex.token, 2));
        EXPECT_EQ(reason_of(v, with_part(ex.token, 2, base64url_encode(sig.substr(0, sig.size() - 1))), kBeforeA1Exp),
                  Reason::BadSignature);
        EXPECT_EQ(reason_of(v, with_part(ex.token, 2, base64url_encode(sig.substr(0, 16))), kBeforeA1Exp),
                  Reason::BadSignature);
        EXPECT_EQ(reason_of(v, with_part(ex.token, 2, base64url_encode(sig + std::string(1, '\0'))), kBeforeA1Exp),
                  Reason::BadSignature);
        EXPECT_EQ(reason_of(v, with_part(ex.token, 2, ""), kBeforeA1Exp), Reason::BadSignature);
        // one character less is either non-canonical base64url or a short signature
        const std::string cut = std::string(ex.token).substr(0, std::string_view(ex.token).size() - 1);
        EXPECT_NE(reason_of(v, cut, kBeforeA1Exp), Reason::Ok);
    }
}

TEST(JwtVerify, HmacMustBeFullLength)
{
    const Verifier v = a1_verifier();
    const std::string mac = b64d(part(kA1Token, 2));
    EXPECT_EQ(reason_of(v, with_part(kA1Token, 2, base64url_encode(mac.substr(0, 16))), kBeforeA1Exp),
              Reason::BadSignature);  // a truncated HMAC (a prefix of the right one) is refused
}

TEST(JwtVerify, WrongKeyFails)
{
    EXPECT_EQ(reason_of(make(provider({"HS256"}, {hs_key(std::string(64, 'x'))})), kA1Token, kBeforeA1Exp),
              Reason::BadSignature);
    EXPECT_EQ(reason_of(make(provider({"RS256"}, {pem_key("RS256", public_pem(rsa_key()))})), kA2Token,
                        kBeforeA1Exp),
              Reason::BadSignature);
    EXPECT_EQ(reason_of(make(provider({"ES256"}, {pem_key("ES256", public_pem(ec_key()))})), kA3Token,
                        kBeforeA1Exp),
              Reason::BadSignature);
}

TEST(JwtVerify, AlgNoneIsNeverAccepted)
{
    const Verifier v = hs_verifier();
    const std::string payload = R"({"exp":)" + kFutureExp + "}";
    for (const char* none : {"none", "None", "NONE", "nOnE"}) {
        const std::string unsigned_token = join(std::string(R"({"alg":")") + none + "\"}", payload) + ".";
        EXPECT_EQ(reason_of(v, unsigned_token), Reason::AlgNotAllowed) << none;
        // a signature does not help either
        EXPECT_EQ(reason_of(v, unsigned_token + base64url_encode(hmac("SHA256", kSecret, unsigned_token))),
                  Reason::AlgNotAllowed);
    }
    EXPECT_NE(create_error(provider({"none"}, {hs_key(kSecret)})), "");
}

TEST(JwtVerify, AlgorithmsNotListedAreRefused)
{
    const Verifier v = hs_verifier();  // HS256 only
    const std::string payload = R"({"exp":)" + kFutureExp + "}";
    EXPECT_EQ(reason_of(v, sign_hs(R"({"alg":"HS512"})", payload, kSecret, "SHA512")), Reason::AlgNotAllowed);
    EXPECT_EQ(reason_of(v, sign_hs(R"({"alg":"hs256"})", payload, kSecret)), Reason::AlgNotAllowed);
    EXPECT_EQ(reason_of(v, sign_hs(R"({"alg":"PS256"})", payload, kSecret)), Reason::AlgNotAllowed);
    EXPECT_EQ(reason_of(v, sign_hs(R"({"alg":""})", payload, kSecret)), Reason::AlgNotAllowed);
    EXPECT_EQ(reason_of(v, sign_hs(R"({"alg":"HS256"})", payload, kSecret)), Reason::Ok);
}

TEST(JwtVerify, Hs384AndHs512)
{
    const std::string secret(64, 's');
    const Verifier v = make(provider({"HS384", "HS512"}, {hs_key(secret, "", "HS384"), hs_key(secret, "", "HS512")}));
    const std::string payload = R"({"exp":)" + kFutureExp + "}";
    EXPECT_TRUE(v.verify(sign_hs(R"({"alg":"HS384"})", payload, secret, "SHA384"), kNow).ok());
    EXPECT_TRUE(v.verify(sign_hs(R"({"alg":"HS512"})", payload, secret, "SHA512"), kNow).ok());
    // the MAC of one hash under the other alg's name
    EXPECT_EQ(reason_of(v, sign_hs(R"({"alg":"HS512"})", payload, secret, "SHA384")), Reason::BadSignature);
}

TEST(JwtVerify, PublicKeyAsHmacSecretIsAlgorithmConfusion)
{
    // The classic attack: sign HS256 with the RSA public key's PEM text as
    // the secret and hope the verifier feeds its RSA key to HMAC.
    const std::string pem = data_file("rfc7515-a2.pem");
    const std::string payload = R"({"iss":"joe","exp":)" + kFutureExp + "}";
    const std::string forged = sign_hs(R"({"alg":"HS256"})", payload, pem);
    const std::string forged_kid = sign_hs(R"({"alg":"HS256","kid":"rsa"})", payload, pem);

    // RS256 only: the token's alg is not accepted at all
    const Verifier rs_only = make(provider({"RS256"}, {pem_key("RS256", pem)}));
    EXPECT_EQ(reason_of(rs_only, forged), Reason::AlgNotAllowed);
    // both accepted, but the key with that kid is bound to RS256
    const Verifier both = make(provider({"RS256", "HS256"}, {pem_key("RS256", pem, "rsa"), pem_key("RS256", pem)}));
    EXPECT_EQ(reason_of(both, forged), Reason::AlgMismatch);
    EXPECT_EQ(reason_of(both, forged_kid), Reason::AlgMismatch);
    // and an HS256 key elsewhere in the provider is just a wrong key
    const Verifier mixed = make(provider({"RS256", "HS256"}, {pem_key("RS256", pem), hs_key(kSecret)}));
    EXPECT_EQ(reason_of(mixed, forged), Reason::BadSignature);
    // the same confusion with EC
    const std::string ec_pem = data_file("rfc7515-a3.pem");
    const Verifier ec = make(provider({"ES256", "HS256"}, {pem_key("ES256", ec_pem)}));
    EXPECT_EQ(reason_of(ec, sign_hs(R"({"alg":"HS256"})", payload, ec_pem)), Reason::AlgMismatch);
    // an ES256 token against an RS256 key, and the other way round
    EXPECT_EQ(reason_of(make(provider({"RS256", "ES256"}, {pem_key("RS256", pem)})), kA3Token, kBeforeA1Exp),
              Reason::AlgMismatch);
    EXPECT_EQ(reason_of(make(provider({"RS256", "ES256"}, {pem_key("ES256", ec_pem)})), kA2Token, kBeforeA1Exp),
              Reason::AlgMismatch);
}

TEST(JwtVerify, KeySelectionByKid)
{
    const std::string other(32, 'o');
    const std::string payload = R"({"exp":)" + kFutureExp + "}";
    const Verifier v = make(provider({"HS256", "RS256"}, {hs_key(kSecret, "a"), hs_key(other, "b"),
                                                          pem_key("RS256", public_pem(rsa_key()), "r")}));
    EXPECT_TRUE(v.verify(sign_hs(R"({"alg":"HS256","kid":"a"})", payload, kSecret), kNow).ok());
    EXPECT_TRUE(v.verify(sign_hs(R"({"alg":"HS256","kid":"b"})", payload, other), kNow).ok());
    EXPECT_EQ(reason_of(v, sign_hs(R"({"alg":"HS256","kid":"a"})", payload, other)), Reason::BadSignature);
    EXPECT_EQ(reason_of(v, sign_hs(R"({"alg":"HS256","kid":"nope"})", payload, kSecret)), Reason::UnknownKid);
    EXPECT_EQ(reason_of(v, sign_hs(R"({"alg":"HS256","kid":"A"})", payload, kSecret)), Reason::UnknownKid);
    // no kid in the token: only keys without a kid are candidates
    EXPECT_EQ(reason_of(v, sign_hs(R"({"alg":"HS256"})", payload, kSecret)), Reason::UnknownKid);
    EXPECT_TRUE(v.verify(sign_pkey(R"({"alg":"RS256","kid":"r"})", payload, rsa_key()), kNow).ok());
    // a kid in the token does not match a key without one
    const Verifier plain = hs_verifier();
    EXPECT_EQ(reason_of(plain, sign_hs(R"({"alg":"HS256","kid":"x"})", payload, kSecret)), Reason::UnknownKid);
    EXPECT_TRUE(plain.verify(sign_hs(R"({"alg":"HS256","kid":""})", payload, kSecret), kNow).ok());
}

TEST(JwtVerify, SeveralCandidateKeysAreTried)
{
    // secret rotation: two kid-less HS256 keys, a token of either verifies
    const std::string old_secret(32, 'O');
    const std::string payload = R"({"exp":)" + kFutureExp + "}";
    const Verifier v = make(provider({"HS256", "RS256"}, {hs_key(old_secret), pem_key("RS256", public_pem(rsa_key())),
                                                          hs_key(kSecret)}));
    EXPECT_TRUE(v.verify(sign_hs(R"({"alg":"HS256"})", payload, kSecret), kNow).ok());
    EXPECT_TRUE(v.verify(sign_hs(R"({"alg":"HS256"})", payload, old_secret), kNow).ok());
    EXPECT_TRUE(v.verify(sign_pkey(R"({"alg":"RS256"})", payload, rsa_key()), kNow).ok());
}

TEST(JwtVerify, GeneratedRsaAndEcTokens)
{
    const std::string payload = R"({"sub":"alice","exp":)" + kFutureExp + "}";
    const Verifier rs = make(provider({"RS256"}, {pem_key("RS256", public_pem(rsa_key()))}));
    const Verifier es = make(provider({"ES256"}, {pem_key("ES256", public_pem(ec_key()))}));
    for (int i = 0; i < 8; ++i) {  // ECDSA signatures differ each time; high-S ones included
        EXPECT_TRUE(es.verify(sign_pkey(R"({"alg":"ES256"})", payload, ec_key()), kNow).ok());
    }
    EXPECT_TRUE(rs.verify(sign_pkey(R"({"alg":"RS256"})", payload, rsa_key()), kNow).ok());
}

TEST(JwtVerify, EcdsaSignatureOfWrongShapeFails)
{
    const Verifier v = examples()[2].verifier();
    const std::string sig = b64d(part(kA3Token, 2));
    // r or s zero, or r||s replaced by the DER form
    std::string zero_r = sig;
    std::fill(zero_r.begin(), zero_r.begin() + 32, '\0');
    EXPECT_EQ(reason_of(v, with_part(kA3Token, 2, base64url_encode(zero_r)), kBeforeA1Exp), Reason::BadSignature);
    std::string zero_s = sig;
    std::fill(zero_s.begin() + 32, zero_s.end(), '\0');
    EXPECT_EQ(reason_of(v, with_part(kA3Token, 2, base64url_encode(zero_s)), kBeforeA1Exp), Reason::BadSignature);
    std::string all_ff(64, '\xff');  // r, s >= n
    EXPECT_EQ(reason_of(v, with_part(kA3Token, 2, base64url_encode(all_ff)), kBeforeA1Exp), Reason::BadSignature);
    std::string der = "\x30\x44\x02\x20" + sig.substr(0, 32) + "\x02\x20" + sig.substr(32);
    EXPECT_EQ(reason_of(v, with_part(kA3Token, 2, base64url_encode(der)), kBeforeA1Exp), Reason::BadSignature);
}

TEST(JwtVerify, NonCanonicalBase64UrlIsMalformed)
{
    const Verifier v = a1_verifier();
    const std::string t = kA1Token;
    // padding
    EXPECT_EQ(reason_of(v, with_part(t, 2, part(t, 2) + "="), kBeforeA1Exp), Reason::Malformed);
    EXPECT_EQ(reason_of(v, with_part(t, 0, part(t, 0) + "=="), kBeforeA1Exp), Reason::Malformed);
    // the standard alphabet for '-' and '_'
    std::string std_alphabet = part(t, 2);
    for (char& c : std_alphabet)
        c = c == '-' ? '+' : c == '_' ? '/' : c;
    ASSERT_NE(std_alphabet, part(t, 2));
    EXPECT_EQ(reason_of(v, with_part(t, 2, std_alphabet), kBeforeA1Exp), Reason::Malformed);
    std::string slash_payload = part(t, 1);
    slash_payload[3] = '/';
    EXPECT_EQ(reason_of(v, with_part(t, 1, slash_payload), kBeforeA1Exp), Reason::Malformed);
    // whitespace anywhere
    EXPECT_EQ(reason_of(v, t.substr(0, 10) + " " + t.substr(10), kBeforeA1Exp), Reason::Malformed);
    EXPECT_EQ(reason_of(v, t + "\n", kBeforeA1Exp), Reason::Malformed);
    // non-zero trailing bits: the A.1 signature's last character 'k' (..100100) carries
    // two unused bits; 'l' has them set
    std::string sig = part(t, 2);
    ASSERT_EQ(sig.back(), 'k');
    sig.back() = 'l';
    EXPECT_EQ(reason_of(v, with_part(t, 2, sig), kBeforeA1Exp), Reason::Malformed);
}

TEST(JwtVerify, StructureMustBeThreeParts)
{
    const Verifier v = a1_verifier();
    const std::string t = kA1Token;
    for (const std::string& bad : {std::string(), std::string("."), std::string(".."), std::string("..."),
                                   part(t, 0), part(t, 0) + "." + part(t, 1), t + ".", t + "." + part(t, 2),
                                   "." + part(t, 1) + "." + part(t, 2), t + ".x.y"})
        EXPECT_NE(reason_of(v, bad, kBeforeA1Exp), Reason::Ok) << bad;
    EXPECT_EQ(reason_of(v, part(t, 0) + "." + part(t, 1), kBeforeA1Exp), Reason::Malformed);
    EXPECT_EQ(reason_of(v, t + "." + part(t, 2), kBeforeA1Exp), Reason::Malformed);
}

TEST(JwtVerify, DuplicateMembersAreRejected)
{
    const Verifier v = hs_verifier();
    const std::string payload = R"({"sub":"alice","exp":)" + kFutureExp + "}";
    EXPECT_TRUE(v.verify(hs_token(payload, R"({"alg":"HS256"})"), kNow).ok());  // the control
    EXPECT_EQ(reason_of(v, hs_token(payload, R"({"alg":"HS256","alg":"HS256"})")), Reason::Malformed);
    EXPECT_EQ(reason_of(v, hs_token(payload, R"({"alg":"none","alg":"HS256"})")), Reason::Malformed);
    EXPECT_EQ(reason_of(v, hs_token(payload, R"({"alg":"HS256","\u0061lg":"HS256"})")), Reason::Malformed);
    // signed, but ambiguous: which "sub" is meant?
    EXPECT_EQ(reason_of(v, hs_token(R"({"sub":"alice","sub":"admin","exp":)" + kFutureExp + "}")), Reason::Malformed);
    EXPECT_EQ(reason_of(v, hs_token(R"({"exp":1,"exp":)" + kFutureExp + "}")), Reason::Malformed);
    EXPECT_EQ(reason_of(v, hs_token(R"({"o":{"a":1,"a":2},"exp":)" + kFutureExp + "}")), Reason::Malformed);
}

TEST(JwtVerify, HeaderRules)
{
    const Verifier v = hs_verifier();
    const std::string payload = R"({"exp":)" + kFutureExp + "}";
    for (const char* ok : {R"({"alg":"HS256","typ":"JWT"})", R"({"alg":"HS256","typ":"jwt"})",
                           R"({"alg":"HS256","typ":"application/jwt"})", R"({"alg":"HS256","typ":"at+jwt"})",
                           R"({"alg":"HS256","typ":"Application/AT+JWT"})", R"({"alg":"HS256","cty":"x","x5u":"y"})",
                           R"({"alg":"HS256","jwk":{"kty":"oct","k":"AAAA"}})", " {\"alg\" : \"HS256\"} "})
        EXPECT_EQ(reason_of(v, hs_token(payload, ok)), Reason::Ok) << ok;
    for (const char* bad : {R"({"typ":"JWT"})", R"({"alg":256})", R"({"alg":null})", R"({"alg":["HS256"]})",
                            R"({"alg":"HS256","kid":1})", R"({"alg":"HS256","kid":null})",
                            R"({"alg":"HS256","typ":"JOSE"})", R"({"alg":"HS256","typ":"dpop+jwt"})",
                            R"({"alg":"HS256","typ":"application/"})", R"({"alg":"HS256","typ":1})",
                            R"({"alg":"HS256","crit":["exp"],"exp":1})", R"({"alg":"HS256","crit":[]})",
                            R"(["HS256"])", R"("HS256")", "", "{", R"({"alg":"HS256"} {})",
                            "{\"alg\":\"HS256\xff\"}"})
        EXPECT_EQ(reason_of(v, hs_token(payload, bad)), Reason::Malformed) << bad;
}

TEST(JwtVerify, PayloadMustBeAJsonObject)
{
    const Verifier v = hs_verifier([](policy::JwtProvider& p) { p.require_exp = false; });
    EXPECT_TRUE(v.verify(hs_token("{}"), kNow).ok());
    for (const char* bad : {"", "[]", "\"x\"", "1", "null", "{", "{\"a\":1}x", "{\"a\":\"\\ud800\"}"})
        EXPECT_EQ(reason_of(v, hs_token(bad)), Reason::Malformed) << bad;
    std::string deep = "{\"a\":";
    for (int i = 0; i < 20; ++i)
        deep += "[";
    deep += std::string(20, ']') + "}";
    EXPECT_EQ(reason_of(v, hs_token(deep)), Reason::Malformed);
}

// ---- claims ----------------------------------------------------------------------

TEST(JwtClaims, ExpAndNbfWithSkew)
{
    const int64_t now = 1'700'000'000;
    const auto at = [](int64_t s) { return Clock::time_point{seconds{s}}; };
    const Verifier v = hs_verifier();  // clock_skew 60
    const std::string exp_now = hs_token(R"({"exp":)" + std::to_string(now) + "}");
    EXPECT_TRUE(v.verify(exp_now, at(now)).ok());               // within the skew
    EXPECT_TRUE(v.verify(exp_now, at(now + 59)).ok());
    EXPECT_EQ(reason_of(v, exp_now, at(now + 60)), Reason::Expired);
    EXPECT_EQ(reason_of(v, exp_now, at(now + 100000)), Reason::Expired);

    const Verifier strict = hs_verifier([](policy::JwtProvider& p) { p.clock_skew = seconds{0}; });
    EXPECT_TRUE(strict.verify(exp_now, at(now - 1)).ok());
    EXPECT_EQ(reason_of(strict, exp_now, at(now)), Reason::Expired);  // "before exp", RFC 7519 §4.1.4

    const std::string nbf = hs_token(R"({"nbf":)" + std::to_string(now) + R"(,"exp":)" + std::to_string(now + 3600) + "}");
    EXPECT_TRUE(v.verify(nbf, at(now)).ok());
    EXPECT_TRUE(v.verify(nbf, at(now - 60)).ok());
    EXPECT_EQ(reason_of(v, nbf, at(now - 61)), Reason::NotYetValid);
    EXPECT_TRUE(strict.verify(nbf, at(now)).ok());
    EXPECT_EQ(reason_of(strict, nbf, at(now - 1)), Reason::NotYetValid);
}

TEST(JwtClaims, NumericDateForms)
{
    const int64_t now = 1'700'000'000;
    const auto at = [](int64_t s) { return Clock::time_point{seconds{s}}; };
    const Verifier v = hs_verifier([](policy::JwtProvider& p) { p.clock_skew = seconds{0}; });
    const auto exp_token = [](std::string_view exp) { return hs_token(std::string(R"({"exp":)") + std::string(exp) + "}"); };
    const Result frac = v.verify(exp_token("1700000000.5"), at(now));
    ASSERT_TRUE(frac.ok());
    EXPECT_EQ(frac.expires, Clock::time_point{std::chrono::milliseconds{1'700'000'000'500}});
    EXPECT_EQ(frac.claims.members.at("exp"), std::vector<std::string>{"1700000000.5"});  // as written
    EXPECT_TRUE(v.verify(exp_token("1.7000001e9"), at(now)).ok());
    EXPECT_EQ(reason_of(v, exp_token("1.7e9"), at(now)), Reason::Expired);
    EXPECT_EQ(reason_of(v, exp_token("-1"), at(now)), Reason::Expired);
    EXPECT_EQ(reason_of(v, exp_token("0"), at(now)), Reason::Expired);
    EXPECT_EQ(reason_of(v, exp_token("1e-400"), at(now)), Reason::Expired);
    // far future: clamped, still valid, no overflow
    for (const char* big : {"1e300", "1e400", "99999999999999999999999", "9223372036854775807"}) {
        const Result r = v.verify(exp_token(big), at(now));
        EXPECT_TRUE(r.ok()) << big;
        EXPECT_EQ(r.expires, Clock::time_point{seconds{int64_t{1} << 33}}) << big;
    }
    EXPECT_EQ(reason_of(v, exp_token("\"1800000000\""), at(now)), Reason::BadClaim);
    EXPECT_EQ(reason_of(v, exp_token("null"), at(now)), Reason::BadClaim);
    EXPECT_EQ(reason_of(v, exp_token("true"), at(now)), Reason::BadClaim);
    EXPECT_EQ(reason_of(v, hs_token(R"({"exp":1800000000,"nbf":"0"})"), at(now)), Reason::BadClaim);
    EXPECT_TRUE(v.verify(hs_token(R"({"exp":1800000000,"nbf":-5})"), at(now)).ok());
    EXPECT_EQ(reason_of(v, hs_token(R"({"exp":1800000000,"nbf":1e300})"), at(now)), Reason::NotYetValid);
}

TEST(JwtClaims, RequireExp)
{
    const Verifier required = hs_verifier();
    EXPECT_EQ(reason_of(required, hs_token(R"({"sub":"a"})")), Reason::MissingExp);
    const Verifier optional = hs_verifier([](policy::JwtProvider& p) { p.require_exp = false; });
    const Result r = optional.verify(hs_token(R"({"sub":"a"})"), kNow);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r.expires, Clock::time_point::max());
    EXPECT_EQ(r.valid_until, Clock::time_point::max());
}

TEST(JwtClaims, Issuer)
{
    const Verifier v = hs_verifier([](policy::JwtProvider& p) { p.issuer = "https://idp.example"; });
    const auto tok = [](std::string_view iss) {
        return hs_token(std::string(R"({"exp":)") + kFutureExp + (iss.empty() ? "" : ",\"iss\":") + std::string(iss) + "}");
    };
    EXPECT_TRUE(v.verify(tok(R"("https://idp.example")"), kNow).ok());
    EXPECT_EQ(reason_of(v, tok(R"("https://idp.example/")")), Reason::BadIssuer);
    EXPECT_EQ(reason_of(v, tok(R"("HTTPS://IDP.EXAMPLE")")), Reason::BadIssuer);
    EXPECT_EQ(reason_of(v, tok("")), Reason::BadIssuer);
    EXPECT_EQ(reason_of(v, tok(R"(["https://idp.example"])")), Reason::BadIssuer);
    EXPECT_EQ(reason_of(v, tok("null")), Reason::BadIssuer);
    // escapes are decoded before comparing
    EXPECT_TRUE(v.verify(tok(R"("https:\/\/idp.example")"), kNow).ok());
    // no issuer configured: anything goes
    EXPECT_TRUE(hs_verifier().verify(tok("42"), kNow).ok());
}

TEST(JwtClaims, Audience)
{
    const Verifier v = hs_verifier([](policy::JwtProvider& p) { p.audiences = {"api", "admin"}; });
    const auto tok = [](std::string_view aud) {
        return hs_token(std::string(R"({"exp":)") + kFutureExp + (aud.empty() ? "" : ",\"aud\":") + std::string(aud) + "}");
    };
    EXPECT_TRUE(v.verify(tok(R"("api")"), kNow).ok());
    EXPECT_TRUE(v.verify(tok(R"("admin")"), kNow).ok());
    EXPECT_TRUE(v.verify(tok(R"(["other","admin"])"), kNow).ok());
    EXPECT_EQ(reason_of(v, tok(R"("API")")), Reason::BadAudience);
    EXPECT_EQ(reason_of(v, tok(R"(["other"])")), Reason::BadAudience);
    EXPECT_EQ(reason_of(v, tok("[]")), Reason::BadAudience);
    EXPECT_EQ(reason_of(v, tok("")), Reason::BadAudience);
    EXPECT_EQ(reason_of(v, tok(R"(["api",1])")), Reason::BadAudience);
    EXPECT_EQ(reason_of(v, tok(R"({"api":true})")), Reason::BadAudience);
    EXPECT_EQ(reason_of(v, tok("null")), Reason::BadAudience);
    EXPECT_TRUE(hs_verifier().verify(tok(R"("anything")"), kNow).ok());
}

TEST(JwtClaims, TextFormOfEveryMember)
{
    const Verifier v = hs_verifier();
    const Result r = v.verify(hs_token(R"({"exp":)" + kFutureExp + R"(,"s":"t\u00e9xt","n":1.50,"i":-7,"t":true,"f":false,)"
                                       R"("roles":["a","b"],"empty":[],"mixed":["a",1],"nums":[1,2],"o":{"x":1},"z":null})"),
                              kNow);
    ASSERT_TRUE(r.ok());
    const auto& m = r.claims.members;
    using V = std::vector<std::string>;
    EXPECT_EQ(m.at("s"), V{"t\xc3\xa9xt"});
    EXPECT_EQ(m.at("n"), V{"1.50"});
    EXPECT_EQ(m.at("i"), V{"-7"});
    EXPECT_EQ(m.at("t"), V{"true"});
    EXPECT_EQ(m.at("f"), V{"false"});
    EXPECT_EQ(m.at("roles"), (V{"a", "b"}));
    EXPECT_EQ(m.at("empty"), V{});
    EXPECT_EQ(m.at("mixed"), V{});
    EXPECT_EQ(m.at("nums"), V{});
    EXPECT_EQ(m.at("o"), V{});
    EXPECT_EQ(m.at("z"), V{});
    EXPECT_FALSE(r.claims.has("x"));  // nested members are not claims
    EXPECT_EQ(m.size(), 12u);
}

TEST(JwtVerify, OversizedTokenIsTooLarge)
{
    const Verifier v = hs_verifier([](policy::JwtProvider& p) { p.max_token_bytes = 200; });
    const std::string small = hs_token(R"({"exp":)" + kFutureExp + "}");
    ASSERT_LE(small.size(), 200u);
    EXPECT_TRUE(v.verify(small, kNow).ok());
    const std::string big = hs_token(R"({"exp":)" + kFutureExp + R"(,"pad":")" + std::string(200, 'x') + "\"}");
    EXPECT_EQ(reason_of(v, big), Reason::TooLarge);
    EXPECT_EQ(reason_of(v, std::string(1 << 20, 'a')), Reason::TooLarge);
}

TEST(JwtVerify, ResultsDoNotLeakBetweenCalls)
{
    // per-thread buffers are reused: a failure after a success and the other
    // way round see only their own token
    const Verifier v = hs_verifier();
    const Result a = v.verify(hs_token(R"({"sub":"first","exp":)" + kFutureExp + "}"), kNow);
    const Result bad = v.verify("x.y.z", kNow);
    const Result b = v.verify(hs_token(R"({"sub":"second","exp":)" + kFutureExp + "}"), kNow);
    EXPECT_EQ(a.claims.members.at("sub"), std::vector<std::string>{"first"});
    EXPECT_EQ(bad.reason, Reason::Malformed);
    EXPECT_TRUE(bad.claims.members.empty());
    EXPECT_TRUE(bad.token.empty());
    EXPECT_EQ(b.claims.members.at("sub"), std::vector<std::string>{"second"});
}

// ---- provider set-up errors --------------------------------------------------------

TEST(JwtVerifier, CreateRefusesUnworkableProviders)
{
    EXPECT_NE(create_error(provider({}, {hs_key(kSecret)})).find("algorithms"), std::string::npos);
    EXPECT_NE(create_error(provider({"PS256"}, {hs_key(kSecret)})).find("PS256"), std::string::npos);
    EXPECT_NE(create_error(provider({"HS256"}, {})).find("no keys"), std::string::npos);
    EXPECT_NE(create_error(provider({"HS256"}, {hs_key(std::string(31, 'k'))})).find("at least 32"), std::string::npos);
    EXPECT_NE(create_error(provider({"HS512"}, {hs_key(std::string(63, 'k'), "", "HS512")})).find("at least 64"),
              std::string::npos);
    EXPECT_NE(create_error(provider({"HS256"}, {hs_key(kSecret, "k", "XS256")})).find("XS256"), std::string::npos);
    policy::JwtKey both = hs_key(kSecret);
    both.pem = data_file("rfc7515-a2.pem");
    EXPECT_NE(create_error(provider({"HS256"}, {both})), "");
    policy::JwtKey rs_secret = pem_key("RS256", data_file("rfc7515-a2.pem"));
    rs_secret.secret = kSecret;
    EXPECT_NE(create_error(provider({"RS256"}, {rs_secret})), "");
    // a PEM of the wrong type or kind
    EXPECT_NE(create_error(provider({"RS256"}, {pem_key("RS256", data_file("rfc7515-a3.pem"))})).find("RSA"),
              std::string::npos);
    EXPECT_NE(create_error(provider({"ES256"}, {pem_key("ES256", data_file("rfc7515-a2.pem"))})).find("EC"),
              std::string::npos);
    EXPECT_NE(create_error(provider({"RS256"}, {pem_key("RS256", private_pem(rsa_key()))})), "");
    EXPECT_NE(create_error(provider({"RS256"}, {pem_key("RS256", "not a pem")})), "");
    EXPECT_NE(create_error(provider({"RS256"}, {pem_key("RS256", data_file("rfc7515-a2.pem") +
                                                                       data_file("rfc7515-a2.pem"))})),
              "");
    Pkey small(EVP_PKEY_Q_keygen(nullptr, nullptr, "RSA", size_t{1024}));
    EXPECT_NE(create_error(provider({"RS256"}, {pem_key("RS256", public_pem(small.get()))})).find("1024"),
              std::string::npos);
    Pkey p384(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-384"));
    EXPECT_NE(create_error(provider({"ES256"}, {pem_key("ES256", public_pem(p384.get()))})).find("P-256"),
              std::string::npos);
    // where the token is
    auto cookie_with_prefix = provider({"HS256"}, {hs_key(kSecret)});
    cookie_with_prefix.from = {policy::RequestKey::Kind::Cookie, "session"};
    EXPECT_NE(create_error(cookie_with_prefix).find("prefix"), std::string::npos);
    auto source = provider({"HS256"}, {hs_key(kSecret)});
    source.from = {policy::RequestKey::Kind::SourceIp, ""};
    EXPECT_NE(create_error(source), "");
    auto zero = provider({"HS256"}, {hs_key(kSecret)});
    zero.max_token_bytes = 0;
    EXPECT_NE(create_error(zero), "");
    auto huge = provider({"HS256"}, {hs_key(kSecret)});
    huge.max_token_bytes = 1 << 20;
    EXPECT_NE(create_error(huge), "");
    auto skew = provider({"HS256"}, {hs_key(kSecret)});
    skew.clock_skew = seconds{-1};
    EXPECT_NE(create_error(skew), "");
    auto jwks = provider({"HS256"}, {});
    jwks.jwks_file = "/nonexistent/l7fast.jwks";
    EXPECT_NE(create_error(jwks).find("/nonexistent/l7fast.jwks"), std::string::npos);
}

TEST(JwtVerifier, KeyErrorsNameTheKey)
{
    const std::string why = create_error(provider({"HS256"}, {hs_key(kSecret, "good"), hs_key("short", "bad-one")}));
    EXPECT_NE(why.find("bad-one"), std::string::npos) << why;
    EXPECT_NE(why.find("HS256"), std::string::npos) << why;
}

TEST(JwtVerifier, ProviderCopyDropsInlineSecrets)
{
    const Verifier v = hs_verifier();
    EXPECT_TRUE(v.provider().keys.empty());
    EXPECT_EQ(v.provider().name, "test");
}

// ---- RFC 6750 ----------------------------------------------------------------------

TEST(JwtRfc6750, ErrorsAndChallenge)
{
    EXPECT_EQ(rfc6750_error(Reason::Missing), "");
    EXPECT_EQ(rfc6750_error(Reason::BadScheme), "");
    EXPECT_EQ(rfc6750_error(Reason::Expired), "invalid_token");
    EXPECT_EQ(rfc6750_error(Reason::TooLarge), "invalid_token");
    EXPECT_EQ(www_authenticate("api", Reason::Missing), "Bearer realm=\"api\"");
    EXPECT_EQ(www_authenticate("api", Reason::Expired),
              "Bearer realm=\"api\", error=\"invalid_token\", error_description=\"The access token expired\"");
    EXPECT_EQ(www_authenticate("a\"b\\c\r\n", Reason::Missing), "Bearer realm=\"a\\\"b\\\\c??\"");
    EXPECT_EQ(www_authenticate("caf\xc3\xa9", Reason::Missing), "Bearer realm=\"caf??\"");
    // every reason has a name and a description that fits in a quoted-string
    for (int i = 0; i <= static_cast<int>(Reason::BadAudience); ++i) {
        const auto reason = static_cast<Reason>(i);
        EXPECT_NE(reason_name(reason), "unknown");
        for (char c : rfc6750_description(reason))
            EXPECT_TRUE(c >= 0x20 && c < 0x7f && c != '"' && c != '\\') << reason_name(reason);
        EXPECT_EQ(rfc6750_error(reason).empty(), rfc6750_description(reason).empty());
    }
}
