#include "proxy/AccessLog.hpp"

#include <arpa/inet.h>
#include <sys/socket.h>

#include <cstdio>
#include <ctime>
#include <random>

#include "common/Log.hpp"
#include "config/Text.hpp"

namespace l7fast::proxy {

namespace {

// `t` cut at AccessLog::kMaxTarget bytes ("..." appended when cut), `"` and
// `\` escaped with a backslash, a byte outside 0x20..0x7e as `nonprint`
// followed by two hex digits (\x for the text format, \u00 for JSON).
std::string escaped(std::string_view t, const char* nonprint)
{
    static const char hex[] = "0123456789abcdef";
    std::string out;
    const bool cut = t.size() > AccessLog::kMaxTarget;
    for (unsigned char c : t.substr(0, AccessLog::kMaxTarget)) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += static_cast<char>(c);
        } else if (c < 0x20 || c > 0x7e) {
            out += nonprint;
            out += hex[c >> 4];
            out += hex[c & 15];
        } else {
            out += static_cast<char>(c);
        }
    }
    if (cut)
        out += "...";
    return out;
}

}  // namespace

std::string AccessLog::escape_target(std::string_view t) { return escaped(t, "\\x"); }

std::string AccessLog::format(const AccessEntry& e)
{
    std::string s = "access client=" + e.client;
    s += " method=";
    s += e.method.empty() ? std::string("-") : escape_target(e.method);
    s += " target=";
    s += e.target.empty() ? std::string("-") : "\"" + escape_target(e.target) + "\"";
    s += " route=";
    s += e.route.empty() ? std::string("-") : escape_target(e.route);
    s += " status=" + std::to_string(e.status);
    s += " in=" + (e.bytes_in ? std::to_string(*e.bytes_in) : std::string("-"));
    s += " out=" + std::to_string(e.bytes_out);
    s += " latency_us=" + std::to_string(e.latency_ns / 1000);
    s += e.kernel ? " path=kernel" : " path=user";
    if (!e.reason.empty())
        s += " reason=" + escape_target(e.reason);
    s += " id=" + (e.request_id.empty() ? std::string("-") : escape_target(e.request_id));
    return s;
}

std::string AccessLog::request_id_from(std::span<const policy::HeaderField> fields)
{
    for (const policy::HeaderField& f : fields) {
        if (f.name.size() != 12 || !policy::text::iequals(f.name, "x-request-id"))
            continue;
        if (f.value.empty() || f.value.size() > kMaxRequestId)
            return {};
        for (unsigned char c : f.value)
            if (c <= 0x20 || c >= 0x7f || c == '"' || c == '\\')
                return {};
        return std::string(f.value);
    }
    return {};
}

std::string AccessLog::make_request_id()
{
    thread_local std::mt19937_64 rng{std::random_device{}()};
    char buf[17];
    std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(rng()));
    return buf;
}

namespace {

// A JSON string of at most kMaxTarget bytes of `v` ("..." appended when
// cut), or null when empty.
std::string json_string(std::string_view v)
{
    return v.empty() ? std::string("null") : "\"" + escaped(v, "\\u00") + "\"";
}

std::string rfc3339_ms(std::chrono::system_clock::time_point t)
{
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
    const std::time_t secs = static_cast<std::time_t>(ms / 1000);
    std::tm tm{};
    gmtime_r(&secs, &tm);
    char buf[96];  // room for any int the compiler can imagine in each field
    std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                  tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms % 1000));
    return buf;
}

}  // namespace

std::string AccessLog::format_json(const AccessEntry& e, std::chrono::system_clock::time_point when)
{
    std::string s = "{\"time\":\"" + rfc3339_ms(when) + "\",\"type\":\"access\"";
    s += ",\"request_id\":" + json_string(e.request_id);
    s += ",\"client\":" + json_string(e.client);
    s += ",\"method\":" + json_string(e.method);
    s += ",\"authority\":" + json_string(e.authority);
    s += ",\"target\":" + json_string(e.target);
    s += ",\"route\":" + json_string(e.route);
    s += ",\"cluster\":" + json_string(e.cluster);
    s += ",\"endpoint\":" + json_string(e.endpoint);
    s += ",\"status\":" + std::to_string(e.status);
    s += ",\"reason\":" + json_string(e.reason);
    s += ",\"bytes_in\":" + (e.bytes_in ? std::to_string(*e.bytes_in) : std::string("null"));
    s += ",\"bytes_out\":" + std::to_string(e.bytes_out);
    s += ",\"duration_us\":" + std::to_string(e.latency_ns / 1000);
    s += e.kernel ? ",\"path\":\"kernel\"}" : ",\"path\":\"user\"}";
    return s;
}

void AccessLog::write(const AccessEntry& e, std::chrono::steady_clock::time_point now)
{
    if (now - window_ >= std::chrono::seconds(1)) {
        if (dropped_in_window_)
            log::notice("access log: ", dropped_in_window_, " lines dropped over the cap of ", kMaxLinesPerSecond,
                        " per second (", dropped_, " in all)");
        window_ = now;
        in_window_ = 0;
        dropped_in_window_ = 0;
    }
    if (in_window_ >= kMaxLinesPerSecond) {
        dropped_++;
        dropped_in_window_++;
        return;
    }
    in_window_++;
    const AccessEntry* line = &e;
    AccessEntry with_id;
    if (e.request_id.empty()) {
        with_id = e;
        with_id.request_id = make_request_id();
        line = &with_id;
    }
    log::info(format_ == Format::Json ? format_json(*line, std::chrono::system_clock::now()) : format(*line));
}

std::string client_address(const l7_conn_key& k)
{
    char a[INET6_ADDRSTRLEN] = {};
    inet_ntop(k.family == AF_INET6 ? AF_INET6 : AF_INET, k.client_ip, a, sizeof(a));
    return k.family == AF_INET6 ? "[" + std::string(a) + "]:" + std::to_string(k.client_port)
                                : std::string(a) + ":" + std::to_string(k.client_port);
}

}  // namespace l7fast::proxy
