#include "compiler/PolicyCompiler.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <tuple>
#include <unordered_map>

#include "lb/HashBalancer.hpp"
#include "common/KernelHash.hpp"
#include "config/Text.hpp"
#include "semantics/Responses.hpp"

namespace l7fast::policy {

namespace {

using text::lower;

constexpr uint32_t kAllMethodClasses = ((1u << L7_M_COUNT) - 1) & ~(1u << L7_M_CONNECT);
constexpr uint64_t kMaxU16 = 0xffff;

void set_bit(l7_bitmap& b, uint32_t route)
{
    b.w[route / 64] |= 1ULL << (route % 64);
}

uint64_t splitmix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

// Why a route is not in the kernel; several reasons are all reported.
class Reasons {
public:
    void add(std::string reason)
    {
        if (std::find(items_.begin(), items_.end(), reason) == items_.end())
            items_.push_back(std::move(reason));
    }
    bool empty() const { return items_.empty(); }
    std::string str() const
    {
        std::string out;
        for (const std::string& r : items_)
            out += (out.empty() ? "" : "; ") + r;
        return out;
    }

private:
    std::vector<std::string> items_;
};

// One route's conditions as the tables will hold them. A dimension that is
// not Exact admits every request in that dimension (the "any" route set).
struct RouteShape {
    bool every_listener = true;
    std::vector<uint32_t> listeners;  // ids < L7_MAX_LISTENERS
    uint32_t method_classes = 0;      // bit per enum l7_method
    std::optional<std::string> host;  // exact, lower-cased
    std::optional<std::pair<l7_match_kind, std::string>> path;  // PATH_EXACT or PATH_PREFIX
    enum class Hdr { Any, Present, Exact };
    std::array<Hdr, L7_MAX_MATCH_HDRS> hdr{};
    std::array<std::string, L7_MAX_MATCH_HDRS> hdr_value;
    std::vector<uint16_t> targets;  // cluster indexes, when they fit l7_route
    std::vector<uint32_t> target_weights;
    std::optional<uint32_t> jwt_provider;  // admitted from the verified-token cache
    std::optional<l7_mutation> mutation;  // request header mutation (L7_RF_MUTATE)
    std::optional<l7_response> response;  // the direct response (L7_RF_DIRECT)
    std::optional<uint32_t> bucket;       // the rate limit's l7_buckets entry (L7_RF_RATE)
    std::optional<uint16_t> rate_key;     // keyed: l7_route.rate_key (L7_RF_RATE_KEYED)
    Reasons reasons;  // non-empty: user space
    // RBAC: the route's rules, shaped like routes (only the condition
    // fields are used), and where they are in space 1 once allocated
    std::vector<RouteShape> rules;
    std::optional<uint32_t> rule_first;
};

class TableBuilder {
public:
    TableBuilder(const Policy& policy, uint64_t seed, const StringHashFn& hash, const PoolIdFn& pool_id,
                 const RateBucketFn& rate_bucket)
        : p_(policy), seed_(seed), hash_(hash), pool_id_(pool_id), rate_bucket_(rate_bucket),
          in_tables_(std::min<size_t>(policy.routes.size(), L7_MAX_ROUTES)),
          overflow_(policy.routes.size() > L7_MAX_ROUTES)
    {
    }

    // Also counts the string conditions that collided under this seed.
    CompiledTables build(size_t* collisions)
    {
        check_jwt_providers();
        assign_match_headers();
        assign_prefix_lengths();
        shapes_.resize(in_tables_);
        for (uint32_t r = 0; r < in_tables_; r++)
            shape_route(r);
        for (uint32_t r = 0; r < in_tables_; r++)
            add_strings(r);
        for (uint32_t r = 0; r < in_tables_; r++)
            add_rules(r);
        build_clusters();
        CompiledTables t;
        t.seed = seed_;
        place_routes(t);
        fill_jwt_providers(t);
        fill_bitmaps(t);
        fill_rule_bitmaps(t);
        fill_meta(t);
        fill_listeners(t);
        t.clusters = std::move(clusters_);
        t.endpoints = std::move(endpoints_);
        t.lb_tables = std::move(lb_tables_);
        for (auto& [key, entry] : strings_)  // ordered by (space, kind, aux, hash): stable output
            t.strings.push_back({entry.key, entry.val});
        *collisions = collisions_;
        return t;
    }

private:
    bool is_overflow_stand_in(uint32_t r) const { return overflow_ && r == in_tables_ - 1; }

    // Why the kernel cannot admit a provider's tokens from the verified-token
    // cache; empty: it can (the token header still needs a match header).
    void check_jwt_providers()
    {
        for (size_t i = 0; i < p_.jwt_providers.size(); i++) {
            const JwtProvider& jp = p_.jwt_providers[i];
            Reasons why;
            if (i >= L7_MAX_JWT_PROVIDERS)
                why.add("JWT provider " + jp.name + " is beyond the first " + std::to_string(L7_MAX_JWT_PROVIDERS));
            if (jp.from.kind != RequestKey::Kind::Header)
                why.add("JWT provider " + jp.name + ": tokens from a cookie are checked in user space");
            else if (jp.from.name.empty() || jp.from.name.size() > L7_MAX_HDR_NAME)
                why.add("JWT provider " + jp.name + ": token header name longer than " +
                        std::to_string(L7_MAX_HDR_NAME) + " bytes");
            if (jp.from_prefix.size() > sizeof(l7_jwt_provider{}.prefix))
                why.add("JWT provider " + jp.name + ": token prefix longer than " +
                        std::to_string(sizeof(l7_jwt_provider{}.prefix)) + " bytes");
            // forwarding claims sets headers and drops the client's copies:
            // request header mutation, which runs in user space
            if (!jp.forward_claims.empty())
                why.add("JWT provider " + jp.name + ": forwarded claims are added in user space");
            jwt_reason_.push_back(why.str());
        }
    }

    std::optional<uint32_t> jwt_provider_index(const Route& route) const
    {
        if (!route.jwt)
            return std::nullopt;
        for (uint32_t i = 0; i < p_.jwt_providers.size(); i++)
            if (p_.jwt_providers[i].name == *route.jwt)
                return i;
        return std::nullopt;
    }

    // Why header `name` got no match header slot.
    static std::string no_slot(const std::string& name)
    {
        return name.size() > L7_MAX_HDR_NAME
                   ? " is longer than " + std::to_string(L7_MAX_HDR_NAME) + " bytes"
                   : " is beyond the " + std::to_string(L7_MAX_MATCH_HDRS) + " distinct header names";
    }

    void assign_match_header(const std::string& name)
    {
        if (name.empty() || name.size() > L7_MAX_HDR_NAME || hdr_slot_.count(name) ||
            hdr_names_.size() >= L7_MAX_MATCH_HDRS)
            return;
        hdr_slot_.emplace(name, static_cast<uint32_t>(hdr_names_.size()));
        hdr_names_.push_back(name);
    }

    // Header names routes match on get the L7_MAX_MATCH_HDRS slots the
    // kernel has, first come (in route order) first served: route
    // conditions, then the token headers of JWT providers the kernel may
    // admit from (the matcher locates those lines for l7_g_jwt_admit),
    // then RBAC rules (in route order), so rules never take a slot a
    // route would have had.
    void assign_match_headers()
    {
        for (uint32_t r = 0; r < in_tables_; r++)
            if (!is_overflow_stand_in(r))
                assign_match_headers(p_.routes[r].match);
        for (uint32_t r = 0; r < in_tables_; r++) {
            if (is_overflow_stand_in(r))
                continue;
            const std::optional<uint32_t> pi = jwt_provider_index(p_.routes[r]);
            if (pi && jwt_reason_[*pi].empty())
                assign_match_header(lower(p_.jwt_providers[*pi].from.name));
        }
        for (uint32_t r = 0; r < in_tables_; r++)
            if (!is_overflow_stand_in(r) && p_.routes[r].rbac)
                for (const RbacRule& rule : p_.routes[r].rbac->rules)
                    assign_match_headers(rule.when);
        // then the hash keys of ring-hash / Maglev clusters: the kernel finds
        // a key header's value where the matcher collected it
        for (uint32_t r = 0; r < in_tables_; r++) {
            const Route& route = p_.routes[r];
            if (is_overflow_stand_in(r) || !route.offload || !p_.daemon.kernel_dataplane)
                continue;
            for (const WeightedCluster& wc : route.clusters) {
                const Cluster* c = p_.find_cluster(wc.cluster);
                if (!c || (c->lb != LbPolicy::RingHash && c->lb != LbPolicy::Maglev) || !c->hash_key ||
                    c->hash_key->kind != RequestKey::Kind::Header)
                    continue;
                const std::string name = lower(c->hash_key->name);
                if (name.empty() || name.size() > L7_MAX_HDR_NAME || hdr_slot_.count(name) ||
                    hdr_names_.size() >= L7_MAX_MATCH_HDRS)
                    continue;
                hdr_slot_.emplace(name, static_cast<uint32_t>(hdr_names_.size()));
                hdr_names_.push_back(name);
            }
        }
        // and the key headers of keyed rate limits: the kernel takes a key's
        // value where the matcher collected it
        for (uint32_t r = 0; r < in_tables_; r++) {
            const Route& route = p_.routes[r];
            if (is_overflow_stand_in(r) || !route.offload || !p_.daemon.kernel_dataplane || !route.rate_limit ||
                !route.rate_limit->key || route.rate_limit->key->kind != RequestKey::Kind::Header)
                continue;
            assign_match_header(lower(route.rate_limit->key->name));
        }
    }

    void assign_match_headers(const RouteMatch& m)
    {
        for (const HeaderCondition& c : m.headers)
            assign_match_header(lower(c.name));
    }

    // A route with a provider is admitted in the kernel from the
    // verified-token cache when the provider allows it; the slow path
    // verifies and fills the cache.
    void shape_jwt(const Route& route, RouteShape& s)
    {
        if (!route.jwt)
            return;
        const std::optional<uint32_t> pi = jwt_provider_index(route);
        if (!pi) {
            s.reasons.add("JWT provider " + *route.jwt + " does not exist");
            return;
        }
        if (!jwt_reason_[*pi].empty()) {
            s.reasons.add(jwt_reason_[*pi]);
            return;
        }
        if (!hdr_slot_.count(lower(p_.jwt_providers[*pi].from.name))) {
            s.reasons.add("more than " + std::to_string(L7_MAX_MATCH_HDRS) +
                          " distinct header names (with the JWT token header)");
            return;
        }
        s.jwt_provider = *pi;
    }

    // Routes first, then RBAC rules, as for header names.
    void assign_prefix_lengths()
    {
        for (uint32_t r = 0; r < in_tables_; r++)
            if (!is_overflow_stand_in(r))
                assign_prefix_length(p_.routes[r].match);
        for (uint32_t r = 0; r < in_tables_; r++)
            if (!is_overflow_stand_in(r) && p_.routes[r].rbac)
                for (const RbacRule& rule : p_.routes[r].rbac->rules)
                    assign_prefix_length(rule.when);
        std::sort(prefix_lens_.begin(), prefix_lens_.end());
    }

    void assign_prefix_length(const RouteMatch& m)
    {
        if (m.path_kind != PathMatch::Prefix || m.path.empty() || m.path.size() > L7_MAX_MATCH_STR)
            return;
        if (std::find(prefix_lens_.begin(), prefix_lens_.end(), m.path.size()) == prefix_lens_.end() &&
            prefix_lens_.size() < L7_MAX_PREFIX_LENS)
            prefix_lens_.push_back(static_cast<uint16_t>(m.path.size()));
    }

    void shape_route(uint32_t r)
    {
        RouteShape& s = shapes_[r];
        const Route& route = p_.routes[r];
        if (is_overflow_stand_in(r)) {
            // Every request no earlier route takes lands here and goes to
            // the slow path, which also knows the routes the kernel has no
            // bits for; the kernel's "no route" thus stays exact.
            s.method_classes = kAllMethodClasses;
            s.reasons.add("the policy has more than " + std::to_string(L7_MAX_ROUTES) +
                          " routes: the kernel's last route stands for this and every later route");
            return;
        }
        shape_listeners(route, s);
        shape_methods(route.match, s);
        shape_host(route.match, s);
        shape_path(route.match, s);
        shape_headers(route.match, s);
        shape_targets(route, s);
        shape_unsupported(route, s);
        shape_rate_limit(r, s);
        if (route.rbac)
            shape_rules(*route.rbac, s);
        if (!route.offload)
            s.reasons.add("offload = false");
        if (!p_.daemon.kernel_dataplane)
            s.reasons.add("kernel_dataplane = false");
    }

    // Policy features the kernel tables cannot express (yet): the route is
    // placed in user space, where the reference pipeline enforces them.
    void shape_unsupported(const Route& route, RouteShape& s)
    {
        const RouteMatch& m = route.match;
        if (m.path_kind == PathMatch::Regex)
            s.reasons.add("path_regex runs in user space");
        for (const HeaderCondition& c : m.headers) {
            if (c.kind == HeaderCondition::Kind::Absent)
                s.reasons.add("header absence conditions run in user space");
            if (c.kind == HeaderCondition::Kind::Prefix)
                s.reasons.add("header prefix conditions run in user space");
        }
        if (!m.query.empty())
            s.reasons.add("query conditions run in user space");
        if (!m.sources.empty())
            s.reasons.add("source address conditions run in user space");
        if (!m.claims.empty())
            s.reasons.add("claim conditions run in user space");
        shape_jwt(route, s);
        if (route.direct_response)
            shape_direct_response(*route.direct_response, s);
        if (!route.response_headers.empty())
            s.reasons.add("response header mutation runs in user space");
        shape_request_mutation(route, s);
        if (route.timeout)
            s.reasons.add("per-route timeouts run in user space");
    }

    // A rate limit runs in the kernel on the bucket the slow path's limiter
    // shares with it (RateLimiter), a keyed one also on the kernel's table
    // of its keys' buckets when the key is a header or the source address;
    // the 429 is the kernel's to send when its bytes fit.
    void shape_rate_limit(uint32_t r, RouteShape& s)
    {
        const Route& route = p_.routes[r];
        if (!route.rate_limit)
            return;
        if (const auto& key = route.rate_limit->key) {
            if (key->kind == RequestKey::Kind::SourceIp) {
                s.rate_key = L7_RATE_KEY_SOURCE;
            } else if (key->kind != RequestKey::Kind::Header) {
                s.reasons.add(std::string("rate limits keyed by a ") +
                              (key->kind == RequestKey::Kind::Cookie ? "cookie" : "claim") + " run in user space");
                return;
            } else if (auto slot = hdr_slot_.find(lower(key->name)); slot != hdr_slot_.end()) {
                s.rate_key = static_cast<uint16_t>(slot->second);
            } else {
                s.reasons.add("its rate limit's key header " + key->name + no_slot(key->name));
                return;
            }
        }
        if (route.rate_limit->rate == 0 || route.rate_limit->burst == 0) {
            // the loader refuses these; the kernel's 429 says retry-after: 1
            s.reasons.add("a rate limit of 0 runs in user space");
            return;
        }
        s.bucket = rate_bucket_ ? rate_bucket_(r) : std::nullopt;
        if (!s.bucket || *s.bucket >= L7_MAX_BUCKETS)
            s.reasons.add(s.rate_key ? "keyed rate limit without a kernel table (l7fastd runs it in user space)"
                                     : "rate limit without a kernel bucket (l7fastd runs it in user space)");
    }

    // Each rule is shaped like a route's match; anything the kernel cannot
    // evaluate exactly in a rule places the whole route in user space (a
    // superset, which is fine for route sets, would change a decision).
    void shape_rules(const Rbac& rbac, RouteShape& s)
    {
        for (size_t i = 0; i < rbac.rules.size(); i++) {
            const RbacRule& rule = rbac.rules[i];
            const RouteMatch& m = rule.when;
            RouteShape rs;
            shape_methods(m, rs);
            shape_path(m, rs);
            shape_headers(m, rs);
            if (m.host)  // the loader refuses it; Router would compare it unlowered
                rs.reasons.add("host conditions in RBAC rules run in user space");
            if (m.path_kind == PathMatch::Regex)
                rs.reasons.add("path_regex runs in user space");
            for (const HeaderCondition& c : m.headers) {
                if (c.kind == HeaderCondition::Kind::Absent)
                    rs.reasons.add("header absence conditions run in user space");
                if (c.kind == HeaderCondition::Kind::Prefix)
                    rs.reasons.add("header prefix conditions run in user space");
            }
            if (!m.query.empty())
                rs.reasons.add("query conditions run in user space");
            if (!m.sources.empty())
                rs.reasons.add("source address conditions run in user space");
            if (!m.claims.empty())
                rs.reasons.add("claim conditions run in user space");
            if (!rs.reasons.empty())
                s.reasons.add("RBAC rule " + (rule.name.empty() ? "rule" + std::to_string(i) : rule.name) + ": " +
                              rs.reasons.str());
            s.rules.push_back(std::move(rs));
        }
    }

    // The names a route's JWT provider forwards claims in are removed from
    // every request (the kernel inserts the token's lines from its cache).
    void shape_request_mutation(const Route& route, RouteShape& s)
    {
        std::vector<std::string> forwarded;
        if (route.jwt)
            if (const JwtProvider* jp = p_.find_jwt_provider(*route.jwt))
                for (const JwtProvider::ForwardClaim& fc : jp->forward_claims)
                    forwarded.push_back(fc.header);
        if (route.request_headers.empty() && forwarded.empty())
            return;
        RequestMutationTable mt = compile_request_mutation(route.request_headers, forwarded);
        if (!mt.table)
            s.reasons.add(mt.reason);
        s.mutation = mt.table;
    }

    void shape_listeners(const Route& route, RouteShape& s)
    {
        s.every_listener = route.listeners.empty();
        bool beyond = false;
        for (const std::string& name : route.listeners) {
            for (uint32_t i = 0; i < p_.listeners.size(); i++) {
                if (p_.listeners[i].name != name)
                    continue;
                if (i < L7_MAX_LISTENERS)
                    s.listeners.push_back(i);
                else
                    beyond = true;
            }
        }
        if (beyond && s.listeners.empty())
            s.reasons.add("its listeners are beyond the first " + std::to_string(L7_MAX_LISTENERS));
    }

    void shape_methods(const RouteMatch& m, RouteShape& s)
    {
        if (m.methods.empty()) {
            s.method_classes = kAllMethodClasses;
            return;
        }
        for (const std::string& method : m.methods) {
            if (method == "CONNECT")
                continue;  // never routed (Router), never matched (kernel)
            const l7_method cls = kernel_method_class(method);
            s.method_classes |= 1u << cls;
            if (cls == L7_M_OTHER)
                s.reasons.add("method " + method + " has no kernel method class");
        }
    }

    void shape_host(const RouteMatch& m, RouteShape& s)
    {
        if (!m.host)
            return;
        if (m.host->size() > L7_MAX_MATCH_STR) {
            s.reasons.add("host longer than " + std::to_string(L7_MAX_MATCH_STR) + " bytes");
            return;
        }
        s.host = lower(*m.host);
    }

    void shape_path(const RouteMatch& m, RouteShape& s)
    {
        if (m.path_kind == PathMatch::Any || (m.path_kind == PathMatch::Prefix && m.path.empty()))
            return;  // an empty prefix admits every path: "any" is exact
        if (m.path_kind == PathMatch::Regex)
            return;  // "any" (a superset); the pattern is not a literal prefix
        if (m.path.size() > L7_MAX_MATCH_STR) {
            s.reasons.add("path longer than " + std::to_string(L7_MAX_MATCH_STR) + " bytes");
            return;
        }
        if (m.path_kind == PathMatch::Exact) {
            s.path = {L7_MK_PATH_EXACT, m.path};
            return;
        }
        if (std::find(prefix_lens_.begin(), prefix_lens_.end(), m.path.size()) == prefix_lens_.end()) {
            s.reasons.add("more than " + std::to_string(L7_MAX_PREFIX_LENS) + " distinct path-prefix lengths");
            return;
        }
        s.path = {L7_MK_PATH_PREFIX, m.path};
    }

    void shape_headers(const RouteMatch& m, RouteShape& s)
    {
        for (const HeaderCondition& c : m.headers) {
            const std::string name = lower(c.name);
            if (name.size() > L7_MAX_HDR_NAME) {
                s.reasons.add("header name longer than " + std::to_string(L7_MAX_HDR_NAME) + " bytes");
                continue;
            }
            auto slot = hdr_slot_.find(name);
            if (slot == hdr_slot_.end()) {
                s.reasons.add("more than " + std::to_string(L7_MAX_MATCH_HDRS) + " distinct header names");
                continue;
            }
            const uint32_t h = slot->second;
            // "exact" implies "present": a value the kernel cannot compare
            // still narrows the route to requests carrying the header
            if (c.kind == HeaderCondition::Kind::Absent || c.kind == HeaderCondition::Kind::Prefix) {
                continue;  // "any" for the tables (a superset); shape_unsupported() places it
            } else if (c.kind == HeaderCondition::Kind::Present) {
                s.hdr[h] = std::max(s.hdr[h], RouteShape::Hdr::Present);
            } else if (c.value.size() > L7_MAX_MATCH_STR) {
                s.hdr[h] = std::max(s.hdr[h], RouteShape::Hdr::Present);
                s.reasons.add("header value longer than " + std::to_string(L7_MAX_MATCH_STR) + " bytes");
            } else if (s.hdr[h] == RouteShape::Hdr::Exact && s.hdr_value[h] != c.value) {
                // two exact values for one header: matches nothing; the slow
                // path knows that, the tables keep the first as a superset
                s.reasons.add("two conditions on header " + name);
            } else {
                s.hdr[h] = RouteShape::Hdr::Exact;
                s.hdr_value[h] = c.value;
            }
        }
    }

    // An answer the kernel sends: the keep-alive form, byte for byte the
    // slow path's (semantics/Responses); nothing when it does not fit.
    static std::optional<l7_response> kernel_response(const LocalResponse& resp, int status)
    {
        if (resp.bytes.size() > L7_MAX_RESP_BYTES)
            return std::nullopt;
        l7_response out{};
        out.len = static_cast<__u32>(resp.bytes.size());
        out.head_len = static_cast<__u16>(resp.head_size);
        out.status = static_cast<__u16>(status);
        std::memcpy(out.bytes, resp.bytes.data(), resp.bytes.size());
        return out;
    }

    static void shape_direct_response(const DirectResponse& direct, RouteShape& s)
    {
        s.response = kernel_response(direct_response(direct, false), direct.status);
        if (!s.response)
            s.reasons.add("direct responses over " + std::to_string(L7_MAX_RESP_BYTES) +
                          " bytes are sent from user space");
    }

    void shape_targets(const Route& route, RouteShape& s)
    {
        if (route.clusters.empty() && !route.direct_response)
            s.reasons.add("no cluster");
        if (route.clusters.size() > L7_MAX_TARGETS)
            s.reasons.add("more than " + std::to_string(L7_MAX_TARGETS) + " weighted clusters");
        uint64_t total = 0;
        bool fits = route.clusters.size() <= L7_MAX_TARGETS;
        for (const WeightedCluster& wc : route.clusters) {
            total += wc.weight;
            auto it = std::find_if(p_.clusters.begin(), p_.clusters.end(),
                                   [&](const Cluster& c) { return c.name == wc.cluster; });
            if (it == p_.clusters.end()) {
                s.reasons.add("cluster " + wc.cluster + " does not exist");
                fits = false;
                continue;
            }
            const size_t ci = static_cast<size_t>(it - p_.clusters.begin());
            if (ci >= L7_MAX_CLUSTERS) {
                s.reasons.add("cluster " + wc.cluster + " is beyond the first " + std::to_string(L7_MAX_CLUSTERS) +
                              " clusters");
                fits = false;
                continue;
            }
            s.targets.push_back(static_cast<uint16_t>(ci));
            s.target_weights.push_back(wc.weight);
        }
        if (total > kMaxU16) {
            s.reasons.add("cluster weights do not fit 16 bits");
            fits = false;
        }
        if (!fits) {
            s.targets.clear();
            s.target_weights.clear();
        }
    }

    // ---- string conditions -------------------------------------------------

    struct StringEntry {
        l7_match_key key{};
        l7_match_val val{};
        std::string value;
    };

    // Adds route r to the entry for (kind, aux, value); false when the
    // condition cannot be in the table (full, or its hash collides with
    // another string's), with the reason added to the route.
    bool add_string(uint32_t r, l7_match_kind kind, uint16_t aux, const std::string& value, bool lower_case)
    {
        return add_string(L7_SPACE_ROUTES, r, shapes_[r].reasons, kind, aux, value, lower_case);
    }

    // The same in either space: sets `bit` (a route, or a rule in space 1)
    // and reports a failure to `reasons` (the route's).
    bool add_string(uint16_t space, uint32_t bit, Reasons& reasons, l7_match_kind kind, uint16_t aux,
                    const std::string& value, bool lower_case)
    {
        const uint64_t hash = hash_(seed_, value, lower_case);
        auto it = strings_.find({space, kind, aux, hash});
        if (it == strings_.end()) {
            if (strings_.size() >= kMaxMatchStrings) {
                reasons.add("more than " + std::to_string(kMaxMatchStrings) + " distinct string conditions");
                return false;
            }
            StringEntry e;
            e.key.hash = hash;
            e.key.kind = static_cast<__u16>(kind);
            e.key.aux = aux;
            e.key.space = space;
            e.val.len = static_cast<__u16>(value.size());
            std::memcpy(e.val.str, value.data(), value.size());
            e.value = value;
            it = strings_.emplace(std::tuple{space, kind, aux, hash}, std::move(e)).first;
        } else if (it->second.value != value) {
            collisions_++;
            reasons.add((space == L7_SPACE_RULES ? "an RBAC rule's condition " : "its condition ") +
                        text::quote(value) + " collides with " + text::quote(it->second.value) +
                        " under hash seed " + std::to_string(seed_));
            return false;
        }
        set_bit(it->second.val.routes, bit);
        return true;
    }

    void add_strings(uint32_t r)
    {
        RouteShape& s = shapes_[r];
        if (s.host && !add_string(r, L7_MK_HOST_EXACT, 0, *s.host, true))
            s.host.reset();
        if (s.path) {
            const uint16_t aux = s.path->first == L7_MK_PATH_PREFIX ? static_cast<uint16_t>(s.path->second.size()) : 0;
            if (!add_string(r, s.path->first, aux, s.path->second, false))
                s.path.reset();
        }
        for (uint32_t h = 0; h < hdr_names_.size(); h++)
            if (s.hdr[h] == RouteShape::Hdr::Exact &&
                !add_string(r, L7_MK_HDR_EXACT, static_cast<uint16_t>(h), s.hdr_value[h], false))
                s.hdr[h] = RouteShape::Hdr::Present;
    }

    // Gives the rules of a route that can otherwise be in the kernel their
    // bits in space 1 and their string conditions. Rules of a route placed
    // in user space for any reason are not compiled at all.
    void add_rules(uint32_t r)
    {
        RouteShape& s = shapes_[r];
        if (!p_.routes[r].rbac || !s.reasons.empty())
            return;
        if (n_rules_ + s.rules.size() > L7_MAX_RULES) {
            s.reasons.add("more than " + std::to_string(L7_MAX_RULES) + " RBAC rules in kernel routes");
            return;
        }
        s.rule_first = n_rules_;
        n_rules_ += static_cast<uint32_t>(s.rules.size());
        for (uint32_t i = 0; i < s.rules.size(); i++) {
            RouteShape& rs = s.rules[i];
            const uint32_t bit = *s.rule_first + i;
            // a failure places the route in user space: the rule's fallback
            // to "any" below is then never evaluated
            if (rs.path) {
                const uint16_t aux =
                    rs.path->first == L7_MK_PATH_PREFIX ? static_cast<uint16_t>(rs.path->second.size()) : 0;
                if (!add_string(L7_SPACE_RULES, bit, s.reasons, rs.path->first, aux, rs.path->second, false))
                    rs.path.reset();
            }
            for (uint32_t h = 0; h < hdr_names_.size(); h++)
                if (rs.hdr[h] == RouteShape::Hdr::Exact &&
                    !add_string(L7_SPACE_RULES, bit, s.reasons, L7_MK_HDR_EXACT, static_cast<uint16_t>(h),
                                rs.hdr_value[h], false))
                    rs.hdr[h] = RouteShape::Hdr::Present;
        }
    }

    // ---- clusters and endpoints ---------------------------------------------

    // Endpoints are written only for clusters a kernel-placed route may
    // pick, so pools are only taken for upstreams the kernel can use.
    void build_clusters()
    {
        std::vector<bool> needed(std::min<size_t>(p_.clusters.size(), L7_MAX_CLUSTERS));
        for (const RouteShape& s : shapes_)
            if (s.reasons.empty())
                for (uint16_t ci : s.targets)
                    needed[ci] = true;
        cluster_reason_.resize(needed.size());
        for (size_t ci = 0; ci < needed.size(); ci++) {
            const Cluster& c = p_.clusters[ci];
            l7_cluster out{};
            out.lb = c.lb == LbPolicy::Weighted ? L7_LB_WEIGHTED : L7_LB_ROUND_ROBIN;
            const bool hashing = c.lb == LbPolicy::RingHash || c.lb == LbPolicy::Maglev;
            if (needed[ci] && (!hashing || add_hash_table(ci, out)))
                add_endpoints(ci, out);
            clusters_.push_back(out);
        }
    }

    // A ring-hash / Maglev cluster: the key and the slow path's own table
    // (lb::HashBalancer, as proxy::build_pipeline_state builds it), so the
    // kernel picks the endpoint the slow path picks for the same key. False
    // with the reason in cluster_reason_ when the choice stays in user space.
    bool add_hash_table(size_t ci, l7_cluster& out)
    {
        const Cluster& c = p_.clusters[ci];
        std::string& why = cluster_reason_[ci];
        const std::string user = "cluster " + c.name + " chooses its endpoint in user space: ";
        if (!c.hash_key) {
            why = user + "consistent hashing without a hash_key";
            return false;
        }
        switch (c.hash_key->kind) {
        case RequestKey::Kind::Header: {
            auto slot = hdr_slot_.find(lower(c.hash_key->name));
            if (slot == hdr_slot_.end()) {
                why = user + "its hash_key header " + c.hash_key->name + no_slot(c.hash_key->name);
                return false;
            }
            out.key_kind = L7_LBK_HEADER;
            out.key_hdr = static_cast<__u16>(slot->second);
            break;
        }
        case RequestKey::Kind::SourceIp:
            out.key_kind = L7_LBK_SOURCE_IP;
            break;
        case RequestKey::Kind::Cookie:
            why = user + "cookie hash keys are parsed in user space";
            return false;
        default:
            why = user + "its hash_key is not a header or source_ip";
            return false;
        }
        std::string err;
        const std::optional<lb::HashBalancer> b = lb::HashBalancer::build(c, &err);
        if (!b) {
            why = user + err;
            return false;
        }
        if (auto refusal = b->kernel_refusal()) {
            why = user + *refusal;
            return false;
        }
        if (lb_tables_.size() >= L7_MAX_LB_TABLES) {
            why = user + "kernel routes use more than " + std::to_string(L7_MAX_LB_TABLES) +
                  " ring-hash / Maglev clusters";
            return false;
        }
        auto t = std::make_shared<l7_lb_table>();  // zeroed
        if (const lb::RingHash* ring = b->ring()) {
            std::copy(ring->hashes().begin(), ring->hashes().end(), t->hash);
            std::copy(ring->endpoints().begin(), ring->endpoints().end(), t->ep);
            out.lb = L7_LB_RING_HASH;
            out.table_size = static_cast<__u32>(ring->size());
        } else {
            const lb::Maglev* m = b->maglev();
            std::copy(m->table().begin(), m->table().end(), t->ep);
            out.lb = L7_LB_MAGLEV;
            out.table_size = static_cast<__u32>(m->table_size());
        }
        out.table = static_cast<__u32>(lb_tables_.size());
        lb_tables_.push_back(std::move(t));
        return true;
    }

    void add_endpoints(size_t ci, l7_cluster& out)
    {
        const Cluster& c = p_.clusters[ci];
        std::string& why = cluster_reason_[ci];
        if (c.endpoints.empty()) {
            why = "cluster " + c.name + " has no endpoints";
            return;
        }
        if (endpoints_.size() + c.endpoints.size() > L7_MAX_ENDPOINTS) {
            why = "cluster " + c.name + " has endpoints beyond the first " + std::to_string(L7_MAX_ENDPOINTS);
            return;
        }
        std::vector<l7_endpoint> eps;
        uint32_t cum = 0;
        for (const Endpoint& e : c.endpoints) {
            const std::optional<uint32_t> pool = pool_id_ ? pool_id_(e.address) : std::nullopt;
            if (!pool || *pool >= L7_MAX_POOLS) {
                why = "no free upstream pool for " + e.address.str();
                return;
            }
            if (e.weight > kMaxU16 || cum + e.weight > kMaxU16) {
                why = "cluster " + c.name + ": endpoint weights do not fit 16 bits";
                return;
            }
            cum += e.weight;
            l7_endpoint ep{};
            ep.pool_id = *pool;
            ep.weight = e.weight;
            ep.cum_weight = cum;
            eps.push_back(ep);
        }
        out.n_endpoints = static_cast<__u16>(eps.size());
        out.first_endpoint = static_cast<__u32>(endpoints_.size());
        out.total_weight = cum;
        endpoints_.insert(endpoints_.end(), eps.begin(), eps.end());
    }

    // ---- routes ---------------------------------------------------------------

    // The indexes of the two 401s JWT routes refuse requests with (no
    // token; error="invalid_token" when one was presented), both added to t
    // on first use and shared by the generation's routes; nothing when they
    // do not both fit (the slow path sends them).
    const std::optional<std::array<uint32_t, 2>>& unauthorized_responses(CompiledTables& t)
    {
        if (!unauthorized_tried_) {
            unauthorized_tried_ = true;
            const auto none = kernel_response(unauthorized(false, false), 401);
            const auto bad = kernel_response(unauthorized(true, false), 401);
            if (none && bad && t.responses.size() + 2 <= L7_MAX_RESPONSES) {
                unauthorized_at_ = {static_cast<uint32_t>(t.responses.size()),
                                    static_cast<uint32_t>(t.responses.size() + 1)};
                t.responses.push_back(*none);
                t.responses.push_back(*bad);
            }
        }
        return unauthorized_at_;
    }

    // The 429 of kernel rate limits, added to t on first use and shared;
    // nothing when it does not fit (the slow path sends it).
    const std::optional<uint32_t>& limited_response(CompiledTables& t)
    {
        if (!limited_tried_) {
            limited_tried_ = true;
            const auto r = kernel_response(too_many_requests(1000, false), 429);
            if (r && t.responses.size() < L7_MAX_RESPONSES) {
                limited_at_ = static_cast<uint32_t>(t.responses.size());
                t.responses.push_back(*r);
            }
        }
        return limited_at_;
    }

    void place_routes(CompiledTables& t)
    {
        for (uint32_t r = 0; r < p_.routes.size(); r++) {
            RoutePlacement placement;
            if (r >= in_tables_) {
                placement.reason = "beyond the first " + std::to_string(L7_MAX_ROUTES) + " routes";
                t.placement.push_back(std::move(placement));
                continue;
            }
            RouteShape& s = shapes_[r];
            if (s.reasons.empty())
                for (uint16_t ci : s.targets)
                    if (!cluster_reason_[ci].empty())
                        s.reasons.add(cluster_reason_[ci]);
            if (s.reasons.empty() && s.response && t.responses.size() >= L7_MAX_RESPONSES)
                s.reasons.add("beyond the first " + std::to_string(L7_MAX_RESPONSES) +
                              " direct responses of kernel routes");
            placement.kernel = s.reasons.empty();
            placement.reason = s.reasons.str();

            l7_route out{};
            out.flags = L7_RF_VALID | (placement.kernel ? L7_RF_KERNEL : 0);
            if (s.mutation) {
                out.flags |= L7_RF_MUTATE;
                t.mutations.emplace_back(r, *s.mutation);
            }
            out.stats_id = r;
            out.resp_no_token = L7_RESP_NONE;
            out.resp_bad_token = L7_RESP_NONE;
            if (placement.kernel && s.jwt_provider) {
                out.flags |= L7_RF_JWT;
                out.jwt_provider = static_cast<__u16>(*s.jwt_provider);
                // both 401s or neither: explain says one plane for both
                if (const auto& at = unauthorized_responses(t)) {
                    out.resp_no_token = (*at)[0];
                    out.resp_bad_token = (*at)[1];
                    placement.kernel_unauthorized = true;
                }
            }
            uint32_t cum = 0;
            for (size_t i = 0; i < s.targets.size(); i++) {
                cum += s.target_weights[i];
                out.cluster[i] = s.targets[i];
                out.cum_weight[i] = static_cast<__u16>(cum);
            }
            out.n_targets = static_cast<__u16>(s.targets.size());
            out.total_weight = static_cast<__u16>(cum);
            out.resp_direct = L7_RESP_NONE;
            if (placement.kernel && s.response) {
                out.flags |= L7_RF_DIRECT;
                out.resp_direct = static_cast<__u32>(t.responses.size());
                t.responses.push_back(*s.response);
            }
            out.resp_limited = L7_RESP_NONE;
            if (placement.kernel && s.bucket) {
                const RateLimit& rl = *p_.routes[r].rate_limit;
                out.flags |= L7_RF_RATE;
                out.bucket = *s.bucket;
                if (s.rate_key) {
                    out.flags |= L7_RF_RATE_KEYED;
                    out.rate_key = *s.rate_key;
                }
                out.rate = rl.rate;
                out.burst = rl.burst;
                // rate >= 1: a wait is at most 1 s, the 429 is always this one
                if (const auto& at = limited_response(t)) {
                    out.resp_limited = *at;
                    placement.kernel_limited = true;
                }
            }
            out.resp_deny = L7_RESP_NONE;
            if (placement.kernel && s.rule_first) {
                const Rbac& rbac = *p_.routes[r].rbac;
                out.flags |= L7_RF_RBAC;
                // the kernel answers denials when the answer fits; else
                // the slow path does (the route stays in the kernel)
                auto deny = kernel_response(rbac_denied(rbac, false), rbac.deny_status);
                if (deny && t.responses.size() < L7_MAX_RESPONSES) {
                    out.resp_deny = static_cast<__u32>(t.responses.size());
                    t.responses.push_back(*deny);
                    placement.kernel_denials = true;
                }
                if (rbac.mode == Rbac::Mode::DenyOverrides)
                    out.flags |= L7_RF_RBAC_DENY_OVERRIDES;
                if (rbac.default_action == RbacRule::Action::Deny)
                    out.flags |= L7_RF_RBAC_DEFAULT_DENY;
                out.rule_first = static_cast<__u16>(*s.rule_first);
                out.rule_count = static_cast<__u16>(s.rules.size());
            }
            t.routes.push_back(out);
            t.placement.push_back(std::move(placement));
        }
    }

    void fill_jwt_providers(CompiledTables& t) const
    {
        t.jwt_providers.assign(std::min<size_t>(p_.jwt_providers.size(), L7_MAX_JWT_PROVIDERS), l7_jwt_provider{});
        t.jwt_verify_reason.assign(t.jwt_providers.size(), "no kernel route uses it");
        for (const l7_route& r : t.routes) {
            if (!(r.flags & L7_RF_JWT) || r.jwt_provider >= t.jwt_providers.size())
                continue;
            const JwtProvider& jp = p_.jwt_providers[r.jwt_provider];
            l7_jwt_provider& out = t.jwt_providers[r.jwt_provider];
            const std::string prefix = lower(jp.from_prefix);
            out.hdr = static_cast<__u16>(hdr_slot_.at(lower(jp.from.name)));
            out.prefix_len = static_cast<__u16>(prefix.size());
            out.max_token = static_cast<__u16>(std::min<uint32_t>(jp.max_token_bytes, L7_JWT_MAX_TOKEN));
            // a head never holds a token that long: saturating is exact
            static_assert(L7_SCRATCH_SIZE < 0xffff);
            out.max_bytes = static_cast<__u16>(std::min<uint32_t>(jp.max_token_bytes, 0xffff));
            std::memcpy(out.prefix, prefix.data(), prefix.size());
            t.jwt_verify_reason[r.jwt_provider] = kernel_jwt_verify(jp, out);
        }
    }

    void fill_bitmaps(CompiledTables& t) const
    {
        t.bitmaps.assign(L7_BMI_PER_SPACE, l7_bitmap{});
        const uint32_t listeners = static_cast<uint32_t>(std::min<size_t>(p_.listeners.size(), L7_MAX_LISTENERS));
        for (uint32_t r = 0; r < in_tables_; r++) {
            const RouteShape& s = shapes_[r];
            if (s.every_listener) {
                for (uint32_t l = 0; l < listeners; l++)
                    set_bit(t.bitmaps[L7_BMI_LISTENER(l)], r);
            } else {
                for (uint32_t l : s.listeners)
                    set_bit(t.bitmaps[L7_BMI_LISTENER(l)], r);
            }
            for (uint32_t m = 0; m < L7_M_COUNT; m++)
                if (s.method_classes & (1u << m))
                    set_bit(t.bitmaps[L7_BMI_METHOD(m)], r);
            if (!s.host)
                set_bit(t.bitmaps[L7_BMI_HOST_ANY], r);
            if (!s.path)
                set_bit(t.bitmaps[L7_BMI_PATH_ANY], r);
            for (uint32_t h = 0; h < hdr_names_.size(); h++) {
                if (s.hdr[h] == RouteShape::Hdr::Any)
                    set_bit(t.bitmaps[L7_BMI_HDR_ANY(h)], r);
                else if (s.hdr[h] == RouteShape::Hdr::Present)
                    set_bit(t.bitmaps[L7_BMI_HDR_PRESENT(h)], r);
            }
        }
    }

    // Space 1: every compiled rule, exactly as fill_bitmaps() does routes
    // (rules have no listener scope), plus the set of deny rules.
    void fill_rule_bitmaps(CompiledTables& t) const
    {
        t.rule_bitmaps.assign(L7_BMI_PER_SPACE, l7_bitmap{});
        t.n_rules = n_rules_;
        for (uint32_t r = 0; r < in_tables_; r++) {
            const RouteShape& s = shapes_[r];
            if (!s.rule_first)
                continue;
            const Rbac& rbac = *p_.routes[r].rbac;
            for (uint32_t i = 0; i < s.rules.size(); i++) {
                const RouteShape& rs = s.rules[i];
                const uint32_t bit = *s.rule_first + i;
                for (uint32_t m = 0; m < L7_M_COUNT; m++)
                    if (rs.method_classes & (1u << m))
                        set_bit(t.rule_bitmaps[L7_BMI_METHOD(m)], bit);
                set_bit(t.rule_bitmaps[L7_BMI_HOST_ANY], bit);  // no host conditions
                if (!rs.path)
                    set_bit(t.rule_bitmaps[L7_BMI_PATH_ANY], bit);
                for (uint32_t h = 0; h < hdr_names_.size(); h++) {
                    if (rs.hdr[h] == RouteShape::Hdr::Any)
                        set_bit(t.rule_bitmaps[L7_BMI_HDR_ANY(h)], bit);
                    else if (rs.hdr[h] == RouteShape::Hdr::Present)
                        set_bit(t.rule_bitmaps[L7_BMI_HDR_PRESENT(h)], bit);
                }
                if (rbac.rules[i].action == RbacRule::Action::Deny)
                    set_bit(t.rule_bitmaps[L7_BMI_DENY], bit);
            }
        }
    }

    void fill_meta(CompiledTables& t) const
    {
        l7_gen_meta& m = t.meta;
        m.seed = seed_;
        m.n_routes = in_tables_;
        m.n_prefix_lens = static_cast<__u32>(prefix_lens_.size());
        std::copy(prefix_lens_.begin(), prefix_lens_.end(), m.prefix_lens);
        m.n_match_hdrs = static_cast<__u32>(hdr_names_.size());
        for (size_t h = 0; h < hdr_names_.size(); h++) {
            const std::string& name = hdr_names_[h];
            m.hdr_name_hash[h] = kernel::header_name_hash(name);
            std::memcpy(m.hdr_name[h], name.data(), name.size());
            m.hdr_name_len[h] = static_cast<__u16>(name.size());
        }
        for (uint32_t r = 0; r < in_tables_; r++) {
            const RouteMatch& rm = p_.routes[r].match;
            if (is_overflow_stand_in(r))
                continue;
            if (rm.host)
                m.flags |= L7_GMF_HOST;
            if (rm.path_kind != PathMatch::Any)
                m.flags |= L7_GMF_PATH;
            if (rm.path_kind == PathMatch::Exact)
                m.flags |= L7_GMF_PATH_EXACT;
            for (const RouteShape& rs : shapes_[r].rules) {
                if (!shapes_[r].rule_first)
                    break;
                if (rs.path)
                    m.flags |= L7_GMF_RULE_PATH;
            }
        }
    }

    void fill_listeners(CompiledTables& t) const
    {
        for (uint32_t i = 0; i < p_.listeners.size(); i++) {
            const SocketAddress& a = p_.listeners[i].address;
            if (i >= L7_MAX_LISTENERS) {
                t.listener_placement.push_back(
                    {false, "beyond the first " + std::to_string(L7_MAX_LISTENERS) + " listeners"});
                continue;
            }
            l7_listener_key key{};
            std::memcpy(key.ip, a.ip.data(), sizeof(key.ip));  // network byte order, IPv4 in ip[0]
            key.port = a.port;
            key.family = static_cast<__u16>(a.family);
            l7_listener val{};
            val.id = i;
            t.listeners.push_back({key, val});
            t.listener_placement.push_back({true, ""});
        }
    }

    const Policy& p_;
    const uint64_t seed_;
    const StringHashFn& hash_;
    const PoolIdFn& pool_id_;
    const RateBucketFn& rate_bucket_;
    const uint32_t in_tables_;  // routes with bits in the route sets
    const bool overflow_;       // more routes than bits: the last bit stands in for the rest

    std::unordered_map<std::string, uint32_t> hdr_slot_;
    std::vector<std::string> hdr_names_;
    std::vector<uint16_t> prefix_lens_;
    std::vector<RouteShape> shapes_;
    std::map<std::tuple<uint16_t, l7_match_kind, uint16_t, uint64_t>, StringEntry> strings_;  // space, kind, aux, hash
    uint32_t n_rules_ = 0;  // rule bits given out in space 1
    size_t collisions_ = 0;
    std::vector<l7_cluster> clusters_;
    std::vector<l7_endpoint> endpoints_;
    std::vector<std::shared_ptr<const l7_lb_table>> lb_tables_;
    std::vector<std::string> cluster_reason_;  // non-empty: no kernel endpoints
    std::vector<std::string> jwt_reason_;      // per provider; non-empty: user space
    // unauthorized_responses()
    bool unauthorized_tried_ = false;
    std::optional<std::array<uint32_t, 2>> unauthorized_at_;
    bool limited_tried_ = false;
    std::optional<uint32_t> limited_at_;
};

}  // namespace

l7_method kernel_method_class(std::string_view method)
{
    static constexpr std::pair<std::string_view, l7_method> kClasses[] = {
        {"GET", L7_M_GET},         {"HEAD", L7_M_HEAD},   {"POST", L7_M_POST},
        {"PUT", L7_M_PUT},         {"DELETE", L7_M_DELETE}, {"PATCH", L7_M_PATCH},
        {"OPTIONS", L7_M_OPTIONS}, {"CONNECT", L7_M_CONNECT}, {"TRACE", L7_M_TRACE},
    };
    for (const auto& [name, cls] : kClasses)
        if (name == method)
            return cls;
    return L7_M_OTHER;
}

std::string kernel_jwt_verify(const JwtProvider& jp, l7_jwt_provider& out)
{
    if (!jp.verify_in_kernel)
        return "verify_in_kernel = false";
    // the algorithms it accepts, a bit per L7_JA_* (auth::Alg's order; the
    // loader checked the names)
    static constexpr std::string_view kAlgs[L7_JA_N] = {"HS256", "HS384", "HS512", "RS256", "ES256"};
    uint8_t algs = 0;
    for (const std::string& a : jp.algorithms)
        for (size_t i = 0; i < L7_JA_N; i++)
            if (a == kAlgs[i])
                algs |= static_cast<uint8_t>(1u << i);
    if (!(algs & ((1u << L7_JA_HS256) | (1u << L7_JA_HS384) | (1u << L7_JA_HS512))))
        return "it accepts no HS256/384/512 tokens";
    if (jp.issuer && (jp.issuer->empty() || jp.issuer->size() > L7_JWT_MAX_CLAIM))
        return "its issuer is empty or longer than " + std::to_string(L7_JWT_MAX_CLAIM) + " bytes";
    if (jp.audiences.size() > L7_JWT_MAX_AUDS)
        return "more than " + std::to_string(L7_JWT_MAX_AUDS) + " audiences";
    for (const std::string& a : jp.audiences)
        if (a.size() > L7_JWT_MAX_CLAIM)
            return "an audience longer than " + std::to_string(L7_JWT_MAX_CLAIM) + " bytes";
    out.flags = static_cast<__u32>(L7_JP_VERIFY) | (jp.require_exp ? static_cast<__u32>(L7_JP_REQUIRE_EXP) : 0u);
    out.algs = algs;
    out.skew_s = static_cast<__u32>(jp.clock_skew.count());
    if (jp.issuer) {
        out.flags |= L7_JP_ISSUER;
        out.iss_len = static_cast<__u16>(jp.issuer->size());
        std::memcpy(out.iss, jp.issuer->data(), jp.issuer->size());
    }
    out.n_aud = static_cast<__u16>(jp.audiences.size());
    for (size_t i = 0; i < jp.audiences.size(); i++) {
        out.aud_len[i] = static_cast<__u16>(jp.audiences[i].size());
        std::memcpy(out.aud[i], jp.audiences[i].data(), jp.audiences[i].size());
    }
    return {};
}


CompiledTables compile(const Policy& policy, uint64_t seed, const PoolIdFn& pool_id, const CompileOptions& options)
{
    const StringHashFn hash = options.string_hash ? options.string_hash : StringHashFn(kernel::match_hash);
    const unsigned attempts = std::max(1u, options.seed_attempts);
    std::vector<std::string> notes;
    uint64_t s = seed;
    for (unsigned attempt = 1;; attempt++) {
        size_t collisions = 0;
        CompiledTables t = TableBuilder(policy, s, hash, pool_id, options.rate_bucket).build(&collisions);
        if (collisions == 0 || attempt == attempts) {
            if (collisions)
                notes.push_back(std::to_string(collisions) + " string conditions still collided with seed " +
                                std::to_string(s) + ": their routes are placed in user space");
            t.notes = std::move(notes);
            return t;
        }
        const uint64_t next = splitmix64(s ^ attempt);
        notes.push_back("seed " + std::to_string(s) + " made " + std::to_string(collisions) +
                        " string conditions collide; recompiled with seed " + std::to_string(next));
        s = next;
    }
}

}  // namespace l7fast::policy
