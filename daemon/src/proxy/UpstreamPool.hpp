// Pooled upstream connections.
//
// Two kinds, kept apart:
//  - kernel slots: connections in the data plane's pool table, claimed by
//    kernel-path requests (IDLE -> KBUSY, a compare-and-swap on the slot's
//    state word, which the daemon maps). The daemon opens them, watches them
//    while busy (an upstream that closes or stalls ends the exchange), takes
//    over responses the data plane hands over (RELAY) and retires dead ones.
//    A pool gets its slots in chunks of L7_SLOT_CHUNK as it grows, up to
//    daemon.pool_max connections per upstream address.
//  - slow-path connections: the user-space proxy's own, never visible to the
//    data plane, so the slow path never takes a connection the kernel could
//    use (up to kMaxPrivate per address; past that the answer is 503). At
//    most pool_max of them stay open idle, each for kPrivateIdle at most.
//
// The kernel's pools are kept ahead of demand: every accepted client
// connection makes sure each pool its listener's kernel routes use has
// room for it (pre-warming: a non-pipelining client needs one upstream
// connection at a time), a kernel claim that finds nothing idle raises the
// pool's miss flag and an event, and the pool doubles then; the periodic
// sweep keeps a quarter of the busy count idle on top of pool_min_idle.
// At most kMaxConnecting connections of one pool are being opened at a time,
// the next one started as each completes: a backend's accept queue can be
// short (Python's socketserver listens with a backlog of 5), and a burst of
// SYNs beyond it is dropped and retried only after a second, past the
// connect timeout of the slow path's own connection made in the meantime.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <system_error>
#include <vector>

#include "common/Asio.hpp"
#include "proxy/Endpoint.hpp"
#include "common/Fd.hpp"
#include "dataplane/Abi.hpp"
#include "config/Policy.hpp"

namespace l7fast::dataplane {
class Dataplane;
}

namespace l7fast::proxy {

class UpstreamPool;

// One pooled connection (the daemon's end).
//
// A kernel slot's descriptor is not in the daemon's epoll set while the
// kernel uses the connection: since Linux 6.4 (and in stable kernels that
// took that change) every segment that reaches a socket with an SK_SKB verdict program wakes the
// socket's readers after the program ran, even when the program redirected
// the bytes away (sk_psock_verdict_data_ready), so watching it would wake
// the daemon once per kernel response. What the daemon needs to know about
// a kernel slot reaches it as data-plane events instead (a handed-over
// response, a connection that ended or sent bytes nobody asked for); an
// asio socket on a duplicate of the descriptor exists only while the
// daemon relays a response.
class UpstreamConn : public std::enable_shared_from_this<UpstreamConn> {
public:
    // a slow-path connection
    UpstreamConn(UpstreamPool& pool, uint32_t pool_id, tcp::socket sock);
    // a kernel slot
    UpstreamConn(UpstreamPool& pool, uint32_t pool_id, uint32_t slot, Fd fd, tcp protocol,
                 asio::io_context& io);
    // A slow-path connection's socket, or a kernel slot's during a relay.
    tcp::socket& socket() { return sock_; }
    int fd() { return raw_.valid() ? raw_.get() : sock_.native_handle(); }
    // L7_NO_SLOT for a slow-path connection
    uint32_t slot_id() const { return slot_; }
    const l7_conn_key& key() const { return key_; }

private:
    friend class UpstreamPool;
    bool open_relay_socket();

    UpstreamPool& pool_;
    uint32_t pool_id_;
    uint32_t slot_;
    tcp::socket sock_;
    Fd raw_;                  // a kernel slot's descriptor
    tcp protocol_ = tcp::v4();
    l7_conn_key key_{};
    std::chrono::steady_clock::time_point idle_since{};  // a slow-path one, while idle
};

using UpstreamPtr = std::shared_ptr<UpstreamConn>;

// What the daemon must do about a kernel exchange that the data plane could
// not finish (see ProxyServer).
struct KernelExchangeEnd {
    enum class Kind {
        Relay,        // data plane handed the response over: relay it
        UntilClose,   // response delimited by close: it is complete now
        Failed,       // upstream closed or timed out before/while responding
    } kind;
    l7_slot snapshot;  // slot contents when it ended
    UpstreamPtr conn;  // Relay: the socket to read the response from
    int status;        // Failed: 502 or 504
};

// Connections of one upstream address, for telemetry and tests.
struct PoolFigures {
    uint32_t slots = 0;         // kernel slots open or opening
    uint32_t idle = 0;          // of them idle
    uint32_t busy = 0;          // in a kernel exchange or a relay
    uint32_t chunks = 0;
    uint32_t private_open = 0;  // slow-path connections
    uint32_t private_idle = 0;
};

class UpstreamPool {
public:
    using ExchangeHandler = std::function<void(KernelExchangeEnd)>;

    UpstreamPool(asio::io_context& io, dataplane::Dataplane* dp, ExchangeHandler on_exchange_end);
    ~UpstreamPool();

    // A pooled connection a previous l7fastd left in the fd store: it keeps
    // its slot (found by its 4-tuple), that slot's pool id and chunk, if
    // the slot is IDLE or in a kernel exchange (KBUSY); anything else
    // cannot be resumed and is closed. Call before any pool id is handed
    // out.
    bool adopt(Fd fd);
    // After adopting: slots, chunks and tuples nobody adopted are emptied.
    void reconcile_adopted();

    // Stable id of an upstream address (kept across reloads while in use).
    std::optional<uint32_t> pool_id_for(const policy::SocketAddress& addr);
    // The address a pool id stands for now; null when the id is free.
    const policy::SocketAddress* address_of(uint32_t pool) const
    {
        auto it = pools_.find(pool);
        return it == pools_.end() ? nullptr : &it->second.address;
    }
    // Forget pools of addresses no longer referenced by any cluster.
    void retain_only(const std::vector<policy::SocketAddress>& in_use);
    // The pools kernel routes of each listener (stable id) may take a
    // connection from: what accepting a client pre-warms.
    void set_kernel_pools(std::map<uint32_t, std::vector<uint32_t>> by_listener);

    // Told the outcome of every connection attempt (kernel slots and the
    // slow path's own): outlier detection counts failures in a row.
    void set_connect_observer(std::function<void(uint32_t pool_id, bool ok)> fn) { on_connect_ = std::move(fn); }

    void set_limits(uint32_t min_idle, uint32_t max_per_pool,
                    std::chrono::milliseconds connect_timeout);
    // Opens kernel connections where a pool has less room than it should.
    void warm_all();
    // A client connection was accepted on listener `listener_id`, which has
    // `clients` open now: each of its kernel pools gets room for them all.
    void on_client_accepted(uint32_t listener_id, size_t clients);
    // L7_EV_POOL_MISS: a kernel request found no idle connection.
    void on_pool_miss(uint32_t pool_id);

    static constexpr uint32_t kMaxPrivate = 1024;
    static constexpr uint32_t kMaxConnecting = 4;  // kernel connections being opened, per pool
    static constexpr std::chrono::seconds kPrivateIdle{5};

    // A connection for the slow path (its own, never a kernel slot), or an
    // error: connection_refused / timed_out (502/504), no_buffer_space
    // (kMaxPrivate reached: 503).
    awaitable<UpstreamPtr> acquire(uint32_t pool_id, error_code& ec);
    // Returns a slow-path connection: kept for the next one if `reusable`,
    // else closed.
    void release(const UpstreamPtr& c, bool reusable);
    // Takes over a relayed connection after the relay (reusable or not).
    void finish_relay(const UpstreamPtr& c, bool reusable);

    // Data-plane events: a slot was handed over, died, or one of its ends
    // left ESTABLISHED while it was in use.
    void on_slot_event(uint32_t slot);
    // Times out kernel exchanges older than `timeout` (as seen on two
    // consecutive sweeps), takes up hand-overs and dead slots whose event
    // the data plane could not deliver (a full ring), then grows what needs
    // room.
    void sweep(std::chrono::milliseconds timeout);

    // The slot's state word, shared with the data plane (plain memory
    // without one); a copy of the slot, and its write (the daemon writes a
    // slot only before the connection exists).
    uint64_t* state_word(uint32_t id) const;
    // The pool's words shared with the data plane (l7_pools).
    l7_pool* shared_pool(uint32_t pool_id) const;
    uint64_t slot_state(uint32_t id) const;
    std::optional<l7_slot> slot(uint32_t id) const;
    bool slot_write(uint32_t id, const l7_slot& s);
    // Kernel slots and slow-path connections open now.
    size_t open_connections() const;
    PoolFigures figures(uint32_t pool_id) const;

private:
    using ChunkConns = std::array<UpstreamPtr, L7_SLOT_CHUNK>;
    struct Pool {
        policy::SocketAddress address;
        bool in_use = true;
        std::vector<uint16_t> chunks;              // as in l7_pools[id].chunk
        uint32_t want = 0;                         // open at least this many (pre-warming)
        uint32_t grown = 0;                        // and this many (doubled on misses)
        uint32_t private_open = 0;                 // slow-path connections, idle or busy
        std::vector<UpstreamPtr> private_idle;
    };
    struct Counts {
        uint32_t empty = 0, connecting = 0, idle = 0, busy = 0;
        uint32_t open() const { return connecting + idle + busy; }
    };

    UpstreamPtr& conn_at(uint32_t id);
    const UpstreamPtr* conn_ptr(uint32_t id) const;
    Counts count(uint32_t pool_id) const;
    // Opens up to `n` more kernel connections for the pool (taking chunks
    // as needed); returns how many were started.
    uint32_t open_slots(uint32_t pool_id, uint32_t n);
    std::optional<uint32_t> take_chunk(uint32_t pool_id);
    void give_back_chunks(uint32_t pool_id);
    void grow(uint32_t pool_id);
    void mark_idle(uint32_t id);

    awaitable<void> connect_socket(tcp::socket& sock, const tcp::endpoint& ep, error_code& ec);
    awaitable<UpstreamPtr> connect_private(uint32_t pool_id, error_code& ec);
    void watch_private(const UpstreamPtr& c);
    void close_private(const UpstreamPtr& c);

    awaitable<void> connect_slot(uint32_t pool_id, uint32_t slot, uint16_t chunk_pos);
    // What a kernel slot's state (and, where it tells, its socket) asks of
    // the daemon now.
    void on_slot_state(const UpstreamPtr& c);
    void retire(const UpstreamPtr& c);
    void retire_and_refill(const UpstreamPtr& c);

    asio::io_context& io_;
    dataplane::Dataplane* dp_;
    ExchangeHandler on_exchange_end_;
    std::function<void(uint32_t, bool)> on_connect_;
    // without a data plane: the shared words in plain memory
    std::vector<uint64_t> local_states_;
    std::vector<l7_pool> local_pools_;
    std::map<uint32_t, l7_slot> local_slots_;
    std::map<uint32_t, Pool> pools_;
    std::map<policy::SocketAddress, uint32_t> ids_;
    std::map<uint32_t, std::vector<uint32_t>> kernel_pools_;  // by listener id
    std::vector<std::unique_ptr<ChunkConns>> chunk_conns_;     // by chunk id
    std::vector<uint16_t> free_chunks_;
    // KBUSY slots the last sweep saw past the request timeout (see sweep)
    struct Suspect {
        uint64_t uses = 0, start = 0;
    };
    std::map<uint32_t, Suspect> suspects_;
    uint32_t min_idle_ = 2, max_per_pool_ = L7_POOL_MAX;
    std::chrono::milliseconds connect_timeout_{1000};
};

}  // namespace l7fast::proxy
