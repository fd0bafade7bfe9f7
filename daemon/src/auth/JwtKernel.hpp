// What the kernel's HS verifier (bpf/include/l7_jwtverify.h) is given so
// that it never parses a JOSE header: the header segments it recognises.
// For one (kid, alg) of a provider's HMAC keys these are the base64url
// forms of the JSON headers JWT libraries write: every order of "alg",
// "kid" (when the key has one) and "typ":"JWT" (or no typ), compact or
// with a space after ',' and ':', each checked with the reference
// (Verifier::check_header) to give exactly that alg and kid. The kernel
// decodes and scans any other header (l7_jwt_judge_header).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "auth/Jwt.hpp"

namespace l7fast::auth {

// The segments; none for a kid that would need escaping in JSON (a quote,
// a backslash, a control or non-ASCII byte) or when the verifier does not
// take `alg`.
std::vector<std::string> kernel_header_segments(const Verifier& verifier, Alg alg, std::string_view kid);

// The reason of a 401 the kernel sent for a token it refused: its
// L7_ANS_DETAIL_* (l7fast_abi.h; the answer event's second byte, the
// harness's out.detail). An unknown detail is Malformed.
Reason kernel_refusal_reason(uint32_t detail);

}  // namespace l7fast::auth
