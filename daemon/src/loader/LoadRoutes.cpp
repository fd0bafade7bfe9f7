// The policy loader's reader of [[route]] tables: targets, actions (header
// mutations, direct responses), RBAC and rate limits; the conditions are
// LoadRouteMatch.cpp's.
#include <algorithm>

#include "loader/LoaderChecks.hpp"
#include "loader/LoaderInternal.hpp"
#include "loader/LoaderLimits.hpp"
#include "config/Text.hpp"

namespace l7fast::policy::loader {

using text::lower;
using text::quote;

namespace {

// ---- route actions ----------------------------------------------------------------------

// name/value tables of a mutation or a direct response, each with where its
// name was written.
std::vector<std::pair<HeaderValue, Located>> read_header_values(const TableReader& r, std::string_view k)
{
    std::vector<std::pair<HeaderValue, Located>> out;
    const std::vector<const toml::table*> items =
        bounded_tables(r, k, "an array of { name, value } tables", "omit \"" + std::string(k) + "\"", kMaxMutations);
    for (size_t i = 0; i < items.size(); i++) {
        if (!items[i])
            continue;
        TableReader hr(r.context(), *items[i], index_path(r, k, i), {"name", "value"});
        auto name = hr.required_string("name", "give the header's field name");
        auto value = hr.required_string("value", "give the header's value (it may be empty)");
        bool ok = name && value;
        if (name) {
            if (auto why = check_field_name(*name)) {
                hr.error("name", *why);
                ok = false;
            } else if (is_reserved_field(lower(*name))) {
                hr.error("name", reserved_field_message(lower(*name)));
                ok = false;
            }
        }
        if (value) {
            if (auto why = check_written_value(*value)) {
                hr.error("value", *why);
                ok = false;
            }
        }
        if (ok)
            out.push_back({{lower(*name), *value}, hr.located("name")});
    }
    return out;
}

void read_mutation(const TableReader& route, std::string_view k, bool response, HeaderMutation& m)
{
    const toml::table* t = route.table(k);
    if (!t)
        return;
    const FileContext& cx = route.context();
    TableReader r(cx, *t, route.child(k), {"remove", "set", "add"});
    if (response && r.has("add"))
        r.error("add", "responses take only \"set\" and \"remove\": a response header is replaced, not repeated");
    if (auto names = r.string_list("remove", "omit \"remove\"")) {
        if (names->size() > kMaxMutations) {
            r.error("remove", std::to_string(names->size()) + " entries; at most " + std::to_string(kMaxMutations));
        } else {
            for (const auto& item : *names) {
                const std::string name = lower(item.value);
                if (auto why = check_field_name(item.value))
                    cx.error(item.where.at, item.where.key, *why);
                else if (is_reserved_field(name))
                    cx.error(item.where.at, item.where.key, reserved_field_message(name));
                else if (std::find(m.remove.begin(), m.remove.end(), name) != m.remove.end())
                    cx.error(item.where.at, item.where.key, quote(name) + " is listed twice");
                else
                    m.remove.push_back(name);
            }
        }
    }
    for (auto& [h, at] : read_header_values(r, "set")) {
        // a named copy: clang before 16 cannot capture a structured binding
        const std::string& name = h.name;
        const auto same = [&](const HeaderValue& x) { return x.name == name; };
        if (std::any_of(m.set.begin(), m.set.end(), same))
            cx.error(at.at, at.key, quote(h.name) + " is set twice; set writes one line (use add for more)");
        else if (std::find(m.remove.begin(), m.remove.end(), h.name) != m.remove.end())
            cx.error(at.at, at.key, quote(h.name) + " is both removed and set; set already replaces every line of it");
        else
            m.set.push_back(std::move(h));
    }
    if (!response)
        for (auto& [h, at] : read_header_values(r, "add"))
            m.add.push_back(std::move(h));
}

void read_direct_response(const TableReader& route, DirectResponse& out)
{
    const toml::table* t = route.table("direct_response");
    if (!t)
        return;
    TableReader r(route.context(), *t, route.child("direct_response"), {"status", "headers", "body"});
    if (auto v = r.integer("status", 200, 599, "a final status; 1xx are interim"))
        out.status = static_cast<uint16_t>(*v);
    for (auto& [h, at] : read_header_values(r, "headers"))
        out.headers.push_back(std::move(h));
    if (auto body = r.string("body")) {
        if (body->size() > kMaxBodyBytes)
            r.error("body", "the body is " + std::to_string(body->size()) + " bytes long; at most " +
                                std::to_string(kMaxBodyBytes));
        else if (!body->empty() && (out.status == 204 || out.status == 304))
            r.error("body", "a " + std::to_string(out.status) + " response has no body; remove \"body\"");
        else
            out.body = std::move(*body);
    }
}

// Returns where claim conditions were written in the rules, if anywhere.
std::optional<Located> read_rbac(const TableReader& route, Rbac& out)
{
    const toml::table* t = route.table("rbac");
    if (!t)
        return std::nullopt;
    TableReader r(route.context(), *t, route.child("rbac"), {"mode", "default", "deny_status", "deny_body", "rules"});
    if (auto mode = r.string("mode")) {
        if (*mode == "first_match")
            out.mode = Rbac::Mode::FirstMatch;
        else if (*mode == "deny_overrides")
            out.mode = Rbac::Mode::DenyOverrides;
        else
            r.error("mode", quote(*mode) + " is not an RBAC mode; use \"first_match\" or \"deny_overrides\"");
    }
    if (auto def = r.string("default")) {
        if (*def == "allow" || *def == "deny")
            out.default_action = *def == "allow" ? RbacRule::Action::Allow : RbacRule::Action::Deny;
        else
            r.error("default", quote(*def) + " is not an action; use \"allow\" or \"deny\"");
    }
    if (auto v = r.integer("deny_status", 400, 599, "a client or server error status"))
        out.deny_status = static_cast<uint16_t>(*v);
    if (auto body = r.string("deny_body")) {
        if (body->size() > kMaxBodyBytes)
            r.error("deny_body", "the body is " + std::to_string(body->size()) + " bytes long; at most " +
                                     std::to_string(kMaxBodyBytes));
        else
            out.deny_body = std::move(*body);
    }
    std::optional<Located> claims_at;
    const std::vector<const toml::table*> rules = bounded_tables(
        r, "rules", "an array of rule tables", "omit \"rules\" to let \"default\" decide every request", kMaxRbacRules);
    for (size_t i = 0; i < rules.size(); i++) {
        if (!rules[i])
            continue;
        TableReader rr(route.context(), *rules[i], index_path(r, "rules", i),
                       {"name", "action", "method", "path_exact", "path_prefix", "path_regex", "headers", "query",
                        "source", "claims"});
        RbacRule rule;
        rule.where = rr.where();
        rule.name = "rule" + std::to_string(i);
        bool ok = true;
        if (auto name = rr.string("name")) {
            if (auto why = check_name(*name)) {
                rr.error("name", *why);
                ok = false;
            } else {
                for (size_t j = 0; j < out.rules.size(); j++)
                    if (out.rules[j].name == *name) {
                        rr.error("name", "rule name " + quote(*name) + " is already used by rules[" +
                                             std::to_string(j) + "]");
                        ok = false;
                    }
                rule.name = *name;
            }
        } else if (rr.has("name")) {
            ok = false;
        }
        if (auto action = rr.required_string("action", "give action = \"allow\" or \"deny\"")) {
            if (*action == "allow" || *action == "deny")
                rule.action = *action == "allow" ? RbacRule::Action::Allow : RbacRule::Action::Deny;
            else {
                rr.error("action", quote(*action) + " is not an action; use \"allow\" or \"deny\"");
                ok = false;
            }
        } else {
            ok = false;
        }
        if (auto at = read_conditions(rr, rule.when, false); at && !claims_at)
            claims_at = at;
        if (ok)
            out.rules.push_back(std::move(rule));
    }
    return claims_at;
}

// Returns where a claim key was written, if it is one.
std::optional<Located> read_rate_limit(const TableReader& route, RateLimit& out)
{
    const toml::table* t = route.table("rate_limit");
    if (!t)
        return std::nullopt;
    TableReader r(route.context(), *t, route.child("rate_limit"), {"rate", "burst", "key", "max_keys"});
    if (!r.has("rate"))
        r.missing("rate", "give the requests per second, e.g. rate = 100");
    if (auto v = r.integer("rate", 1, kMaxRate, "requests per second"))
        out.rate = static_cast<uint32_t>(*v);
    out.burst = out.rate ? out.rate : 1;
    if (auto v = r.integer("burst", 1, kMaxRate, "requests admitted at once"))
        out.burst = static_cast<uint32_t>(*v);
    std::optional<Located> claim_at;
    if (r.has("key"))
        out.key = read_request_key(r, "key", true, &claim_at);
    if (r.has("max_keys") && !r.has("key"))
        r.error("max_keys", "only applies with a \"key\" (without one every request shares one bucket)");
    else if (auto v = r.integer("max_keys", 1, kMaxRateKeys, "buckets kept, least recently used dropped"))
        out.max_keys = static_cast<uint32_t>(*v);
    return claim_at;
}

// ---- [[route]] ------------------------------------------------------------------------

void read_route_clusters(const TableReader& r, RouteDraft& d)
{
    const FileContext& cx = r.context();
    if (r.has("cluster") && r.has("clusters")) {
        r.error("clusters", "give either \"cluster\" or \"clusters\", not both");
    } else if (r.has("cluster")) {
        if (auto name = r.string("cluster")) {
            d.value.clusters.push_back({*name, 1});
            d.cluster_refs.push_back({*name, r.located("cluster")});
        }
    } else if (r.has("clusters")) {
        const std::vector<const toml::table*> targets = r.tables("clusters", "an array of { name, weight } tables");
        if (r.is_empty_array("clusters"))
            r.error("clusters", "empty list; a route needs at least one cluster");
        int64_t weight_sum = 0;
        bool weights_ok = true;
        for (size_t i = 0; i < targets.size(); i++) {
            if (!targets[i]) {
                weights_ok = false;
                continue;
            }
            TableReader tr(cx, *targets[i], index_path(r, "clusters", i), {"name", "weight"});
            WeightedCluster wc;
            if (auto w = tr.integer("weight", 0, kMaxWeight))
                wc.weight = static_cast<uint32_t>(*w);
            else if (tr.has("weight"))
                weights_ok = false;
            weight_sum += wc.weight;
            auto name = tr.required_string("name", "give the cluster's name");
            if (!name)
                continue;
            const bool duplicate = std::any_of(d.value.clusters.begin(), d.value.clusters.end(),
                                               [&](const WeightedCluster& x) { return x.cluster == *name; });
            if (duplicate) {
                tr.error("name", "cluster " + quote(*name) + " is listed twice; give it one entry with the summed weight");
                continue;
            }
            wc.cluster = *name;
            d.value.clusters.push_back(wc);
            d.cluster_refs.push_back({*name, tr.located("name")});
        }
        if (weights_ok && !targets.empty() && (weight_sum < 1 || weight_sum > kMaxWeightSum))
            r.error("clusters", "the cluster weights sum to " + std::to_string(weight_sum) +
                                    "; the sum must be in 1.." + std::to_string(kMaxWeightSum));
    } else if (!r.has("direct_response")) {
        r.missing("cluster", "a route needs \"cluster\" (one cluster), \"clusters\" (weighted) or "
                             "\"direct_response\"");
    }
}

}  // namespace

void read_route(const FileContext& cx, const toml::table& t, size_t index, Drafts& out)
{
    TableReader r(cx, t, entity_path("route", index, t),
                  {"name", "listeners", "offload", "cluster", "clusters", "direct_response", "match", "jwt", "rbac",
                   "rate_limit", "request_headers", "response_headers", "timeout_ms", "connect_retries"});
    RouteDraft d;
    read_name(r, "route", d);
    if (d.name)
        d.value.name = *d.name;
    d.value.where = r.where();

    if (auto listeners = r.string_list("listeners", "omit \"listeners\" to use every listener")) {
        for (auto& item : *listeners) {
            if (std::find(d.value.listeners.begin(), d.value.listeners.end(), item.value) != d.value.listeners.end())
                continue;
            d.value.listeners.push_back(item.value);
            d.listener_refs.push_back({item.value, item.where});
        }
    }
    if (auto offload = r.boolean("offload"))
        d.value.offload = *offload;

    if (r.has("direct_response")) {
        if (const char* target = r.has("cluster") ? "cluster" : r.has("clusters") ? "clusters" : nullptr)
            r.error("direct_response", std::string("give either \"direct_response\" or \"") + target +
                                           "\", not both: a direct response is not forwarded");
        for (const char* key : {"request_headers", "response_headers", "timeout_ms", "connect_retries"})
            if (r.has(key))
                r.error(key, "has no effect with \"direct_response\": nothing is forwarded; remove it");
        DirectResponse dr;
        read_direct_response(r, dr);
        d.value.direct_response = std::move(dr);
    }
    if (!r.has("direct_response") || r.has("cluster") || r.has("clusters"))
        read_route_clusters(r, d);

    std::vector<Located> claim_uses;
    if (const toml::table* match = r.table("match")) {
        TableReader mr(cx, *match, r.child("match"),
                       {"method", "host", "path_exact", "path_prefix", "path_regex", "headers", "query", "source",
                        "claims"});
        if (auto at = read_conditions(mr, d.value.match, true))
            claim_uses.push_back(*at);
    }
    if (auto jwt = r.string("jwt")) {
        if (auto why = check_name(*jwt))
            r.error("jwt", *why);
        else {
            d.value.jwt = *jwt;
            d.jwt_ref = Reference{*jwt, r.located("jwt")};
        }
    }
    if (r.has("rbac")) {
        Rbac rbac;
        if (auto at = read_rbac(r, rbac))
            claim_uses.push_back(*at);
        d.value.rbac = std::move(rbac);
    }
    if (r.has("rate_limit")) {
        RateLimit limit;
        if (auto at = read_rate_limit(r, limit))
            claim_uses.push_back(*at);
        d.value.rate_limit = std::move(limit);
    }
    if (!r.has("jwt"))
        for (const Located& at : claim_uses)
            cx.error(at.at, at.key, "claims come from the route's verified token: add jwt = \"<provider>\" to "
                                    "the route");
    if (!r.has("direct_response")) {
        read_mutation(r, "request_headers", false, d.value.request_headers);
        read_mutation(r, "response_headers", true, d.value.response_headers);
        if (auto v = r.integer("timeout_ms", 1, kMaxTimeoutMs, "milliseconds, at most one day"))
            d.value.timeout = std::chrono::milliseconds(*v);
        if (auto v = r.integer("connect_retries", 0, kMaxConnectRetries, "other endpoints tried"))
            d.value.connect_retries = static_cast<uint32_t>(*v);
    }
    out.routes.push_back(std::move(d));
}

}  // namespace l7fast::policy::loader
