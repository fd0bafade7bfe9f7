// The values of the policy format, one at a time: names, hosts, paths,
// methods, header fields, claim and query text. Each check_* returns why the
// value is refused, as the error message says it, or nullopt when it is
// accepted. Internal to the policy loader (PolicyLoader.cpp, Load*.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "config/Policy.hpp"

namespace l7fast::policy::loader {

// "a space", "a tab" or "byte 0xNN": a refused byte in a message.
std::string byte_text(unsigned char c);

// Names appear in l7fastctl output, metrics labels and D-Bus object paths.
std::optional<std::string> check_name(std::string_view s);

// The Host condition as the data plane compares it: lower-cased, no port; an
// IPv6 literal keeps its brackets because that is how the Host header says it.
// nullopt, with the reason in *why, when `written` is not a host.
std::optional<std::string> normalize_host(std::string_view written, std::string* why);

// A path condition (path_exact, path_prefix): starts with '/', visible ASCII
// without '?' or '#', and in the normal form requests are matched in.
std::optional<std::string> check_path(std::string_view p);

// A method condition: a token, upper-case, not CONNECT.
std::optional<std::string> check_method(std::string_view m);

// A field value as the parser hands it over: OWS already trimmed, no CTLs
// but HTAB (RFC 9110 5.5).
std::optional<std::string> check_header_value(std::string_view v);

// A file's path (cgroup, bpffs, jwks_file): absolute, no control characters.
std::optional<std::string> check_absolute_path(std::string_view p);

// A field name l7fast writes or matches: a token, lower-cased by the caller.
std::optional<std::string> check_field_name(std::string_view name);

// Framing and hop-by-hop fields: l7fast writes them itself (or they belong to
// one connection), so no mutation, forwarded claim or direct response may.
bool is_reserved_field(std::string_view lower_name);
std::string reserved_field_message(std::string_view lower_name);

// A field value l7fast writes into a message: no CR, LF, NUL or other
// control characters but tab (they would split or corrupt the head), no
// whitespace at either end (recipients strip it).
std::optional<std::string> check_written_value(std::string_view v);

// Claim names, issuers, audiences, key ids: any text but control characters.
std::optional<std::string> check_claim_text(std::string_view v);

// Query names and values are compared as sent: visible ASCII, and nothing
// that would end the pair ('&'), the name ('=') or the target ('#').
std::optional<std::string> check_query_text(std::string_view v, bool is_name);

// Maglev's table size must be prime.
bool is_prime(int64_t n);
// 127.0.0.0/8 or ::1.
bool is_loopback(const SocketAddress& a);

}  // namespace l7fast::policy::loader
