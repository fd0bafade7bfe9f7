// The policy loader's readers of [daemon] and [[listener]] tables.
#include "common/Log.hpp"
#include "l7fast_abi.h"
#include "loader/LoaderChecks.hpp"
#include "loader/LoaderInternal.hpp"
#include "loader/LoaderLimits.hpp"
#include "config/Text.hpp"

namespace l7fast::policy::loader {

using text::quote;
using text::closest;

// ---- [daemon] ---------------------------------------------------------------------

void read_daemon(const FileContext& cx, const toml::table& t, DaemonSettings& s, Drafts& out)
{
    TableReader r(cx, t, "daemon",
                  {"cgroup", "bpffs", "ingress_budget", "kernel_dataplane", "offload_remote_clients",
                   "pool_min_idle", "pool_max", "connect_timeout_ms", "request_timeout_ms",
                   "header_timeout_ms", "idle_timeout_ms", "log_level", "metrics_address", "access_log_sample",
                   "access_log_format"});
    for (auto [key, target] : {std::pair{"cgroup", &s.cgroup}, std::pair{"bpffs", &s.bpffs}}) {
        if (auto v = r.string(key)) {
            if (auto why = check_absolute_path(*v))
                r.error(key, *why);
            else
                *target = *v;
        }
    }
    if (auto v = r.integer("ingress_budget", kMinIngressBudget, UINT32_MAX,
                           "bytes; smaller budgets would send most responses over TCP"))
        s.ingress_budget = static_cast<uint32_t>(*v);
    if (auto v = r.boolean("kernel_dataplane"))
        s.kernel_dataplane = *v;
    if (auto v = r.boolean("offload_remote_clients"))
        s.offload_remote_clients = *v;
    if (auto v = r.integer("pool_max", 1, L7_POOL_MAX,
                           "pooled kernel-path connections per endpoint; the data plane's pools "
                           "hold at most " + std::to_string(L7_POOL_MAX)))
        s.pool_max = static_cast<uint32_t>(*v);
    if (auto v = r.integer("pool_min_idle", 0, L7_POOL_MAX)) {
        if (static_cast<uint32_t>(*v) > s.pool_max)
            r.error("pool_min_idle", std::to_string(*v) + " is more than pool_max (" +
                                         std::to_string(s.pool_max) + ")");
        else
            s.pool_min_idle = static_cast<uint32_t>(*v);
    }
    for (auto [key, target] : {std::pair{"connect_timeout_ms", &s.connect_timeout},
                               std::pair{"request_timeout_ms", &s.request_timeout},
                               std::pair{"header_timeout_ms", &s.header_timeout},
                               std::pair{"idle_timeout_ms", &s.idle_timeout}}) {
        if (auto v = r.integer(key, 1, kMaxTimeoutMs, "milliseconds, at most one day"))
            *target = std::chrono::milliseconds(*v);
    }
    if (auto v = r.string("log_level")) {
        log::Level level;
        if (!log::parse_level(*v, &level))
            r.error("log_level", quote(*v) + " is not a log level; use \"error\", \"warning\", "
                                              "\"notice\", \"info\" or \"debug\"");
        else
            s.log_level = *v;
    }
    if (auto text = r.string("metrics_address")) {
        std::string why;
        if (auto a = SocketAddress::parse(*text, &why)) {
            s.metrics_address = *a;
            out.metrics_at = r.located("metrics_address");
        } else {
            r.error("metrics_address", why);
        }
    }
    if (auto v = r.integer("access_log_sample", 0, kMaxAccessLogSample,
                           "log one request in N; 1 logs every request, 0 none"))
        s.access_log_sample = static_cast<uint32_t>(*v);
    if (auto v = r.string("access_log_format")) {
        if (*v == "text" || *v == "json") {
            s.access_log_json = *v == "json";
        } else {
            std::string message = quote(*v) + " is not an access-log format; use \"text\" or \"json\"";
            if (auto guess = closest(*v, {"text", "json"}))
                message += " (did you mean \"" + *guess + "\"?)";
            r.error("access_log_format", message);
        }
    }
}

// ---- [[listener]] -------------------------------------------------------------------

void read_listener(const FileContext& cx, const toml::table& t, size_t index, Drafts& out)
{
    TableReader r(cx, t, entity_path("listener", index, t), {"name", "address"});
    ListenerDraft d;
    read_name(r, "listener", d);
    d.address_at = r.located("address");
    if (auto text = r.required_string("address", "give the address to listen on, e.g. \"127.0.0.1:8080\"")) {
        std::string why;
        if (auto a = SocketAddress::parse(*text, &why))
            d.address = *a;
        else
            r.error("address", why);
    }
    out.listeners.push_back(std::move(d));
}

}  // namespace l7fast::policy::loader
