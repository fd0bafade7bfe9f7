// The daemon's one clock for timestamps it compares with the data plane's.
#pragma once

#include <time.h>

#include <cstdint>

namespace l7fast {

// CLOCK_MONOTONIC (what bpf_ktime_get_ns() reads, and std::steady_clock on
// Linux) in nanoseconds; never 0, which stamps use for "unset".
inline uint64_t monotonic_ns()
{
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    const uint64_t ns = static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
    return ns ? ns : 1;
}

inline uint64_t monotonic_usec() { return monotonic_ns() / 1000; }

// Wall-clock seconds since the Unix epoch, for what operators read as dates
// (metrics' *_timestamp_seconds).
inline uint64_t unix_seconds()
{
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    return static_cast<uint64_t>(ts.tv_sec);
}

}  // namespace l7fast
