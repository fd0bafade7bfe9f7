// The sampled access log (daemon.access_log_sample): one line per logged
// exchange to stderr (the journal) at info level. The sample bounds the
// volume; a cap of lines per second bounds it again under a flood, and what
// the cap drops is counted and reported.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <span>

#include "l7fast_abi.h"
#include "semantics/Router.hpp"

namespace l7fast::proxy {

struct AccessEntry {
    std::string client;       // "ip:port" of the client
    std::string_view method;  // empty: not known (kernel path)
    std::string_view target;  // empty: not known (kernel path)
    std::string_view route;
    int status = 0;
    std::optional<uint64_t> bytes_in;  // request bytes; not known on the kernel path
    uint64_t bytes_out = 0;
    uint64_t latency_ns = 0;
    bool kernel = false;
    std::string_view reason;  // why l7fast answered as it did; empty: not known
    // JSON lines only (the text format keeps its fields): empty: not known
    std::string_view authority;  // the Host header (slow path)
    std::string_view cluster;
    std::string endpoint;        // upstream "ip:port"
    // The client's X-Request-Id (request_id_from), else empty: write() then
    // makes one up, so that every line has an id to quote.
    std::string request_id;
};

class AccessLog {
public:
    static constexpr uint32_t kMaxLinesPerSecond = 1000;
    static constexpr size_t kMaxTarget = 256;

    // daemon.access_log_format
    enum class Format { Text, Json };

    void set_sample(uint32_t n) { sample_ = n; }
    void set_format(Format f) { format_ = f; }
    uint32_t sample() const { return sample_; }
    // Counts one exchange of the slow path; true when it is to be logged.
    bool sampled() { return sample_ != 0 && seen_++ % sample_ == 0; }
    // Writes the line unless this second's cap is reached (then counts it).
    void write(const AccessEntry& e, std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now());
    uint64_t dropped() const { return dropped_; }

    // "access client=... method=GET target=\"/a\" route=r status=200 in=77
    // out=120 latency_us=85 path=user [reason=WHY] id=ID"; "-" for what is
    // not known.
    static std::string format(const AccessEntry& e);
    // One JSON object: {"time":"2026-12-02T06:50:00.123Z","type":"access",
    // "request_id":..., "client":..., "method":..., "authority":..., "target":..., "route":...,
    // "cluster":..., "endpoint":..., "status":200, "reason":..., "bytes_in":...,
    // "bytes_out":..., "duration_us":..., "path":"kernel"|"user"}; null for
    // what is not known. Strings are cut as targets are and escaped as JSON
    // (a byte outside printable ASCII as \u00XX).
    static std::string format_json(const AccessEntry& e, std::chrono::system_clock::time_point when);
    // The id of a request that sent one: the first X-Request-Id field's
    // value when it is 1..kMaxRequestId bytes of visible ASCII other than `"`
    // and `\` (so that it reads as one token in the text format); else empty.
    static constexpr size_t kMaxRequestId = 128;
    static std::string request_id_from(std::span<const policy::HeaderField> fields);
    // 16 random hex digits.
    static std::string make_request_id();

    // The target bounded to kMaxTarget bytes, `"` `\` and bytes outside
    // 0x20..0x7e escaped (\" \\ \xHH), "..." appended when cut.
    static std::string escape_target(std::string_view t);

private:
    uint32_t sample_ = 0;
    Format format_ = Format::Text;
    uint64_t seen_ = 0;
    std::chrono::steady_clock::time_point window_{};
    uint32_t in_window_ = 0;
    uint64_t dropped_ = 0, dropped_in_window_ = 0;
};

// "ip:port" of a connection's client ("[ip6]:port").
std::string client_address(const l7_conn_key& k);

}  // namespace l7fast::proxy
