// C++ view of the data plane's shared types (bpf/include/l7fast_abi.h) and
// the conversions between sockets and connection keys.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <string>

#include "l7fast_abi.h"

namespace l7fast::dataplane {

// Key of a TCP connection seen from its active opener (see l7fast_abi.h).
// IPv4-mapped IPv6 addresses are normalised to IPv4, as the programs do.
l7_conn_key make_conn_key(const sockaddr_storage& client, const sockaddr_storage& server);

// Key of the connection `fd` belongs to; `fd_is_client` says whether fd is
// the active opener's end. False on getsockname/getpeername failure.
bool conn_key_of(int fd, bool fd_is_client, l7_conn_key* out);

std::string to_string(const l7_conn_key& k);

}  // namespace l7fast::dataplane
