#include "proxy/ExchangeRecord.hpp"

#include "common/Clock.hpp"
#include "config/Text.hpp"
#include "proxy/AccessLog.hpp"
#include "proxy/ProxyServer.hpp"

namespace l7fast::proxy {

ExchangeRecord::ExchangeRecord(ProxyServer& server, const l7_conn_key& client, std::string_view method,
                               std::string_view target, std::span<const policy::HeaderField> fields,
                               std::optional<uint64_t> bytes_in)
    : server_(server), client_(client), t0_ns_(monotonic_ns()), bytes_in_(bytes_in)
{
    sampled_ = server_.access_log().sampled();
    if (!sampled_)
        return;
    method_.assign(method);
    target_.assign(target);
    request_id_ = AccessLog::request_id_from(fields);
    for (const auto& f : fields)
        if (policy::text::iequals(f.name, "host")) {
            authority_.assign(f.value);
            break;
        }
}

void ExchangeRecord::set_route(const policy::Route& route)
{
    route_ = &route;
    counters_ = &server_.user_counters_for(route.name);
    extras_ = &server_.user_extras_for(route.name);
    counters_->requests++;
    counters_->bytes_in += bytes_in_.value_or(0);
}

void ExchangeRecord::finish(int status, uint64_t bytes_out)
{
    const uint64_t ns = monotonic_ns() - t0_ns_;
    if (counters_) {
        counters_->add_response(status, bytes_out, ns);
        extras_->latency.add(ns);
        extras_->codes[status]++;
        if (endpoint_) {
            dataplane::RouteCounters& pc = server_.user_endpoint_counters_for(*endpoint_);
            pc.requests++;
            pc.add_response(status, bytes_out, ns);
        }
    }
    if (!sampled_)
        return;
    AccessEntry e;
    e.client = client_address(client_);
    e.method = method_;
    e.target = target_;
    if (route_)
        e.route = route_->name;
    e.status = status;
    e.bytes_in = bytes_in_;
    e.bytes_out = bytes_out;
    e.latency_ns = ns;
    e.reason = reason_;
    e.authority = authority_;
    e.request_id = request_id_;
    e.cluster = cluster_;
    if (endpoint_)
        e.endpoint = endpoint_->str();
    server_.access_log().write(e);
}

}  // namespace l7fast::proxy
