// The policy loader's reader of [[jwt_provider]] tables: issuer, audiences,
// algorithms, inline keys (checked as the verifier will use them), where the
// token is, forwarded claims.
#include <algorithm>

#include "auth/Base64Url.hpp"
#include "auth/JwtKeys.hpp"
#include "loader/LoaderChecks.hpp"
#include "loader/LoaderInternal.hpp"
#include "loader/LoaderLimits.hpp"
#include "config/Text.hpp"

namespace l7fast::policy::loader {

using text::lower;
using text::quote;
using text::closest;

namespace {

const std::vector<std::string>& jwt_algorithms()
{
    static const std::vector<std::string> kAlgs{"HS256", "HS384", "HS512", "RS256", "ES256"};
    return kAlgs;
}

std::optional<std::string> check_alg(const std::string& alg)
{
    const auto& algs = jwt_algorithms();
    if (std::find(algs.begin(), algs.end(), alg) != algs.end())
        return std::nullopt;
    if (lower(alg) == "none")
        return std::string("\"none\" is never accepted: unsigned tokens would pass");
    std::string message = quote(alg) + " is not a supported algorithm";
    if (auto guess = closest(alg, algs))
        message += " (did you mean \"" + *guess + "\"?)";
    return message + "; use " + joined(algs);
}

void read_jwt_keys(const TableReader& r, JwtProvider& p)
{
    const FileContext& cx = r.context();
    const std::vector<const toml::table*> items = bounded_tables(
        r, "keys", "an array of key tables", "omit \"keys\" when the keys come from jwks_file", kMaxJwtKeys);
    std::optional<size_t> without_kid;
    for (size_t i = 0; i < items.size(); i++) {
        if (!items[i])
            continue;
        TableReader kr(cx, *items[i], index_path(r, "keys", i), {"kid", "alg", "secret_base64url", "pem"});
        JwtKey key;
        key.where = kr.where();
        bool ok = true;
        if (auto kid = kr.string("kid")) {
            if (auto why = check_claim_text(*kid)) {
                kr.error("kid", *why);
                ok = false;
            } else if (auto it = std::find_if(p.keys.begin(), p.keys.end(),
                                              [&](const JwtKey& k) { return k.kid == *kid; });
                       it != p.keys.end()) {
                kr.error("kid", "kid " + quote(*kid) + " is already used by keys[" +
                                    std::to_string(it - p.keys.begin()) + "]; key ids must be unique");
                ok = false;
            }
            key.kid = *kid;
        } else if (kr.has("kid")) {
            ok = false;
        } else if (without_kid) {
            kr.error_here("keys[" + std::to_string(*without_kid) + "] already has no kid; give each key a \"kid\" "
                          "(a token without one is checked against the one key without one)");
            ok = false;
        } else {
            without_kid = i;
        }
        auto alg = kr.required_string("alg", "give the key's algorithm: " + joined(jwt_algorithms()));
        if (!alg)
            continue;
        if (auto why = check_alg(*alg)) {
            kr.error("alg", *why);
            continue;
        }
        key.alg = *alg;
        const bool hmac = alg->starts_with("HS");
        const char* material = hmac ? "secret_base64url" : "pem";
        const char* other = hmac ? "pem" : "secret_base64url";
        if (kr.has(other)) {
            kr.error(other, std::string("an ") + *alg + " key is given by \"" + material + "\"");
            continue;
        }
        auto text = kr.required_string(material, hmac ? "give the shared secret, base64url-encoded"
                                                       : "give the public key in PEM form");
        if (!text)
            continue;
        if (hmac) {
            std::string secret;
            if (!auth::base64url_decode(*text, &secret)) {
                kr.error(material, text->find('=') != std::string::npos
                                       ? "the secret is padded with '='; write it without padding"
                                   : text->find_first_of("+/") != std::string::npos
                                       ? "the secret is base64, not base64url: write '-' for '+' and '_' for '/'"
                                       : "the secret is not canonical base64url (RFC 4648 section 5: the URL-safe "
                                         "alphabet, no padding, unused bits zero)");
                continue;
            }
            if (secret.size() > kMaxSecretBytes) {
                kr.error(material, "the secret is " + std::to_string(secret.size()) + " bytes; at most " +
                                       std::to_string(kMaxSecretBytes));
                continue;
            }
            key.secret = std::move(secret);
        } else {
            key.pem = *text;
        }
        // the verifier's own rules (key sizes, curves, PEM forms), so that
        // what loads is what verifies
        std::string why;
        if (!auth::VerificationKey::from_policy(key, &why)) {
            kr.error(material, why);
            continue;
        }
        if (ok)
            p.keys.push_back(std::move(key));
    }
}

void read_jwt_from(const TableReader& r, JwtProvider& p)
{
    const toml::table* t = r.table("from");
    if (!t)
        return;
    TableReader fr(r.context(), *t, r.child("from"), {"header", "cookie", "prefix"});
    if (const char* extra = fr.second_of({"header", "cookie"})) {
        fr.error(extra, "give either \"header\" or \"cookie\", not both");
        return;
    }
    if (fr.has("cookie")) {
        if (fr.has("prefix"))
            fr.error("prefix", "only applies with \"header\": a cookie's value is the token");
        if (auto name = fr.string("cookie")) {
            if (check_field_name(*name))
                fr.error("cookie", quote(*name) + " is not a cookie name (RFC 6265: a token)");
            else {
                p.from = {RequestKey::Kind::Cookie, *name};
                p.from_prefix.clear();
            }
        }
        return;
    }
    if (!fr.has("header")) {
        fr.error_here("needs \"header\" (e.g. { header = \"authorization\", prefix = \"Bearer \" }) or \"cookie\"");
        return;
    }
    auto name = fr.string("header");
    if (!name)
        return;
    if (auto why = check_field_name(*name)) {
        fr.error("header", *why);
        return;
    }
    p.from = {RequestKey::Kind::Header, lower(*name)};
    p.from_prefix = lower(*name) == "authorization" ? "Bearer " : "";
    if (auto prefix = fr.string("prefix")) {
        if (prefix->size() > 64)
            fr.error("prefix", "the prefix is " + std::to_string(prefix->size()) + " bytes long; at most 64");
        else if (check_header_value(*prefix + "x"))
            fr.error("prefix", *check_header_value(*prefix));
        else
            p.from_prefix = *prefix;
    }
}

void read_forward_claims(const TableReader& r, JwtProvider& p)
{
    const std::vector<const toml::table*> items = bounded_tables(
        r, "forward_claims", "an array of { claim, header } tables", "omit \"forward_claims\"", kMaxForwardClaims);
    for (size_t i = 0; i < items.size(); i++) {
        if (!items[i])
            continue;
        TableReader fr(r.context(), *items[i], index_path(r, "forward_claims", i), {"claim", "header"});
        auto claim = fr.required_string("claim", "give the claim's name, e.g. \"sub\"");
        auto header = fr.required_string("header", "give the request header it is sent in, e.g. \"x-user\"");
        bool ok = claim && header;
        if (claim) {
            if (auto why = check_claim_text(*claim)) {
                fr.error("claim", *why);
                ok = false;
            }
        }
        if (header) {
            const std::string name = lower(*header);
            if (auto why = check_field_name(*header)) {
                fr.error("header", *why);
                ok = false;
            } else if (is_reserved_field(name)) {
                fr.error("header", reserved_field_message(name));
                ok = false;
            } else if (auto it = std::find_if(p.forward_claims.begin(), p.forward_claims.end(),
                                               [&](const JwtProvider::ForwardClaim& f) { return f.header == name; });
                       it != p.forward_claims.end()) {
                fr.error("header", "header " + quote(name) + " already carries claim " + quote(it->claim));
                ok = false;
            } else if (p.from.kind == RequestKey::Kind::Header && p.from.name == name) {
                fr.error("header", "header " + quote(name) + " carries the token itself");
                ok = false;
            }
        }
        if (ok)
            p.forward_claims.push_back({*claim, lower(*header)});
    }
}

}  // namespace

void read_jwt_provider(const FileContext& cx, const toml::table& t, size_t index, Drafts& out)
{
    TableReader r(cx, t, entity_path("jwt_provider", index, t),
                  {"name", "issuer", "audiences", "algorithms", "keys", "jwks_file", "from", "clock_skew_s",
                   "require_exp", "max_token_bytes", "forward_claims", "verify_in_kernel"});
    JwtProviderDraft d;
    read_name(r, "jwt_provider", d);
    JwtProvider& p = d.value;
    p.name = d.name.value_or("");
    p.where = r.where();
    if (auto issuer = r.string("issuer")) {
        if (auto why = check_claim_text(*issuer))
            r.error("issuer", *why + "; omit \"issuer\" to accept any");
        else
            p.issuer = *issuer;
    }
    if (auto audiences = r.string_list("audiences", "omit \"audiences\" to accept any audience")) {
        for (const auto& item : *audiences) {
            if (auto why = check_claim_text(item.value))
                cx.error(item.where.at, item.where.key, *why);
            else if (std::find(p.audiences.begin(), p.audiences.end(), item.value) == p.audiences.end())
                p.audiences.push_back(item.value);
        }
    }
    bool algorithms_ok = true;
    if (auto algs = r.string_list("algorithms", "omit \"algorithms\" to accept those of the keys")) {
        for (const auto& item : *algs) {
            if (auto why = check_alg(item.value)) {
                cx.error(item.where.at, item.where.key, *why);
                algorithms_ok = false;
            } else if (std::find(p.algorithms.begin(), p.algorithms.end(), item.value) == p.algorithms.end()) {
                p.algorithms.push_back(item.value);
            }
        }
    } else if (r.has("algorithms")) {
        algorithms_ok = false;
    }
    if (auto file = r.string("jwks_file")) {
        if (auto why = check_absolute_path(*file))
            r.error("jwks_file", *why);
        else
            p.jwks_file = *file;
    }
    read_jwt_from(r, p);
    read_jwt_keys(r, p);
    if (!r.has("keys") && !r.has("jwks_file"))
        r.missing("keys", "a provider needs inline \"keys\" or a \"jwks_file\"");
    if (!r.has("algorithms")) {
        for (const JwtKey& k : p.keys)
            if (std::find(p.algorithms.begin(), p.algorithms.end(), k.alg) == p.algorithms.end())
                p.algorithms.push_back(k.alg);
        if (r.has("jwks_file"))
            r.missing("algorithms", "keys from a jwks_file do not say which algorithms to trust; give them, e.g. "
                                    "[\"RS256\"]");
    } else if (algorithms_ok) {
        const toml::array* arr = r.node("keys") ? r.node("keys")->as_array() : nullptr;
        for (size_t i = 0; arr && i < arr->size(); i++) {
            const toml::table* e = arr->get(i)->as_table();
            const toml::node* alg = e ? e->get("alg") : nullptr;
            if (alg && alg->is_string() && !check_alg(alg->as_string()->get()) &&
                std::find(p.algorithms.begin(), p.algorithms.end(), alg->as_string()->get()) == p.algorithms.end())
                cx.error(cx.at(*alg), index_path(r, "keys", i) + ".alg",
                         quote(alg->as_string()->get()) + " is not among this provider's algorithms (" +
                             joined(p.algorithms) + "); the key could never verify a token");
        }
    }
    if (auto v = r.integer("clock_skew_s", 0, kMaxClockSkewS, "seconds of leeway for exp and nbf"))
        p.clock_skew = std::chrono::seconds(*v);
    if (auto v = r.boolean("require_exp"))
        p.require_exp = *v;
    if (auto v = r.boolean("verify_in_kernel"))
        p.verify_in_kernel = *v;
    if (auto v = r.integer("max_token_bytes", 64, 65536, "longer tokens are refused"))
        p.max_token_bytes = static_cast<uint32_t>(*v);
    read_forward_claims(r, p);
    out.jwt_providers.push_back(std::move(d));
}

}  // namespace l7fast::policy::loader
