// The limits of the policy format (docs/policy.md), in one table for the
// policy loader's files (PolicyLoader.cpp, Loader*.cpp, Load*.cpp): the
// value checks and the section readers both enforce them.
#pragma once

#include <cstddef>
#include <cstdint>

namespace l7fast::policy::loader {

inline constexpr size_t kMaxNameLength = 64;
inline constexpr int64_t kMaxWeight = 65535;        // weights travel as __u16 in l7_route
inline constexpr int64_t kMaxWeightSum = 65535;
inline constexpr int64_t kMaxTimeoutMs = 86'400'000;  // one day
inline constexpr int64_t kMinIngressBudget = 1024;
inline constexpr size_t kMaxHostLength = 253;        // RFC 1035 presentation form
inline constexpr size_t kMaxLabelLength = 63;
inline constexpr size_t kMaxRegexBytes = 1024;
inline constexpr size_t kMaxConditions = 64;         // per list: headers, query, claims
inline constexpr size_t kMaxSources = 256;           // CIDRs per match or rule
inline constexpr size_t kMaxMutations = 64;          // per list: remove, set, add, direct response headers
inline constexpr size_t kMaxFieldValueBytes = 4096;  // generated header values and condition values
inline constexpr size_t kMaxFieldNameBytes = 256;
inline constexpr size_t kMaxBodyBytes = 65536;       // direct responses and RBAC denials
inline constexpr size_t kMaxRbacRules = 256;
inline constexpr size_t kMaxClaimTextBytes = 1024;   // claim names, issuers, audiences, kids
inline constexpr size_t kMaxJwtKeys = 64;
inline constexpr size_t kMaxSecretBytes = 4096;
inline constexpr size_t kMaxForwardClaims = 32;
inline constexpr int64_t kMaxRate = 1'000'000;       // tokens per second, and burst
inline constexpr int64_t kMaxRateKeys = 1 << 20;
inline constexpr int64_t kMaxRingSize = 8'388'608;   // Envoy's maximum_ring_size bound
inline constexpr int64_t kMaxMaglevTableSize = 5'000'011;
inline constexpr int64_t kMaxConnectRetries = 16;
inline constexpr int64_t kMaxClockSkewS = 3600;
inline constexpr int64_t kMaxAccessLogSample = 1'000'000;
// active health checks and outlier detection (a cluster's health_check and
// outlier_detection tables)
inline constexpr size_t kMaxCheckPathBytes = 1024;
inline constexpr size_t kMaxCheckHostBytes = 255;
inline constexpr int64_t kMinCheckIntervalMs = 100;
inline constexpr int64_t kMaxCheckIntervalMs = 3'600'000;  // one hour
inline constexpr int64_t kMinCheckTimeoutMs = 10;
inline constexpr int64_t kMaxCheckTimeoutMs = 600'000;     // ten minutes
inline constexpr int64_t kMaxCheckThreshold = 100;
inline constexpr int64_t kMaxOutlierTrigger = 1000;
inline constexpr int64_t kMinEjectionMs = 100;
inline constexpr int64_t kMaxEjectionMs = 86'400'000;      // one day

}  // namespace l7fast::policy::loader
