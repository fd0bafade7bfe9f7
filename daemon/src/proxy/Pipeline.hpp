// The slow path's request pipeline (docs/policy.md: a route's pipeline runs
// match, JWT, RBAC, rate limit, then a direct response or forwarding with
// the header mutations), as pure functions over one policy generation and
// one parsed request. ClientSession does the I/O around it; keeping the
// decisions here is what lets unit tests cover them without sockets.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "auth/Jwt.hpp"
#include "dataplane/Abi.hpp"
#include "lb/HashBalancer.hpp"
#include "config/Policy.hpp"
#include "loader/PolicyLoader.hpp"
#include "proxy/RateLimiter.hpp"
#include "semantics/Responses.hpp"
#include "semantics/Router.hpp"

namespace l7fast::proxy {

struct PolicyRuntime;

// The client address of a connection as RequestView carries it: AF_INET
// with 4 bytes (an IPv4-mapped IPv6 address counts as the IPv4 address it
// maps), or AF_INET6 with 16.
void set_client_address(policy::RequestView& view, const l7_conn_key& key);

// Builds what a policy generation needs per request and must not build per
// request: one JWT verifier per provider (keys and JWKS files loaded now, so
// a bad key set fails the reload, not requests), the ring/Maglev table of
// every ring_hash/maglev cluster, and a rate limiter per route with a
// rate_limit. A route whose name and rate_limit are unchanged from
// `previous` keeps previous's limiter, buckets included: a reload does not
// hand everyone a fresh budget. Returns the first error, located where the
// provider, cluster or route is written (proxy/Prepare.hpp runs this).
// `buckets`, when given, hands the new limiter of a route with a keyless
// rate limit the kernel's bucket to share (the data plane's l7_buckets), and
// that of a limit keyed by a header or the source address also the kernel's
// table of its keys' buckets (`max_keys` of them: l7_rate_keys); a route
// without one is rate-limited in user space only.
using BucketSource = std::function<std::optional<dataplane::SharedBucket>(std::optional<uint32_t> max_keys)>;
std::optional<policy::PolicyError> build_pipeline_state(PolicyRuntime& rt, const PolicyRuntime* previous,
                                                        const BucketSource& buckets = {});

// The JWT results of one request, verified at most once per provider and
// only when a stage asks (a route's claim conditions while matching, then
// the matched route's JWT stage).
class RequestAuth {
public:
    RequestAuth(const PolicyRuntime& rt, const policy::RequestView& view,
                std::chrono::system_clock::time_point now);

    const auth::Result& result(size_t provider);
    // The verified claims, nullptr when the request has no valid token.
    const policy::Claims* claims(size_t provider);
    // For Router::route.
    policy::ClaimsLookup lookup();

private:
    const PolicyRuntime& rt_;
    const policy::RequestView& view_;
    std::chrono::system_clock::time_point now_;
    std::vector<std::optional<auth::Result>> results_;
};

// What the matched route does with the request after its JWT, RBAC and
// rate-limit stages.
struct Verdict {
    enum class Kind {
        Forward,
        Direct,       // route.direct_response
        JwtMissing,   // 401 without an error code
        JwtInvalid,   // 401 error="invalid_token"
        RbacDenied,   // rbac.deny_status with deny_body
        RateLimited,  // 429
    };
    Kind kind = Kind::Forward;
    uint64_t retry_after_ms = 0;           // RateLimited
    int rbac_rule = -1;                    // the deciding rule (RbacDenied, or allowed by)
    auth::Reason jwt_reason = auth::Reason::Ok;
    const policy::Claims* claims = nullptr;  // the route's verified claims, if it has a provider
};

// Runs the JWT, RBAC and rate-limit stages of routes[route] (in that order;
// the rate limiter takes a token only from a request that passed the
// others). now_ns: CLOCK_MONOTONIC, never 0.
Verdict decide(const PolicyRuntime& rt, uint32_t route, const policy::RequestView& view,
               RequestAuth& auth, uint64_t now_ns);

// The locally generated response for a verdict other than Forward, and its
// status (for telemetry).
policy::LocalResponse local_response_for(const policy::Route& route, const Verdict& v, bool close);
int local_status(const policy::Route& route, const Verdict& v);

// The deciding RBAC rule's name, "default" when no rule held.
std::string rbac_rule_name(const policy::Route& route, const Verdict& v);
// Why the policy answered a request itself, for the access log, the debug
// log and `l7fastctl explain`: jwt_missing, jwt_<auth reason> (jwt_expired,
// ...), rbac_denied:<rule name> (":default" when no rule held),
// rate_limited, direct_response; "" for a request it forwards.
std::string verdict_reason(const policy::Route& route, const Verdict& v);
// The same from its parts, where no route object says the rule's name (an
// answer the kernel sent: `rule` is the deciding rule's name).
std::string verdict_reason(Verdict::Kind kind, auth::Reason jwt_reason, std::string_view rule);

// The head to send upstream: the route's request mutation plus the
// forwarded-claim headers of its provider (Mutation.hpp gives the bytes).
struct UpstreamHead {
    bool rewritten = false;  // false: send the head as received
    bool ok = true;          // false: Mutation.hpp refused the head
    std::string bytes;       // rewritten only
};
UpstreamHead upstream_request_head(const PolicyRuntime& rt, uint32_t route, std::string_view head,
                                   const policy::Claims* claims);

// Endpoint choice within cluster `cluster` (index into policy.clusters).
struct EndpointInputs {
    std::function<uint64_t()> rr_counter;  // round robin: the cluster's next counter value
    std::function<uint32_t()> random32;
    std::function<uint64_t()> random64;
    lb::HashBalancer::ActiveRequests active;  // bounded load: active requests per endpoint
    // whether an endpoint takes new requests (UpstreamHealth); empty: all do
    std::function<bool(uint32_t endpoint)> available;
};
// Endpoints that are out are never chosen: round robin and weighted choose
// among the others the same way; ring hash and Maglev keep a key's endpoint
// while it is in and send the keys of an endpoint that is out where the
// table built over the endpoints that are in sends them
// (HashBalancer::choose_available). nullopt: no endpoint is in.

std::optional<size_t> choose_endpoint(const PolicyRuntime& rt, size_t cluster,
                                      const policy::RequestView& view, const policy::Claims* claims,
                                      const EndpointInputs& in);

// The endpoints to try after `first` failed to connect, in order: the
// cluster's other endpoints from the one after `first` on, wrapping around,
// skipping endpoints a weighted cluster never chooses (weight 0) and those
// `available` says are out, at most `retries` of them.
std::vector<size_t> retry_endpoints(const policy::Cluster& cluster, size_t first, uint32_t retries,
                                    const std::function<bool(uint32_t)>& available = {});

}  // namespace l7fast::proxy
