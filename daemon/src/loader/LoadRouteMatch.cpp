// The policy loader's reader of request conditions: a route's [route.match]
// and the conditions of its RBAC rules.
#include <algorithm>
#include <map>

#include "loader/LoaderChecks.hpp"
#include "loader/LoaderInternal.hpp"
#include "loader/LoaderLimits.hpp"
#include "semantics/Router.hpp"
#include "config/Text.hpp"

namespace l7fast::policy::loader {

using text::lower;
using text::quote;

namespace {

void read_header_conditions(const TableReader& r, RouteMatch& m)
{
    const FileContext& cx = r.context();
    const std::vector<const toml::table*> headers =
        bounded_tables(r, "headers", "an array of header tables", "omit \"headers\" to match any headers",
                       kMaxConditions);
    std::map<std::string, size_t> seen;
    for (size_t i = 0; i < headers.size(); i++) {
        if (!headers[i])
            continue;
        TableReader hr(cx, *headers[i], index_path(r, "headers", i), {"name", "exact", "prefix", "present", "absent"});
        HeaderCondition c;
        bool ok = true;
        if (auto name = hr.required_string("name", "give the header's field name, e.g. \"x-canary\"")) {
            if (auto why = check_field_name(*name)) {
                hr.error("name", *why);
                ok = false;
            } else if (auto [it, fresh] = seen.emplace(lower(*name), i); !fresh) {
                hr.error("name", "header " + quote(lower(*name)) + " already has a condition in headers[" +
                                     std::to_string(it->second) + "]; a route takes one condition per header");
                ok = false;
            } else {
                c.name = lower(*name);
            }
        } else {
            ok = false;
        }
        if (const char* extra = hr.second_of({"exact", "prefix", "present", "absent"})) {
            hr.error(extra, "give only one of \"exact\", \"prefix\", \"present\" and \"absent\"");
            continue;
        }
        if (hr.has("present") || hr.has("absent")) {
            const char* key = hr.has("present") ? "present" : "absent";
            auto flag = hr.boolean(key);
            if (!flag)
                continue;
            if (!*flag) {
                hr.error(key, hr.has("present")
                                  ? "present = false is not a condition; write absent = true to match requests "
                                    "without the header"
                                  : "absent = false is not a condition; write present = true to match requests "
                                    "with the header");
                continue;
            }
            c.kind = hr.has("present") ? HeaderCondition::Kind::Present : HeaderCondition::Kind::Absent;
        } else if (hr.has("exact")) {
            auto value = hr.string("exact");
            if (!value)
                continue;
            if (value->size() > kMaxFieldValueBytes) {
                hr.error("exact", "the value is " + std::to_string(value->size()) + " bytes long; at most " +
                                      std::to_string(kMaxFieldValueBytes));
                continue;
            }
            if (auto why = check_header_value(*value)) {
                hr.error("exact", *why);
                continue;
            }
            c.kind = HeaderCondition::Kind::Exact;
            c.value = std::move(*value);
        } else if (hr.has("prefix")) {
            auto value = hr.string("prefix");
            if (!value)
                continue;
            if (value->empty()) {
                hr.error("prefix", "an empty prefix matches every value; write present = true");
                continue;
            }
            if (value->size() > kMaxFieldValueBytes) {
                hr.error("prefix", "the prefix is " + std::to_string(value->size()) + " bytes long; at most " +
                                       std::to_string(kMaxFieldValueBytes));
                continue;
            }
            // a prefix may end in whitespace ("Bearer "): only its start must
            // be possible in a trimmed value
            if (value->front() == ' ' || value->front() == '\t') {
                hr.error("prefix", quote(*value) + " starts with whitespace, which is removed from requests before "
                                                   "comparing, so it could never match");
                continue;
            }
            if (auto why = check_header_value(*value + "x")) {
                hr.error("prefix", *check_header_value(*value));
                continue;
            }
            c.kind = HeaderCondition::Kind::Prefix;
            c.value = std::move(*value);
        } else {
            hr.error_here("needs one of \"exact\" (a value), \"prefix\" (a value), \"present = true\" or "
                          "\"absent = true\"");
            continue;
        }
        if (ok)
            m.headers.push_back(std::move(c));
    }
}

void read_query_conditions(const TableReader& r, RouteMatch& m)
{
    const std::vector<const toml::table*> items =
        bounded_tables(r, "query", "an array of query parameter tables", "omit \"query\" to match any query",
                       kMaxConditions);
    std::map<std::string, size_t> seen;
    for (size_t i = 0; i < items.size(); i++) {
        if (!items[i])
            continue;
        TableReader qr(r.context(), *items[i], index_path(r, "query", i), {"name", "exact", "present"});
        QueryCondition c;
        bool ok = true;
        if (auto name = qr.required_string("name", "give the parameter's name, e.g. \"debug\"")) {
            if (auto why = check_query_text(*name, true)) {
                qr.error("name", *why);
                ok = false;
            } else if (auto [it, fresh] = seen.emplace(*name, i); !fresh) {
                qr.error("name", "parameter " + quote(*name) + " already has a condition in query[" +
                                     std::to_string(it->second) + "]; a route takes one condition per parameter");
                ok = false;
            } else {
                c.name = *name;
            }
        } else {
            ok = false;
        }
        if (const char* extra = qr.second_of({"exact", "present"})) {
            qr.error(extra, "give either \"exact\" or \"present\", not both");
            continue;
        }
        if (qr.has("present")) {
            auto flag = qr.boolean("present");
            if (!flag)
                continue;
            if (!*flag) {
                qr.error("present", "present = false (match when the parameter is absent) is not supported; put an "
                                    "earlier route with present = true instead");
                continue;
            }
            c.kind = QueryCondition::Kind::Present;
        } else if (qr.has("exact")) {
            auto value = qr.string("exact");
            if (!value)
                continue;
            if (auto why = check_query_text(*value, false)) {
                qr.error("exact", *why);
                continue;
            }
            c.kind = QueryCondition::Kind::Exact;
            c.value = std::move(*value);
        } else {
            qr.error_here("needs exactly one of \"exact\" (a value) or \"present = true\"");
            continue;
        }
        if (ok)
            m.query.push_back(std::move(c));
    }
}

void read_sources(const TableReader& r, RouteMatch& m)
{
    auto items = r.string_list("source", "omit \"source\" to match any client");
    if (!items)
        return;
    if (items->size() > kMaxSources) {
        r.error("source", std::to_string(items->size()) + " entries; at most " + std::to_string(kMaxSources));
        return;
    }
    for (const auto& item : *items) {
        std::string why;
        auto cidr = Cidr::parse(item.value, &why);
        if (!cidr) {
            r.context().error(item.where.at, item.where.key, why);
            continue;
        }
        if (std::find(m.sources.begin(), m.sources.end(), *cidr) == m.sources.end())
            m.sources.push_back(*cidr);
    }
}

void read_claim_conditions(const TableReader& r, RouteMatch& m)
{
    const std::vector<const toml::table*> items =
        bounded_tables(r, "claims", "an array of claim tables", "omit \"claims\" to match any token",
                       kMaxConditions);
    std::map<std::string, size_t> seen;
    for (size_t i = 0; i < items.size(); i++) {
        if (!items[i])
            continue;
        TableReader cr(r.context(), *items[i], index_path(r, "claims", i), {"name", "exact", "present"});
        ClaimCondition c;
        bool ok = true;
        if (auto name = cr.required_string("name", "give the claim's name, e.g. \"sub\"")) {
            if (auto why = check_claim_text(*name)) {
                cr.error("name", *why);
                ok = false;
            } else if (auto [it, fresh] = seen.emplace(*name, i); !fresh) {
                cr.error("name", "claim " + quote(*name) + " already has a condition in claims[" +
                                     std::to_string(it->second) + "]; give one condition per claim");
                ok = false;
            } else {
                c.claim = *name;
            }
        } else {
            ok = false;
        }
        if (const char* extra = cr.second_of({"exact", "present"})) {
            cr.error(extra, "give either \"exact\" or \"present\", not both");
            continue;
        }
        if (cr.has("present")) {
            auto flag = cr.boolean("present");
            if (!flag)
                continue;
            if (!*flag) {
                cr.error("present", "present = false (match when the claim is absent) is not supported");
                continue;
            }
            c.kind = ClaimCondition::Kind::Present;
        } else if (cr.has("exact")) {
            auto value = cr.string("exact");
            if (!value)
                continue;
            if (value->size() > kMaxFieldValueBytes) {
                cr.error("exact", "the value is " + std::to_string(value->size()) + " bytes long; at most " +
                                      std::to_string(kMaxFieldValueBytes));
                continue;
            }
            c.kind = ClaimCondition::Kind::Exact;
            c.value = std::move(*value);
        } else {
            cr.error_here("needs exactly one of \"exact\" (a value) or \"present = true\"");
            continue;
        }
        if (ok)
            m.claims.push_back(std::move(c));
    }
}

void read_path(const TableReader& r, RouteMatch& m)
{
    if (const char* extra = r.second_of({"path_exact", "path_prefix", "path_regex"})) {
        r.error(extra, "give at most one of \"path_exact\", \"path_prefix\" and \"path_regex\"");
        return;
    }
    for (auto [key, kind] : {std::pair{"path_exact", PathMatch::Exact}, std::pair{"path_prefix", PathMatch::Prefix}}) {
        auto path = r.string(key);
        if (!path)
            continue;
        if (auto why = check_path(*path)) {
            r.error(key, *why);
            continue;
        }
        m.path_kind = kind;
        m.path = std::move(*path);
    }
    if (auto pattern = r.string("path_regex")) {
        if (pattern->empty()) {
            r.error("path_regex", "empty; omit \"path_regex\" to match any path");
            return;
        }
        if (pattern->size() > kMaxRegexBytes) {
            r.error("path_regex", "the pattern is " + std::to_string(pattern->size()) + " bytes long; at most " +
                                      std::to_string(kMaxRegexBytes));
            return;
        }
        std::string why;
        size_t offset = 0;
        auto re = CompiledRegex::compile(*pattern, &why, &offset);
        if (!re) {
            const toml::node& n = *r.node("path_regex");
            r.context().error(r.context().at_byte(n, *pattern, std::min(offset, pattern->size())),
                              r.child("path_regex"),
                              quote(*pattern) + " is not a valid regular expression: " + why + " (at byte " +
                                  std::to_string(offset) + ")");
            return;
        }
        m.path_kind = PathMatch::Regex;
        m.path = std::move(*pattern);
        m.path_regex = std::move(re);
    }
}

}  // namespace

std::optional<Located> read_conditions(const TableReader& r, RouteMatch& m, bool with_host)
{
    const FileContext& cx = r.context();
    if (auto methods = r.string_list("method", "omit \"method\" to match any method")) {
        for (const auto& item : *methods) {
            if (auto why = check_method(item.value)) {
                cx.error(item.where.at, item.where.key, *why);
                continue;
            }
            if (std::find(m.methods.begin(), m.methods.end(), item.value) == m.methods.end())
                m.methods.push_back(item.value);
        }
    }
    if (with_host) {
        if (auto host = r.string("host")) {
            std::string why;
            if (auto h = normalize_host(*host, &why))
                m.host = std::move(*h);
            else
                r.error("host", why);
        }
    }
    read_path(r, m);
    read_header_conditions(r, m);
    read_query_conditions(r, m);
    read_sources(r, m);
    read_claim_conditions(r, m);
    if (r.has("claims"))
        return r.located("claims");
    return std::nullopt;
}

}  // namespace l7fast::policy::loader
