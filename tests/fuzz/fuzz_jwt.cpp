// JWT decoding and claims: the verifier with fixed keys (HS256, RS256,
// ES256 from RFC 7515's examples, a kid-bound HS256 key), its JSON reader,
// base64url and JWKS parsing.
//
// Input: one control byte, then text. Mode (control % 4):
//   0  the text is a token: verify() it, and authenticate() a request that
//      carries it in Authorization;
//   1  the text is a payload, signed with the HS256 key under a fixed
//      header: the signature is right, so the claim checks decide;
//   2  the text is a JOSE header, signed with the HS256 key over a fixed
//      payload: header parsing, alg and kid selection; and the kernel's
//      header scan (bpf/include/l7_jwtscan.h, compiled natively) decides
//      it as Verifier::check_header does, or leaves it to the slow path;
//   3  the text is JSON for the reader and parse_jwks, and base64url.
//
// Invariants: no crash; a result is Ok exactly when its reason is; an
// accepted token is the input's bytes; a correctly signed token never fails
// for a reason before the payload (mode 1); a decodable base64url string
// re-encodes to itself (canonical form only); a parsed JSON document's
// subtrees nest and its strings are UTF-8.
#include <openssl/evp.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

#include "FuzzTarget.hpp"
#include "auth/Base64Url.hpp"
#include "auth/JsonReader.hpp"
#include "auth/Jwt.hpp"
#include "auth/JwtKernel.hpp"
#include "auth/JwtKeys.hpp"
#include "l7_jwtscan.h"

namespace l7fast::fuzz {
namespace {

using namespace l7fast::auth;
using Clock = std::chrono::system_clock;

const Clock::time_point kNow{std::chrono::seconds{1300819380 - 10}};
const std::string kHsSecret(32, 'k');
const std::string kKidSecret(48, 'z');

std::string read_data(const std::string& name)
{
    std::ifstream in(std::string(L7FAST_TEST_DATA) + "/jwt/" + name, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

const Verifier& verifier()
{
    static const Verifier v = [] {
        policy::JwtProvider p;
        p.name = "fuzz";
        p.algorithms = {"HS256", "HS384", "HS512", "RS256", "ES256"};
        p.issuer = "joe";
        p.audiences = {"a", "l7fast"};
        p.require_exp = false;
        p.clock_skew = std::chrono::seconds{30};
        policy::JwtKey hs;
        hs.alg = "HS256";
        hs.secret = kHsSecret;
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
        std::optional<Verifier> made = Verifier::create(p, &why);
        if (!made)
            invariant_failed(("the fuzz verifier cannot be built: " + why).c_str(), __FILE__, __LINE__);
        return std::move(*made);
    }();
    return v;
}

std::string hs256(std::string_view key, std::string_view data)
{
    unsigned char mac[EVP_MAX_MD_SIZE];
    size_t len = 0;
    FUZZ_CHECK(EVP_Q_mac(nullptr, "HMAC", nullptr, "SHA256", nullptr, key.data(), key.size(),
                         reinterpret_cast<const unsigned char*>(data.data()), data.size(), mac, sizeof mac, &len));
    return std::string(reinterpret_cast<char*>(mac), len);
}

std::string sign(std::string_view header, std::string_view payload, std::string_view secret)
{
    const std::string input = base64url_encode(header) + "." + base64url_encode(payload);
    return input + "." + base64url_encode(hs256(secret, input));
}

Result check_verify(std::string_view token)
{
    Result r = verifier().verify(token, kNow);
    FUZZ_CHECK(r.ok() == (r.reason == Reason::Ok));
    FUZZ_CHECK(r.ok() == (r.status == Status::Ok));
    FUZZ_CHECK(!reason_name(r.reason).empty());
    if (r.ok()) {
        FUZZ_CHECK(r.token == token);
        FUZZ_CHECK(r.valid_until >= kNow);
    }
    const std::string www = www_authenticate("fuzz", r.reason);
    FUZZ_CHECK(www.find_first_of("\r\n") == std::string::npos);
    return r;
}

void check_json(std::string_view text)
{
    json::Document doc;
    if (!doc.parse(text)) {
        FUZZ_CHECK(!doc.error().empty() && doc.error_offset() <= text.size());
        return;
    }
    // walk the tree: every subtree ends inside its parent's
    const json::Node* base = &doc.root();
    const uint32_t total = doc.root().end;
    FUZZ_CHECK(total >= 1);
    for (uint32_t i = 0; i < total; i++) {
        const json::Node& n = base[i];
        FUZZ_CHECK(n.end > i && n.end <= total);
        if (n.type == json::Type::String)
            FUZZ_CHECK(json::valid_utf8(n.text));
        uint32_t count = 0;
        for (const json::Node& c : doc.children(n)) {
            const uint32_t ci = static_cast<uint32_t>(&c - base);
            FUZZ_CHECK(ci > i && c.end <= n.end);
            FUZZ_CHECK(n.type != json::Type::Object || json::valid_utf8(c.key));
            count++;
        }
        FUZZ_CHECK(count == 0 || n.type == json::Type::Array || n.type == json::Type::Object);
    }
}

// The kernel's header scan against the reference's check_header.
void check_header_scan(std::string_view json)
{
    if (json.size() > L7_JWT_PAYLOAD_BUF)
        return;
    static auto wk = std::make_unique<l7_jwt_work>();
    std::memcpy(wk->payload, json.data(), json.size());
    uint32_t alg = L7_JA_N, detail = 0;
    const uint32_t all = (1u << L7_JA_N) - 1;  // the fuzz verifier accepts every algorithm
    const int v = l7_jwt_judge_header(wk.get(), static_cast<__u32>(json.size()), all, &alg, &detail);
    std::optional<Alg> ref_alg;
    std::string_view ref_kid;
    const Reason ref = verifier().check_header(json, &ref_alg, &ref_kid);
    if (v == L7_JV_OK) {
        FUZZ_CHECK(ref == Reason::Ok && ref_alg && static_cast<uint32_t>(*ref_alg) == alg);
        FUZZ_CHECK(std::string_view(reinterpret_cast<const char*>(wk->payload) + wk->sc.hs_off[1],
                                    wk->sc.hs_len[1]) == ref_kid);
    } else if (v == L7_JV_REJECT) {
        FUZZ_CHECK(ref == kernel_refusal_reason(detail));
    }
}

}  // namespace

int jwt(const uint8_t* data, size_t size)
{
    if (size < 1)
        return 0;
    const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
    switch (data[0] % 4) {
    case 0: {
        check_verify(text);
        const std::string value = "Bearer " + std::string(text);
        const policy::HeaderField fields[] = {{"host", "a"}, {"authorization", value}};
        policy::RequestView rq;
        rq.method = "GET";
        rq.target = "/";
        rq.headers = fields;
        const Result a = authenticate(verifier(), rq, kNow);
        FUZZ_CHECK(a.ok() == (a.reason == Reason::Ok));
        break;
    }
    case 1: {
        const std::string token = sign(R"({"alg":"HS256","typ":"JWT"})", text, kHsSecret);
        const Result r = check_verify(token);
        // max_token_bytes is the provider's default, 4096
        FUZZ_CHECK((r.reason == Reason::TooLarge) == (token.size() > 4096));
        FUZZ_CHECK(r.reason != Reason::AlgNotAllowed && r.reason != Reason::UnknownKid &&
                   r.reason != Reason::AlgMismatch && r.reason != Reason::BadSignature);
        break;
    }
    case 2: {
        check_verify(sign(text, R"({"iss":"joe","aud":"l7fast","exp":1300819380})", kHsSecret));
        check_verify(sign(text, R"({"iss":"joe"})", kKidSecret));
        check_header_scan(text);
        break;
    }
    case 3: {
        check_json(text);
        std::string why;
        (void)parse_jwks(text, &why);
        std::string decoded;
        if (base64url_decode(text, &decoded)) {
            FUZZ_CHECK(decoded.size() == base64url_decoded_size(text.size()));
            FUZZ_CHECK(base64url_encode(decoded) == text);
        }
        decoded.clear();  // base64url_decode appends
        FUZZ_CHECK(base64url_decode(base64url_encode(text), &decoded) && decoded == text);
        break;
    }
    }
    return 0;
}

}  // namespace l7fast::fuzz

L7FAST_FUZZ_ENTRY(jwt)
