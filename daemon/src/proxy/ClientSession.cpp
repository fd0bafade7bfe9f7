#include "proxy/ClientSession.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <iterator>
#include <memory>
#include <optional>
#include <utility>
#include <variant>

#include "common/Clock.hpp"
#include "common/FdStore.hpp"
#include "common/TcpQueue.hpp"
#include "common/Log.hpp"
#include "dataplane/Dataplane.hpp"
#include "semantics/Mutation.hpp"
#include "proxy/ExchangeRecord.hpp"
#include "proxy/Pipeline.hpp"
#include "proxy/ProxyServer.hpp"
#include "proxy/RequestAnalysis.hpp"

namespace l7fast::proxy {
namespace {

constexpr size_t kReadChunk = 16384;
constexpr size_t kFirstRead = 1024;
constexpr auto kKernelPoll = std::chrono::microseconds(200);
// how long a half-closed local client has to read a kernel response before
// the daemon's FIN frees what it has not read (drain_kernel_before_close)
constexpr auto kHalfCloseLinger = std::chrono::seconds(1);
// how long kernel bytes may take to be queued on a remote client's socket
constexpr auto kKernelQueueWait = std::chrono::milliseconds(500);

// The largest request body dropped to keep a connection open after a local
// answer (401, 403, 429, a direct response); larger ones close it.
constexpr uint64_t kDrainLimit = 65536;

// Parks in a row that only bytes for the slow path ended (no kernel
// response meanwhile) after which a session waits in asio instead: parking
// costs such a connection about 6 us per request (ClientSession::park).
constexpr unsigned kSlowParks = 2;

}  // namespace

std::chrono::milliseconds ExchangeTimeout::next() const
{
    if (each.count() > 0)
        return each;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
    return std::max(left, std::chrono::milliseconds(1));
}

ClientSession::ClientSession(ProxyServer& server, tcp::socket sock, const l7_conn_key& key,
                             const policy::SocketAddress& listener, SessionConn conn)
    : server_(server), sock_(std::move(sock)), key_(key), listener_(listener), conn_(conn)
{
    // what the previous daemon published (a new connection starts at zero)
    if (l7_conn_sync* sy = conn_.adopted ? sync() : nullptr) {
        consumed_ = answered_consumed_ = std::atomic_ref<__u32>(sy->u_consumed).load();
        written_ = std::atomic_ref<__u32>(sy->u_bytes).load();
    }
}

// Looked up at each use, never at accept: the entry's page of the mmapped
// l7_conn_sync joins l7fastd's RSS only when it is first used, and a local
// client whose requests the kernel path serves may never need it (local
// clients' entries are spread over 1 MiB of the array). Null once the
// session has let go of the entry (finish()).
l7_conn_sync* ClientSession::sync() const
{
    if (finished_ || !conn_.ref.valid() || !server_.dataplane())
        return nullptr;
    return server_.dataplane()->conn_sync(conn_.ref);
}

void ClientSession::start()
{
    asio::co_spawn(server_.io(), serve(shared_from_this()), asio::detached);
}

// A client whose requests the kernel path serves never wakes the daemon:
// its session waits here, in a coroutine frame of a few hundred bytes, and
// enters run() (over 4 KiB of coroutine state) only once the client sends
// the daemon something. At 512 such clients that is 2 MiB of l7fastd's RSS.
awaitable<void> ClientSession::serve(std::shared_ptr<ClientSession> self)
{
    if (int w = co_await wait_first_byte(server_.runtime()->policy().daemon.idle_timeout); w < 0) {
        log::debug(dataplane::to_string(key_), ": session ends: ",
                   w == -1 ? "timed out waiting for a request" : "client read failed");
        finish();
        co_return;
    }
    co_await run(std::move(self));
}

void ClientSession::consume(size_t n)
{
    n = std::min(n, in_len_);
    std::memmove(in_.data(), in_.data() + n, in_len_ - n);
    in_len_ -= n;
    consumed_ += static_cast<uint32_t>(n);
}

void ClientSession::publish(size_t final_bytes, bool answers_request)
{
    if (answers_request)
        answered_consumed_ = consumed_;
    l7_conn_sync* sy = sync();
    if (!sy)
        return;
    // u_bytes before u_consumed: the kernel reads them the other way
    // round, so it never pairs a new u_consumed with an old u_bytes
    std::atomic_ref<__u32>(sy->u_bytes).store(written_ + static_cast<uint32_t>(final_bytes),
                                            std::memory_order_release);
    std::atomic_ref<__u32>(sy->u_consumed).store(answered_consumed_, std::memory_order_release);
}

void ClientSession::kernel_done()
{
    kernel_done_ns_ = monotonic_ns();
    if (l7_conn_sync* sy = sync())
        std::atomic_ref<__u32>(sy->k_busy).store(0, std::memory_order_release);
}

void ClientSession::finish()
{
    if (finished_)
        return;
    finished_ = true;
    FdStore::get().remove(client_store_name(key_));
    unpark();
    // the data plane lets go of the connection while the socket (and so
    // its cookie) still exists
    if (conn_.ref.valid() && server_.dataplane())
        server_.dataplane()->conn_free(conn_.ref, key_,
                                       conn_.remote ? (sock_.is_open() ? sock_.native_handle() : parked_.get()) : -1);
    if (in_park_set_)
        server_.park_set().remove(sock_.is_open() ? sock_.native_handle() : parked_.get());
    error_code ig;
    sock_.shutdown(tcp::socket::shutdown_send, ig);
    sock_.close(ig);
    if (parked_.valid()) {  // unpark() failed
        ::shutdown(parked_.get(), SHUT_WR);
        parked_.reset();
    }
    server_.session_ended(key_);
}

// The keep-alive wait for a request's first byte: 0 when it is there, -1
// when the connection has been idle for `idle`, -2 when the wait failed.
// A client whose requests the kernel path serves sends the daemon nothing,
// so idle counts from the later of this wait's start and the kernel's last
// response to the client (l7_conn_sync.k_done_ns, or kernel_done() for one
// the daemon relayed), and not at all while a kernel response is in flight
// (k_busy): a busy kernel-path connection is never closed as idle.
awaitable<int> ClientSession::wait_first_byte(std::chrono::milliseconds idle)
{
    const uint64_t limit = static_cast<uint64_t>(std::chrono::nanoseconds(idle).count());
    const uint64_t start = monotonic_ns();
    for (;;) {
        const uint64_t now = monotonic_ns();
        uint64_t since = std::max(start, kernel_done_ns_);  // a kernel response the daemon relayed
        if (l7_conn_sync* sy = sync()) {
            if (std::atomic_ref<__u32>(sy->k_busy).load(std::memory_order_acquire))
                since = now;
            else
                since = std::max<uint64_t>(since, std::atomic_ref<__u64>(sy->k_done_ns).load());
        }
        since = std::min(since, now);  // a response completed since `now` was read
        if (now - since >= limit) {
            unpark();
            co_return -1;
        }
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(std::chrono::nanoseconds(limit - (now - since)));
        int w;
        if (parked_.valid() || park())
            w = co_await wait_parked(left);
        else
            w = co_await wait_readable(left);
        if (w != 0) {
            unpark();
            co_return w > 0 ? 0 : -2;
        }
    }
}

awaitable<int> ClientSession::wait_readable(std::chrono::milliseconds left)
{
    Deadline deadline(server_.io());
    deadline.arm(left, {&sock_});
    error_code ec;
    in_wait_readable_ = true;
    co_await sock_.async_wait(tcp::socket::wait_read, asio::redirect_error(use_awaitable, ec));
    in_wait_readable_ = false;
    if (std::exchange(repark_, false) && ec == asio::error::operation_aborted)
        co_return 0;  // release_socket(), check_unparked(): park now
    if (deadline.fired())
        co_return 0;
    if (ec) {
        log::debug(dataplane::to_string(key_), ": client wait: ", ec.message());
        co_return -2;
    }
    co_return 1;
}

awaitable<int> ClientSession::wait_parked(std::chrono::milliseconds left)
{
    asio::steady_timer t(server_.io(), left);
    park_timer_ = &t;
    wake_ready_ = false;
    error_code ec;
    co_await t.async_wait(asio::redirect_error(use_awaitable, ec));
    park_timer_ = nullptr;
    check_parked();  // the timer: a wake-up lost?
    co_return !parked_.valid() && wake_ready_ ? 1 : 0;
}

// The kernel sends L7_EV_WAKE when it passes bytes to the slow path while
// L7_SYNC_PARKED is set, after it wrote k_passed. Setting the flag before
// reading k_passed here (both full barriers) means that either this sees
// the bytes, or the kernel sees the flag.
bool ClientSession::park()
{
    l7_conn_sync* sy = sync();
    if (!sy || !conn_.remote || park_failed_ || slow_parks_ >= kSlowParks || closing_ || hung_up_ ||
        sock_users_ || in_len_ || !sock_.is_open() || !server_.park_set().ok())
        return false;
    if (!in_park_set_) {
        if (!server_.park_set().add(sock_.native_handle(), ProxyServer::park_tag(conn_.ref))) {
            log::warning(dataplane::to_string(key_), ": cannot park the connection (", std::strerror(errno),
                         "); l7fastd wakes once per request on it");
            park_failed_ = true;
            return false;
        }
        in_park_set_ = true;
    }
    std::atomic_ref<__u32> flags(sy->flags);
    flags.fetch_or(L7_SYNC_PARKED, std::memory_order_seq_cst);
    if (passed_unread(sy)) {
        flags.fetch_and(~L7_SYNC_PARKED, std::memory_order_seq_cst);
        return false;  // bytes on their way to us
    }
    error_code ec;
    const int fd = sock_.release(ec);
    if (ec) {
        flags.fetch_and(~L7_SYNC_PARKED, std::memory_order_seq_cst);
        log::warning(dataplane::to_string(key_), ": cannot park the connection (", ec.message(),
                     "); l7fastd wakes once per request on it");
        park_failed_ = true;
        return false;
    }
    parked_.reset(fd);
    park_done_ns_ = std::atomic_ref<__u64>(sy->k_done_ns).load();
    server_.count_parked(+1);
    return true;
}

// Bytes the kernel passed to the slow path that this session has not read.
bool ClientSession::passed_unread(l7_conn_sync* sy) const
{
    return std::atomic_ref<__u32>(sy->k_passed).load(std::memory_order_seq_cst) != consumed_;
}

// A kernel response to this client in flight, or one completed, since the
// session last parked.
bool ClientSession::kernel_served_since_park(l7_conn_sync* sy) const
{
    return std::atomic_ref<__u32>(sy->k_busy).load() ||
           std::atomic_ref<__u64>(sy->k_done_ns).load() != park_done_ns_;
}

void ClientSession::unpark()
{
    if (!parked_.valid())
        return;
    if (l7_conn_sync* sy = sync())
        std::atomic_ref<__u32>(sy->flags).fetch_and(~L7_SYNC_PARKED, std::memory_order_seq_cst);
    error_code ec;
    sock_.assign(listener_.family == AF_INET6 ? tcp::v6() : tcp::v4(), parked_.get(), ec);
    server_.count_parked(-1);
    if (ec) {
        // the descriptor stays in parked_, which finish() closes
        log::warning(dataplane::to_string(key_), ": cannot watch the client's connection again (",
                     ec.message(), "); closing it");
        closing_ = hung_up_ = true;
    } else {
        parked_.release();
    }
    if (park_timer_)
        park_timer_->cancel();
}

// A relay is done with sock_: a session waiting in asio for its client's
// next request parks again (its wait is cancelled to that end), or every
// request the kernel serves from now on would wake the daemon.
void ClientSession::release_socket()
{
    if (--sock_users_ || !in_wait_readable_ || !conn_.remote || closing_)
        return;
    repark_ = true;
    error_code ig;
    sock_.cancel(ig);
}

void ClientSession::wake()
{
    if (!parked_.valid())
        return;
    // a park the kernel served nothing in: the connection's requests may
    // all be the slow path's
    l7_conn_sync* sy = sync();
    if (sy && !kernel_served_since_park(sy))
        slow_parks_++;
    else
        slow_parks_ = 0;
    wake_ready_ = true;
    unpark();
}

void ClientSession::hangup()
{
    hung_up_ = true;
    wake();
}

void ClientSession::check_parked()
{
    if (!parked_.valid())
        return;
    l7_conn_sync* sy = sync();
    if (!sy || passed_unread(sy))
        wake();
}

// A session that stopped parking (kSlowParks) learns that the kernel serves
// its connection again only from here: the kernel's requests do not wake it.
void ClientSession::check_unparked()
{
    if (slow_parks_ < kSlowParks || !in_wait_readable_ || parked_.valid() || sock_users_ || closing_)
        return;
    l7_conn_sync* sy = sync();
    if (!sy || !kernel_served_since_park(sy))
        return;
    slow_parks_ = 0;
    repark_ = true;
    error_code ig;
    sock_.cancel(ig);
}

awaitable<int> ClientSession::read_request_head(l7_msg& m)
{
    const auto& d = server_.runtime()->policy().daemon;
    Deadline deadline(server_.io());
    bool first = true;
    // the whole head must arrive within header_timeout of its first byte: a
    // client trickling a byte at a time does not restart the clock
    std::optional<std::chrono::steady_clock::time_point> head_until;
    for (;;) {
        if (in_len_ > 0) {
            int st = parse_head({in_.data(), in_len_}, true, &m);
            if (st != L7_P_MORE)
                co_return st;
        }
        error_code ec;
        if (in_len_ == 0 && first) {
            // No buffer while nothing is pending: a client whose requests
            // the kernel takes never sends the daemon a byte, and a
            // session's 16 KiB would otherwise be most of l7fastd's memory
            // under load.
            std::vector<char>().swap(in_);
            if (int w = co_await wait_first_byte(d.idle_timeout); w < 0) {
                m.status = 0;
                co_return w;
            }
        }
        // the head timeout from its first byte on
        first = false;
        auto now = std::chrono::steady_clock::now();
        if (!head_until)
            head_until = now + d.header_timeout;
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*head_until - now);
        deadline.arm(std::max(left, std::chrono::milliseconds(1)), {&sock_});
        // a small first read (most heads fit; a close reads nothing), then
        // whole chunks
        const size_t room = in_.empty() ? kFirstRead : kReadChunk;
        if (in_.size() < in_len_ + room)
            in_.resize(std::min<size_t>(in_len_ + room, L7_USER_MAX_HDR_BLOCK + kReadChunk));
        size_t n = co_await sock_.async_read_some(
            asio::buffer(in_.data() + in_len_, in_.size() - in_len_),
            asio::redirect_error(use_awaitable, ec));
        if (deadline.fired()) {
            m.status = in_len_ ? 408 : 0;
            co_return -1;
        }
        if (ec == asio::error::eof)
            co_return -3;
        if (ec) {
            log::debug(dataplane::to_string(key_), ": client read: ", ec.message());
            co_return -2;
        }
        in_len_ += n;
    }
}

// The kernel may still be delivering the response to an earlier request of
// this connection; ours must come after it, so the slow path writes only
// once the data plane has no request of this connection in flight.
awaitable<bool> ClientSession::wait_kernel_idle()
{
    if (!sync())
        co_return true;
    auto limit = std::chrono::steady_clock::now() + server_.runtime()->policy().daemon.request_timeout;
    asio::steady_timer t(server_.io());
    for (;;) {
        l7_conn_sync* sy = sync();
        if (!sy || std::atomic_ref<__u32>(sy->k_busy).load(std::memory_order_acquire) == 0)
            co_return true;
        if (std::chrono::steady_clock::now() > limit || closing_)
            co_return false;
        t.expires_after(kKernelPoll);
        error_code ec;
        co_await t.async_wait(asio::redirect_error(use_awaitable, ec));
    }
}

// Before the daemon closes a connection on which the kernel may still be
// answering (l7_sync_flags in l7fast_abi.h says why each step is needed):
// a response the kernel has not started is relayed through the daemon,
// which writes it ahead of the FIN; one in flight is waited for; then
//  - a remote client's kernel bytes must all be queued on our socket
//    (SK_SKB redirects reach it later, from the psock's worker): a FIN
//    queued first would make the rest fail to send;
//  - a local client that only half-closed may not have read yet what the
//    kernel put in its socket's BPF ingress queue, which our FIN frees:
//    the FIN waits until kHalfCloseLinger after the last kernel response.
awaitable<void> ClientSession::drain_kernel_before_close()
{
    l7_conn_sync* sy = sync();
    if (!sy)
        co_return;
    std::atomic_ref<__u32> flags(sy->flags);
    flags.fetch_or(L7_SYNC_CLOSING, std::memory_order_seq_cst);
    co_await wait_kernel_idle();
    asio::steady_timer t(server_.io());
    error_code ec;
    if (conn_.remote) {
        auto* dp = server_.dataplane();
        auto c = dp ? dp->conn(conn_.ref) : std::nullopt;
        const uint64_t want = written_ + (c ? c->k_bytes : 0);
        for (auto until = std::chrono::steady_clock::now() + kKernelQueueWait;
             sync() && tcp_bytes_queued(sock_.native_handle()).value_or(want) < want &&
             std::chrono::steady_clock::now() < until;) {
            t.expires_after(kKernelPoll);
            co_await t.async_wait(asio::redirect_error(use_awaitable, ec));
        }
        co_return;
    }
    if (!(flags.load() & L7_SYNC_HALF_CLOSED))
        co_return;  // closed for good: it reads nothing any more
    const uint64_t done = std::atomic_ref<__u64>(sy->k_done_ns).load();
    const uint64_t now = monotonic_ns();
    const uint64_t linger = std::chrono::nanoseconds(kHalfCloseLinger).count();
    if (done && now - done < linger) {
        t.expires_after(std::chrono::nanoseconds(linger - (now - done)));
        co_await t.async_wait(asio::redirect_error(use_awaitable, ec));
    }
}

// Written at once when the socket has room (the common case: one system
// call), else asynchronously. Every byte counts in written_, which the next
// publish() tells the data plane.
awaitable<bool> ClientSession::write_client(std::string_view data)
{
    error_code ec;
    if (!sock_.non_blocking())
        sock_.non_blocking(true, ec);
    size_t done = 0;
    if (ec) {
        ec.clear(); // not in non-blocking mode: the asynchronous write only
    } else {
        done = sock_.write_some(asio::buffer(data.data(), data.size()), ec);
        if (ec == asio::error::would_block || ec == asio::error::try_again || ec == asio::error::interrupted) {
            ec.clear();
            done = 0;
        }
        if (ec)
            co_return false;
    }
    if (done < data.size()) {
        size_t more = co_await asio::async_write(sock_, asio::buffer(data.data() + done, data.size() - done),
                                                 asio::redirect_error(use_awaitable, ec));
        done += more;
    }
    written_ += static_cast<uint32_t>(done);
    co_return !ec;
}

awaitable<uint64_t> ClientSession::respond(int status, std::string_view text, bool close)
{
    // GCC 12 mishandles co_await inside conditions and temporaries that
    // live across a co_await: every await here is a plain statement.
    policy::LocalResponse response = policy::local_response(status, text, close);
    uint64_t n = co_await respond_local(response);
    co_return n;
}

awaitable<void> ClientSession::refuse(int status, std::string_view text, std::string reason, std::string_view method,
                                      std::string_view target)
{
    server_.count_refused(reason);
    ExchangeRecord x(server_, key_, method, target, {}, std::nullopt);
    x.set_reason(std::move(reason));
    co_await answer(x, 0, status, text, true);
}

awaitable<bool> ClientSession::answer(ExchangeRecord& x, size_t head_len, int status, std::string_view text,
                                      bool close)
{
    // consumed before the answer is published (the kernel takes the next
    // request once the answer covers every byte it passed)
    if (!close)
        consume(head_len);
    uint64_t n = co_await respond(status, text, close);
    x.finish(status, n);
    co_return close;
}

awaitable<uint64_t> ClientSession::respond_local(const policy::LocalResponse& r)
{
    std::string_view bytes(r.bytes);
    if (head_request_)
        bytes = bytes.substr(0, r.head_size);
    bool idle = co_await wait_kernel_idle();
    bool wrote = false;
    // an answer that closes the connection leaves it the slow path's: bytes
    // the client sends after it (the rest of a body nobody read, say) must
    // never be taken for a request
    publish(idle ? bytes.size() : 0, !r.close);
    if (idle)
        wrote = co_await write_client(bytes);
    co_return wrote ? bytes.size() : 0;
}

awaitable<bool> ClientSession::discard_request_body(const l7_msg& m)
{
    if (m.body_kind == L7_BODY_NONE)
        co_return true;
    if ((m.flags & L7_MF_EXPECT_100) || m.body_kind == L7_BODY_UNTIL_CLOSE ||
        (m.body_kind == L7_BODY_LENGTH && m.content_length > kDrainLimit))
        co_return false;
    BodyFramer framer(m.body_kind, m.content_length);
    Deadline deadline(server_.io());
    const auto timeout = server_.runtime()->policy().daemon.header_timeout;
    uint64_t dropped = 0;
    for (;;) {
        if (in_len_ > 0) {
            long k = framer.feed({in_.data(), in_len_});
            if (k < 0)
                co_return false;
            consume(static_cast<size_t>(k));
            dropped += static_cast<uint64_t>(k);
        }
        if (framer.done())
            co_return true;
        if (dropped > kDrainLimit)
            co_return false;
        if (in_.size() < kReadChunk)
            in_.resize(kReadChunk);
        deadline.arm(timeout, {&sock_});
        error_code ec;
        size_t n = co_await sock_.async_read_some(asio::buffer(in_.data() + in_len_, in_.size() - in_len_),
                                                  asio::redirect_error(use_awaitable, ec));
        if (ec || deadline.fired())
            co_return false;
        in_len_ += n;
    }
}

awaitable<bool> ClientSession::forward_request_body(UpstreamConn& up, const l7_msg& m,
                                                    bool& body_error, ExchangeTimeout timeout)
{
    body_error = false;
    if (m.body_kind == L7_BODY_NONE)
        co_return true;
    BodyFramer framer(m.body_kind, m.content_length);
    Deadline deadline(server_.io());
    for (;;) {
        if (in_len_ > 0) {
            long k = framer.feed({in_.data(), in_len_});
            if (k < 0) {
                body_error = true;
                co_return false;
            }
            error_code ec;
            co_await asio::async_write(up.socket(), asio::buffer(in_.data(), static_cast<size_t>(k)),
                                       asio::redirect_error(use_awaitable, ec));
            if (ec)
                co_return false;
            consume(static_cast<size_t>(k));
        }
        if (framer.done())
            co_return true;
        if (in_.size() < kReadChunk)
            in_.resize(kReadChunk);
        deadline.arm(timeout.next(), {&sock_});
        error_code ec;
        size_t n = co_await sock_.async_read_some(asio::buffer(in_.data() + in_len_, in_.size() - in_len_),
                                                  asio::redirect_error(use_awaitable, ec));
        if (ec || deadline.fired())
            co_return false;
        in_len_ += n;
    }
}

awaitable<ClientSession::Relayed> ClientSession::pipe_response(UpstreamConn& up, bool req_head,
                                                                l7_resp_state start,
                                                                bool wait_kernel,
                                                                ExchangeTimeout timeout,
                                                                const policy::HeaderMutation* response_mutation)
{
    Relayed x;
    std::vector<char> buf(kReadChunk);
    size_t len = 0;
    Deadline deadline(server_.io());
    BodyFramer framer;
    bool in_body = start.phase == L7_RESP_BODY;
    if (in_body)
        framer = BodyFramer(start.body);
    x.close = start.close_after;
    x.status = start.status;

    auto read_more = [&]() -> awaitable<long> {
        if (buf.size() < len + kReadChunk)
            buf.resize(std::min<size_t>(len + kReadChunk, L7_USER_MAX_HDR_BLOCK + kReadChunk));
        if (len == buf.size())
            co_return -1;
        deadline.arm(timeout.next(), {&up.socket()});
        error_code ec;
        size_t n = co_await up.socket().async_read_some(asio::buffer(buf.data() + len, buf.size() - len),
                                                        asio::redirect_error(use_awaitable, ec));
        if (deadline.fired())
            co_return -2;
        if (ec == asio::error::eof)
            co_return 0;
        if (ec)
            co_return -1;
        len += n;
        co_return static_cast<long>(n);
    };
    // Sends the first n bytes of buf, or `instead` in their place (a
    // rewritten head); `last`: they end the response, so they are
    // published first (a relay's answer to no request of its own).
    auto send = [&](size_t n, const std::string* instead, bool last) -> awaitable<bool> {
        if (!x.wrote && wait_kernel) {
            bool idle = co_await wait_kernel_idle();
            if (!idle)
                co_return false;
        }
        x.wrote = true;
        std::string_view out = instead ? std::string_view(*instead) : std::string_view(buf.data(), n);
        if (last)
            publish(out.size(), wait_kernel);
        bool ok = co_await write_client(out);
        x.bytes += out.size();
        std::memmove(buf.data(), buf.data() + n, len - n);
        len -= n;
        co_return ok;
    };

    while (!in_body) {
        l7_msg m;
        int st = len ? parse_head({buf.data(), len}, false, &m) : L7_P_MORE;
        if (st == L7_P_MORE) {
            long r = co_await read_more();
            if (r <= 0) {
                x.status = r == -2 ? 504 : 502;
                co_return x;
            }
            continue;
        }
        if (st == L7_P_ERROR) {
            x.status = 502;
            co_return x;
        }
        l7_response_body(&m, req_head ? 1 : 0);
        x.status = m.status;
        if (m.flags & L7_MF_CLOSE)
            x.close = true;
        std::optional<std::string> mutated;
        if (response_mutation && !response_mutation->empty() && m.status >= 200) {
            mutated = policy::mutate_response_head({buf.data(), m.hdr_len}, *response_mutation);
            if (!mutated) {
                x.status = 502;
                co_return x;
            }
        }
        const std::string* instead = mutated ? &*mutated : nullptr;
        // a final head without a body ends the response
        const bool last = m.status >= 200 && m.status != 101 && m.body_kind == L7_BODY_NONE;
        bool sent = co_await send(m.hdr_len, instead, last);
        if (!sent)
            co_return x;
        if (m.status == 101) {
            x.ok = true;
            x.close = true;
            co_return x;  // caller switches to a tunnel
        }
        if (m.status < 200)
            continue;
        framer = BodyFramer(m.body_kind, m.content_length);
        in_body = true;
    }
    while (!framer.done()) {
        if (len > 0) {
            long k = framer.feed({buf.data(), len});
            if (k < 0)
                co_return x;
            if (k > 0) {
                bool sent = co_await send(static_cast<size_t>(k), nullptr, framer.done());
                if (!sent)
                    co_return x;
            }
            if (framer.done())
                break;
        }
        long r = co_await read_more();
        if (r == 0 && framer.until_close()) {
            x.ok = true;
            x.close = true;
            co_return x;
        }
        if (r <= 0)
            co_return x;
    }
    x.ok = true;
    // bytes past the end of the response: the upstream is not speaking HTTP
    // the way we framed it, so its connection is not reused
    x.reusable = len == 0 && !x.close;
    co_return x;
}

awaitable<void> ClientSession::tunnel(UpstreamPtr up, std::vector<char> pending)
{
    // After 101 Switching Protocols both directions are opaque bytes.
    auto self = shared_from_this();
    auto pump = [](tcp::socket& from, tcp::socket& to) -> awaitable<void> {
        std::vector<char> b(kReadChunk);
        for (;;) {
            error_code ec;
            size_t n = co_await from.async_read_some(asio::buffer(b), asio::redirect_error(use_awaitable, ec));
            if (ec)
                break;
            co_await asio::async_write(to, asio::buffer(b.data(), n), asio::redirect_error(use_awaitable, ec));
            if (ec)
                break;
        }
        error_code ig;
        to.shutdown(tcp::socket::shutdown_send, ig);
    };
    if (!pending.empty()) {
        error_code ec;
        co_await asio::async_write(up->socket(), asio::buffer(pending), asio::redirect_error(use_awaitable, ec));
    }
    asio::co_spawn(server_.io(), [up, self, pump]() -> awaitable<void> {
        co_await pump(up->socket(), self->sock_);
    }, asio::detached);
    co_await pump(sock_, up->socket());
}

// One request after another: its head read, analysed (RequestAnalysis), and
// the outcome's exchange done; the connection closes after an exchange
// that ends it, or when no request comes.
awaitable<void> ClientSession::run(std::shared_ptr<ClientSession> self)
{
    const char* why = "closing";
    // the first request is read whatever happened while serve() waited for
    // it, as when that wait was this loop's
    for (bool first_request = true; first_request || !closing_; first_request = false) {
        head_request_ = false;
        l7_msg m;
        const int st = co_await read_request_head(m);
        if (st < 0 || st == L7_P_ERROR) {
            why = co_await end_without_request(st, m);
            break;
        }
        head_request_ = m.method == L7_M_HEAD;
        // on the heap: run()'s coroutine frame holds m already
        auto ex = std::make_unique<RequestExchange>(server_.runtime(), m, std::span<const char>(in_.data(), in_len_));
        const Outcome outcome = analyse(*ex, server_, key_, listener_);
        const char* ends = nullptr;  // why the connection ends after this exchange; null: it goes on
        if (const auto* r = std::get_if<Refuse>(&outcome)) {
            co_await refuse(r->status, r->text, r->reason, ex->method, ex->target);
            ends = r->why;
        } else if (const auto* a = std::get_if<Answer>(&outcome)) {
            const bool must_close = co_await answer(*ex->record, m.hdr_len, a->status, a->text, a->close);
            ends = must_close ? a->why : nullptr;
        } else if (const auto* l = std::get_if<Local>(&outcome)) {
            ends = co_await answer_for_policy(*ex, *l);
        } else {
            ends = co_await forward(*ex, std::get<Forward>(outcome));
        }
        if (ends) {
            why = ends;
            break;
        }
    }
    log::debug(dataplane::to_string(key_), ": session ends: ", why);
    finish();
}

awaitable<const char*> ClientSession::end_without_request(int st, const l7_msg& m)
{
    if (st == -1) {
        if (m.status == 408)
            co_await refuse(408, "request head not received in time\n", "request_timeout");
        co_return "timed out waiting for a request";
    }
    if (st == -3) {
        // The client is done sending (it may have half-closed after its
        // last request): a kernel response may still be on its way, and
        // must reach the client before our FIN.
        co_await drain_kernel_before_close();
        co_return "client closed";
    }
    if (st < 0)
        co_return "client read failed";
    co_await refuse(m.status ? m.status : 400,
                    m.error == L7_PE_HTTPS_TARGET ? "an https target, on a cleartext connection\n"
                                                  : "malformed request\n",
                    std::string("bad_request:") + parse_error_name(m.error));
    co_return "malformed request";
}

awaitable<const char*> ClientSession::answer_for_policy(RequestExchange& ex, const Local& local)
{
    consume(ex.m.hdr_len);
    bool drained = co_await discard_request_body(ex.m);
    const bool must_close = ex.close || !drained;
    policy::LocalResponse resp = local_response_for(*ex.route, ex.verdict, must_close);
    uint64_t n = co_await respond_local(resp);
    ex.record->finish(local.status, n);
    co_return must_close ? "answered by the policy, connection: close" : nullptr;
}

awaitable<UpstreamPtr> ClientSession::acquire_upstream(const RequestExchange& ex, const Forward& f,
                                                       size_t& endpoint, error_code& ec)
{
    UpstreamPtr up;
    for (size_t a = 0; a < f.attempts.size(); a++) {
        endpoint = f.attempts[a];
        up = co_await server_.pool().acquire((*f.pools)[endpoint], ec);
        if (up)
            break;
        log::info("route ", ex.route->name, ": upstream ", f.cluster->endpoints[endpoint].address.str(), ": ",
                  ec.message(), a + 1 < f.attempts.size() ? "; trying another endpoint" : "");
    }
    co_return up;
}

awaitable<const char*> ClientSession::forward(RequestExchange& ex, const Forward& f)
{
    const l7_msg& m = ex.m;
    const policy::Route& route = *ex.route;
    ExchangeRecord& x = *ex.record;
    error_code ec;
    size_t ei = f.attempts.front();
    UpstreamPtr up = co_await acquire_upstream(ex, f, ei, ec);
    if (!up) {
        int code = ec == errc::no_buffer_space ? 503
                   : ec == errc::timed_out      ? 504
                                                     : 502;
        x.set_reason(ec == errc::no_buffer_space ? "upstream_overflow"
                     : ec == errc::timed_out     ? "upstream_connect_timeout"
                                                 : "upstream_connect_failed");
        std::string text = "upstream unavailable: " + ec.message() + "\n";
        const bool must_close = co_await answer(x, m.hdr_len, code, text, ex.close_after_early_answer());
        co_return must_close ? "closing" : nullptr;
    }
    const uint32_t pool = (*f.pools)[ei];
    ActiveTicket active(server_.active_counts(), pool);
    x.set_endpoint(&f.cluster->endpoints[ei].address);

    // A client that waits for 100 Continue gets it from us: the request
    // body is read before the upstream's answer, which is then relayed.
    if ((m.flags & L7_MF_EXPECT_100) && m.body_kind != L7_BODY_NONE && in_len_ == m.hdr_len) {
        bool idle = co_await wait_kernel_idle();
        if (idle)
            co_await write_client("HTTP/1.1 100 Continue\r\n\r\n");
    }

    // timeout_ms (or daemon.request_timeout_ms) from here to the end of
    // the response
    const ExchangeTimeout timeout = ExchangeTimeout::whole(f.timeout);
    error_code wec;
    co_await asio::async_write(up->socket(), asio::buffer(f.head.data(), f.head.size()),
                               asio::redirect_error(use_awaitable, wec));
    consume(m.hdr_len);
    bool body_error = false;
    bool body_ok = false;
    if (!wec)
        body_ok = co_await forward_request_body(*up, m, body_error, timeout);
    if (!body_ok) {
        server_.pool().release(up, false);
        co_await answer(x, m.hdr_len, body_error ? 400 : 502,
                        body_error ? "malformed request body\n" : "upstream write failed\n", true);
        co_return "closing";
    }

    l7_resp_state start{};
    start.phase = L7_RESP_START;
    Relayed r = co_await pipe_response(*up, m.method == L7_M_HEAD, start, true, timeout, &route.response_headers);
    server_.health().on_response(pool, r.status ? r.status : 502);
    if (!r.ok && r.status == 504)
        x.set_reason("upstream_timeout");
    else if (!r.ok)
        x.set_reason("upstream_reset");
    if (r.ok || r.wrote)
        x.finish(r.status, r.bytes);
    if (r.ok && r.status == 101) {
        // a tunnel is the slow path's for good: nothing is published,
        // so the kernel never takes this connection back
        std::vector<char> pending(in_.data(), in_.data() + in_len_);
        in_len_ = 0;
        co_await tunnel(up, std::move(pending));
        server_.pool().release(up, false);
        co_return "closing";
    }
    // The request's Connection: close (or HTTP/1.0 without keep-alive)
    // went to the upstream too, which closes after answering: back in the
    // pool as IDLE, the data plane could redirect the next request into
    // that closing socket before the pool's watcher sees the FIN.
    server_.pool().release(up, r.ok && r.reusable && !ex.close);
    if (!r.ok) {
        if (!r.wrote)
            co_await answer(x, m.hdr_len, r.status ? r.status : 502, "upstream failed\n", true);
        co_return "closing";
    }
    // the last send published the answer; a response that ended
    // without one (no bytes after the last framing step) is published now
    if (answered_consumed_ != consumed_)
        publish(0, true);
    co_return (ex.close || r.close) ? "closing" : nullptr;
}

void ClientSession::relay(UpstreamPtr up, const l7_slot& snapshot)
{
    sock_users_++;
    unpark();
    asio::co_spawn(server_.io(), relay_coro(shared_from_this(), std::move(up), snapshot),
                   asio::detached);
}

awaitable<void> ClientSession::relay_coro(std::shared_ptr<ClientSession> self, UpstreamPtr up,
                                          l7_slot snapshot)
{
    const auto timeout = ExchangeTimeout::per_wait(server_.runtime()->policy().daemon.request_timeout);
    Relayed x = co_await pipe_response(*up, snapshot.resp.req_head, snapshot.resp, false, timeout, nullptr);
    server_.count_kernel_response(snapshot, x.status ? x.status : snapshot.resp.status,
                                  snapshot.resp.bytes + x.bytes);
    server_.pool().finish_relay(up, x.ok && x.reusable && !snapshot.resp.close_after);
    publish(0, false);  // every relayed byte, before the kernel may take the next request
    kernel_done();
    if (!x.ok || x.close || snapshot.resp.close_after)
        close_after_response();
    release_socket();
}

void ClientSession::kernel_failed(int status, const l7_slot& snapshot)
{
    log::debug(dataplane::to_string(key_), ": kernel exchange failed (", status, ", ",
               snapshot.resp.bytes, " response bytes sent)");
    auto self = shared_from_this();
    sock_users_++;  // until the session ends
    unpark();
    asio::co_spawn(server_.io(), [self, status, snapshot]() -> awaitable<void> {
        if (snapshot.resp.bytes == 0) {
            std::string response = make_response(status, "upstream failed\n", true);
            self->publish(response.size(), false);
            bool wrote = co_await self->write_client(response);
            self->server_.count_kernel_response(snapshot, status, wrote ? response.size() : 0);
        } else {
            // the client got the head and part of the body, then the close
            self->server_.count_kernel_response(snapshot, snapshot.resp.status, snapshot.resp.bytes);
        }
        self->kernel_done();
        self->closing_ = true;
        self->finish();
    }, asio::detached);
}

void ClientSession::kernel_until_close()
{
    kernel_done();
    close_after_response();
}

void ClientSession::close_after_response()
{
    log::debug(dataplane::to_string(key_), ": closing after the response");
    // FIN follows whatever is queued; the client reads the response first
    closing_ = true;
    unpark();
    error_code ig;
    sock_.shutdown(tcp::socket::shutdown_send, ig);
}

}  // namespace l7fast::proxy
