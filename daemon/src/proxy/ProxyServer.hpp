// The slow path: l7fastd's listeners, one ClientSession per accepted
// connection, and the endings of kernel exchanges the data plane could not
// finish itself (relays, upstream failures, close requests).
//
// Every accepted connection is registered with the data plane first: a
// client whose own socket the data plane already knows (a local client)
// keeps sending through SK_MSG and only what the kernel passes arrives here;
// a remote client's bytes arrive here through SK_SKB, which redirects what it
// can. Whatever reaches this socket is the slow path's to answer, with the
// same policy (policy::Router) and the same HTTP parser as the kernel.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/Asio.hpp"
#include "common/Fd.hpp"
#include "auth/JwtKeys.hpp"
#include "dataplane/Abi.hpp"
#include "dataplane/ModuleKeys.hpp"
#include "config/Policy.hpp"
#include "proxy/AccessLog.hpp"
#include "proxy/ClientSession.hpp"
#include "proxy/KernelJwt.hpp"
#include "proxy/ParkSet.hpp"
#include "proxy/UpstreamHealth.hpp"
#include "proxy/UpstreamPool.hpp"

namespace l7fast::policy {
class Router;
class RateLimiter;
}  // namespace l7fast::policy
namespace l7fast::auth {
class Verifier;
struct Result;
}
namespace l7fast::lb {
class HashBalancer;
}
namespace l7fast::dataplane {
class Dataplane;
}

namespace l7fast::proxy {

class ClientSession;

// One policy generation as the slow path uses it.
struct PolicyRuntime {
    std::shared_ptr<const policy::Router> router;  // owns the policy
    const policy::Policy& policy() const;
    uint64_t generation = 0;
    std::vector<uint32_t> listener_ids;               // stable id per policy listener
    std::vector<std::vector<uint32_t>> endpoint_pool;  // per cluster, per endpoint

    // The request pipeline's state (proxy::build_pipeline_state, Pipeline.hpp),
    // built once per generation when the policy is prepared:
    // per policy.jwt_providers: its verifier (JWKS refreshed by tick())
    std::vector<std::shared_ptr<auth::Verifier>> verifiers;
    // per policy.clusters: the table of a ring_hash/maglev cluster, else null
    std::vector<std::shared_ptr<const lb::HashBalancer>> balancers;
    // per policy.routes: its rate limiter or null; the same object as the
    // previous generation's when the route's name and limit are unchanged
    std::vector<std::shared_ptr<policy::RateLimiter>> limiters;
    // per policy.routes: index of its JWT provider in policy.jwt_providers
    std::vector<std::optional<size_t>> route_jwt;
    // per policy.routes: index in policy.clusters of each route.clusters entry
    std::vector<std::vector<size_t>> route_clusters;
    // upstream pools the kernel-placed routes take connections from (what
    // accepting a client pre-warms), set once placement is known
    std::vector<uint32_t> kernel_pools;
};

// Slow-path requests in flight per upstream pool id.
using ActiveCounts = std::map<uint32_t, uint32_t>;

// Counts one request in flight for as long as it lives. It holds the
// counts, not the server: a coroutine frame destroyed with the io_context
// may outlive the ProxyServer.
class ActiveTicket {
public:
    ActiveTicket(std::shared_ptr<ActiveCounts> counts, uint32_t pool) : counts_(std::move(counts)), pool_(pool)
    {
        (*counts_)[pool_]++;
    }
    ~ActiveTicket()
    {
        auto it = counts_->find(pool_);
        if (it != counts_->end() && --it->second == 0)
            counts_->erase(it);
    }
    ActiveTicket(const ActiveTicket&) = delete;
    ActiveTicket& operator=(const ActiveTicket&) = delete;

private:
    std::shared_ptr<ActiveCounts> counts_;
    uint32_t pool_;
};

// What the slow path did with a route's requests beyond forwarding them:
// rejections by reason and direct responses (RouteCounters counts the
// responses by status; these say why).
// The slow path's exchange durations: a histogram with fixed upper bounds
// (kUserLatencyBounds, seconds; one more bucket for the rest) and the sum,
// reaching the tens of seconds a slow upstream takes, where the data
// plane's log2 buckets end at 33.5 ms.
inline constexpr double kUserLatencyBounds[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                0.5,   1,      2.5,   5,    10,    30,    60};
struct UserLatency {
    uint64_t buckets[std::size(kUserLatencyBounds) + 1] = {};  // not cumulative; last: above the bounds
    uint64_t sum_ns = 0;
    void add(uint64_t ns);
};

struct UserRouteExtras {
    UserLatency latency;
    std::map<int, uint64_t> codes;  // responses by status code (0: none was sent)
    uint64_t jwt_missing = 0;
    uint64_t jwt_invalid = 0;
    uint64_t rbac_denied = 0;
    uint64_t rate_limited = 0;
    uint64_t direct_responses = 0;
    std::map<std::string, uint64_t> rbac_denied_by_rule;  // rule name ("default": none held)
};

// Send buffer for sockets the data plane redirects into (see .cpp).
void set_large_sndbuf(int fd);

// Name of a client connection's socket in the fd store.
std::string client_store_name(const l7_conn_key& k);

struct ConnKeyLess {
    bool operator()(const l7_conn_key& a, const l7_conn_key& b) const;
};

class ProxyServer {
public:
    ProxyServer(asio::io_context& io, dataplane::Dataplane* dp, bool offload_remote);
    ~ProxyServer();

    // Switches to a new policy: opens listeners it adds, closes listeners it
    // removes (their connections stay), keeps the rest. Throws on a listener
    // that cannot be opened (the caller keeps the old policy then).
    void apply(std::shared_ptr<const PolicyRuntime> rt);
    // Restart: listening sockets a previous l7fastd left in the fd store;
    // apply() uses the one bound to a policy listener's address instead of
    // opening a new one, and closes the rest.
    void set_inherited_listeners(std::vector<Fd> fds);
    // Restart: a client connection the previous l7fastd accepted. Resumed
    // unless that daemon was in the middle of answering it (then closed).
    bool adopt_client(Fd fd);
    std::shared_ptr<const PolicyRuntime> runtime() const { return rt_; }
    // The policy's JWT HMAC keys in l7fast.ko (with a data plane only).
    const dataplane::ModuleKeys* module_keys() const { return module_keys_.get(); }
    void stop();

    UpstreamPool& pool() { return pool_; }
    UpstreamHealth& health() { return health_; }
    const UpstreamHealth& health() const { return health_; }
    dataplane::Dataplane* dataplane() { return dp_; }
    asio::io_context& io() { return io_; }

    // Data-plane events.
    void on_event(const l7_event& ev);
    // Periodic maintenance: pool sweep and warm-up, a warning when the data
    // plane lost events, JWKS files re-read when they changed (and then the
    // verified-token cache emptied).
    void tick();
    // A token of rt's provider `provider` that the reference verifier just
    // accepted (`r`): stored in the data plane's verified-token cache when
    // rt is the active policy and the kernel admits that provider's tokens.
    void cache_verified_token(const PolicyRuntime& rt, size_t provider, const auth::Result& r);

    // Stable id of a listening address (kept across reloads).
    uint32_t listener_id_for(const policy::SocketAddress& a);
    // Slow-path counters by route name (the data plane counts its own).
    const std::map<std::string, dataplane::RouteCounters>& user_counters() const
    {
        return user_counters_;
    }
    dataplane::RouteCounters& user_counters_for(const std::string& route)
    {
        return user_counters_[route];
    }
    const std::map<std::string, UserRouteExtras>& user_extras() const { return user_extras_; }
    // Per upstream address: slow-path exchanges with it that ended, and
    // kernel exchanges with it the daemon finished (relayed, until close,
    // failed); `requests` counts them at their end.
    using EndpointCounters = std::map<policy::SocketAddress, dataplane::RouteCounters>;
    dataplane::RouteCounters& user_endpoint_counters_for(const policy::SocketAddress& a)
    {
        return user_endpoint_counters_[a];
    }
    const EndpointCounters& user_endpoint_counters() const { return user_endpoint_counters_; }
    const EndpointCounters& kernel_endpoint_responses() const { return kernel_endpoint_responses_; }
    UserRouteExtras& user_extras_for(const std::string& route) { return user_extras_[route]; }
    // Slow-path requests in flight per upstream pool (bounded load).
    uint32_t active_requests(uint32_t pool_id) const;
    const std::shared_ptr<ActiveCounts>& active_counts() const { return active_; }
    // Responses to kernel-path requests that the daemon finished (relayed,
    // until close, failed), under the request's l7_route_stats id: the data
    // plane counted the request, the daemon counts the response.
    void count_kernel_response(const l7_slot& snapshot, int status, uint64_t bytes);
    std::map<uint32_t, dataplane::RouteCounters>& kernel_responses() { return kernel_responses_; }
    // The sampled access log (daemon.access_log_sample, set by apply()).
    AccessLog& access_log() { return access_log_; }
    // Name of the route behind an l7_route_stats id (the daemon's
    // generation tables); empty when unknown.
    void set_stats_route_names(std::function<std::string(uint32_t)> fn) { stats_route_name_ = std::move(fn); }
    std::string stats_route_name(uint32_t stats_id) const
    {
        return stats_route_name_ ? stats_route_name_(stats_id) : std::string();
    }
    size_t sessions() const { return sessions_.size(); }
    // Remote clients' sockets while their sessions are parked
    // (ClientSession::park); tags are park_tag() of the connection.
    ParkSet& park_set() { return park_; }
    static uint64_t park_tag(dataplane::ConnRef r) { return (uint64_t{r.idx} << 32) | r.gen; }
    // Sessions parked now.
    void count_parked(int d) { parked_ += d; }
    uint64_t parked() const { return parked_; }
    uint64_t user_requests_no_route() const { return no_route_; }
    // Round-robin cursor of a cluster in the slow path.
    uint64_t next_rr(const std::string& cluster) { return rr_[cluster]++; }
    void count_no_route() { no_route_++; }
    // A request l7fast refused itself (ClientSession::refuse), by reason.
    void count_refused(const std::string& reason) { refused_[reason]++; }
    const std::map<std::string, uint64_t>& refused() const { return refused_; }

    bool has_session(const l7_conn_key& k) const { return sessions_.count(k) != 0; }
    void session_ended(const l7_conn_key& k);
    // The client of a data-plane connection entry (events name clients by
    // entry), while its session lives.
    std::optional<l7_conn_key> client_of(uint32_t conn, uint32_t gen) const;
    // Client connections open on a listener (stable id).
    size_t clients_on(uint32_t listener_id) const;
    // Frees data-plane entries of connections that no session has and whose
    // socket is gone (they died while no daemon ran, or before an accept
    // that never came); returns how many.
    size_t free_orphaned_connections();

private:
    struct Listening {
        policy::SocketAddress address;
        uint32_t id;
        std::unique_ptr<tcp::acceptor> acceptor;
        bool accepting = false;
    };

    awaitable<void> accept_loop(std::shared_ptr<Listening> l);
    void start_session(tcp::socket sock, const l7_conn_key& key, const policy::SocketAddress& addr,
                       uint32_t listener_id, const SessionConn& conn);
    void on_exchange_end(KernelExchangeEnd end);
    // A local client still in a listener's backlog: the kernel has seen its
    // connection (sockops), l7fastd has not accepted it yet.
    bool awaits_accept(dataplane::ConnRef ref) const;
    // The responses handed over for `session`'s connection before it was
    // accepted go to it now.
    void take_waiting_relays(dataplane::ConnRef ref, const std::shared_ptr<ClientSession>& session);
    // Gives up the waiting responses whose client is gone or did not come
    // within `timeout` (their upstream connections are closed).
    void expire_waiting_relays(std::chrono::milliseconds timeout);
    // warns when events_lost grew since the last tick
    void warn_lost_events();
    // Installs the runtime's JWT HMAC keys in l7fast.ko (module_keys_).
    void sync_module_keys();
    // The header entries and kids of the kernel's HS verifier for the keys
    // just installed: Dataplane::set_jwt_headers, set_jwt_kids.
    void write_jwt_headers(const ModuleKeySet& set);
    std::shared_ptr<ClientSession> session_for(uint32_t conn, uint32_t gen);

    asio::io_context& io_;
    dataplane::Dataplane* dp_;
    std::unique_ptr<dataplane::ModuleKeys> module_keys_;
    bool offload_remote_;
    UpstreamPool pool_;
    UpstreamHealth health_;
    // the data plane's events_lost when tick() last looked (at start: what
    // the maps a restart adopted had counted)
    uint64_t events_lost_seen_;
    ParkSet park_;
    uint64_t parked_ = 0;
    std::shared_ptr<const PolicyRuntime> rt_;
    std::vector<Fd> inherited_listeners_;
    std::vector<std::shared_ptr<Listening>> listening_;
    std::map<policy::SocketAddress, uint32_t> listener_ids_;
    struct Session {
        std::weak_ptr<ClientSession> session;
        uint32_t listener_id = 0;
        dataplane::ConnRef conn;
    };
    std::map<l7_conn_key, Session, ConnKeyLess> sessions_;
    // most sessions open at once since the heap was last trimmed (tick())
    size_t sessions_peak_ = 0;
    static constexpr size_t kTrimAfterSessions = 64;
    std::map<uint32_t, l7_conn_key> by_conn_;  // data-plane entry -> session key
    std::map<uint32_t, size_t> clients_;       // open sessions by listener id
    uint64_t ticks_ = 0;
    // Responses the data plane handed over (Relay) for local clients that
    // were still in a listener's backlog, by data-plane entry: a stalled
    // daemon can read the hand-over before it accepts the client (the
    // kernel took the client's first request the moment it connected).
    struct WaitingRelay {
        KernelExchangeEnd end;
        uint64_t since_ns;
    };
    std::multimap<uint32_t, WaitingRelay> waiting_relays_;
    std::map<std::string, dataplane::RouteCounters> user_counters_;
    std::map<uint32_t, dataplane::RouteCounters> kernel_responses_;
    std::map<std::string, UserRouteExtras> user_extras_;
    EndpointCounters user_endpoint_counters_, kernel_endpoint_responses_;
    std::shared_ptr<ActiveCounts> active_ = std::make_shared<ActiveCounts>();
    uint64_t no_route_ = 0;
    std::map<std::string, uint64_t> refused_;
    AccessLog access_log_;
    std::function<std::string(uint32_t)> stats_route_name_;
    std::map<std::string, uint64_t> rr_;
};

}  // namespace l7fast::proxy
