// Differential: the kernel's route choice — the data plane's request
// decision (bpf/lib/decide.h: parser, matcher, RBAC, upstream pick) run by
// this kernel over tables the daemon's own writer filled
// (tests/support/BpfDecider.hpp) — against the Router, the reference the
// slow path uses, for a policy and a request that both come from the input.
//
// Input: policy TOML, a line "%%", then one control byte (listener index,
// random draws) and the request bytes.
//
// The slow path's view follows ClientSession: the request as the slow
// path's parser reads it, and a path the parser flags as not in normal form
// normalised before the Router sees it (the kernel hands such requests
// over).
//
// Invariants: whenever the kernel would act on a route itself it is the
// Router's route, its RBAC rules decide as semantics/Rbac's evaluate() does, and
// with the same random draws it picks the same upstream pool;
// when the kernel finds no route the Router finds none either. Hand-offs to
// the slow path may go anywhere (the slow path asks the Router itself).
// Needs root and BPF, in the unit tests' replay too.
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "FuzzTarget.hpp"
#include "semantics/PathNormalize.hpp"
#include "loader/PolicyLoader.hpp"
#include "semantics/Rbac.hpp"
#include "semantics/Router.hpp"
#include "proxy/Http.hpp"
#include "support/BpfDecider.hpp"

namespace l7fast::fuzz {

using namespace l7fast::policy;
using namespace l7fast::testing;

int match_diff(const uint8_t* data, size_t size)
{
    const std::string_view in(reinterpret_cast<const char*>(data), size);
    const size_t sep = in.find("\n%%\n");
    if (sep == std::string_view::npos || sep + 5 > in.size())
        return 0;
    const PolicyLoadResult loaded = PolicyLoader::load_string(in.substr(0, sep + 1), "fuzz.toml");
    if (!loaded.ok() || loaded.policy().listeners.empty())
        return 0;
    const Policy& policy = loaded.policy();
    const uint8_t ctl = static_cast<uint8_t>(in[sep + 4]);
    const std::string_view bytes = in.substr(sep + 5);

    l7_msg m{};
    if (proxy::parse_head({bytes.data(), bytes.size()}, true, &m) != L7_P_OK || m.hdr_len > L7_SCRATCH_SIZE)
        return 0;  // the kernel hands these to the slow path whole
    const std::string_view head = bytes.substr(0, m.hdr_len);

    // the parser's result as the Router sees it
    std::vector<HeaderField> fields;
    for (uint32_t i = 0; i < m.n_hdrs && i < L7_MAX_HEADERS; i++) {
        const l7_hdr& h = m.hdr[i];
        fields.push_back({head.substr(h.name_off, h.name_len), head.substr(h.val_off, h.val_len)});
    }
    RequestView view;
    view.method = head.substr(0, head.find(' '));
    view.target = head.substr(m.target_off, m.target_len);
    // the slow path matches a path not in normal form normalised
    // (ClientSession::run), or answers 400
    NormalizedTarget normal;
    if (m.flags & L7_MF_PATH_NOT_NORMAL) {
        normal = normalize_target(view.target);
        if (!normal.error.empty())
            return 0;
        view.target = normal.target;
    }
    view.headers = fields;
    view.listener = ctl % policy.listeners.size();

    std::map<SocketAddress, uint32_t> pools;
    const PoolIdFn pool_id = [&](const SocketAddress& a) -> std::optional<uint32_t> {
        return pools.emplace(a, static_cast<uint32_t>(pools.size())).first->second;
    };
    const CompiledTables t = compile(policy, 0x6d61746368ULL + ctl, pool_id);
    FUZZ_CHECK(BpfDecider::unique_string_keys(t));
    static BpfDecider kernel;  // loaded once: the verifier's time is not the input's
    kernel.install(t);
    const Router router(policy);
    const std::optional<uint32_t> expected = router.route(view);
    std::array<Pick, kPicks> picks;
    for (uint32_t i = 0; i < kPicks; i++)
        picks[i] = {ctl + 7u * i, {ctl * 2654435761u + i, (ctl + i) * 40503u}};
    const Decision d = kernel.decide(bytes, view.listener, picks);

    switch (d.verdict) {
    case Verdict::SlowPath:
        break;
    case Verdict::NoRoute:
        FUZZ_CHECK(!expected);
        break;
    case Verdict::Unauthorized:
        FUZZ_CHECK(false);  // the generated policies have no JWT route
        break;
    case Verdict::RateLimited:
        FUZZ_CHECK(false);  // nor a kernel rate limit
        break;
    case Verdict::RbacDeny:
    case Verdict::Kernel: {
        FUZZ_CHECK(expected && static_cast<int>(*expected) == d.route);
        const Route& route = policy.routes[d.route];
        // the kernel's RBAC pass decides as semantics/Rbac does
        if (route.rbac) {
            const RbacDecision ref = evaluate(*route.rbac, view, nullptr);
            FUZZ_CHECK(ref.allowed == (d.verdict == Verdict::Kernel));
            // a denial the kernel answers names the rule that decided
            FUZZ_CHECK(!d.answered || d.rbac_rule == ref.rule);
        } else
            FUZZ_CHECK(d.verdict == Verdict::Kernel);
        if (d.verdict == Verdict::RbacDeny)
            break;
        // l7_pick_pool draws the cluster among several first, then an
        // endpoint of a weighted cluster
        const bool several = route.clusters.size() > 1;
        for (uint32_t i = 0; i < kPicks; i++) {
            const uint32_t r1 = picks[i].random[0], r2 = picks[i].random[several ? 1 : 0];
            const auto ci = Router::choose_cluster(route, r1);
            FUZZ_CHECK(ci);
            const Cluster* c = policy.find_cluster(route.clusters[*ci].cluster);
            FUZZ_CHECK(c);
            if (c->lb != LbPolicy::RoundRobin && c->lb != LbPolicy::Weighted) {
                // hash-based choice (the lb tests' business): one of the cluster's
                bool ours = false;
                for (const Endpoint& ep : c->endpoints)
                    ours = ours || pools.at(ep.address) == d.pools[i];
                FUZZ_CHECK(ours);
                continue;
            }
            const auto e = Router::choose_endpoint(*c, picks[i].rr, r2);
            FUZZ_CHECK(e);
            FUZZ_CHECK(d.pools[i] == pools.at(c->endpoints[*e].address));
        }
        break;
    }
    }
    return 0;
}

}  // namespace l7fast::fuzz

L7FAST_FUZZ_ENTRY(match_diff)
