// Pooled upstream connections, shared by the kernel path and the slow path.
//
// Each pooled connection is a slot of the l7_slots table (mmapped from the
// data plane, or plain memory without one). State changes are compare-and-
// swap on both sides: the data plane claims IDLE slots for kernel requests,
// the slow path claims IDLE slots (or opens new connections) for its own, and
// a connection returns to IDLE when its response is complete. The daemon
// opens every connection itself (the paper's design: a pool miss is
// forwarded to the control plane, which connects and fills the pool).
//
// The slot table holds at most L7_SLOTS_PER_POOL connections per upstream
// address. When every slot is busy, the slow path does not fail the request:
// it uses overflow connections, which the data plane never sees (up to
// kMaxOverflow per address; only past that is the answer 503).
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
#include "dataplane/Abi.hpp"
#include "policy/Policy.hpp"

namespace l7fast::dataplane {
class Dataplane;
}

namespace l7fast::proxy {

class UpstreamPool;

// One pooled connection (the daemon's end, U_d).
class UpstreamConn : public std::enable_shared_from_this<UpstreamConn> {
public:
    UpstreamConn(UpstreamPool& pool, uint32_t pool_id, uint32_t slot, tcp::socket sock);
    tcp::socket& socket() { return sock_; }
    // L7_NO_SLOT for an overflow connection
    uint32_t slot_id() const { return slot_; }
    const l7_conn_key& key() const { return key_; }

private:
    friend class UpstreamPool;
    UpstreamPool& pool_;
    uint32_t pool_id_;
    uint32_t slot_;
    tcp::socket sock_;
    l7_conn_key key_{};
    bool watching_ = false;
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

class UpstreamPool {
public:
    using ExchangeHandler = std::function<void(KernelExchangeEnd)>;

    UpstreamPool(asio::io_context& io, dataplane::Dataplane* dp, ExchangeHandler on_exchange_end);
    ~UpstreamPool();

    // A pooled connection a previous l7fastd left in the fd store: it keeps
    // its slot (found by its 4-tuple) and that slot's pool id, if the slot
    // is IDLE or in a kernel exchange (KBUSY); anything else cannot be
    // resumed and is closed. Call before any pool id is handed out.
    bool adopt(int fd);
    // After adopting: slots and tuples nobody adopted are emptied.
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

    void set_limits(uint32_t min_idle, uint32_t max_per_pool,
                    std::chrono::milliseconds connect_timeout);
    // Opens connections so each pool has min_idle idle ones.
    void warm_all();

    static constexpr uint32_t kMaxOverflow = 1024;

    // A connection for the slow path (a slot in state UBUSY, or an overflow
    // connection when every slot is busy), or an error: connection_refused /
    // timed_out (502/504), no_buffer_space (kMaxOverflow reached too: 503).
    awaitable<UpstreamPtr> acquire(uint32_t pool_id, error_code& ec);
    // Returns a slow-path connection: to the pool if `reusable`, else closed.
    void release(const UpstreamPtr& c, bool reusable);
    // Takes over a relayed connection after the relay (reusable or not).
    void finish_relay(const UpstreamPtr& c, bool reusable);

    // Data-plane events: a slot was handed over or died.
    void on_slot_event(uint32_t slot);
    // Times out kernel exchanges older than `timeout` (as seen on two
    // consecutive sweeps).
    void sweep(std::chrono::milliseconds timeout);

    l7_slot* slot(uint32_t id);
    // Slots and overflow connections open now.
    size_t open_connections() const;

private:
    struct Pool {
        policy::SocketAddress address;
        bool in_use = true;
        uint32_t overflow_open = 0;           // overflow connections, idle or busy
        std::vector<UpstreamPtr> overflow_idle;
    };

    awaitable<void> connect_socket(tcp::socket& sock, const tcp::endpoint& ep, error_code& ec);
    awaitable<UpstreamPtr> connect_overflow(uint32_t pool_id, error_code& ec);
    void release_overflow(const UpstreamPtr& c, bool reusable);
    void watch_overflow(const UpstreamPtr& c);
    void close_overflow(const UpstreamPtr& c);

    awaitable<UpstreamPtr> connect_slot(uint32_t pool_id, uint32_t slot, uint64_t final_state,
                                        error_code& ec);
    void watch(const UpstreamPtr& c);
    void on_readable(const UpstreamPtr& c);
    void retire(const UpstreamPtr& c);
    void retire_and_refill(const UpstreamPtr& c);
    uint32_t count_state(uint32_t pool_id, uint64_t state);

    asio::io_context& io_;
    dataplane::Dataplane* dp_;
    ExchangeHandler on_exchange_end_;
    std::vector<l7_slot> local_slots_;  // without a data plane
    std::map<uint32_t, Pool> pools_;
    std::map<policy::SocketAddress, uint32_t> ids_;
    std::array<UpstreamPtr, L7_MAX_SLOTS> conns_{};
    // KBUSY slots the last sweep saw past the request timeout (see sweep)
    struct Suspect {
        uint64_t uses = 0, start = 0;
    };
    std::array<Suspect, L7_MAX_SLOTS> suspects_{};
    uint32_t min_idle_ = 2, max_per_pool_ = L7_SLOTS_PER_POOL;
    std::chrono::milliseconds connect_timeout_{1000};
    uint32_t warming_ = 0;
};

}  // namespace l7fast::proxy
