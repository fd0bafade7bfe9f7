// Header mutation (docs/policy.md, "[route.request_headers]"): the exact
// bytes of a rewritten message head. The kernel reproduces them byte for
// byte, so the rule is fixed:
//
//   the start line (request line or status line), as received;
//   every original field line, as received and in order, except those whose
//     name (ASCII case-insensitive) is in remove, a set name, or a
//     forwarded-claim header name;
//   the `set` lines, in policy order;
//   the forwarded-claim lines that have a value, in policy order;
//   the `add` lines, in policy order;
//   the final CRLF.
//
// Generated lines are `name: value\r\n` with the lower-cased name (an empty
// value gives "name: \r\n").
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "config/Policy.hpp"
#include "semantics/Router.hpp"

namespace l7fast::policy {

// One header the route's JWT provider forwards from a claim. Its name is
// always removed from the request (a client cannot supply it); a line is
// written only when the claim has a value.
struct ForwardedHeader {
    std::string name;                  // lower-cased
    std::optional<std::string> value;
    friend bool operator==(const ForwardedHeader&, const ForwardedHeader&) = default;
};

// For each of provider.forward_claims, in order: its header and the claim's
// value as a field value: a string as is, a number's decimal text,
// "true"/"false", the strings of an array joined with ", ". No value
// (nullopt) when `claims` is nullptr, the claim is missing or has no values
// (objects, null, empty arrays), or a value contains a control character
// other than tab (CR, LF, NUL, DEL...): such a claim is never sent.
std::vector<ForwardedHeader> forwarded_claim_headers(const JwtProvider& provider, const Claims* claims);

// `head` is one whole message head: the start line, the field lines, the
// empty line, and nothing after it (as l7_parse_head accepted it). Returns
// the rewritten head, or nullopt when `head` is not shaped like that (no
// final CRLF CRLF or bytes after it, a field line without a name and ':').
std::optional<std::string> mutate_request_head(std::string_view head, const HeaderMutation& mutation,
                                               std::span<const ForwardedHeader> forwarded = {});

// The same rule for a response head, the status line kept; the loader only
// allows remove and set for responses.
std::optional<std::string> mutate_response_head(std::string_view head, const HeaderMutation& mutation);

}  // namespace l7fast::policy
