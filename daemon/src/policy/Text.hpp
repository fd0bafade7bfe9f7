// Byte-level text rules shared by the loader, the Router and the compiler.
// HTTP is case-insensitive only in ASCII (RFC 9110 5.1): nothing here is
// locale-dependent.
#pragma once

#include <string>
#include <string_view>

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

}  // namespace l7fast::policy::text
