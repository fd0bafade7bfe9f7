// JWT verification keys, built once when a policy is loaded: inline keys of a
// provider (policy::JwtKey) and RFC 7517 key sets (JWKS files). Each key is
// bound to exactly one algorithm and verifies nothing else, which is what
// makes algorithm confusion (an RS256 public key used as an HS256 secret,
// RFC 8725 §2.1) impossible.
//
// Not thread-safe: the daemon verifies and refreshes on its one io_context.
#pragma once

#include <openssl/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <sys/stat.h>
#include <sys/types.h>
#include <vector>

#include "config/Policy.hpp"

namespace l7fast::auth {

enum class Alg : uint8_t { HS256, HS384, HS512, RS256, ES256 };

// RFC 7518 names, case-sensitive ("HS256"); nullopt for anything else,
// "none" included.
std::optional<Alg> alg_from_name(std::string_view name);
std::string_view alg_name(Alg alg);

namespace detail {
struct OpensslFree {
    void operator()(EVP_PKEY* p) const;
    void operator()(EVP_MAC_CTX* p) const;
    void operator()(EVP_MD* p) const;
};

// Secret bytes, wiped when they go.
class Secret {
public:
    Secret() = default;
    explicit Secret(std::string_view bytes) : bytes_(bytes) {}
    Secret(Secret&& o) noexcept : bytes_(std::move(o.bytes_)) { o.wipe(); }
    Secret& operator=(Secret&& o) noexcept;
    ~Secret() { wipe(); }
    std::string_view view() const { return bytes_; }

private:
    void wipe() noexcept;
    std::string bytes_;
};
}  // namespace detail

class VerificationKey {
public:
    // Key-size rules (RFC 7518): an HMAC secret at least as long as the hash
    // (32/48/64 bytes); RSA moduli of 2048 to 8192 bits, public exponent odd
    // and at least 3; EC keys on P-256 only, point checked.
    static std::optional<VerificationKey> hmac(Alg alg, std::string kid, std::string_view secret,
                                               std::string* why);
    // A PEM "PUBLIC KEY" (SubjectPublicKeyInfo) or "RSA PUBLIC KEY" (PKCS#1)
    // block, exactly one; private keys and certificates are refused.
    static std::optional<VerificationKey> from_pem(Alg alg, std::string kid, std::string_view pem,
                                                   std::string* why);
    // RSA from big-endian modulus and exponent; EC P-256 from the 32-byte
    // affine coordinates (the JWK forms).
    static std::optional<VerificationKey> rsa(std::string kid, std::string_view n, std::string_view e,
                                              std::string* why);
    static std::optional<VerificationKey> ec_p256(std::string kid, std::string_view x, std::string_view y,
                                                  std::string* why);
    // An inline key of a provider: HS* from `secret`, RS256/ES256 from `pem`.
    static std::optional<VerificationKey> from_policy(const policy::JwtKey& key, std::string* why);

    const std::string& kid() const { return kid_; }
    Alg alg() const { return alg_; }
    // The exact length a signature of this key has: the HMAC length, the
    // RSA modulus length, or 64 (ES256 r||s).
    size_t signature_size() const { return signature_size_; }

    // HS*: the raw secret, which l7fast.ko's key table takes; empty for
    // RS256 and ES256.
    std::string_view hmac_secret() const { return secret_.view(); }

    // Whether `signature` (raw bytes, JWS form) is this key's signature with
    // its own algorithm over `signing_input`. Wrong lengths are false; HMACs
    // are compared in constant time.
    bool verify(std::string_view signing_input, std::string_view signature) const;

private:
    VerificationKey(std::string kid, Alg alg) : kid_(std::move(kid)), alg_(alg) {}
    static std::optional<VerificationKey> from_pkey(Alg alg, std::string kid, EVP_PKEY* pkey,
                                                    std::string* why);

    std::string kid_;
    Alg alg_;
    size_t signature_size_ = 0;
    std::unique_ptr<EVP_MAC_CTX, detail::OpensslFree> mac_;  // HS*: keyed; duplicated per verification
    detail::Secret secret_;                                  // HS*: what keyed mac_
    std::unique_ptr<EVP_PKEY, detail::OpensslFree> pkey_;    // RS256, ES256
    std::unique_ptr<EVP_MD, detail::OpensslFree> md_;        // RS256, ES256: fetched once
};

struct KeySet {
    std::vector<VerificationKey> keys;
    // JWKS entries left out on purpose, one sentence each ("key 2 (kid
    // \"enc-1\"): use is \"enc\""): encryption keys and key types or curves
    // this verifier does not implement, which real IdP key sets publish
    // next to their signing keys.
    std::vector<std::string> skipped;
};

// At most this many keys in a JWKS and bytes in its file.
inline constexpr size_t kMaxJwksKeys = 256;
inline constexpr size_t kMaxJwksBytes = 1 << 20;

// A provider's inline keys; the first bad key fails the set, its position
// (JwtKey::where) is left to the caller.
std::optional<KeySet> keys_from_policy(std::span<const policy::JwtKey> keys, std::string* why);

// An RFC 7517 JWK Set: {"keys": [...]}. Per entry: "kty" "oct" ("k"),
// "RSA" ("n", "e") or "EC" ("crv" "P-256", "x", "y"); optional "kid",
// "alg", "use", "key_ops". An entry is skipped (KeySet::skipped) when its
// "use" is not "sig", its "key_ops" lack "verify", or its kty, crv or alg is
// one this verifier does not implement. It is an error when it is malformed
// or its key material is bad, when it holds private key material, or when
// it is "oct" without "alg" (an HMAC secret must say which hash it is for).
// "alg" absent on RSA/EC means RS256/ES256, the only ones implemented for
// those key types. A set with no usable key is an error.
std::optional<KeySet> parse_jwks(std::string_view json, std::string* why);

// A JWKS file, re-read when it changes. The keys in use stay valid (shared)
// when a refresh replaces them.
class Jwks {
public:
    static std::optional<Jwks> load(std::string path, std::string* why);

    enum class Refresh {
        Unchanged,  // same inode, size, mtime and ctime as last time
        Reloaded,   // new keys in use
        Failed,     // the file changed but is unreadable or bad; the previous keys stay (logged)
    };
    // Called periodically by the daemon; one stat(2) when nothing changed.
    // A file that stays bad is reported (and logged) once, not per call.
    // Replace the file atomically (rename) for a reload to be seen reliably:
    // an in-place rewrite with the same size within the file system's
    // timestamp granularity is not noticed.
    Refresh refresh_if_changed();

    const std::shared_ptr<const KeySet>& keys() const { return keys_; }
    const std::string& path() const { return path_; }

private:
    struct Identity {
        dev_t dev = 0;
        ino_t ino = 0;
        off_t size = -1;
        int64_t mtime_sec = 0;
        int64_t mtime_nsec = 0;
        int64_t ctime_sec = 0;  // a chmod that makes an unreadable file readable
        int64_t ctime_nsec = 0;
        bool operator==(const Identity&) const = default;
    };
    static Identity identity(const struct stat& st);
    static bool read(const std::string& path, std::string* text, Identity* id, std::string* why);

    std::string path_;
    Identity seen_;
    std::shared_ptr<const KeySet> keys_;
};

}  // namespace l7fast::auth
