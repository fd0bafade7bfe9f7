// Which upstream endpoints take new requests.
//
// Health is kept per upstream address (pool id), the unit the data plane
// knows: an address listed by several clusters is out for all of them when
// any reason below holds. Three reasons, each a bit of the pool's shared
// word l7_pool.down, which the kernel tests before it sends a request to an
// endpoint (bpf/lib/select.h) and the slow path through available():
//  - drained by the operator (l7fastctl drain); kept across reloads while
//    the address stays in the policy;
//  - unhealthy: failing the active health check of a cluster that lists it
//    (policy::HealthCheck: unhealthy_threshold failures in a row take it
//    out, healthy_threshold passes in a row bring it back);
//  - ejected by passive outlier detection (policy::OutlierDetection): a run
//    of 5xx responses on either plane (the kernel and the daemon add to
//    the same word, l7_pool.streak_5xx; the kernel raises L7_EV_OUTLIER at
//    the threshold) or of failed connection attempts; out for
//    base_ejection times the number of ejections so far (capped at
//    max_ejection), then back by itself.
// An address's outlier settings are those of the first cluster (in policy
// order) that lists it with outlier_detection; max_ejection_percent is
// checked against every such cluster.
//
// What an endpoint that is out means for a request: Pipeline.cpp
// choose_endpoint (the reference) and l7_pick_pool (the kernel).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/Asio.hpp"
#include "dataplane/Abi.hpp"
#include "config/Policy.hpp"

namespace l7fast::proxy {

struct PolicyRuntime;
class UpstreamPool;

// One address as `l7fastctl dump` and the metrics show it.
struct EndpointHealth {
    policy::SocketAddress address;
    uint32_t pool = 0;
    bool drained = false;
    bool unhealthy = false;
    bool ejected = false;
    std::chrono::milliseconds ejected_for{0};  // left of the current ejection
    uint32_t ejections = 0;                    // in a row; the next one lasts longer
    // active checks, over every cluster that checks the address
    bool checked = false;
    uint64_t checks_passed = 0;
    uint64_t checks_failed = 0;
    std::string last_check;  // "status 200", "connection refused", ...
    // ejections since the daemon started, by trigger
    uint64_t ejections_5xx = 0;
    uint64_t ejections_connect = 0;
    bool in() const { return !drained && !unhealthy && !ejected; }
    // "up", or the reasons it is out joined by '+' ("drained+unhealthy")
    std::string state() const;
};

class UpstreamHealth {
public:
    using Clock = std::chrono::steady_clock;

    UpstreamHealth(asio::io_context& io, UpstreamPool& pool);
    ~UpstreamHealth();
    UpstreamHealth(const UpstreamHealth&) = delete;
    UpstreamHealth& operator=(const UpstreamHealth&) = delete;

    // A new policy generation: the addresses of its clusters (rt.endpoint_pool)
    // and their settings. Addresses that stay keep their state; health
    // checks restart with the new settings.
    void apply(const PolicyRuntime& rt);
    // Stops every health check (daemon shutdown).
    void stop();

    // Whether the endpoint of this pool takes new requests.
    bool available(uint32_t pool) const;

    // Passive signals. A response the slow path got from the address
    // (status), or one the daemon finished for the kernel (relay).
    void on_response(uint32_t pool, int status);
    // L7_EV_OUTLIER: the kernel saw the run of 5xx reach the threshold.
    void on_kernel_streak(uint32_t pool);
    // A connection attempt to the address (slow path or kernel pool).
    void on_connect(uint32_t pool, bool ok);
    // Periodic: ejections whose time is up end.
    void tick();

    // l7fastctl drain/undrain. nullopt: the address is in no cluster;
    // otherwise whether this changed anything.
    std::optional<bool> set_drained(const policy::SocketAddress& address, bool drained);

    std::vector<EndpointHealth> endpoints() const;

private:
    struct Outlier {
        policy::OutlierDetection settings;
        std::vector<std::string> clusters;  // clusters with outlier_detection listing it
    };
    struct Address {
        policy::SocketAddress address;
        bool drained = false;
        std::optional<Clock::time_point> ejected_until;
        uint32_t ejections = 0;  // in a row (reset after a clean period as long as the last one)
        Clock::time_point last_ejection_end{};
        uint32_t connect_failures = 0;  // in a row
        std::optional<Outlier> outlier;
        // per cluster name that checks it: failing now
        std::map<std::string, bool> failing;
        uint64_t checks_passed = 0, checks_failed = 0;
        std::string last_check;
        uint64_t ejections_5xx = 0, ejections_connect = 0;
    };
    struct Checker;

    void publish(uint32_t pool);
    void eject(uint32_t pool, const char* trigger);
    bool ejection_allowed(uint32_t pool) const;
    void record_check(Checker& c, bool pass, const std::string& what);
    awaitable<void> check_loop(std::shared_ptr<Checker> c);
    awaitable<std::string> probe(std::shared_ptr<Checker> c, int& status);
    l7_pool* words(uint32_t pool) const;

    asio::io_context& io_;
    UpstreamPool& pool_;
    std::map<uint32_t, Address> addresses_;
    // cluster name -> its endpoints' pool ids, for max_ejection_percent
    std::map<std::string, std::vector<uint32_t>> cluster_pools_;
    std::vector<std::shared_ptr<Checker>> checkers_;
};

}  // namespace l7fast::proxy
