// What the kernel's HS verifier (bpf/include/l7_jwtverify.h) is given from a
// policy's JWT verifiers: the HMAC keys for l7fast.ko's key table
// (dataplane::ModuleKeys) and, once the module holds them, the header
// entries of l7_jwt_headers that name their key ids. ProxyServer runs this
// on every start, reload and JWKS change; the differential test of the
// kernel's verifier (tests/kernel) runs the same on its own harness.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "auth/Jwt.hpp"
#include "dataplane/ModuleKeys.hpp"
#include "dataplane/Tables.hpp"

namespace l7fast::proxy {

// The HMAC keys of every provider, for the algorithms it accepts, in
// provider order; algs[i] is keys[i]'s. The secrets are wiped with the set.
struct ModuleKeySet {
    std::vector<dataplane::ModuleKey> keys;
    std::vector<auth::Alg> algs;

    ModuleKeySet() = default;
    ModuleKeySet(const ModuleKeySet&) = delete;
    ModuleKeySet& operator=(const ModuleKeySet&) = delete;
    ModuleKeySet(ModuleKeySet&&) = default;
    ModuleKeySet& operator=(ModuleKeySet&&) = default;
    ~ModuleKeySet() { dataplane::wipe(keys); }
};

// `verifiers` by provider index (null: a provider that did not build).
ModuleKeySet module_keys_of(const std::vector<std::shared_ptr<auth::Verifier>>& verifiers);

struct KernelHeaders {
    std::vector<dataplane::JwtHeaderEntry> entries;
    size_t groups = 0;    // (provider, kid, alg) groups the kernel verifies
    size_t skipped = 0;   // groups left to user space: a key the module lacks, or too many keys

    // l7_jwt_kids: the kids of the providers' keys, for headers the kernel
    // scans, within a generation's half of the map
    std::vector<dataplane::JwtKidEntry> kids;
    size_t complete = 0;  // providers whose every kid is there (an "all" entry each)
};

// The header entries for the keys `set` installed with ids `ids`
// (ModuleKeys::ids() of that install): one group per (provider, kid, alg),
// only when the module holds every key of it (the reference tries them all)
// and they are at most L7_JWT_HDR_KEYS; its header forms are
// auth::kernel_header_segments'.
//
// And the kids: for each provider, each kid of its keys (Verifier::keys(),
// every algorithm: the reference looks a key up by kid, then by alg) with,
// per algorithm, L7_JK_VERIFY and the ids of every key of that kid and alg
// when they are HMAC keys the module holds, at most L7_JWT_HDR_KEYS;
// L7_JK_MISMATCH when the kid has no key of that alg; else L7_JK_USER.
// Then the provider's "all" entry when every kid is there (none over
// L7_JWT_MAX_KID bytes, room in the generation's half of l7_jwt_kids).
KernelHeaders kernel_header_entries(const ModuleKeySet& set, const std::vector<int32_t>& ids,
                                    const std::vector<std::shared_ptr<auth::Verifier>>& verifiers);

}  // namespace l7fast::proxy
