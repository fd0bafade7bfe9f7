#include "auth/JwtKernel.hpp"

#include <algorithm>
#include <optional>

#include "auth/Base64Url.hpp"
#include "l7fast_abi.h"

namespace l7fast::auth {

namespace {

// The JSON headers JWT libraries write with `alg` and `kid`: every order of
// "alg", "kid" (when not empty) and "typ":"JWT" (or no typ), compact (most
// libraries) or with a space after ',' and ':' (Python's json.dumps by
// default). Empty for a kid that would need escaping in JSON.
std::vector<std::string> header_forms(std::string_view alg, std::string_view kid)
{
    std::vector<std::string> out;
    for (char c : kid)
        if (c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f)
            return out;
    struct Member {
        std::string name, value;
        bool operator<(const Member& o) const { return name < o.name; }
    };
    for (bool typ : {false, true}) {
        std::vector<Member> members{{"alg", std::string(alg)}};
        if (!kid.empty())
            members.push_back({"kid", std::string(kid)});
        if (typ)
            members.push_back({"typ", "JWT"});
        std::sort(members.begin(), members.end());
        do {
            for (const bool spaced : {false, true}) {
                std::string json = "{";
                for (size_t i = 0; i < members.size(); i++) {
                    if (i)
                        json += spaced ? ", " : ",";
                    json += "\"" + members[i].name + (spaced ? "\": \"" : "\":\"") + members[i].value + "\"";
                }
                out.push_back(json + "}");
            }
        } while (std::next_permutation(members.begin(), members.end()));
    }
    return out;
}

}  // namespace

std::vector<std::string> kernel_header_segments(const Verifier& verifier, Alg alg, std::string_view kid)
{
    std::vector<std::string> out;
    for (const std::string& json : header_forms(alg_name(alg), kid)) {
        std::optional<Alg> got;
        std::string_view got_kid;
        if (verifier.check_header(json, &got, &got_kid) == Reason::Ok && got == alg && got_kid == kid)
            out.push_back(base64url_encode(json));
    }
    return out;
}

Reason kernel_refusal_reason(uint32_t detail)
{
    switch (detail) {
    case L7_ANS_DETAIL_TOO_LARGE: return Reason::TooLarge;
    case L7_ANS_DETAIL_BAD_SIGNATURE: return Reason::BadSignature;
    case L7_ANS_DETAIL_EXPIRED: return Reason::Expired;
    case L7_ANS_DETAIL_NOT_YET_VALID: return Reason::NotYetValid;
    case L7_ANS_DETAIL_BAD_ISSUER: return Reason::BadIssuer;
    case L7_ANS_DETAIL_BAD_AUDIENCE: return Reason::BadAudience;
    case L7_ANS_DETAIL_MISSING_EXP: return Reason::MissingExp;
    case L7_ANS_DETAIL_MALFORMED: return Reason::Malformed;
    case L7_ANS_DETAIL_ALG_NOT_ALLOWED: return Reason::AlgNotAllowed;
    case L7_ANS_DETAIL_UNKNOWN_KID: return Reason::UnknownKid;
    case L7_ANS_DETAIL_ALG_MISMATCH: return Reason::AlgMismatch;
    default: return Reason::Malformed;
    }
}

}  // namespace l7fast::auth
