// An HS256 JWT over a JSON payload, for tests that need a token the
// policy's key verifies (the header is {"alg":"HS256","typ":"JWT"}).
#pragma once

#include <openssl/evp.h>

#include <stdexcept>
#include <string>

#include "auth/Base64Url.hpp"

namespace l7fast::test_support {

inline std::string hs256_token(const std::string& payload_json, const std::string& secret)
{
    const std::string input = auth::base64url_encode(R"({"alg":"HS256","typ":"JWT"})") + "." +
                              auth::base64url_encode(payload_json);
    unsigned char mac[64];
    size_t n = 0;
    if (!EVP_Q_mac(nullptr, "HMAC", nullptr, "SHA256", nullptr, secret.data(), secret.size(),
                   reinterpret_cast<const unsigned char*>(input.data()), input.size(), mac, sizeof(mac), &n))
        throw std::runtime_error("HMAC-SHA256 failed");
    return input + "." + auth::base64url_encode(std::string_view(reinterpret_cast<char*>(mac), n));
}

}  // namespace l7fast::test_support
