// No deprecated OpenSSL call may creep in: they are not even declared here.
#define OPENSSL_NO_DEPRECATED 1

#include "auth/JwtKeys.hpp"

#include <fcntl.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/decoder.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <openssl/params.h>
#include <openssl/rsa.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

#include "auth/Base64Url.hpp"
#include "auth/JsonReader.hpp"
#include "common/Log.hpp"
#include "config/Text.hpp"

namespace l7fast::auth {

namespace detail {
void OpensslFree::operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
void OpensslFree::operator()(EVP_MAC_CTX* p) const { EVP_MAC_CTX_free(p); }
void OpensslFree::operator()(EVP_MD* p) const { EVP_MD_free(p); }

Secret& Secret::operator=(Secret&& o) noexcept
{
    if (this != &o) {
        wipe();
        bytes_ = std::move(o.bytes_);
        o.wipe();
    }
    return *this;
}

void Secret::wipe() noexcept
{
    if (!bytes_.empty())
        OPENSSL_cleanse(bytes_.data(), bytes_.size());
    bytes_.clear();
}
}  // namespace detail

namespace {

constexpr int kRsaMinBits = 2048;  // RFC 7518 §3.3
constexpr int kRsaMaxBits = 8192;  // verification cost grows with the modulus
constexpr int kRsaMaxExponentBits = 64;

struct Free {
    void operator()(EVP_MAC* p) const { EVP_MAC_free(p); }
    void operator()(EVP_MD_CTX* p) const { EVP_MD_CTX_free(p); }
    void operator()(EVP_PKEY_CTX* p) const { EVP_PKEY_CTX_free(p); }
    void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
    void operator()(BIGNUM* p) const { BN_free(p); }
    void operator()(OSSL_PARAM_BLD* p) const { OSSL_PARAM_BLD_free(p); }
    void operator()(OSSL_PARAM* p) const { OSSL_PARAM_free(p); }
    void operator()(OSSL_DECODER_CTX* p) const { OSSL_DECODER_CTX_free(p); }
};
template <class T>
using Owned = std::unique_ptr<T, Free>;

// OpenSSL reports failures through a per-thread queue; nothing here reads
// it, and stale entries would confuse whoever does next (the TLS code).
struct ErrorQueueGuard {
    ~ErrorQueueGuard() { ERR_clear_error(); }
};

bool fail(std::string* why, std::string text)
{
    if (why)
        *why = std::move(text);
    return false;
}

template <class T>
std::optional<T> none(std::string* why, std::string text)
{
    fail(why, std::move(text));
    return std::nullopt;
}

bool is_hmac(Alg alg) { return alg == Alg::HS256 || alg == Alg::HS384 || alg == Alg::HS512; }

const char* digest_name(Alg alg)
{
    switch (alg) {
    case Alg::HS384: return "SHA384";
    case Alg::HS512: return "SHA512";
    default: return "SHA256";
    }
}

size_t hmac_size(Alg alg)
{
    switch (alg) {
    case Alg::HS384: return 48;
    case Alg::HS512: return 64;
    default: return 32;
    }
}

// JWS ES256 signatures are r||s, 32 bytes each (RFC 7518 §3.4); OpenSSL
// verifies DER: SEQUENCE { INTEGER r, INTEGER s }. Returns the DER length.
size_t ecdsa_der(const unsigned char* rs, unsigned char out[72])
{
    size_t n = 2;
    for (int half = 0; half < 2; ++half) {
        const unsigned char* v = rs + 32 * half;
        size_t skip = 0;
        while (skip < 31 && v[skip] == 0)
            ++skip;
        const size_t len = 32 - skip;
        const bool pad = v[skip] & 0x80;  // keep the INTEGER positive
        out[n++] = 0x02;
        out[n++] = static_cast<unsigned char>(len + pad);
        if (pad)
            out[n++] = 0x00;
        std::memcpy(out + n, v + skip, len);
        n += len;
    }
    out[0] = 0x30;
    out[1] = static_cast<unsigned char>(n - 2);  // at most 70: short form
    return n;
}

size_t count(std::string_view haystack, std::string_view needle)
{
    size_t n = 0;
    for (size_t pos = haystack.find(needle); pos != std::string_view::npos;
         pos = haystack.find(needle, pos + needle.size()))
        ++n;
    return n;
}

std::string quoted(std::string_view s) { return policy::text::quote(s); }

}  // namespace

std::optional<Alg> alg_from_name(std::string_view name)
{
    if (name == "HS256") return Alg::HS256;
    if (name == "HS384") return Alg::HS384;
    if (name == "HS512") return Alg::HS512;
    if (name == "RS256") return Alg::RS256;
    if (name == "ES256") return Alg::ES256;
    return std::nullopt;
}

std::string_view alg_name(Alg alg)
{
    switch (alg) {
    case Alg::HS256: return "HS256";
    case Alg::HS384: return "HS384";
    case Alg::HS512: return "HS512";
    case Alg::RS256: return "RS256";
    case Alg::ES256: return "ES256";
    }
    return "?";
}

std::optional<VerificationKey> VerificationKey::hmac(Alg alg, std::string kid, std::string_view secret,
                                                     std::string* why)
{
    ErrorQueueGuard guard;
    if (!is_hmac(alg))
        return none<VerificationKey>(why, std::string(alg_name(alg)) + " is not an HMAC algorithm");
    if (secret.size() < hmac_size(alg))
        return none<VerificationKey>(
            why, std::string(alg_name(alg)) + " secret has " + std::to_string(secret.size()) +
                     " bytes; RFC 7518 requires at least " + std::to_string(hmac_size(alg)));
    Owned<EVP_MAC> mac(EVP_MAC_fetch(nullptr, "HMAC", nullptr));
    if (!mac)
        return none<VerificationKey>(why, "OpenSSL has no HMAC");
    std::unique_ptr<EVP_MAC_CTX, detail::OpensslFree> ctx(EVP_MAC_CTX_new(mac.get()));
    std::string digest = digest_name(alg);
    const OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest.data(), 0),
        OSSL_PARAM_construct_end(),
    };
    if (!ctx || EVP_MAC_init(ctx.get(), reinterpret_cast<const unsigned char*>(secret.data()), secret.size(),
                             params) != 1)
        return none<VerificationKey>(why, "OpenSSL cannot key HMAC-" + digest);
    VerificationKey key(std::move(kid), alg);
    key.mac_ = std::move(ctx);
    key.secret_ = detail::Secret(secret);
    key.signature_size_ = hmac_size(alg);
    return key;
}

std::optional<VerificationKey> VerificationKey::from_pkey(Alg alg, std::string kid, EVP_PKEY* raw,
                                                          std::string* why)
{
    std::unique_ptr<EVP_PKEY, detail::OpensslFree> pkey(raw);
    if (alg == Alg::RS256) {
        if (!EVP_PKEY_is_a(pkey.get(), "RSA"))
            return none<VerificationKey>(why, "RS256 needs an RSA public key");
        const int bits = EVP_PKEY_get_bits(pkey.get());
        if (bits < kRsaMinBits || bits > kRsaMaxBits)
            return none<VerificationKey>(why, "RSA modulus has " + std::to_string(bits) + " bits; " +
                                                  std::to_string(kRsaMinBits) + " to " +
                                                  std::to_string(kRsaMaxBits) + " are accepted");
        BIGNUM* e_raw = nullptr;
        if (EVP_PKEY_get_bn_param(pkey.get(), OSSL_PKEY_PARAM_RSA_E, &e_raw) != 1)
            return none<VerificationKey>(why, "RSA key without a public exponent");
        Owned<BIGNUM> e(e_raw);
        if (!BN_is_odd(e.get()) || BN_is_one(e.get()) || BN_num_bits(e.get()) > kRsaMaxExponentBits)
            return none<VerificationKey>(why, "RSA public exponent must be odd, at least 3 and at most 64 bits");
    } else if (alg == Alg::ES256) {
        if (!EVP_PKEY_is_a(pkey.get(), "EC"))
            return none<VerificationKey>(why, "ES256 needs an EC public key");
        char group[64] = {};
        size_t len = 0;
        if (EVP_PKEY_get_group_name(pkey.get(), group, sizeof group, &len) != 1 ||
            (std::strcmp(group, "prime256v1") != 0 && std::strcmp(group, "P-256") != 0))
            return none<VerificationKey>(why, "ES256 needs a key on P-256, not " +
                                                  quoted(std::string_view(group, std::strlen(group))));
        Owned<EVP_PKEY_CTX> check(EVP_PKEY_CTX_new_from_pkey(nullptr, pkey.get(), nullptr));
        if (!check || EVP_PKEY_public_check(check.get()) != 1)
            return none<VerificationKey>(why, "EC public key is not a valid P-256 point");
    } else {
        return none<VerificationKey>(why, std::string(alg_name(alg)) + " does not take a public key");
    }
    std::unique_ptr<EVP_MD, detail::OpensslFree> md(EVP_MD_fetch(nullptr, "SHA256", nullptr));
    if (!md)
        return none<VerificationKey>(why, "OpenSSL has no SHA256");
    VerificationKey key(std::move(kid), alg);
    key.signature_size_ = alg == Alg::ES256 ? 64 : static_cast<size_t>(EVP_PKEY_get_size(pkey.get()));
    key.pkey_ = std::move(pkey);
    key.md_ = std::move(md);
    return key;
}

std::optional<VerificationKey> VerificationKey::from_pem(Alg alg, std::string kid, std::string_view pem,
                                                         std::string* why)
{
    ErrorQueueGuard guard;
    if (is_hmac(alg))
        return none<VerificationKey>(why, std::string(alg_name(alg)) + " takes a secret, not a PEM key");
    // One block, and a public one: a private key pasted into a policy is a
    // mistake to point out, and a certificate chain would be ambiguous.
    if (count(pem, "-----BEGIN ") != 1)
        return none<VerificationKey>(why, "PEM text must hold exactly one block");
    const bool spki = pem.find("-----BEGIN PUBLIC KEY-----") != std::string_view::npos;
    const bool pkcs1 = pem.find("-----BEGIN RSA PUBLIC KEY-----") != std::string_view::npos;
    if (!spki && !pkcs1)
        return none<VerificationKey>(why, "PEM block is not a PUBLIC KEY or RSA PUBLIC KEY");
    EVP_PKEY* raw = nullptr;
    Owned<OSSL_DECODER_CTX> dctx(
        OSSL_DECODER_CTX_new_for_pkey(&raw, "PEM", nullptr, nullptr, EVP_PKEY_PUBLIC_KEY, nullptr, nullptr));
    if (!dctx)
        return none<VerificationKey>(why, "OpenSSL cannot decode PEM");
    const auto* data = reinterpret_cast<const unsigned char*>(pem.data());
    size_t len = pem.size();
    if (OSSL_DECODER_from_data(dctx.get(), &data, &len) != 1 || raw == nullptr) {
        EVP_PKEY_free(raw);
        return none<VerificationKey>(why, "PEM public key does not decode");
    }
    return from_pkey(alg, std::move(kid), raw, why);
}

std::optional<VerificationKey> VerificationKey::rsa(std::string kid, std::string_view n, std::string_view e,
                                                    std::string* why)
{
    ErrorQueueGuard guard;
    if (n.empty() || e.empty())
        return none<VerificationKey>(why, "RSA key needs n and e");
    Owned<BIGNUM> bn_n(BN_bin2bn(reinterpret_cast<const unsigned char*>(n.data()), static_cast<int>(n.size()),
                                 nullptr));
    Owned<BIGNUM> bn_e(BN_bin2bn(reinterpret_cast<const unsigned char*>(e.data()), static_cast<int>(e.size()),
                                 nullptr));
    Owned<OSSL_PARAM_BLD> bld(OSSL_PARAM_BLD_new());
    if (!bn_n || !bn_e || !bld || OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_N, bn_n.get()) != 1 ||
        OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_E, bn_e.get()) != 1)
        return none<VerificationKey>(why, "OpenSSL cannot hold the RSA key");
    Owned<OSSL_PARAM> params(OSSL_PARAM_BLD_to_param(bld.get()));
    Owned<EVP_PKEY_CTX> ctx(EVP_PKEY_CTX_new_from_name(nullptr, "RSA", nullptr));
    EVP_PKEY* raw = nullptr;
    if (!params || !ctx || EVP_PKEY_fromdata_init(ctx.get()) != 1 ||
        EVP_PKEY_fromdata(ctx.get(), &raw, EVP_PKEY_PUBLIC_KEY, params.get()) != 1 || raw == nullptr)
        return none<VerificationKey>(why, "RSA key (n, e) is not valid");
    return from_pkey(Alg::RS256, std::move(kid), raw, why);
}

std::optional<VerificationKey> VerificationKey::ec_p256(std::string kid, std::string_view x, std::string_view y,
                                                        std::string* why)
{
    ErrorQueueGuard guard;
    // RFC 7518 §6.2.1.2: the coordinates are full-length octet strings.
    if (x.size() != 32 || y.size() != 32)
        return none<VerificationKey>(why, "P-256 coordinates must be 32 bytes each");
    std::array<unsigned char, 65> point;
    point[0] = 0x04;  // uncompressed (SEC 1 §2.3.3)
    std::memcpy(point.data() + 1, x.data(), 32);
    std::memcpy(point.data() + 33, y.data(), 32);
    char group[] = "prime256v1";
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME, group, 0),
        OSSL_PARAM_construct_octet_string(OSSL_PKEY_PARAM_PUB_KEY, point.data(), point.size()),
        OSSL_PARAM_construct_end(),
    };
    Owned<EVP_PKEY_CTX> ctx(EVP_PKEY_CTX_new_from_name(nullptr, "EC", nullptr));
    EVP_PKEY* raw = nullptr;
    if (!ctx || EVP_PKEY_fromdata_init(ctx.get()) != 1 ||
        EVP_PKEY_fromdata(ctx.get(), &raw, EVP_PKEY_PUBLIC_KEY, params) != 1 ||
        raw == nullptr)
        return none<VerificationKey>(why, "EC point (x, y) is not on P-256");
    return from_pkey(Alg::ES256, std::move(kid), raw, why);
}

std::optional<VerificationKey> VerificationKey::from_policy(const policy::JwtKey& key, std::string* why)
{
    const auto alg = alg_from_name(key.alg);
    if (!alg)
        return none<VerificationKey>(why, "alg " + quoted(key.alg) +
                                              " is not supported (HS256, HS384, HS512, RS256, ES256)");
    if (is_hmac(*alg)) {
        if (!key.pem.empty())
            return none<VerificationKey>(why, key.alg + " takes a secret, not a PEM key");
        return hmac(*alg, key.kid, key.secret, why);
    }
    if (!key.secret.empty())
        return none<VerificationKey>(why, key.alg + " takes a PEM public key, not a secret");
    return from_pem(*alg, key.kid, key.pem, why);
}

bool VerificationKey::verify(std::string_view signing_input, std::string_view signature) const
{
    if (signature.size() != signature_size_)
        return false;
    ErrorQueueGuard guard;
    const auto* tbs = reinterpret_cast<const unsigned char*>(signing_input.data());
    const auto* sig = reinterpret_cast<const unsigned char*>(signature.data());
    if (mac_) {
        std::unique_ptr<EVP_MAC_CTX, detail::OpensslFree> ctx(EVP_MAC_CTX_dup(mac_.get()));
        unsigned char out[EVP_MAX_MD_SIZE];
        size_t out_len = 0;
        if (!ctx || EVP_MAC_update(ctx.get(), tbs, signing_input.size()) != 1 ||
            EVP_MAC_final(ctx.get(), out, &out_len, sizeof out) != 1 || out_len != signature.size())
            return false;
        return CRYPTO_memcmp(out, sig, out_len) == 0;
    }
    unsigned char der[72];
    if (alg_ == Alg::ES256) {
        signature = std::string_view(reinterpret_cast<const char*>(der), ecdsa_der(sig, der));
        sig = der;
    }
    Owned<EVP_MD_CTX> ctx(EVP_MD_CTX_new());
    EVP_PKEY_CTX* pctx = nullptr;  // owned by ctx
    if (!ctx || EVP_DigestVerifyInit(ctx.get(), &pctx, md_.get(), nullptr, pkey_.get()) != 1)
        return false;
    if (alg_ == Alg::RS256 && EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PADDING) != 1)
        return false;
    return EVP_DigestVerify(ctx.get(), sig, signature.size(), tbs, signing_input.size()) == 1;
}

// ---- key sets ------------------------------------------------------------------

std::optional<KeySet> keys_from_policy(std::span<const policy::JwtKey> keys, std::string* why)
{
    KeySet set;
    set.keys.reserve(keys.size());
    for (const policy::JwtKey& k : keys) {
        std::string reason;
        auto key = VerificationKey::from_policy(k, &reason);
        if (!key)
            return none<KeySet>(why, "key" + (k.kid.empty() ? std::string() : " " + quoted(k.kid)) + " (" +
                                         quoted(k.alg) + "): " + reason);
        set.keys.push_back(std::move(*key));
    }
    return set;
}

namespace {

// A JWK member: absent, or a string (anything else is an error).
bool string_member(const json::Document& doc, const json::Node& obj, std::string_view name,
                   std::optional<std::string_view>* out, std::string* why)
{
    const json::Node* n = doc.find(obj, name);
    if (!n) {
        out->reset();
        return true;
    }
    if (n->type != json::Type::String)
        return fail(why, std::string(name) + " is not a string");
    *out = n->text;
    return true;
}

bool bytes_member(const json::Document& doc, const json::Node& obj, std::string_view name, std::string* out,
                  std::string* why)
{
    std::optional<std::string_view> text;
    if (!string_member(doc, obj, name, &text, why))
        return false;
    if (!text)
        return fail(why, std::string(name) + " is missing");
    out->clear();
    if (!base64url_decode(*text, out))
        return fail(why, std::string(name) + " is not base64url");
    return true;
}

enum class Entry { Use, Skip, Error };

Entry entry(Entry e, std::string* note, std::string text)
{
    *note = std::move(text);
    return e;
}

Entry jwk_entry(const json::Document& doc, const json::Node& jwk, KeySet* set, std::string* note)
{
    if (jwk.type != json::Type::Object)
        return entry(Entry::Error, note, "not an object");
    std::optional<std::string_view> kty, kid, alg_text, use, crv;
    if (!string_member(doc, jwk, "kty", &kty, note) || !string_member(doc, jwk, "kid", &kid, note) ||
        !string_member(doc, jwk, "alg", &alg_text, note) || !string_member(doc, jwk, "use", &use, note) ||
        !string_member(doc, jwk, "crv", &crv, note))
        return Entry::Error;
    if (!kty)
        return entry(Entry::Error, note, "kty is missing");
    for (const char* priv : {"d", "p", "q", "dp", "dq", "qi", "oth"})
        if (doc.find(jwk, priv) && *kty != "oct")
            return entry(Entry::Error, note, "holds private key material (" + std::string(priv) + ")");
    if (use && *use != "sig")
        return entry(Entry::Skip, note, "use is " + quoted(*use));
    if (const json::Node* ops = doc.find(jwk, "key_ops")) {
        if (ops->type != json::Type::Array)
            return entry(Entry::Error, note, "key_ops is not an array");
        bool verify = false;
        for (const json::Node& op : doc.children(*ops)) {
            if (op.type != json::Type::String)
                return entry(Entry::Error, note, "key_ops holds a non-string");
            verify = verify || op.text == "verify";
        }
        if (!verify)
            return entry(Entry::Skip, note, "key_ops lack \"verify\"");
    }
    // A plain enum and a flag: GCC 12 misreports an optional<enum> here as
    // maybe-uninitialized.
    Alg alg = Alg::HS256;
    const bool has_alg = alg_text.has_value();
    if (has_alg) {
        const auto named = alg_from_name(*alg_text);
        if (!named)
            return entry(Entry::Skip, note, "alg " + quoted(*alg_text) + " is not implemented");
        alg = *named;
    }
    std::string kid_s(kid.value_or(std::string_view()));
    std::string a, b;
    std::optional<VerificationKey> key;
    if (*kty == "oct") {
        if (!has_alg)
            return entry(Entry::Error, note, "an oct key needs alg (HS256, HS384 or HS512)");
        if (!is_hmac(alg))
            return entry(Entry::Error, note, "alg " + quoted(*alg_text) + " does not fit kty \"oct\"");
        if (!bytes_member(doc, jwk, "k", &a, note))
            return Entry::Error;
        key = VerificationKey::hmac(alg, std::move(kid_s), a, note);
        OPENSSL_cleanse(a.data(), a.size());
    } else if (*kty == "RSA") {
        if (has_alg && alg != Alg::RS256)
            return entry(Entry::Error, note, "alg " + quoted(*alg_text) + " does not fit kty \"RSA\"");
        if (!bytes_member(doc, jwk, "n", &a, note) || !bytes_member(doc, jwk, "e", &b, note))
            return Entry::Error;
        key = VerificationKey::rsa(std::move(kid_s), a, b, note);
    } else if (*kty == "EC") {
        if (!crv)
            return entry(Entry::Error, note, "crv is missing");
        if (*crv != "P-256")
            return entry(Entry::Skip, note, "curve " + quoted(*crv) + " is not implemented");
        if (has_alg && alg != Alg::ES256)
            return entry(Entry::Error, note, "alg " + quoted(*alg_text) + " does not fit crv \"P-256\"");
        if (!bytes_member(doc, jwk, "x", &a, note) || !bytes_member(doc, jwk, "y", &b, note))
            return Entry::Error;
        key = VerificationKey::ec_p256(std::move(kid_s), a, b, note);
    } else {
        return entry(Entry::Skip, note, "kty " + quoted(*kty) + " is not implemented");
    }
    if (!key)
        return Entry::Error;
    set->keys.push_back(std::move(*key));
    return Entry::Use;
}

}  // namespace

std::optional<KeySet> parse_jwks(std::string_view text, std::string* why)
{
    json::Document doc;
    json::Limits limits;
    limits.max_bytes = kMaxJwksBytes;
    limits.max_nodes = 1 << 16;
    if (!doc.parse(text, limits))
        return none<KeySet>(why, "not valid JSON: " + std::string(doc.error()) + " at byte " +
                                     std::to_string(doc.error_offset()));
    if (doc.root().type != json::Type::Object)
        return none<KeySet>(why, "not a JSON object");
    const json::Node* keys = doc.find(doc.root(), "keys");
    if (!keys || keys->type != json::Type::Array)
        return none<KeySet>(why, "no \"keys\" array");
    KeySet set;
    size_t index = 0;
    for (const json::Node& jwk : doc.children(*keys)) {
        if (index == kMaxJwksKeys)
            return none<KeySet>(why, "more than " + std::to_string(kMaxJwksKeys) + " keys");
        std::string note;
        const Entry e = jwk_entry(doc, jwk, &set, &note);
        std::string label = "key " + std::to_string(index);
        if (jwk.type == json::Type::Object)
            if (const json::Node* kid = doc.find(jwk, "kid"); kid && kid->type == json::Type::String)
                label += " (kid " + quoted(kid->text) + ")";
        if (e == Entry::Error)
            return none<KeySet>(why, label + ": " + note);
        if (e == Entry::Skip)
            set.skipped.push_back(label + ": " + note);
        ++index;
    }
    if (set.keys.empty())
        return none<KeySet>(why, "no usable signing key" +
                                     (set.skipped.empty() ? std::string()
                                                          : " (" + std::to_string(set.skipped.size()) +
                                                                " skipped: " + set.skipped.front() + ")"));
    return set;
}

// ---- JWKS file -----------------------------------------------------------------

Jwks::Identity Jwks::identity(const struct stat& st)
{
    return Identity{st.st_dev, st.st_ino, st.st_size, st.st_mtim.tv_sec, st.st_mtim.tv_nsec,
                    st.st_ctim.tv_sec, st.st_ctim.tv_nsec};
}

bool Jwks::read(const std::string& path, std::string* text, Identity* id, std::string* why)
{
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return fail(why, std::string("cannot open: ") + std::strerror(errno));
    struct Closer {
        int fd;
        ~Closer() { ::close(fd); }
    } closer{fd};
    struct stat st {};
    if (::fstat(fd, &st) != 0)
        return fail(why, std::string("cannot stat: ") + std::strerror(errno));
    *id = identity(st);
    if (!S_ISREG(st.st_mode))
        return fail(why, "not a regular file");
    if (static_cast<uint64_t>(st.st_size) > kMaxJwksBytes)
        return fail(why, "larger than " + std::to_string(kMaxJwksBytes) + " bytes");
    text->clear();
    char buf[16384];
    for (;;) {
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return fail(why, std::string("cannot read: ") + std::strerror(errno));
        }
        if (n == 0)
            break;
        text->append(buf, static_cast<size_t>(n));
        if (text->size() > kMaxJwksBytes)
            return fail(why, "larger than " + std::to_string(kMaxJwksBytes) + " bytes");
    }
    return true;
}

std::optional<Jwks> Jwks::load(std::string path, std::string* why)
{
    Jwks jwks;
    jwks.path_ = std::move(path);
    std::string text, reason;
    if (!read(jwks.path_, &text, &jwks.seen_, &reason))
        return none<Jwks>(why, "JWKS " + jwks.path_ + ": " + reason);
    auto set = parse_jwks(text, &reason);
    if (!set)
        return none<Jwks>(why, "JWKS " + jwks.path_ + ": " + reason);
    for (const std::string& s : set->skipped)
        log::info("JWKS ", jwks.path_, ": skipped ", s);
    jwks.keys_ = std::make_shared<const KeySet>(std::move(*set));
    return jwks;
}

Jwks::Refresh Jwks::refresh_if_changed()
{
    struct stat st {};
    Identity now;
    if (::stat(path_.c_str(), &st) == 0)
        now = identity(st);
    else
        now.size = -2;  // gone: reported once, until it reappears
    if (now == seen_)
        return Refresh::Unchanged;
    std::string text, reason;
    Identity read_id;
    if (!read(path_, &text, &read_id, &reason)) {
        seen_ = now;
        log::error("JWKS ", path_, ": ", reason, "; keeping the previous keys");
        return Refresh::Failed;
    }
    seen_ = read_id;
    auto set = parse_jwks(text, &reason);
    if (!set) {
        log::error("JWKS ", path_, ": ", reason, "; keeping the previous keys");
        return Refresh::Failed;
    }
    for (const std::string& s : set->skipped)
        log::info("JWKS ", path_, ": skipped ", s);
    log::notice("JWKS ", path_, ": reloaded, ", set->keys.size(), " keys");
    keys_ = std::make_shared<const KeySet>(std::move(*set));
    return Refresh::Reloaded;
}

}  // namespace l7fast::auth
