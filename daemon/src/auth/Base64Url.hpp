// RFC 4648 §5 base64url as JWS uses it (RFC 7515 §2): the URL-safe alphabet,
// no padding, no whitespace, and the unused low bits of the last character
// zero. Canonical decoding means every byte string has exactly one spelling,
// so a token cannot be re-spelled into different bytes that verify the same:
// the verified-token cache keys on the token's bytes.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace l7fast::auth {

// Appends the bytes `in` encodes to *out. False when `in` is not canonical
// base64url (a byte outside the alphabet, '=', a length of 4n+1, non-zero
// trailing bits); *out then holds an unspecified prefix of the bytes.
bool base64url_decode(std::string_view in, std::string* out);

// How many bytes `encoded_size` characters of base64url decode to.
constexpr size_t base64url_decoded_size(size_t encoded_size)
{
    return encoded_size / 4 * 3 + (encoded_size % 4 ? encoded_size % 4 - 1 : 0);
}

std::string base64url_encode(std::string_view bytes);

}  // namespace l7fast::auth
