// The policy model: the one definition of what an operator can write in
// /etc/l7fast/policy.toml. PolicyLoader builds it from TOML, Router evaluates
// it (the reference semantics the slow path uses), PolicyCompiler turns it
// into the data plane's tables.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace l7fast::policy {

// A path_regex pattern compiled once (Router.hpp); shared and immutable, so
// copies of a Policy share it.
class CompiledRegex;

// Where something was written, for error messages and `l7fastctl routes`.
struct SourceLocation {
    std::string file;
    uint32_t line = 0;
    uint32_t column = 0;

    std::string str() const;  // "file:line:column"
};

// An IPv4 or IPv6 socket address as written ("127.0.0.1:8080", "[::1]:80").
struct SocketAddress {
    int family = 0;                  // AF_INET or AF_INET6
    std::array<uint8_t, 16> ip{};    // IPv4 in the first 4 bytes
    uint16_t port = 0;

    std::string str() const;
    bool is_wildcard() const;
    friend bool operator==(const SocketAddress&, const SocketAddress&) = default;
    friend auto operator<=>(const SocketAddress&, const SocketAddress&) = default;

    // Parses "ip:port" / "[ip6]:port"; nullopt with a reason in *why on error.
    static std::optional<SocketAddress> parse(const std::string& text, std::string* why);
};

struct DaemonSettings {
    // cgroup v2 directory whose sockets the data plane sees (sockops attach
    // point); empty: the root of the cgroup v2 hierarchy, wherever mounted
    std::string cgroup;
    // where maps and links are pinned
    std::string bpffs = "/sys/fs/bpf/l7fast";
    // largest message sent socket-to-socket; bigger ones go over TCP
    uint32_t ingress_budget = 65536;
    // false: load no data plane at all; every request takes the slow path
    bool kernel_dataplane = true;
    // offload requests from clients on other hosts (SK_SKB on accepted sockets)
    bool offload_remote_clients = true;
    // idle pooled connections kept open per endpoint (kernel routes' pools)
    uint32_t pool_min_idle = 2;
    uint32_t pool_max = 1024;  // kernel-path connections per endpoint, at most L7_POOL_MAX
    std::chrono::milliseconds connect_timeout{1000};
    std::chrono::milliseconds request_timeout{15000};   // slow path: whole exchange
    std::chrono::milliseconds header_timeout{10000};    // slow path: request head
    std::chrono::milliseconds idle_timeout{60000};      // client keep-alive idle
    // "error", "warning", "notice", "info" or "debug" (log::parse_level)
    std::string log_level = "info";
    // Prometheus text exposition (GET /metrics) on this address; nullopt:
    // no metrics listener (D-Bus GetStats is always there)
    std::optional<SocketAddress> metrics_address;
    // access log: one request in `access_log_sample` is logged to the
    // journal (1: every request); 0: no access log
    uint32_t access_log_sample = 0;
    // its lines: "text" (key=value) or "json" (one object per line)
    bool access_log_json = false;
};

// An IPv4 or IPv6 prefix ("10.0.0.0/8", "::1/128"); the address's host
// bits must be zero. A bare address is a /32 or /128. Prefixes inside
// ::ffff:0:0/96 are refused: an IPv4-mapped client address is compared as
// the IPv4 address it maps.
struct Cidr {
    int family = 0;                // AF_INET or AF_INET6
    std::array<uint8_t, 16> ip{};  // IPv4 in the first 4 bytes
    uint8_t prefix_len = 0;        // 0..32 or 0..128

    std::string str() const;  // "10.0.0.0/8", "2001:db8::/32"
    // `ip` holds 4 (AF_INET) or 16 (AF_INET6) bytes in network order; an
    // IPv4-mapped IPv6 address counts as AF_INET.
    bool contains(int family, const uint8_t* ip) const;
    friend bool operator==(const Cidr&, const Cidr&) = default;
    static std::optional<Cidr> parse(const std::string& text, std::string* why);
};

// Where a value used for hashing or rate limiting comes from.
struct RequestKey {
    enum class Kind {
        Header,    // first field line with this name (lower-cased); absent: no key
        Cookie,    // cookie of this name in the Cookie field(s); absent: no key
        SourceIp,  // the client's address (IPv4: 4 bytes, IPv6: 16, network order)
        Claim,     // a claim of the route's verified JWT (rate limits only)
    };
    Kind kind = Kind::SourceIp;
    std::string name;  // Header, Cookie, Claim
    friend bool operator==(const RequestKey&, const RequestKey&) = default;
};

struct Listener {
    std::string name;
    SocketAddress address;
    SourceLocation where;
};

enum class LbPolicy {
    RoundRobin,
    Weighted,
    RingHash,  // Envoy's ring hash: xxh64 of the key on a ring of endpoint points
    Maglev,    // Maglev lookup table of maglev_table_size entries
};
// As the policy writes it: "round_robin", "weighted", "ring_hash", "maglev".
const char* lb_name(LbPolicy lb);

struct Endpoint {
    SocketAddress address;
    uint32_t weight = 1;
};

// Active health checking (HAProxy's `option httpchk`, Envoy's HTTP health
// check): every `interval` the daemon opens a TCP connection to each
// endpoint, sends `GET path` (Host: `host`, or the endpoint's address) with
// `Connection: close` and waits `timeout` for the status line. A status in
// `expected_status` passes; anything else (another status, a refused or
// timed-out connection, bytes that are not an HTTP/1.x status line) fails.
// `unhealthy_threshold` consecutive failures take the endpoint out,
// `healthy_threshold` consecutive passes bring it back. Endpoints start in.
struct HealthCheck {
    std::string path = "/";  // origin-form: starts with '/', no spaces or controls
    std::string host;        // empty: the endpoint's address ("127.0.0.1:9001")
    std::chrono::milliseconds interval{5000};
    std::chrono::milliseconds timeout{1000};  // less than interval
    uint32_t healthy_threshold = 2;
    uint32_t unhealthy_threshold = 3;
    // statuses that pass; empty: any 2xx or 3xx (HAProxy's default)
    std::vector<uint16_t> expected_status;
    SourceLocation where;

    bool passes(int status) const;
};

// Passive outlier detection (Envoy's outlier_detection): an endpoint whose
// last `consecutive_5xx` responses (either plane) were 5xx, or whose last
// `consecutive_connect_failures` connection attempts failed, is ejected for
// base_ejection * (times ejected so far, capped so the time stays within
// max_ejection), then comes back by itself; 0 turns a trigger off. At most
// max_ejection_percent of the cluster's endpoints are ejected at once (at
// least one).
struct OutlierDetection {
    uint32_t consecutive_5xx = 5;
    uint32_t consecutive_connect_failures = 5;
    std::chrono::milliseconds base_ejection{30000};
    std::chrono::milliseconds max_ejection{300000};  // >= base_ejection
    uint32_t max_ejection_percent = 50;               // 1..100
    SourceLocation where;
};

struct Cluster {
    std::string name;
    LbPolicy lb = LbPolicy::RoundRobin;
    std::vector<Endpoint> endpoints;
    // RingHash / Maglev: what is hashed; a request without the key gets a
    // random endpoint (as Envoy does)
    std::optional<RequestKey> hash_key;
    uint64_t ring_min_size = 1024;     // RingHash (Envoy minimum_ring_size)
    uint64_t ring_max_size = 8388608;  // RingHash (Envoy maximum_ring_size)
    uint32_t maglev_table_size = 65537;  // Maglev: a prime
    // bounded load (Envoy hash_balance_factor, percent >= 100); 0: off
    uint32_t hash_balance_factor = 0;
    std::optional<HealthCheck> health_check;            // none: no active checks
    std::optional<OutlierDetection> outlier_detection;  // none: no passive ejection
    SourceLocation where;
};

enum class PathMatch {
    Any,
    Exact,
    Prefix,
    Regex,  // the whole path matches `path` in the safe regex subset (docs/policy.md)
};

struct HeaderCondition {
    enum class Kind { Present, Absent, Exact, Prefix };
    std::string name;   // lower-cased
    Kind kind = Kind::Present;
    // Exact/Prefix: compared byte for byte with the header's value: every
    // field line of that name, in order, joined with ", " (RFC 9110 5.3)
    std::string value;
};

// A query parameter of the request target ("?a=1&b=2"): `name=value` pairs
// split on '&', compared byte for byte as sent (no percent-decoding); the
// first pair with the name counts.
struct QueryCondition {
    enum class Kind { Present, Exact };
    std::string name;
    Kind kind = Kind::Present;
    std::string value;  // Exact
};

// A claim of the request's verified JWT (the route's `jwt` provider): a
// top-level member of the payload. Exact compares a string claim, the decimal
// text of a number, "true"/"false", or any element of an array of strings.
// Without a valid token no claim condition holds.
struct ClaimCondition {
    enum class Kind { Present, Exact };
    std::string claim;
    Kind kind = Kind::Present;
    std::string value;
};

struct RouteMatch {
    std::vector<std::string> methods;   // empty: any method; upper-case tokens
    std::optional<std::string> host;    // lower-cased, without port; nullopt: any
    PathMatch path_kind = PathMatch::Any;
    std::string path;                   // Exact/Prefix: starts with '/'; Regex: the pattern
    // Regex: `path` compiled (the loader sets it; Router fills it in for a
    // hand-built Policy)
    std::shared_ptr<const CompiledRegex> path_regex;
    std::vector<HeaderCondition> headers;
    std::vector<QueryCondition> query;
    std::vector<Cidr> sources;          // client address in any of them; empty: any
    std::vector<ClaimCondition> claims;  // needs Route::jwt
};

// One condition of a RouteMatch, by kind and, for the kinds a match has a
// list of, its index in that list. conditions_of() lists a match's
// conditions in the one order every description and trace uses (method,
// host, path, headers, query, source, claims), so that `l7fastctl routes`,
// `dump` and `explain` show them alike.
struct ConditionRef {
    enum class Kind { Method, Host, Path, Header, Query, Source, Claim };
    Kind kind = Kind::Method;
    size_t index = 0;  // Header, Query, Claim: index in the match's list
};
std::vector<ConditionRef> conditions_of(const RouteMatch& m);

// ---- JWT authentication -------------------------------------------------------

struct JwtKey {
    std::string kid;     // empty: matches a token without "kid"
    std::string alg;     // "HS256", "HS384", "HS512", "RS256", "ES256"
    std::string secret;  // HS*: the raw secret bytes (decoded from the policy)
    std::string pem;     // RS256/ES256: PEM public key
    SourceLocation where;
};

struct JwtProvider {
    std::string name;
    std::optional<std::string> issuer;     // "iss" must equal it
    std::vector<std::string> audiences;    // "aud" (string or array) must contain one; empty: not checked
    std::vector<std::string> algorithms;   // accepted "alg" values; a key only verifies its own alg
    std::vector<JwtKey> keys;              // inline keys
    std::string jwks_file;                 // RFC 7517 key set, re-read when it changes; empty: none
    // where the token is: the first field line of a header (its value after
    // `from_prefix`, which is compared ASCII case-insensitively, as auth
    // schemes are) or a cookie (from_prefix empty)
    RequestKey from{RequestKey::Kind::Header, "authorization"};
    std::string from_prefix = "Bearer ";
    std::chrono::seconds clock_skew{60};   // leeway for exp and nbf
    bool require_exp = true;
    uint32_t max_token_bytes = 4096;       // longer tokens are rejected (401)
    // false: l7fastd verifies each new token (the kernel admits it from the
    // verified-token cache after that) even where the data plane could
    // verify it with l7fast.ko
    bool verify_in_kernel = true;
    struct ForwardClaim {
        std::string claim;
        std::string header;  // lower-cased; set (replaced) on the forwarded request
    };
    std::vector<ForwardClaim> forward_claims;
    SourceLocation where;
};

// ---- actions ------------------------------------------------------------------

struct HeaderValue {
    std::string name;   // lower-cased
    std::string value;
};

// Applied in this order: remove, then set (replace every occurrence with one
// line), then add (append a line); Mutation.hpp gives the exact bytes.
// Framing and hop-by-hop fields (host, content-length, transfer-encoding,
// connection, ...) cannot be changed.
struct HeaderMutation {
    std::vector<std::string> remove;
    std::vector<HeaderValue> set;
    std::vector<HeaderValue> add;
    bool empty() const { return remove.empty() && set.empty() && add.empty(); }
};

// RBAC: rules are conditions like a route's match (all must hold).
struct RbacRule {
    enum class Action { Allow, Deny };
    std::string name;  // for telemetry and logs; defaults to "rule<N>"
    Action action = Action::Deny;
    RouteMatch when;   // host is not used in rules
    SourceLocation where;
};

struct Rbac {
    enum class Mode {
        FirstMatch,     // the first rule that holds decides
        DenyOverrides,  // any deny rule that holds denies; else any allow allows
    };
    Mode mode = Mode::FirstMatch;
    RbacRule::Action default_action = RbacRule::Action::Allow;  // when no rule holds
    uint16_t deny_status = 403;
    std::string deny_body = "forbidden\n";
    std::vector<RbacRule> rules;
};

// Token bucket: `rate` tokens per second, at most `burst`; one per request.
// With a key, one bucket per key value (at most max_keys, least recently
// used evicted); a request without the key shares one bucket.
struct RateLimit {
    uint32_t rate = 0;
    uint32_t burst = 0;
    std::optional<RequestKey> key;
    uint32_t max_keys = 65536;
};

// A response l7fast sends itself instead of forwarding.
struct DirectResponse {
    uint16_t status = 200;
    // in order; Content-Length is added, and Content-Type: text/plain
    // unless one of these is content-type (Responses.hpp gives the bytes)
    std::vector<HeaderValue> headers;
    std::string body;
};

struct WeightedCluster {
    std::string cluster;
    uint32_t weight = 1;
};

// A route's request pipeline, in this order: match, JWT (401), RBAC (403 or
// deny_status), rate limit (429), then the direct response or forwarding
// with the header mutations.
struct Route {
    std::string name;
    std::vector<std::string> listeners;  // empty: every listener
    RouteMatch match;
    std::vector<WeightedCluster> clusters;  // one entry: plain routing; empty with direct_response
    std::optional<DirectResponse> direct_response;
    std::optional<std::string> jwt;  // JwtProvider name: a valid token is required
    std::optional<Rbac> rbac;
    std::optional<RateLimit> rate_limit;
    HeaderMutation request_headers;
    HeaderMutation response_headers;  // only set and remove
    std::optional<std::chrono::milliseconds> timeout;  // overrides daemon.request_timeout
    uint32_t connect_retries = 0;  // slow path: other endpoints tried after a connect failure
    bool offload = true;  // false: always the slow path, whatever the kernel can do
    SourceLocation where;
};

struct Policy {
    DaemonSettings daemon;
    std::vector<Listener> listeners;
    std::vector<Cluster> clusters;
    std::vector<Route> routes;        // in evaluation order
    std::vector<JwtProvider> jwt_providers;
    std::vector<std::string> sources; // files it was loaded from, in order

    const Cluster* find_cluster(const std::string& name) const;
    const Listener* find_listener(const std::string& name) const;
    const JwtProvider* find_jwt_provider(const std::string& name) const;
};

}  // namespace l7fast::policy
