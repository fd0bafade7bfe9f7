// Test-only fault injection for the data-plane load path.
//
// The fault tests (tests/e2e/test_faults.py) need failures that a healthy
// test machine does not produce on demand: a verifier that rejects a
// program, a kernel where map creation is refused for lack of locked
// memory, a connection table that fills up. L7FAST_TEST_FAULT, a
// comma-separated list, asks for them; it is read only when set, and a
// daemon that sees it says so in its log at start. Packaged units never set it.
//
//   verifier-reject  l7_req_msg is loaded as an SK_SKB program: its sk_msg
//                    context accesses and helpers are refused by this
//                    kernel's verifier, for real, and the whole load fails
//                    the way an incompatible kernel would make it fail.
//   memlock          the load fails with EPERM before any map exists, as
//                    BPF_MAP_CREATE does on kernels before 5.11 when
//                    RLIMIT_MEMLOCK is too small (5.11+ charge BPF memory
//                    to the memory cgroup and ignore RLIMIT_MEMLOCK, so a
//                    low limit alone cannot make it fail here).
//   bench-raw        the benchmark's ceiling (scripts/bench, l7fast-raw):
//                    the data plane sends every request of a connection to
//                    an idle connection of the first kernel route's first
//                    endpoint, and responses back, with no parsing,
//                    matching, framing or counting (bpf cfg_raw). It
//                    enforces no policy.
//   map-full=N       l7_conns holds N local and N remote clients instead
//                    of L7_MAX_CONNS / 2 each (N a power of two <= 8), so
//                    the table really fills with N clients of each kind.
//   no-park-check    the slow path's tick never looks at parked sessions
//                    (ClientSession::check_parked), so a parked remote
//                    client's request wakes its session only through the
//                    kernel's L7_EV_WAKE: a test of that event cannot pass
//                    on the tick's fallback.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

struct l7fast_bpf;

namespace l7fast::dataplane {

struct TestFaults {
    bool verifier_reject = false;
    bool memlock = false;
    bool bench_raw = false;
    bool no_park_check = false;
    std::optional<uint32_t> conns_max;  // map-full=N
    std::string text;                   // the variable as given

    bool any() const { return verifier_reject || memlock || bench_raw || no_park_check || conns_max; }
};

// Parses L7FAST_TEST_FAULT once (unknown words are logged and ignored).
const TestFaults& test_faults();

// Applies the requested faults to an opened skeleton before it is loaded.
// Returns the error the load must fail with instead of loading (empty: go on).
std::string apply_test_faults(l7fast_bpf* skel);

// A map update the data plane depends on failed with `err` (errno): logs
// why, at most once per `map` and 10 seconds, naming what the failure
// means for the traffic (E2BIG: the table is full).
void note_map_update_failure(const char* map, int err, const char* consequence);

}  // namespace l7fast::dataplane
