#include "semantics/Router.hpp"

#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>

#include "semantics/SafeRegex.hpp"
#include "config/Text.hpp"

namespace l7fast::policy {

struct CompiledRegex::Engine {
    SafeRegex re;
};

CompiledRegex::CompiledRegex(std::unique_ptr<Engine> engine) : engine_(std::move(engine)) {}
CompiledRegex::~CompiledRegex() = default;

std::shared_ptr<const CompiledRegex> CompiledRegex::compile(std::string_view pattern, std::string* why,
                                                            size_t* error_offset)
{
    std::string scratch_why;
    size_t scratch_offset = 0;
    std::optional<SafeRegex> re = SafeRegex::compile(pattern, why ? why : &scratch_why,
                                                     error_offset ? error_offset : &scratch_offset);
    if (!re)
        return nullptr;
    return std::make_shared<const CompiledRegex>(std::make_unique<Engine>(Engine{std::move(*re)}));
}

bool CompiledRegex::full_match(std::string_view subject) const
{
    return engine_->re.full_match(subject);
}

const SafeRegex& CompiledRegex::safe_regex() const
{
    return engine_->re;
}

namespace {

using text::iequals;

bool is_v4_mapped(const std::array<uint8_t, 16>& ip)
{
    static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return std::memcmp(ip.data(), kMapped, sizeof(kMapped)) == 0;
}

std::string_view trim_ows(std::string_view s)
{
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
        s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
        s.remove_suffix(1);
    return s;
}

bool header_holds(const HeaderCondition& c, std::span<const HeaderField> headers)
{
    const bool compares = c.kind == HeaderCondition::Kind::Exact || c.kind == HeaderCondition::Kind::Prefix;
    // RFC 9110 5.3: several field lines of one name are one value, joined
    // with ", " in order
    std::string combined;
    size_t lines = 0;
    for (const HeaderField& f : headers) {
        if (!iequals(f.name, c.name))
            continue;
        if (compares) {
            if (lines)
                combined += ", ";
            combined += f.value;
        }
        lines++;
    }
    switch (c.kind) {
    case HeaderCondition::Kind::Present: return lines > 0;
    case HeaderCondition::Kind::Absent: return lines == 0;
    case HeaderCondition::Kind::Exact: return lines > 0 && combined == c.value;
    case HeaderCondition::Kind::Prefix: return lines > 0 && combined.starts_with(c.value);
    }
    return false;
}

bool path_holds(const RouteMatch& m, std::string_view path)
{
    switch (m.path_kind) {
    case PathMatch::Any: return true;
    case PathMatch::Exact: return path == m.path;
    case PathMatch::Prefix: return path.starts_with(m.path);
    case PathMatch::Regex:
        if (m.path_regex)
            return m.path_regex->full_match(path);
        // a hand-built policy the Router has not seen: correct, not fast
        if (auto re = CompiledRegex::compile(m.path, nullptr, nullptr))
            return re->full_match(path);
        return false;
    }
    return false;
}

bool method_holds(const RouteMatch& m, const RequestView& request)
{
    return m.methods.empty() || std::find(m.methods.begin(), m.methods.end(), request.method) != m.methods.end();
}

bool host_holds(const RouteMatch& m, const RequestView& request)
{
    if (!m.host)
        return true;
    const auto host = request_host(request.headers);
    return host && *host == *m.host;
}

bool query_holds(const QueryCondition& q, const RequestView& request)
{
    const auto v = request_query_param(request.target, q.name);
    return v && (q.kind == QueryCondition::Kind::Present || *v == q.value);
}

bool source_holds(const RouteMatch& m, const RequestView& request)
{
    return m.sources.empty() ||
           std::any_of(m.sources.begin(), m.sources.end(),
                       [&](const Cidr& c) { return c.contains(request.client_family, request.client_ip.data()); });
}

bool claim_holds(const ClaimCondition& c, const Claims& claims)
{
    return c.kind == ClaimCondition::Kind::Present ? claims.has(c.claim) : claims.equals(c.claim, c.value);
}

// Everything but claims.
bool request_conditions_hold(const RouteMatch& m, const RequestView& request)
{
    if (!method_holds(m, request) || !host_holds(m, request) || !path_holds(m, request_path(request.target)))
        return false;
    for (const HeaderCondition& c : m.headers)
        if (!header_holds(c, request.headers))
            return false;
    for (const QueryCondition& q : m.query)
        if (!query_holds(q, request))
            return false;
    return source_holds(m, request);
}

bool claim_conditions_hold(const RouteMatch& m, const Claims* claims)
{
    if (m.claims.empty())
        return true;
    if (!claims)
        return false;
    for (const ClaimCondition& c : m.claims)
        if (!claim_holds(c, *claims))
            return false;
    return true;
}

void compile_regex(RouteMatch& m)
{
    if (m.path_kind == PathMatch::Regex && !m.path_regex)
        m.path_regex = CompiledRegex::compile(m.path, nullptr, nullptr);
}

// Cumulative-weight choice shared by clusters of a route and endpoints of a
// weighted cluster: first index with x < cum, x = random % total.
template <class Items, class WeightOf>
size_t cumulative_choice(const Items& items, uint32_t random, WeightOf weight_of)
{
    uint64_t total = 0;
    for (const auto& it : items)
        total += weight_of(it);
    if (total == 0)
        return 0;
    const uint64_t x = random % total;
    uint64_t cum = 0;
    for (size_t i = 0; i < items.size(); i++) {
        cum += weight_of(items[i]);
        if (x < cum)
            return i;
    }
    return items.size() - 1;  // unreachable: x < total == final cum
}

}  // namespace

bool Claims::equals(std::string_view name, std::string_view value) const
{
    auto it = members.find(name);
    return it != members.end() && std::find(it->second.begin(), it->second.end(), value) != it->second.end();
}

std::string_view request_path(std::string_view target)
{
    return target.substr(0, target.find('?'));
}

std::optional<std::string_view> request_query_param(std::string_view target, std::string_view name)
{
    const size_t q = target.find('?');
    if (q == std::string_view::npos)
        return std::nullopt;
    std::string_view rest = target.substr(q + 1);
    while (true) {
        const size_t amp = rest.find('&');
        const std::string_view pair = rest.substr(0, amp);
        const size_t eq = pair.find('=');
        if (pair.substr(0, eq) == name)
            return eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1);
        if (amp == std::string_view::npos)
            return std::nullopt;
        rest.remove_prefix(amp + 1);
    }
}

std::optional<std::string_view> request_cookie(std::span<const HeaderField> headers, std::string_view name)
{
    for (const HeaderField& f : headers) {
        if (!iequals(f.name, "cookie"))
            continue;
        std::string_view rest = f.value;
        while (true) {
            const size_t semi = rest.find(';');
            const std::string_view pair = trim_ows(rest.substr(0, semi));
            const size_t eq = pair.find('=');
            if (eq != std::string_view::npos && pair.substr(0, eq) == name)
                return pair.substr(eq + 1);
            if (semi == std::string_view::npos)
                break;
            rest.remove_prefix(semi + 1);
        }
    }
    return std::nullopt;
}

std::optional<std::string> request_key(const RequestKey& key, const RequestView& request, const Claims* claims)
{
    switch (key.kind) {
    case RequestKey::Kind::Header:
        for (const HeaderField& f : request.headers)
            if (iequals(f.name, key.name))
                return std::string(f.value);
        return std::nullopt;
    case RequestKey::Kind::Cookie:
        if (auto v = request_cookie(request.headers, key.name))
            return std::string(*v);
        return std::nullopt;
    case RequestKey::Kind::SourceIp: {
        const auto* ip = reinterpret_cast<const char*>(request.client_ip.data());
        if (request.client_family == AF_INET)
            return std::string(ip, 4);
        if (request.client_family == AF_INET6)
            return is_v4_mapped(request.client_ip) ? std::string(ip + 12, 4) : std::string(ip, 16);
        return std::nullopt;
    }
    case RequestKey::Kind::Claim:
        if (claims) {
            auto it = claims->members.find(key.name);
            if (it != claims->members.end() && !it->second.empty())
                return it->second.front();
        }
        return std::nullopt;
    }
    return std::nullopt;
}

bool condition_holds(const RouteMatch& m, const ConditionRef& c, const RequestView& request, const Claims* claims)
{
    using K = ConditionRef::Kind;
    switch (c.kind) {
    case K::Method: return method_holds(m, request);
    case K::Host: return host_holds(m, request);
    case K::Path: return path_holds(m, request_path(request.target));
    case K::Header: return header_holds(m.headers.at(c.index), request.headers);
    case K::Query: return query_holds(m.query.at(c.index), request);
    case K::Source: return source_holds(m, request);
    case K::Claim: return claims && claim_holds(m.claims.at(c.index), *claims);
    }
    return false;
}

bool conditions_hold(const RouteMatch& m, const RequestView& request, const Claims* claims)
{
    return request_conditions_hold(m, request) && claim_conditions_hold(m, claims);
}

std::optional<std::string> request_host(std::span<const HeaderField> headers)
{
    for (const HeaderField& f : headers) {
        if (!iequals(f.name, "host"))
            continue;
        std::string_view v = f.value;
        if (!v.empty() && v.front() == '[') {
            const size_t close = v.find(']');
            if (close != std::string_view::npos)
                v = v.substr(0, close + 1);
        } else {
            v = v.substr(0, v.find(':'));
        }
        return text::lower(v);
    }
    return std::nullopt;
}

Router::Router(Policy policy) : policy_(std::move(policy))
{
    scopes_.reserve(policy_.routes.size());
    for (Route& r : policy_.routes) {
        // the model promises lower-cased hosts and header names; a
        // hand-built Policy that breaks the promise must not make the slow
        // path disagree with the kernel tables, which lower-case both
        if (r.match.host)
            *r.match.host = text::lower(*r.match.host);
        compile_regex(r.match);
        if (r.rbac)
            for (RbacRule& rule : r.rbac->rules)
                compile_regex(rule.when);
        RouteScope scope;
        scope.every_listener = r.listeners.empty();
        for (const std::string& name : r.listeners)
            for (uint32_t i = 0; i < policy_.listeners.size(); i++)
                if (policy_.listeners[i].name == name)
                    scope.listeners.push_back(i);
        std::sort(scope.listeners.begin(), scope.listeners.end());
        for (size_t i = 0; r.jwt && i < policy_.jwt_providers.size(); i++)
            if (policy_.jwt_providers[i].name == *r.jwt)
                scope.jwt = i;
        scopes_.push_back(std::move(scope));
    }
}

bool Router::matches(uint32_t index, const RequestView& request, const ClaimsLookup& claims_for) const
{
    if (index >= policy_.routes.size())
        return false;
    const Route& r = policy_.routes[index];
    const RouteScope& scope = scopes_[index];
    if (!scope.every_listener &&
        !std::binary_search(scope.listeners.begin(), scope.listeners.end(), request.listener))
        return false;
    if (!request_conditions_hold(r.match, request))
        return false;
    if (r.match.claims.empty())
        return true;
    // verification is the expensive part: only for a route that would
    // otherwise apply
    if (!scope.jwt || !claims_for)
        return false;
    return claim_conditions_hold(r.match, claims_for(policy_.jwt_providers[*scope.jwt]));
}

RouteTrace Router::trace(uint32_t index, const RequestView& request, const ClaimsLookup& claims_for) const
{
    RouteTrace t;
    if (index >= policy_.routes.size())
        return t;
    const Route& r = policy_.routes[index];
    const RouteScope& scope = scopes_[index];
    t.in_scope = scope.every_listener ||
                 std::binary_search(scope.listeners.begin(), scope.listeners.end(), request.listener);
    bool others_hold = t.in_scope;
    for (const ConditionRef& c : conditions_of(r.match))
        if (c.kind != ConditionRef::Kind::Claim) {
            const bool held = condition_holds(r.match, c, request, nullptr);
            t.conditions.push_back({c, held});
            others_hold = others_hold && held;
        }
    const Claims* claims = nullptr;
    // as matches(): the token is verified only for a route that would
    // otherwise apply
    if (!r.match.claims.empty() && others_hold && scope.jwt && claims_for) {
        t.claims_verified = true;
        claims = claims_for(policy_.jwt_providers[*scope.jwt]);
        t.claims_present = claims != nullptr;
    }
    for (const ConditionRef& c : conditions_of(r.match))
        if (c.kind == ConditionRef::Kind::Claim)
            t.conditions.push_back({c, condition_holds(r.match, c, request, claims)});
    t.matched = others_hold && (r.match.claims.empty() || claims != nullptr);
    for (const ConditionResult& c : t.conditions)
        t.matched = t.matched && c.held;
    return t;
}

std::optional<uint32_t> Router::route(const RequestView& request, const ClaimsLookup& claims_for) const
{
    if (request.method == "CONNECT")
        return std::nullopt;
    for (uint32_t i = 0; i < policy_.routes.size(); i++)
        if (matches(i, request, claims_for))
            return i;
    return std::nullopt;
}

std::optional<size_t> Router::choose_cluster(const Route& route, uint32_t random)
{
    if (route.clusters.empty())
        return std::nullopt;
    if (route.clusters.size() == 1)
        return 0;
    return cumulative_choice(route.clusters, random, [](const WeightedCluster& c) { return c.weight; });
}

std::optional<size_t> Router::choose_endpoint(const Cluster& cluster, uint64_t rr_counter, uint32_t random)
{
    if (cluster.endpoints.empty())
        return std::nullopt;
    uint64_t total = 0;
    for (const Endpoint& e : cluster.endpoints)
        total += e.weight;
    // a weighted cluster whose weights sum to 0 falls back to round robin,
    // as in the kernel
    if (cluster.lb == LbPolicy::Weighted && total > 0)
        return cumulative_choice(cluster.endpoints, random, [](const Endpoint& e) { return e.weight; });
    return static_cast<size_t>(rr_counter % cluster.endpoints.size());
}

}  // namespace l7fast::policy
