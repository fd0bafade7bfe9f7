// The exact bytes of every response l7fast generates itself: direct
// responses, RBAC denials, 401, 429 and the slow path's own errors. No Date
// header and nothing that varies per request, so the kernel can send
// precompiled bytes and both paths send the same ones.
//
// Layout (docs/policy.md, "GENERATED RESPONSES"):
//
//   HTTP/1.1 <status> <reason>\r\n      reason from reason_phrase()
//   <extra lines>                       direct_response headers in policy order,
//                                       or www-authenticate, or retry-after
//   content-type: text/plain\r\n        unless an extra line is content-type
//   content-length: <body size>\r\n
//   connection: close\r\n               the close variant only
//   \r\n
//   <body>
//
// Statuses 204 and 304 (and 1xx) have neither body, content-type nor
// content-length. Field names are lower-case, each line `name: value`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "config/Policy.hpp"

namespace l7fast::policy {

struct LocalResponse {
    std::string bytes;     // head, then body
    size_t head_size = 0;  // bytes[0, head_size) is the head: the answer to a HEAD request
    bool close = false;    // it says "Connection: close": the connection ends after it
};

// The IANA-registered reason phrase (RFC 9110 section 15), "" for an
// unregistered status (the status line then ends "NNN \r\n").
const char* reason_phrase(int status);

// A text/plain response with this body (the slow path's errors: 400, 404,
// 502, ...).
LocalResponse local_response(int status, std::string_view body, bool close);

LocalResponse direct_response(const DirectResponse& response, bool close);

// deny_status with deny_body.
LocalResponse rbac_denied(const Rbac& rbac, bool close);

// 401 with `www-authenticate: Bearer realm="l7fast"` (RFC 6750 3); with
// `, error="invalid_token"` appended when a token was presented but is
// invalid (malformed, bad signature, expired, wrong issuer/audience, too
// long). Body "unauthorized\n".
LocalResponse unauthorized(bool token_presented, bool close);

// 429 with `retry-after: <seconds>`: retry_after_ms rounded up to whole
// seconds, at least 1. Body "too many requests\n".
LocalResponse too_many_requests(uint64_t retry_after_ms, bool close);

}  // namespace l7fast::policy
