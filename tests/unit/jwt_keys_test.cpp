// JWT keys: JWKS parsing (RFC 7517/7518), usable and skipped entries, bad
// entries, and the JWKS file holder's refresh.
#include <gtest/gtest.h>

#include <openssl/evp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <unistd.h>

#include "auth/Base64Url.hpp"
#include "auth/Jwt.hpp"
#include "auth/JwtKeys.hpp"

using namespace l7fast;
using namespace l7fast::auth;
using Clock = std::chrono::system_clock;
namespace fs = std::filesystem;

namespace {

// RFC 7515 A.1-A.3 key material
constexpr const char* kOctK = "AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow";
constexpr const char* kRsaN =
    "ofgWCuLjybRlzo0tZWJjNiuSfb4p4fAkd_wWJcyQoTbji9k0l8W26mPddxHmfHQp-Vaw-4qPCJrcS2mJPMEzP1Pt0Bm4d4QlL-yRT-"
    "SFd2lZS-pCgNMsD1W_YpRPEwOWvG6b32690r2jZ47soMZo9wGzjb_7OMg0LOL-bSf63kpaSHSXndS5z5rexMdbBYUsLA9e-"
    "KXBdQOS-UTo7WTBEMa2R2CapHg665xsmtdVMTBQY4uDZlxvb3qCo5ZwKh9kG4LT6_I5IhlJH7aGhyxXFvUK-DWNmoudF8NAco9_"
    "h9iaGNj8q2ethFkMLs91kzk2PAcDTW9gb54h4FRWyuXpoQ";
constexpr const char* kEcX = "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU";
constexpr const char* kEcY = "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0";
constexpr const char* kPayload =
    ".eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ";
const std::string kA2Token =
    std::string("eyJhbGciOiJSUzI1NiJ9") + kPayload +
    ".cC4hiUPoj9Eetdgtv3hF80EGrhuB__dzERat0XF9g2VtQgr9PJbu3XOiZj5RZmh7AAuHIm4Bh-0Qc_lF5YKt_O8W2Fp5jujGbds9uJ"
    "dbF9CUAr7t1dnZcAcQjbKBYNX4BAynRFdiuB--f_nZLgrnbyTyWzO75vRK5h6xBArLIARNPvkSjtQBMHlb1L07Qe7K0GarZRmB_"
    "eSN9383LcOLn6_dO--xi12jzDwusC-eOkHWEsqtFZESc6BfI7noOPqvhJ1phCnvWh6IeYI2w9QOYEUipUTI8np6LbgGY9Fs98rq"
    "Vt5AXLIhWkWywlVmtVrBp0igcN_IoypGlUPQGe77Rw";
const std::string kA3Token = std::string("eyJhbGciOiJFUzI1NiJ9") + kPayload +
                             ".DtEhU3ljbEg8L38VWAfUAqOyKAM6-Xx-F4GawxaepmXFCgfTjDxw5djxLa8ISlSApmWQxfKTUJqPP3-Kg6NU1Q";
const Clock::time_point kNow{std::chrono::seconds{1300819380 - 10}};

std::string jwks(const std::string& entries) { return R"({"keys":[)" + entries + "]}"; }

std::string oct(const std::string& kid, const std::string& secret, const std::string& alg = "HS256")
{
    return R"({"kty":"oct","kid":")" + kid + R"(","alg":")" + alg + R"(","k":")" + base64url_encode(secret) + "\"}";
}

const std::string kRsaEntry = std::string(R"({"kty":"RSA","n":")") + kRsaN + R"(","e":"AQAB"})";
const std::string kEcEntry = std::string(R"({"kty":"EC","crv":"P-256","x":")") + kEcX + R"(","y":")" + kEcY + "\"}";

std::string parse_error(const std::string& text)
{
    std::string why;
    const auto set = parse_jwks(text, &why);
    EXPECT_FALSE(set) << text;
    return why;
}

// An HS256 token with a kid, signed with `secret`.
std::string hs_token(const std::string& kid, const std::string& secret)
{
    const std::string input = base64url_encode(R"({"alg":"HS256","kid":")" + kid + "\"}") + "." +
                              base64url_encode(R"({"sub":"s","exp":1300819380})");
    unsigned char mac[EVP_MAX_MD_SIZE];
    size_t len = 0;
    EXPECT_TRUE(EVP_Q_mac(nullptr, "HMAC", nullptr, "SHA256", nullptr, secret.data(), secret.size(),
                          reinterpret_cast<const unsigned char*>(input.data()), input.size(), mac, sizeof mac, &len));
    return input + "." + base64url_encode(std::string(reinterpret_cast<char*>(mac), len));
}

class TempDir {
public:
    TempDir()
    {
        char tmpl[] = "/tmp/l7fast-jwks-XXXXXX";
        EXPECT_TRUE(::mkdtemp(tmpl));
        path_ = tmpl;
    }
    ~TempDir() { fs::remove_all(path_); }
    std::string file(const std::string& name) const { return path_ + "/" + name; }

    // Replaces `name` atomically, as an operator's deployment would.
    void replace(const std::string& name, const std::string& text) const
    {
        const std::string tmp = file(name + ".tmp");
        {
            std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
            out << text;
        }
        fs::rename(tmp, file(name));
    }
    void overwrite(const std::string& name, const std::string& text) const
    {
        std::ofstream out(file(name), std::ios::binary | std::ios::trunc);
        out << text;
    }

private:
    std::string path_;
};

policy::JwtProvider jwks_provider(const std::string& path)
{
    policy::JwtProvider p;
    p.name = "jwks";
    p.algorithms = {"HS256", "RS256", "ES256"};
    p.jwks_file = path;
    return p;
}

}  // namespace

TEST(JwtJwks, RfcKeysOfEveryType)
{
    std::string why;
    const auto set = parse_jwks(jwks(oct("hs", "0123456789abcdef0123456789abcdef") + "," + kRsaEntry + "," + kEcEntry), &why);
    ASSERT_TRUE(set) << why;
    ASSERT_EQ(set->keys.size(), 3u);
    EXPECT_EQ(set->keys[0].alg(), Alg::HS256);
    EXPECT_EQ(set->keys[0].kid(), "hs");
    EXPECT_EQ(set->keys[1].alg(), Alg::RS256);  // no "alg": RS256 is the only RSA one
    EXPECT_EQ(set->keys[1].kid(), "");
    EXPECT_EQ(set->keys[1].signature_size(), 256u);
    EXPECT_EQ(set->keys[2].alg(), Alg::ES256);
    EXPECT_EQ(set->keys[2].signature_size(), 64u);
    EXPECT_TRUE(set->skipped.empty());
}

TEST(JwtJwks, FixtureFileVerifiesTheRfcTokens)
{
    std::string why;
    auto file = Jwks::load(std::string(L7FAST_TEST_DATA) + "/jwt/rfc7515.jwks", &why);
    ASSERT_TRUE(file) << why;
    EXPECT_EQ(file->keys()->keys.size(), 3u);
    EXPECT_EQ(file->keys()->skipped.size(), 2u);  // an encryption key, an Ed25519 key

    // The RFC tokens carry no kid; a JWKS without kids verifies them.
    TempDir dir;
    dir.replace("plain.jwks", jwks(kRsaEntry + "," + kEcEntry));
    const auto v = Verifier::create(jwks_provider(dir.file("plain.jwks")), &why);
    ASSERT_TRUE(v) << why;
    EXPECT_TRUE(v->verify(kA2Token, kNow).ok());
    EXPECT_TRUE(v->verify(kA3Token, kNow).ok());

    // ... and the fixture's kid'd keys do not match kid-less tokens
    const auto fixture = Verifier::create(jwks_provider(std::string(L7FAST_TEST_DATA) + "/jwt/rfc7515.jwks"), &why);
    ASSERT_TRUE(fixture) << why;
    EXPECT_EQ(fixture->verify(kA2Token, kNow).reason, Reason::UnknownKid);
    std::string secret;
    ASSERT_TRUE(base64url_decode(kOctK, &secret));
    EXPECT_TRUE(fixture->verify(hs_token("hs", secret), kNow).ok());
    EXPECT_EQ(fixture->verify(hs_token("rs", secret), kNow).reason, Reason::AlgMismatch);
}

TEST(JwtJwks, SkipsWhatIsNotForVerifying)
{
    std::string why;
    const std::string good = oct("good", std::string(32, 'g'));
    const auto set = parse_jwks(
        jwks(good + "," + R"({"kty":"RSA","kid":"enc","use":"enc","n":")" + kRsaN + R"(","e":"AQAB"})" + "," +
             R"({"kty":"EC","kid":"p384","crv":"P-384","x":"AA","y":"AA"})" + "," +
             R"({"kty":"OKP","kid":"ed","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"})" + "," +
             R"({"kty":"RSA","kid":"ps","alg":"PS256","n":")" + kRsaN + R"(","e":"AQAB"})" + "," +
             R"({"kty":"oct","kid":"wrap","key_ops":["wrapKey"],"alg":"HS256","k":"AAAA"})" + "," +
             R"({"kty":"oct","kid":"ok-ops","key_ops":["sign","verify"],"alg":"HS384","k":")" +
             base64url_encode(std::string(48, 'o')) + R"("})"),
        &why);
    ASSERT_TRUE(set) << why;
    ASSERT_EQ(set->keys.size(), 2u);
    EXPECT_EQ(set->keys[1].kid(), "ok-ops");
    EXPECT_EQ(set->keys[1].alg(), Alg::HS384);
    ASSERT_EQ(set->skipped.size(), 5u);
    EXPECT_NE(set->skipped[0].find("enc"), std::string::npos) << set->skipped[0];
    EXPECT_NE(set->skipped[1].find("P-384"), std::string::npos) << set->skipped[1];
    EXPECT_NE(set->skipped[2].find("OKP"), std::string::npos) << set->skipped[2];
    EXPECT_NE(set->skipped[3].find("PS256"), std::string::npos) << set->skipped[3];
    EXPECT_NE(set->skipped[4].find("verify"), std::string::npos) << set->skipped[4];
}

TEST(JwtJwks, BadEntriesFailTheSet)
{
    const std::string rsa_prefix = std::string(R"({"kty":"RSA","n":")") + kRsaN;
    struct Case {
        std::string text;
        std::string says;
    };
    const std::vector<Case> cases = {
        {"", "JSON"},
        {"[]", "object"},
        {"{}", "keys"},
        {R"({"keys":{}})", "keys"},
        {R"({"keys":[]})", "no usable"},
        {R"({"keys":[],"keys":[]})", "duplicate"},
        {jwks("1"), "not an object"},
        {jwks(R"({"kid":"x","k":"AAAA"})"), "kty"},
        {jwks(R"({"kty":1})"), "kty"},
        {jwks(R"({"kty":"oct","kid":"x","k":")" + base64url_encode(std::string(32, 'k')) + "\"}"), "needs alg"},
        {jwks(oct("short", std::string(31, 'k'))), "at least 32"},
        {jwks(oct("hs512", std::string(32, 'k'), "HS512")), "at least 64"},
        {jwks(R"({"kty":"oct","alg":"HS256","kid":"x","k":"AAAA="})"), "base64url"},
        {jwks(R"({"kty":"oct","alg":"HS256","kid":"x"})"), "k is missing"},
        {jwks(R"({"kty":"oct","alg":"RS256","kid":"x","k":"AAAA"})"), "does not fit"},
        {jwks(rsa_prefix + R"(","e":"AQAB","alg":"ES256"})"), "does not fit"},
        {jwks(rsa_prefix + "\"}"), "e is missing"},
        {jwks(rsa_prefix + R"(=","e":"AQAB"})"), "base64url"},
        {jwks(rsa_prefix + R"(","e":"AQ+B"})"), "base64url"},
        {jwks(rsa_prefix + R"(","e":"AQAA"})"), "exponent"},  // even
        {jwks(rsa_prefix + R"(","e":"AQAB","d":"AAAA"})"), "private"},
        {jwks(R"({"kty":"RSA","n":")" + base64url_encode(std::string(128, '\xc1')) + R"(","e":"AQAB"})"), "1024"},
        {jwks(R"({"kty":"EC","crv":"P-256","x":")" + base64url_encode(std::string(31, '\x01')) + R"(","y":")" + kEcY +
              "\"}"),
         "32 bytes"},
        {jwks(R"({"kty":"EC","crv":"P-256","x":")" + std::string(kEcX) + R"(","y":")" + kEcX + "\"}"), "P-256"},
        {jwks(R"({"kty":"EC","x":"AA","y":"AA"})"), "crv"},
        {jwks(R"({"kty":"EC","crv":"P-256","alg":"RS256","x":")" + std::string(kEcX) + R"(","y":")" + kEcY + "\"}"),
         "does not fit"},
        {jwks(R"({"kty":"RSA","kid":7,"n":")" + std::string(kRsaN) + R"(","e":"AQAB"})"), "kid"},
        {jwks(R"({"kty":"oct","use":1})"), "use"},
        {jwks(R"({"kty":"oct","key_ops":"verify"})"), "key_ops"},
        {jwks(R"({"kty":"RSA","kty":"RSA"})"), "duplicate"},
        {jwks(R"({"kty":"OKP"})"), "no usable"},  // only skipped entries
    };
    for (const Case& c : cases) {
        const std::string why = parse_error(c.text);
        EXPECT_NE(why.find(c.says), std::string::npos) << c.text << "\n  -> " << why;
    }
    // the failing entry is named
    const std::string why = parse_error(jwks(oct("fine", std::string(32, 'f')) + "," + oct("bad", "x")));
    EXPECT_NE(why.find("key 1 (kid \"bad\")"), std::string::npos) << why;
}

TEST(JwtJwks, Limits)
{
    std::string many;
    for (size_t i = 0; i <= kMaxJwksKeys; ++i)
        many += (i ? "," : "") + oct("k" + std::to_string(i), std::string(32, 'k'));
    EXPECT_NE(parse_error(jwks(many)).find("more than"), std::string::npos);
    EXPECT_NE(parse_error(jwks(oct("big", std::string(32, 'k'))) + std::string(kMaxJwksBytes, ' ')).find("too large"),
              std::string::npos);
}

TEST(JwtJwks, LoadErrorsNameTheFile)
{
    TempDir dir;
    std::string why;
    EXPECT_FALSE(Jwks::load(dir.file("absent.jwks"), &why));
    EXPECT_NE(why.find(dir.file("absent.jwks")), std::string::npos) << why;
    dir.replace("bad.jwks", "{");
    EXPECT_FALSE(Jwks::load(dir.file("bad.jwks"), &why));
    EXPECT_NE(why.find("not valid JSON"), std::string::npos) << why;
    EXPECT_FALSE(Jwks::load(dir.file(""), &why));  // a directory
    EXPECT_NE(why.find("regular file"), std::string::npos) << why;
}

TEST(JwtJwks, RefreshReplacesKeysAndKeepsThemOnABadFile)
{
    TempDir dir;
    const std::string path = dir.file("keys.jwks");
    const std::string one(32, '1'), two(32, '2'), three(40, '3');
    dir.replace("keys.jwks", jwks(oct("k1", one)));
    std::string why;
    auto v = Verifier::create(jwks_provider(path), &why);
    ASSERT_TRUE(v) << why;
    EXPECT_TRUE(v->verify(hs_token("k1", one), kNow).ok());
    EXPECT_EQ(v->refresh_if_changed(), Jwks::Refresh::Unchanged);

    // rotated: the new key verifies, the old one is gone
    dir.replace("keys.jwks", jwks(oct("k2", two)));
    EXPECT_EQ(v->refresh_if_changed(), Jwks::Refresh::Reloaded);
    EXPECT_EQ(v->refresh_if_changed(), Jwks::Refresh::Unchanged);
    EXPECT_TRUE(v->verify(hs_token("k2", two), kNow).ok());
    EXPECT_EQ(v->verify(hs_token("k1", one), kNow).reason, Reason::UnknownKid);

    // a bad file: reported once, the previous keys stay in use
    dir.replace("keys.jwks", R"({"keys":[{"kty":"oct"}]})");
    EXPECT_EQ(v->refresh_if_changed(), Jwks::Refresh::Failed);
    EXPECT_EQ(v->refresh_if_changed(), Jwks::Refresh::Unchanged);
    EXPECT_TRUE(v->verify(hs_token("k2", two), kNow).ok());

    // gone: the same
    fs::remove(path);
    EXPECT_EQ(v->refresh_if_changed(), Jwks::Refresh::Failed);
    EXPECT_EQ(v->refresh_if_changed(), Jwks::Refresh::Unchanged);
    EXPECT_TRUE(v->verify(hs_token("k2", two), kNow).ok());

    // back, and edited in place (a different size)
    dir.overwrite("keys.jwks", jwks(oct("k1", one)));
    EXPECT_EQ(v->refresh_if_changed(), Jwks::Refresh::Reloaded);
    EXPECT_TRUE(v->verify(hs_token("k1", one), kNow).ok());
    dir.overwrite("keys.jwks", jwks(oct("k1", one) + "," + oct("k3", three)));
    EXPECT_EQ(v->refresh_if_changed(), Jwks::Refresh::Reloaded);
    EXPECT_TRUE(v->verify(hs_token("k3", three), kNow).ok());
    EXPECT_TRUE(v->verify(hs_token("k1", one), kNow).ok());
}

TEST(JwtJwks, KeysInUseSurviveARefresh)
{
    TempDir dir;
    const std::string path = dir.file("keys.jwks");
    dir.replace("keys.jwks", jwks(oct("k1", std::string(32, '1'))));
    std::string why;
    auto file = Jwks::load(path, &why);
    ASSERT_TRUE(file) << why;
    const std::shared_ptr<const KeySet> held = file->keys();
    dir.replace("keys.jwks", jwks(oct("k2", std::string(32, '2'))));
    EXPECT_EQ(file->refresh_if_changed(), Jwks::Refresh::Reloaded);
    EXPECT_EQ(held->keys.at(0).kid(), "k1");
    EXPECT_EQ(file->keys()->keys.at(0).kid(), "k2");
}

static policy::JwtKey inline_hs256(const std::string& kid, const std::string& secret)
{
    policy::JwtKey k;
    k.kid = kid;
    k.alg = "HS256";
    k.secret = secret;
    return k;
}

TEST(JwtJwks, InlineKeysAndJwksTogether)
{
    TempDir dir;
    dir.replace("keys.jwks", jwks(oct("file", std::string(32, 'f'))));
    auto p = jwks_provider(dir.file("keys.jwks"));
    p.keys = {inline_hs256("inline", std::string(32, 'i'))};
    std::string why;
    const auto v = Verifier::create(p, &why);
    ASSERT_TRUE(v) << why;
    EXPECT_TRUE(v->verify(hs_token("file", std::string(32, 'f')), kNow).ok());
    EXPECT_TRUE(v->verify(hs_token("inline", std::string(32, 'i')), kNow).ok());
    EXPECT_EQ(v->verify(hs_token("inline", std::string(32, 'f')), kNow).reason, Reason::BadSignature);
}

// What l7fast.ko's key table is given (proxy::ProxyServer::sync_module_keys):
// every key in use, inline ones first, each HMAC key with its raw secret.
TEST(JwtJwks, KeysListsInlineThenFileKeysWithTheirSecrets)
{
    TempDir dir;
    dir.replace("keys.jwks", jwks(oct("file", std::string(48, 'f'), "HS384") + "," + kRsaEntry));
    auto p = jwks_provider(dir.file("keys.jwks"));
    p.keys = {inline_hs256("inline", std::string(32, 'i'))};
    p.algorithms = {"HS256", "RS256"};
    std::string why;
    auto v = Verifier::create(p, &why);
    ASSERT_TRUE(v) << why;
    auto keys = v->keys();
    ASSERT_EQ(keys.size(), 3u);
    EXPECT_EQ(keys[0]->kid(), "inline");
    EXPECT_EQ(keys[0]->alg(), Alg::HS256);
    EXPECT_EQ(keys[0]->hmac_secret(), std::string(32, 'i'));
    EXPECT_EQ(keys[1]->kid(), "file");
    EXPECT_EQ(keys[1]->alg(), Alg::HS384);
    EXPECT_EQ(keys[1]->hmac_secret(), std::string(48, 'f'));
    EXPECT_EQ(keys[2]->alg(), Alg::RS256);
    EXPECT_TRUE(keys[2]->hmac_secret().empty());
    // the provider accepts HS256 and RS256 only: the HS384 key verifies nothing
    EXPECT_TRUE(v->allows(Alg::HS256));
    EXPECT_FALSE(v->allows(Alg::HS384));

    // a refresh: the file's keys as read now
    dir.replace("keys.jwks", jwks(oct("next", std::string(32, 'n'))));
    ASSERT_EQ(v->refresh_if_changed(), Jwks::Refresh::Reloaded);
    keys = v->keys();
    ASSERT_EQ(keys.size(), 2u);
    EXPECT_EQ(keys[1]->kid(), "next");
    EXPECT_EQ(keys[1]->hmac_secret(), std::string(32, 'n'));
}

TEST(JwtKeys, AlgNames)
{
    for (Alg a : {Alg::HS256, Alg::HS384, Alg::HS512, Alg::RS256, Alg::ES256})
        EXPECT_EQ(alg_from_name(alg_name(a)), a);
    for (const char* bad : {"none", "hs256", "RS384", "PS256", "EdDSA", "", "HS256 "})
        EXPECT_EQ(alg_from_name(bad), std::nullopt) << bad;
}

TEST(JwtKeys, DirectConstructors)
{
    std::string why;
    EXPECT_FALSE(VerificationKey::hmac(Alg::RS256, "", std::string(32, 'k'), &why));
    EXPECT_FALSE(VerificationKey::from_pem(Alg::HS256, "", "x", &why));
    EXPECT_FALSE(VerificationKey::rsa("", "", "\x01\x00\x01", &why));
    EXPECT_FALSE(VerificationKey::ec_p256("", std::string(32, '\0'), std::string(32, '\0'), &why));
    const auto k = VerificationKey::hmac(Alg::HS256, "kid", std::string(32, 'k'), &why);
    ASSERT_TRUE(k) << why;
    EXPECT_FALSE(k->verify("input", ""));
    EXPECT_FALSE(k->verify("input", std::string(32, '\0')));
    EXPECT_FALSE(k->verify("input", std::string(64, '\0')));
}
