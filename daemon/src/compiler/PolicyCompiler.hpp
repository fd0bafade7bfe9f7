// Turns a Policy into the contents of the data plane's tables for one
// generation, in the layouts of bpf/include/l7fast_abi.h, and decides for
// every route whether the kernel may act on it (placement).
//
// RBAC (bpf/lib/rbac.h): a route's rules go into bitmap space 1 when every
// condition of every rule is one the kernel evaluates exactly (method,
// path exact/prefix, header present/exact); otherwise the whole route is
// placed in user space with the rule's name in the reason. Header names and
// prefix lengths are shared with routes (routes get slots first), string
// conditions live in the same table under key.space = L7_SPACE_RULES.
//
// Soundness (docs/policy.md, "Placement"): the kernel ANDs one route set per
// dimension (listener, method, host, path, each match header) and takes the
// lowest route. Every condition the kernel cannot evaluate exactly is
// compiled as "any" for its dimension (a superset) and its route is placed
// in user space: if such a route is the first candidate the slow path
// decides with Router, so first-match order stays exact. A kernel-placed
// route that the kernel picks is therefore always the route Router picks.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "l7fast_abi.h"
#include "config/Policy.hpp"

namespace l7fast::policy {

struct RoutePlacement {
    bool kernel = false;
    std::string reason;  // why not in the kernel; empty when kernel
    // a kernel route with RBAC whose denial the kernel sends (l7_route.resp_deny)
    bool kernel_denials = false;
    // a kernel route with JWT whose 401s (no token, an empty or too large
    // one) the kernel sends (l7_route.resp_no_token, resp_bad_token)
    bool kernel_unauthorized = false;
    // a kernel route with a rate limit whose 429 the kernel sends
    // (l7_route.resp_limited)
    bool kernel_limited = false;
};

struct ListenerPlacement {
    bool kernel = false;  // has an entry in the data plane's listener table
    std::string reason;
};

struct CompiledTables {
    uint64_t seed = 0;  // the seed the string keys were hashed with (meta.seed)
    l7_gen_meta meta{};
    std::vector<l7_bitmap> bitmaps;                              // L7_BMI_PER_SPACE (space 0), index L7_BMI_*
    // RBAC rule sets (space 1), index L7_BMI_* (no listener sets): bit i is
    // rule i of the generation; a kernel route's rules are the bits
    // [rule_first, rule_first + rule_count) of l7_route, in policy order
    std::vector<l7_bitmap> rule_bitmaps;
    uint32_t n_rules = 0;                                        // rule bits in use
    std::vector<std::pair<l7_match_key, l7_match_val>> strings;  // key.gen = 0: the installer sets it
    std::vector<l7_route> routes;        // min(routes, L7_MAX_ROUTES); stats_id = route index
    std::vector<l7_cluster> clusters;    // min(clusters, L7_MAX_CLUSTERS), index = Policy::clusters
    std::vector<l7_endpoint> endpoints;  // at most L7_MAX_ENDPOINTS
    // Ring-hash rings and Maglev tables of the clusters kernel routes use,
    // index l7_cluster.table; at most L7_MAX_LB_TABLES (~640 KiB each,
    // shared so that copying the tables stays cheap).
    std::vector<std::shared_ptr<const l7_lb_table>> lb_tables;
    // min(listeners, L7_MAX_LISTENERS), id = index in Policy::listeners
    std::vector<std::pair<l7_listener_key, l7_listener>> listeners;
    // per Policy::jwt_providers entry (at most L7_MAX_JWT_PROVIDERS): where
    // the kernel finds its token; max_token == 0 when no kernel-placed route
    // uses the provider (its tokens are then never cached)
    std::vector<l7_jwt_provider> jwt_providers;
    // per provider of jwt_providers: why the kernel does not verify its HS
    // tokens itself (l7_jwtverify.h); empty: it does wherever l7fast.ko's
    // kfuncs are callable and its keys installed (L7_JP_VERIFY)
    std::vector<std::string> jwt_verify_reason;
    // (route index, table) of every route with L7_RF_MUTATE, ascending
    std::vector<std::pair<uint32_t, l7_mutation>> mutations;
    // the answers the kernel sends: direct responses, RBAC denials, the
    // two 401s and the 429 of kernel routes, index l7_route.resp_direct /
    // resp_deny / resp_no_token / resp_bad_token / resp_limited (at most
    // L7_MAX_RESPONSES)
    std::vector<l7_response> responses;
    std::vector<RoutePlacement> placement;              // one per Policy::routes entry
    std::vector<ListenerPlacement> listener_placement;  // one per Policy::listeners entry
    // Things an operator may want to know that are not a route's placement,
    // e.g. a seed that was replaced because two strings collided.
    std::vector<std::string> notes;
};

// Stable pool id of an upstream address; nullopt when no pool is free.
using PoolIdFn = std::function<std::optional<uint32_t>(const SocketAddress&)>;

// The keyed string hash of l7_match keys; the default is the kernel's
// (l7_hash_str). Tests substitute a weak one to force collisions.
using StringHashFn = std::function<uint64_t(uint64_t seed, std::string_view bytes, bool lower)>;

// The l7_buckets entry of route i's rate limit (its slow-path limiter's
// SharedBucket); nullopt: none, the route's rate limit runs in user space.
using RateBucketFn = std::function<std::optional<uint32_t>(size_t route)>;

struct CompileOptions {
    StringHashFn string_hash;  // empty: the kernel's
    RateBucketFn rate_bucket;  // empty: every rate limit runs in user space
    // Seeds tried when two strings of one table collide on (kind, aux,
    // hash); after the last, colliding conditions go to the slow path.
    unsigned seed_attempts = 4;
};

// l7_match entries one generation may use: l7_maps.h sizes the map for two
// generations of 2 * L7_MAX_ROUTES each.
inline constexpr size_t kMaxMatchStrings = 2 * L7_MAX_ROUTES;

// The kernel HS verifier's part of a provider's l7_jwt_provider (flags,
// clock skew, issuer, audiences: bpf/include/l7_jwtscan.h). Returns why the
// kernel cannot verify the provider's tokens ("" when it can; then
// L7_JP_VERIFY is set).
std::string kernel_jwt_verify(const JwtProvider& provider, l7_jwt_provider& out);

// Never fails: what does not fit the kernel is placed in user space, with a
// reason. Deterministic for a given (policy, seed, pool ids).
CompiledTables compile(const Policy& policy, uint64_t seed, const PoolIdFn& pool_id,
                       const CompileOptions& options = {});

// The data plane's table for a request header mutation: with it the kernel
// (bpf/include/l7_mutate.h) writes exactly what mutate_request_head(head, m,
// forwarded) writes, where `forwarded` holds one header per name of
// `forwarded_names` (their lines, when a claim has a value, come from the
// kernel's token cache). nullopt and the reason when the table cannot say
// it: more than L7_MUT_MAX_REMOVE distinct names to remove (remove, set and
// forwarded names), a name longer than L7_MAX_HDR_NAME, more than
// L7_MUT_MAX_ADD bytes of set and add lines.
struct RequestMutationTable {
    std::optional<l7_mutation> table;
    std::string reason;
};
RequestMutationTable compile_request_mutation(const HeaderMutation& m,
                                              std::span<const std::string> forwarded_names = {});

// The kernel's method class of a method token (l7_method_id); L7_M_OTHER
// for any token without a class of its own.
l7_method kernel_method_class(std::string_view method);

}  // namespace l7fast::policy
