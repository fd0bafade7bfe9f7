#include "auth/Jwt.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <system_error>

#include "auth/Base64Url.hpp"
#include "auth/JsonReader.hpp"
#include "config/Text.hpp"

namespace l7fast::auth {

namespace {

using Clock = std::chrono::system_clock;
using policy::text::iequals;

constexpr uint32_t kMaxTokenBytesCeiling = 65536;
constexpr std::chrono::seconds kMaxClockSkew{86400};
// NumericDate ceiling: 2^33 s (year 2242). Nanosecond time points reach
// 2262, so exp + clock_skew cannot overflow.
constexpr int64_t kMaxNumericDate = int64_t{1} << 33;

Result failure(Status status, Reason reason)
{
    Result r;
    r.status = status;
    r.reason = reason;
    return r;
}

Result invalid(Reason reason) { return failure(Status::Invalid, reason); }

// Per-thread scratch: decoded parts and their parsed documents, reused so
// that verification does not allocate once the buffers have grown.
struct Scratch {
    std::string header;
    std::string payload;
    std::string signature;
    json::Document header_doc;
    json::Document payload_doc;
};

Scratch& scratch()
{
    thread_local Scratch s;
    return s;
}

bool acceptable_typ(std::string_view typ)
{
    // RFC 7515 §4.1.9: "application/" may be left out, media types compare
    // case-insensitively. Other explicit types (RFC 8725 §3.11) are tokens
    // of another kind (logout, DPoP proof, security event): never a
    // bearer token.
    constexpr std::string_view kApplication = "application/";
    if (typ.size() > kApplication.size() && iequals(typ.substr(0, kApplication.size()), kApplication))
        typ.remove_prefix(kApplication.size());
    return iequals(typ, "JWT") || iequals(typ, "at+jwt");
}

// RFC 7519 §2 NumericDate as a time point, clamped to [0, 2^33) seconds.
Clock::time_point numeric_date(std::string_view text)
{
    using std::chrono::nanoseconds;
    using std::chrono::seconds;
    if (text.empty() || text.front() == '-')
        return Clock::time_point{};
    bool integer = text.size() <= 12;
    for (char c : text)
        integer = integer && c >= '0' && c <= '9';
    if (integer) {
        int64_t v = 0;
        std::from_chars(text.data(), text.data() + text.size(), v);
        return Clock::time_point{std::chrono::duration_cast<Clock::duration>(seconds{std::min(v, kMaxNumericDate)})};
    }
    double v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec == std::errc::result_out_of_range) {
        // Underflow (a tiny fraction) or overflow: which one the exponent says.
        const size_t e = text.find_first_of("eE");
        const bool tiny = e != std::string_view::npos && e + 1 < text.size() && text[e + 1] == '-';
        v = tiny ? 0.0 : static_cast<double>(kMaxNumericDate);
    } else if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v)) {
        return Clock::time_point{};  // cannot happen for text the JSON reader accepted
    }
    v = std::clamp(v, 0.0, static_cast<double>(kMaxNumericDate));
    const auto ns = nanoseconds{static_cast<int64_t>(std::llround(v * 1e9))};
    return Clock::time_point{std::chrono::duration_cast<Clock::duration>(ns)};
}

void build_claims(const json::Document& doc, policy::Claims* claims)
{
    for (const json::Node& m : doc.children(doc.root())) {
        std::vector<std::string> values;
        switch (m.type) {
        case json::Type::String:
        case json::Type::Number:
            values.emplace_back(m.text);
            break;
        case json::Type::True:
            values.emplace_back("true");
            break;
        case json::Type::False:
            values.emplace_back("false");
            break;
        case json::Type::Array: {
            bool strings = true;
            for (const json::Node& e : doc.children(m))
                strings = strings && e.type == json::Type::String;
            if (strings)
                for (const json::Node& e : doc.children(m))
                    values.emplace_back(e.text);
            break;
        }
        default:
            break;  // objects, null: present without values
        }
        claims->members.emplace(std::string(m.key), std::move(values));
    }
}

std::string_view skip_spaces(std::string_view v)
{
    while (!v.empty() && (v.front() == ' ' || v.front() == '\t'))
        v.remove_prefix(1);
    return v;
}

std::string_view trim(std::string_view v)
{
    v = skip_spaces(v);
    while (!v.empty() && (v.back() == ' ' || v.back() == '\t'))
        v.remove_suffix(1);
    return v;
}

}  // namespace

std::string_view reason_name(Reason reason)
{
    switch (reason) {
    case Reason::Ok: return "ok";
    case Reason::Missing: return "missing";
    case Reason::BadScheme: return "bad_scheme";
    case Reason::TooLarge: return "too_large";
    case Reason::Malformed: return "malformed";
    case Reason::AlgNotAllowed: return "alg_not_allowed";
    case Reason::UnknownKid: return "unknown_kid";
    case Reason::AlgMismatch: return "alg_mismatch";
    case Reason::BadSignature: return "bad_signature";
    case Reason::BadClaim: return "bad_claim";
    case Reason::MissingExp: return "missing_exp";
    case Reason::Expired: return "expired";
    case Reason::NotYetValid: return "not_yet_valid";
    case Reason::BadIssuer: return "bad_issuer";
    case Reason::BadAudience: return "bad_audience";
    }
    return "unknown";
}

std::string_view rfc6750_error(Reason reason)
{
    switch (reason) {
    case Reason::Ok:
    case Reason::Missing:
    case Reason::BadScheme:
        return {};
    default:
        return "invalid_token";
    }
}

std::string_view rfc6750_description(Reason reason)
{
    switch (reason) {
    case Reason::Ok:
    case Reason::Missing:
    case Reason::BadScheme: return {};
    case Reason::TooLarge: return "The access token is too large";
    case Reason::Malformed: return "The access token is malformed";
    case Reason::AlgNotAllowed: return "The access token's algorithm is not accepted";
    case Reason::UnknownKid: return "The access token's key is unknown";
    case Reason::AlgMismatch: return "The access token's key does not fit its algorithm";
    case Reason::BadSignature: return "The access token's signature is invalid";
    case Reason::BadClaim: return "The access token has an invalid claim";
    case Reason::MissingExp: return "The access token has no expiry";
    case Reason::Expired: return "The access token expired";
    case Reason::NotYetValid: return "The access token is not yet valid";
    case Reason::BadIssuer: return "The access token's issuer is not accepted";
    case Reason::BadAudience: return "The access token's audience is not accepted";
    }
    return "The access token is invalid";
}

std::string www_authenticate(std::string_view realm, Reason reason)
{
    std::string out = "Bearer realm=\"";
    for (char c : realm) {
        const auto u = static_cast<unsigned char>(c);
        if (c == '"' || c == '\\')
            out.push_back('\\');
        out.push_back(u < 0x20 || u >= 0x7f ? '?' : c);
    }
    out.push_back('"');
    if (const std::string_view error = rfc6750_error(reason); !error.empty()) {
        out.append(", error=\"").append(error).append("\", error_description=\"");
        out.append(rfc6750_description(reason)).push_back('"');
    }
    return out;
}

Extraction extract_token(const policy::JwtProvider& provider, const policy::RequestView& request)
{
    Extraction x;
    std::string_view value;
    if (provider.from.kind == policy::RequestKey::Kind::Cookie) {
        const auto cookie = policy::request_cookie(request.headers, provider.from.name);
        if (!cookie)
            return x;
        value = *cookie;
    } else {
        const policy::HeaderField* field = nullptr;
        for (const policy::HeaderField& f : request.headers)
            if (iequals(f.name, provider.from.name)) {
                field = &f;
                break;
            }
        if (!field)
            return x;
        value = field->value;
        const std::string_view prefix = provider.from_prefix;
        if (!prefix.empty()) {
            if (value.size() < prefix.size() || !iequals(value.substr(0, prefix.size()), prefix)) {
                // "Bearer" alone: the right scheme without credentials.
                const std::string_view scheme = trim(prefix);
                const bool bare = !scheme.empty() && iequals(trim(value), scheme);
                x.status = bare ? Status::Invalid : Status::Missing;
                x.reason = bare ? Reason::Malformed : Reason::BadScheme;
                return x;
            }
            value.remove_prefix(prefix.size());
            if (prefix.back() == ' ')
                value = skip_spaces(value);
        }
    }
    x.status = Status::Invalid;
    if (value.empty()) {
        x.reason = Reason::Malformed;
    } else if (value.size() > provider.max_token_bytes) {
        x.reason = Reason::TooLarge;
    } else {
        x.status = Status::Ok;
        x.reason = Reason::Ok;
        x.token = value;
    }
    return x;
}

std::optional<Verifier> Verifier::create(const policy::JwtProvider& provider, std::string* why)
{
    const auto fail = [why](std::string text) -> std::optional<Verifier> {
        if (why)
            *why = std::move(text);
        return std::nullopt;
    };
    Verifier v;
    if (provider.algorithms.empty())
        return fail("algorithms is empty: no token could be accepted");
    for (const std::string& name : provider.algorithms) {
        const auto alg = alg_from_name(name);
        if (!alg)
            return fail("algorithm " + policy::text::quote(name) +
                        " is not supported (HS256, HS384, HS512, RS256, ES256)");
        v.allowed_ |= 1u << static_cast<unsigned>(*alg);
    }
    if (provider.from.kind != policy::RequestKey::Kind::Header &&
        provider.from.kind != policy::RequestKey::Kind::Cookie)
        return fail("a token is taken from a header or a cookie");
    if (provider.from.name.empty())
        return fail("the header or cookie name is empty");
    if (provider.from.kind == policy::RequestKey::Kind::Cookie && !provider.from_prefix.empty())
        return fail("a prefix applies to a header, not to a cookie");
    if (provider.max_token_bytes == 0 || provider.max_token_bytes > kMaxTokenBytesCeiling)
        return fail("max_token_bytes must be 1 to " + std::to_string(kMaxTokenBytesCeiling));
    if (provider.clock_skew < std::chrono::seconds{0} || provider.clock_skew > kMaxClockSkew)
        return fail("clock_skew must be 0 to " + std::to_string(kMaxClockSkew.count()) + " seconds");
    std::string reason;
    auto keys = keys_from_policy(provider.keys, &reason);
    if (!keys)
        return fail(reason);
    v.inline_keys_ = std::move(*keys);
    if (!provider.jwks_file.empty()) {
        v.jwks_ = Jwks::load(provider.jwks_file, &reason);
        if (!v.jwks_)
            return fail(reason);
    }
    if (v.inline_keys_.keys.empty() && !v.jwks_)
        return fail("no keys: give keys or a jwks_file");
    v.provider_ = provider;
    v.provider_.keys.clear();  // secrets live in the keys, once
    return v;
}

std::vector<const VerificationKey*> Verifier::keys() const
{
    std::vector<const VerificationKey*> out;
    for (const auto& k : inline_keys_.keys)
        out.push_back(&k);
    if (jwks_ && jwks_->keys())
        for (const auto& k : jwks_->keys()->keys)
            out.push_back(&k);
    return out;
}

Jwks::Refresh Verifier::refresh_if_changed()
{
    return jwks_ ? jwks_->refresh_if_changed() : Jwks::Refresh::Unchanged;
}

Reason Verifier::check_header(std::string_view header_json, std::optional<Alg>* alg, std::string_view* kid) const
{
    // 2. the header's form
    Scratch& s = scratch();
    json::Limits limits;
    limits.max_bytes = kMaxTokenBytesCeiling;
    if (!s.header_doc.parse(header_json, limits) || s.header_doc.root().type != json::Type::Object)
        return Reason::Malformed;
    const json::Document& header = s.header_doc;
    const json::Node* alg_node = header.find(header.root(), "alg");
    const json::Node* kid_node = header.find(header.root(), "kid");
    const json::Node* typ_node = header.find(header.root(), "typ");
    if (!alg_node || alg_node->type != json::Type::String)
        return Reason::Malformed;
    if (kid_node && kid_node->type != json::Type::String)
        return Reason::Malformed;
    if (typ_node && (typ_node->type != json::Type::String || !acceptable_typ(typ_node->text)))
        return Reason::Malformed;
    if (header.find(header.root(), "crit"))
        return Reason::Malformed;

    // 3. algorithm
    *alg = alg_from_name(alg_node->text);
    if (!*alg || !allows(**alg))
        return Reason::AlgNotAllowed;
    *kid = kid_node ? kid_node->text : std::string_view();
    return Reason::Ok;
}

Result Verifier::verify(std::string_view token, Clock::time_point now) const
{
    if (token.size() > provider_.max_token_bytes)
        return invalid(Reason::TooLarge);

    // 2. form
    const size_t dot1 = token.find('.');
    const size_t dot2 = dot1 == std::string_view::npos ? dot1 : token.find('.', dot1 + 1);
    if (dot2 == std::string_view::npos || token.find('.', dot2 + 1) != std::string_view::npos)
        return invalid(Reason::Malformed);
    const std::string_view header_b64 = token.substr(0, dot1);
    const std::string_view payload_b64 = token.substr(dot1 + 1, dot2 - dot1 - 1);
    const std::string_view signature_b64 = token.substr(dot2 + 1);
    const std::string_view signing_input = token.substr(0, dot2);

    Scratch& s = scratch();
    s.header.clear();
    if (!base64url_decode(header_b64, &s.header))
        return invalid(Reason::Malformed);
    std::optional<Alg> alg;
    std::string_view kid;
    if (const Reason why = check_header(s.header, &alg, &kid); why != Reason::Ok)
        return invalid(why);
    json::Limits limits;
    limits.max_bytes = kMaxTokenBytesCeiling;

    // 4, 5. key and signature; every part's base64url is checked before
    // any public-key operation is spent on the token
    s.signature.clear();
    s.payload.clear();
    if (!base64url_decode(signature_b64, &s.signature) || !base64url_decode(payload_b64, &s.payload))
        return invalid(Reason::Malformed);
    bool kid_known = false;
    bool alg_known = false;
    bool verified = false;
    const auto try_keys = [&](const KeySet& set) {
        for (const VerificationKey& key : set.keys) {
            if (verified || key.kid() != kid)
                continue;
            kid_known = true;
            if (key.alg() != *alg)
                continue;
            alg_known = true;
            verified = key.verify(signing_input, s.signature);
        }
    };
    try_keys(inline_keys_);
    if (jwks_ && jwks_->keys())
        try_keys(*jwks_->keys());
    if (!kid_known)
        return invalid(Reason::UnknownKid);
    if (!alg_known)
        return invalid(Reason::AlgMismatch);
    if (!verified)
        return invalid(Reason::BadSignature);

    // 6. payload
    if (!s.payload_doc.parse(s.payload, limits) ||
        s.payload_doc.root().type != json::Type::Object)
        return invalid(Reason::Malformed);
    const json::Document& payload = s.payload_doc;

    // 7. claims
    const json::Node* exp = payload.find(payload.root(), "exp");
    const json::Node* nbf = payload.find(payload.root(), "nbf");
    if ((exp && exp->type != json::Type::Number) || (nbf && nbf->type != json::Type::Number))
        return invalid(Reason::BadClaim);
    if (!exp && provider_.require_exp)
        return invalid(Reason::MissingExp);
    Result r;
    if (exp) {
        r.expires = numeric_date(exp->text);
        r.valid_until = r.expires + provider_.clock_skew;
        if (now >= r.valid_until)
            return invalid(Reason::Expired);
    }
    if (nbf) {
        r.valid_from = numeric_date(nbf->text) - provider_.clock_skew;
        if (now < r.valid_from)
            return invalid(Reason::NotYetValid);
    }
    if (provider_.issuer) {
        const json::Node* iss = payload.find(payload.root(), "iss");
        if (!iss || iss->type != json::Type::String || iss->text != *provider_.issuer)
            return invalid(Reason::BadIssuer);
    }
    if (!provider_.audiences.empty()) {
        const json::Node* aud = payload.find(payload.root(), "aud");
        const auto wanted = [this](std::string_view a) {
            for (const std::string& want : provider_.audiences)
                if (a == want)
                    return true;
            return false;
        };
        bool match = false;
        if (aud && aud->type == json::Type::String) {
            match = wanted(aud->text);
        } else if (aud && aud->type == json::Type::Array) {
            for (const json::Node& e : payload.children(*aud)) {
                if (e.type != json::Type::String)
                    return invalid(Reason::BadAudience);
                match = match || wanted(e.text);
            }
        }
        if (!match)
            return invalid(Reason::BadAudience);
    }

    r.status = Status::Ok;
    r.reason = Reason::Ok;
    build_claims(payload, &r.claims);
    r.token.assign(token);
    return r;
}

Result authenticate(const Verifier& verifier, const policy::RequestView& request, Clock::time_point now)
{
    const Extraction x = extract_token(verifier.provider(), request);
    if (x.status != Status::Ok)
        return failure(x.status, x.reason);
    return verifier.verify(x.token, now);
}

}  // namespace l7fast::auth
