// The slow path's analysis of one request (HAProxy's http_ana.c to
// ClientSession's mux_h1.c; proxy/Http and bpf/include/l7_http.h parse):
// given a parsed head, what l7fast does with the request — refuse it, answer
// it itself, let the policy answer it, or forward it to which endpoints with
// which head. Synchronous: it reads the session's buffer now, and the
// session does the I/O the outcome says.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "config/Policy.hpp"
#include "dataplane/Abi.hpp"
#include "proxy/ExchangeRecord.hpp"
#include "proxy/Http.hpp"
#include "proxy/Pipeline.hpp"
#include "semantics/Router.hpp"

namespace l7fast::proxy {

class ProxyServer;
struct PolicyRuntime;

// l7fast's own refusal of a request it will not handle (ClientSession::refuse:
// counted by reason, a record of its own); the connection closes, for `why`.
struct Refuse {
    int status = 400;
    std::string text;
    std::string reason;
    const char* why = "closing";
};

// l7fast's own plain-text answer on the exchange's record
// (ClientSession::answer); `why` the connection ends when `close`.
struct Answer {
    int status = 0;
    std::string text;
    bool close = false;
    const char* why = "closing";
};

// The policy answers (RequestExchange::route and ::verdict say how): a
// JWT, RBAC or rate-limit refusal, or the route's direct response.
struct Local {
    int status = 0;
};

// Forwarded to one of `attempts` (endpoint indices into cluster->endpoints,
// the chosen one first, then those tried after a connect failure), with
// `head` as the upstream's request head.
struct Forward {
    const policy::Cluster* cluster = nullptr;
    const std::vector<uint32_t>* pools = nullptr;  // upstream pool id per endpoint
    std::vector<size_t> attempts;
    std::string_view head;
    std::chrono::milliseconds timeout{0};  // for the whole exchange, from the head's write on
};

using Outcome = std::variant<Refuse, Answer, Local, Forward>;

// One request of the slow path, from its parsed head to its end: the policy
// generation it is analysed under, what the analysis derived from the head,
// and the exchange's record. The session holds it until the exchange ends.
//
// `method`, `target`, `fields`, `view` and Forward::head may point into the
// session's buffer (or into origin_head / normal_head here): everything that
// reads them happens before the head is consumed.
struct RequestExchange {
    // `m`: the request as the client sent it (framing, bytes consumed, the
    // target logged), which outlives the exchange; `buffered`: what the
    // session has read of the connection, the head's m.hdr_len bytes first.
    RequestExchange(std::shared_ptr<const PolicyRuntime> runtime, const l7_msg& m, std::span<const char> buffered);
    RequestExchange(const RequestExchange&) = delete;
    RequestExchange& operator=(const RequestExchange&) = delete;

    std::shared_ptr<const PolicyRuntime> rt;
    const l7_msg& m;
    std::span<const char> buffered;
    // the request's Connection: close (or HTTP/1.0 without keep-alive)
    bool close = false;
    // Whether an answer sent without reading the request's body (l7fast's
    // own, before anything is forwarded) ends the connection: the body, if
    // any, is not read, so it closes rather than resynchronise.
    bool close_after_early_answer() const { return close || m.body_kind != L7_BODY_NONE; }
    std::string_view method, target;  // as received

    // An absolute-form target names the authority the request is for: it is
    // routed and forwarded as the origin-form request a gateway regenerates,
    // with Host set to that authority (RFC 9112 3.2.2; the kernel hands it
    // over: absolute_form). That request (origin_head and its parse) is what
    // the policy sees and the upstream gets.
    std::string origin_head;
    l7_msg origin{};
    // A path not in normal form is matched and forwarded normalised (the
    // kernel never takes it: L7_MF_PATH_NOT_NORMAL).
    std::string normal_target, normal_head;

    std::vector<policy::HeaderField> fields;
    policy::RequestView view;
    std::optional<RequestAuth> auth;
    std::optional<ExchangeRecord> record;  // from the time the request is analysed past its refusals
    const policy::Route* route = nullptr;  // the route that takes it
    Verdict verdict;
    std::string upstream_head;  // the head to forward, when the route rewrites it
};

// Analyses the request of `ex`, received on `listener` from `client`: its
// route, verdict, cluster and endpoints. Counts what it decides (no route,
// the route's request, the policy's refusals) and caches a token the
// reference verifier accepted; takes a rate limiter's token and a cluster's
// round-robin turn.
Outcome analyse(RequestExchange& ex, ProxyServer& server, const l7_conn_key& client,
                const policy::SocketAddress& listener);

}  // namespace l7fast::proxy
