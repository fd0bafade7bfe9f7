#include "auth/JwtKernel.hpp"

#include <algorithm>
#include <optional>

#include "auth/Base64Url.hpp"
#include "l7fast_abi.h"

namespace l7fast::auth {

std::vector<std::string> kernel_header_segments(const Verifier& verifier, Alg alg, std::string_view kid)
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
        std::vector<Member> members{{"alg", std::string(alg_name(alg))}};
        if (!kid.empty())
            members.push_back({"kid", std::string(kid)});
        if (typ)
            members.push_back({"typ", "JWT"});
        std::sort(members.begin(), members.end());
        do {
            // compact (most libraries) and with a space after ',' and ':'
            // (Python's json.dumps by default)
            for (const bool spaced : {false, true}) {
                std::string json = "{";
                for (size_t i = 0; i < members.size(); i++) {
                    if (i)
                        json += spaced ? ", " : ",";
                    json += "\"" + members[i].name + (spaced ? "\": \"" : "\":\"") + members[i].value + "\"";
                }
                json += "}";
                std::optional<Alg> got;
                std::string_view got_kid;
                if (verifier.check_header(json, &got, &got_kid) == Reason::Ok && got == alg && got_kid == kid)
                    out.push_back(base64url_encode(json));
            }
        } while (std::next_permutation(members.begin(), members.end()));
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
    default: return Reason::Malformed;
    }
}

}  // namespace l7fast::auth
