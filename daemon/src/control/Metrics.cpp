#include "control/Metrics.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "common/Log.hpp"
#include "l7fast_abi.h"
#include "proxy/Endpoint.hpp"

namespace l7fast::control {
namespace {

constexpr size_t kMaxHead = 8192;
constexpr auto kReadTimeout = std::chrono::seconds(5);
constexpr unsigned kMaxConnections = 32;

class Exposition {
public:
    // HELP and TYPE of one metric family
    void family(const char* name, const char* type, const char* help)
    {
        out_ += "# HELP ";
        out_ += name;
        out_ += ' ';
        out_ += help;  // constants: no backslash or line feed to escape
        out_ += "\n# TYPE ";
        out_ += name;
        out_ += ' ';
        out_ += type;
        out_ += '\n';
    }
    // name{k="v",...} value
    void sample(std::string_view name, std::initializer_list<std::pair<const char*, std::string_view>> labels,
                uint64_t value)
    {
        sample_text(name, labels, std::to_string(value));
    }
    void sample_seconds(std::string_view name, double seconds)
    {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.2f", seconds);
        sample_text(name, {}, buf);
    }
    void sample_text(std::string_view name,
                     std::initializer_list<std::pair<const char*, std::string_view>> labels, const std::string& value)
    {
        out_ += name;
        if (labels.size()) {
            out_ += '{';
            const char* sep = "";
            for (const auto& [k, v] : labels) {
                out_ += sep;
                out_ += k;
                out_ += "=\"";
                out_ += prometheus_label_value(v);
                out_ += '"';
                sep = ",";
            }
            out_ += '}';
        }
        out_ += ' ';
        out_ += value;
        out_ += '\n';
    }
    // cumulative _bucket{label=value,le=...} lines from log2 bucket counts,
    // then _count
    void histogram(const std::string& name, const char* label, std::string_view value,
                   const std::vector<uint64_t>& buckets)
    {
        const std::string bucket = name + "_bucket";
        uint64_t cum = 0;
        for (unsigned i = 0; i < buckets.size(); i++) {
            cum += buckets[i];
            std::string le = i + 1 == buckets.size() ? "+Inf" : latency_bucket_le(i);
            sample(bucket, {{label, value}, {"le", le}}, cum);
        }
        if (buckets.empty())
            sample(bucket, {{label, value}, {"le", "+Inf"}}, 0);
        sample(name + "_count", {{label, value}}, cum);
    }
    // a histogram with explicit upper bounds: buckets has one more count
    // than bounds (above the last), not cumulative; then _sum and _count
    void histogram_bounds(const std::string& name, const char* label, std::string_view value,
                          const std::vector<double>& bounds, const std::vector<uint64_t>& buckets, double sum)
    {
        const std::string bucket = name + "_bucket";
        uint64_t cum = 0;
        char le[32];
        for (size_t i = 0; i < bounds.size(); i++) {
            cum += i < buckets.size() ? buckets[i] : 0;
            std::snprintf(le, sizeof le, "%g", bounds[i]);
            sample(bucket, {{label, value}, {"le", le}}, cum);
        }
        cum += bounds.size() < buckets.size() ? buckets[bounds.size()] : 0;
        sample(bucket, {{label, value}, {"le", "+Inf"}}, cum);
        char s[32];
        std::snprintf(s, sizeof s, "%.6f", sum);
        sample_text(name + "_sum", {{label, value}}, s);
        sample(name + "_count", {{label, value}}, cum);
    }
    std::string take() { return std::move(out_); }

private:
    std::string out_;
};

std::string response(int status, const char* reason, std::string_view body, bool head_only,
                     const char* content_type, const char* extra = "")
{
    std::string r = "HTTP/1.1 " + std::to_string(status) + " " + reason + "\r\nContent-Type: " + content_type +
                    "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" + extra +
                    "Connection: close\r\n\r\n";
    if (!head_only)
        r.append(body);
    return r;
}

std::string plain(int status, const char* reason, std::string_view body, bool head_only = false,
                  const char* extra = "")
{
    return response(status, reason, body, head_only, "text/plain; charset=utf-8", extra);
}

bool is_tchar(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           std::strchr("!#$%&'*+-.^_`|~", c) != nullptr;
}

}  // namespace

std::string prometheus_label_value(std::string_view v)
{
    std::string out;
    out.reserve(v.size());
    for (char c : v) {
        if (c == '\\')
            out += "\\\\";
        else if (c == '"')
            out += "\\\"";
        else if (c == '\n')
            out += "\\n";
        else
            out += c;
    }
    return out;
}

std::string latency_bucket_le(unsigned i)
{
    if (i + 1 >= L7_LAT_BUCKETS)
        return "+Inf";
    // bucket i holds latencies below 2^(i+11) ns (l7_lat_bucket): an exact
    // decimal number of seconds with nine places, trailing zeros dropped
    uint64_t ns = uint64_t{1} << (i + 11);
    std::string frac = std::to_string(ns % 1000000000);
    frac.insert(0, 9 - frac.size(), '0');
    while (!frac.empty() && frac.back() == '0')
        frac.pop_back();
    return std::to_string(ns / 1000000000) + (frac.empty() ? "" : "." + frac);
}

namespace {

// The daemon itself: state, policy and reloads, connections.
void render_daemon(Exposition& e, const StatusInfo& st)
{
    e.family("l7fast_daemon_state", "gauge",
             "1 for the state l7fastd is in: running, or degraded (the kernel data plane not in use).");
    const bool degraded = st.state == "degraded";
    e.sample("l7fast_daemon_state", {{"state", "running"}}, !degraded);
    e.sample("l7fast_daemon_state", {{"state", "degraded"}}, degraded);
    if (degraded) {
        e.family("l7fast_daemon_degraded_info", "gauge", "Why l7fastd is degraded (the value is always 1).");
        e.sample("l7fast_daemon_degraded_info", {{"reason", st.degraded_reason}}, 1);
    }
    e.family("l7fast_policy_applied_timestamp_seconds", "gauge",
             "When the policy in force was applied (start or the last successful reload), Unix time.");
    e.sample("l7fast_policy_applied_timestamp_seconds", {}, st.applied_unix);
    e.family("l7fast_reloads_total", "counter", "Reload attempts since start, by result.");
    e.sample("l7fast_reloads_total", {{"result", "ok"}}, st.reloads_ok);
    e.sample("l7fast_reloads_total", {{"result", "failed"}}, st.reloads_failed);
    e.family("l7fast_reload_last_success", "gauge",
             "1 when the last reload succeeded (or none was tried yet), 0 when it failed and the previous "
             "policy stays in force.");
    e.sample("l7fast_reload_last_success", {}, st.last_reload_error.empty());
    if (st.last_reload_unix) {
        e.family("l7fast_reload_last_timestamp_seconds", "gauge", "When the last reload was attempted, Unix time.");
        e.sample("l7fast_reload_last_timestamp_seconds", {}, st.last_reload_unix);
    }
    e.family("l7fast_slow_path_connections", "gauge", "Client connections the slow path holds open.");
    e.sample("l7fast_slow_path_connections", {}, st.connections);
    e.family("l7fast_parked_connections", "gauge",
             "Remote clients' connections whose sessions wait for their next request outside l7fastd's epoll "
             "set: the requests the kernel serves on them do not wake l7fastd.");
    e.sample("l7fast_parked_connections", {}, st.parked_connections);
}

// The process_* families of the Prometheus client libraries.
void render_process(Exposition& e, const ProcessFigures& p)
{
    if (!p.ok)
        return;
    e.family("process_cpu_seconds_total", "counter", "User and system CPU time l7fastd used, in seconds.");
    e.sample_seconds("process_cpu_seconds_total", p.cpu_seconds);
    e.family("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.");
    e.sample("process_resident_memory_bytes", {}, p.rss_bytes);
    e.family("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.");
    e.sample("process_virtual_memory_bytes", {}, p.vsize_bytes);
    e.family("process_open_fds", "gauge", "Open file descriptors.");
    e.sample("process_open_fds", {}, p.open_fds);
    e.family("process_max_fds", "gauge", "Maximum number of open file descriptors (RLIMIT_NOFILE).");
    e.sample("process_max_fds", {}, p.max_fds);
    e.family("process_start_time_seconds", "gauge", "Start time of the process since the Unix epoch in seconds.");
    e.sample("process_start_time_seconds", {}, p.start_time_unix);
}

void render_stats(Exposition& e, const StatsSnapshot& s, const std::string& version);

}  // namespace

ProcessFigures read_process_figures()
{
    ProcessFigures p;
    std::ifstream stat_file("/proc/self/stat");
    std::string stat((std::istreambuf_iterator<char>(stat_file)), std::istreambuf_iterator<char>());
    // the fields after the command name, which is in parentheses and may
    // hold anything: field 3 (state) onwards
    const size_t close = stat.rfind(')');
    if (close == std::string::npos)
        return p;
    std::istringstream rest(stat.substr(close + 1));
    std::vector<std::string> f{"", "", ""};  // fields 1..2 skipped, f[3] = state
    for (std::string w; rest >> w;)
        f.push_back(w);
    if (f.size() <= 24)
        return p;
    const long ticks = sysconf(_SC_CLK_TCK);
    const long page = sysconf(_SC_PAGESIZE);
    if (ticks <= 0 || page <= 0)
        return p;
    try {
        const uint64_t utime = std::stoull(f[14]), stime = std::stoull(f[15]), start = std::stoull(f[22]);
        p.cpu_seconds = static_cast<double>(utime + stime) / static_cast<double>(ticks);
        p.vsize_bytes = std::stoull(f[23]);
        p.rss_bytes = std::stoull(f[24]) * static_cast<uint64_t>(page);
        std::ifstream system_stat("/proc/stat");
        for (std::string line; std::getline(system_stat, line);)
            if (line.rfind("btime ", 0) == 0)
                p.start_time_unix = std::stoull(line.substr(6)) + start / static_cast<uint64_t>(ticks);
    } catch (const std::exception&) {
        return p;  // not numbers: not the /proc this was written for
    }
    std::error_code ec;
    for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec); !ec && it != std::filesystem::directory_iterator();
         it.increment(ec))
        p.open_fds++;
    rlimit rl{};
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
        p.max_fds = rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX : rl.rlim_cur;
    p.ok = true;
    return p;
}

std::string render_prometheus(const StatsSnapshot& s, const StatusInfo& st, const ProcessFigures& p,
                              const std::string& version)
{
    Exposition e;
    render_daemon(e, st);
    render_stats(e, s, version);
    render_process(e, p);
    return e.take();
}

std::string render_prometheus(const StatsSnapshot& s, const std::string& version)
{
    Exposition e;
    render_stats(e, s, version);
    return e.take();
}

namespace {

void render_stats(Exposition& e, const StatsSnapshot& s, const std::string& version)
{
    e.family("l7fast_build_info", "gauge", "l7fastd version (the value is always 1).");
    e.sample("l7fast_build_info", {{"version", version}}, 1);
    e.family("l7fast_policy_generation", "gauge",
             "Policy generation in force (one more on every successful reload).");
    e.sample("l7fast_policy_generation", {}, s.generation);

    e.family("l7fast_route_info", "gauge",
             "Where a route of the policy in force runs: placement kernel or user (the slow path).");
    for (const auto& r : s.routes)
        e.sample("l7fast_route_info", {{"route", r.name}, {"placement", r.kernel ? "kernel" : "user"}}, 1);
    e.family("l7fast_route_requests_total", "counter",
             "Requests matched to the route, by the plane that handled them: kernel (the data plane) or user "
             "(the slow path).");
    for (const auto& r : s.routes) {
        e.sample("l7fast_route_requests_total", {{"route", r.name}, {"plane", "kernel"}}, r.requests_kernel);
        e.sample("l7fast_route_requests_total", {{"route", r.name}, {"plane", "user"}}, r.requests_user);
    }
    e.family("l7fast_route_responses_total", "counter",
             "Responses to the route's requests, by status class (other: no valid status).");
    for (const auto& r : s.routes)
        for (int c = 1; c <= 6; c++)
            e.sample("l7fast_route_responses_total", {{"route", r.name}, {"class", kStatusClass[c % L7_STATUS_CLASSES]}},
                     r.status[c % L7_STATUS_CLASSES]);
    e.family("l7fast_route_request_bytes_total", "counter",
             "Request bytes received from clients (heads and Content-Length bodies).");
    for (const auto& r : s.routes)
        e.sample("l7fast_route_request_bytes_total", {{"route", r.name}}, r.bytes_in);
    e.family("l7fast_route_response_bytes_total", "counter", "Response bytes sent to clients.");
    for (const auto& r : s.routes)
        e.sample("l7fast_route_response_bytes_total", {{"route", r.name}}, r.bytes_out);
    e.family("l7fast_route_response_latency_seconds", "histogram",
             "Time from a request's arrival to the end of its response, in log2 buckets "
             "(no _sum: the data plane counts buckets only).");
    for (const auto& r : s.routes)
        e.histogram("l7fast_route_response_latency_seconds", "route", r.name, r.latency);
    if (!s.user_latency_bounds.empty()) {
        e.family("l7fast_route_user_latency_seconds", "histogram",
                 "Time from a request's arrival to the end of its response, for the slow path's exchanges "
                 "(buckets up to a minute, with _sum).");
        for (const auto& r : s.routes)
            e.histogram_bounds("l7fast_route_user_latency_seconds", "route", r.name, s.user_latency_bounds,
                               r.user_latency, static_cast<double>(r.user_latency_sum_ns) / 1e9);
    }
    bool any_codes = false;
    for (const auto& r : s.routes)
        any_codes = any_codes || !r.user_codes.empty();
    if (any_codes) {
        e.family("l7fast_route_user_responses_total", "counter",
                 "Responses of the slow path's exchanges, by status code (0: the connection ended without one).");
        for (const auto& r : s.routes)
            for (const auto& [code, v] : r.user_codes)
                e.sample("l7fast_route_user_responses_total", {{"route", r.name}, {"code", code}}, v);
    }
    bool any_kernel_codes = false;
    for (const auto& r : s.routes)
        any_kernel_codes = any_kernel_codes || !r.kernel_codes.empty();
    if (any_kernel_codes) {
        e.family("l7fast_route_kernel_responses_total", "counter",
                 "Responses of the data plane's exchanges, by status code; a code it does not count one by one "
                 "is counted under its class (\"4xx\"; other: no valid status).");
        for (const auto& r : s.routes)
            for (const auto& [code, v] : r.kernel_codes)
                e.sample("l7fast_route_kernel_responses_total", {{"route", r.name}, {"code", code}}, v);
    }
    e.family("l7fast_route_rejections_total", "counter",
             "Requests the route's policy refused, by reason (answered by l7fastd).");
    for (const auto& r : s.routes) {
        e.sample("l7fast_route_rejections_total", {{"route", r.name}, {"reason", "jwt_missing"}}, r.jwt_missing);
        e.sample("l7fast_route_rejections_total", {{"route", r.name}, {"reason", "jwt_invalid"}}, r.jwt_invalid);
        e.sample("l7fast_route_rejections_total", {{"route", r.name}, {"reason", "rbac_denied"}}, r.rbac_denied);
        e.sample("l7fast_route_rejections_total", {{"route", r.name}, {"reason", "rate_limited"}}, r.rate_limited);
    }
    e.family("l7fast_route_rbac_denials_total", "counter",
             "Requests the route's RBAC rules denied, by the deciding rule (\"default\": no rule held).");
    for (const auto& r : s.routes)
        for (const auto& [rule, v] : r.rbac_denied_by_rule)
            e.sample("l7fast_route_rbac_denials_total", {{"route", r.name}, {"rule", rule}}, v);
    e.family("l7fast_route_direct_responses_total", "counter",
             "Requests answered with the route's direct response.");
    for (const auto& r : s.routes)
        e.sample("l7fast_route_direct_responses_total", {{"route", r.name}}, r.direct_responses);
    if (!s.endpoints.empty()) {
        e.family("l7fast_endpoint_info", "gauge", "A cluster's upstream endpoint (address) in the policy in force.");
        for (const auto& ep : s.endpoints) {
            std::string_view names = ep.clusters;
            while (!names.empty()) {
                size_t comma = names.find(',');
                e.sample("l7fast_endpoint_info", {{"endpoint", ep.address}, {"cluster", names.substr(0, comma)}}, 1);
                names = comma == std::string_view::npos ? std::string_view() : names.substr(comma + 1);
            }
        }
        e.family("l7fast_endpoint_requests_total", "counter",
                 "Exchanges with the endpoint that ended, by the plane that forwarded them (kernel or user).");
        for (const auto& ep : s.endpoints) {
            e.sample("l7fast_endpoint_requests_total", {{"endpoint", ep.address}, {"plane", "kernel"}},
                     ep.requests_kernel);
            e.sample("l7fast_endpoint_requests_total", {{"endpoint", ep.address}, {"plane", "user"}}, ep.requests_user);
        }
        e.family("l7fast_endpoint_responses_total", "counter",
                 "Responses of the endpoint's exchanges, by status class (other: no valid status).");
        for (const auto& ep : s.endpoints)
            for (int c = 1; c <= 6; c++)
                e.sample("l7fast_endpoint_responses_total", {{"endpoint", ep.address}, {"class", kStatusClass[c % L7_STATUS_CLASSES]}},
                         ep.status[c % L7_STATUS_CLASSES]);
        e.family("l7fast_endpoint_response_bytes_total", "counter",
                 "Response bytes of the endpoint's exchanges sent to clients.");
        for (const auto& ep : s.endpoints)
            e.sample("l7fast_endpoint_response_bytes_total", {{"endpoint", ep.address}}, ep.bytes_out);
        e.family("l7fast_endpoint_response_latency_seconds", "histogram",
                 "Time from a request's arrival to the end of its response, by endpoint, in log2 buckets "
                 "(no _sum: the data plane counts buckets only).");
        for (const auto& ep : s.endpoints)
            e.histogram("l7fast_endpoint_response_latency_seconds", "endpoint", ep.address, ep.latency);
        e.family("l7fast_endpoint_connections", "gauge",
                 "Open upstream connections to the endpoint: pool kernel (the data plane's, opening ones "
                 "counted busy) or user (the slow path's own), by state idle or busy.");
        for (const auto& ep : s.endpoints) {
            e.sample("l7fast_endpoint_connections", {{"endpoint", ep.address}, {"pool", "kernel"}, {"state", "idle"}},
                     ep.kernel_idle);
            e.sample("l7fast_endpoint_connections", {{"endpoint", ep.address}, {"pool", "kernel"}, {"state", "busy"}},
                     ep.kernel_busy);
            e.sample("l7fast_endpoint_connections", {{"endpoint", ep.address}, {"pool", "user"}, {"state", "idle"}},
                     ep.user_idle);
            e.sample("l7fast_endpoint_connections", {{"endpoint", ep.address}, {"pool", "user"}, {"state", "busy"}},
                     ep.user_busy);
        }
        e.family("l7fast_endpoint_up", "gauge",
                 "1 when the endpoint takes new requests, 0 when it is out (l7fast_endpoint_out says why).");
        for (const auto& ep : s.endpoints)
            e.sample("l7fast_endpoint_up", {{"endpoint", ep.address}}, ep.state == "up" ? 1 : 0);
        e.family("l7fast_endpoint_out", "gauge",
                 "1 for each reason the endpoint takes no new requests: drained (l7fastctl drain), unhealthy "
                 "(failing its active health check) or ejected (outlier detection).");
        for (const auto& ep : s.endpoints)
            for (const char* reason : {"drained", "unhealthy", "ejected"})
                e.sample("l7fast_endpoint_out", {{"endpoint", ep.address}, {"reason", reason}},
                         ("+" + ep.state + "+").find(std::string("+") + reason + "+") != std::string::npos ? 1 : 0);
        e.family("l7fast_endpoint_health_checks_total", "counter",
                 "Active health checks of the endpoint, by result (passed or failed); endpoints of a cluster "
                 "with health_check only.");
        for (const auto& ep : s.endpoints) {
            if (!ep.checked)
                continue;
            e.sample("l7fast_endpoint_health_checks_total", {{"endpoint", ep.address}, {"result", "passed"}},
                     ep.checks_passed);
            e.sample("l7fast_endpoint_health_checks_total", {{"endpoint", ep.address}, {"result", "failed"}},
                     ep.checks_failed);
        }
        e.family("l7fast_endpoint_ejections_total", "counter",
                 "Times outlier detection ejected the endpoint, by trigger (5xx: consecutive 5xx responses on "
                 "either plane; connect_failure: consecutive failed connection attempts).");
        for (const auto& ep : s.endpoints) {
            e.sample("l7fast_endpoint_ejections_total", {{"endpoint", ep.address}, {"trigger", "5xx"}},
                     ep.ejections_5xx);
            e.sample("l7fast_endpoint_ejections_total", {{"endpoint", ep.address}, {"trigger", "connect_failure"}},
                     ep.ejections_connect);
        }
    }
    e.family("l7fast_requests_no_route_total", "counter",
             "Requests that matched no route (answered 404 by the slow path).");
    e.sample("l7fast_requests_no_route_total", {}, s.no_route);
    e.family("l7fast_requests_refused_total", "counter",
             "Requests l7fast refused itself (400 malformed, 408, 417, 501), by reason (bad_request:<cause>, ...).");
    for (const auto& [reason, v] : s.refused)
        e.sample("l7fast_requests_refused_total", {{"reason", reason}}, v);

    const std::string_view slow = "to_slow_path_";
    bool any_plane = false, any_slow = false;
    for (const auto& [k, v] : s.counters)
        (k.rfind(slow, 0) == 0 ? any_slow : any_plane) = true;
    if (any_plane) {
        e.family("l7fast_dataplane_events_total", "counter",
                 "Kernel data-plane counters (l7fastctl stats, DATA PLANE).");
        for (const auto& [k, v] : s.counters)
            if (k.rfind(slow, 0) != 0)
                e.sample("l7fast_dataplane_events_total", {{"event", k}}, v);
    }
    if (any_slow) {
        e.family("l7fast_dataplane_to_slow_path_total", "counter",
                 "Requests the kernel data plane handed to the slow path, by reason.");
        for (const auto& [k, v] : s.counters)
            if (k.rfind(slow, 0) == 0)
                e.sample("l7fast_dataplane_to_slow_path_total", {{"reason", std::string_view(k).substr(slow.size())}},
                         v);
    }
    if (s.dataplane_connections) {
        e.family("l7fast_dataplane_connections", "gauge",
                 "Client connections the kernel data plane knows, by plane (kernel, or handed to the slow path "
                 "for now) and side (local: a client on this host; remote).");
        for (int mode = 0; mode < 2; mode++)
            for (int side = 0; side < 2; side++)
                e.sample("l7fast_dataplane_connections",
                         {{"plane", mode ? "user" : "kernel"}, {"side", side ? "remote" : "local"}},
                         (*s.dataplane_connections)[mode][side]);
    }
}

}  // namespace

std::string MetricsServer::respond(std::string_view head, const std::function<std::string()>& render)
{
    size_t eol = head.find("\r\n");
    if (eol == std::string_view::npos)
        return plain(400, "Bad Request", "malformed request\n");
    std::string_view line = head.substr(0, eol);
    size_t sp1 = line.find(' ');
    size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
    if (sp1 == 0 || sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos)
        return plain(400, "Bad Request", "malformed request line\n");
    std::string_view method = line.substr(0, sp1);
    std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
    std::string_view version = line.substr(sp2 + 1);
    for (char c : method)
        if (!is_tchar(c))
            return plain(400, "Bad Request", "malformed method\n");
    if (target.empty() || target[0] != '/')
        return plain(400, "Bad Request", "malformed request target\n");
    for (char c : target)
        if (static_cast<unsigned char>(c) <= 0x20 || static_cast<unsigned char>(c) >= 0x7f)
            return plain(400, "Bad Request", "malformed request target\n");
    if (version != "HTTP/1.1" && version != "HTTP/1.0")
        return plain(400, "Bad Request", "unsupported HTTP version\n");
    for (char c : head)
        if ((static_cast<unsigned char>(c) < 0x20 && c != '\r' && c != '\n' && c != '\t') || c == 0x7f)
            return plain(400, "Bad Request", "control character in the request head\n");
    const bool head_only = method == "HEAD";
    std::string_view path = target.substr(0, target.find('?'));
    if (path != "/metrics")
        return plain(404, "Not Found", "not found: l7fastd serves GET /metrics here\n", head_only);
    if (method != "GET" && !head_only)
        return plain(405, "Method Not Allowed", "only GET and HEAD\n", false, "Allow: GET, HEAD\r\n");
    return response(200, "OK", render(), head_only, kMetricsContentType);
}

struct MetricsServer::State : std::enable_shared_from_this<MetricsServer::State> {
    asio::io_context& io;
    tcp::acceptor acceptor;
    std::function<std::string()> render;
    unsigned connections = 0;

    State(asio::io_context& i, std::function<std::string()> r) : io(i), acceptor(i), render(std::move(r)) {}

    static awaitable<void> accept_loop(std::shared_ptr<State> self)
    {
        for (;;) {
            error_code ec;
            tcp::socket sock = co_await self->acceptor.async_accept(asio::redirect_error(use_awaitable, ec));
            if (ec == asio::error::operation_aborted || !self->acceptor.is_open())
                co_return;
            if (ec)
                continue;  // EMFILE and friends: the next accept may work
            if (self->connections >= kMaxConnections) {
                error_code ig;
                sock.close(ig);
                continue;
            }
            self->connections++;
            asio::co_spawn(self->io, serve(self, std::move(sock)), asio::detached);
        }
    }

    static awaitable<void> serve(std::shared_ptr<State> self, tcp::socket sock)
    {
        struct Release {
            State* s;
            ~Release() { s->connections--; }
        } release{self.get()};
        auto sp = std::make_shared<tcp::socket>(std::move(sock));
        asio::steady_timer timer(self->io, kReadTimeout);
        bool timed_out = false;
        timer.async_wait([sp, &timed_out](error_code ec) {
            if (ec)
                return;
            timed_out = true;
            error_code ig;
            sp->cancel(ig);
        });
        std::string buf;
        char chunk[2048];
        size_t end = std::string::npos;
        error_code ec;
        while (end == std::string::npos && buf.size() <= kMaxHead) {
            size_t n = co_await sp->async_read_some(asio::buffer(chunk), asio::redirect_error(use_awaitable, ec));
            if (ec)
                break;
            buf.append(chunk, n);
            end = buf.find("\r\n\r\n");
        }
        timer.cancel();
        std::string out;
        if (end != std::string::npos && end + 4 <= kMaxHead)
            out = respond(std::string_view(buf).substr(0, end + 4), self->render);
        else if (end != std::string::npos || buf.size() > kMaxHead)
            out = plain(431, "Request Header Fields Too Large", "request head larger than 8 KiB\n");
        else if (timed_out && !buf.empty())
            out = plain(408, "Request Timeout", "request head not received within 5 seconds\n");
        if (!out.empty()) {
            error_code wec;
            // bounded: a client that does not read blocks only this coroutine,
            // and the timer closes it
            timer.expires_after(kReadTimeout);
            timer.async_wait([sp](error_code e) {
                if (!e) {
                    error_code ig;
                    sp->close(ig);
                }
            });
            co_await asio::async_write(*sp, asio::buffer(out), asio::redirect_error(use_awaitable, wec));
            timer.cancel();
            error_code ig;
            sp->shutdown(tcp::socket::shutdown_send, ig);
        }
        error_code ig;
        sp->close(ig);
    }
};

MetricsServer::MetricsServer(asio::io_context& io, const policy::SocketAddress& address,
                             std::function<std::string()> render)
    : address_(address), state_(std::make_shared<State>(io, std::move(render)))
{
    tcp::endpoint ep = proxy::to_endpoint(address);
    error_code ec;
    state_->acceptor.open(ep.protocol(), ec);
    if (!ec)
        state_->acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec && ep.protocol() == tcp::v6() && address.is_wildcard())
        state_->acceptor.set_option(asio::ip::v6_only(false), ec);
    if (!ec)
        state_->acceptor.bind(ep, ec);
    if (!ec)
        state_->acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec)
        throw std::runtime_error("daemon.metrics_address: cannot serve metrics on " + address.str() + ": " +
                                 ec.message());
    asio::co_spawn(io, State::accept_loop(state_), asio::detached);
}

MetricsServer::~MetricsServer()
{
    error_code ig;
    state_->acceptor.close(ig);
}

}  // namespace l7fast::control
