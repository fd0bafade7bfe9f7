#include "proxy/UpstreamPool.hpp"

#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "common/FdStore.hpp"
#include "common/Log.hpp"
#include "dataplane/Dataplane.hpp"
#include "proxy/ProxyServer.hpp"

namespace l7fast::proxy {
namespace {

// The data plane changes the state with BPF atomics on the same memory.
std::atomic_ref<__u64> state_of(l7_slot* s) { return std::atomic_ref<__u64>(s->state); }

bool cas(l7_slot* s, __u64 from, __u64 to) { return state_of(s).compare_exchange_strong(from, to); }
// sockops saw the backend close this pool connection (L7_SF_PEER_CLOSED)
bool peer_closed(l7_slot* s) { return std::atomic_ref<__u32>(s->flags).load() & L7_SF_PEER_CLOSED; }

uint64_t monotonic_ns()
{
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

tcp::endpoint to_endpoint(const policy::SocketAddress& a)
{
    if (a.family == AF_INET6) {
        asio::ip::address_v6::bytes_type b;
        std::memcpy(b.data(), a.ip.data(), 16);
        return {asio::ip::address_v6(b), a.port};
    }
    asio::ip::address_v4::bytes_type b;
    std::memcpy(b.data(), a.ip.data(), 4);
    return {asio::ip::address_v4(b), a.port};
}

// The source address the kernel would pick for `dst`: a connected UDP socket
// tells without sending anything. Needed to know a pooled connection's
// 4-tuple before connect(), so the data plane can adopt the backend's end
// the moment the handshake completes.
asio::ip::address source_for(asio::io_context& io, const tcp::endpoint& dst)
{
    asio::ip::udp::socket probe(io);
    error_code ec;
    probe.open(dst.protocol() == tcp::v4() ? asio::ip::udp::v4() : asio::ip::udp::v6(), ec);
    if (!ec)
        probe.connect(asio::ip::udp::endpoint(dst.address(), dst.port() ? dst.port() : 9), ec);
    if (ec)
        return dst.protocol() == tcp::v4() ? asio::ip::address(asio::ip::address_v4::any())
                                           : asio::ip::address(asio::ip::address_v6::any());
    return probe.local_endpoint(ec).address();
}

sockaddr_storage to_storage(const tcp::endpoint& e)
{
    sockaddr_storage ss{};
    std::memcpy(&ss, e.data(), e.size());
    return ss;
}

std::string store_name(uint32_t slot) { return "u" + std::to_string(slot); }

int pending_bytes(int fd)
{
    int n = 0;
    return ::ioctl(fd, FIONREAD, &n) == 0 ? n : -1;
}

}  // namespace

UpstreamConn::UpstreamConn(UpstreamPool& pool, uint32_t pool_id, uint32_t slot, tcp::socket sock)
    : pool_(pool), pool_id_(pool_id), slot_(slot), sock_(std::move(sock))
{
}

UpstreamPool::UpstreamPool(asio::io_context& io, dataplane::Dataplane* dp,
                           ExchangeHandler on_exchange_end)
    : io_(io), dp_(dp), on_exchange_end_(std::move(on_exchange_end))
{
    if (!dp_)
        local_slots_.resize(L7_MAX_SLOTS);
}

UpstreamPool::~UpstreamPool()
{
    error_code ec;
    for (auto& c : conns_)
        if (c)
            c->sock_.close(ec);
    for (auto& [id, p] : pools_)
        for (auto& c : p.overflow_idle)
            c->sock_.close(ec);
}

l7_slot* UpstreamPool::slot(uint32_t id)
{
    if (id >= L7_MAX_SLOTS)
        return nullptr;
    return dp_ ? dp_->slot(id) : &local_slots_[id];
}

size_t UpstreamPool::open_connections() const
{
    size_t n = 0;
    for (const auto& c : conns_)
        n += c != nullptr;
    for (const auto& [id, p] : pools_)
        n += p.overflow_open;
    return n;
}

std::optional<uint32_t> UpstreamPool::pool_id_for(const policy::SocketAddress& addr)
{
    if (auto it = ids_.find(addr); it != ids_.end()) {
        pools_[it->second].in_use = true;
        return it->second;
    }
    for (uint32_t id = 0; id < L7_MAX_POOLS; id++) {
        if (pools_.count(id))
            continue;
        pools_[id] = Pool{addr, true, 0, {}};
        ids_[addr] = id;
        // an id is freed only when none of its slots is in use: what the
        // kernel counted under it belongs to the address it had before
        if (dp_)
            dp_->clear_pool_counters(id);
        return id;
    }
    return std::nullopt;
}

void UpstreamPool::retain_only(const std::vector<policy::SocketAddress>& in_use)
{
    for (auto it = pools_.begin(); it != pools_.end();) {
        bool used = false;
        for (const auto& a : in_use)
            used = used || a == it->second.address;
        it->second.in_use = used;
        if (used) {
            ++it;
            continue;
        }
        // idle connections of a pool no route uses any more go now; busy
        // ones finish their exchange and go when they come back
        for (auto c : std::vector<UpstreamPtr>(it->second.overflow_idle))
            close_overflow(c);
        bool busy = it->second.overflow_open > 0;
        for (uint32_t i = 0; i < L7_SLOTS_PER_POOL; i++) {
            uint32_t id = it->first * L7_SLOTS_PER_POOL + i;
            l7_slot* s = slot(id);
            if (conns_[id] && cas(s, L7_SLOT_IDLE, L7_SLOT_DEAD))
                retire(conns_[id]);
            busy = busy || state_of(s).load() != L7_SLOT_EMPTY;
        }
        if (busy) {
            ++it;
            continue;
        }
        ids_.erase(it->second.address);
        it = pools_.erase(it);
    }
}

void UpstreamPool::set_limits(uint32_t min_idle, uint32_t max_per_pool,
                              std::chrono::milliseconds connect_timeout)
{
    max_per_pool_ = std::min<uint32_t>(std::max<uint32_t>(max_per_pool, 1), L7_SLOTS_PER_POOL);
    min_idle_ = std::min(min_idle, max_per_pool_);
    connect_timeout_ = connect_timeout;
}

uint32_t UpstreamPool::count_state(uint32_t pool_id, uint64_t state)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < L7_SLOTS_PER_POOL; i++)
        n += state_of(slot(pool_id * L7_SLOTS_PER_POOL + i)).load() == state;
    return n;
}

void UpstreamPool::warm_all()
{
    for (auto& [pid, pool] : pools_) {
        if (!pool.in_use)
            continue;
        uint32_t have = count_state(pid, L7_SLOT_IDLE) + count_state(pid, L7_SLOT_CONNECTING);
        for (uint32_t i = 0; i < max_per_pool_ && have < min_idle_; i++) {
            uint32_t id = pid * L7_SLOTS_PER_POOL + i;
            if (!cas(slot(id), L7_SLOT_EMPTY, L7_SLOT_CONNECTING))
                continue;
            have++;
            asio::co_spawn(
                io_,
                [this, pid, id]() -> awaitable<void> {
                    error_code ec;
                    co_await connect_slot(pid, id, L7_SLOT_IDLE, ec);
                    if (ec)
                        log::debug("pool ", pools_[pid].address.str(), ": ", ec.message());
                },
                asio::detached);
        }
    }
}

// Connects `sock` (open) to `ep` within the connect timeout; sets ec
// (timed_out when the timeout passed).
awaitable<void> UpstreamPool::connect_socket(tcp::socket& sock, const tcp::endpoint& ep,
                                             error_code& ec)
{
    // The timer's handler may run after this frame is gone (it can already be
    // queued when connect completes), so it only touches shared state.
    struct Guard {
        bool done = false, timed_out = false;
        tcp::socket* sock = nullptr;
    };
    auto guard = std::make_shared<Guard>();
    guard->sock = &sock;
    asio::steady_timer timer(io_);
    timer.expires_after(connect_timeout_);
    timer.async_wait([guard](error_code e) {
        if (!e && !guard->done) {
            guard->timed_out = true;
            error_code ig;
            guard->sock->cancel(ig);
        }
    });
    co_await sock.async_connect(ep, asio::redirect_error(use_awaitable, ec));
    guard->done = true;
    timer.cancel();
    if (guard->timed_out)
        ec = errc::make_error_code(errc::timed_out);
    if (!ec)
        sock.set_option(tcp::no_delay(true), ec);
}

awaitable<UpstreamPtr> UpstreamPool::connect_slot(uint32_t pool_id, uint32_t id,
                                                  uint64_t final_state, error_code& ec)
{
    l7_slot* s = slot(id);
    tcp::endpoint ep = to_endpoint(pools_[pool_id].address);
    tcp::socket sock(io_);
    l7_conn_key key{};
    auto fail = [&](error_code e) -> UpstreamPtr {
        ec = e;
        if (dp_)
            dp_->slot_unregister_tuple(key);
        error_code ig;
        sock.close(ig);
        state_of(s).store(L7_SLOT_EMPTY);
        return nullptr;
    };

    sock.open(ep.protocol(), ec);
    if (!ec)
        sock.bind(tcp::endpoint(source_for(io_, ep), 0), ec);
    if (ec)
        co_return fail(ec);
    tcp::endpoint local = sock.local_endpoint(ec);
    key = dataplane::make_conn_key(to_storage(local), to_storage(ep));

    // the slot is ours (CONNECTING): reset it before anyone can see it
    uint64_t st = state_of(s).load();
    std::memset(s, 0, sizeof(*s));
    s->state = st;
    s->pool_id = pool_id;
    if (dp_ && !dp_->slot_register_tuple(key, id))
        co_return fail(errc::make_error_code(errc::no_buffer_space));

    co_await connect_socket(sock, ep, ec);
    if (ec)
        co_return fail(ec);
    set_large_sndbuf(sock.native_handle());
    FdStore::get().add(sock.native_handle(), store_name(id));
    if (dp_ && !dp_->insert_upstream_socket(id, sock.native_handle())) {
        log::warning("pool ", ep, ": cannot add the connection to the data plane (",
                     std::strerror(errno), "); it serves the slow path only");
    }
    auto conn = std::make_shared<UpstreamConn>(*this, pool_id, id, std::move(sock));
    conn->key_ = key;
    conns_[id] = conn;
    state_of(s).store(final_state);
    if (final_state == L7_SLOT_IDLE)
        watch(conn);
    ec.clear();
    co_return conn;
}

awaitable<UpstreamPtr> UpstreamPool::acquire(uint32_t pool_id, error_code& ec)
{
    ec.clear();
    if (!pools_.count(pool_id)) {
        ec = errc::make_error_code(errc::no_such_device_or_address);
        co_return nullptr;
    }
    for (uint32_t i = 0; i < max_per_pool_; i++) {
        uint32_t id = pool_id * L7_SLOTS_PER_POOL + i;
        if (conns_[id] && cas(slot(id), L7_SLOT_IDLE, L7_SLOT_UBUSY)) {
            if (peer_closed(slot(id))) {  // the backend closed it meanwhile
                state_of(slot(id)).store(L7_SLOT_DEAD);
                UpstreamPtr closed = conns_[id];  // retire() resets conns_[id]
                retire_and_refill(closed);
                continue;
            }
            error_code ig;
            conns_[id]->sock_.cancel(ig);  // stop watching: the slow path reads it now
            co_return conns_[id];
        }
    }
    for (uint32_t i = 0; i < max_per_pool_; i++) {
        uint32_t id = pool_id * L7_SLOTS_PER_POOL + i;
        if (cas(slot(id), L7_SLOT_EMPTY, L7_SLOT_CONNECTING)) {
            UpstreamPtr c = co_await connect_slot(pool_id, id, L7_SLOT_UBUSY, ec);
            co_return c;
        }
    }
    Pool& p = pools_[pool_id];
    while (!p.overflow_idle.empty()) {
        UpstreamPtr c = p.overflow_idle.back();
        p.overflow_idle.pop_back();
        error_code ig;
        c->sock_.cancel(ig);  // stop watching
        if (c->sock_.is_open())
            co_return c;
    }
    if (p.overflow_open >= kMaxOverflow) {
        ec = errc::make_error_code(errc::no_buffer_space);
        co_return nullptr;
    }
    UpstreamPtr c = co_await connect_overflow(pool_id, ec);
    co_return c;
}

awaitable<UpstreamPtr> UpstreamPool::connect_overflow(uint32_t pool_id, error_code& ec)
{
    tcp::endpoint ep = to_endpoint(pools_[pool_id].address);
    tcp::socket sock(io_);
    pools_[pool_id].overflow_open++;
    sock.open(ep.protocol(), ec);
    if (!ec)
        co_await connect_socket(sock, ep, ec);
    // the pool may have been forgotten meanwhile (reload): look it up again
    auto it = pools_.find(pool_id);
    if (ec || it == pools_.end()) {
        if (it != pools_.end())
            it->second.overflow_open--;
        if (!ec)
            ec = errc::make_error_code(errc::no_such_device_or_address);
        error_code ig;
        sock.close(ig);
        co_return nullptr;
    }
    log::debug("pool ", ep, ": every slot busy; overflow connection ", it->second.overflow_open,
               " for the slow path");
    co_return std::make_shared<UpstreamConn>(*this, pool_id, L7_NO_SLOT, std::move(sock));
}

void UpstreamPool::release_overflow(const UpstreamPtr& c, bool reusable)
{
    auto it = pools_.find(c->pool_id_);
    if (it == pools_.end()) {
        error_code ig;
        c->sock_.close(ig);
        return;
    }
    Pool& p = it->second;
    if (reusable && c->sock_.is_open() && p.in_use && p.overflow_idle.size() < max_per_pool_) {
        p.overflow_idle.push_back(c);
        watch_overflow(c);
        return;
    }
    close_overflow(c);
}

// An idle overflow connection that becomes readable was closed by the
// upstream (or sent bytes nobody asked for): it goes.
void UpstreamPool::watch_overflow(const UpstreamPtr& c)
{
    c->sock_.async_wait(tcp::socket::wait_read, [this, c](error_code ec) {
        if (ec == asio::error::operation_aborted)
            return;  // taken for a request, or closing
        close_overflow(c);
    });
}

void UpstreamPool::close_overflow(const UpstreamPtr& c)
{
    error_code ig;
    c->sock_.close(ig);
    auto it = pools_.find(c->pool_id_);
    if (it == pools_.end())
        return;
    auto& idle = it->second.overflow_idle;
    for (auto i = idle.begin(); i != idle.end(); ++i) {
        if (*i == c) {
            idle.erase(i);
            break;
        }
    }
    if (it->second.overflow_open)
        it->second.overflow_open--;
}

void UpstreamPool::release(const UpstreamPtr& c, bool reusable)
{
    if (c->slot_ == L7_NO_SLOT)
        return release_overflow(c, reusable);
    l7_slot* s = slot(c->slot_);
    if (reusable && c->sock_.is_open() && !peer_closed(s) && pools_.count(s->pool_id) &&
        pools_[s->pool_id].in_use && cas(s, L7_SLOT_UBUSY, L7_SLOT_IDLE)) {
        watch(c);
        return;
    }
    state_of(s).store(L7_SLOT_DEAD);
    retire_and_refill(c);
}

void UpstreamPool::finish_relay(const UpstreamPtr& c, bool reusable)
{
    l7_slot* s = slot(c->slot_);
    if (reusable && c->sock_.is_open() && cas(s, L7_SLOT_RELAY, L7_SLOT_IDLE)) {
        watch(c);
        return;
    }
    state_of(s).store(L7_SLOT_DEAD);
    retire(c);
}

void UpstreamPool::watch(const UpstreamPtr& c)
{
    if (c->watching_)
        return;
    c->watching_ = true;
    c->sock_.async_wait(tcp::socket::wait_read, [this, c](error_code ec) {
        c->watching_ = false;
        if (conns_[c->slot_] != c)
            return;  // retired meanwhile
        if (ec && ec != asio::error::operation_aborted)
            return;
        on_readable(c);
    });
}

void UpstreamPool::on_readable(const UpstreamPtr& c)
{
    l7_slot* s = slot(c->slot_);
    for (int attempt = 0; attempt < 4; attempt++) {
        uint64_t st = state_of(s).load();
        switch (st) {
        case L7_SLOT_UBUSY:
        case L7_SLOT_CONNECTING:
        case L7_SLOT_EMPTY:
            return;  // someone else owns it
        case L7_SLOT_DEAD:
            retire_and_refill(c);
            return;
        case L7_SLOT_RELAY:
            on_exchange_end_({KernelExchangeEnd::Kind::Relay, *s, c, 0});
            return;
        case L7_SLOT_IDLE: {
            char b;
            ssize_t n = ::recv(c->sock_.native_handle(), &b, 1, MSG_PEEK | MSG_DONTWAIT);
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                watch(c);
                return;
            }
            // closed by the backend (keep-alive timeout), or bytes nobody
            // asked for: either way the connection is done
            if (cas(s, L7_SLOT_IDLE, L7_SLOT_DEAD)) {
                retire_and_refill(c);
                return;
            }
            continue;  // the data plane claimed it meanwhile
        }
        case L7_SLOT_KBUSY: {
            char b;
            ssize_t n = ::recv(c->sock_.native_handle(), &b, 1, MSG_PEEK | MSG_DONTWAIT);
            if (n != 0) {
                // data reaches this socket only once the data plane hands the
                // response over (RELAY), which it is about to publish
                watch(c);
                return;
            }
            if (!cas(s, L7_SLOT_KBUSY, L7_SLOT_DEAD))
                continue;
            log::debug("pool: upstream ", dataplane::to_string(c->key_), " closed during a kernel exchange");
            bool until_close = s->resp.phase == L7_RESP_BODY &&
                               s->resp.body.kind == L7_BODY_UNTIL_CLOSE;
            on_exchange_end_({until_close ? KernelExchangeEnd::Kind::UntilClose
                                          : KernelExchangeEnd::Kind::Failed,
                              *s, nullptr, 502});
            retire_and_refill(c);
            return;
        }
        }
    }
    watch(c);
}

// A pooled connection that ended (the backend closed it, or the data plane
// retired it) is replaced now, not at the next sweep: the kernel path needs
// an idle slot for the next request.
void UpstreamPool::retire_and_refill(const UpstreamPtr& c)
{
    retire(c);
    warm_all();
}

void UpstreamPool::on_slot_event(uint32_t id)
{
    if (id >= L7_MAX_SLOTS || !conns_[id])
        return;
    // wake the watcher; its handler looks at the slot's new state
    if (conns_[id]->watching_) {
        error_code ig;
        conns_[id]->sock_.cancel(ig);
    }
}

void UpstreamPool::sweep(std::chrono::milliseconds timeout)
{
    uint64_t now = monotonic_ns();
    uint64_t limit = static_cast<uint64_t>(timeout.count()) * 1000000ull;
    for (uint32_t id = 0; id < L7_MAX_SLOTS; id++) {
        auto c = conns_[id];
        Suspect& suspect = suspects_[id];
        Suspect seen{};
        l7_slot* s = c ? slot(id) : nullptr;
        if (s && state_of(s).load() == L7_SLOT_KBUSY) {
            seen.uses = std::atomic_ref<__u64>(s->uses).load();
            seen.start = std::atomic_ref<__u64>(s->req_start_ns).load();
        }
        // The data plane claims a slot (CAS to KBUSY) before it stamps the
        // request's start and use count: a claim seen in between carries the
        // previous request's stamp. Only an exchange seen expired, with the
        // same stamp, on two consecutive sweeps has really timed out.
        bool expired = seen.start && now - seen.start >= limit;
        bool confirmed = expired && suspect.uses == seen.uses && suspect.start == seen.start;
        suspect = expired && !confirmed ? seen : Suspect{};
        if (!confirmed || !cas(s, L7_SLOT_KBUSY, L7_SLOT_DEAD))
            continue;
        log::notice("upstream ", pools_[s->pool_id].address.str(),
                    " did not answer a kernel-path request within ", timeout.count(), " ms (",
                    dataplane::to_string(c->key_), ", request ", s->uses, " on it, ",
                    s->resp.bytes, " response bytes forwarded, ", pending_bytes(c->sock_.native_handle()),
                    " bytes waiting on the daemon's end, backend ",
                    (s->flags & L7_SF_BACKEND_LOCAL) ? "local" : "remote", ")");
        on_exchange_end_({KernelExchangeEnd::Kind::Failed, *s, nullptr, 504});
        retire(c);
    }
    warm_all();
}

bool UpstreamPool::adopt(int fd)
{
    l7_conn_key key{};
    sockaddr_storage peer{};
    socklen_t plen = sizeof(peer);
    std::optional<uint32_t> id;
    if (dp_ && dataplane::conn_key_of(fd, true, &key) &&
        ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &plen) == 0)
        id = dp_->slot_by_tuple(key);
    l7_slot* s = id ? slot(*id) : nullptr;
    uint64_t st = s ? state_of(s).load() : uint64_t(L7_SLOT_EMPTY);
    policy::SocketAddress addr;
    if (s) {
        addr.family = peer.ss_family;
        if (peer.ss_family == AF_INET6) {
            auto* a = reinterpret_cast<sockaddr_in6*>(&peer);
            std::memcpy(addr.ip.data(), &a->sin6_addr, 16);
            addr.port = ntohs(a->sin6_port);
        } else {
            auto* a = reinterpret_cast<sockaddr_in*>(&peer);
            std::memcpy(addr.ip.data(), &a->sin_addr, 4);
            addr.port = ntohs(a->sin_port);
        }
    }
    auto known = ids_.find(addr);
    bool usable = s && !conns_[*id] && (st == L7_SLOT_IDLE || st == L7_SLOT_KBUSY) &&
                  (known == ids_.end() || known->second == s->pool_id) &&
                  s->pool_id < L7_MAX_POOLS && *id / L7_SLOTS_PER_POOL == s->pool_id;
    if (!usable) {
        // a connection in the middle of a slow-path exchange or a relay
        // cannot be resumed: its bytes were partly read by the old daemon
        if (s && !conns_[*id])
            state_of(s).store(L7_SLOT_EMPTY);
        if (dp_)
            dp_->slot_unregister_tuple(key);
        FdStore::get().remove(id ? store_name(*id) : std::string());
        ::close(fd);
        return false;
    }
    if (known == ids_.end()) {
        pools_[s->pool_id] = Pool{addr, true, 0, {}};
        ids_[addr] = s->pool_id;
    }
    tcp::socket sock(io_);
    error_code ec;
    sock.assign(addr.family == AF_INET6 ? tcp::v6() : tcp::v4(), fd, ec);
    if (ec) {
        ::close(fd);
        return false;
    }
    auto conn = std::make_shared<UpstreamConn>(*this, s->pool_id, *id, std::move(sock));
    conn->key_ = key;
    conns_[*id] = conn;
    watch(conn);
    return true;
}

void UpstreamPool::reconcile_adopted()
{
    if (!dp_)
        return;
    for (const auto& [key, id] : dp_->slot_tuples())
        if (id >= L7_MAX_SLOTS || !conns_[id] || std::memcmp(&conns_[id]->key_, &key, sizeof(key)))
            dp_->slot_unregister_tuple(key);
    for (uint32_t id = 0; id < L7_MAX_SLOTS; id++) {
        if (conns_[id])
            continue;
        l7_slot* s = slot(id);
        if (state_of(s).load() != L7_SLOT_EMPTY) {
            dp_->remove_slot_sockets(id);
            state_of(s).store(L7_SLOT_EMPTY);
        }
    }
}

void UpstreamPool::retire(const UpstreamPtr& c)
{
    uint32_t id = c->slot_;
    FdStore::get().remove(store_name(id));
    log::debug("pool: closing upstream connection ", dataplane::to_string(c->key_), " (slot ", id, ")");
    if (dp_) {
        dp_->remove_slot_sockets(id);
        dp_->slot_unregister_tuple(c->key_);
    }
    error_code ig;
    c->sock_.close(ig);
    if (conns_[id] == c)
        conns_[id].reset();
    state_of(slot(id)).store(L7_SLOT_EMPTY);
}

}  // namespace l7fast::proxy
