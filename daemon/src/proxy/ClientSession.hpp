// One client connection accepted by l7fastd: reads what the data plane
// passes to the slow path, answers it with the reference policy, and
// finishes kernel exchanges the data plane hands over.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/Asio.hpp"
#include "common/Fd.hpp"
#include "dataplane/Abi.hpp"
#include "dataplane/Dataplane.hpp"
#include "config/Policy.hpp"
#include "semantics/Responses.hpp"
#include "proxy/Deadline.hpp"
#include "proxy/Http.hpp"
#include "proxy/UpstreamPool.hpp"

namespace l7fast::proxy {

class ExchangeRecord;
class ProxyServer;
struct PolicyRuntime;
struct RequestExchange;
struct Local;
struct Forward;

// How long the slow path waits on an upstream exchange: a request it
// forwards has one deadline for the whole exchange (the route's timeout_ms
// or daemon.request_timeout_ms); a response the data plane hands over is
// relayed with the request timeout for each wait, since the kernel already
// spent part of the exchange.
struct ExchangeTimeout {
    static ExchangeTimeout whole(std::chrono::milliseconds d)
    {
        return {std::chrono::milliseconds(0), std::chrono::steady_clock::now() + d};
    }
    static ExchangeTimeout per_wait(std::chrono::milliseconds d) { return {d, {}}; }
    // the time to arm for the next wait (at least 1 ms)
    std::chrono::milliseconds next() const;

    std::chrono::milliseconds each{0};
    std::chrono::steady_clock::time_point until{};
};

// How a session and the data plane share a connection (an invalid `ref`:
// the data plane does not know it).
struct SessionConn {
    dataplane::ConnRef ref;
    bool remote = false;  // the daemon's socket is the data plane's (SK_SKB)
    bool adopted = false; // from a previous l7fastd (restart): it published counts
};

class ClientSession : public std::enable_shared_from_this<ClientSession> {
public:
    // A connection adopted from a previous l7fastd resumes the counts that
    // daemon published (l7_conn_sync).
    ClientSession(ProxyServer& server, tcp::socket sock, const l7_conn_key& key,
                  const policy::SocketAddress& listener, SessionConn conn);
    void start();
    const SessionConn& conn() const { return conn_; }

    // Kernel exchanges the data plane could not finish.
    void relay(UpstreamPtr up, const l7_slot& snapshot);
    void kernel_failed(int status, const l7_slot& snapshot);
    void kernel_until_close();
    void close_after_response();

    // A parked session (park()) waits again in asio: the kernel passed it
    // bytes (L7_EV_WAKE); its client hung up or its socket failed
    // (ParkSet); check_parked(), each tick, for a wake-up the event ring
    // lost.
    void wake();
    void hangup();
    void check_parked();
    // Each tick: a session that stopped parking because only the slow path
    // served its connection parks again once the kernel serves it.
    void check_unparked();

private:
    // What relaying one upstream response to the client came to
    // (pipe_response).
    struct Relayed {
        bool ok = false;        // response completely forwarded
        bool close = false;     // connection must close afterwards
        bool reusable = false;  // upstream connection may be pooled again
        bool wrote = false;     // something was written to the client
        int status = 0;
        uint64_t bytes = 0;
    };

    // `self` keeps the session alive from the moment the coroutine is
    // created: it may not run before the caller's references are gone.
    awaitable<void> serve(std::shared_ptr<ClientSession> self);
    // The mux loop: a request's head read, analysed (proxy/RequestAnalysis),
    // its exchange done, until one ends the connection.
    awaitable<void> run(std::shared_ptr<ClientSession> self);
    // The exchanges run() dispatches to return why the connection ends
    // after them (the session's debug line), or null when it goes on.
    // A read that brought no request (read_request_head's `st`, a parse
    // error or a negative code): a timeout's 408, a malformed head's
    // refusal, a kernel response still owed to a client that closed.
    awaitable<const char*> end_without_request(int st, const l7_msg& m);
    // The policy's answer (a JWT, RBAC or rate-limit refusal, a direct
    // response), after the request's body is dropped when that keeps the
    // connection open.
    awaitable<const char*> answer_for_policy(RequestExchange& ex, const Local& local);
    // A forwarded request: an upstream connection, 100 Continue, the head
    // and body, the response relayed (a tunnel after 101), the connection
    // back in the pool, the answer published.
    awaitable<const char*> forward(RequestExchange& ex, const Forward& f);
    // A connection to f's first endpoint, else to the next of f.attempts
    // after each connect failure; `endpoint`: the last one tried, `ec` why
    // it failed (null result).
    awaitable<UpstreamPtr> acquire_upstream(const RequestExchange& ex, const Forward& f, size_t& endpoint,
                                            error_code& ec);
    awaitable<int> wait_first_byte(std::chrono::milliseconds idle);
    // wait_first_byte's two ways to wait for at most `left`: 1 when a read
    // would return at once (bytes, EOF, an error), 0 when the wait must be
    // looked at again (the timer, an unpark for another user of the
    // socket), -2 when it failed.
    awaitable<int> wait_readable(std::chrono::milliseconds left);
    awaitable<int> wait_parked(std::chrono::milliseconds left);
    // A remote client's socket leaves asio's epoll set while the session
    // waits for the client's next request (see ParkSet). False when it may
    // not: the kernel passed bytes the session has not read, another
    // coroutine uses the socket, the connection is closing.
    bool park();
    // Back into asio's epoll set, before anything uses sock_.
    void unpark();
    // The end of a relay's use of sock_ (sock_users_).
    void release_socket();
    bool passed_unread(l7_conn_sync* sy) const;
    bool kernel_served_since_park(l7_conn_sync* sy) const;
    awaitable<int> read_request_head(l7_msg& m);
    awaitable<bool> wait_kernel_idle();
    awaitable<bool> write_client(std::string_view data);
    // Answers the client itself (after any kernel response in flight, as
    // one slow-path answer); returns the bytes written. A HEAD request gets
    // the head only.
    awaitable<uint64_t> respond(int status, std::string_view text, bool close);
    // l7fast's own answer to a request it will not handle (malformed, an
    // expectation or method it does not support, a head that never came):
    // counted by reason (l7fast_requests_refused_total), sampled into the
    // access log with that reason, and the connection closes. `method` and
    // `target` are what is known of the request ("" when not).
    awaitable<void> refuse(int status, std::string_view text, std::string reason, std::string_view method = {},
                           std::string_view target = {});
    // l7fast's own answer to the request of exchange `x` (a plain-text
    // `status`), which then ends; the request's head (`head_len` bytes) is
    // consumed first unless the connection closes after the answer (its
    // body, if any, is not read). Returns `close`.
    awaitable<bool> answer(ExchangeRecord& x, size_t head_len, int status, std::string_view text, bool close);
    awaitable<uint64_t> respond_local(const policy::LocalResponse& r);
    // Reads and drops the body of a request l7fast answers itself, when it
    // is small and already on its way; false: the connection must close
    // after the answer instead (the client may wait for 100 Continue, the
    // body is large, malformed or slow).
    awaitable<bool> discard_request_body(const l7_msg& m);
    awaitable<bool> forward_request_body(UpstreamConn& up, const l7_msg& m, bool& body_error,
                                         ExchangeTimeout timeout);
    // `response_mutation`: applied to the final response head (the route's
    // response_headers); null for kernel exchanges the daemon finishes.
    awaitable<Relayed> pipe_response(UpstreamConn& up, bool req_head, l7_resp_state start,
                                      bool wait_kernel, ExchangeTimeout timeout,
                                      const policy::HeaderMutation* response_mutation);
    awaitable<void> tunnel(UpstreamPtr up, std::vector<char> pending);
    awaitable<void> relay_coro(std::shared_ptr<ClientSession> self, UpstreamPtr up,
                               l7_slot snapshot);
    void consume(size_t n);
    // Tells the data plane what this daemon is about to write: `final_bytes`
    // more, the last bytes of an answer, after everything written so far;
    // `answers_request`: they complete the answer to every request consumed
    // so far, so the kernel may take the next one once the client has them
    // (l7_conn_sync). Called before the write, never after: a client that
    // reads the answer and sends its next request finds it in the kernel.
    void publish(size_t final_bytes, bool answers_request);
    awaitable<void> drain_kernel_before_close();
    // The data plane's kernel response to this client is over (the daemon
    // finished it).
    void kernel_done();
    void finish();

    ProxyServer& server_;
    tcp::socket sock_;
    l7_conn_key key_;
    policy::SocketAddress listener_;
    SessionConn conn_;
    l7_conn_sync* sync() const;     // shared with the kernel; null when untracked
    uint64_t kernel_done_ns_ = 0;   // CLOCK_MONOTONIC: the last kernel exchange the daemon ended
    std::vector<char> in_;          // bytes read from the client, not yet used
    size_t in_len_ = 0;
    // Counted modulo 2^32, as the kernel compares them: bytes of the request
    // stream consumed, the part of it that is answered, bytes written.
    uint32_t consumed_ = 0;
    uint32_t answered_consumed_ = 0;
    uint32_t written_ = 0;
    bool closing_ = false;
    bool finished_ = false;
    // parking (park()): the socket's descriptor while parked; the timer the
    // parked wait sleeps on
    Fd parked_;
    asio::steady_timer* park_timer_ = nullptr;
    unsigned sock_users_ = 0;   // relays and failure answers writing to sock_
    bool park_failed_ = false;  // park() could not: never again
    unsigned slow_parks_ = 0;   // parks in a row that only slow-path bytes ended
    uint64_t park_done_ns_ = 0; // l7_conn_sync.k_done_ns when it last parked
    bool in_park_set_ = false;  // added to the server's ParkSet (once)
    bool hung_up_ = false;      // the ParkSet reported a hang-up or an error
    bool wake_ready_ = false;   // unparked because a read would return at once
    bool in_wait_readable_ = false;
    bool repark_ = false;       // release_socket() or check_unparked() cancelled wait_readable
    bool head_request_ = false;  // the request being answered is HEAD
};

}  // namespace l7fast::proxy
