#include "policy/Router.hpp"

#include <algorithm>

#include "policy/Text.hpp"

namespace l7fast::policy {

namespace {

using text::iequals;

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

std::string_view request_path(std::string_view target)
{
    return target.substr(0, target.find('?'));
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
        RouteScope scope;
        scope.every_listener = r.listeners.empty();
        for (const std::string& name : r.listeners)
            for (uint32_t i = 0; i < policy_.listeners.size(); i++)
                if (policy_.listeners[i].name == name)
                    scope.listeners.push_back(i);
        std::sort(scope.listeners.begin(), scope.listeners.end());
        scopes_.push_back(std::move(scope));
    }
}

bool Router::header_conditions_hold(const RouteMatch& m, std::span<const HeaderField> headers) const
{
    for (const HeaderCondition& c : m.headers) {
        // RFC 9110 5.3: several field lines of one name are one value, joined
        // with ", " in order
        std::string combined;
        size_t lines = 0;
        for (const HeaderField& f : headers) {
            if (!iequals(f.name, c.name))
                continue;
            if (lines++)
                combined += ", ";
            combined += f.value;
        }
        if (lines == 0)
            return false;
        if (c.kind == HeaderCondition::Kind::Exact && combined != c.value)
            return false;
    }
    return true;
}

bool Router::matches(uint32_t index, const RequestView& request) const
{
    if (index >= policy_.routes.size())
        return false;
    const Route& r = policy_.routes[index];
    const RouteScope& scope = scopes_[index];
    const RouteMatch& m = r.match;

    if (!scope.every_listener &&
        !std::binary_search(scope.listeners.begin(), scope.listeners.end(), request.listener))
        return false;
    if (!m.methods.empty() && std::find(m.methods.begin(), m.methods.end(), request.method) == m.methods.end())
        return false;
    if (m.host) {
        const auto host = request_host(request.headers);
        if (!host || *host != *m.host)
            return false;
    }
    const std::string_view path = request_path(request.target);
    if (m.path_kind == PathMatch::Exact && path != m.path)
        return false;
    if (m.path_kind == PathMatch::Prefix && !path.starts_with(m.path))
        return false;
    return header_conditions_hold(m, request.headers);
}

std::optional<uint32_t> Router::route(const RequestView& request) const
{
    if (request.method == "CONNECT")
        return std::nullopt;
    for (uint32_t i = 0; i < policy_.routes.size(); i++)
        if (matches(i, request))
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
