#include "proxy/UpstreamPool.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "common/Clock.hpp"
#include "common/FdStore.hpp"
#include "common/Log.hpp"
#include "proxy/Deadline.hpp"
#include "dataplane/Dataplane.hpp"
#include "proxy/ProxyServer.hpp"

namespace l7fast::proxy {
namespace {

// The data plane changes these words with BPF atomics on the same memory.
std::atomic_ref<uint64_t> atomic(uint64_t* w) { return std::atomic_ref<uint64_t>(*w); }
bool cas(uint64_t* st, uint64_t from, uint64_t to) { return atomic(st).compare_exchange_strong(from, to); }

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

uint64_t idle_bit(uint32_t id) { return 1ull << (id % L7_SLOT_CHUNK); }

}  // namespace

UpstreamConn::UpstreamConn(UpstreamPool& pool, uint32_t pool_id, tcp::socket sock)
    : pool_(pool), pool_id_(pool_id), slot_(L7_NO_SLOT), sock_(std::move(sock))
{
}

UpstreamConn::UpstreamConn(UpstreamPool& pool, uint32_t pool_id, uint32_t slot, Fd fd, tcp protocol,
                           asio::io_context& io)
    : pool_(pool), pool_id_(pool_id), slot_(slot), sock_(io), raw_(std::move(fd)), protocol_(protocol)
{
}

// The relay's asio socket, on a duplicate of the slot's descriptor (closing
// it takes the duplicate out of the epoll set again).
bool UpstreamConn::open_relay_socket()
{
    if (sock_.is_open())
        return true;
    int fd = ::fcntl(raw_.get(), F_DUPFD_CLOEXEC, 0);
    if (fd < 0)
        return false;
    error_code ec;
    sock_.assign(protocol_, fd, ec);
    if (ec) {
        ::close(fd);
        return false;
    }
    return true;
}

UpstreamPool::UpstreamPool(asio::io_context& io, dataplane::Dataplane* dp,
                           ExchangeHandler on_exchange_end)
    : io_(io), dp_(dp), on_exchange_end_(std::move(on_exchange_end)), chunk_conns_(L7_SLOT_CHUNKS)
{
    if (!dp_) {
        local_states_.resize(L7_MAX_SLOTS);
        local_pools_.resize(L7_MAX_POOLS);
    }
    for (uint32_t c = L7_SLOT_CHUNKS; c-- > 0;)
        free_chunks_.push_back(static_cast<uint16_t>(c));
}

UpstreamPool::~UpstreamPool()
{
    error_code ec;
    for (auto& chunk : chunk_conns_)
        if (chunk)
            for (auto& c : *chunk)
                if (c) {
                    c->sock_.close(ec);
                    c->raw_.reset();
                }
    for (auto& [id, p] : pools_)
        for (auto& c : p.private_idle)
            c->sock_.close(ec);
}

uint64_t* UpstreamPool::state_word(uint32_t id) const
{
    if (id >= L7_MAX_SLOTS)
        return nullptr;
    return dp_ ? dp_->slot_state(id) : const_cast<uint64_t*>(&local_states_[id]);
}

l7_pool* UpstreamPool::shared_pool(uint32_t pool_id) const
{
    if (pool_id >= L7_MAX_POOLS)
        return nullptr;
    return dp_ ? dp_->pool(pool_id) : const_cast<l7_pool*>(&local_pools_[pool_id]);
}

UpstreamPtr& UpstreamPool::conn_at(uint32_t id)
{
    auto& chunk = chunk_conns_[id / L7_SLOT_CHUNK];
    if (!chunk)
        chunk = std::make_unique<ChunkConns>();
    return (*chunk)[id % L7_SLOT_CHUNK];
}

const UpstreamPtr* UpstreamPool::conn_ptr(uint32_t id) const
{
    if (id >= L7_MAX_SLOTS)
        return nullptr;
    const auto& chunk = chunk_conns_[id / L7_SLOT_CHUNK];
    return chunk ? &(*chunk)[id % L7_SLOT_CHUNK] : nullptr;
}

uint64_t UpstreamPool::slot_state(uint32_t id) const
{
    uint64_t* w = state_word(id);
    return w ? atomic(w).load() : uint64_t(L7_SLOT_EMPTY);
}

std::optional<l7_slot> UpstreamPool::slot(uint32_t id) const
{
    if (dp_)
        return dp_->slot(id);
    auto it = local_slots_.find(id);
    if (it == local_slots_.end())
        return id < L7_MAX_SLOTS ? std::optional<l7_slot>(l7_slot{}) : std::nullopt;
    return it->second;
}

bool UpstreamPool::slot_write(uint32_t id, const l7_slot& s)
{
    if (dp_)
        return dp_->slot_write(id, s);
    if (id >= L7_MAX_SLOTS)
        return false;
    local_slots_[id] = s;
    return true;
}

size_t UpstreamPool::open_connections() const
{
    size_t n = 0;
    for (const auto& chunk : chunk_conns_)
        if (chunk)
            for (const auto& c : *chunk)
                n += c != nullptr;
    for (const auto& [id, p] : pools_)
        n += p.private_open;
    return n;
}

UpstreamPool::Counts UpstreamPool::count(uint32_t pool_id) const
{
    Counts c;
    auto it = pools_.find(pool_id);
    if (it == pools_.end())
        return c;
    for (uint16_t chunk : it->second.chunks)
        for (uint32_t i = 0; i < L7_SLOT_CHUNK; i++) {
            switch (slot_state(chunk * L7_SLOT_CHUNK + i)) {
            case L7_SLOT_EMPTY: c.empty++; break;
            case L7_SLOT_CONNECTING: c.connecting++; break;
            case L7_SLOT_IDLE: c.idle++; break;
            case L7_SLOT_KBUSY:
            case L7_SLOT_RELAY: c.busy++; break;
            default: break;  // DEAD: being retired
            }
        }
    return c;
}

PoolFigures UpstreamPool::figures(uint32_t pool_id) const
{
    PoolFigures f;
    Counts c = count(pool_id);
    f.slots = c.open();
    f.idle = c.idle;
    f.busy = c.busy;
    if (auto it = pools_.find(pool_id); it != pools_.end()) {
        f.chunks = static_cast<uint32_t>(it->second.chunks.size());
        f.private_open = it->second.private_open;
        f.private_idle = static_cast<uint32_t>(it->second.private_idle.size());
    }
    return f;
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
        pools_[id] = Pool{};
        pools_[id].address = addr;
        ids_[addr] = id;
        if (l7_pool* sp = shared_pool(id))
            *sp = l7_pool{};
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
        for (auto c : std::vector<UpstreamPtr>(it->second.private_idle))
            close_private(c);
        bool busy = it->second.private_open > 0;
        for (uint16_t chunk : it->second.chunks)
            for (uint32_t i = 0; i < L7_SLOT_CHUNK; i++) {
                uint32_t id = chunk * L7_SLOT_CHUNK + i;
                UpstreamPtr& c = conn_at(id);
                if (c && cas(state_word(id), L7_SLOT_IDLE, L7_SLOT_DEAD))
                    retire(UpstreamPtr(c));
                busy = busy || slot_state(id) != L7_SLOT_EMPTY;
            }
        if (busy) {
            ++it;
            continue;
        }
        const uint32_t id = it->first;
        give_back_chunks(id);
        ids_.erase(it->second.address);
        it = pools_.erase(it);
        for (auto& [lid, pools] : kernel_pools_)
            pools.erase(std::remove(pools.begin(), pools.end(), id), pools.end());
    }
}

void UpstreamPool::set_kernel_pools(std::map<uint32_t, std::vector<uint32_t>> by_listener)
{
    kernel_pools_ = std::move(by_listener);
}

void UpstreamPool::set_limits(uint32_t min_idle, uint32_t max_per_pool,
                              std::chrono::milliseconds connect_timeout)
{
    max_per_pool_ = std::min<uint32_t>(std::max<uint32_t>(max_per_pool, 1), L7_POOL_MAX);
    min_idle_ = std::min(min_idle, max_per_pool_);
    connect_timeout_ = connect_timeout;
}

std::optional<uint32_t> UpstreamPool::take_chunk(uint32_t pool_id)
{
    Pool& p = pools_[pool_id];
    l7_pool* sp = shared_pool(pool_id);
    if (free_chunks_.empty() || !sp || p.chunks.size() >= L7_POOL_MAX_CHUNKS)
        return std::nullopt;
    uint16_t chunk = free_chunks_.back();
    free_chunks_.pop_back();
    const size_t pos = p.chunks.size();
    p.chunks.push_back(chunk);
    for (uint32_t i = 0; i < L7_SLOT_CHUNK; i++)
        atomic(state_word(chunk * L7_SLOT_CHUNK + i)).store(L7_SLOT_EMPTY);
    // the chunk's id and empty hints before the count that makes the kernel
    // look at them
    sp->chunk[pos] = chunk;
    std::atomic_ref<__u64>(sp->idle[pos]).store(0);
    std::atomic_ref<__u32>(sp->n_chunks).store(static_cast<__u32>(p.chunks.size()));
    return static_cast<uint32_t>(pos);
}

void UpstreamPool::give_back_chunks(uint32_t pool_id)
{
    Pool& p = pools_[pool_id];
    if (l7_pool* sp = shared_pool(pool_id))
        std::atomic_ref<__u32>(sp->n_chunks).store(0);
    for (uint16_t chunk : p.chunks) {
        chunk_conns_[chunk].reset();
        free_chunks_.push_back(chunk);
    }
    p.chunks.clear();
    if (l7_pool* sp = shared_pool(pool_id))
        *sp = l7_pool{};
}

uint32_t UpstreamPool::open_slots(uint32_t pool_id, uint32_t n)
{
    Pool& p = pools_[pool_id];
    uint32_t started = 0, open = count(pool_id).open();
    for (size_t pos = 0; started < n && open < max_per_pool_; pos++) {
        if (pos == p.chunks.size() && !take_chunk(pool_id))
            break;
        const uint16_t chunk = p.chunks[pos];
        for (uint32_t i = 0; i < L7_SLOT_CHUNK && started < n && open < max_per_pool_; i++) {
            const uint32_t id = chunk * L7_SLOT_CHUNK + i;
            if (conn_at(id) || !cas(state_word(id), L7_SLOT_EMPTY, L7_SLOT_CONNECTING))
                continue;
            started++;
            open++;
            asio::co_spawn(io_, connect_slot(pool_id, id, static_cast<uint16_t>(pos)), asio::detached);
        }
    }
    return started;
}

// How many kernel connections a pool keeps open: every busy one and idle
// ones beyond them (pool_min_idle, or a quarter of the busy ones), at least
// what accepting clients asked for, and at least what misses doubled it to.
void UpstreamPool::grow(uint32_t pool_id)
{
    auto it = pools_.find(pool_id);
    if (it == pools_.end() || !it->second.in_use)
        return;
    bool kernel = false;
    for (const auto& [lid, pools] : kernel_pools_)
        kernel = kernel || std::find(pools.begin(), pools.end(), pool_id) != pools.end();
    if (!kernel)
        return;  // no kernel route takes connections from it
    // an endpoint that is out (UpstreamHealth) gets no kernel request: no
    // new connection either (a dead one would be a connect attempt per
    // refill); the sweep warms it again once it is back
    if (l7_pool* sp = shared_pool(pool_id); sp && std::atomic_ref<uint32_t>(sp->down).load())
        return;
    const Pool& p = it->second;
    Counts c = count(pool_id);
    uint32_t want = std::min(max_per_pool_, std::max({p.want, p.grown, c.busy + std::max(min_idle_, c.busy / 4)}));
    if (c.open() < want && c.connecting < kMaxConnecting)
        open_slots(pool_id, std::min(want - c.open(), kMaxConnecting - c.connecting));
}

void UpstreamPool::warm_all()
{
    for (auto& [pid, pool] : pools_)
        grow(pid);
}

void UpstreamPool::on_client_accepted(uint32_t listener_id, size_t clients)
{
    auto it = kernel_pools_.find(listener_id);
    if (it == kernel_pools_.end())
        return;
    for (uint32_t pid : it->second) {
        auto p = pools_.find(pid);
        if (p == pools_.end())
            continue;
        // a client that does not pipeline holds one connection at a time
        p->second.want = std::min<uint32_t>(max_per_pool_, static_cast<uint32_t>(clients) + min_idle_);
        grow(pid);
    }
}

void UpstreamPool::on_pool_miss(uint32_t pool_id)
{
    auto it = pools_.find(pool_id);
    if (it != pools_.end()) {
        // double: a burst of new clients finds room after a few misses
        Counts c = count(pool_id);
        it->second.grown = std::min(max_per_pool_, std::max({it->second.grown, 4u, 2 * c.open()}));
        grow(pool_id);
    }
    if (l7_pool* sp = shared_pool(pool_id))
        std::atomic_ref<__u32>(sp->miss).store(0);
}

void UpstreamPool::mark_idle(uint32_t id)
{
    auto c = conn_ptr(id);
    if (!c || !*c)
        return;
    auto it = pools_.find((*c)->pool_id_);
    l7_pool* sp = shared_pool((*c)->pool_id_);
    if (it == pools_.end() || !sp)
        return;
    const auto& chunks = it->second.chunks;
    auto pos = std::find(chunks.begin(), chunks.end(), id / L7_SLOT_CHUNK);
    if (pos != chunks.end())
        std::atomic_ref<__u64>(sp->idle[pos - chunks.begin()]).fetch_or(idle_bit(id));
}

// Connects `sock` (open) to `ep` within the connect timeout; sets ec
// (timed_out when the timeout passed).
awaitable<void> UpstreamPool::connect_socket(tcp::socket& sock, const tcp::endpoint& ep,
                                             error_code& ec)
{
    Deadline deadline(io_);
    deadline.arm(connect_timeout_, {&sock});
    co_await sock.async_connect(ep, asio::redirect_error(use_awaitable, ec));
    deadline.disarm();
    if (deadline.fired())
        ec = errc::make_error_code(errc::timed_out);
    if (!ec)
        sock.set_option(tcp::no_delay(true), ec);
}

awaitable<void> UpstreamPool::connect_slot(uint32_t pool_id, uint32_t id, uint16_t chunk_pos)
{
    uint64_t* st = state_word(id);
    tcp::endpoint ep = to_endpoint(pools_[pool_id].address);
    tcp::socket sock(io_);
    l7_conn_key key{};
    error_code ec;
    auto fail = [&](error_code e) {
        log::debug("pool ", pools_[pool_id].address.str(), ": ", e.message());
        if (dp_)
            dp_->slot_unregister_tuple(key);
        error_code ig;
        sock.close(ig);
        atomic(st).store(L7_SLOT_EMPTY);
    };

    sock.open(ep.protocol(), ec);
    if (!ec)
        sock.bind(tcp::endpoint(source_for(io_, ep), 0), ec);
    if (ec) {
        fail(ec);
        co_return;
    }
    tcp::endpoint local = sock.local_endpoint(ec);
    key = dataplane::make_conn_key(to_storage(local), to_storage(ep));

    // the slot is ours (CONNECTING): its fields before anyone can see it
    l7_slot s{};
    s.pool_id = pool_id;
    s.pool_chunk = chunk_pos;
    if (!slot_write(id, s) || (dp_ && !dp_->slot_register_tuple(key, id))) {
        fail(errc::make_error_code(errc::no_buffer_space));
        co_return;
    }
    co_await connect_socket(sock, ep, ec);
    if (on_connect_)
        on_connect_(pool_id, !ec);
    auto pit = pools_.find(pool_id);
    if (!ec && (pit == pools_.end() || !pit->second.in_use))
        ec = errc::make_error_code(errc::no_such_device_or_address);  // forgotten meanwhile
    if (ec) {
        fail(ec);
        co_return;
    }
    set_large_sndbuf(sock.native_handle());
    FdStore::get().add(sock.native_handle(), store_name(id));
    if (dp_ && !dp_->insert_upstream_socket(id, sock.native_handle())) {
        log::warning("pool ", ep, ": cannot add the connection to the data plane (",
                     std::strerror(errno), "); it is not used");
        FdStore::get().remove(store_name(id));
        fail(errc::make_error_code(errc::no_buffer_space));
        co_return;
    }
    // out of the epoll set from here on (see UpstreamConn)
    Fd fd(sock.release(ec));
    if (!fd.valid()) {
        FdStore::get().remove(store_name(id));
        fail(ec);
        co_return;
    }
    auto conn = std::make_shared<UpstreamConn>(*this, pool_id, id, std::move(fd), ep.protocol(), io_);
    conn->key_ = key;
    conn_at(id) = conn;
    atomic(st).store(L7_SLOT_IDLE);
    mark_idle(id);
    grow(pool_id);  // the next one, if the pool still wants more (kMaxConnecting)
}

awaitable<UpstreamPtr> UpstreamPool::acquire(uint32_t pool_id, error_code& ec)
{
    ec.clear();
    auto it = pools_.find(pool_id);
    if (it == pools_.end()) {
        ec = errc::make_error_code(errc::no_such_device_or_address);
        co_return nullptr;
    }
    Pool& p = it->second;
    while (!p.private_idle.empty()) {
        UpstreamPtr c = p.private_idle.back();
        p.private_idle.pop_back();
        error_code ig;
        c->sock_.cancel(ig);  // stop watching
        if (c->sock_.is_open())
            co_return c;
    }
    if (p.private_open >= kMaxPrivate) {
        ec = errc::make_error_code(errc::no_buffer_space);
        co_return nullptr;
    }
    UpstreamPtr c = co_await connect_private(pool_id, ec);
    co_return c;
}

awaitable<UpstreamPtr> UpstreamPool::connect_private(uint32_t pool_id, error_code& ec)
{
    tcp::endpoint ep = to_endpoint(pools_[pool_id].address);
    tcp::socket sock(io_);
    pools_[pool_id].private_open++;
    sock.open(ep.protocol(), ec);
    if (!ec) {
        co_await connect_socket(sock, ep, ec);
        if (on_connect_)
            on_connect_(pool_id, !ec);
    }
    // the pool may have been forgotten meanwhile (reload): look it up again
    auto it = pools_.find(pool_id);
    if (ec || it == pools_.end()) {
        if (it != pools_.end())
            it->second.private_open--;
        if (!ec)
            ec = errc::make_error_code(errc::no_such_device_or_address);
        error_code ig;
        sock.close(ig);
        co_return nullptr;
    }
    co_return std::make_shared<UpstreamConn>(*this, pool_id, std::move(sock));
}

void UpstreamPool::release(const UpstreamPtr& c, bool reusable)
{
    if (c->slot_ != L7_NO_SLOT) {
        // kernel slots come back through finish_relay only
        log::warning("pool: slot ", c->slot_, " released by the slow path; retiring it");
        atomic(state_word(c->slot_)).store(L7_SLOT_DEAD);
        retire_and_refill(c);
        return;
    }
    auto it = pools_.find(c->pool_id_);
    if (it == pools_.end()) {
        error_code ig;
        c->sock_.close(ig);
        return;
    }
    Pool& p = it->second;
    if (reusable && c->sock_.is_open() && p.in_use && p.private_idle.size() < max_per_pool_) {
        c->idle_since = std::chrono::steady_clock::now();
        p.private_idle.push_back(c);
        watch_private(c);
        return;
    }
    close_private(c);
}

// An idle slow-path connection that becomes readable was closed by the
// upstream (or sent bytes nobody asked for): it goes.
void UpstreamPool::watch_private(const UpstreamPtr& c)
{
    c->sock_.async_wait(tcp::socket::wait_read, [this, c](error_code ec) {
        if (ec == asio::error::operation_aborted)
            return;  // taken for a request, or closing
        close_private(c);
    });
}

void UpstreamPool::close_private(const UpstreamPtr& c)
{
    error_code ig;
    c->sock_.close(ig);
    auto it = pools_.find(c->pool_id_);
    if (it == pools_.end())
        return;
    auto& idle = it->second.private_idle;
    idle.erase(std::remove(idle.begin(), idle.end(), c), idle.end());
    if (it->second.private_open)
        it->second.private_open--;
}

void UpstreamPool::finish_relay(const UpstreamPtr& c, bool reusable)
{
    uint64_t* st = state_word(c->slot_);
    auto s = slot(c->slot_);
    bool closed = !s || (s->flags & L7_SF_PEER_CLOSED);
    bool open = c->sock_.is_open();
    error_code ig;
    c->sock_.close(ig);  // the relay's duplicate: out of the epoll set
    if (reusable && !closed && open && cas(st, L7_SLOT_RELAY, L7_SLOT_IDLE)) {
        mark_idle(c->slot_);
        // the backend may have closed it during the relay, before the state
        // was IDLE again: sockops then only flagged it
        on_slot_state(c);
        return;
    }
    atomic(st).store(L7_SLOT_DEAD);
    retire_and_refill(c);
}

namespace {

// A kernel slot's socket, without reading: true while it is open and holds
// nothing (EAGAIN); false when the peer closed or reset it, or bytes wait
// on it that no exchange asked for.
bool quiet_and_open(int fd)
{
    char b;
    ssize_t n = ::recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

}  // namespace

void UpstreamPool::on_slot_state(const UpstreamPtr& c)
{
    const UpstreamPtr* now = conn_ptr(c->slot_);
    if (!now || *now != c)
        return;  // retired meanwhile
    uint64_t* st = state_word(c->slot_);
    for (int attempt = 0; attempt < 4; attempt++) {
        uint64_t state = atomic(st).load();
        switch (state) {
        case L7_SLOT_CONNECTING:
        case L7_SLOT_EMPTY:
            return;  // someone else owns it
        case L7_SLOT_DEAD:
            retire_and_refill(c);
            return;
        case L7_SLOT_RELAY: {
            if (c->sock_.is_open())
                return;  // being relayed already
            auto s = slot(c->slot_);
            if (!s || !c->open_relay_socket()) {
                atomic(st).store(L7_SLOT_DEAD);
                retire_and_refill(c);
                return;
            }
            on_exchange_end_({KernelExchangeEnd::Kind::Relay, *s, c, 0});
            return;
        }
        case L7_SLOT_IDLE: {
            if (quiet_and_open(c->fd()))
                return;
            // closed by the backend (keep-alive timeout), or bytes nobody
            // asked for: either way the connection is done
            if (cas(st, L7_SLOT_IDLE, L7_SLOT_DEAD)) {
                retire_and_refill(c);
                return;
            }
            continue;  // the data plane claimed it meanwhile
        }
        case L7_SLOT_KBUSY: {
            // bytes reach this socket only once the data plane hands the
            // response over (RELAY), which it is about to publish
            if (quiet_and_open(c->fd()) || pending_bytes(c->fd()) > 0)
                return;
            if (!cas(st, L7_SLOT_KBUSY, L7_SLOT_DEAD))
                continue;
            log::debug("pool: upstream ", dataplane::to_string(c->key_), " closed during a kernel exchange");
            l7_slot s = slot(c->slot_).value_or(l7_slot{});
            bool until_close = s.resp.phase == L7_RESP_BODY && s.resp.body.kind == L7_BODY_UNTIL_CLOSE;
            on_exchange_end_({until_close ? KernelExchangeEnd::Kind::UntilClose
                                          : KernelExchangeEnd::Kind::Failed,
                              s, nullptr, 502});
            retire_and_refill(c);
            return;
        }
        }
    }
}

// A pooled connection that ended (the backend closed it, or the data plane
// retired it) is replaced now, not at the next sweep: the kernel path needs
// an idle slot for the next request.
void UpstreamPool::retire_and_refill(const UpstreamPtr& c)
{
    const uint32_t pool_id = c->pool_id_;
    retire(c);
    grow(pool_id);
}

void UpstreamPool::on_slot_event(uint32_t id)
{
    const UpstreamPtr* c = conn_ptr(id);
    if (!c || !*c)
        return;
    on_slot_state(UpstreamPtr(*c));
}

void UpstreamPool::sweep(std::chrono::milliseconds timeout)
{
    const uint64_t now = monotonic_ns();
    const uint64_t limit = static_cast<uint64_t>(timeout.count()) * 1000000ull;
    std::map<uint32_t, Suspect> next;
    std::vector<UpstreamPtr> stranded;
    for (auto& [pid, pool] : pools_) {
        for (uint16_t chunk : pool.chunks)
            for (uint32_t i = 0; i < L7_SLOT_CHUNK; i++) {
                const uint32_t id = chunk * L7_SLOT_CHUNK + i;
                const UpstreamPtr* cp = conn_ptr(id);
                if (!cp || !*cp)
                    continue;
                const uint64_t state = slot_state(id);
                // A hand-over (RELAY) nobody relays yet, or a slot the data
                // plane declared DEAD: its event normally arrives first, but
                // the ring drops events while it is full (a stalled daemon
                // under load). Whatever the event would have asked is done
                // here, after the walk; a late event finds it done.
                if ((state == L7_SLOT_RELAY && !(*cp)->sock_.is_open()) || state == L7_SLOT_DEAD) {
                    stranded.push_back(*cp);
                    continue;
                }
                if (state != L7_SLOT_KBUSY)
                    continue;
                UpstreamPtr c = *cp;
                auto s = slot(id);
                if (!s)
                    continue;
                // The data plane claims a slot (CAS to KBUSY) before it
                // stamps the request's start and use count: a claim seen in
                // between carries the previous request's stamp. Only an
                // exchange seen expired, with the same stamp, on two
                // consecutive sweeps has really timed out.
                Suspect seen{s->uses, s->req_start_ns};
                if (!seen.start || now - seen.start < limit)
                    continue;
                auto was = suspects_.find(id);
                bool confirmed = was != suspects_.end() && was->second.uses == seen.uses &&
                                 was->second.start == seen.start;
                if (!confirmed) {
                    next[id] = seen;
                    continue;
                }
                if (!cas(state_word(id), L7_SLOT_KBUSY, L7_SLOT_DEAD))
                    continue;
                log::notice("upstream ", pool.address.str(), " did not answer a kernel-path request within ",
                            timeout.count(), " ms (", dataplane::to_string(c->key_), ", request ", s->uses,
                            " on it, ", s->resp.bytes, " response bytes forwarded, ",
                            pending_bytes(c->fd()), " bytes waiting on the daemon's end, backend ",
                            (s->flags & L7_SF_BACKEND_LOCAL) ? "local" : "remote", ")");
                on_exchange_end_({KernelExchangeEnd::Kind::Failed, *s, nullptr, 504});
                retire(c);
            }
        pool.grown /= 2;  // what misses asked for decays once they stop (open ones stay)
        const auto old = std::chrono::steady_clock::now() - kPrivateIdle;
        for (auto c : std::vector<UpstreamPtr>(pool.private_idle))
            if (c->idle_since < old)
                close_private(c);
    }
    suspects_ = std::move(next);
    for (const auto& c : stranded) {
        log::debug("pool: recovering slot ", c->slot_, " (", dataplane::to_string(c->key_),
                   ") whose data-plane event has not arrived (lost, or still in the ring)");
        on_slot_state(c);
    }
    warm_all();
}

bool UpstreamPool::adopt(Fd owned)
{
    const int fd = owned.get();
    l7_conn_key key{};
    sockaddr_storage peer{};
    socklen_t plen = sizeof(peer);
    std::optional<uint32_t> id;
    if (dp_ && dataplane::conn_key_of(fd, true, &key) &&
        ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &plen) == 0)
        id = dp_->slot_by_tuple(key);
    std::optional<l7_slot> s = id ? slot(*id) : std::nullopt;
    const uint64_t st = id ? slot_state(*id) : uint64_t(L7_SLOT_EMPTY);
    l7_pool* sp = s ? shared_pool(s->pool_id) : nullptr;
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
    const UpstreamPtr* taken = id ? conn_ptr(*id) : nullptr;
    bool usable = s && sp && !(taken && *taken) && (st == L7_SLOT_IDLE || st == L7_SLOT_KBUSY) &&
                  (known == ids_.end() || known->second == s->pool_id) && s->pool_chunk < sp->n_chunks &&
                  sp->chunk[s->pool_chunk] == *id / L7_SLOT_CHUNK;
    if (!usable) {
        // a connection in the middle of a relay cannot be resumed: its
        // bytes were partly read by the old daemon
        if (id && !(taken && *taken))
            atomic(state_word(*id)).store(L7_SLOT_EMPTY);
        if (dp_) {
            dp_->slot_unregister_tuple(key);
            if (id)
                dp_->remove_slot_sockets(*id, fd);
        }
        FdStore::get().remove(id ? store_name(*id) : std::string());
        return false;
    }
    if (known == ids_.end()) {
        // the pool as the previous daemon left it: its chunks, in order
        Pool p;
        p.address = addr;
        for (uint32_t i = 0; i < sp->n_chunks && i < L7_POOL_MAX_CHUNKS; i++) {
            p.chunks.push_back(sp->chunk[i]);
            free_chunks_.erase(std::remove(free_chunks_.begin(), free_chunks_.end(), sp->chunk[i]),
                               free_chunks_.end());
        }
        pools_[s->pool_id] = std::move(p);
        ids_[addr] = s->pool_id;
    }
    auto conn = std::make_shared<UpstreamConn>(*this, s->pool_id, *id, std::move(owned),
                                                addr.family == AF_INET6 ? tcp::v6() : tcp::v4(), io_);
    conn->key_ = key;
    conn_at(*id) = conn;
    // What happened to it while no daemon ran reached the previous one's
    // events or none: look once everything is adopted (sessions included).
    asio::post(io_, [this, conn] { on_slot_state(conn); });
    return true;
}

void UpstreamPool::reconcile_adopted()
{
    if (!dp_)
        return;
    for (const auto& [key, id] : dp_->slot_tuples()) {
        const UpstreamPtr* c = conn_ptr(id);
        if (id >= L7_MAX_SLOTS || !c || !*c || std::memcmp(&(*c)->key_, &key, sizeof(key)))
            dp_->slot_unregister_tuple(key);
    }
    for (uint32_t id = 0; id < L7_MAX_SLOTS; id++) {
        const UpstreamPtr* c = conn_ptr(id);
        if ((c && *c) || slot_state(id) == L7_SLOT_EMPTY)
            continue;
        dp_->remove_slot_sockets(id, -1);
        atomic(state_word(id)).store(L7_SLOT_EMPTY);
    }
    // pools the previous daemon had that nothing was adopted for
    for (uint32_t pid = 0; pid < L7_MAX_POOLS; pid++)
        if (!pools_.count(pid))
            if (l7_pool* sp = shared_pool(pid))
                *sp = l7_pool{};
    // idle hints as the adopted states are
    for (auto& [pid, pool] : pools_)
        if (l7_pool* sp = shared_pool(pid))
            for (size_t pos = 0; pos < pool.chunks.size(); pos++) {
                uint64_t bits = 0;
                for (uint32_t i = 0; i < L7_SLOT_CHUNK; i++)
                    if (slot_state(pool.chunks[pos] * L7_SLOT_CHUNK + i) == L7_SLOT_IDLE)
                        bits |= 1ull << i;
                std::atomic_ref<__u64>(sp->idle[pos]).store(bits);
            }
}

void UpstreamPool::retire(const UpstreamPtr& c)
{
    const uint32_t id = c->slot_;
    FdStore::get().remove(store_name(id));
    log::debug("pool: closing upstream connection ", dataplane::to_string(c->key_), " (slot ", id, ")");
    if (dp_) {
        dp_->remove_slot_sockets(id, c->fd());
        dp_->slot_unregister_tuple(c->key_);
    }
    error_code ig;
    c->sock_.close(ig);
    c->raw_.reset();
    UpstreamPtr& at = conn_at(id);
    if (at == c)
        at.reset();
    atomic(state_word(id)).store(L7_SLOT_EMPTY);
}

}  // namespace l7fast::proxy
