// Hostile input for the JWT verifier: thousands of deterministic mutations
// of valid tokens must never crash (run under ASan/UBSan too) and never
// verify, and randomly mutated JSON signed with the right key must never
// crash the claim checks.
#include <gtest/gtest.h>

#include <openssl/evp.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "auth/Base64Url.hpp"
#include "auth/Jwt.hpp"

using namespace l7fast;
using namespace l7fast::auth;
using Clock = std::chrono::system_clock;

namespace {

constexpr const char* kPayload =
    ".eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ";
const std::string kA1 = std::string("eyJ0eXAiOiJKV1QiLA0KICJhbGciOiJIUzI1NiJ9") + kPayload +
                        ".dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
const std::string kA2 =
    std::string("eyJhbGciOiJSUzI1NiJ9") + kPayload +
    ".cC4hiUPoj9Eetdgtv3hF80EGrhuB__dzERat0XF9g2VtQgr9PJbu3XOiZj5RZmh7AAuHIm4Bh-0Qc_lF5YKt_O8W2Fp5jujGbds9uJ"
    "dbF9CUAr7t1dnZcAcQjbKBYNX4BAynRFdiuB--f_nZLgrnbyTyWzO75vRK5h6xBArLIARNPvkSjtQBMHlb1L07Qe7K0GarZRmB_"
    "eSN9383LcOLn6_dO--xi12jzDwusC-eOkHWEsqtFZESc6BfI7noOPqvhJ1phCnvWh6IeYI2w9QOYEUipUTI8np6LbgGY9Fs98rq"
    "Vt5AXLIhWkWywlVmtVrBp0igcN_IoypGlUPQGe77Rw";
const std::string kA3 = std::string("eyJhbGciOiJFUzI1NiJ9") + kPayload +
                        ".DtEhU3ljbEg8L38VWAfUAqOyKAM6-Xx-F4GawxaepmXFCgfTjDxw5djxLa8ISlSApmWQxfKTUJqPP3-Kg6NU1Q";
const Clock::time_point kNow{std::chrono::seconds{1300819380 - 10}};
const std::string kKidSecret(48, 'z');

std::string read_data(const std::string& name)
{
    std::ifstream in(std::string(L7FAST_TEST_DATA) + "/jwt/" + name, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::string a1_secret()
{
    std::string s;
    EXPECT_TRUE(base64url_decode("AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow", &s));
    return s;
}

std::string hmac256(std::string_view key, std::string_view data)
{
    unsigned char mac[EVP_MAX_MD_SIZE];
    size_t len = 0;
    EXPECT_TRUE(EVP_Q_mac(nullptr, "HMAC", nullptr, "SHA256", nullptr, key.data(), key.size(),
                          reinterpret_cast<const unsigned char*>(data.data()), data.size(), mac, sizeof mac, &len));
    return std::string(reinterpret_cast<char*>(mac), len);
}

std::string sign(std::string_view header, std::string_view payload, std::string_view secret)
{
    const std::string input = base64url_encode(header) + "." + base64url_encode(payload);
    return input + "." + base64url_encode(hmac256(secret, input));
}

// One provider that accepts every base token.
Verifier everything()
{
    policy::JwtProvider p;
    p.name = "fuzz";
    p.algorithms = {"HS256", "HS384", "HS512", "RS256", "ES256"};
    p.require_exp = false;
    p.issuer = "joe";
    p.clock_skew = std::chrono::seconds{0};
    policy::JwtKey hs;
    hs.alg = "HS256";
    hs.secret = a1_secret();
    policy::JwtKey rs;
    rs.alg = "RS256";
    rs.pem = read_data("rfc7515-a2.pem");
    policy::JwtKey es;
    es.alg = "ES256";
    es.pem = read_data("rfc7515-a3.pem");
    policy::JwtKey kid;
    kid.kid = "k1";
    kid.alg = "HS256";
    kid.secret = kKidSecret;
    p.keys = {hs, rs, es, kid};
    std::string why;
    auto v = Verifier::create(p, &why);
    EXPECT_TRUE(v) << why;
    return std::move(*v);
}

std::vector<std::string> base_tokens()
{
    return {
        kA1,
        kA2,
        kA3,
        sign(R"({"alg":"HS256","kid":"k1","typ":"JWT"})",
             R"({"iss":"joe","exp":1300819380,"aud":["a","b"],"nested":{"x":[1,2,{"y":"\u00e9\ud83d\ude00"}]},"n":-1.5e3})",
             kKidSecret),
    };
}

class Mutator {
public:
    explicit Mutator(uint64_t seed) : rng_(seed) {}

    size_t below(size_t n) { return n == 0 ? 0 : std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }

    char interesting()
    {
        static constexpr char kSet[] =
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
            ".=+/ \t\r\n\"\\{}[],:\x7f\x80\xc3\xff";
        return kSet[below(sizeof kSet)];  // the terminating '\0' is one of them
    }

    std::string mutate(std::string t, const std::vector<std::string>& others)
    {
        const size_t rounds = 1 + below(4);
        for (size_t r = 0; r < rounds; ++r) {
            switch (below(9)) {
            case 0:  // flip a bit
                if (!t.empty()) {
                    const size_t i = below(t.size());
                    t[i] = static_cast<char>(t[i] ^ (1 << below(8)));
                }
                break;
            case 1:  // replace a byte
                if (!t.empty())
                    t[below(t.size())] = interesting();
                break;
            case 2: {  // delete a range
                const size_t at = below(t.size() + 1);
                t.erase(at, below(8) + 1);
                break;
            }
            case 3: {  // insert bytes
                const size_t at = below(t.size() + 1);
                std::string ins;
                for (size_t n = below(6) + 1; n > 0; --n)
                    ins.push_back(interesting());
                t.insert(at, ins);
                break;
            }
            case 4: {  // duplicate a range
                const size_t at = below(t.size() + 1);
                t.insert(at, t.substr(below(t.size() + 1), below(16)));
                break;
            }
            case 5: {  // one part from another token
                const std::string& o = others[below(others.size())];
                const size_t i = below(3);
                t = replace_part(t, i, part(o, i));
                break;
            }
            case 6:  // truncate
                t.resize(below(t.size() + 1));
                break;
            case 7: {  // change a decoded header or payload byte, re-encoded canonically
                const size_t i = below(2);
                std::string decoded;
                if (base64url_decode(part(t, i), &decoded) && !decoded.empty()) {
                    decoded[below(decoded.size())] = interesting();
                    t = replace_part(t, i, base64url_encode(decoded));
                }
                break;
            }
            default: {  // change a decoded signature byte
                std::string sig;
                if (base64url_decode(part(t, 2), &sig) && !sig.empty()) {
                    const size_t i = below(sig.size());
                    sig[i] = static_cast<char>(sig[i] ^ (1 + below(255)));
                    t = replace_part(t, 2, base64url_encode(sig));
                }
                break;
            }
            }
        }
        return t;
    }

    static std::string part(const std::string& t, size_t i)
    {
        size_t start = 0;
        for (size_t k = 0; k < i; ++k) {
            start = t.find('.', start);
            if (start == std::string::npos)
                return {};
            ++start;
        }
        const size_t end = t.find('.', start);
        return t.substr(start, end == std::string::npos ? std::string::npos : end - start);
    }

    static std::string replace_part(const std::string& t, size_t i, const std::string& with)
    {
        size_t start = 0;
        for (size_t k = 0; k < i; ++k) {
            start = t.find('.', start);
            if (start == std::string::npos)
                return t;
            ++start;
        }
        const size_t end = t.find('.', start);
        return t.substr(0, start) + with + (end == std::string::npos ? "" : t.substr(end));
    }

private:
    std::mt19937_64 rng_;
};

}  // namespace

TEST(JwtFuzz, MutatedTokensNeverVerify)
{
    const Verifier v = everything();
    const std::vector<std::string> bases = base_tokens();
    for (const std::string& b : bases)
        ASSERT_TRUE(v.verify(b, kNow).ok()) << reason_name(v.verify(b, kNow).reason) << " " << b;

    constexpr int kPerToken = 6000;
    Mutator m(0x6c37666173744a57ull);
    size_t reasons[static_cast<int>(Reason::BadAudience) + 1] = {};
    for (const std::string& base : bases) {
        for (int i = 0; i < kPerToken; ++i) {
            const std::string t = m.mutate(base, bases);
            const Result r = v.verify(t, kNow);
            ++reasons[static_cast<int>(r.reason)];
            if (std::find(bases.begin(), bases.end(), t) != bases.end())
                continue;  // mutated back into a valid token
            ASSERT_FALSE(r.ok()) << "verified a mutation of " << base << ": " << t;
            ASSERT_EQ(r.status, Status::Invalid);
            ASSERT_TRUE(r.claims.members.empty());
            ASSERT_TRUE(r.token.empty());
        }
    }
    // the mutations reached every stage of the check
    EXPECT_GT(reasons[static_cast<int>(Reason::Malformed)], 100u);
    EXPECT_GT(reasons[static_cast<int>(Reason::BadSignature)], 100u);
    EXPECT_GT(reasons[static_cast<int>(Reason::AlgNotAllowed)] + reasons[static_cast<int>(Reason::UnknownKid)] +
                  reasons[static_cast<int>(Reason::AlgMismatch)],
              10u);
}

TEST(JwtFuzz, MutatedRequestsNeverAuthenticate)
{
    const Verifier v = everything();
    const std::vector<std::string> bases = base_tokens();
    Mutator m(42);
    for (int i = 0; i < 4000; ++i) {
        const std::string& base = bases[static_cast<size_t>(i) % bases.size()];
        const std::string t = m.mutate(base, bases);
        std::string value = (i % 3 == 0 ? "bearer " : "Bearer ") + t;
        if (i % 7 == 0)
            value = m.mutate(value, bases);
        const std::vector<policy::HeaderField> fields = {{"Host", "x"}, {"Authorization", value}};
        const Result r = authenticate(v, policy::RequestView{"GET", "/", fields}, kNow);
        if (!r.ok())
            continue;
        // only an untouched token (after the scheme) may pass
        ASSERT_NE(std::find(bases.begin(), bases.end(), r.token), bases.end()) << value;
    }
}

TEST(JwtFuzz, RandomlyMutatedJsonSignedWithTheRightKeyNeverCrashes)
{
    // The signature holds, so every byte of header and payload reaches the
    // JSON reader and the claim checks.
    const Verifier v = everything();
    const std::vector<std::string> headers = {R"({"alg":"HS256","kid":"k1"})", R"({"alg":"HS256","kid":"k1","typ":"JWT"})"};
    const std::vector<std::string> payloads = {
        R"({"iss":"joe","exp":1300819380,"nbf":1300000000,"aud":["a"],"o":{"x":[1,{"y":null}]},"s":"\u00e9\ud83d\ude00"})",
        R"({"iss":"joe","n":[1e400,-0.0,1E-400,123456789012345678901234567890],"t":true,"f":false})",
    };
    Mutator m(7);
    size_t ok = 0;
    for (int i = 0; i < 6000; ++i) {
        std::string h = headers[static_cast<size_t>(i) % headers.size()];
        std::string p = payloads[static_cast<size_t>(i) % payloads.size()];
        std::string& target = i % 4 == 0 ? h : p;
        for (size_t n = 1 + m.below(3); n > 0; --n) {
            const size_t at = m.below(target.size() + 1);
            switch (m.below(3)) {
            case 0:
                if (!target.empty())
                    target[m.below(target.size())] = m.interesting();
                break;
            case 1:
                target.insert(at, 1, m.interesting());
                break;
            default:
                target.erase(at, 1 + m.below(4));
                break;
            }
        }
        const std::string token = sign(h, p, kKidSecret);
        const Result r = v.verify(token, kNow);
        if (r.ok()) {
            ++ok;
            ASSERT_EQ(r.token, token);
            ASSERT_TRUE(r.claims.has("iss"));
        } else {
            ASSERT_TRUE(r.claims.members.empty());
        }
    }
    EXPECT_GT(ok, 0u);  // some mutations keep the JSON valid
}
