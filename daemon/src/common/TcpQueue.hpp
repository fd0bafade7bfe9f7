// What the kernel has queued on a TCP socket, for waits on data-plane bytes.
#pragma once

#include <cstdint>
#include <optional>

namespace l7fast {

// Bytes ever queued for sending on `fd`: acknowledged ones plus those still
// in its send queue (the count the data plane makes from struct tcp_sock:
// write_seq - snd_una + bytes_acked). nullopt when the kernel does not say.
std::optional<uint64_t> tcp_bytes_queued(int fd);

}  // namespace l7fast
