// The one step every policy passes before it can run, with no daemon state:
// l7fastd runs it on start and on every reload, `l7fastctl check` runs it
// offline, so that check accepts exactly what a reload accepts. The loader
// (loader/PolicyLoader) has already checked the file; this builds and
// checks what needs more than the file: the JWT key sets (inline keys and
// JWKS files, read now), the ring/Maglev tables, the routes' references,
// the number of distinct upstream addresses. What needs the running daemon
// (listener and pool ids, the kernel's placement) the daemon adds after.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/Policy.hpp"
#include "loader/PolicyLoader.hpp"
#include "proxy/Pipeline.hpp"
#include "proxy/ProxyServer.hpp"

namespace l7fast::proxy {

// A runtime for `pol`, or nullptr with *error set (located where the
// provider, cluster or route is written). `previous` is the generation
// running now, whose rate-limit buckets carry over; `buckets` gives new
// limiters the kernel's (build_pipeline_state).
std::shared_ptr<PolicyRuntime> prepare_runtime(policy::Policy pol, const PolicyRuntime* previous,
                                               std::optional<policy::PolicyError>* error,
                                               const BucketSource& buckets = {});

// What `l7fastctl check` runs, as its caller: the loader on `file` and the
// drop-ins in `dropins`, then prepare_runtime. The result is the loader's,
// or prepare_runtime's error. A JWKS file the caller may not read (l7fastd
// reads it as root) is not an error: the key sets are then not checked,
// and a line in *warnings says so and what to do.
policy::PolicyLoadResult check_policy_files(const std::filesystem::path& file,
                                            const std::filesystem::path& dropins,
                                            std::vector<std::string>* warnings);

}  // namespace l7fast::proxy
