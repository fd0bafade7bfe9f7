// What l7fastd offers its control interface (D-Bus, l7fastctl). The daemon
// implements it; the D-Bus service only marshals.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "l7fast_abi.h"  // L7_STATUS_CLASSES

namespace l7fast::control {

struct ReloadOutcome {
    bool ok = false;
    uint64_t generation = 0;
    std::string error;  // file:line:column: key: message on a policy error
};

struct StatusInfo {
    std::string version;
    std::string state;            // "running" or "degraded"
    std::string degraded_reason;  // why the kernel data plane is not in use
    uint64_t generation = 0;
    std::vector<std::string> policy_files;
    std::vector<std::pair<std::string, std::string>> features;
    uint64_t uptime_sec = 0;
    uint32_t listeners = 0, routes = 0, routes_kernel = 0;
    uint64_t connections = 0;       // client connections open in the slow path
    uint64_t upstream_connections = 0;
    // remote clients' connections whose sessions wait for a request outside
    // l7fastd's epoll set (proxy/ParkSet.hpp)
    uint64_t parked_connections = 0;
    std::string last_reload_error;  // empty when the last reload succeeded
    uint64_t reloads_ok = 0, reloads_failed = 0;  // since start
    // when the policy in force was applied (start or the last successful
    // reload), and when the last reload was attempted (0: none yet); Unix
    // seconds
    uint64_t applied_unix = 0, last_reload_unix = 0;
    std::string log_level;          // error, warning, notice, info or debug
    std::string log_level_source;   // see LogLevelOutcome::source
    std::vector<std::string> warnings;  // unsafe permissions of the policy files
};

// SetLogLevel: the level in force afterwards and where it comes from.
struct ExplainOutcome {
    bool ok = false;
    std::string json;   // control/Explain.hpp's document
    std::string error;  // why the request could not be explained
};

struct LogLevelOutcome {
    bool ok = false;
    std::string level;   // error, warning, notice, info or debug
    std::string source;  // "l7fastctl" (SetLogLevel), "command line"
                         // (--log-level, --trace) or "policy" (daemon.log_level)
    std::string error;   // why a request was refused (an unknown level)
};

// Drain/Undrain: an upstream endpoint taken out of (or put back into) the
// endpoint choice by the operator.
struct DrainOutcome {
    bool ok = false;
    bool changed = false;  // false: it already was (not) drained
    std::string state;     // the endpoint's state afterwards ("drained", "up", "unhealthy", ...)
    std::string error;     // why a request was refused (not an address, in no cluster)
};

struct RouteInfo {
    std::string name;
    std::string listeners;  // comma-separated, "*" for all
    std::string match;      // human summary of the conditions
    std::string clusters;   // "app" or "app:90,canary:10"
    bool kernel = false;    // placement
    std::string reason;     // why it runs in user space
    std::string where;      // file:line:column
};

// Names of the status classes counted in RouteStats/EndpointStats::status,
// by index: GetStats keys and the Prometheus "class" label.
inline constexpr const char* kStatusClass[L7_STATUS_CLASSES] = {"other", "1xx", "2xx", "3xx", "4xx", "5xx"};

// The data plane's responses by code, from its counts by class (`status`)
// and by code (`codes`, L7_KERNEL_CODES): each code it counted, then per
// class what no listed code accounts for, under the class's name ("4xx");
// zeros left out, in the order of L7_KERNEL_CODES then of the classes.
inline std::vector<std::pair<std::string, uint64_t>> kernel_codes(const uint64_t (&status)[L7_STATUS_CLASSES],
                                                                  const uint64_t (&codes)[L7_N_KERNEL_CODES])
{
    std::vector<std::pair<std::string, uint64_t>> out;
    uint64_t listed[L7_STATUS_CLASSES] = {};
#define L7_CODE_ROW(i, code)                                 \
    if (codes[i]) {                                          \
        out.emplace_back(std::to_string(code), codes[i]);    \
        listed[(code) / 100] += codes[i];                    \
    }
    L7_KERNEL_CODES(L7_CODE_ROW)
#undef L7_CODE_ROW
    for (int c = 1; c <= L7_STATUS_CLASSES; c++) {
        const int k = c % L7_STATUS_CLASSES;  // "other" last
        if (status[k] > listed[k])
            out.emplace_back(kStatusClass[k], status[k] - listed[k]);
    }
    return out;
}

struct RouteStats {
    std::string name;
    bool kernel = false;
    uint64_t requests_kernel = 0, requests_user = 0;
    uint64_t status[L7_STATUS_CLASSES] = {};  // [0] other, [1..5] 1xx..5xx
    uint64_t bytes_in = 0, bytes_out = 0;
    std::vector<uint64_t> latency;  // kernel path, log2 buckets from 1 us
    // requests the route's pipeline answered itself: rejections by reason
    // and direct responses (their statuses are in `status` too)
    uint64_t jwt_missing = 0, jwt_invalid = 0, rbac_denied = 0, rate_limited = 0;
    uint64_t direct_responses = 0;
    // rbac_denied by the deciding rule's name ("default": no rule held)
    std::vector<std::pair<std::string, uint64_t>> rbac_denied_by_rule;
    // the slow path's exchanges: durations in buckets with the upper bounds
    // StatsSnapshot::user_latency_bounds (one more bucket above them, not
    // cumulative) and their sum; responses by status code
    std::vector<uint64_t> user_latency;
    uint64_t user_latency_sum_ns = 0;
    std::vector<std::pair<std::string, uint64_t>> user_codes;
    // the data plane's responses by code (kernel_codes())
    std::vector<std::pair<std::string, uint64_t>> kernel_codes;
};

// One upstream address of the policy's clusters: the exchanges forwarded to
// it that have ended, whoever ended them. `requests_*` count exchanges at
// their end (in flight ones are not counted yet); the kernel keeps no
// request size, so there are no request bytes per endpoint.
struct EndpointStats {
    std::string address;   // "ip:port"
    std::string clusters;  // comma-separated clusters that list it
    uint64_t requests_kernel = 0, requests_user = 0;
    uint64_t status[L7_STATUS_CLASSES] = {};  // [0] other, [1..5] 1xx..5xx
    uint64_t bytes_out = 0;
    std::vector<uint64_t> latency;  // log2 buckets, as RouteStats::latency
    // its open upstream connections now: the data plane's pool (kernel
    // slots; opening ones count as busy) and the slow path's own
    uint32_t kernel_idle = 0, kernel_busy = 0, user_idle = 0, user_busy = 0;
    // its health (proxy/UpstreamHealth.hpp): "up", or why it takes no new
    // requests ("drained", "unhealthy", "ejected", joined by '+')
    std::string state = "up";
    bool checked = false;  // an active health check runs on it
    uint64_t checks_passed = 0, checks_failed = 0;
    std::string last_check;  // the last check's outcome ("status 200", "connection refused")
    uint64_t ejections_5xx = 0, ejections_connect = 0;  // since l7fastd started, by trigger
    uint64_t ejected_for_ms = 0;                         // left of the current ejection
};

struct StatsSnapshot {
    uint64_t generation = 0;
    // upper bounds (seconds) of every route's user_latency buckets
    std::vector<double> user_latency_bounds;
    std::vector<RouteStats> routes;
    std::vector<EndpointStats> endpoints;
    std::vector<std::pair<std::string, uint64_t>> counters;  // data-plane counters by name
    uint64_t requests_kernel = 0, requests_user = 0, no_route = 0;
    // requests l7fast refused itself (400 malformed, 408, 417, 501), by
    // reason ("bad_request:duplicate_content_length", ...; ClientSession::refuse)
    std::vector<std::pair<std::string, uint64_t>> refused;
    // client connections the data plane knows, [mode][side]: mode 0 kernel,
    // 1 handed to the slow path; side 0 local, 1 remote; nullopt without
    // a data plane
    std::optional<std::array<std::array<uint64_t, 2>, 2>> dataplane_connections;
};

struct CheckOutcome {
    bool ok = false;
    std::string errors;  // one per line
    uint32_t routes = 0, routes_kernel = 0;
    std::vector<RouteInfo> placement;
};

class ControlApi {
public:
    virtual ~ControlApi() = default;
    virtual ReloadOutcome reload() = 0;
    virtual StatusInfo status() = 0;
    virtual std::vector<RouteInfo> routes() = 0;
    virtual StatsSnapshot stats() = 0;
    // Validates a policy file (and the drop-in directory next to it, if any)
    // without applying it.
    virtual CheckOutcome check_policy(const std::string& path) = 0;
    // A level name, or "reset" for the configured level again; holds until
    // the next SetLogLevel or a restart, reloads included.
    virtual LogLevelOutcome set_log_level(const std::string& level) = 0;
    // Drains (or undrains) an upstream endpoint "IP:PORT" / "[IPv6]:PORT" of
    // the running policy: no new request is sent to a drained endpoint, by
    // either plane; requests in flight finish. Holds across reloads while
    // the address stays in the policy; not across a restart.
    virtual DrainOutcome set_drained(const std::string& endpoint, bool drained) = 0;
    // The effective configuration as one JSON document (control/ConfigDump.hpp).
    virtual std::string dump_config() = 0;
    // What the running policy does with a request (control/Explain.hpp),
    // given as explain_request_json() writes it.
    virtual ExplainOutcome explain(const std::string& request_json) = 0;
};

}  // namespace l7fast::control
