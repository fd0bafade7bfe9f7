#include "proxy/ParkSet.hpp"

#include <sys/epoll.h>

#include <cerrno>
#include <cstring>

#include "common/Log.hpp"

namespace l7fast::proxy {
namespace {

constexpr int kBatch = 64;

}  // namespace

ParkSet::ParkSet(asio::io_context& io, std::function<void(uint64_t)> on_hangup)
    : watch_(io), on_hangup_(std::move(on_hangup))
{
    Fd ep(::epoll_create1(EPOLL_CLOEXEC));
    if (!ep.valid()) {
        log::warning("parking remote clients: epoll_create1: ", std::strerror(errno),
                     "; the daemon wakes once per request on their connections");
        return;
    }
    error_code ec;
    watch_.assign(ep.get(), ec);
    if (ec) {
        log::warning("parking remote clients: ", ec.message(),
                     "; the daemon wakes once per request on their connections");
        return;
    }
    ep.release();
    arm();
}

bool ParkSet::add(int fd, uint64_t tag)
{
    if (!ok()) {
        errno = EBADF;
        return false;
    }
    epoll_event ev{};
    ev.events = EPOLLRDHUP | EPOLLET;  // EPOLLHUP and EPOLLERR always
    ev.data.u64 = tag;
    return ::epoll_ctl(watch_.native_handle(), EPOLL_CTL_ADD, fd, &ev) == 0;
}

void ParkSet::remove(int fd)
{
    if (ok())
        ::epoll_ctl(watch_.native_handle(), EPOLL_CTL_DEL, fd, nullptr);
}

void ParkSet::arm()
{
    watch_.async_wait(asio::posix::stream_descriptor::wait_read, [this](error_code ec) {
        if (ec)
            return;  // closed: the server is going away
        epoll_event evs[kBatch];
        int n;
        do {
            n = ::epoll_wait(watch_.native_handle(), evs, kBatch, 0);
            for (int i = 0; i < n; i++)
                on_hangup_(evs[i].data.u64);
        } while (n == kBatch);
        if (n < 0 && errno != EINTR)
            log::warning("parking remote clients: epoll_wait: ", std::strerror(errno));
        arm();
    });
}

}  // namespace l7fast::proxy
