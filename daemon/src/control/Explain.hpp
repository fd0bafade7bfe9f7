// `l7fastctl explain` (D-Bus Explain): what the policy does with one request,
// and why, computed by the code that decides for real: the request head is
// built and parsed by the slow path's parser (the kernel's, compiled
// natively), its path normalised as the slow path does, the routes tried
// with Router::trace (Router::route's own conditions), the matched route's
// stages run by proxy::decide (JWT verified with the policy's keys, RBAC
// evaluated), the upstream head rewritten by upstream_request_head, the
// endpoint chosen by proxy::choose_endpoint; only the rate limit is not
// run (explain takes no token from anyone's bucket) and is described.
// Whether the kernel would take the request follows the data plane's own
// order of hand-over reasons (bpf/l7fast.bpf.c, l7_decide) and names them
// as `l7fastctl stats` does (to_slow_path_<reason>).
//
// The answer is one JSON document (docs/l7fastctl.md lists its keys); the
// daemon computes it on its running policy, l7fastctl on a file offline,
// and render_explain_text turns either into text.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "compiler/PolicyCompiler.hpp"
#include "proxy/ProxyServer.hpp"

namespace l7fast::control {

struct ExplainRequest {
    std::string method;
    // origin-form ("/a?b") or absolute ("http://host[:port]/a?b"; the
    // authority becomes the Host header unless one is given)
    std::string url;
    std::vector<std::pair<std::string, std::string>> headers;  // in order
    std::string source;    // the client's IP address; empty: 127.0.0.1
    std::string listener;  // a listener's name; empty: the first listener
    // a JWT, sent where the policy's providers look for it (each distinct
    // header or cookie once)
    std::string token;
};

// Bounds on what a caller may ask (D-Bus callers are hostile).
inline constexpr size_t kExplainMaxHeaders = 64;
inline constexpr size_t kExplainMaxBytes = 32768;

// The request as the JSON l7fastctl sends over D-Bus, and back; nullopt with
// *error for a document that is not one (unknown member, wrong type, over
// the bounds).
std::string explain_request_json(const ExplainRequest& r);
std::optional<ExplainRequest> parse_explain_request(std::string_view json, std::string* error);

// What is known of the kernel's placement of routes and listeners.
struct ExplainPlacement {
    std::vector<policy::RoutePlacement> routes;        // per policy route; empty: not known
    std::vector<policy::ListenerPlacement> listeners;  // per policy listener
    std::string source;  // "l7fastd" (the running daemon's) or "compiled offline"
};

struct ExplainContext {
    std::string policy_source;  // "running" or the file's name
    uint64_t generation = 0;    // 0: not running
    std::chrono::system_clock::time_point now = std::chrono::system_clock::now();
    // the running daemon's endpoint health: "" for an endpoint that takes
    // requests, else why not ("drained", "unhealthy+ejected"); empty
    // function (offline): every endpoint is in
    std::function<std::string(const policy::SocketAddress&)> endpoint_out;
};

// The explanation as a JSON document; nullopt with *error when the request
// cannot be built (bad method or URL, a header that is not a field line,
// an unknown listener, a source that is not an IP address, a token and no
// provider to send it to).
std::optional<std::string> explain(const proxy::PolicyRuntime& rt, const ExplainRequest& request,
                                   const ExplainPlacement& placement, const ExplainContext& context,
                                   std::string* error);

// The placement of an offline policy as compile() decides it (no daemon:
// the kernel's features are not known).
ExplainPlacement offline_placement(const policy::Policy& pol);

// The text `l7fastctl explain` prints for an explain() document; false
// with *error when `json` is not one.
bool render_explain_text(const std::string& json, std::string* out, std::string* error);

}  // namespace l7fast::control
