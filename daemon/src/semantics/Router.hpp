// The reference semantics of route matching and upstream choice. The slow
// path routes with this; the data plane's tables (PolicyCompiler) must agree
// with it wherever the kernel decides, which the differential test checks.
// docs/policy.md ("Matching") is the prose version of this file.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "config/Policy.hpp"

namespace l7fast::policy {

struct HeaderField {
    std::string_view name;   // as received; compared case-insensitively
    std::string_view value;  // OWS already trimmed
};

// A parsed request, as both the kernel parser and the slow path see it.
struct RequestView {
    std::string_view method;               // token as received; case-sensitive
    std::string_view target;               // origin-form request-target, query included
    std::span<const HeaderField> headers;  // every field line in order, Host included
    uint32_t listener = 0;                 // index into Policy::listeners
    int client_family = 0;                 // AF_INET / AF_INET6; 0: unknown
    std::array<uint8_t, 16> client_ip{};   // IPv4 in the first 4 bytes, network order
};

// The verified payload of a JWT, as conditions and keys see it: each
// top-level member by name, with its values as text — a string as is, a
// number as its decimal text, true/false as "true"/"false", an array of
// strings element by element; other members (objects, null, mixed arrays)
// are present with no values.
struct Claims {
    std::map<std::string, std::vector<std::string>, std::less<>> members;
    bool has(std::string_view name) const { return members.find(name) != members.end(); }
    bool equals(std::string_view name, std::string_view value) const;
};

// The value a RequestKey names in this request, nullopt when the request has
// none: a header's first field line value, a cookie's value, the client
// address bytes (4 or 16; an IPv4-mapped IPv6 address gives 4), a claim's
// first value (needs `claims`).
std::optional<std::string> request_key(const RequestKey& key, const RequestView& request,
                                       const Claims* claims);

// What a route's path condition compares: the target up to the first '?'.
std::string_view request_path(std::string_view target);

// The value of the first `name=value` pair of the query (after the first
// '?', split on '&', split at the pair's first '='; a pair without '=' has
// an empty value), byte for byte; nullopt when no pair has that name.
std::optional<std::string_view> request_query_param(std::string_view target, std::string_view name);

// The value of the first cookie called `name` (case-sensitive) in the
// Cookie field lines, in order: each line is split on ';', each pair
// trimmed of spaces and tabs and split at its first '='; pairs without '='
// are skipped. The value is returned as sent (quotes included).
std::optional<std::string_view> request_cookie(std::span<const HeaderField> headers, std::string_view name);

class SafeRegex;

// A path_regex pattern compiled with the safe regex engine (SafeRegex.hpp):
// linear in the subject, whole-path matching.
class CompiledRegex {
public:
    // nullptr on error, with the reason in *why and the byte offset in the
    // pattern where it was found in *error_offset (either may be null).
    static std::shared_ptr<const CompiledRegex> compile(std::string_view pattern, std::string* why,
                                                        size_t* error_offset);
    bool full_match(std::string_view subject) const;
    // The DFA itself, for the compiler's kernel tables.
    const SafeRegex& safe_regex() const;

    struct Engine;
    explicit CompiledRegex(std::unique_ptr<Engine> engine);
    ~CompiledRegex();

private:
    std::unique_ptr<Engine> engine_;
};

// Whether every condition of `m` holds for the request, the listener scope
// aside: method, host, path, headers, query, source, then claims (with
// `claims` nullptr no claim condition holds). Route matching and RBAC rules
// share this.
bool conditions_hold(const RouteMatch& m, const RequestView& request, const Claims* claims);

// Whether one condition of `m` holds (a claim condition never holds
// without `claims`).
bool condition_holds(const RouteMatch& m, const ConditionRef& c, const RequestView& request, const Claims* claims);

// How one route was evaluated for a request, for `l7fastctl explain`: every
// condition of its match, evaluated whether or not an earlier one failed.
struct ConditionResult {
    ConditionRef ref;
    bool held = false;
};
struct RouteTrace {
    bool in_scope = true;         // the request's listener is one of the route's
    std::vector<ConditionResult> conditions;  // conditions_of() order
    bool claims_verified = false;  // the provider was asked (every other condition held)
    bool claims_present = false;   // ... and the request had a valid token
    bool matched = false;          // == Router::matches()
};

// The verified claims of the request's token for a provider, or nullptr
// when the request has no valid token for it; called at most once per
// route evaluation, and only when every other condition of the route holds.
using ClaimsLookup = std::function<const Claims*(const JwtProvider&)>;

// What a route's host condition compares: the first Host field's value
// without ":port" (an IPv6 literal keeps its brackets), lower-cased; nullopt
// without a Host field.
std::optional<std::string> request_host(std::span<const HeaderField> headers);

class Router {
public:
    // The Router owns the policy it evaluates, so the two cannot drift apart
    // across a reload.
    explicit Router(Policy policy);

    const Policy& policy() const { return policy_; }

    // Index in policy().routes of the first route that applies, or nullopt
    // (the slow path answers 404). CONNECT is never routed. A route with
    // claim conditions asks claims_for for its provider's verified claims;
    // without claims_for (or when it returns nullptr) such a route does not
    // apply.
    std::optional<uint32_t> route(const RequestView& request, const ClaimsLookup& claims_for = {}) const;

    // Whether routes[index] applies, ignoring the routes before it.
    bool matches(uint32_t index, const RequestView& request, const ClaimsLookup& claims_for = {}) const;

    // matches(), condition by condition (its `matched` is matches()'s
    // answer; claims_for is asked under the same rule).
    RouteTrace trace(uint32_t index, const RequestView& request, const ClaimsLookup& claims_for = {}) const;

    // Upstream choice, with the data plane's arithmetic (bpf/lib/select.h):
    // weights are cumulative and the choice is the first index whose
    // cumulative weight exceeds `random % total`.
    //  - index into route.clusters; a single cluster, or weights summing to
    //    0, always give the first one. nullopt for a route without clusters.
    static std::optional<size_t> choose_cluster(const Route& route, uint32_t random);
    //  - index into cluster.endpoints: weighted clusters use `random`,
    //    round-robin ones `rr_counter % endpoints` (the kernel's per-cluster
    //    counter). nullopt for a cluster without endpoints.
    static std::optional<size_t> choose_endpoint(const Cluster& cluster, uint64_t rr_counter, uint32_t random);

private:
    struct RouteScope {
        bool every_listener = true;
        std::vector<uint32_t> listeners;  // sorted, when !every_listener
        std::optional<size_t> jwt;  // the route's provider, in policy_.jwt_providers
    };

    Policy policy_;
    std::vector<RouteScope> scopes_;  // parallel to policy_.routes
};

}  // namespace l7fast::policy
