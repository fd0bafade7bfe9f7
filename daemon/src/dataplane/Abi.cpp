#include "dataplane/Abi.hpp"

#include <arpa/inet.h>

#include <cstddef>

#include <cstring>

#include "l7_common.h"

namespace l7fast::dataplane {

// The BPF side compiles the same header; these pin the layout on the C++
// side so an accidental change shows up at build time.
static_assert(sizeof(l7_conn_key) == 40);
static_assert(sizeof(l7_listener_key) == 20);
static_assert(sizeof(l7_bitmap) == L7_MAX_ROUTES / 8);
static_assert(sizeof(l7_match_key) == 16);
static_assert(sizeof(l7_route) % 8 == 0);
static_assert(sizeof(l7_slot) % 8 == 0);
static_assert(sizeof(l7_conn) % 8 == 0);
static_assert(sizeof(l7_conn_sync) == 32, "mmapped: the kernel's array stride");
static_assert(sizeof(l7_pool) % 8 == 0, "mmapped: the kernel's array stride");
static_assert(sizeof(l7_sk_ref) == 16);
static_assert(sizeof(l7_event) == 32);
static_assert(L7_SLOT_CHUNKS * L7_SLOT_CHUNK == L7_MAX_SLOTS);
static_assert(L7_SLOT_CHUNKS <= L7_NO_CHUNK, "chunk ids are __u16");
static_assert(L7_POOL_MAX_CHUNKS == 16, "l7_g_claim masks chunk positions with 15");
static_assert((L7_CONNS_LOCAL & (L7_CONNS_LOCAL - 1)) == 0, "sockops masks local indexes");
static_assert(sizeof(l7_cluster) % 8 == 0);
static_assert(sizeof(l7_mutation) % 8 == 0);
static_assert(sizeof(l7_response) % 8 == 0);
static_assert(sizeof(l7_jwt_key) == 16);
static_assert(sizeof(l7_jwt_entry) % 8 == 0);
static_assert(sizeof(l7_jwt_provider) % 8 == 0);
static_assert(sizeof(l7_lb_table) % 8 == 0);
static_assert(L7_MAX_RULES == L7_MAX_ROUTES, "rules and routes share the bitmap width");
#define L7_COUNT_CODE(i, code) +1
static_assert(0 L7_KERNEL_CODES(L7_COUNT_CODE) == L7_N_KERNEL_CODES, "L7_KERNEL_CODES lists L7_N_KERNEL_CODES codes");
#undef L7_COUNT_CODE

namespace {

struct IpPort {
    uint16_t family = 0;
    uint32_t ip[4] = {};
    uint16_t port = 0;
};

IpPort split(const sockaddr_storage& ss)
{
    IpPort r;
    if (ss.ss_family == AF_INET) {
        const auto& sin = reinterpret_cast<const sockaddr_in&>(ss);
        r.family = AF_INET;
        r.ip[0] = sin.sin_addr.s_addr;
        r.port = ntohs(sin.sin_port);
    } else if (ss.ss_family == AF_INET6) {
        const auto& sin6 = reinterpret_cast<const sockaddr_in6&>(ss);
        r.family = AF_INET6;
        std::memcpy(r.ip, &sin6.sin6_addr, 16);
        r.port = ntohs(sin6.sin6_port);
        if (IN6_IS_ADDR_V4MAPPED(&sin6.sin6_addr)) {
            r.family = AF_INET;
            r.ip[0] = r.ip[3];
            r.ip[1] = r.ip[2] = r.ip[3] = 0;
        }
    }
    return r;
}

}  // namespace

l7_conn_key make_conn_key(const sockaddr_storage& client, const sockaddr_storage& server)
{
    l7_conn_key k{};
    IpPort c = split(client), s = split(server);
    k.family = c.family;
    std::memcpy(k.client_ip, c.ip, sizeof(k.client_ip));
    std::memcpy(k.server_ip, s.ip, sizeof(k.server_ip));
    k.client_port = c.port;
    k.server_port = s.port;
    return k;
}

bool conn_key_of(int fd, bool fd_is_client, l7_conn_key* out)
{
    sockaddr_storage local{}, peer{};
    socklen_t ll = sizeof(local), pl = sizeof(peer);
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &ll) != 0 ||
        ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &pl) != 0)
        return false;
    *out = fd_is_client ? make_conn_key(local, peer) : make_conn_key(peer, local);
    return true;
}

std::string to_string(const l7_conn_key& k)
{
    char a[INET6_ADDRSTRLEN] = {}, b[INET6_ADDRSTRLEN] = {};
    inet_ntop(k.family, k.client_ip, a, sizeof(a));
    inet_ntop(k.family, k.server_ip, b, sizeof(b));
    std::string fmt = k.family == AF_INET6 ? "[%s]:%u" : "%s:%u";
    char out[128];
    std::snprintf(out, sizeof(out), (fmt + "->" + fmt).c_str(), a, k.client_port, b, k.server_port);
    return out;
}

RouteCounters& RouteCounters::operator+=(const RouteCounters& o)
{
    requests += o.requests;
    for (int i = 0; i < L7_STATUS_CLASSES; i++)
        status[i] += o.status[i];
    for (int i = 0; i < L7_N_KERNEL_CODES; i++)
        codes[i] += o.codes[i];
    bytes_in += o.bytes_in;
    bytes_out += o.bytes_out;
    for (int i = 0; i < L7_LAT_BUCKETS; i++)
        latency[i] += o.latency[i];
    direct_responses += o.direct_responses;
    rbac_denied += o.rbac_denied;
    jwt_missing += o.jwt_missing;
    jwt_invalid += o.jwt_invalid;
    rate_limited += o.rate_limited;
    return *this;
}

void RouteCounters::add_response(int st, uint64_t bytes, uint64_t latency_ns)
{
    const uint32_t s = static_cast<uint32_t>(st < 0 ? 0 : st);
    status[l7_status_class(s)]++;
    if (const uint32_t c = l7_code_slot(s); c < L7_N_KERNEL_CODES)
        codes[c]++;
    bytes_out += bytes;
    latency[l7_lat_bucket(latency_ns) & (L7_LAT_BUCKETS - 1)]++;
}

}  // namespace l7fast::dataplane
