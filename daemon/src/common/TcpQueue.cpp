#include "common/TcpQueue.hpp"

// the kernel's struct tcp_info (glibc's netinet/tcp.h lacks tcpi_bytes_acked)
#include <linux/in.h>
#include <linux/sockios.h>
#include <linux/tcp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

namespace l7fast {

std::optional<uint64_t> tcp_bytes_queued(int fd)
{
    tcp_info ti{};
    socklen_t len = sizeof(ti);
    int outq = 0;
    if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0 ||
        len < offsetof(tcp_info, tcpi_bytes_acked) + sizeof(ti.tcpi_bytes_acked) ||
        ::ioctl(fd, SIOCOUTQ, &outq) != 0)
        return std::nullopt;
    return ti.tcpi_bytes_acked + static_cast<uint64_t>(outq);
}

}  // namespace l7fast
