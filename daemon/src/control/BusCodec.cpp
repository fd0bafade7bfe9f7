#include "control/BusCodec.hpp"

#include <cerrno>
#include <cstring>
#include <functional>
#include <string_view>

namespace l7fast::control::codec {

namespace {

// Appends, keeping the first error and doing nothing after it.
class Appender {
public:
    explicit Appender(sd_bus_message* m) : m_(m) {}

    int result() const { return r_ < 0 ? r_ : 0; }

    Appender& open(char type, const char* contents)
    {
        if (r_ >= 0)
            r_ = sd_bus_message_open_container(m_, type, contents);
        return *this;
    }
    Appender& close()
    {
        if (r_ >= 0)
            r_ = sd_bus_message_close_container(m_);
        return *this;
    }
    Appender& str(std::string_view s)
    {
        if (r_ >= 0) {
            const std::string v = valid_utf8(s);
            r_ = sd_bus_message_append_basic(m_, 's', v.c_str());
        }
        return *this;
    }
    Appender& boolean(bool b)
    {
        int v = b;
        if (r_ >= 0)
            r_ = sd_bus_message_append_basic(m_, 'b', &v);
        return *this;
    }
    Appender& u64(uint64_t v)
    {
        if (r_ >= 0)
            r_ = sd_bus_message_append_basic(m_, 't', &v);
        return *this;
    }
    Appender& u32(uint32_t v)
    {
        if (r_ >= 0)
            r_ = sd_bus_message_append_basic(m_, 'u', &v);
        return *this;
    }
    Appender& strv(const std::vector<std::string>& v)
    {
        open('a', "s");
        for (const auto& s : v)
            str(s);
        return close();
    }
    Appender& string_map(const std::vector<std::pair<std::string, std::string>>& v)
    {
        open('a', "{ss}");
        for (const auto& [k, s] : v)
            open('e', "ss").str(k).str(s).close();
        return close();
    }
    Appender& counter_map(const std::vector<std::pair<std::string, uint64_t>>& v)
    {
        open('a', "{st}");
        for (const auto& [k, n] : v)
            open('e', "st").str(k).u64(n).close();
        return close();
    }
    Appender& u64_array(const std::vector<uint64_t>& v)
    {
        if (r_ >= 0)
            r_ = sd_bus_message_append_array(m_, 't', v.data(), v.size() * sizeof(uint64_t));
        return *this;
    }

    // One a{sv} entry: key, then the variant's content written by body.
    template <class Body>
    Appender& entry(const char* key, const char* sig, Body&& body)
    {
        open('e', "sv").str(key).open('v', sig);
        body(*this);
        return close().close();
    }
    Appender& entry(const char* key, const std::string& v)
    {
        return entry(key, "s", [&](Appender& a) { a.str(v); });
    }
    Appender& entry(const char* key, bool v)
    {
        return entry(key, "b", [&](Appender& a) { a.boolean(v); });
    }
    Appender& entry(const char* key, uint64_t v)
    {
        return entry(key, "t", [&](Appender& a) { a.u64(v); });
    }
    Appender& entry(const char* key, uint32_t v)
    {
        return entry(key, "u", [&](Appender& a) { a.u32(v); });
    }

private:
    sd_bus_message* m_;
    int r_ = 0;
};

void append_route(Appender& a, const RouteInfo& r)
{
    a.open('a', "{sv}")
        .entry("name", r.name)
        .entry("listeners", r.listeners)
        .entry("match", r.match)
        .entry("clusters", r.clusters)
        .entry("placement", std::string(placement_name(r.kernel)))
        .entry("reason", r.reason)
        .entry("where", r.where)
        .close();
}

void append_route_list(Appender& a, const std::vector<RouteInfo>& routes)
{
    a.open('a', "a{sv}");
    for (const auto& r : routes)
        append_route(a, r);
    a.close();
}

// ---- reading -------------------------------------------------------------------

int read_string(sd_bus_message* m, std::string* out)
{
    const char* s = nullptr;
    int r = sd_bus_message_read_basic(m, 's', &s);
    if (r < 0)
        return r;
    if (r == 0)
        return -EBADMSG;
    *out = s;
    return 1;
}

int read_bool(sd_bus_message* m, bool* out)
{
    int v = 0;
    int r = sd_bus_message_read_basic(m, 'b', &v);
    if (r <= 0)
        return r < 0 ? r : -EBADMSG;
    *out = v != 0;
    return 1;
}

template <class T, char Type>
int read_number(sd_bus_message* m, T* out)
{
    T v{};
    int r = sd_bus_message_read_basic(m, Type, &v);
    if (r <= 0)
        return r < 0 ? r : -EBADMSG;
    *out = v;
    return 1;
}

int read_strv(sd_bus_message* m, std::vector<std::string>* out)
{
    int r = sd_bus_message_enter_container(m, 'a', "s");
    if (r <= 0)
        return r < 0 ? r : -EBADMSG;
    out->clear();
    const char* s = nullptr;
    while ((r = sd_bus_message_read_basic(m, 's', &s)) > 0)
        out->emplace_back(s);
    if (r < 0)
        return r;
    r = sd_bus_message_exit_container(m);
    return r < 0 ? r : 1;
}

// a{s?} with a basic value type; Raw is what sd-bus reads for Type.
template <class Raw, char Type, class V>
int read_pairs(sd_bus_message* m, std::vector<std::pair<std::string, V>>* out)
{
    static constexpr char entry_sig[] = {'s', Type, 0};
    static constexpr char array_sig[] = {'{', 's', Type, '}', 0};
    int r = sd_bus_message_enter_container(m, 'a', array_sig);
    if (r <= 0)
        return r < 0 ? r : -EBADMSG;
    out->clear();
    while ((r = sd_bus_message_enter_container(m, 'e', entry_sig)) > 0) {
        const char* k = nullptr;
        Raw v{};
        if ((r = sd_bus_message_read_basic(m, 's', &k)) <= 0 ||
            (r = sd_bus_message_read_basic(m, Type, &v)) <= 0)
            return r < 0 ? r : -EBADMSG;
        out->emplace_back(k, v);
        if ((r = sd_bus_message_exit_container(m)) < 0)
            return r;
    }
    if (r < 0)
        return r;
    r = sd_bus_message_exit_container(m);
    return r < 0 ? r : 1;
}

int read_u64_array(sd_bus_message* m, std::vector<uint64_t>* out)
{
    const void* p = nullptr;
    size_t size = 0;
    int r = sd_bus_message_read_array(m, 't', &p, &size);
    if (r < 0)
        return r;
    const auto* v = static_cast<const uint64_t*>(p);
    out->assign(v, v + size / sizeof(uint64_t));
    return 1;
}

// Walks an a{sv}. on_field runs positioned inside the variant; it returns >0
// when it read the value, 0 to have it skipped, <0 on error.
using FieldFn = std::function<int(std::string_view key, std::string_view sig)>;

int read_dict(sd_bus_message* m, const FieldFn& on_field)
{
    int r = sd_bus_message_enter_container(m, 'a', "{sv}");
    if (r <= 0)
        return r < 0 ? r : -EBADMSG;
    while ((r = sd_bus_message_enter_container(m, 'e', "sv")) > 0) {
        const char* key = nullptr;
        if ((r = sd_bus_message_read_basic(m, 's', &key)) <= 0)
            return r < 0 ? r : -EBADMSG;
        const std::string k = key;
        char type = 0;
        const char* contents = nullptr;
        if ((r = sd_bus_message_peek_type(m, &type, &contents)) <= 0)
            return r < 0 ? r : -EBADMSG;
        const std::string sig = contents ? contents : "";
        if ((r = sd_bus_message_enter_container(m, 'v', sig.c_str())) <= 0)
            return r < 0 ? r : -EBADMSG;
        r = on_field(k, sig);
        if (r < 0)
            return r;
        if (r == 0 && (r = sd_bus_message_skip(m, sig.c_str())) < 0)
            return r;
        if ((r = sd_bus_message_exit_container(m)) < 0 || (r = sd_bus_message_exit_container(m)) < 0)
            return r;
    }
    if (r < 0)
        return r;
    r = sd_bus_message_exit_container(m);
    return r < 0 ? r : 1;
}

// Field readers for read_dict: each returns a FieldFn fragment result.
struct Fields {
    sd_bus_message* m;
    std::string_view key, sig;
    int r = 0;  // >0 once a field matched
    bool done = false;

    template <class F>
    Fields& on(const char* k, const char* s, F&& read)
    {
        if (!done && key == k && sig == s) {
            r = read();
            done = true;
        }
        return *this;
    }
    Fields& str(const char* k, std::string* out)
    {
        return on(k, "s", [&] { return read_string(m, out); });
    }
    Fields& boolean(const char* k, bool* out)
    {
        return on(k, "b", [&] { return read_bool(m, out); });
    }
    Fields& u64(const char* k, uint64_t* out)
    {
        return on(k, "t", [&] { return read_number<uint64_t, 't'>(m, out); });
    }
    Fields& u32(const char* k, uint32_t* out)
    {
        return on(k, "u", [&] { return read_number<uint32_t, 'u'>(m, out); });
    }
    Fields& placement(const char* k, bool* kernel)
    {
        return on(k, "s", [&] {
            std::string p;
            int rr = read_string(m, &p);
            *kernel = p == "kernel";
            return rr;
        });
    }
};

int read_route(sd_bus_message* m, RouteInfo* r)
{
    return read_dict(m, [&](std::string_view key, std::string_view sig) {
        Fields f{m, key, sig};
        f.str("name", &r->name)
            .str("listeners", &r->listeners)
            .str("match", &r->match)
            .str("clusters", &r->clusters)
            .placement("placement", &r->kernel)
            .str("reason", &r->reason)
            .str("where", &r->where);
        return f.r;
    });
}

int read_route_list(sd_bus_message* m, std::vector<RouteInfo>* out)
{
    int r = sd_bus_message_enter_container(m, 'a', "a{sv}");
    if (r <= 0)
        return r < 0 ? r : -EBADMSG;
    out->clear();
    for (;;) {
        if ((r = sd_bus_message_at_end(m, false)) < 0)
            return r;
        if (r > 0)
            break;
        RouteInfo ri;
        if ((r = read_route(m, &ri)) < 0)
            return r;
        out->push_back(std::move(ri));
    }
    r = sd_bus_message_exit_container(m);
    return r < 0 ? r : 1;
}

// GetStats "responses": status classes 1xx..5xx, then other.
std::vector<std::pair<std::string, uint64_t>> status_classes(const uint64_t (&status)[L7_STATUS_CLASSES])
{
    std::vector<std::pair<std::string, uint64_t>> v;
    for (int i = 1; i <= 6; i++)
        v.emplace_back(kStatusClass[i % L7_STATUS_CLASSES], status[i % L7_STATUS_CLASSES]);
    return v;
}

int read_status_classes(sd_bus_message* m, uint64_t (&status)[L7_STATUS_CLASSES])
{
    std::vector<std::pair<std::string, uint64_t>> v;
    int r = read_pairs<uint64_t, 't'>(m, &v);
    for (const auto& [k, n] : v)
        for (int i = 0; i < L7_STATUS_CLASSES; i++)
            if (k == kStatusClass[i])
                status[i] = n;
    return r;
}

// GetStats "rejected": requests a route's pipeline refused, by reason.
std::vector<std::pair<std::string, uint64_t>> rejections(const RouteStats& rs)
{
    return {{"jwt_missing", rs.jwt_missing},
            {"jwt_invalid", rs.jwt_invalid},
            {"rbac_denied", rs.rbac_denied},
            {"rate_limited", rs.rate_limited}};
}

int read_route_stats(sd_bus_message* m, RouteStats* rs)
{
    return read_dict(m, [&](std::string_view key, std::string_view sig) {
        Fields f{m, key, sig};
        f.str("name", &rs->name)
            .placement("placement", &rs->kernel)
            .u64("requests_kernel", &rs->requests_kernel)
            .u64("requests_user", &rs->requests_user)
            .u64("bytes_in", &rs->bytes_in)
            .u64("bytes_out", &rs->bytes_out)
            .on("responses", "a{st}", [&] { return read_status_classes(m, rs->status); })
            .on("latency_buckets", "at", [&] { return read_u64_array(m, &rs->latency); })
            .on("rejected", "a{st}",
                [&] {
                    std::vector<std::pair<std::string, uint64_t>> v;
                    int rr = read_pairs<uint64_t, 't'>(m, &v);
                    for (const auto& [k, n] : v) {
                        if (k == "jwt_missing")
                            rs->jwt_missing = n;
                        else if (k == "jwt_invalid")
                            rs->jwt_invalid = n;
                        else if (k == "rbac_denied")
                            rs->rbac_denied = n;
                        else if (k == "rate_limited")
                            rs->rate_limited = n;
                    }
                    return rr;
                })
            .on("rbac_denied_by_rule", "a{st}", [&] { return read_pairs<uint64_t, 't'>(m, &rs->rbac_denied_by_rule); })
            .on("user_latency_buckets", "at", [&] { return read_u64_array(m, &rs->user_latency); })
            .u64("user_latency_sum_ns", &rs->user_latency_sum_ns)
            .on("user_codes", "a{st}", [&] { return read_pairs<uint64_t, 't'>(m, &rs->user_codes); })
            .on("kernel_codes", "a{st}", [&] { return read_pairs<uint64_t, 't'>(m, &rs->kernel_codes); })
            .u64("direct_responses", &rs->direct_responses);
        return f.r;
    });
}

// ---- generic JSON --------------------------------------------------------------

bool is_basic(char t)
{
    return t && std::strchr("ybnqiuxtdsogh", t) != nullptr;
}

int write_basic_json(sd_bus_message* m, char type, JsonWriter& w, bool as_key)
{
    union {
        uint8_t y;
        int16_t n;
        uint16_t q;
        int32_t i;
        uint32_t u;
        int64_t x;
        uint64_t t;
        double d;
        int b;
        const char* s;
    } v{};
    int r = sd_bus_message_read_basic(m, type, &v);
    if (r <= 0)
        return r < 0 ? r : -EBADMSG;
    auto emit_num = [&](auto n) {
        if (as_key)
            w.key(std::to_string(n));
        else if constexpr (std::is_signed_v<decltype(n)>)
            w.value(static_cast<int64_t>(n));
        else
            w.value(static_cast<uint64_t>(n));
    };
    switch (type) {
    case 'y': emit_num(v.y); break;
    case 'n': emit_num(v.n); break;
    case 'q': emit_num(v.q); break;
    case 'i': emit_num(v.i); break;
    case 'h': emit_num(v.i); break;
    case 'u': emit_num(v.u); break;
    case 'x': emit_num(v.x); break;
    case 't': emit_num(v.t); break;
    case 'd':
        if (as_key)
            w.key(std::to_string(v.d));
        else
            w.value(v.d);
        break;
    case 'b':
        if (as_key)
            w.key(v.b ? "true" : "false");
        else
            w.value(v.b != 0);
        break;
    default:  // s, o, g
        if (as_key)
            w.key(v.s);
        else
            w.value(v.s);
    }
    return 1;
}

}  // namespace

const char* placement_name(bool kernel) { return kernel ? "kernel" : "user"; }

int append_reload(sd_bus_message* m, const ReloadOutcome& r)
{
    return Appender(m).boolean(r.ok).u64(r.generation).str(r.error).result();
}

int read_reload(sd_bus_message* m, ReloadOutcome* r)
{
    int ok = 0;
    uint64_t gen = 0;
    const char* err = nullptr;
    int rr = sd_bus_message_read(m, "bts", &ok, &gen, &err);
    if (rr < 0)
        return rr;
    r->ok = ok != 0;
    r->generation = gen;
    r->error = err ? err : "";
    return 1;
}

int append_log_level(sd_bus_message* m, const LogLevelOutcome& r)
{
    return Appender(m).str(r.level).str(r.source).result();
}

int read_log_level(sd_bus_message* m, LogLevelOutcome* r)
{
    const char* level = nullptr;
    const char* source = nullptr;
    int rr = sd_bus_message_read(m, "ss", &level, &source);
    if (rr < 0)
        return rr;
    r->ok = true;
    r->level = level ? level : "";
    r->source = source ? source : "";
    return 1;
}

int append_drain(sd_bus_message* m, const DrainOutcome& r)
{
    return sd_bus_message_append(m, "bs", static_cast<int>(r.changed), r.state.c_str());
}

int read_drain(sd_bus_message* m, DrainOutcome* r)
{
    int changed = 0;
    const char* state = nullptr;
    int rr = sd_bus_message_read(m, "bs", &changed, &state);
    if (rr < 0)
        return rr;
    r->ok = true;
    r->changed = changed != 0;
    r->state = state ? state : "";
    return 1;
}

int append_status(sd_bus_message* m, const StatusInfo& s)
{
    Appender a(m);
    a.open('a', "{sv}")
        .entry("version", s.version)
        .entry("state", s.state)
        .entry("degraded_reason", s.degraded_reason)
        .entry("generation", s.generation)
        .entry("policy_files", "as", [&](Appender& x) { x.strv(s.policy_files); })
        .entry("features", "a{ss}", [&](Appender& x) { x.string_map(s.features); })
        .entry("uptime_sec", s.uptime_sec)
        .entry("listeners", s.listeners)
        .entry("routes", s.routes)
        .entry("routes_kernel", s.routes_kernel)
        .entry("connections", s.connections)
        .entry("upstream_connections", s.upstream_connections)
        .entry("parked_connections", s.parked_connections)
        .entry("last_reload_error", s.last_reload_error)
        .entry("reloads_ok", s.reloads_ok)
        .entry("reloads_failed", s.reloads_failed)
        .entry("applied_unix", s.applied_unix)
        .entry("last_reload_unix", s.last_reload_unix)
        .entry("log_level", s.log_level)
        .entry("log_level_source", s.log_level_source)
        .entry("warnings", "as", [&](Appender& x) { x.strv(s.warnings); })
        .close();
    return a.result();
}

int read_status(sd_bus_message* m, StatusInfo* s)
{
    return read_dict(m, [&](std::string_view key, std::string_view sig) {
        Fields f{m, key, sig};
        f.str("version", &s->version)
            .str("state", &s->state)
            .str("degraded_reason", &s->degraded_reason)
            .u64("generation", &s->generation)
            .on("policy_files", "as", [&] { return read_strv(m, &s->policy_files); })
            .on("features", "a{ss}", [&] { return read_pairs<const char*, 's'>(m, &s->features); })
            .u64("uptime_sec", &s->uptime_sec)
            .u32("listeners", &s->listeners)
            .u32("routes", &s->routes)
            .u32("routes_kernel", &s->routes_kernel)
            .u64("connections", &s->connections)
            .u64("upstream_connections", &s->upstream_connections)
            .u64("parked_connections", &s->parked_connections)
            .str("last_reload_error", &s->last_reload_error)
            .u64("reloads_ok", &s->reloads_ok)
            .u64("reloads_failed", &s->reloads_failed)
            .u64("applied_unix", &s->applied_unix)
            .u64("last_reload_unix", &s->last_reload_unix)
            .str("log_level", &s->log_level)
            .str("log_level_source", &s->log_level_source)
            .on("warnings", "as", [&] { return read_strv(m, &s->warnings); });
        return f.r;
    });
}

int append_stats(sd_bus_message* m, const StatsSnapshot& s)
{
    Appender a(m);
    a.open('a', "{sv}")
        .entry("generation", s.generation)
        .entry("requests_kernel", s.requests_kernel)
        .entry("requests_user", s.requests_user)
        .entry("no_route", s.no_route)
        .entry("routes", "aa{sv}",
               [&](Appender& x) {
                   x.open('a', "a{sv}");
                   for (const auto& rs : s.routes) {
                       x.open('a', "{sv}")
                           .entry("name", rs.name)
                           .entry("placement", std::string(placement_name(rs.kernel)))
                           .entry("requests_kernel", rs.requests_kernel)
                           .entry("requests_user", rs.requests_user)
                           .entry("responses", "a{st}", [&](Appender& y) { y.counter_map(status_classes(rs.status)); })
                           .entry("bytes_in", rs.bytes_in)
                           .entry("bytes_out", rs.bytes_out)
                           .entry("latency_buckets", "at", [&](Appender& y) { y.u64_array(rs.latency); })
                           .entry("rejected", "a{st}", [&](Appender& y) { y.counter_map(rejections(rs)); })
                           .entry("rbac_denied_by_rule", "a{st}",
                                  [&](Appender& y) { y.counter_map(rs.rbac_denied_by_rule); })
                           .entry("direct_responses", rs.direct_responses)
                           .entry("user_latency_buckets", "at", [&](Appender& y) { y.u64_array(rs.user_latency); })
                           .entry("user_latency_sum_ns", rs.user_latency_sum_ns)
                           .entry("user_codes", "a{st}", [&](Appender& y) { y.counter_map(rs.user_codes); })
                           .entry("kernel_codes", "a{st}", [&](Appender& y) { y.counter_map(rs.kernel_codes); })
                           .close();
                   }
                   x.close();
               })
        .entry("endpoints", "aa{sv}",
               [&](Appender& x) {
                   x.open('a', "a{sv}");
                   for (const auto& es : s.endpoints) {
                       x.open('a', "{sv}")
                           .entry("address", es.address)
                           .entry("clusters", es.clusters)
                           .entry("requests_kernel", es.requests_kernel)
                           .entry("requests_user", es.requests_user)
                           .entry("responses", "a{st}", [&](Appender& y) { y.counter_map(status_classes(es.status)); })
                           .entry("bytes_out", es.bytes_out)
                           .entry("latency_buckets", "at", [&](Appender& y) { y.u64_array(es.latency); })
                           .entry("kernel_idle", es.kernel_idle)
                           .entry("kernel_busy", es.kernel_busy)
                           .entry("user_idle", es.user_idle)
                           .entry("user_busy", es.user_busy)
                           .entry("state", es.state)
                           .entry("checked", es.checked)
                           .entry("checks_passed", es.checks_passed)
                           .entry("checks_failed", es.checks_failed)
                           .entry("last_check", es.last_check)
                           .entry("ejections_5xx", es.ejections_5xx)
                           .entry("ejections_connect_failure", es.ejections_connect)
                           .entry("ejected_for_ms", es.ejected_for_ms)
                           .close();
                   }
                   x.close();
               })
        .entry("counters", "a{st}", [&](Appender& x) { x.counter_map(s.counters); })
        .entry("refused", "a{st}", [&](Appender& x) { x.counter_map(s.refused); })
        .close();
    return a.result();
}

static int read_endpoint_stats(sd_bus_message* m, EndpointStats* es)
{
    return read_dict(m, [&](std::string_view key, std::string_view sig) {
        Fields f{m, key, sig};
        f.str("address", &es->address)
            .str("clusters", &es->clusters)
            .u64("requests_kernel", &es->requests_kernel)
            .u64("requests_user", &es->requests_user)
            .u64("bytes_out", &es->bytes_out)
            .on("responses", "a{st}", [&] { return read_status_classes(m, es->status); })
            .on("latency_buckets", "at", [&] { return read_u64_array(m, &es->latency); })
            .u32("kernel_idle", &es->kernel_idle)
            .u32("kernel_busy", &es->kernel_busy)
            .u32("user_idle", &es->user_idle)
            .u32("user_busy", &es->user_busy)
            .str("state", &es->state)
            .boolean("checked", &es->checked)
            .u64("checks_passed", &es->checks_passed)
            .u64("checks_failed", &es->checks_failed)
            .str("last_check", &es->last_check)
            .u64("ejections_5xx", &es->ejections_5xx)
            .u64("ejections_connect_failure", &es->ejections_connect)
            .u64("ejected_for_ms", &es->ejected_for_ms);
        return f.r;
    });
}

int read_stats(sd_bus_message* m, StatsSnapshot* s)
{
    return read_dict(m, [&](std::string_view key, std::string_view sig) {
        Fields f{m, key, sig};
        f.u64("generation", &s->generation)
            .u64("requests_kernel", &s->requests_kernel)
            .u64("requests_user", &s->requests_user)
            .u64("no_route", &s->no_route)
            .on("counters", "a{st}", [&] { return read_pairs<uint64_t, 't'>(m, &s->counters); })
            .on("refused", "a{st}", [&] { return read_pairs<uint64_t, 't'>(m, &s->refused); })
            .on("routes", "aa{sv}", [&] {
                int r = sd_bus_message_enter_container(m, 'a', "a{sv}");
                if (r <= 0)
                    return r < 0 ? r : -EBADMSG;
                s->routes.clear();
                while ((r = sd_bus_message_at_end(m, false)) == 0) {
                    RouteStats rs;
                    if ((r = read_route_stats(m, &rs)) < 0)
                        return r;
                    s->routes.push_back(std::move(rs));
                }
                if (r < 0)
                    return r;
                r = sd_bus_message_exit_container(m);
                return r < 0 ? r : 1;
            })
            .on("endpoints", "aa{sv}", [&] {
                int r = sd_bus_message_enter_container(m, 'a', "a{sv}");
                if (r <= 0)
                    return r < 0 ? r : -EBADMSG;
                s->endpoints.clear();
                while ((r = sd_bus_message_at_end(m, false)) == 0) {
                    EndpointStats es;
                    if ((r = read_endpoint_stats(m, &es)) < 0)
                        return r;
                    s->endpoints.push_back(std::move(es));
                }
                if (r < 0)
                    return r;
                r = sd_bus_message_exit_container(m);
                return r < 0 ? r : 1;
            });
        return f.r;
    });
}

int append_routes(sd_bus_message* m, const std::vector<RouteInfo>& routes)
{
    Appender a(m);
    append_route_list(a, routes);
    return a.result();
}

int read_routes(sd_bus_message* m, std::vector<RouteInfo>* routes)
{
    return read_route_list(m, routes);
}

int append_check(sd_bus_message* m, const CheckOutcome& c)
{
    Appender a(m);
    a.boolean(c.ok).str(c.errors);
    append_route_list(a, c.placement);
    return a.result();
}

int read_check(sd_bus_message* m, CheckOutcome* c)
{
    int ok = 0;
    const char* errors = nullptr;
    int r = sd_bus_message_read(m, "bs", &ok, &errors);
    if (r < 0)
        return r;
    c->ok = ok != 0;
    c->errors = errors ? errors : "";
    if ((r = read_route_list(m, &c->placement)) < 0)
        return r;
    c->routes = static_cast<uint32_t>(c->placement.size());
    c->routes_kernel = 0;
    for (const auto& ri : c->placement)
        c->routes_kernel += ri.kernel;
    return 1;
}

int append_features(sd_bus_message* m, const std::vector<std::pair<std::string, std::string>>& f)
{
    return Appender(m).string_map(f).result();
}

int write_json(sd_bus_message* m, JsonWriter& w)
{
    char type = 0;
    const char* contents = nullptr;
    int r = sd_bus_message_peek_type(m, &type, &contents);
    if (r <= 0)
        return r < 0 ? r : -EBADMSG;
    if (is_basic(type))
        return write_basic_json(m, type, w, false);
    const std::string sig = contents ? contents : "";
    if ((r = sd_bus_message_enter_container(m, type, sig.c_str())) <= 0)
        return r < 0 ? r : -EBADMSG;
    if (type == 'v') {
        if ((r = write_json(m, w)) < 0)
            return r;
    } else if (type == 'a' && sig.size() >= 4 && sig[0] == '{' && is_basic(sig[1])) {
        const std::string entry_sig = sig.substr(1, sig.size() - 2);
        w.begin_object();
        while ((r = sd_bus_message_enter_container(m, 'e', entry_sig.c_str())) > 0) {
            if ((r = write_basic_json(m, sig[1], w, true)) < 0 || (r = write_json(m, w)) < 0 ||
                (r = sd_bus_message_exit_container(m)) < 0)
                return r;
        }
        if (r < 0)
            return r;
        w.end_object();
    } else {  // arrays and structs
        w.begin_array();
        while ((r = sd_bus_message_at_end(m, false)) == 0)
            if ((r = write_json(m, w)) < 0)
                return r;
        if (r < 0)
            return r;
        w.end_array();
    }
    r = sd_bus_message_exit_container(m);
    return r < 0 ? r : 1;
}

}  // namespace l7fast::control::codec
