// What one exchange of the slow path leaves behind when it ends: its route's
// counters (and its endpoint's), its latency, and its access-log line when
// the log samples it. One place for all of them, whatever ended the
// exchange: a response relayed from upstream, an answer of the policy's, or
// l7fast's own refusal of a request it will not handle.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "config/Policy.hpp"
#include "dataplane/Abi.hpp"
#include "semantics/Router.hpp"

namespace l7fast::proxy {

class ProxyServer;
struct UserRouteExtras;

class ExchangeRecord {
public:
    // Starts the exchange's clock. Sampled by the access log (once, here) or
    // not: a sampled exchange copies what its line quotes of the request,
    // since the head's bytes do not outlive the answer. `fields` give the
    // request id and authority; `bytes_in` the request's bytes when known.
    ExchangeRecord(ProxyServer& server, const l7_conn_key& client, std::string_view method,
                   std::string_view target, std::span<const policy::HeaderField> fields,
                   std::optional<uint64_t> bytes_in);
    ExchangeRecord(const ExchangeRecord&) = delete;
    ExchangeRecord& operator=(const ExchangeRecord&) = delete;

    // The route that takes the request: its counters count the request and
    // its bytes now, and its response at finish().
    void set_route(const policy::Route& route);
    void set_cluster(std::string_view name) { cluster_ = name; }
    // the upstream endpoint, once a connection to it is taken
    void set_endpoint(const policy::SocketAddress* a) { endpoint_ = a; }
    // why l7fast answered as it did, when it knows
    void set_reason(std::string reason) { reason_ = std::move(reason); }
    const std::string& reason() const { return reason_; }

    // The exchange ended with `status`, `bytes_out` bytes written to the
    // client: counters, latency and the access-log line.
    void finish(int status, uint64_t bytes_out);

private:
    ProxyServer& server_;
    l7_conn_key client_;
    uint64_t t0_ns_;
    bool sampled_ = false;
    std::string method_, target_, authority_, request_id_;  // when sampled
    std::optional<uint64_t> bytes_in_;
    const policy::Route* route_ = nullptr;
    dataplane::RouteCounters* counters_ = nullptr;
    UserRouteExtras* extras_ = nullptr;
    std::string_view cluster_;
    const policy::SocketAddress* endpoint_ = nullptr;
    std::string reason_;
};

}  // namespace l7fast::proxy
