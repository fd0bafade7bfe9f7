// What the policy loader's section readers share (LoaderInternal.hpp): an
// entity's name and the key path errors about it use, and request keys (a
// cluster's hash_key, a rate limit's key).
#include "loader/LoaderChecks.hpp"
#include "loader/LoaderInternal.hpp"
#include "config/Text.hpp"

namespace l7fast::policy::loader {

using text::lower;
using text::quote;

std::string entity_path(std::string_view kind, size_t index, const toml::table& t)
{
    if (auto* n = t.get("name"); n && n->is_string() && !check_name(n->as_string()->get()))
        return std::string(kind) + " \"" + n->as_string()->get() + "\"";
    return std::string(kind) + "[" + std::to_string(index) + "]";
}

void read_name(const TableReader& r, std::string_view what, NamedDraft& d)
{
    d.where = {r.context().doc().index, r.where(), r.path()};
    d.name_at = r.located("name");
    auto name = r.required_string("name", "every " + std::string(what) + " needs a unique name");
    if (!name)
        return;
    if (auto why = check_name(*name)) {
        r.error("name", *why);
        return;
    }
    d.name = std::move(*name);
}

// ---- request keys ---------------------------------------------------------------------

std::optional<RequestKey> read_request_key(const TableReader& parent, std::string_view k, bool claims_allowed,
                                           std::optional<Located>* claim_at)
{
    const toml::table* t = parent.table(k);
    if (!t)
        return std::nullopt;
    TableReader r(parent.context(), *t, parent.child(k), {"header", "cookie", "source_ip", "claim"});
    const std::string kinds = claims_allowed ? "\"header\", \"cookie\", \"source_ip = true\"" : "\"header\", \"cookie\"";
    const std::string last = claims_allowed ? "\"claim\"" : "\"source_ip = true\"";
    if (const char* extra = r.second_of({"header", "cookie", "source_ip", "claim"})) {
        r.error(extra, "give only one of " + kinds + " and " + last);
        return std::nullopt;
    }
    RequestKey key;
    if (r.has("header") || r.has("cookie")) {
        const char* kind = r.has("header") ? "header" : "cookie";
        auto name = r.string(kind);
        if (!name)
            return std::nullopt;
        if (auto why = check_field_name(*name)) {
            r.error(kind, r.has("header") ? *why
                                          : quote(*name) + " is not a cookie name (RFC 6265: a token)");
            return std::nullopt;
        }
        key.kind = r.has("header") ? RequestKey::Kind::Header : RequestKey::Kind::Cookie;
        // header names are case-insensitive, cookie names are not
        key.name = r.has("header") ? lower(*name) : *name;
        return key;
    }
    if (r.has("source_ip")) {
        auto v = r.boolean("source_ip");
        if (!v)
            return std::nullopt;
        if (!*v) {
            r.error("source_ip", "source_ip = false selects nothing; write source_ip = true or another key");
            return std::nullopt;
        }
        key.kind = RequestKey::Kind::SourceIp;
        return key;
    }
    if (r.has("claim")) {
        if (!claims_allowed) {
            r.error("claim", "a claim cannot choose the endpoint (only rate limits are keyed by claims); use a "
                             "header, a cookie or source_ip");
            return std::nullopt;
        }
        auto name = r.string("claim");
        if (!name)
            return std::nullopt;
        if (auto why = check_claim_text(*name)) {
            r.error("claim", *why);
            return std::nullopt;
        }
        if (claim_at)
            *claim_at = r.located("claim");
        key.kind = RequestKey::Kind::Claim;
        key.name = *name;
        return key;
    }
    r.error_here("needs one of " + kinds + " or " + last);
    return std::nullopt;
}

}  // namespace l7fast::policy::loader
