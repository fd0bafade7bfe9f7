// JWT authentication, the reference semantics: what the slow path enforces
// for a route's `jwt` provider, and what the kernel path must agree with.
// The kernel admits a token from the verified-token cache, after this code
// verified it once (bpf/include/l7_jwtcache.h), and with l7fast.ko verifies
// HS256/384/512 tokens itself, deciding only what it can decide exactly as
// this code does (bpf/include/l7_jwtverify.h, auth/JwtKernel.hpp).
//
// A token is accepted only as a compact JWS (RFC 7515 §7.1) in canonical
// form, checked in this order (the first failure is the reason):
//  1. size: at most the provider's max_token_bytes (too_large);
//  2. form: three base64url parts (Base64Url.hpp: no padding, no
//     whitespace, canonical trailing bits; all three checked before any
//     signature work); the header a JSON object
//     (JsonReader.hpp: strict, no duplicate member names, depth <= 16)
//     with "alg" a string, "kid" a string if present, "typ" if present
//     one of "JWT", "at+jwt" (RFC 9068 access tokens) or either with an
//     "application/" prefix, ASCII case-insensitively, and no "crit"
//     (no extension is implemented, RFC 7515 §4.1.11) (malformed);
//  3. algorithm: one this verifier implements (HS256/384/512, RS256,
//     ES256; never "none") and listed in the provider's `algorithms`
//     (alg_not_allowed);
//  4. key: keys whose kid equals the token's (an empty kid: tokens without
//     one) (unknown_kid), and of those the ones bound to the token's alg
//     (alg_mismatch): a key never verifies another algorithm;
//  5. signature by any such key: HMAC of the full length compared in
//     constant time, RSASSA-PKCS1-v1_5 with a signature exactly the modulus
//     size, ECDSA P-256 with exactly 64 bytes r||s (high-S accepted, see
//     below) (bad_signature);
//  6. payload: a strict JSON object (malformed);
//  7. claims: "exp" and "nbf", when present, JSON numbers (bad_claim);
//     "exp" present when require_exp (missing_exp); now < exp + clock_skew
//     (expired); now >= nbf - clock_skew (not_yet_valid); "iss" a string
//     equal to `issuer` when one is set (bad_issuer); "aud" a string or an
//     array of strings holding one of `audiences` when any are set
//     (bad_audience).
//
// ES256 high-S: ECDSA signatures are malleable ((r, s) and (r, n-s) both
// verify). They are accepted: RFC 7518 does not require low-S, common
// signers (OpenSSL, Go, Java) produce high-S about half the time, and the
// malleated token carries the same claims from the same signer, so the
// only effect is a second entry in the verified-token cache.
//
// NumericDate ("exp", "nbf"): any JSON number of seconds (RFC 7519 §2);
// integers are exact, fractions are kept to the nanosecond as a double
// allows; values are clamped to [0, 2^33) seconds (year 2242), which keeps
// time arithmetic far from overflow (a negative exp is expired, a negative
// nbf is no constraint). Claims keep the number's text as written.
//
// Not thread-safe per Verifier: verify and refresh on one thread (the
// daemon's io_context). verify() reuses per-thread buffers, so in steady
// state it allocates only the claims and the token copy of an accepted
// token.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "auth/JwtKeys.hpp"
#include "config/Policy.hpp"
#include "semantics/Router.hpp"

namespace l7fast::auth {

enum class Status : uint8_t {
    Ok,
    Missing,  // no token where the provider looks: 401 without an error code (RFC 6750 §3.1)
    Invalid,  // a token, not acceptable: 401 with error="invalid_token"
};

// Why; reason_name() gives the telemetry label.
enum class Reason : uint8_t {
    Ok,
    Missing,        // "missing": no such header or cookie
    BadScheme,      // "bad_scheme": the header does not start with from_prefix (another auth scheme)
    TooLarge,       // "too_large": longer than max_token_bytes
    Malformed,      // "malformed": see step 2 and 6 above; also an empty token after the prefix
    AlgNotAllowed,  // "alg_not_allowed"
    UnknownKid,     // "unknown_kid"
    AlgMismatch,    // "alg_mismatch": keys with the kid exist, none for the token's alg
    BadSignature,   // "bad_signature"
    BadClaim,       // "bad_claim": exp or nbf not a number
    MissingExp,     // "missing_exp"
    Expired,        // "expired"
    NotYetValid,    // "not_yet_valid"
    BadIssuer,      // "bad_issuer"
    BadAudience,    // "bad_audience"
};

std::string_view reason_name(Reason reason);
// RFC 6750 §3.1 error code: "" for Ok, Missing and BadScheme (no error code
// when the request carried no bearer token), else "invalid_token".
std::string_view rfc6750_error(Reason reason);
// A short error_description (RFC 6750 §3: printable ASCII without '"' and
// '\'), "" when rfc6750_error is "".
std::string_view rfc6750_description(Reason reason);
// The WWW-Authenticate value of a 401: `Bearer realm="..."` plus error and
// error_description when there are some. Bytes of realm outside printable
// ASCII become '?'.
std::string www_authenticate(std::string_view realm, Reason reason);

struct Result {
    Status status = Status::Invalid;
    Reason reason = Reason::Malformed;
    // Ok only:
    policy::Claims claims;
    // "exp"; time_point::max() without one
    std::chrono::system_clock::time_point expires = std::chrono::system_clock::time_point::max();
    // exp + clock_skew: verify() accepts the token only before this instant
    // (the verified-token cache's deadline); max() without exp
    std::chrono::system_clock::time_point valid_until = std::chrono::system_clock::time_point::max();
    // nbf - clock_skew: verify() accepts the token only from this instant
    // on; min() without nbf
    std::chrono::system_clock::time_point valid_from = std::chrono::system_clock::time_point::min();
    std::string token;  // the token bytes: the verified-token cache's key

    bool ok() const { return status == Status::Ok; }
};

// Where a provider's token is in a request, before any verification.
struct Extraction {
    Status status = Status::Missing;  // Ok: `token` is set
    Reason reason = Reason::Missing;
    std::string_view token;           // a view into the request
};

// Header: the first field line with from.name (ASCII case-insensitive); its
// value must start with from_prefix (ASCII case-insensitive; when the
// prefix ends in a space, further spaces are skipped as RFC 7235 allows).
// Cookie: policy::request_cookie (the first cookie called from.name in the
// Cookie field lines, its value as sent, quotes included). An empty token
// is Invalid/malformed, one over max_token_bytes Invalid/too_large.
Extraction extract_token(const policy::JwtProvider& provider, const policy::RequestView& request);

class Verifier {
public:
    // Builds the keys (inline and the JWKS file). Fails with a reason when
    // the provider cannot work: no keys at all, a bad key or key set, an
    // unknown algorithm in `algorithms` (or none listed), from.kind other
    // than Header/Cookie, a from_prefix with a cookie, max_token_bytes
    // outside 1..65536, clock_skew outside 0..86400 s.
    static std::optional<Verifier> create(const policy::JwtProvider& provider, std::string* why);

    Result verify(std::string_view token, std::chrono::system_clock::time_point now) const;

    // Steps 2 and 3 of the order above on a decoded header (JSON): Ok with
    // *alg and *kid set (kid: a view into this thread's scratch, valid until
    // the next check_header or verify on the thread; empty without one),
    // else Malformed or AlgNotAllowed.
    Reason check_header(std::string_view header_json, std::optional<Alg>* alg, std::string_view* kid) const;

    // Re-reads the JWKS file if it changed (Jwks::refresh_if_changed);
    // Unchanged for a provider without one.
    Jwks::Refresh refresh_if_changed();

    // Every key in use: the inline ones, then the JWKS file's as last read.
    // Valid until the next refresh_if_changed().
    std::vector<const VerificationKey*> keys() const;
    // Whether a token may use `alg` (the provider's algorithms).
    bool allows(Alg alg) const { return (allowed_ >> static_cast<unsigned>(alg)) & 1u; }

    // The provider's settings (its inline keys left out).
    const policy::JwtProvider& provider() const { return provider_; }

private:
    Verifier() = default;

    policy::JwtProvider provider_;
    uint32_t allowed_ = 0;  // bit per Alg
    KeySet inline_keys_;
    std::optional<Jwks> jwks_;
};

// extract_token with the verifier's provider, then verify.
Result authenticate(const Verifier& verifier, const policy::RequestView& request,
                    std::chrono::system_clock::time_point now);

}  // namespace l7fast::auth
