#include "proxy/ProxyServer.hpp"

#include <arpa/inet.h>
#include <malloc.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <ctime>

#include "common/Clock.hpp"
#include "common/FdStore.hpp"
#include "auth/Jwt.hpp"
#include "auth/JwtCache.hpp"
#include "common/Log.hpp"
#include "dataplane/Dataplane.hpp"
#include "dataplane/TestFault.hpp"
#include "loader/PolicyLoader.hpp"
#include "semantics/Router.hpp"
#include "proxy/ClientSession.hpp"

namespace l7fast::proxy {
namespace {

std::string hex(const void* p, size_t n)
{
    static const char digits[] = "0123456789abcdef";
    std::string s;
    for (size_t i = 0; i < n; i++) {
        uint8_t b = static_cast<const uint8_t*>(p)[i];
        s += digits[b >> 4];
        s += digits[b & 15];
    }
    return s;
}

std::string listener_store_name(const policy::SocketAddress& a)
{
    return "l" + std::to_string(a.port) + "." + hex(a.ip.data(), a.family == AF_INET6 ? 16 : 4);
}

bool local_address_of(int fd, policy::SocketAddress* out)
{
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0)
        return false;
    *out = policy::SocketAddress{};
    out->family = ss.ss_family;
    if (ss.ss_family == AF_INET6) {
        auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
        std::memcpy(out->ip.data(), &a->sin6_addr, 16);
        out->port = ntohs(a->sin6_port);
    } else if (ss.ss_family == AF_INET) {
        auto* a = reinterpret_cast<sockaddr_in*>(&ss);
        std::memcpy(out->ip.data(), &a->sin_addr, 4);
        out->port = ntohs(a->sin_port);
    } else {
        return false;
    }
    return true;
}

}  // namespace

std::string client_store_name(const l7_conn_key& k) { return "c" + hex(&k, sizeof(k)); }

const policy::Policy& PolicyRuntime::policy() const { return router->policy(); }

void UserLatency::add(uint64_t ns)
{
    sum_ns += ns;
    const double s = static_cast<double>(ns) / 1e9;
    size_t i = 0;
    while (i < std::size(kUserLatencyBounds) && s > kUserLatencyBounds[i])
        i++;
    buckets[i]++;
}

void set_large_sndbuf(int fd)
{
    // A redirect into this socket's egress is pushed in the sender's
    // context; with a non-blocking sender a full buffer cuts it short and
    // the sender re-sends bytes the data plane already framed. A buffer
    // far larger than the ingress budget keeps one message from ever
    // meeting a full buffer (the pool runs one exchange at a time).
    int bytes = 4 << 20;
    if (::setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &bytes, sizeof(bytes)) != 0)
        ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes));
}

bool ConnKeyLess::operator()(const l7_conn_key& a, const l7_conn_key& b) const
{
    return std::memcmp(&a, &b, sizeof(a)) < 0;
}

ProxyServer::ProxyServer(asio::io_context& io, dataplane::Dataplane* dp, bool offload_remote)
    : io_(io),
      dp_(dp),
      offload_remote_(offload_remote),
      pool_(io, dp, [this](KernelExchangeEnd e) { on_exchange_end(std::move(e)); }),
      health_(io, pool_),
      events_lost_seen_(dp ? dp->counter(L7_C_EVENTS_LOST) : 0),
      park_(io, [this](uint64_t tag) {
          if (auto s = session_for(static_cast<uint32_t>(tag >> 32), static_cast<uint32_t>(tag)))
              s->hangup();
      })
{
    pool_.set_connect_observer([this](uint32_t pool, bool ok) { health_.on_connect(pool, ok); });
    if (dp_)
        module_keys_ = std::make_unique<dataplane::ModuleKeys>();
}

ProxyServer::~ProxyServer() { stop(); }

uint32_t ProxyServer::listener_id_for(const policy::SocketAddress& a)
{
    if (auto it = listener_ids_.find(a); it != listener_ids_.end())
        return it->second;
    for (uint32_t id = 0; id < L7_MAX_LISTENERS; id++) {
        bool used = false;
        for (const auto& [addr, lid] : listener_ids_)
            used = used || lid == id;
        if (!used) {
            listener_ids_[a] = id;
            return id;
        }
    }
    throw std::runtime_error("more than 64 listening addresses over this daemon's lifetime");
}

void ProxyServer::apply(std::shared_ptr<const PolicyRuntime> rt)
{
    // Phase 1: open what is new. A failure throws before anything the
    // running policy uses has been touched.
    std::vector<std::shared_ptr<Listening>> opened;
    for (size_t i = 0; i < rt->policy().listeners.size(); i++) {
        const auto& addr = rt->policy().listeners[i].address;
        bool have = false;
        for (const auto& cur : listening_)
            have = have || cur->address == addr;
        if (have)
            continue;
        auto l = std::make_shared<Listening>();
        l->address = addr;
        l->id = rt->listener_ids.at(i);
        l->acceptor = std::make_unique<tcp::acceptor>(io_);
        tcp::endpoint ep = to_endpoint(addr);
        error_code ec;
        bool inherited = false;
        for (Fd& fd : inherited_listeners_) {
            policy::SocketAddress bound;
            if (fd.valid() && local_address_of(fd.get(), &bound) && bound == addr) {
                l->acceptor->assign(ep.protocol(), fd.get(), ec);
                inherited = !ec;
                if (inherited) {
                    fd.release();  // the acceptor's now
                } else {
                    // closed, so that the address can be bound anew below
                    FdStore::get().remove(listener_store_name(addr));
                    fd.reset();
                    ec.clear();
                }
                break;
            }
        }
        if (inherited) {
            opened.push_back(std::move(l));
            continue;
        }
        l->acceptor->open(ep.protocol(), ec);
        if (!ec)
            l->acceptor->set_option(tcp::acceptor::reuse_address(true), ec);
        if (!ec && ep.protocol() == tcp::v6() && addr.is_wildcard())
            l->acceptor->set_option(asio::ip::v6_only(false), ec);
        if (!ec)
            l->acceptor->bind(ep, ec);
        if (!ec)
            l->acceptor->listen(asio::socket_base::max_listen_connections, ec);
        if (ec) {
            const auto& pl = rt->policy().listeners[i];
            throw std::runtime_error(
                policy::PolicyError{pl.where.file, pl.where.line, pl.where.column, "listener \"" + pl.name + "\"",
                                    "cannot listen on " + addr.str() + ": " + ec.message() +
                                        (ec == asio::error::address_in_use
                                             ? " (another process listens there: ss -ltnp shows which)"
                                             : "")}
                    .str());
        }
        FdStore::get().add(l->acceptor->native_handle(), listener_store_name(addr));
        opened.push_back(std::move(l));
    }
    // inherited listeners the policy no longer has
    for (const Fd& fd : inherited_listeners_) {
        policy::SocketAddress bound;
        if (fd.valid() && local_address_of(fd.get(), &bound))
            FdStore::get().remove(listener_store_name(bound));
    }
    inherited_listeners_.clear();  // closes them

    // Phase 2: commit. Listeners the policy dropped stop accepting; their
    // connections carry on.
    std::vector<std::shared_ptr<Listening>> next;
    for (const auto& lst : rt->policy().listeners) {
        for (auto* group : {&listening_, &opened})
            for (auto& l : *group)
                if (l && l->address == lst.address)
                    next.push_back(std::move(l));
    }
    for (auto& old : listening_) {
        if (old) {
            log::info("no longer listening on ", old->address.str());
            FdStore::get().remove(listener_store_name(old->address));
            error_code ig;
            old->acceptor->close(ig);
        }
    }
    listening_ = std::move(next);
    access_log_.set_sample(rt->policy().daemon.access_log_sample);
    access_log_.set_format(rt->policy().daemon.access_log_json ? AccessLog::Format::Json : AccessLog::Format::Text);
    rt_ = std::move(rt);
    // before the caller activates the generation in the kernel
    sync_module_keys();

    std::vector<policy::SocketAddress> upstreams;
    for (const auto& c : rt_->policy().clusters)
        for (const auto& e : c.endpoints)
            upstreams.push_back(e.address);
    pool_.retain_only(upstreams);
    health_.apply(*rt_);
    const auto& d = rt_->policy().daemon;
    pool_.set_limits(d.pool_min_idle, d.pool_max, d.connect_timeout);
    std::map<uint32_t, std::vector<uint32_t>> kernel_pools;
    if (dp_)
        for (uint32_t lid : rt_->listener_ids)
            kernel_pools[lid] = rt_->kernel_pools;
    pool_.set_kernel_pools(std::move(kernel_pools));
    for (auto& l : listening_) {
        if (l->accepting)
            continue;
        l->accepting = true;
        log::info("listening on ", l->address.str());
        asio::co_spawn(io_, accept_loop(l), asio::detached);
    }
    pool_.warm_all();
}

void ProxyServer::stop()
{
    for (auto& l : listening_) {
        error_code ig;
        if (l && l->acceptor)
            l->acceptor->close(ig);
    }
    listening_.clear();
    health_.stop();
}

awaitable<void> ProxyServer::accept_loop(std::shared_ptr<Listening> l)
{
    tcp::acceptor& acc = *l->acceptor;
    const uint32_t lid = l->id;
    const policy::SocketAddress addr = l->address;
    for (;;) {
        error_code ec;
        tcp::socket sock = co_await acc.async_accept(asio::redirect_error(use_awaitable, ec));
        if (ec == asio::error::operation_aborted || !acc.is_open())
            co_return;  // closed by a reload or stop
        if (ec) {
            log::warning("accepting on ", addr.str(), ": ", ec.message());
            asio::steady_timer t(io_);
            t.expires_after(std::chrono::milliseconds(50));
            co_await t.async_wait(asio::redirect_error(use_awaitable, ec));
            continue;
        }
        sock.set_option(tcp::no_delay(true), ec);
        l7_conn_key key{};
        if (!dataplane::conn_key_of(sock.native_handle(), false, &key))
            continue;
        SessionConn conn;
        if (dp_) {
            if (auto local = dp_->conn_of(key)) {
                // a local client: its own socket is in the data plane already
                conn.ref = *local;
            } else if (offload_remote_) {
                set_large_sndbuf(sock.native_handle());
                conn.ref = dp_->conn_create_remote(key, lid, sock.native_handle());
                conn.remote = conn.ref.valid();
                if (conn.remote) {
                    // bytes that arrived before the socket joined the map have
                    // not been through the verdict; waking the socket runs it
                    int one = 1;
                    ::setsockopt(sock.native_handle(), SOL_SOCKET, SO_RCVLOWAT, &one, sizeof(one));
                }
            }
        }
        FdStore::get().add(sock.native_handle(), client_store_name(key));
        start_session(std::move(sock), key, addr, lid, conn);
        pool_.on_client_accepted(lid, clients_on(lid));
    }
}

void ProxyServer::start_session(tcp::socket sock, const l7_conn_key& key,
                                const policy::SocketAddress& addr, uint32_t listener_id,
                                const SessionConn& conn)
{
    auto session = std::make_shared<ClientSession>(*this, std::move(sock), key, addr, conn);
    Session& s = sessions_[key];
    sessions_peak_ = std::max(sessions_peak_, sessions_.size());
    s.session = session;
    s.listener_id = listener_id;
    s.conn = conn.ref;
    clients_[listener_id]++;
    if (conn.ref.valid())
        by_conn_[conn.ref.idx] = key;
    session->start();
    if (conn.ref.valid())
        take_waiting_relays(conn.ref, session);
}

bool ProxyServer::awaits_accept(dataplane::ConnRef ref) const
{
    if (!dp_ || by_conn_.count(ref.idx))
        return false;
    auto c = dp_->conn(ref);
    return c && c->side == L7_SIDE_LOCAL && dp_->conn_socket_present(ref, false);
}

void ProxyServer::take_waiting_relays(dataplane::ConnRef ref, const std::shared_ptr<ClientSession>& session)
{
    auto [first, last] = waiting_relays_.equal_range(ref.idx);
    for (auto it = first; it != last;) {
        KernelExchangeEnd& e = it->second.end;
        if (e.snapshot.client_gen == ref.gen)
            session->relay(e.conn, e.snapshot);
        else
            pool_.finish_relay(e.conn, false);  // an earlier client of the entry
        it = waiting_relays_.erase(it);
    }
}

void ProxyServer::expire_waiting_relays(std::chrono::milliseconds timeout)
{
    const uint64_t now = monotonic_ns();
    const uint64_t limit = static_cast<uint64_t>(timeout.count()) * 1000000ull;
    for (auto it = waiting_relays_.begin(); it != waiting_relays_.end();) {
        const l7_slot& s = it->second.end.snapshot;
        const bool waiting = awaits_accept({s.client, s.client_gen});
        if (waiting && now - it->second.since_ns < limit) {
            ++it;
            continue;
        }
        log::debug("data plane: dropping a response handed over for client entry ", s.client, ": ",
                   waiting ? "not accepted within the request timeout" : "the client is gone");
        pool_.finish_relay(it->second.end.conn, false);
        it = waiting_relays_.erase(it);
    }
}

size_t ProxyServer::free_orphaned_connections()
{
    if (!dp_)
        return 0;
    size_t n = 0;
    for (const auto& [k, ref] : dp_->conn_refs()) {
        if (sessions_.count(k))
            continue;
        auto c = dp_->conn(ref);
        const bool remote = c && c->side == L7_SIDE_REMOTE;
        if (c && dp_->conn_socket_present(ref, remote))
            continue;  // e.g. waiting in a listener's backlog
        dp_->conn_free(ref, k, -1);
        n++;
    }
    dp_->forget_stale_cookies();
    return n;
}

size_t ProxyServer::clients_on(uint32_t listener_id) const
{
    auto it = clients_.find(listener_id);
    return it == clients_.end() ? 0 : it->second;
}

void ProxyServer::set_inherited_listeners(std::vector<Fd> fds) { inherited_listeners_ = std::move(fds); }

bool ProxyServer::adopt_client(Fd owned)
{
    const int fd = owned.get();
    l7_conn_key key{};
    policy::SocketAddress local;
    bool ok = dataplane::conn_key_of(fd, false, &key) && local_address_of(fd, &local);
    const Listening* lst = nullptr;
    for (const auto& l : listening_)
        if (ok && (l->address == local ||
                   (l->address.is_wildcard() && l->address.port == local.port &&
                    l->address.family == local.family)))
            lst = l.get();
    std::optional<dataplane::ConnRef> ref = ok && dp_ ? dp_->conn_of(key) : std::nullopt;
    std::optional<l7_conn> c = ref ? dp_->conn(*ref) : std::nullopt;
    const l7_conn_sync* sync = c ? dp_->conn_sync(*ref) : nullptr;
    // the previous daemon had read (part of) a request it had not answered:
    // where that request ends is lost with it
    bool mid_exchange = c && (!sync || static_cast<uint32_t>(c->pass_bytes) != sync->u_consumed);
    if (!ok || !lst || mid_exchange || sessions_.count(key)) {
        if (ok)
            FdStore::get().remove(client_store_name(key));
        if (c)
            dp_->conn_free(*ref, key, c->side == L7_SIDE_REMOTE ? fd : -1);
        return false;
    }
    tcp::socket sock(io_);
    error_code ec;
    sock.assign(local.family == AF_INET6 ? tcp::v6() : tcp::v4(), fd, ec);
    if (ec)
        return false;
    owned.release();  // the socket's now
    SessionConn conn;
    conn.adopted = true;
    if (c) {
        conn.ref = *ref;
        conn.remote = c->side == L7_SIDE_REMOTE;
    }
    start_session(std::move(sock), key, lst->address, lst->id, conn);
    return true;
}

void ProxyServer::session_ended(const l7_conn_key& k)
{
    auto it = sessions_.find(k);
    if (it == sessions_.end())
        return;
    if (auto n = clients_.find(it->second.listener_id); n != clients_.end() && n->second && --n->second == 0)
        clients_.erase(n);
    if (it->second.conn.valid())
        if (auto b = by_conn_.find(it->second.conn.idx); b != by_conn_.end() && !ConnKeyLess()(b->second, k) &&
                                                         !ConnKeyLess()(k, b->second))
            by_conn_.erase(b);
    sessions_.erase(it);
}

std::shared_ptr<ClientSession> ProxyServer::session_for(uint32_t conn, uint32_t gen)
{
    auto b = by_conn_.find(conn);
    if (b == by_conn_.end())
        return nullptr;
    auto it = sessions_.find(b->second);
    if (it == sessions_.end() || it->second.conn.gen != gen)
        return nullptr;
    return it->second.session.lock();
}

std::optional<l7_conn_key> ProxyServer::client_of(uint32_t conn, uint32_t gen) const
{
    auto b = by_conn_.find(conn);
    if (b == by_conn_.end())
        return std::nullopt;
    auto it = sessions_.find(b->second);
    if (it == sessions_.end() || it->second.conn.gen != gen)
        return std::nullopt;
    return b->second;
}

void ProxyServer::on_event(const l7_event& ev)
{
    switch (ev.type) {
    case L7_EV_TRACE: {
        static const char* const names[] = {"?", "request", "request-redirect", "response",
                                            "response-redirect", "slot-kill", "body-piece"};
        auto it = by_conn_.find(ev.conn);
        log::debug("trace ", names[ev.slot < 7 ? ev.slot : 0], " conn ", ev.conn,
                   it != by_conn_.end() ? " " + dataplane::to_string(it->second) : std::string(), " ",
                   ev.arg[0], " ", ev.arg[1]);
        break;
    }
    case L7_EV_CLOSE_CLIENT:
        if (auto s = session_for(ev.conn, ev.conn_gen))
            s->close_after_response();
        break;
    case L7_EV_WAKE:
        if (auto s = session_for(ev.conn, ev.conn_gen))
            s->wake();
        break;
    case L7_EV_RELAY:
    case L7_EV_SLOT_DEAD:
    case L7_EV_SLOT_ENDED:
        pool_.on_slot_event(ev.slot);
        break;
    case L7_EV_POOL_MISS:
        pool_.on_pool_miss(ev.slot);
        break;
    case L7_EV_OUTLIER:
        health_.on_kernel_streak(ev.slot);
        break;
    }
}

void ProxyServer::count_kernel_response(const l7_slot& snapshot, int status, uint64_t bytes)
{
    // req_start_ns is bpf_ktime_get_ns(): CLOCK_MONOTONIC
    uint64_t now = monotonic_ns();
    uint64_t latency = now > snapshot.req_start_ns ? now - snapshot.req_start_ns : 0;
    kernel_responses_[snapshot.stats_id].add_response(status, bytes, latency);
    health_.on_response(snapshot.pool_id, status);
    if (const policy::SocketAddress* a = pool_.address_of(snapshot.pool_id)) {
        dataplane::RouteCounters& pc = kernel_endpoint_responses_[*a];
        pc.requests++;
        pc.add_response(status, bytes, latency);
    }
    // the kernel samples the responses it completes itself (L7_EV_ACCESS);
    // these the daemon finished
    if (access_log_.sampled()) {
        AccessEntry e;
        auto client = client_of(snapshot.client, snapshot.client_gen);
        e.client = client ? client_address(*client) : std::string("-");
        std::string route = stats_route_name(snapshot.stats_id);
        e.route = route;
        e.status = status;
        e.bytes_out = bytes;
        e.latency_ns = latency;
        e.kernel = true;
        access_log_.write(e);
    }
}

void ProxyServer::on_exchange_end(KernelExchangeEnd e)
{
    auto s = session_for(e.snapshot.client, e.snapshot.client_gen);
    switch (e.kind) {
    case KernelExchangeEnd::Kind::Relay:
        if (s)
            s->relay(e.conn, e.snapshot);
        else if (awaits_accept({e.snapshot.client, e.snapshot.client_gen}))
            waiting_relays_.emplace(e.snapshot.client, WaitingRelay{std::move(e), monotonic_ns()});
        else
            pool_.finish_relay(e.conn, false);
        break;
    case KernelExchangeEnd::Kind::UntilClose:
        count_kernel_response(e.snapshot, e.snapshot.resp.status, e.snapshot.resp.bytes);
        if (s)
            s->kernel_until_close();
        break;
    case KernelExchangeEnd::Kind::Failed:
        if (s)
            s->kernel_failed(e.status, e.snapshot);
        break;
    }
}

uint32_t ProxyServer::active_requests(uint32_t pool_id) const
{
    auto it = active_->find(pool_id);
    return it == active_->end() ? 0 : it->second;
}

void ProxyServer::tick()
{
    if (!rt_)
        return;
    pool_.sweep(rt_->policy().daemon.request_timeout);
    expire_waiting_relays(rt_->policy().daemon.request_timeout);
    health_.tick();
    warn_lost_events();
    // a parked session whose wake-up was lost (a full event ring) reads
    // what the kernel passed it now
    // and one that stopped parking parks again when the kernel serves it
    const bool check_parked = !dataplane::test_faults().no_park_check;
    for (const auto& [k, s] : sessions_)
        if (auto session = s.session.lock()) {
            if (check_parked)
                session->check_parked();
            session->check_unparked();
        }
    // A burst of connections has ended: their sessions' memory is free, but
    // glibc returns only the top of the heap by itself, and what the burst
    // left below it would stay in l7fastd's RSS (1.8 MiB after 512
    // connections came and went, measured).
    if (sessions_peak_ >= sessions_.size() + kTrimAfterSessions && sessions_.size() <= sessions_peak_ / 2) {
        malloc_trim(0);
        sessions_peak_ = sessions_.size();
    }
    // the kernel's JWT exp and nbf read the wall clock through this
    if (dp_)
        dp_->refresh_wall_clock();
    // every 10 s: entries of connections that ended without a session
    if (++ticks_ % 20 == 0)
        if (size_t n = free_orphaned_connections())
            log::debug("data plane: freed ", n, " entries of connections that ended without a session");
    // one stat(2) per JWKS file when nothing changed; a new file that is
    // bad keeps the previous keys (Jwks logs both outcomes)
    bool reloaded = false;
    for (const auto& v : rt_->verifiers)
        if (v && v->refresh_if_changed() == auth::Jwks::Refresh::Reloaded)
            reloaded = true;
    // a token verified with a key that is gone now must not be admitted
    if (reloaded && dp_) {
        sync_module_keys();
        dp_->jwt_cache_clear();
    }
}

void ProxyServer::sync_module_keys()
{
    if (!module_keys_ || !module_keys_->available() || !rt_)
        return;
    const ModuleKeySet set = module_keys_of(rt_->verifiers);
    const bool kernel = dp_ && dp_->kfuncs();
    module_keys_->install(set.keys, [this, kernel](uint32_t epoch) {
        if (kernel)
            dp_->set_key_epoch(epoch);
    });
    if (kernel)
        write_jwt_headers(set);
}

void ProxyServer::write_jwt_headers(const ModuleKeySet& set)
{
    // a failed install left the previous keys in: no entry names them
    const bool held = module_keys_->holds(set.keys);
    if (!held)
        log::warning("kernel JWT verification: l7fast.ko does not hold the policy's HMAC keys (",
                     module_keys_->error(), "); HS tokens are verified in user space");
    const KernelHeaders h =
        held ? kernel_header_entries(set, module_keys_->ids(), rt_->verifiers) : KernelHeaders{};
    const size_t written = dp_->set_jwt_headers(rt_->generation, module_keys_->epoch(), h.entries);
    const size_t kids = dp_->set_jwt_kids(rt_->generation, module_keys_->epoch(), h.kids);
    log::info("kernel JWT verification: ", written, " header forms of ", h.groups, " HMAC key group",
              h.groups == 1 ? "" : "s", "; ", kids, " kid entries, every kid of ", h.complete, " provider",
              h.complete == 1 ? "" : "s", " (key epoch ", module_keys_->epoch(), ")",
              h.skipped ? "; " + std::to_string(h.skipped) +
                              " groups stay in user space (a key the module lacks, or more than " +
                              std::to_string(L7_JWT_HDR_KEYS) + " keys with one kid)"
                        : std::string());
}

void ProxyServer::warn_lost_events()
{
    if (!dp_)
        return;
    const uint64_t lost = dp_->counter(L7_C_EVENTS_LOST);
    if (lost > events_lost_seen_)
        log::warning("data plane: ", lost - events_lost_seen_,
                     " events lost: the event ring was full while l7fastd did not read it (starved of CPU, "
                     "or stopped); the pool's sweep takes up lost hand-overs and retired connections, sampled "
                     "access-log lines of those responses are missing. If this repeats, give l7fastd more CPU "
                     "(l7fastctl stats: events_lost)");
    events_lost_seen_ = lost;
}

void ProxyServer::cache_verified_token(const PolicyRuntime& rt, size_t provider, const auth::Result& r)
{
    if (!dp_ || !r.ok() || provider > UINT32_MAX)
        return;
    const auto target = dp_->jwt_cache_target(rt.generation, static_cast<uint32_t>(provider));
    if (!target)
        return;
    auto e = auth::cache_entry(r, target->gen, static_cast<uint32_t>(provider), target->seed, target->max_token,
                               auth::cache_clock_now());
    if (e)
        e->entry.tag = target->tag;
    if (e && !dp_->jwt_cache_put(e->key, e->entry))
        log::debug("verified-token cache: insert failed: ", std::strerror(errno));
}

}  // namespace l7fast::proxy
