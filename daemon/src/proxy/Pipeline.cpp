#include "proxy/Pipeline.hpp"

#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>

#include "lb/KeyHash.hpp"
#include "semantics/Mutation.hpp"
#include "semantics/Rbac.hpp"
#include "proxy/ProxyServer.hpp"

namespace l7fast::proxy {

namespace {

bool same_limit(const policy::RateLimit& a, const policy::RateLimit& b)
{
    return a.rate == b.rate && a.burst == b.burst && a.key == b.key && a.max_keys == b.max_keys;
}

policy::PolicyError located(const policy::SourceLocation& where, std::string what, std::string why)
{
    return policy::PolicyError{where.file, where.line, where.column, std::move(what), std::move(why)};
}

}  // namespace

void set_client_address(policy::RequestView& view, const l7_conn_key& key)
{
    static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    view.client_ip = {};
    view.client_family = 0;
    if (key.family == AF_INET) {
        view.client_family = AF_INET;
        std::memcpy(view.client_ip.data(), &key.client_ip[0], 4);
    } else if (key.family == AF_INET6) {
        const auto* b = reinterpret_cast<const uint8_t*>(key.client_ip);
        if (std::memcmp(b, kMapped, sizeof(kMapped)) == 0) {
            view.client_family = AF_INET;
            std::memcpy(view.client_ip.data(), b + 12, 4);
        } else {
            view.client_family = AF_INET6;
            std::memcpy(view.client_ip.data(), b, 16);
        }
    }
}

std::optional<policy::PolicyError> build_pipeline_state(PolicyRuntime& rt, const PolicyRuntime* previous,
                                                        const BucketSource& buckets)
{
    const policy::Policy& pol = rt.policy();

    rt.verifiers.clear();
    for (const auto& p : pol.jwt_providers) {
        std::string why;
        auto v = auth::Verifier::create(p, &why);
        if (!v)
            return located(p.where, "jwt_provider \"" + p.name + "\"", why);
        rt.verifiers.push_back(std::make_shared<auth::Verifier>(std::move(*v)));
    }

    rt.balancers.clear();
    for (const auto& c : pol.clusters) {
        if (c.lb != policy::LbPolicy::RingHash && c.lb != policy::LbPolicy::Maglev) {
            rt.balancers.push_back(nullptr);
            continue;
        }
        std::string why;
        auto b = lb::HashBalancer::build(c, &why);
        if (!b)
            return located(c.where, "cluster \"" + c.name + "\"", why);
        rt.balancers.push_back(std::make_shared<const lb::HashBalancer>(std::move(*b)));
    }

    rt.limiters.clear();
    rt.route_jwt.clear();
    rt.route_clusters.clear();
    for (const auto& r : pol.routes) {
        std::shared_ptr<policy::RateLimiter> limiter;
        if (r.rate_limit) {
            // the previous generation's buckets, when this is the same limit
            // on the same route (by name: routes move, names stay)
            for (size_t i = 0; previous && i < previous->policy().routes.size() && i < previous->limiters.size(); i++) {
                const auto& pr = previous->policy().routes[i];
                if (pr.name == r.name && pr.rate_limit && previous->limiters[i] &&
                    same_limit(*pr.rate_limit, *r.rate_limit)) {
                    limiter = previous->limiters[i];
                    break;
                }
            }
            if (!limiter) {
                // the kernel keeps the buckets of header and source-address
                // keys (bpf/lib/decide.h l7_rate_key_of), not of cookies or
                // claims
                std::optional<dataplane::SharedBucket> shared;
                const auto& key = r.rate_limit->key;
                if (buckets && !key)
                    shared = buckets(std::nullopt);
                else if (buckets && (key->kind == policy::RequestKey::Kind::Header ||
                                     key->kind == policy::RequestKey::Kind::SourceIp))
                    shared = buckets(r.rate_limit->max_keys);
                limiter = std::make_shared<policy::RateLimiter>(*r.rate_limit, std::move(shared));
            }
        }
        rt.limiters.push_back(std::move(limiter));

        std::optional<size_t> jwt;
        if (r.jwt) {
            for (size_t i = 0; i < pol.jwt_providers.size(); i++)
                if (pol.jwt_providers[i].name == *r.jwt)
                    jwt = i;
            if (!jwt)
                return located(r.where, "route \"" + r.name + "\".jwt", "no jwt_provider named \"" + *r.jwt + "\"");
        }
        rt.route_jwt.push_back(jwt);

        std::vector<size_t> clusters;
        for (const auto& wc : r.clusters) {
            const policy::Cluster* c = pol.find_cluster(wc.cluster);
            if (!c)
                return located(r.where, "route \"" + r.name + "\"", "no cluster named \"" + wc.cluster + "\"");
            clusters.push_back(static_cast<size_t>(c - pol.clusters.data()));
        }
        if (clusters.empty() && !r.direct_response)
            return located(r.where, "route \"" + r.name + "\"", "neither a cluster nor a direct_response");
        rt.route_clusters.push_back(std::move(clusters));
    }
    return std::nullopt;
}

RequestAuth::RequestAuth(const PolicyRuntime& rt, const policy::RequestView& view,
                         std::chrono::system_clock::time_point now)
    : rt_(rt), view_(view), now_(now), results_(rt.verifiers.size())
{
}

const auth::Result& RequestAuth::result(size_t provider)
{
    auto& slot = results_.at(provider);
    if (!slot)
        slot = auth::authenticate(*rt_.verifiers.at(provider), view_, now_);
    return *slot;
}

const policy::Claims* RequestAuth::claims(size_t provider)
{
    const auth::Result& r = result(provider);
    return r.ok() ? &r.claims : nullptr;
}

policy::ClaimsLookup RequestAuth::lookup()
{
    return [this](const policy::JwtProvider& p) -> const policy::Claims* {
        const auto& all = rt_.policy().jwt_providers;
        for (size_t i = 0; i < all.size(); i++)
            if (&all[i] == &p || all[i].name == p.name)
                return claims(i);
        return nullptr;
    };
}

Verdict decide(const PolicyRuntime& rt, uint32_t route, const policy::RequestView& view,
               RequestAuth& auth, uint64_t now_ns)
{
    const policy::Route& r = rt.policy().routes.at(route);
    Verdict v;
    if (route < rt.route_jwt.size() && rt.route_jwt[route]) {
        const auth::Result& res = auth.result(*rt.route_jwt[route]);
        v.jwt_reason = res.reason;
        if (!res.ok()) {
            v.kind = res.status == auth::Status::Missing ? Verdict::Kind::JwtMissing : Verdict::Kind::JwtInvalid;
            return v;
        }
        v.claims = &res.claims;
    }
    if (r.rbac) {
        const policy::RbacDecision d = policy::evaluate(*r.rbac, view, v.claims);
        v.rbac_rule = d.rule;
        if (!d.allowed) {
            v.kind = Verdict::Kind::RbacDenied;
            return v;
        }
    }
    if (r.rate_limit && route < rt.limiters.size() && rt.limiters[route]) {
        std::optional<std::string> key;
        if (r.rate_limit->key)
            key = policy::request_key(*r.rate_limit->key, view, v.claims);
        std::optional<std::string_view> k;
        if (key)
            k = *key;
        const uint64_t wait = rt.limiters[route]->take(k, now_ns ? now_ns : 1);
        if (wait) {
            v.kind = Verdict::Kind::RateLimited;
            v.retry_after_ms = wait;
            return v;
        }
    }
    v.kind = r.direct_response ? Verdict::Kind::Direct : Verdict::Kind::Forward;
    return v;
}

policy::LocalResponse local_response_for(const policy::Route& route, const Verdict& v, bool close)
{
    switch (v.kind) {
    case Verdict::Kind::JwtMissing: return policy::unauthorized(false, close);
    case Verdict::Kind::JwtInvalid: return policy::unauthorized(true, close);
    case Verdict::Kind::RbacDenied:
        if (route.rbac)
            return policy::rbac_denied(*route.rbac, close);
        break;
    case Verdict::Kind::RateLimited: return policy::too_many_requests(v.retry_after_ms, close);
    case Verdict::Kind::Direct:
        if (route.direct_response)
            return policy::direct_response(*route.direct_response, close);
        break;
    case Verdict::Kind::Forward: break;
    }
    return policy::local_response(500, "internal error\n", true);
}

int local_status(const policy::Route& route, const Verdict& v)
{
    switch (v.kind) {
    case Verdict::Kind::JwtMissing:
    case Verdict::Kind::JwtInvalid: return 401;
    case Verdict::Kind::RbacDenied: return route.rbac ? route.rbac->deny_status : 500;
    case Verdict::Kind::RateLimited: return 429;
    case Verdict::Kind::Direct: return route.direct_response ? route.direct_response->status : 500;
    case Verdict::Kind::Forward: break;
    }
    return 500;
}

std::string rbac_rule_name(const policy::Route& route, const Verdict& v)
{
    if (route.rbac && v.rbac_rule >= 0 && static_cast<size_t>(v.rbac_rule) < route.rbac->rules.size())
        return route.rbac->rules[static_cast<size_t>(v.rbac_rule)].name;
    return "default";
}

std::string verdict_reason(const policy::Route& route, const Verdict& v)
{
    return verdict_reason(v.kind, v.jwt_reason,
                          v.kind == Verdict::Kind::RbacDenied ? rbac_rule_name(route, v) : std::string());
}

std::string verdict_reason(Verdict::Kind kind, auth::Reason jwt_reason, std::string_view rule)
{
    switch (kind) {
    case Verdict::Kind::JwtMissing:
        return "jwt_missing";
    case Verdict::Kind::JwtInvalid:
        return "jwt_" + std::string(auth::reason_name(jwt_reason));
    case Verdict::Kind::RbacDenied:
        return "rbac_denied:" + std::string(rule);
    case Verdict::Kind::RateLimited:
        return "rate_limited";
    case Verdict::Kind::Direct:
        return "direct_response";
    case Verdict::Kind::Forward:
        break;
    }
    return {};
}

UpstreamHead upstream_request_head(const PolicyRuntime& rt, uint32_t route, std::string_view head,
                                   const policy::Claims* claims)
{
    UpstreamHead out;
    const policy::Route& r = rt.policy().routes.at(route);
    std::vector<policy::ForwardedHeader> forwarded;
    if (route < rt.route_jwt.size() && rt.route_jwt[route])
        forwarded = policy::forwarded_claim_headers(rt.policy().jwt_providers[*rt.route_jwt[route]], claims);
    if (r.request_headers.empty() && forwarded.empty())
        return out;
    auto bytes = policy::mutate_request_head(head, r.request_headers, forwarded);
    out.rewritten = true;
    out.ok = bytes.has_value();
    if (bytes)
        out.bytes = std::move(*bytes);
    return out;
}

std::optional<size_t> choose_endpoint(const PolicyRuntime& rt, size_t cluster,
                                      const policy::RequestView& view, const policy::Claims* claims,
                                      const EndpointInputs& in)
{
    const policy::Cluster& c = rt.policy().clusters.at(cluster);
    const size_t n = c.endpoints.size();
    std::vector<bool> up(n, true);
    bool all_up = true;
    if (in.available)
        for (size_t e = 0; e < n; e++)
            all_up &= (up[e] = in.available(static_cast<uint32_t>(e)));
    const lb::HashBalancer* hb = cluster < rt.balancers.size() ? rt.balancers[cluster].get() : nullptr;
    if (!hb) {
        const uint64_t rr = in.rr_counter ? in.rr_counter() : 0;
        const uint32_t random = in.random32 ? in.random32() : 0;
        if (all_up)
            return policy::Router::choose_endpoint(c, rr, random);
        // the same choice among the endpoints that are in (a weighted
        // cluster's endpoints of weight 0 stay out of it)
        policy::Cluster sub = c;
        sub.endpoints.clear();
        std::vector<size_t> index;
        const bool weighted = c.lb == policy::LbPolicy::Weighted && std::any_of(c.endpoints.begin(), c.endpoints.end(),
                                                                               [](const auto& e) { return e.weight; });
        for (size_t e = 0; e < n; e++) {
            if (!up[e] || (weighted && c.endpoints[e].weight == 0))
                continue;
            sub.endpoints.push_back(c.endpoints[e]);
            index.push_back(e);
        }
        const auto e = policy::Router::choose_endpoint(sub, rr, random);
        if (!e)
            return std::nullopt;
        return index.at(*e);
    }
    std::optional<std::string> key;
    if (c.hash_key)
        key = policy::request_key(*c.hash_key, view, claims);
    // without its key a request lands anywhere, as in Envoy
    const uint64_t hash = key ? lb::key_hash(*key) : (in.random64 ? in.random64() : 0);
    const lb::HashBalancer::ActiveRequests* active = hb->bounded() && in.active ? &in.active : nullptr;
    const std::optional<uint32_t> e = hb->choose_available(hash, up, active);
    if (!e)
        return std::nullopt;
    return static_cast<size_t>(*e);
}

std::vector<size_t> retry_endpoints(const policy::Cluster& cluster, size_t first, uint32_t retries,
                                    const std::function<bool(uint32_t)>& available)
{
    std::vector<size_t> out;
    const size_t n = cluster.endpoints.size();
    const bool weighted = cluster.lb == policy::LbPolicy::Weighted;
    for (size_t step = 1; step < n && out.size() < retries; step++) {
        const size_t i = (first + step) % n;
        if (weighted && cluster.endpoints[i].weight == 0)
            continue;
        if (available && !available(static_cast<uint32_t>(i)))
            continue;
        out.push_back(i);
    }
    return out;
}

}  // namespace l7fast::proxy
