// Differential test: a kernel route's rate limit as the kernel decides it
// (l7_rate_take in bpf/lib/decide.h, run by this kernel in the decision
// harness: tests/support/BpfDecider.hpp) against the reference, the slow
// path's proxy::decide() with its RateLimiter on a shared word: for the same
// bucket state both admit or both refuse; a refusal the kernel answers is
// the reference's 429, byte for byte, and one that asks to close is handed
// to the slow path (rate_limited); a refused take changes neither bucket;
// an admitted one moves both by one token. The harness has no pooled
// connections, so a forwarded request ends as a pool miss, which must give
// its token back. Bucket states are set far from every boundary (a mark
// an hour ahead; five tokens of a thousand), so the time between setting
// and deciding cannot change a verdict. Needs root and BPF.
#include <gtest/gtest.h>

#include <unistd.h>

#include <array>
#include <chrono>
#include <string>
#include <vector>

#include "common/Clock.hpp"
#include "compiler/PolicyCompiler.hpp"
#include "l7_bucket.h"
#include "loader/PolicyLoader.hpp"
#include "proxy/Pipeline.hpp"
#include "proxy/ProxyServer.hpp"
#include "semantics/Responses.hpp"
#include "support/BpfDecider.hpp"

using namespace l7fast;
using namespace l7fast::testing;

namespace {

constexpr uint32_t kRate = 2, kBurst = 1000;
constexpr std::array<uint32_t, 2> kBucket{10, 11};  // the kernel's entries of routes 0 and 1

const char* const kPolicy = R"(
[[listener]]
name = "web"
address = "127.0.0.1:8080"
[[cluster]]
name = "app"
endpoints = [ { address = "127.0.0.1:9001" } ]
[[route]]
name = "direct"
match = { path_prefix = "/d" }
direct_response = { status = 200, body = "ok\n" }
rate_limit = { rate = 2, burst = 1000 }
[[route]]
name = "forward"
match = { path_prefix = "/f" }
cluster = "app"
rate_limit = { rate = 2, burst = 1000 }
)";

// A request as the harness takes it, and as the reference's view.
struct Req {
    std::string wire;
    std::vector<std::pair<std::string, std::string>> lines;
    std::vector<policy::HeaderField> fields;
    policy::RequestView view;
    std::string method = "GET", target;

    Req(std::string path, bool close) : target(std::move(path))
    {
        lines = {{"Host", "test"}};
        if (close)
            lines.push_back({"Connection", "close"});
        wire = method + " " + target + " HTTP/1.1\r\n";
        for (const auto& [k, v] : lines) {
            wire += k + ": " + v + "\r\n";
            fields.push_back({k, v});
        }
        wire += "\r\n";
        view.method = method;
        view.target = target;
        view.headers = fields;
        view.client_family = AF_INET;
        view.client_ip = {127, 0, 0, 1};
    }
};

}  // namespace

TEST(RateLimitKernelDifferential, KernelAndReferenceDecideAlikeOnOneBucketState)
{
    if (geteuid() != 0)
        GTEST_SKIP() << "needs root (BPF)";
    std::unique_ptr<BpfDecider> kernel;
    try {
        kernel = std::make_unique<BpfDecider>();
    } catch (const std::exception& e) {
        GTEST_SKIP() << e.what();
    }
    auto loaded = policy::PolicyLoader::load_string(kPolicy, "rl.toml");
    ASSERT_TRUE(loaded.ok()) << loaded.error_text();

    // the reference: the slow path's limiters, each on its own word
    std::array<__u64, 2> ref_word{};
    size_t next = 0;
    proxy::PolicyRuntime rt;
    rt.router = std::make_shared<policy::Router>(loaded.policy());
    const auto e = proxy::build_pipeline_state(rt, nullptr, [&]() -> std::optional<dataplane::SharedBucket> {
        const size_t i = next++;
        return dataplane::SharedBucket{kBucket.at(i), &ref_word.at(i), nullptr};
    });
    ASSERT_FALSE(e) << e->str();
    ASSERT_EQ(next, 2u);

    policy::CompileOptions options;
    options.rate_bucket = [&rt](size_t r) { return rt.limiters.at(r)->kernel_bucket(); };
    uint32_t pool = 0;
    const policy::CompiledTables t =
        policy::compile(rt.policy(), 1, [&pool](const policy::SocketAddress&) { return pool; }, options);
    ASSERT_TRUE(t.placement[0].kernel && t.placement[1].kernel) << t.placement[0].reason << t.placement[1].reason;
    ASSERT_TRUE(t.placement[0].kernel_limited && t.placement[1].kernel_limited);
    kernel->install(t);

    const std::array<Pick, kPicks> picks{};
    struct State {
        const char* name;
        int64_t tokens;  // milli-tokens the bucket holds now; < 0: a mark that far ahead of the clock
    };
    const std::array<State, 3> states{{{"five tokens", 5000}, {"empty for an hour", -3600LL * kRate * 1000},
                                       {"fresh", 0}}};
    int checked = 0;
    for (uint32_t r = 0; r < 2; r++) {
        for (const State& st : states) {
            for (const bool close : {false, true}) {
                const std::string where = std::string(r ? "/f" : "/d") + ", " + st.name + (close ? ", close" : "");
                const __u64 v = l7_bucket_clock(monotonic_ns(), kRate);
                const __u64 mark = std::string(st.name) == "fresh" ? 0 : v - st.tokens;
                kernel->set_bucket(kBucket[r], mark);
                ref_word[r] = mark;
                Req req(r ? "/f/x" : "/d/x", close);

                const Decision d = kernel->decide(req.wire, 0, picks);
                proxy::RequestAuth auth(rt, req.view, std::chrono::system_clock::now());
                const proxy::Verdict ref = proxy::decide(rt, r, req.view, auth, monotonic_ns());
                const __u64 k_after = kernel->bucket(kBucket[r]);
                ASSERT_EQ(d.route, static_cast<int>(r)) << where;

                if (ref.kind != proxy::Verdict::Kind::RateLimited && mark) {
                    EXPECT_EQ(ref_word[r], mark + 1000) << where << ": the reference took one token";
                }
                if (r == 0 && close) {
                    // the direct response to a request that asks to close is
                    // the slow path's before any token is taken (it takes its own)
                    ASSERT_EQ(d.verdict, Verdict::SlowPath) << where;
                    EXPECT_EQ(d.reason, static_cast<uint32_t>(L7_R_ANSWER_CLOSE)) << where;
                    EXPECT_EQ(k_after, mark) << where;
                } else if (ref.kind == proxy::Verdict::Kind::RateLimited) {
                    ASSERT_EQ(d.verdict, Verdict::RateLimited) << where << ": reason " << d.reason;
                    EXPECT_EQ(d.answered, !close) << where;
                    if (close) {
                        EXPECT_EQ(d.reason, static_cast<uint32_t>(L7_R_RATE_LIMITED)) << where;
                    } else {
                        EXPECT_EQ(std::string(reinterpret_cast<const char*>(t.responses.at(d.response).bytes),
                                              t.responses.at(d.response).len),
                                  policy::too_many_requests(ref.retry_after_ms, false).bytes)
                            << where;
                    }
                    EXPECT_EQ(k_after, mark) << where << ": a refused take changes nothing";
                    EXPECT_EQ(ref_word[r], mark) << where;
                } else if (r == 0) {
                    // the kernel answers the direct response (an answer, no
                    // hand-over reason) and keeps the token it took
                    ASSERT_EQ(d.verdict, Verdict::SlowPath) << where;
                    EXPECT_EQ(d.reason, static_cast<uint32_t>(L7_R_NONE)) << where;
                    if (mark) {
                        EXPECT_EQ(k_after, mark + 1000) << where;
                    } else {
                        EXPECT_NE(k_after, mark) << where;
                    }
                } else {
                    // routed and picked, no connection to claim in the
                    // harness: the pool miss gives the token back
                    ASSERT_EQ(d.verdict, Verdict::Kernel) << where << ": reason " << d.reason;
                    EXPECT_EQ(d.reason, static_cast<uint32_t>(L7_R_POOL_MISS)) << where;
                    if (mark) {
                        EXPECT_EQ(k_after, mark) << where;
                    } else {
                        // a fresh bucket's take clamped it to its capacity
                        // first: given back, it is full again
                        const __u64 now = l7_bucket_clock(monotonic_ns(), kRate);
                        EXPECT_GE(now - k_after, uint64_t{kBurst} * 1000) << where;
                    }
                }
                checked++;
            }
        }
    }
    EXPECT_EQ(checked, 12);
}
