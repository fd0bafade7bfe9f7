// The policy loader's reader of [[cluster]] tables, with their health_check
// and outlier_detection.
#include <algorithm>
#include <map>

#include "loader/LoaderChecks.hpp"
#include "loader/LoaderInternal.hpp"
#include "loader/LoaderLimits.hpp"
#include "config/Text.hpp"

namespace l7fast::policy::loader {

using text::quote;

namespace {

// The target of a health check request: origin-form, sent as written.
std::optional<std::string> check_health_path(std::string_view p)
{
    if (p.empty() || p.front() != '/') {
        if (p.find("://") != std::string_view::npos)
            return quote(p) + " is a URL: write only its path, starting with '/'";
        return quote(p) + " must start with '/'";
    }
    if (p.size() > kMaxCheckPathBytes)
        return "the path is " + std::to_string(p.size()) + " bytes long; at most " +
               std::to_string(kMaxCheckPathBytes);
    for (char ch : p) {
        const auto c = static_cast<unsigned char>(ch);
        if (c <= 0x20 || c >= 0x7f)
            return quote(p) + " contains " + byte_text(c) + ": percent-encode it (e.g. %20)";
        if (c == '#')
            return quote(p) + " contains '#': a request target has no fragment";
    }
    return std::nullopt;
}

// The Host field of a health check request.
std::optional<std::string> check_health_host(std::string_view h)
{
    if (h.empty())
        return std::string("empty; omit \"host\" to send the endpoint's address");
    if (h.size() > kMaxCheckHostBytes)
        return "the host is " + std::to_string(h.size()) + " bytes long; at most " +
               std::to_string(kMaxCheckHostBytes);
    for (char ch : h) {
        const auto c = static_cast<unsigned char>(ch);
        if (c <= 0x20 || c >= 0x7f)
            return quote(h) + " contains " + byte_text(c) +
                   ": the Host field is sent as written, in visible ASCII without spaces";
    }
    return std::nullopt;
}

// `expected_status`: one status or a non-empty array of distinct ones.
std::vector<uint16_t> read_expected_status(const TableReader& r)
{
    const std::string_view k = "expected_status";
    std::vector<uint16_t> out;
    const toml::node* n = r.node(k);
    if (!n)
        return out;
    const FileContext& cx = r.context();
    const auto status = [&](const toml::node& e, const std::string& path) -> std::optional<uint16_t> {
        auto* v = expect<int64_t>(cx, e, path, "an integer");
        if (!v)
            return std::nullopt;
        if (v->get() < 100 || v->get() > 599) {
            cx.error(cx.at(e), path, std::to_string(v->get()) + " is out of range 100..599 (an HTTP status code)");
            return std::nullopt;
        }
        return static_cast<uint16_t>(v->get());
    };
    if (n->is_integer()) {
        if (auto s = status(*n, r.child(k)))
            out.push_back(*s);
        return out;
    }
    auto* arr = expect<toml::array>(cx, *n, r.child(k), "an integer or an array of integers");
    if (!arr)
        return out;
    if (arr->empty())
        r.error(k, "empty list; omit \"expected_status\" to accept any 2xx or 3xx status");
    for (size_t i = 0; i < arr->size(); i++) {
        const std::string path = index_path(r, k, i);
        const toml::node& e = *arr->get(i);
        auto s = status(e, path);
        if (!s)
            continue;
        if (std::find(out.begin(), out.end(), *s) != out.end())
            cx.error(cx.at(e), path, std::to_string(*s) + " is listed twice");
        else
            out.push_back(*s);
    }
    return out;
}

void read_health_check(const TableReader& cluster, Cluster& c)
{
    const toml::table* t = cluster.table("health_check");
    if (!t)
        return;
    TableReader r(cluster.context(), *t, cluster.child("health_check"),
                  {"path", "host", "interval_ms", "timeout_ms", "healthy_threshold", "unhealthy_threshold",
                   "expected_status"});
    HealthCheck hc;
    hc.where = cluster.located("health_check").at;
    if (auto path = r.string("path")) {
        if (auto why = check_health_path(*path))
            r.error("path", *why);
        else
            hc.path = std::move(*path);
    }
    if (auto host = r.string("host")) {
        if (auto why = check_health_host(*host))
            r.error("host", *why);
        else
            hc.host = std::move(*host);
    }
    auto interval = r.integer("interval_ms", kMinCheckIntervalMs, kMaxCheckIntervalMs,
                              "milliseconds between checks, at most one hour");
    if (interval)
        hc.interval = std::chrono::milliseconds(*interval);
    auto timeout = r.integer("timeout_ms", kMinCheckTimeoutMs, kMaxCheckTimeoutMs,
                             "milliseconds to wait for the status line, at most ten minutes");
    if (timeout)
        hc.timeout = std::chrono::milliseconds(*timeout);
    // only between values that are valid (or defaults)
    if ((interval || !r.has("interval_ms")) && (timeout || !r.has("timeout_ms")) && hc.timeout >= hc.interval)
        r.error(r.has("timeout_ms") ? "timeout_ms" : "interval_ms",
                "timeout_ms (" + std::to_string(hc.timeout.count()) + (r.has("timeout_ms") ? "" : " by default") +
                    ") must be less than interval_ms (" + std::to_string(hc.interval.count()) +
                    (r.has("interval_ms") ? "" : " by default") + ")");
    if (auto v = r.integer("healthy_threshold", 1, kMaxCheckThreshold,
                           "consecutive passes that bring an endpoint back"))
        hc.healthy_threshold = static_cast<uint32_t>(*v);
    if (auto v = r.integer("unhealthy_threshold", 1, kMaxCheckThreshold,
                           "consecutive failures that take an endpoint out"))
        hc.unhealthy_threshold = static_cast<uint32_t>(*v);
    hc.expected_status = read_expected_status(r);
    c.health_check = std::move(hc);
}

void read_outlier_detection(const TableReader& cluster, Cluster& c)
{
    const toml::table* t = cluster.table("outlier_detection");
    if (!t)
        return;
    TableReader r(cluster.context(), *t, cluster.child("outlier_detection"),
                  {"consecutive_5xx", "consecutive_connect_failures", "base_ejection_ms", "max_ejection_ms",
                   "max_ejection_percent"});
    OutlierDetection od;
    od.where = cluster.located("outlier_detection").at;
    if (auto v = r.integer("consecutive_5xx", 0, kMaxOutlierTrigger,
                           "consecutive 5xx responses that eject an endpoint; 0 turns this trigger off"))
        od.consecutive_5xx = static_cast<uint32_t>(*v);
    if (auto v = r.integer("consecutive_connect_failures", 0, kMaxOutlierTrigger,
                           "consecutive failed connection attempts that eject an endpoint; 0 turns this trigger off"))
        od.consecutive_connect_failures = static_cast<uint32_t>(*v);
    if (od.consecutive_5xx == 0 && od.consecutive_connect_failures == 0)
        r.error("consecutive_connect_failures",
                "consecutive_5xx and consecutive_connect_failures are both 0: both triggers are off, so nothing "
                "is ever ejected; remove outlier_detection instead");
    auto base = r.integer("base_ejection_ms", kMinEjectionMs, kMaxEjectionMs, "milliseconds, at most one day");
    if (base)
        od.base_ejection = std::chrono::milliseconds(*base);
    auto max = r.integer("max_ejection_ms", kMinEjectionMs, kMaxEjectionMs, "milliseconds, at most one day");
    if (max)
        od.max_ejection = std::chrono::milliseconds(*max);
    if ((base || !r.has("base_ejection_ms")) && (max || !r.has("max_ejection_ms")) &&
        od.max_ejection < od.base_ejection)
        r.error(r.has("max_ejection_ms") ? "max_ejection_ms" : "base_ejection_ms",
                "max_ejection_ms (" + std::to_string(od.max_ejection.count()) +
                    (r.has("max_ejection_ms") ? "" : " by default") + ") is less than base_ejection_ms (" +
                    std::to_string(od.base_ejection.count()) + (r.has("base_ejection_ms") ? "" : " by default") +
                    ")");
    if (auto v = r.integer("max_ejection_percent", 1, 100,
                           "percent of the cluster's endpoints that may be ejected at once"))
        od.max_ejection_percent = static_cast<uint32_t>(*v);
    c.outlier_detection = od;
}

}  // namespace

void read_cluster(const FileContext& cx, const toml::table& t, size_t index, Drafts& out)
{
    TableReader r(cx, t, entity_path("cluster", index, t),
                  {"name", "lb", "endpoints", "hash_key", "ring_min_size", "ring_max_size", "maglev_table_size",
                   "hash_balance_factor", "health_check", "outlier_detection"});
    ClusterDraft d;
    read_name(r, "cluster", d);
    d.value.where = r.where();
    bool lb_known = true;
    if (auto lb = r.string("lb")) {
        if (*lb == "round_robin")
            d.value.lb = LbPolicy::RoundRobin;
        else if (*lb == "weighted")
            d.value.lb = LbPolicy::Weighted;
        else if (*lb == "ring_hash")
            d.value.lb = LbPolicy::RingHash;
        else if (*lb == "maglev")
            d.value.lb = LbPolicy::Maglev;
        else {
            r.error("lb", quote(*lb) + " is not a load-balancing policy; use \"round_robin\", \"weighted\", "
                                       "\"ring_hash\" or \"maglev\"");
            lb_known = false;
        }
    } else if (r.has("lb")) {
        lb_known = false;
    }
    const bool hashing = d.value.lb == LbPolicy::RingHash || d.value.lb == LbPolicy::Maglev;
    const std::string lb_name = d.value.lb == LbPolicy::RoundRobin ? "round_robin"
                                : d.value.lb == LbPolicy::Weighted ? "weighted"
                                : d.value.lb == LbPolicy::RingHash ? "ring_hash"
                                                                   : "maglev";

    // keys of one policy only: reported when the policy is another known one
    const auto only_for = [&](const char* key, bool applies, const char* which) {
        if (!r.has(key) || applies)
            return true;
        if (lb_known)
            r.error(key, std::string("only applies with ") + which + " (this cluster is " + lb_name + ")");
        return false;
    };
    if (only_for("hash_key", hashing, "lb = \"ring_hash\" or \"maglev\"")) {
        if (r.has("hash_key"))
            d.value.hash_key = read_request_key(r, "hash_key", false);
        else if (hashing && lb_known)
            r.missing("hash_key", "lb = \"" + lb_name +
                                      "\" hashes a request key, e.g. hash_key = { header = \"x-user\" }, "
                                      "{ cookie = \"session\" } or { source_ip = true }");
    }
    if (only_for("ring_min_size", d.value.lb == LbPolicy::RingHash, "lb = \"ring_hash\"")) {
        if (auto v = r.integer("ring_min_size", 1, kMaxRingSize))
            d.value.ring_min_size = static_cast<uint64_t>(*v);
    }
    if (only_for("ring_max_size", d.value.lb == LbPolicy::RingHash, "lb = \"ring_hash\"")) {
        if (auto v = r.integer("ring_max_size", 1, kMaxRingSize))
            d.value.ring_max_size = static_cast<uint64_t>(*v);
    }
    if (d.value.lb == LbPolicy::RingHash && d.value.ring_min_size > d.value.ring_max_size)
        r.error(r.has("ring_min_size") ? "ring_min_size" : "ring_max_size",
                "ring_min_size (" + std::to_string(d.value.ring_min_size) + ") is more than ring_max_size (" +
                    std::to_string(d.value.ring_max_size) + ")");
    if (only_for("maglev_table_size", d.value.lb == LbPolicy::Maglev, "lb = \"maglev\"")) {
        if (auto v = r.integer("maglev_table_size", 2, kMaxMaglevTableSize)) {
            if (!is_prime(*v))
                r.error("maglev_table_size", std::to_string(*v) + " is not a prime number (Maglev's table size "
                                                                  "must be prime, e.g. 65537)");
            else
                d.value.maglev_table_size = static_cast<uint32_t>(*v);
        }
    }
    if (only_for("hash_balance_factor", hashing, "lb = \"ring_hash\" or \"maglev\"")) {
        if (auto v = r.integer("hash_balance_factor", 100, 10000,
                               "percent of the average load one endpoint may take; omit it for no bound"))
            d.value.hash_balance_factor = static_cast<uint32_t>(*v);
    }
    // every lb policy: health is per endpoint address, whatever picks it
    read_health_check(r, d.value);
    read_outlier_detection(r, d.value);

    const bool weights_allowed = d.value.lb != LbPolicy::RoundRobin;
    if (!r.has("endpoints")) {
        r.missing("endpoints", "a cluster needs at least one endpoint, e.g. [ { address = \"127.0.0.1:9001\" } ]");
    } else if (const toml::array* arr = r.array("endpoints", "an array of endpoint tables")) {
        if (arr->empty())
            r.error("endpoints", "empty; a cluster needs at least one endpoint");
        const std::vector<const toml::table*> eps = r.tables("endpoints", "an array of endpoint tables");
        std::map<SocketAddress, size_t> seen;
        int64_t weight_sum = 0;
        for (size_t i = 0; i < eps.size(); i++) {
            if (!eps[i])
                continue;
            TableReader er(cx, *eps[i], index_path(r, "endpoints", i), {"address", "weight"});
            Endpoint ep;
            if (er.has("weight") && lb_known && !weights_allowed)
                er.error("weight", "weights need lb = \"weighted\", \"ring_hash\" or \"maglev\" (this cluster is "
                                   "round_robin)");
            else if (auto w = er.integer("weight", hashing ? 1 : 0, kMaxWeight,
                                         hashing ? "a hashing cluster cannot leave an endpoint out; remove it instead"
                                                 : ""))
                ep.weight = static_cast<uint32_t>(*w);
            weight_sum += ep.weight;
            auto text = er.required_string("address", "give the backend's \"ip:port\"");
            if (!text)
                continue;
            std::string why;
            auto a = SocketAddress::parse(*text, &why);
            if (!a) {
                er.error("address", why);
                continue;
            }
            if (a->is_wildcard()) {
                er.error("address", a->str() + " is a wildcard address; an endpoint needs the address "
                                               "to connect to, e.g. 127.0.0.1");
                continue;
            }
            if (auto [it, fresh] = seen.emplace(*a, i); !fresh) {
                er.error("address", a->str() + " is listed twice in this cluster (also endpoints[" +
                                        std::to_string(it->second) + "]); use weights instead");
                continue;
            }
            ep.address = *a;
            d.value.endpoints.push_back(ep);
            d.endpoint_at.push_back(er.located("address"));
        }
        if (lb_known && weights_allowed && !arr->empty() && (weight_sum < 1 || weight_sum > kMaxWeightSum))
            r.error("endpoints", "the endpoint weights sum to " + std::to_string(weight_sum) +
                                     "; the sum must be in 1.." + std::to_string(kMaxWeightSum));
        if (lb_known && d.value.lb == LbPolicy::Maglev && d.value.maglev_table_size <= eps.size())
            r.error(r.has("maglev_table_size") ? "maglev_table_size" : "endpoints",
                    "maglev_table_size (" + std::to_string(d.value.maglev_table_size) +
                        ") must be larger than the number of endpoints (" + std::to_string(eps.size()) + ")");
    }
    out.clusters.push_back(std::move(d));
}

}  // namespace l7fast::policy::loader
