// HMAC-signed JWTs for tests that need a token a policy's key verifies:
// hs_token signs any header and payload (JSON text, encoded as given) with
// HS256, HS384 or HS512; hs256_token uses the header
// {"alg":"HS256","typ":"JWT"}.
#pragma once

#include <openssl/evp.h>

#include <stdexcept>
#include <string>

#include "auth/Base64Url.hpp"

namespace l7fast::test_support {

// `digest`: "SHA256", "SHA384" or "SHA512".
inline std::string hs_token(const std::string& header_json, const std::string& payload_json, const char* digest,
                            const std::string& secret)
{
    const std::string input = auth::base64url_encode(header_json) + "." + auth::base64url_encode(payload_json);
    unsigned char mac[64];
    size_t n = 0;
    if (!EVP_Q_mac(nullptr, "HMAC", nullptr, digest, nullptr, secret.data(), secret.size(),
                   reinterpret_cast<const unsigned char*>(input.data()), input.size(), mac, sizeof(mac), &n))
        throw std::runtime_error(std::string("HMAC-") + digest + " failed");
    return input + "." + auth::base64url_encode(std::string_view(reinterpret_cast<char*>(mac), n));
}

inline std::string hs256_token(const std::string& payload_json, const std::string& secret)
{
    return hs_token(R"({"alg":"HS256","typ":"JWT"})", payload_json, "SHA256", secret);
}

}  // namespace l7fast::test_support
