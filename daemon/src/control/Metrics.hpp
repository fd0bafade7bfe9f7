// Prometheus text exposition (format 0.0.4) of the stats snapshot that D-Bus
// GetStats returns, and the small HTTP server that serves it on
// daemon.metrics_address (GET/HEAD /metrics).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "common/Asio.hpp"
#include "control/ControlApi.hpp"
#include "config/Policy.hpp"

namespace l7fast::control {

inline constexpr const char* kMetricsContentType = "text/plain; version=0.0.4; charset=utf-8";

// A label value escaped per the exposition format: backslash, double quote
// and line feed as \\, \" and \n.
std::string prometheus_label_value(std::string_view v);
// Upper bound of latency bucket `i` (l7_lat_bucket) in seconds, as written
// in `le`: "0.000002048" ... "0.033554432"; "+Inf" for the last one.
std::string latency_bucket_le(unsigned i);
// Figures of the l7fastd process itself (/proc/self), exposed in the
// process_* families the Prometheus client libraries use. ok is false when
// /proc could not be read.
struct ProcessFigures {
    bool ok = false;
    double cpu_seconds = 0;
    uint64_t rss_bytes = 0, vsize_bytes = 0, open_fds = 0, max_fds = 0, start_time_unix = 0;
};
ProcessFigures read_process_figures();

// The exposition of one stats snapshot: routes, endpoints, data plane.
std::string render_prometheus(const StatsSnapshot& s, const std::string& version);
// What l7fastd serves: the daemon's state, reloads and connections, the
// snapshot, and the process figures.
std::string render_prometheus(const StatsSnapshot& s, const StatusInfo& st, const ProcessFigures& p,
                              const std::string& version);

// GET /metrics (and HEAD) on one address, on the daemon's io_context. Each
// connection: one request head of at most 8 KiB within 5 seconds, one
// response, close. At most 32 connections at a time; more are closed at
// once. `render` is called on the loop for every GET/HEAD /metrics.
class MetricsServer {
public:
    // Throws std::runtime_error("cannot serve metrics on ADDR: why").
    MetricsServer(asio::io_context& io, const policy::SocketAddress& address,
                  std::function<std::string()> render);
    ~MetricsServer();
    const policy::SocketAddress& address() const { return address_; }

    // The response to one request head (the bytes up to and including the
    // empty line); pure, for tests. `render` is called only for /metrics.
    static std::string respond(std::string_view head, const std::function<std::string()>& render);

private:
    struct State;
    policy::SocketAddress address_;
    std::shared_ptr<State> state_;
};

}  // namespace l7fast::control
