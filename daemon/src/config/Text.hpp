// Byte-level text rules shared by the loader, the Router and the compiler.
// HTTP is case-insensitive only in ASCII (RFC 9110 5.1): nothing here is
// locale-dependent.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace l7fast::policy::text {

char ascii_lower(char c);
std::string lower(std::string_view s);
bool iequals(std::string_view a, std::string_view b);

// RFC 9110 5.6.2 tchar / token
bool is_tchar(unsigned char c);
bool is_token(std::string_view s);

// A value as it appears in a message: double-quoted, control bytes escaped
// as \xNN, and shortened after 80 bytes, so hostile input cannot produce
// megabyte messages.
std::string quote(std::string_view s);

// Levenshtein distance (bytes).
size_t edit_distance(std::string_view a, std::string_view b);
// The candidate an operator most likely meant by `word` (a typo: at most a
// third of its length, at least 2, edits away; or the same ignoring ASCII
// case), if one is close enough: for "did you mean" in messages.
std::optional<std::string> closest(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace l7fast::policy::text
