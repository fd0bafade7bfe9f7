#include "proxy/RequestAnalysis.hpp"

#include <random>

#include "common/Clock.hpp"
#include "common/Log.hpp"
#include "semantics/PathNormalize.hpp"
#include "proxy/ProxyServer.hpp"

namespace l7fast::proxy {
namespace {

uint32_t random_u32()
{
    thread_local std::mt19937 rng{std::random_device{}()};
    return rng();
}

uint64_t random_u64()
{
    thread_local std::mt19937_64 rng{std::random_device{}()};
    return rng();
}

void count_verdict(UserRouteExtras& e, const policy::Route& route, const Verdict& v)
{
    switch (v.kind) {
    case Verdict::Kind::JwtMissing: e.jwt_missing++; break;
    case Verdict::Kind::JwtInvalid: e.jwt_invalid++; break;
    case Verdict::Kind::RbacDenied:
        e.rbac_denied++;
        e.rbac_denied_by_rule[rbac_rule_name(route, v)]++;
        break;
    case Verdict::Kind::RateLimited: e.rate_limited++; break;
    case Verdict::Kind::Direct: e.direct_responses++; break;
    case Verdict::Kind::Forward: break;
    }
}

// What l7fast refuses before it looks at the request's route: an
// expectation or a method it does not support, an absolute-form target
// whose origin-form head it cannot parse, a path it cannot normalise.
// Leaves ex's origin-form request, fields and view (but for the client and
// listener) as the policy sees them.
std::optional<Refuse> read_request(RequestExchange& ex, const l7_conn_key& client)
{
    const l7_msg& m = ex.m;
    if (m.flags & L7_MF_EXPECT_OTHER)
        return Refuse{417, "unsupported expectation\n", "unsupported:expect"};
    if (m.method == L7_M_CONNECT)
        return Refuse{501, "CONNECT is not supported\n", "unsupported:connect"};

    const std::string_view head(ex.buffered.data(), m.hdr_len);
    if (m.flags & L7_MF_ABSOLUTE_FORM) {
        ex.origin_head = origin_form_head(head, m);
        if (parse_head({ex.origin_head.data(), ex.origin_head.size()}, true, &ex.origin) != L7_P_OK)
            // only a limit can refuse it: it is 2 bytes longer at most
            return Refuse{ex.origin.status ? ex.origin.status : 400, "malformed request\n",
                          std::string("bad_request:") + parse_error_name(ex.origin.error), "malformed request"};
    }
    const l7_msg& rm = ex.origin_head.empty() ? m : ex.origin;
    const std::string_view routed = ex.origin_head.empty() ? head : std::string_view(ex.origin_head);

    ex.fields.reserve(rm.n_hdrs);
    for (unsigned i = 0; i < rm.n_hdrs && i < L7_MAX_HEADERS; i++)
        ex.fields.push_back({routed.substr(rm.hdr[i].name_off, rm.hdr[i].name_len),
                             routed.substr(rm.hdr[i].val_off, rm.hdr[i].val_len)});
    ex.view.method = ex.method;
    ex.view.target = routed.substr(rm.target_off, rm.target_len);
    if (rm.flags & L7_MF_PATH_NOT_NORMAL) {
        policy::NormalizedTarget normal = policy::normalize_target(ex.view.target);
        if (!normal.error.empty()) {
            log::debug(dataplane::to_string(client), ": ", normal.error, ": 400");
            return Refuse{400, normal.error + "\n", std::string("bad_request:") + normal.cause};
        }
        ex.normal_target = std::move(normal.target);
        ex.normal_head.reserve(routed.size() + ex.normal_target.size());
        ex.normal_head.append(routed.substr(0, rm.target_off));
        ex.normal_head.append(ex.normal_target);
        ex.normal_head.append(routed.substr(size_t{rm.target_off} + rm.target_len));
        ex.view.target = ex.normal_target;
    }
    ex.view.headers = ex.fields;
    return std::nullopt;
}

// The head the upstream gets when the route does not rewrite it.
std::string_view received_head(const RequestExchange& ex)
{
    if (!ex.normal_head.empty())
        return ex.normal_head;
    if (!ex.origin_head.empty())
        return ex.origin_head;
    return {ex.buffered.data(), ex.m.hdr_len};
}

// A chunked body whose framing is already wrong in the bytes that came with
// the head is refused before anything is forwarded (a framing error in
// bytes that arrive later aborts the upstream exchange mid-body: the
// upstream never sees a complete request).
bool chunked_body_already_malformed(const RequestExchange& ex)
{
    const l7_msg& m = ex.m;
    if (m.body_kind != L7_BODY_CHUNKED || ex.buffered.size() <= m.hdr_len)
        return false;
    BodyFramer probe(m.body_kind, m.content_length);
    return probe.feed(ex.buffered.subspan(m.hdr_len)) < 0;
}

// forward: a cluster, an endpoint, other endpoints after a connect failure
Outcome choose_upstream(RequestExchange& ex, ProxyServer& server, uint32_t ri)
{
    const PolicyRuntime& rt = *ex.rt;
    const policy::Route& route = *ex.route;
    const bool close = ex.close_after_early_answer();
    const auto& route_clusters = rt.route_clusters[ri];
    const size_t ci = policy::Router::choose_cluster(route, random_u32()).value_or(0);
    const size_t cluster_index = route_clusters.at(ci);
    const policy::Cluster& cluster = rt.policy().clusters[cluster_index];
    ex.record->set_cluster(cluster.name);
    const auto& pools = rt.endpoint_pool[cluster_index];
    EndpointInputs inputs;
    inputs.rr_counter = [&] { return server.next_rr(cluster.name); };
    inputs.random32 = [] { return random_u32(); };
    inputs.random64 = [] { return random_u64(); };
    inputs.active = [&](uint32_t e) { return e < pools.size() ? server.active_requests(pools[e]) : 0u; };
    inputs.available = [&](uint32_t e) { return e >= pools.size() || server.health().available(pools[e]); };
    const std::optional<size_t> first = choose_endpoint(rt, cluster_index, ex.view, ex.verdict.claims, inputs);
    if (!first) {
        ex.record->set_reason("no_healthy_upstream");
        return Answer{503, "no healthy upstream\n", close};
    }
    UpstreamHead upstream_head = upstream_request_head(rt, ri, received_head(ex), ex.verdict.claims);
    if (!upstream_head.ok) {
        ex.record->set_reason("bad_request:mutation");
        return Answer{400, "malformed request\n", close};
    }
    Forward f;
    f.cluster = &cluster;
    f.pools = &pools;
    f.attempts.push_back(*first);
    for (size_t e : retry_endpoints(cluster, *first, route.connect_retries, inputs.available))
        f.attempts.push_back(e);
    if (upstream_head.rewritten) {
        ex.upstream_head = std::move(upstream_head.bytes);
        f.head = ex.upstream_head;
    } else {
        f.head = received_head(ex);
    }
    f.timeout = route.timeout.value_or(rt.policy().daemon.request_timeout);
    return f;
}

}  // namespace

RequestExchange::RequestExchange(std::shared_ptr<const PolicyRuntime> runtime, const l7_msg& msg,
                                 std::span<const char> in)
    : rt(std::move(runtime)), m(msg), buffered(in), close((msg.flags & L7_MF_CLOSE) != 0)
{
    const std::string_view head(buffered.data(), m.hdr_len);
    method = head.substr(0, head.find(' '));
    target = head.substr(m.target_off, m.target_len);
}

Outcome analyse(RequestExchange& ex, ProxyServer& server, const l7_conn_key& client,
                const policy::SocketAddress& listener)
{
    if (std::optional<Refuse> refused = read_request(ex, client))
        return std::move(*refused);
    const PolicyRuntime& rt = *ex.rt;
    const l7_msg& m = ex.m;
    ex.view.listener = static_cast<uint32_t>(rt.policy().listeners.size());
    for (size_t i = 0; i < rt.policy().listeners.size(); i++)
        if (rt.policy().listeners[i].address == listener)
            ex.view.listener = static_cast<uint32_t>(i);
    set_client_address(ex.view, client);

    const uint64_t req_bytes = m.hdr_len + (m.body_kind == L7_BODY_LENGTH ? m.content_length : 0);
    ex.record.emplace(server, client, ex.method, ex.target, ex.fields, req_bytes);
    ExchangeRecord& x = *ex.record;

    // match (claim conditions verify the route's token), then the matched
    // route's JWT, RBAC and rate limit
    ex.auth.emplace(rt, ex.view, std::chrono::system_clock::now());
    std::optional<uint32_t> route_index = rt.router->route(ex.view, ex.auth->lookup());
    if (!route_index) {
        server.count_no_route();
        x.set_reason("no_route");
        return Answer{404, "no route\n", ex.close_after_early_answer()};
    }
    const uint32_t ri = *route_index;
    const policy::Route& route = rt.policy().routes[ri];
    ex.route = &route;
    x.set_route(route);

    ex.verdict = decide(rt, ri, ex.view, *ex.auth, monotonic_ns());
    // a token the reference verifier accepted (iss, aud, exp, nbf included):
    // the kernel may admit its very bytes from now on
    if (ex.verdict.claims && ri < rt.route_jwt.size() && rt.route_jwt[ri])
        server.cache_verified_token(rt, *rt.route_jwt[ri], ex.auth->result(*rt.route_jwt[ri]));
    if (ex.verdict.kind != Verdict::Kind::Forward) {
        count_verdict(server.user_extras_for(route.name), route, ex.verdict);
        x.set_reason(verdict_reason(route, ex.verdict));
        if (ex.verdict.kind != Verdict::Kind::Direct)
            log::debug(dataplane::to_string(client), ": route ", route.name, ": ", x.reason());
        return Local{local_status(route, ex.verdict)};
    }
    if (chunked_body_already_malformed(ex))
        return Answer{400, "malformed chunked body\n", true, "malformed chunked body"};
    return choose_upstream(ex, server, ri);
}

}  // namespace l7fast::proxy
