#include "control/ConfigDump.hpp"

#include "auth/JsonReader.hpp"
#include "control/Json.hpp"
#include "config/Describe.hpp"

namespace l7fast::control {

namespace {

using policy::HeaderCondition;
using policy::RequestKey;

const char* key_kind(RequestKey::Kind k)
{
    switch (k) {
    case RequestKey::Kind::Header: return "header";
    case RequestKey::Kind::Cookie: return "cookie";
    case RequestKey::Kind::SourceIp: return "source_ip";
    case RequestKey::Kind::Claim: return "claim";
    }
    return "?";
}

void write_key(JsonWriter& w, const RequestKey& k)
{
    w.begin_object().field("from", key_kind(k.kind));
    if (k.kind != RequestKey::Kind::SourceIp)
        w.field("name", k.name);
    w.end_object();
}

void write_strings(JsonWriter& w, const std::vector<std::string>& v)
{
    w.begin_array();
    for (const auto& s : v)
        w.value(s);
    w.end_array();
}

void write_headers(JsonWriter& w, const std::vector<policy::HeaderValue>& v)
{
    w.begin_array();
    for (const auto& h : v)
        w.begin_object().field("name", h.name).field("value", h.value).end_object();
    w.end_array();
}

const char* path_kind(policy::PathMatch k)
{
    switch (k) {
    case policy::PathMatch::Any: return "any";
    case policy::PathMatch::Exact: return "exact";
    case policy::PathMatch::Prefix: return "prefix";
    case policy::PathMatch::Regex: return "regex";
    }
    return "?";
}

const char* header_kind(HeaderCondition::Kind k)
{
    switch (k) {
    case HeaderCondition::Kind::Present: return "present";
    case HeaderCondition::Kind::Absent: return "absent";
    case HeaderCondition::Kind::Exact: return "exact";
    case HeaderCondition::Kind::Prefix: return "prefix";
    }
    return "?";
}

// Every condition, structured; "summary" is the one-line form of
// `l7fastctl routes`.
void write_match(JsonWriter& w, const policy::RouteMatch& m)
{
    w.begin_object().field("summary", policy::describe_match(m));
    w.key("methods");
    write_strings(w, m.methods);
    if (m.host)
        w.field("host", *m.host);
    w.key("path").begin_object().field("kind", path_kind(m.path_kind));
    if (m.path_kind != policy::PathMatch::Any)
        w.field("value", m.path);
    w.end_object();
    w.key("headers").begin_array();
    for (const auto& h : m.headers) {
        w.begin_object().field("name", h.name).field("kind", header_kind(h.kind));
        if (h.kind == HeaderCondition::Kind::Exact || h.kind == HeaderCondition::Kind::Prefix)
            w.field("value", h.value);
        w.end_object();
    }
    w.end_array();
    w.key("query").begin_array();
    for (const auto& q : m.query) {
        w.begin_object().field("name", q.name);
        if (q.kind == policy::QueryCondition::Kind::Exact)
            w.field("value", q.value);
        w.end_object();
    }
    w.end_array();
    w.key("sources").begin_array();
    for (const auto& c : m.sources)
        w.value(c.str());
    w.end_array();
    w.key("claims").begin_array();
    for (const auto& c : m.claims) {
        w.begin_object().field("claim", c.claim);
        if (c.kind == policy::ClaimCondition::Kind::Exact)
            w.field("value", c.value);
        w.end_object();
    }
    w.end_array();
    w.end_object();
}

void write_mutation(JsonWriter& w, const policy::HeaderMutation& m)
{
    w.begin_object();
    w.key("remove");
    write_strings(w, m.remove);
    w.key("set");
    write_headers(w, m.set);
    w.key("add");
    write_headers(w, m.add);
    w.end_object();
}

const char* action_name(policy::RbacRule::Action a)
{
    return a == policy::RbacRule::Action::Allow ? "allow" : "deny";
}

// The route's pipeline, in the order it runs (policy::Route).
void write_actions(JsonWriter& w, const policy::Route& r)
{
    w.begin_array();
    if (r.jwt)
        w.begin_object().field("step", "jwt").field("provider", *r.jwt).end_object();
    if (r.rbac) {
        const auto& rb = *r.rbac;
        w.begin_object()
            .field("step", "rbac")
            .field("mode", rb.mode == policy::Rbac::Mode::FirstMatch ? "first_match" : "deny_overrides")
            .field("default", action_name(rb.default_action))
            .field("deny_status", static_cast<uint64_t>(rb.deny_status))
            .field("deny_body_bytes", static_cast<uint64_t>(rb.deny_body.size()));
        w.key("rules").begin_array();
        for (const auto& rule : rb.rules) {
            w.begin_object().field("name", rule.name).field("action", action_name(rule.action));
            w.key("when");
            write_match(w, rule.when);
            w.field("where", rule.where.str()).end_object();
        }
        w.end_array().end_object();
    }
    if (r.rate_limit) {
        const auto& rl = *r.rate_limit;
        w.begin_object()
            .field("step", "rate_limit")
            .field("rate", static_cast<uint64_t>(rl.rate))
            .field("burst", static_cast<uint64_t>(rl.burst));
        if (rl.key) {
            w.key("key");
            write_key(w, *rl.key);
            w.field("max_keys", static_cast<uint64_t>(rl.max_keys));
        }
        w.end_object();
    }
    if (!r.request_headers.empty()) {
        w.begin_object().field("step", "request_headers").key("mutation");
        write_mutation(w, r.request_headers);
        w.end_object();
    }
    if (r.direct_response) {
        const auto& d = *r.direct_response;
        w.begin_object().field("step", "direct_response").field("status", static_cast<uint64_t>(d.status));
        w.key("headers");
        write_headers(w, d.headers);
        w.field("body_bytes", static_cast<uint64_t>(d.body.size())).end_object();
    } else {
        w.begin_object().field("step", "forward").key("clusters").begin_array();
        for (const auto& c : r.clusters)
            w.begin_object().field("cluster", c.cluster).field("weight", static_cast<uint64_t>(c.weight)).end_object();
        w.end_array();
        if (r.timeout)
            w.field("timeout_ms", static_cast<uint64_t>(r.timeout->count()));
        w.field("connect_retries", static_cast<uint64_t>(r.connect_retries)).end_object();
    }
    if (!r.response_headers.empty()) {
        w.begin_object().field("step", "response_headers").key("mutation");
        write_mutation(w, r.response_headers);
        w.end_object();
    }
    w.end_array();
}

// "expected_status": the statuses that pass, or "200-399" when the policy
// gives none (any 2xx or 3xx passes).
void write_health_check(JsonWriter& w, const policy::HealthCheck& h)
{
    w.key("health_check").begin_object().field("path", h.path);
    if (!h.host.empty())
        w.field("host", h.host);
    w.field("interval_ms", static_cast<uint64_t>(h.interval.count()))
        .field("timeout_ms", static_cast<uint64_t>(h.timeout.count()))
        .field("healthy_threshold", static_cast<uint64_t>(h.healthy_threshold))
        .field("unhealthy_threshold", static_cast<uint64_t>(h.unhealthy_threshold));
    if (h.expected_status.empty()) {
        w.field("expected_status", "200-399");
    } else {
        w.key("expected_status").begin_array();
        for (uint16_t s : h.expected_status)
            w.value(static_cast<uint64_t>(s));
        w.end_array();
    }
    w.end_object();
}

void write_outlier_detection(JsonWriter& w, const policy::OutlierDetection& o)
{
    w.key("outlier_detection")
        .begin_object()
        .field("consecutive_5xx", static_cast<uint64_t>(o.consecutive_5xx))
        .field("consecutive_connect_failures", static_cast<uint64_t>(o.consecutive_connect_failures))
        .field("base_ejection_ms", static_cast<uint64_t>(o.base_ejection.count()))
        .field("max_ejection_ms", static_cast<uint64_t>(o.max_ejection.count()))
        .field("max_ejection_percent", static_cast<uint64_t>(o.max_ejection_percent))
        .end_object();
}

void write_cluster(JsonWriter& w, const policy::Cluster& c, const DumpFacts& facts)
{
    w.begin_object().field("name", c.name).field("lb", policy::lb_name(c.lb));
    if (c.hash_key) {
        w.key("hash_key");
        write_key(w, *c.hash_key);
    }
    if (c.lb == policy::LbPolicy::RingHash)
        w.field("ring_min_size", c.ring_min_size).field("ring_max_size", c.ring_max_size);
    if (c.lb == policy::LbPolicy::Maglev)
        w.field("maglev_table_size", static_cast<uint64_t>(c.maglev_table_size));
    if (c.hash_balance_factor)
        w.field("hash_balance_factor", static_cast<uint64_t>(c.hash_balance_factor));
    if (c.health_check)
        write_health_check(w, *c.health_check);
    if (c.outlier_detection)
        write_outlier_detection(w, *c.outlier_detection);
    w.key("endpoints").begin_array();
    for (const auto& e : c.endpoints) {
        const std::string addr = e.address.str();
        w.begin_object().field("address", addr).field("weight", static_cast<uint64_t>(e.weight));
        if (auto it = facts.endpoints.find(addr); it != facts.endpoints.end()) {
            const EndpointStats& s = it->second;
            w.key("connections")
                .begin_object()
                .field("kernel_idle", static_cast<uint64_t>(s.kernel_idle))
                .field("kernel_busy", static_cast<uint64_t>(s.kernel_busy))
                .field("user_idle", static_cast<uint64_t>(s.user_idle))
                .field("user_busy", static_cast<uint64_t>(s.user_busy))
                .end_object();
            w.key("health").begin_object().field("state", s.state);
            if (s.checked)
                w.field("checks_passed", s.checks_passed)
                    .field("checks_failed", s.checks_failed)
                    .field("last_check", s.last_check);
            w.field("ejections_5xx", s.ejections_5xx).field("ejections_connect_failure", s.ejections_connect);
            if (s.ejected_for_ms)
                w.field("ejected_for_ms", s.ejected_for_ms);
            w.end_object();
        }
        w.end_object();
    }
    w.end_array().field("where", c.where.str()).end_object();
}

// Key ids and algorithms only: never a secret or a key's material.
void write_provider(JsonWriter& w, const policy::JwtProvider& p)
{
    w.begin_object().field("name", p.name);
    if (p.issuer)
        w.field("issuer", *p.issuer);
    w.key("audiences");
    write_strings(w, p.audiences);
    w.key("algorithms");
    write_strings(w, p.algorithms);
    w.key("keys").begin_array();
    for (const auto& k : p.keys)
        w.begin_object().field("kid", k.kid).field("alg", k.alg).field("where", k.where.str()).end_object();
    w.end_array();
    if (!p.jwks_file.empty())
        w.field("jwks_file", p.jwks_file);
    w.key("from");
    write_key(w, p.from);
    w.field("from_prefix", p.from_prefix)
        .field("clock_skew_s", static_cast<uint64_t>(p.clock_skew.count()))
        .field("require_exp", p.require_exp)
        .field("max_token_bytes", static_cast<uint64_t>(p.max_token_bytes))
        .field("verify_in_kernel", p.verify_in_kernel);
    w.key("forward_claims").begin_array();
    for (const auto& f : p.forward_claims)
        w.begin_object().field("claim", f.claim).field("header", f.header).end_object();
    w.end_array().field("where", p.where.str()).end_object();
}

void write_daemon(JsonWriter& w, const policy::DaemonSettings& d)
{
    auto ms = [](std::chrono::milliseconds v) { return static_cast<uint64_t>(v.count()); };
    w.begin_object()
        .field("cgroup", d.cgroup)
        .field("bpffs", d.bpffs)
        .field("kernel_dataplane", d.kernel_dataplane)
        .field("offload_remote_clients", d.offload_remote_clients)
        .field("ingress_budget", static_cast<uint64_t>(d.ingress_budget))
        .field("pool_min_idle", static_cast<uint64_t>(d.pool_min_idle))
        .field("pool_max", static_cast<uint64_t>(d.pool_max))
        .field("connect_timeout_ms", ms(d.connect_timeout))
        .field("request_timeout_ms", ms(d.request_timeout))
        .field("header_timeout_ms", ms(d.header_timeout))
        .field("idle_timeout_ms", ms(d.idle_timeout))
        .field("log_level", d.log_level);
    if (d.metrics_address)
        w.field("metrics_address", d.metrics_address->str());
    w.field("access_log_sample", static_cast<uint64_t>(d.access_log_sample))
        .field("access_log_format", d.access_log_json ? "json" : "text")
        .end_object();
}

void text_value(const auth::json::Document& doc, const auth::json::Node& n, int indent, std::string* out);

void text_children(const auth::json::Document& doc, const auth::json::Node& n, int indent, std::string* out)
{
    using auth::json::Type;
    const std::string pad(static_cast<size_t>(indent), ' ');
    for (const auth::json::Node& c : doc.children(n)) {
        const bool container = c.type == Type::Object || c.type == Type::Array;
        const bool empty = container && c.end == static_cast<uint32_t>(&c - &doc.root()) + 1;
        *out += pad;
        *out += n.type == Type::Array ? std::string("-") : std::string(c.key) + ":";
        if (container && !empty) {
            *out += "\n";
            text_children(doc, c, indent + 2, out);
        } else {
            *out += " ";
            if (container)
                *out += c.type == Type::Object ? "{}" : "[]";
            else
                text_value(doc, c, indent, out);
            *out += "\n";
        }
    }
}

void text_value(const auth::json::Document&, const auth::json::Node& n, int, std::string* out)
{
    using auth::json::Type;
    switch (n.type) {
    case Type::Null: *out += "null"; break;
    case Type::False: *out += "false"; break;
    case Type::True: *out += "true"; break;
    case Type::Number: out->append(n.text); break;
    case Type::String:
        // quoted when it could be misread: empty, surrounding spaces, or a
        // line break inside
        if (n.text.empty() || n.text.front() == ' ' || n.text.back() == ' ' ||
            n.text.find('\n') != std::string_view::npos)
            *out += JsonWriter::quote(n.text);
        else
            out->append(n.text);
        break;
    default: break;
    }
}

}  // namespace

std::string config_json(const policy::Policy& pol, const DumpFacts& facts)
{
    JsonWriter w;
    w.begin_object().field("generation", facts.generation).field("applied_unix", facts.applied_unix);
    w.key("policy_files");
    write_strings(w, pol.sources);
    w.key("daemon");
    write_daemon(w, pol.daemon);
    w.key("listeners").begin_array();
    for (const auto& l : pol.listeners)
        w.begin_object()
            .field("name", l.name)
            .field("address", l.address.str())
            .field("where", l.where.str())
            .end_object();
    w.end_array();
    w.key("routes").begin_array();
    for (size_t i = 0; i < pol.routes.size(); i++) {
        const policy::Route& r = pol.routes[i];
        w.begin_object().field("name", r.name);
        w.key("listeners");
        write_strings(w, r.listeners);
        w.key("match");
        write_match(w, r.match);
        w.key("actions");
        write_actions(w, r);
        w.field("offload", r.offload);
        if (i < facts.placement.size()) {
            w.field("placement", facts.placement[i].kernel ? "kernel" : "user");
            if (!facts.placement[i].kernel)
                w.field("reason", facts.placement[i].reason);
        }
        w.field("where", r.where.str()).end_object();
    }
    w.end_array();
    w.key("clusters").begin_array();
    for (const auto& c : pol.clusters)
        write_cluster(w, c, facts);
    w.end_array();
    w.key("jwt_providers").begin_array();
    for (const auto& p : pol.jwt_providers)
        write_provider(w, p);
    w.end_array();
    w.end_object();
    return w.str();
}

bool render_json_as_text(const std::string& json, std::string* out, std::string* error)
{
    auth::json::Document doc;
    auth::json::Limits limits;
    limits.max_bytes = 64u << 20;
    limits.max_depth = 64;
    limits.max_nodes = 1u << 22;
    if (!doc.parse(json, limits)) {
        *error = std::string(doc.error()) + " at byte " + std::to_string(doc.error_offset());
        return false;
    }
    out->clear();
    if (doc.root().type == auth::json::Type::Object || doc.root().type == auth::json::Type::Array)
        text_children(doc, doc.root(), 0, out);
    else
        text_value(doc, doc.root(), 0, out);
    return true;
}

}  // namespace l7fast::control
