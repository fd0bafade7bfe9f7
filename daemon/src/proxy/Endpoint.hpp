// A policy address as an Asio endpoint: the one conversion for every socket
// l7fastd opens to an address of the policy (upstream pools, health checks,
// the metrics listener).
#pragma once

#include <sys/socket.h>

#include <cstring>

#include "common/Asio.hpp"
#include "config/Policy.hpp"

namespace l7fast::proxy {

inline tcp::endpoint to_endpoint(const policy::SocketAddress& a)
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

}  // namespace l7fast::proxy
