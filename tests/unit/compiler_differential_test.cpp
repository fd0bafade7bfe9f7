// Differential test: the data plane's request decision run by this kernel
// (bpf/lib/decide.h in a syscall program, over tables the daemon's own
// writer filled: tests/support/BpfDecider.hpp) against Router, on generated
// policies and requests. Whenever the kernel acts on a route itself, it must
// be Router's route; when it finds no route, Router must find none; a
// hand-off to the slow path may go anywhere (the slow path asks Router).
// RBAC rules of kernel routes (bpf/lib/rbac.h) are held to the same: whenever
// the kernel's rules pass allows or denies, semantics/Rbac's evaluate() must
// agree; and with the same random draws and round-robin counters the kernel
// picks the upstream pool Router's choice names. Needs root and BPF.
#include <gtest/gtest.h>

#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "compiler/PolicyCompiler.hpp"
#include "semantics/Rbac.hpp"
#include "semantics/Router.hpp"
#include "support/BpfDecider.hpp"

using namespace l7fast::policy;
using namespace l7fast::testing;

namespace {

constexpr uint64_t kTestSeed = 20261130;  // fixed: a failure reproduces

struct Request {
    std::string method;
    std::string target;
    std::vector<std::pair<std::string, std::string>> headers;
    uint32_t listener = 0;

    // the bytes a client sends
    std::string wire() const
    {
        std::string w = method + " " + target + " HTTP/1.1\r\n";
        for (const auto& [n, v] : headers)
            w += n + ": " + v + "\r\n";
        return w + "\r\n";
    }

    std::string str() const
    {
        std::ostringstream os;
        os << "listener " << listener << ": " << method << " " << target << "\n";
        for (const auto& [n, v] : headers)
            os << "    " << n << ": " << v << "\n";
        return os.str();
    }
};

// ---- generators -------------------------------------------------------------------

class Generator {
public:
    explicit Generator(uint64_t seed) : rng_(seed) {}

    uint32_t below(size_t n) { return static_cast<uint32_t>(rng_() % n); }
    bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
    template <class T>
    const T& pick(const std::vector<T>& v) { return v[below(v.size())]; }
    uint32_t u32() { return static_cast<uint32_t>(rng_()); }

    std::string random_case(std::string s)
    {
        for (char& c : s)
            if (chance(0.3))
                c = (c >= 'a' && c <= 'z') ? static_cast<char>(c - 32) : c;
        return s;
    }

    struct Shape {
        size_t routes = 20;
        bool many_prefix_lengths = false;
        bool many_header_names = false;
        double exhausted_pools = 0;
        bool unique_paths = false;  // every route matches one path of its own
        double rbac = 0;            // share of routes with RBAC rules
    };

    Policy policy(const Shape& shape)
    {
        Policy p;
        const uint32_t n_listeners = 1 + below(3);
        for (uint32_t i = 0; i < n_listeners; i++)
            p.listeners.push_back({"l" + std::to_string(i), address("127.0.0.1", 8000 + i), {}});
        const uint32_t n_clusters = 1 + below(4);
        for (uint32_t i = 0; i < n_clusters; i++) {
            Cluster c;
            c.name = "c" + std::to_string(i);
            c.lb = chance(0.5) ? LbPolicy::Weighted : LbPolicy::RoundRobin;
            const uint32_t n = 1 + below(3);
            for (uint32_t e = 0; e < n; e++)
                c.endpoints.push_back({address("127.0.0.2", 9000 + 10 * i + e), c.lb == LbPolicy::Weighted ? below(4) : 1});
            if (c.lb == LbPolicy::Weighted)
                c.endpoints[0].weight += 1;
            p.clusters.push_back(c);
        }
        for (size_t r = 0; r < shape.routes; r++)
            p.routes.push_back(route(p, r, shape));
        return p;
    }

    Request request(const Policy& p)
    {
        Request rq;
        rq.listener = below(p.listeners.size());
        rq.method = pick(kRequestMethods);
        rq.target = pick(kPaths) + pick(kSuffixes);
        if (chance(0.8))
            rq.headers.push_back({random_case("host"), request_host_value(pick(kHosts))});
        if (!p.routes.empty() && chance(0.7)) {
            const Route& target = p.routes[below(p.routes.size())];
            aim_at(target, p, rq);
            if (target.rbac && !target.rbac->rules.empty() && chance(0.7))
                aim_at_rule(target.rbac->rules[below(target.rbac->rules.size())].when, rq);
        }
        const uint32_t extra = below(4);
        for (uint32_t i = 0; i < extra; i++)
            rq.headers.push_back({random_case(pick(header_names_)), pick(kValues)});
        if (!rq.headers.empty() && chance(0.1))  // a duplicated field line
            rq.headers.push_back(rq.headers[below(rq.headers.size())]);
        std::shuffle(rq.headers.begin(), rq.headers.end(), rng_);
        return rq;
    }

private:
    static SocketAddress address(const std::string& ip, uint16_t port)
    {
        std::string why;
        return *SocketAddress::parse(ip + ":" + std::to_string(port), &why);
    }

    std::string request_host_value(const std::string& host)
    {
        std::string v = random_case(host);
        if (chance(0.3))
            v += ":" + std::to_string(1 + below(65535));
        return v;
    }

    Route route(const Policy& p, size_t index, const Shape& shape)
    {
        Route r;
        r.name = "r" + std::to_string(index);
        if (chance(0.2)) {
            for (const Listener& l : p.listeners)
                if (chance(0.5))
                    r.listeners.push_back(l.name);
            if (r.listeners.empty())
                r.listeners.push_back(p.listeners[0].name);
        }
        if (chance(0.5)) {
            const uint32_t n = 1 + below(3);
            for (uint32_t i = 0; i < n; i++) {
                const std::string& m = pick(kRouteMethods);
                if (std::find(r.match.methods.begin(), r.match.methods.end(), m) == r.match.methods.end())
                    r.match.methods.push_back(m);
            }
        }
        if (chance(0.35))
            r.match.host = pick(kHosts);
        if (shape.unique_paths) {
            r.match.path_kind = PathMatch::Exact;
            r.match.path = "/u/" + std::to_string(index);
        } else if (chance(shape.many_prefix_lengths ? 0.9 : 0.6)) {
            if (chance(shape.many_prefix_lengths ? 0.1 : 0.4)) {
                r.match.path_kind = PathMatch::Exact;
                r.match.path = pick(kPaths);
            } else {
                r.match.path_kind = PathMatch::Prefix;
                r.match.path = shape.many_prefix_lengths && chance(0.8) ? "/p" + std::string(below(60), 'x')
                                                                        : pick(kPrefixes);
            }
        }
        if (chance(0.4)) {
            const uint32_t n = 1 + below(3);
            for (uint32_t i = 0; i < n; i++) {
                HeaderCondition c;
                c.name = shape.many_header_names && chance(0.6) ? "h" + std::to_string(below(24)) : pick(kMatchNames);
                c.name = to_lower(c.name);
                if (std::any_of(r.match.headers.begin(), r.match.headers.end(),
                                [&](const HeaderCondition& x) { return x.name == c.name; }))
                    continue;
                if (std::find(header_names_.begin(), header_names_.end(), c.name) == header_names_.end())
                    header_names_.push_back(c.name);
                c.kind = chance(0.5) ? HeaderCondition::Kind::Present : HeaderCondition::Kind::Exact;
                if (c.kind == HeaderCondition::Kind::Exact)
                    c.value = pick(kValues);
                r.match.headers.push_back(c);
            }
        }
        r.offload = !chance(0.1);
        if (shape.rbac > 0 && chance(shape.rbac))
            r.rbac = rbac(r);
        const uint32_t targets = chance(0.05) ? 9 : chance(0.3) ? 2 + below(2) : 1;
        for (uint32_t i = 0; i < targets; i++) {
            const std::string& name = p.clusters[below(p.clusters.size())].name;
            if (std::none_of(r.clusters.begin(), r.clusters.end(), [&](const WeightedCluster& w) { return w.cluster == name; }))
                r.clusters.push_back({name, targets == 1 ? 1u : below(5)});
        }
        r.clusters[0].weight += r.clusters.size() > 1 ? 1 : 0;
        return r;
    }

    // Rules with the conditions the kernel evaluates, now and then one it
    // does not (the route then goes to user space).
    Rbac rbac(const Route& r)
    {
        Rbac rb;
        rb.mode = chance(0.5) ? Rbac::Mode::FirstMatch : Rbac::Mode::DenyOverrides;
        rb.default_action = chance(0.5) ? RbacRule::Action::Allow : RbacRule::Action::Deny;
        const uint32_t n = below(6);
        for (uint32_t i = 0; i < n; i++) {
            RbacRule rule;
            rule.name = "k" + std::to_string(i);
            rule.action = chance(0.5) ? RbacRule::Action::Allow : RbacRule::Action::Deny;
            RouteMatch& m = rule.when;
            if (chance(0.4)) {
                const uint32_t k = 1 + below(2);
                for (uint32_t j = 0; j < k; j++) {
                    const std::string& x = chance(0.9) ? pick(kRuleMethods) : pick(kRouteMethods);
                    if (std::find(m.methods.begin(), m.methods.end(), x) == m.methods.end())
                        m.methods.push_back(x);
                }
            }
            if (chance(0.5)) {
                const std::string base = r.match.path_kind == PathMatch::Any ? pick(kPrefixes) : r.match.path;
                if (chance(0.4)) {
                    m.path_kind = PathMatch::Exact;
                    m.path = chance(0.5) ? pick(kPaths) : base + pick(kSuffixes);
                } else {
                    m.path_kind = PathMatch::Prefix;
                    m.path = chance(0.5) ? pick(kPrefixes) : base + pick(kSuffixes);
                }
                if (m.path.find('?') != std::string::npos)
                    m.path = m.path.substr(0, m.path.find('?'));
                if (m.path.empty() || m.path[0] != '/')
                    m.path = "/" + m.path;
            }
            if (chance(0.4)) {
                const uint32_t k = 1 + below(2);
                for (uint32_t j = 0; j < k; j++) {
                    HeaderCondition c;
                    c.name = to_lower(chance(0.5) ? pick(kRuleHeaders) : pick(header_names_));
                    if (std::find(header_names_.begin(), header_names_.end(), c.name) == header_names_.end())
                        header_names_.push_back(c.name);
                    c.kind = chance(0.5) ? HeaderCondition::Kind::Present : HeaderCondition::Kind::Exact;
                    if (c.kind == HeaderCondition::Kind::Exact)
                        c.value = pick(kValues);
                    m.headers.push_back(c);
                }
            }
            if (chance(0.04))
                m.headers.push_back({"x-role", HeaderCondition::Kind::Absent, ""});
            if (chance(0.03)) {
                std::string why;
                m.sources.push_back(*Cidr::parse("10.0.0.0/8", &why));
            }
            if (chance(0.03))
                m.query.push_back({"q", QueryCondition::Kind::Present, ""});
            rb.rules.push_back(std::move(rule));
        }
        return rb;
    }

    // Makes the request satisfy (most of) a rule's conditions.
    void aim_at_rule(const RouteMatch& m, Request& rq)
    {
        if (!m.methods.empty() && chance(0.9))
            rq.method = pick(m.methods);
        if (m.path_kind != PathMatch::Any && chance(0.9))
            rq.target = m.path + (m.path_kind == PathMatch::Prefix ? pick(kSuffixes) : "") +
                        (chance(0.3) ? "?q=" + std::to_string(below(10)) : "");
        for (const HeaderCondition& c : m.headers) {
            if (c.kind == HeaderCondition::Kind::Absent || !chance(0.9))
                continue;
            rq.headers.erase(std::remove_if(rq.headers.begin(), rq.headers.end(),
                                            [&](const auto& h) { return to_lower(h.first) == c.name; }),
                             rq.headers.end());
            rq.headers.push_back({random_case(c.name), c.kind == HeaderCondition::Kind::Exact ? c.value : pick(kValues)});
        }
    }

    // Makes the request satisfy (most of) a route's conditions.
    void aim_at(const Route& r, const Policy& p, Request& rq)
    {
        if (!r.listeners.empty() && chance(0.9))
            for (uint32_t i = 0; i < p.listeners.size(); i++)
                if (p.listeners[i].name == r.listeners[0])
                    rq.listener = i;
        if (!r.match.methods.empty() && chance(0.9))
            rq.method = pick(r.match.methods);
        if (r.match.host && chance(0.9)) {
            rq.headers.erase(std::remove_if(rq.headers.begin(), rq.headers.end(),
                                            [](const auto& h) { return to_lower(h.first) == "host"; }),
                             rq.headers.end());
            rq.headers.push_back({random_case("Host"), request_host_value(*r.match.host)});
        }
        if (r.match.path_kind != PathMatch::Any && chance(0.9))
            rq.target = r.match.path + (r.match.path_kind == PathMatch::Prefix ? pick(kSuffixes) : "") +
                        (chance(0.3) ? "?q=" + std::to_string(below(10)) : "");
        for (const HeaderCondition& c : r.match.headers) {
            if (!chance(0.9))
                continue;
            const std::string name = random_case(c.name);
            if (c.kind == HeaderCondition::Kind::Present) {
                rq.headers.push_back({name, pick(kValues)});
            } else if (c.value == "a, b" && chance(0.5)) {
                rq.headers.push_back({name, "a"});  // two field lines that combine to the value
                rq.headers.push_back({random_case(c.name), "b"});
            } else {
                rq.headers.push_back({name, c.value});
            }
        }
    }

    static std::string to_lower(std::string s)
    {
        for (char& c : s)
            c = (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c;
        return s;
    }

    inline static const std::vector<std::string> kRouteMethods{"GET",   "HEAD",  "POST", "PUT",  "DELETE", "PATCH",
                                                               "OPTIONS", "TRACE", "PURGE", "BREW", "M-SEARCH"};
    inline static const std::vector<std::string> kRequestMethods{"GET",   "HEAD",  "POST",  "PUT",     "DELETE",
                                                                 "PATCH", "OPTIONS", "TRACE", "PURGE", "BREW",
                                                                 "CONNECT", "get",  "GETS", "M-SEARCH"};
    inline static const std::vector<std::string> kHosts{"a.example", "b.example", "api.example.com", "[::1]",
                                                        "10.0.0.1",  std::string(257, 'h') + ".example"};
    inline static const std::vector<std::string> kPaths{"/",       "/a",      "/a/b",   "/api",
                                                        "/api/",   "/api/v1", "/healthz", "/static/x.css",
                                                        "/" + std::string(300, 'y'), "/p" + std::string(7, 'x')};
    inline static const std::vector<std::string> kPrefixes{"/",      "/a",       "/api",   "/api/",
                                                           "/api/v1/", "/static/", "/" + std::string(300, 'y')};
    inline static const std::vector<std::string> kSuffixes{"", "", "/", "x", "/v1/users", "?q=1", "?", "1/x"};
    inline static const std::vector<std::string> kMatchNames{"x-a", "x-b", "X-C", "accept", "x-" + std::string(63, 'n')};
    inline static const std::vector<std::string> kRuleMethods{"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS"};
    inline static const std::vector<std::string> kRuleHeaders{"x-role", "x-user", "X-Block", "x-a"};
    inline static const std::vector<std::string> kValues{"1", "2", "", "a, b", "a", "b", std::string(300, 'v')};

    std::mt19937_64 rng_;
    std::vector<std::string> header_names_{"x-a", "x-b", "x-c", "accept", "user-agent"};
};

std::string describe(const Policy& p, const CompiledTables& t, size_t focus)
{
    std::ostringstream os;
    const size_t from = focus > 3 ? focus - 3 : 0;
    for (size_t i = from; i < p.routes.size() && i < focus + 3; i++) {
        const Route& r = p.routes[i];
        const RouteMatch& m = r.match;
        os << "  route " << i << (t.placement[i].kernel ? " [kernel]" : " [user: " + t.placement[i].reason + "]");
        for (const auto& l : r.listeners)
            os << " listener=" << l;
        for (const auto& x : m.methods)
            os << " method=" << x;
        if (m.host)
            os << " host=" << m.host->substr(0, 40);
        if (m.path_kind != PathMatch::Any)
            os << (m.path_kind == PathMatch::Exact ? " path_exact=" : " path_prefix=") << m.path.substr(0, 40);
        for (const auto& h : m.headers)
            os << " hdr " << h.name.substr(0, 20)
               << (h.kind == HeaderCondition::Kind::Present ? " present" : " = \"" + h.value.substr(0, 20) + "\"");
        os << "\n";
    }
    return os.str();
}

std::string describe_rbac(const Rbac& rb)
{
    std::ostringstream os;
    os << "  mode " << (rb.mode == Rbac::Mode::FirstMatch ? "first_match" : "deny_overrides") << ", default "
       << (rb.default_action == RbacRule::Action::Allow ? "allow" : "deny") << "\n";
    for (const RbacRule& rule : rb.rules) {
        const RouteMatch& m = rule.when;
        os << "  " << rule.name << " " << (rule.action == RbacRule::Action::Allow ? "allow" : "deny");
        for (const auto& x : m.methods)
            os << " method=" << x;
        if (m.path_kind != PathMatch::Any)
            os << (m.path_kind == PathMatch::Exact ? " path_exact=" : " path_prefix=") << m.path.substr(0, 40);
        for (const auto& h : m.headers)
            os << " hdr " << h.name.substr(0, 20)
               << (h.kind == HeaderCondition::Kind::Present ? " present"
                   : h.kind == HeaderCondition::Kind::Absent ? " absent"
                                                              : " = \"" + h.value.substr(0, 20) + "\"");
        os << "\n";
    }
    return os.str();
}

struct Tally {
    size_t kernel = 0, no_route = 0, slow = 0;
    size_t rbac_allowed = 0, rbac_denied = 0;  // kernel RBAC decisions
    size_t rbac_answered = 0;                  // of rbac_denied: answered by the kernel
    size_t slow_beyond_kernel_routes = 0;  // slow path, Router picks a route the kernel has no bit for
};

// Checks every request against one policy; returns false after the first
// disagreement (reported through gtest with the case).
bool check_policy(const Policy& policy, const CompiledTables& t, BpfDecider& kernel, const PoolIdFn& pool_id,
                  Generator& gen, size_t requests, Tally& tally)
{
    const Router router(policy);
    EXPECT_TRUE(BpfDecider::unique_string_keys(t)) << "two l7_match entries with one key: one would overwrite the other";
    kernel.install(t);
    for (size_t n = 0; n < requests; n++) {
        const Request rq = gen.request(policy);
        std::vector<HeaderField> fields;
        for (const auto& [name, value] : rq.headers)
            fields.push_back({name, value});
        const std::optional<uint32_t> expected = router.route({rq.method, rq.target, fields, rq.listener});
        // Router::trace (what `l7fastctl explain` shows) agrees with Router,
        // route by route
        const RequestView view{rq.method, rq.target, fields, rq.listener};
        for (uint32_t i = 0; i < policy.routes.size(); i++)
            if (router.trace(i, view).matched != router.matches(i, view)) {
                ADD_FAILURE() << "Router::trace and Router::matches disagree on route " << i << "\nrequest "
                              << rq.str();
                return false;
            }
        std::array<Pick, kPicks> picks;
        for (Pick& p : picks)
            p = {gen.u32(), {gen.u32(), gen.u32()}};
        const Decision d = kernel.decide(rq.wire(), rq.listener, picks);
        switch (d.verdict) {
        case Verdict::SlowPath:
            tally.slow++;
            tally.slow_beyond_kernel_routes += expected && *expected >= L7_MAX_ROUTES;
            break;
        case Verdict::NoRoute:
            tally.no_route++;
            if (expected) {
                ADD_FAILURE() << "kernel: no route; Router: route " << *expected << "\nrequest " << rq.str()
                              << "policy near it:\n" << describe(policy, t, *expected);
                return false;
            }
            break;
        case Verdict::Unauthorized:
            ADD_FAILURE() << "kernel: a 401, where the generated policies have no JWT route\nrequest " << rq.str();
            return false;
        case Verdict::RateLimited:
            ADD_FAILURE() << "kernel: a 429, where the generated policies have no kernel rate limit\nrequest "
                          << rq.str();
            return false;
        case Verdict::RbacDeny:
        case Verdict::Kernel: {
            if (d.verdict == Verdict::Kernel)
                tally.kernel++;
            else
                tally.slow++;
            if (!expected || static_cast<int>(*expected) != d.route) {
                ADD_FAILURE() << "kernel: route " << d.route << "; Router: "
                              << (expected ? "route " + std::to_string(*expected) : "no route") << "\nrequest "
                              << rq.str() << "policy near it:\n" << describe(policy, t, d.route);
                return false;
            }
            const Route& route = policy.routes[d.route];
            if (route.rbac) {
                const RbacDecision ref = evaluate(*route.rbac, {rq.method, rq.target, fields, rq.listener}, nullptr);
                const bool kernel_allows = d.verdict == Verdict::Kernel;
                (kernel_allows ? tally.rbac_allowed : tally.rbac_denied)++;
                if (ref.allowed != kernel_allows) {
                    ADD_FAILURE() << "route " << d.route << ": kernel RBAC " << (kernel_allows ? "allows" : "denies")
                                  << ", Rbac::evaluate " << (ref.allowed ? "allows" : "denies") << " (rule "
                                  << ref.rule << ")\nrequest " << rq.str() << "rules:\n"
                                  << describe_rbac(*route.rbac);
                    return false;
                }
                // a denial the kernel answers counts under the rule that
                // decided, as the slow path's does
                tally.rbac_answered += d.answered;
                if (d.answered && d.rbac_rule != ref.rule) {
                    ADD_FAILURE() << "route " << d.route << ": the kernel's denial names rule " << d.rbac_rule
                                  << ", Rbac::evaluate's rule " << ref.rule << "\nrequest " << rq.str()
                                  << "rules:\n" << describe_rbac(*route.rbac);
                    return false;
                }
            } else if (d.verdict == Verdict::RbacDeny) {
                ADD_FAILURE() << "route " << d.route << " has no RBAC but the kernel denied";
                return false;
            }
            if (d.verdict == Verdict::RbacDeny)
                break;
            // the same upstream for the same random draws: l7_pick_pool
            // draws the cluster among several first, then an endpoint of a
            // weighted cluster
            const bool several = route.clusters.size() > 1;
            for (int i = 0; i < kPicks; i++) {
                const uint32_t r1 = picks[i].random[0], r2 = picks[i].random[several ? 1 : 0];
                const Cluster* c = policy.find_cluster(route.clusters[*Router::choose_cluster(route, r1)].cluster);
                const size_t e = *Router::choose_endpoint(*c, picks[i].rr, r2);
                const auto expected_pool = pool_id(c->endpoints[e].address);
                if (!expected_pool || d.pools[i] != *expected_pool) {
                    ADD_FAILURE() << "route " << d.route << " pick " << i << ": kernel picks pool "
                                  << static_cast<int64_t>(d.pools[i] == kNoPool ? -1 : d.pools[i])
                                  << ", Router cluster " << c->name << " endpoint " << e << " (draws " << r1 << ", "
                                  << r2 << ", rr " << picks[i].rr << ")";
                    return false;
                }
            }
            break;
        }
        }
    }
    return true;
}

struct Pools {
    std::map<SocketAddress, uint32_t> ids;
    double exhausted = 0;  // share of addresses without a pool
    PoolIdFn fn()
    {
        return [this](const SocketAddress& a) -> std::optional<uint32_t> {
            // deterministic per address: the same answer every time it is asked
            if (exhausted > 0 && (a.port * 2654435761u) % 1000 < exhausted * 1000)
                return std::nullopt;
            return ids.emplace(a, static_cast<uint32_t>(ids.size())).first->second;
        };
    }
};

// How often each outcome must occur for a run to be worth something.
struct Coverage {
    double kernel = 0.05, no_route = 0.01, slow = 0.02;
};

// `weak_hash`: string conditions hashed by a hash that collides all the
// time, in the compiler and in the kernel: the compiler must stay sound when
// it gives up on seeds.
void run(const char* label, uint64_t seed, size_t policies, size_t requests, Generator::Shape shape,
         bool weak_hash, size_t max_routes, Coverage coverage = {})
{
    if (geteuid() != 0)
        GTEST_SKIP() << "runs the data plane's decision in the kernel: needs root";
    BpfDecider kernel({.weak_hash = weak_hash});
    CompileOptions options;
    if (weak_hash)
        options.string_hash = BpfDecider::weak_string_hash;
    Generator gen(seed);
    Tally tally;
    size_t user_routes = 0, routes = 0;
    for (size_t i = 0; i < policies; i++) {
        Generator::Shape s = shape;
        s.routes = shape.routes + gen.below(max_routes - shape.routes + 1);
        const Policy p = gen.policy(s);
        Pools pools;
        pools.exhausted = shape.exhausted_pools;
        const CompiledTables t = compile(p, seed + i, pools.fn(), options);
        for (const RoutePlacement& pl : t.placement) {
            routes++;
            user_routes += !pl.kernel;
        }
        if (!check_policy(p, t, kernel, pools.fn(), gen, requests, tally)) {
            ADD_FAILURE() << label << ": policy " << i << " of run seed " << seed;
            return;
        }
    }
    const double total = static_cast<double>(policies * requests);
    std::printf("%s: %zu requests: %zu kernel, %zu no route, %zu slow path; %zu of %zu routes in user space; "
                "kernel RBAC: %zu allowed, %zu denied (%zu answered by the kernel)\n",
                label, tally.kernel + tally.no_route + tally.slow, tally.kernel, tally.no_route, tally.slow, user_routes,
                routes, tally.rbac_allowed, tally.rbac_denied, tally.rbac_answered);
    if (shape.rbac > 0) {
        EXPECT_GE(tally.rbac_allowed, coverage.kernel * total / 4) << label;
        EXPECT_GE(tally.rbac_denied, coverage.kernel * total / 4) << label;
        EXPECT_GE(tally.rbac_answered, tally.rbac_denied / 2) << label;
    }
    EXPECT_GE(tally.kernel, coverage.kernel * total) << label;
    EXPECT_GE(tally.no_route, coverage.no_route * total) << label;
    EXPECT_GE(tally.slow, coverage.slow * total) << label;
    if (shape.routes > L7_MAX_ROUTES) {
        // the last kernel route stands in for the rest: "no route" cannot
        // happen, and the slow path must see the routes beyond
        EXPECT_EQ(tally.no_route, 0u) << label;
        EXPECT_GT(tally.slow_beyond_kernel_routes, 0u) << label;
    }
}

}  // namespace

TEST(CompilerDifferential, SmallPolicies)
{
    run("small", kTestSeed, 300, 300, {.routes = 1}, false, 40);
}

TEST(CompilerDifferential, ManyPrefixLengthsAndHeaderNames)
{
    run("limits", kTestSeed + 1, 150, 300, {.routes = 20, .many_prefix_lengths = true, .many_header_names = true},
        false, 80, {.no_route = 0.0005});
}

TEST(CompilerDifferential, ExhaustedPools)
{
    run("pools", kTestSeed + 2, 100, 300, {.routes = 5, .exhausted_pools = 0.3}, false, 30);
}

TEST(CompilerDifferential, MoreRoutesThanTheKernelHas)
{
    run("overflow", kTestSeed + 3, 4, 3000, {.routes = 1030, .unique_paths = true}, false, 1100, {.no_route = 0});
}

// A hash that collides all the time (BpfDecider::weak_string_hash, in the
// compiler and in the kernel): the compiler must stay sound when it gives up
// on seeds.
TEST(CompilerDifferential, CollidingHash)
{
    run("collisions", kTestSeed + 4, 150, 300, {.routes = 5}, true, 40, {.no_route = 0.005});
}

// RBAC on kernel routes: the rules pass over bitmap space 1 against
// Rbac::evaluate, in both modes and with both defaults.
TEST(CompilerDifferential, RbacRules)
{
    run("rbac", kTestSeed + 5, 300, 300, {.routes = 1, .rbac = 0.7}, false, 30);
}

TEST(CompilerDifferential, RbacRulesWithManyHeaderNames)
{
    run("rbac-limits", kTestSeed + 6, 150, 300,
        {.routes = 20, .many_prefix_lengths = true, .many_header_names = true, .rbac = 0.5}, false, 60,
        {.no_route = 0.0005});
}

TEST(CompilerDifferential, RbacRulesWithCollidingHash)
{
    run("rbac-collisions", kTestSeed + 7, 150, 300, {.routes = 3, .rbac = 0.7}, true, 20,
        {.kernel = 0.01, .no_route = 0.005});
}
