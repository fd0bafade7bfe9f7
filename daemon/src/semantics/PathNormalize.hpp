// Path normalisation: what the policy matches is the path a backend will
// resolve, so a deny on "/admin" cannot be evaded by "/a/../admin",
// "/%61dmin" or "//admin" (ARCHITECTURE.md, "Path normalisation").
//
// The kernel matches raw bytes and only takes requests whose path is already
// in normal form (bpf/include/l7_http.h sets L7_MF_PATH_NOT_NORMAL
// otherwise); the slow path normalises the rest with this function, matches
// the result and forwards the normalised target.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace l7fast::policy {

struct NormalizedTarget {
    std::string target;   // normalised path, then the query exactly as received
    std::string error;    // non-empty: reject with 400 and this text
    const char* cause = "";  // with error: its short name (bad_request:<cause>)
};

// Normalises the path of an origin-form request-target (the query, from the
// first '?', is kept as received):
//  1. percent-escapes are checked (two hex digits, else rejected); an escape
//     of an unreserved character (RFC 3986 section 2.3: ALPHA DIGIT - . _ ~)
//     is decoded; an escaped '/' or '\' (%2F, %5C) is rejected, since
//     backends disagree about it; other escapes are kept, hex upper-cased;
//  2. a literal '\' is rejected (not a URI character; some servers read '/');
//  3. runs of '/' become one;
//  4. dot segments are removed (RFC 3986 section 5.2.4), never above the root.
// "*" (OPTIONS) is returned unchanged.
NormalizedTarget normalize_target(std::string_view target);

}  // namespace l7fast::policy
