// The policy model: the one definition of what an operator can write in
// /etc/l7fast/policy.toml. PolicyLoader builds it from TOML, Router evaluates
// it (the reference semantics the slow path uses), PolicyCompiler turns it
// into the data plane's tables.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace l7fast::policy {

// Where something was written, for error messages and `l7fastctl routes`.
struct SourceLocation {
    std::string file;
    uint32_t line = 0;
    uint32_t column = 0;

    std::string str() const;  // "file:line:column"
};

// An IPv4 or IPv6 socket address as written ("127.0.0.1:8080", "[::1]:80").
struct SocketAddress {
    int family = 0;                  // AF_INET or AF_INET6
    std::array<uint8_t, 16> ip{};    // IPv4 in the first 4 bytes
    uint16_t port = 0;

    std::string str() const;
    bool is_wildcard() const;
    friend bool operator==(const SocketAddress&, const SocketAddress&) = default;
    friend auto operator<=>(const SocketAddress&, const SocketAddress&) = default;

    // Parses "ip:port" / "[ip6]:port"; nullopt with a reason in *why on error.
    static std::optional<SocketAddress> parse(const std::string& text, std::string* why);
};

struct DaemonSettings {
    // cgroup v2 directory whose sockets the data plane sees (sockops attach
    // point); empty: the root of the cgroup v2 hierarchy, wherever mounted
    std::string cgroup;
    // where maps and links are pinned
    std::string bpffs = "/sys/fs/bpf/l7fast";
    // largest message sent socket-to-socket; bigger ones go over TCP
    uint32_t ingress_budget = 65536;
    // false: load no data plane at all; every request takes the slow path
    bool kernel_dataplane = true;
    // offload requests from clients on other hosts (SK_SKB on accepted sockets)
    bool offload_remote_clients = true;
    // idle pooled connections kept open per endpoint
    uint32_t pool_min_idle = 2;
    uint32_t pool_max = 16;  // at most L7_SLOTS_PER_POOL
    std::chrono::milliseconds connect_timeout{1000};
    std::chrono::milliseconds request_timeout{15000};   // slow path: whole exchange
    std::chrono::milliseconds header_timeout{10000};    // slow path: request head
    std::chrono::milliseconds idle_timeout{60000};      // client keep-alive idle
    // "error", "warning", "notice", "info" or "debug" (log::parse_level)
    std::string log_level = "info";
    // Prometheus-style text and D-Bus are always available; nothing else here
};

struct Listener {
    std::string name;
    SocketAddress address;
    SourceLocation where;
};

enum class LbPolicy { RoundRobin, Weighted };

struct Endpoint {
    SocketAddress address;
    uint32_t weight = 1;
};

struct Cluster {
    std::string name;
    LbPolicy lb = LbPolicy::RoundRobin;
    std::vector<Endpoint> endpoints;
    SourceLocation where;
};

enum class PathMatch { Any, Exact, Prefix };

struct HeaderCondition {
    enum class Kind { Present, Exact };
    std::string name;   // lower-cased
    Kind kind = Kind::Present;
    std::string value;  // Exact only; compared byte for byte
};

struct RouteMatch {
    std::vector<std::string> methods;   // empty: any method; upper-case tokens
    std::optional<std::string> host;    // lower-cased, without port; nullopt: any
    PathMatch path_kind = PathMatch::Any;
    std::string path;                   // Exact/Prefix: starts with '/'
    std::vector<HeaderCondition> headers;
};

struct WeightedCluster {
    std::string cluster;
    uint32_t weight = 1;
};

struct Route {
    std::string name;
    std::vector<std::string> listeners;  // empty: every listener
    RouteMatch match;
    std::vector<WeightedCluster> clusters;  // one entry: plain routing
    bool offload = true;  // false: always the slow path, whatever the kernel can do
    SourceLocation where;
};

struct Policy {
    DaemonSettings daemon;
    std::vector<Listener> listeners;
    std::vector<Cluster> clusters;
    std::vector<Route> routes;        // in evaluation order
    std::vector<std::string> sources; // files it was loaded from, in order

    const Cluster* find_cluster(const std::string& name) const;
    const Listener* find_listener(const std::string& name) const;
};

}  // namespace l7fast::policy
