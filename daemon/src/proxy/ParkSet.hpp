// Remote clients' sockets while their sessions wait for a request outside
// asio's epoll set (ClientSession::park): a second epoll set that reports
// only hang-ups and errors, itself watched by asio.
//
// Why: the psock wakes a socket's readers after every SK_SKB verdict, also
// for the bytes the kernel answered or forwarded (sk_psock_verdict_data_ready),
// so a session waiting in asio for its client's next request would wake
// once per request the kernel serves. epoll drops a wake-up whose events
// are not in the ones asked for (ep_poll_callback), and a socket's data
// wake-ups carry EPOLLIN: in this set they never reach the daemon. What the
// daemon needs from a parked socket arrives otherwise: bytes passed to the
// slow path as a data-plane event (L7_EV_WAKE), a FIN as the state change
// (a wake-up without events, polled again here: EPOLLRDHUP), a reset as
// EPOLLERR.
#pragma once

#include <cstdint>
#include <functional>

#include "common/Asio.hpp"
#include "common/Fd.hpp"

namespace l7fast::proxy {

class ParkSet {
public:
    // `on_hangup(tag)`: the socket added with `tag` reported a hang-up or an
    // error (edge-triggered: once per event, parked or not).
    ParkSet(asio::io_context& io, std::function<void(uint64_t)> on_hangup);
    ParkSet(const ParkSet&) = delete;
    ParkSet& operator=(const ParkSet&) = delete;

    // Watches `fd` (once per socket; it stays in the set until remove() or
    // its last descriptor is closed). False (errno set) when it cannot.
    bool add(int fd, uint64_t tag);
    void remove(int fd);
    bool ok() const { return watch_.is_open(); }

private:
    void arm();

    asio::posix::stream_descriptor watch_;
    std::function<void(uint64_t)> on_hangup_;
};

}  // namespace l7fast::proxy
