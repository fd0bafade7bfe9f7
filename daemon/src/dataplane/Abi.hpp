// C++ view of the data plane's shared types (bpf/include/l7fast_abi.h) and
// the conversions between sockets and connection keys.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
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

// An entry of l7_buckets (a rate-limit bucket the kernel and the slow path
// share; bpf/include/l7_bucket.h) as BucketTable leases it: `state` is the
// mmapped entry, `id` its index (l7_route.bucket); `lease` frees the id
// when its last copy goes.
// A keyed limit's lease also has the kernel's table of its keys' buckets
// (l7_rate_keys[id]): `take_key` takes a token from a key's bucket there
// (l7_rate_take_user), returning l7_bucket_take()'s answer or nullopt when
// the kernel refused the call.
struct SharedBucket {
    uint32_t id = 0;
    __u64* state = nullptr;
    std::shared_ptr<void> lease;
    std::function<std::optional<uint64_t>(const l7_rate_key&, uint32_t rate, uint32_t burst)> take_key;
};

// One route's counters, as l7_route_stats holds them: the data plane's per
// generation and CPU, the slow path's per route.
struct RouteCounters {
    uint64_t requests = 0;
    uint64_t status[L7_STATUS_CLASSES] = {};  // l7_status_class
    // of `status`, the codes L7_KERNEL_CODES lists (l7_code_slot)
    uint64_t codes[L7_N_KERNEL_CODES] = {};
    uint64_t bytes_in = 0, bytes_out = 0;
    uint64_t latency[L7_LAT_BUCKETS] = {};  // l7_lat_bucket
    uint64_t direct_responses = 0;          // of `requests`: answered with the route's direct response
    uint64_t rbac_denied = 0;               // of `requests`: answered with the route's RBAC denial
    uint64_t jwt_missing = 0;               // of `requests`: answered 401, no token
    uint64_t jwt_invalid = 0;               // of `requests`: answered 401, an empty or too large token
    uint64_t rate_limited = 0;              // of `requests`: answered 429 (the route's rate limit)

    RouteCounters& operator+=(const RouteCounters& o);
    // One response: its status, bytes sent to the client and the time since
    // the request arrived.
    void add_response(int status, uint64_t bytes, uint64_t latency_ns);
};

}  // namespace l7fast::dataplane
