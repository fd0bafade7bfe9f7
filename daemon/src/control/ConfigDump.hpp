// The effective configuration as one JSON document (D-Bus DumpConfig,
// `l7fastctl dump`): every listener, route (its full match, its actions in
// pipeline order, where it runs and why), cluster (its endpoints with their
// open connections now), JWT provider (without secrets: key ids and
// algorithms only) and daemon setting, with the generation and when it was
// applied. Structured, with stable keys (docs/l7fastctl.md), not summary
// strings.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "control/ControlApi.hpp"
#include "config/Policy.hpp"

namespace l7fast::control {

struct DumpFacts {
    uint64_t generation = 0;
    uint64_t applied_unix = 0;
    std::vector<RouteInfo> placement;  // per route, in order (RouteInfo::kernel, reason)
    // per endpoint address (SocketAddress::str()): its open connections now
    std::map<std::string, EndpointStats> endpoints;
};

std::string config_json(const policy::Policy& pol, const DumpFacts& facts);

// Any JSON document as indented text: "key: value" lines, nested objects
// indented by two spaces, array elements as "- " items. For `l7fastctl
// dump` without --json. Returns false (with *error) when text is not JSON.
bool render_json_as_text(const std::string& json, std::string* out, std::string* error);

}  // namespace l7fast::control
