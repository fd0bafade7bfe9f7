#include "control/CtlRender.hpp"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <sstream>

#include "control/BusCodec.hpp"

namespace l7fast::control {

namespace {

constexpr const char* kSlowPathPrefix = "to_slow_path_";

std::string num(uint64_t n) { return std::to_string(n); }

// "1 route", "2 routes"
std::string count(uint64_t n, const char* noun)
{
    return num(n) + " " + noun + (n == 1 ? "" : "s");
}

// "label:" padded so values line up
std::string labelled(const std::string& label, const std::string& value)
{
    std::string l = label + ":";
    if (l.size() < 16)
        l.resize(16, ' ');
    else
        l += ' ';
    return l + value + "\n";
}

std::string first_line(const std::string& s)
{
    size_t nl = s.find('\n');
    return nl == std::string::npos ? s : s.substr(0, nl);
}

}  // namespace

TextTable::TextTable(std::vector<std::string> header, std::vector<bool> numeric)
    : numeric_(std::move(numeric))
{
    numeric_.resize(header.size(), false);
    rows_.push_back(std::move(header));
}

void TextTable::add(std::vector<std::string> row)
{
    row.resize(rows_.front().size());
    rows_.push_back(std::move(row));
}

std::string TextTable::str() const
{
    std::vector<size_t> width(rows_.front().size(), 0);
    for (const auto& row : rows_)
        for (size_t c = 0; c < row.size(); c++)
            width[c] = std::max(width[c], row[c].size());
    std::string out;
    for (const auto& row : rows_) {
        std::string line;
        for (size_t c = 0; c < row.size(); c++) {
            if (c)
                line += "  ";
            const size_t pad = width[c] - row[c].size();
            if (numeric_[c])
                line += std::string(pad, ' ') + row[c];
            else
                line += row[c] + (c + 1 < row.size() ? std::string(pad, ' ') : "");
        }
        while (!line.empty() && line.back() == ' ')
            line.pop_back();
        out += line + "\n";
    }
    return out;
}

std::string format_bytes(uint64_t n)
{
    static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (n < 1024)
        return std::to_string(n) + " B";
    double v = static_cast<double>(n);
    int u = 0;
    while (v >= 1024 && u < 6) {
        v /= 1024;
        u++;
    }
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
    return buf;
}

std::string format_duration(uint64_t sec)
{
    char buf[64];
    const uint64_t d = sec / 86400, h = sec / 3600 % 24, m = sec / 60 % 60, s = sec % 60;
    if (d)
        std::snprintf(buf, sizeof buf, "%llud %02lluh %02llum", (unsigned long long)d, (unsigned long long)h,
                      (unsigned long long)m);
    else if (h)
        std::snprintf(buf, sizeof buf, "%lluh %02llum %02llus", (unsigned long long)h, (unsigned long long)m,
                      (unsigned long long)s);
    else if (m)
        std::snprintf(buf, sizeof buf, "%llum %02llus", (unsigned long long)m, (unsigned long long)s);
    else
        std::snprintf(buf, sizeof buf, "%llus", (unsigned long long)s);
    return buf;
}

std::string format_percent(uint64_t part, uint64_t whole)
{
    if (whole == 0)
        return "-";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f%%", 100.0 * static_cast<double>(part) / static_cast<double>(whole));
    return buf;
}

std::string format_utc(uint64_t unix_seconds)
{
    const time_t t = static_cast<time_t>(unix_seconds);
    tm parts{};
    char buf[32];
    if (!gmtime_r(&t, &parts) || !std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &parts))
        return std::to_string(unix_seconds);
    return buf;
}

std::string render_log_level(const std::string& level, const std::string& source)
{
    if (source == "l7fastctl")
        return level + " (set with l7fastctl log-level; `l7fastctl log-level reset` returns to the configured one)";
    if (source == "command line")
        return level + " (l7fastd's --log-level or --trace)";
    return level + " (daemon.log_level)";
}

std::string render_status(const StatusInfo& s, const StatsSnapshot* stats)
{
    std::string out = "l7fastd " + s.version + ": " + s.state;
    if (!s.degraded_reason.empty())
        out += " (" + s.degraded_reason + ")";
    out += "\n";
    std::string gen = num(s.generation);
    if (s.applied_unix)
        gen += ", applied " + format_utc(s.applied_unix);
    out += labelled("Generation", gen);
    out += labelled("Uptime", format_duration(s.uptime_sec));
    for (size_t i = 0; i < s.policy_files.size(); i++)
        out += i ? std::string(16, ' ') + s.policy_files[i] + "\n" : labelled("Policy", s.policy_files[i]);
    if (s.policy_files.empty())
        out += labelled("Policy", "-");
    out += labelled("Listeners", num(s.listeners));
    out += labelled("Routes", num(s.routes) + ", " + num(s.routes_kernel) + " in the kernel (" +
                                  format_percent(s.routes_kernel, s.routes) + ")");
    if (stats) {
        const uint64_t total = stats->requests_kernel + stats->requests_user;
        out += labelled("Requests", num(total) + ", " + num(stats->requests_kernel) + " in the kernel (" +
                                        format_percent(stats->requests_kernel, total) + "), " +
                                        num(stats->requests_user) + " in user space");
    }
    out += labelled("Connections",
                    num(s.connections) + " in the slow path, " + num(s.upstream_connections) + " upstream");
    std::string last = s.last_reload_error.empty() ? "ok" : "failed: " + first_line(s.last_reload_error);
    if (s.reloads_ok || s.reloads_failed)
        last += " (" + num(s.reloads_ok) + " ok, " + num(s.reloads_failed) + " failed since start)";
    out += labelled("Last reload", last);
    if (!s.log_level.empty())
        out += labelled("Log level", render_log_level(s.log_level, s.log_level_source));
    for (size_t i = 0; i < s.warnings.size(); i++)
        out += i ? std::string(16, ' ') + s.warnings[i] + "\n" : labelled("Warnings", s.warnings[i]);
    if (!s.features.empty()) {
        out += "Features:\n";
        TextTable t({"  FEATURE", "STATE"});
        for (const auto& [k, v] : s.features)
            t.add({"  " + k, v});
        // drop the header line: the section title says what it is
        std::string body = t.str();
        out += body.substr(body.find('\n') + 1);
    }
    return out;
}

std::string render_routes(const std::vector<RouteInfo>& routes)
{
    if (routes.empty())
        return "No routes.\n";
    TextTable t({"#", "ROUTE", "PLACEMENT", "LISTENERS", "MATCH", "CLUSTERS", "WHERE", "REASON"},
                {true, false, false, false, false, false, false, false});
    size_t i = 1;
    for (const auto& r : routes)
        t.add({num(i++), r.name, codec::placement_name(r.kernel), r.listeners, r.match, r.clusters, r.where,
               r.kernel ? "" : r.reason});
    size_t kernel = std::count_if(routes.begin(), routes.end(), [](const RouteInfo& r) { return r.kernel; });
    return t.str() + "\n" + count(routes.size(), "route") + ", " + num(kernel) + " in the kernel (" +
           format_percent(kernel, routes.size()) + ").\n";
}

std::string render_stats(const StatsSnapshot& s)
{
    std::string out;
    TextTable t({"ROUTE", "PLACEMENT", "REQ KERNEL", "REQ USER", "2XX", "3XX", "4XX", "5XX", "BYTES IN", "BYTES OUT"},
                {false, false, true, true, true, true, true, true, true, true});
    uint64_t st[L7_STATUS_CLASSES] = {}, bin = 0, bout = 0;
    for (const auto& r : s.routes) {
        t.add({r.name, codec::placement_name(r.kernel), num(r.requests_kernel), num(r.requests_user), num(r.status[2]),
               num(r.status[3]), num(r.status[4]), num(r.status[5]), format_bytes(r.bytes_in),
               format_bytes(r.bytes_out)});
        for (int i = 0; i < L7_STATUS_CLASSES; i++)
            st[i] += r.status[i];
        bin += r.bytes_in;
        bout += r.bytes_out;
    }
    t.add({"total", "", num(s.requests_kernel), num(s.requests_user), num(st[2]), num(st[3]), num(st[4]), num(st[5]),
           format_bytes(bin), format_bytes(bout)});
    out += "Generation " + num(s.generation) + "\n\n" + t.str();
    out += "\nRequests that matched no route (slow path): " + num(s.no_route) + "\n";
    if (!s.refused.empty()) {
        uint64_t all = 0;
        std::string each;
        for (const auto& [reason, v] : s.refused) {
            all += v;
            each += (each.empty() ? "" : ", ") + reason + " " + num(v);
        }
        out += "Requests l7fast refused itself (slow path): " + num(all) + " (" + each + ")\n";
    }

    if (!s.endpoints.empty()) {
        TextTable e({"ENDPOINT", "CLUSTERS", "STATE", "REQ KERNEL", "REQ USER", "2XX", "3XX", "4XX", "5XX",
                     "BYTES OUT", "CONNS KERNEL", "CONNS USER"},
                    {false, false, false, true, true, true, true, true, true, true, true, true});
        auto conns = [](uint32_t idle, uint32_t busy) { return num(idle) + " idle/" + num(busy) + " busy"; };
        for (const auto& ep : s.endpoints)
            e.add({ep.address, ep.clusters, ep.state, num(ep.requests_kernel), num(ep.requests_user), num(ep.status[2]),
                   num(ep.status[3]), num(ep.status[4]), num(ep.status[5]), format_bytes(ep.bytes_out),
                   conns(ep.kernel_idle, ep.kernel_busy), conns(ep.user_idle, ep.user_busy)});
        out += "\nPer endpoint (exchanges counted when they end; connections open now):\n" + e.str();
    }

    TextTable answered({"ANSWERED BY POLICY", "JWT MISSING", "JWT INVALID", "RBAC DENIED", "RATE LIMITED", "DIRECT"},
                       {false, true, true, true, true, true});
    bool any_answered = false;
    for (const auto& r : s.routes) {
        if (!r.jwt_missing && !r.jwt_invalid && !r.rbac_denied && !r.rate_limited && !r.direct_responses)
            continue;
        any_answered = true;
        answered.add({r.name, num(r.jwt_missing), num(r.jwt_invalid), num(r.rbac_denied), num(r.rate_limited),
                      num(r.direct_responses)});
    }
    if (any_answered)
        out += "\n" + answered.str();

    std::vector<std::pair<std::string, uint64_t>> plane, fallback;
    for (const auto& [k, v] : s.counters) {
        if (k.rfind(kSlowPathPrefix, 0) == 0)
            fallback.emplace_back(k.substr(std::string(kSlowPathPrefix).size()), v);
        else
            plane.emplace_back(k, v);
    }
    if (!plane.empty()) {
        TextTable c({"DATA PLANE", "COUNT"}, {false, true});
        for (const auto& [k, v] : plane)
            c.add({k, num(v)});
        out += "\n" + c.str();
    }
    if (!fallback.empty()) {
        TextTable c({"TO SLOW PATH, BECAUSE", "COUNT"}, {false, true});
        for (const auto& [k, v] : fallback)
            c.add({k, num(v)});
        out += "\n" + c.str();
    }
    if (s.counters.empty())
        out += "\nNo data-plane counters (the kernel data plane is not in use).\n";
    return out;
}

void route_json(JsonWriter& w, const RouteInfo& r)
{
    w.begin_object()
        .field("name", r.name)
        .field("listeners", r.listeners)
        .field("match", r.match)
        .field("clusters", r.clusters)
        .field("placement", codec::placement_name(r.kernel))
        .field("reason", r.reason)
        .field("where", r.where)
        .end_object();
}

std::string reload_json(const ReloadOutcome& r)
{
    JsonWriter w;
    w.begin_object().field("ok", r.ok).field("generation", r.generation).field("error", r.error).end_object();
    return w.str();
}

std::string check_json(const CheckReport& r)
{
    JsonWriter w;
    w.begin_object().field("file", r.file).field("ok", r.result && r.result->ok());
    w.key("errors").begin_array();
    if (r.result)
        for (const auto& e : r.result->errors())
            w.begin_object()
                .field("file", e.file)
                .field("line", static_cast<uint64_t>(e.line))
                .field("column", static_cast<uint64_t>(e.column))
                .field("key", e.key)
                .field("message", e.message)
                .field("text", e.str())
                .end_object();
    w.end_array();
    w.key("placement");
    if (r.placement) {
        w.begin_array();
        for (const auto& ri : r.placement->placement)
            route_json(w, ri);
        w.end_array();
    } else {
        w.null();
    }
    w.field("placement_note", r.placement_note);
    w.key("warnings").begin_array();
    for (const auto& warning : r.warnings)
        w.value(warning);
    w.end_array();
    w.end_object();
    return w.str();
}

std::string render_check(const CheckReport& r)
{
    if (!r.result || !r.result->ok())
        return {};
    const auto& pol = r.result->policy();
    std::string out = r.file + ": OK (" + count(pol.routes.size(), "route") + ", " +
                      count(pol.listeners.size(), "listener");
    if (pol.sources.size() > 1)
        out += ", " + count(pol.sources.size() - 1, "drop-in file");
    out += ")\n";
    if (r.placement) {
        out += "\nWhere the routes would run on this node (as l7fastd sees it):\n\n" +
               render_routes(r.placement->placement);
    } else if (!r.placement_note.empty()) {
        out += "Placement not shown: " + r.placement_note + "\n";
    }
    for (const auto& warning : r.warnings)
        out += "\nWarning: " + warning + "\n";
    return out;
}

}  // namespace l7fast::control
