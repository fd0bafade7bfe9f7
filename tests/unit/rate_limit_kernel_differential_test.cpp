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
#include <cstring>
#include <string>
#include <vector>

#include "common/Clock.hpp"
#include "compiler/PolicyCompiler.hpp"
#include "dataplane/Dataplane.hpp"
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

// a listener and the cluster "app" of one endpoint
const std::string kHead = R"(
[[listener]]
name = "web"
address = "127.0.0.1:8080"
[[cluster]]
name = "app"
endpoints = [ { address = "127.0.0.1:9001" } ]
)";

const std::string kPolicy = kHead + R"(
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

    Req(std::string path, bool close, std::vector<std::pair<std::string, std::string>> extra = {})
        : target(std::move(path))
    {
        lines = {{"Host", "test"}};
        if (close)
            lines.push_back({"Connection", "close"});
        lines.insert(lines.end(), extra.begin(), extra.end());
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

// The decision harness, loaded for each test (skipped where it cannot be).
class RateLimitKernelDifferential : public ::testing::Test {
protected:
    void SetUp() override
    {
        if (geteuid() != 0)
            GTEST_SKIP() << "needs root (BPF)";
        try {
            kernel = std::make_unique<BpfDecider>();
        } catch (const std::exception& e) {
            GTEST_SKIP() << e.what();
        }
    }
    std::unique_ptr<BpfDecider> kernel;
};

}  // namespace

TEST_F(RateLimitKernelDifferential, KernelAndReferenceDecideAlikeOnOneBucketState)
{
    auto loaded = policy::PolicyLoader::load_string(kPolicy, "rl.toml");
    ASSERT_TRUE(loaded.ok()) << loaded.error_text();

    // the reference: the slow path's limiters, each on its own word
    std::array<__u64, 2> ref_word{};
    size_t next = 0;
    proxy::PolicyRuntime rt;
    rt.router = std::make_shared<policy::Router>(loaded.policy());
    const auto e = proxy::build_pipeline_state(rt, nullptr,
                                               [&](std::optional<uint32_t>) -> std::optional<dataplane::SharedBucket> {
                                                   const size_t i = next++;
                                                   dataplane::SharedBucket b;
                                                   b.id = kBucket.at(i);
                                                   b.state = &ref_word.at(i);
                                                   return b;
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

namespace {

const std::string kKeyedPolicy = kHead + R"(
[[route]]
name = "by-user"
match = { path_prefix = "/d" }
direct_response = { status = 200, body = "ok\n" }
rate_limit = { rate = 2, burst = 1000, key = { header = "x-user" }, max_keys = 100 }
[[route]]
name = "by-address"
match = { path_prefix = "/f" }
cluster = "app"
rate_limit = { rate = 2, burst = 1000, key = { source_ip = true } }
[[route]]
name = "by-cookie"
match = { path_prefix = "/c" }
cluster = "app"
rate_limit = { rate = 2, burst = 1000, key = { cookie = "s" } }
)";

l7_rate_key rate_key(std::string_view bytes)
{
    l7_rate_key k{};
    std::memcpy(k.word, bytes.data(), bytes.size());
    k.len = static_cast<__u32>(bytes.size());
    return k;
}

}  // namespace

// Keyed rate limits: the kernel (l7_rate_key_of, l7_rate_take on the key's
// bucket in l7_rate_keys) and the slow path's RateLimiter on the same
// tables (a real BucketTable over the harness's maps; the slow path takes
// with l7_rate_take_user) count every request of a key once, whichever path
// serves it; keys are apart; a request without the key takes from the
// keyless bucket; a key longer than the kernel keeps is the slow path's,
// kernel tables untouched; a cookie key places the route in user space.
TEST_F(RateLimitKernelDifferential, KeyedLimitsShareEachKeysBucketWithTheSlowPath)
{
    auto loaded = policy::PolicyLoader::load_string(kKeyedPolicy, "rl.toml");
    ASSERT_TRUE(loaded.ok()) << loaded.error_text();

    const auto table = std::make_shared<dataplane::BucketTable>(kernel->buckets_fd(), L7_MAX_BUCKETS,
                                                                kernel->rate_keys_fd(), kernel->rate_take_fd());
    proxy::PolicyRuntime rt;
    rt.router = std::make_shared<policy::Router>(loaded.policy());
    const auto e = proxy::build_pipeline_state(
        rt, nullptr, [&](std::optional<uint32_t> max_keys) { return table->lease(max_keys); });
    ASSERT_FALSE(e) << e->str();
    ASSERT_TRUE(rt.limiters.at(0)->kernel_keys());
    ASSERT_TRUE(rt.limiters.at(1)->kernel_keys());
    ASSERT_FALSE(rt.limiters.at(2)->kernel_keys()) << "the kernel keeps no cookie keys";
    ASSERT_EQ(table->leased(), 2u) << "no kernel bucket for a limit the kernel cannot key";

    policy::CompileOptions options;
    options.rate_bucket = [&rt](size_t r) { return rt.limiters.at(r)->kernel_bucket(); };
    uint32_t pool = 0;
    const policy::CompiledTables t =
        policy::compile(rt.policy(), 1, [&pool](const policy::SocketAddress&) { return pool; }, options);
    ASSERT_TRUE(t.placement[0].kernel && t.placement[1].kernel) << t.placement[0].reason << t.placement[1].reason;
    ASSERT_FALSE(t.placement[2].kernel);
    EXPECT_EQ(t.placement[2].reason, "rate limits keyed by a cookie run in user space");
    kernel->install(t);
    const uint32_t b_user = *rt.limiters[0]->kernel_bucket(), b_addr = *rt.limiters[1]->kernel_bucket();

    const std::array<Pick, kPicks> picks{};
    auto kernel_decides = [&](const Req& req) { return kernel->decide(req.wire, 0, picks); };
    auto slow_path_decides = [&](uint32_t route, const Req& req) {
        proxy::RequestAuth auth(rt, req.view, std::chrono::system_clock::now());
        return proxy::decide(rt, route, req.view, auth, monotonic_ns());
    };
    // a mark `tokens` milli-tokens behind the clock (far from the capacity:
    // no take is clamped, so each moves the mark by exactly 1000); < 0: that
    // far ahead (empty)
    auto mark_of = [](int64_t tokens) { return l7_bucket_clock(monotonic_ns(), kRate) - tokens; };

    // --- a header key, the kernel answering (direct response) ---
    const l7_rate_key alice = rate_key("alice"), bob = rate_key("bob");
    const __u64 a0 = mark_of(5000), b0 = mark_of(-3600LL * kRate * 1000), keyless0 = mark_of(5000);
    kernel->set_key_bucket(b_user, alice, a0);
    kernel->set_key_bucket(b_user, bob, b0);
    kernel->set_bucket(b_user, keyless0);

    Decision d = kernel_decides(Req("/d/1", false, {{"X-User", "alice"}}));
    EXPECT_EQ(d.route, 0);
    EXPECT_EQ(d.reason, static_cast<uint32_t>(L7_R_NONE)) << "the kernel answers";
    EXPECT_EQ(kernel->key_bucket(b_user, alice), a0 + 1000) << "the kernel took alice's token";
    proxy::Verdict v = slow_path_decides(0, Req("/d/2", false, {{"X-User", "alice"}}));
    EXPECT_EQ(v.kind, proxy::Verdict::Kind::Direct);
    EXPECT_EQ(kernel->key_bucket(b_user, alice), a0 + 2000) << "the slow path took alice's next one there";

    d = kernel_decides(Req("/d/3", false, {{"X-User", "bob"}}));
    ASSERT_EQ(d.verdict, Verdict::RateLimited) << "reason " << d.reason;
    EXPECT_TRUE(d.answered);
    v = slow_path_decides(0, Req("/d/4", false, {{"X-User", "bob"}}));
    ASSERT_EQ(v.kind, proxy::Verdict::Kind::RateLimited);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(t.responses.at(d.response).bytes), t.responses.at(d.response).len),
              policy::too_many_requests(v.retry_after_ms, false).bytes);
    EXPECT_EQ(kernel->key_bucket(b_user, bob), b0) << "refusals change nothing";
    // bob asking to close: the slow path's 429, on the same (empty) bucket
    d = kernel_decides(Req("/d/5", true, {{"X-User", "bob"}}));
    EXPECT_EQ(d.reason, static_cast<uint32_t>(L7_R_ANSWER_CLOSE));
    EXPECT_EQ(slow_path_decides(0, Req("/d/5", true, {{"X-User", "bob"}})).kind, proxy::Verdict::Kind::RateLimited);

    // a key seen for the first time gets a full bucket of its own, on either path
    d = kernel_decides(Req("/d/6", false, {{"X-User", "carol"}}));
    EXPECT_EQ(d.reason, static_cast<uint32_t>(L7_R_NONE));
    ASSERT_TRUE(kernel->key_bucket(b_user, rate_key("carol")));
    EXPECT_EQ(slow_path_decides(0, Req("/d/7", false, {{"X-User", "dave"}})).kind, proxy::Verdict::Kind::Direct);
    EXPECT_TRUE(kernel->key_bucket(b_user, rate_key("dave"))) << "the slow path made dave's bucket in the kernel";
    // no key: the keyless bucket, on either path
    EXPECT_EQ(kernel_decides(Req("/d/8", false)).reason, static_cast<uint32_t>(L7_R_NONE));
    EXPECT_EQ(slow_path_decides(0, Req("/d/9", false)).kind, proxy::Verdict::Kind::Direct);
    EXPECT_EQ(kernel->bucket(b_user), keyless0 + 2000);
    EXPECT_EQ(kernel->key_bucket(b_user, alice), a0 + 2000) << "other keys untouched";
    EXPECT_EQ(kernel->key_bucket(b_user, bob), b0);

    // a key of 64 bytes is the kernel's; one of 65 the slow path's alone
    const std::string k64(64, 'k'), k65(65, 'k');
    EXPECT_EQ(kernel_decides(Req("/d/10", false, {{"X-User", k64}})).reason, static_cast<uint32_t>(L7_R_NONE));
    EXPECT_TRUE(kernel->key_bucket(b_user, rate_key(k64)));
    d = kernel_decides(Req("/d/11", false, {{"X-User", k65}}));
    EXPECT_EQ(d.verdict, Verdict::SlowPath);
    EXPECT_EQ(d.reason, static_cast<uint32_t>(L7_R_RATE_KEY));
    EXPECT_EQ(slow_path_decides(0, Req("/d/11", false, {{"X-User", k65}})).kind, proxy::Verdict::Kind::Direct);

    // --- the source address, forwarded (a pool miss gives the token back) ---
    for (const bool v6 : {false, true}) {
        std::array<uint8_t, 16> ip{};
        std::string bytes;
        Req req("/f/x", false);
        if (v6) {
            ip = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7};
            kernel->set_client(AF_INET6, ip);
            req.view.client_family = AF_INET6;
            req.view.client_ip = ip;
            bytes.assign(reinterpret_cast<const char*>(ip.data()), 16);
        } else {
            ip = {10, 1, 2, 3};
            kernel->set_client(AF_INET, ip);
            req.view.client_family = AF_INET;
            req.view.client_ip = {10, 1, 2, 3};
            bytes.assign(reinterpret_cast<const char*>(ip.data()), 4);
        }
        const std::string where = v6 ? "IPv6" : "IPv4";
        const l7_rate_key me = rate_key(bytes);
        const __u64 m0 = mark_of(5000);
        kernel->set_key_bucket(b_addr, me, m0);
        d = kernel_decides(req);
        ASSERT_EQ(d.verdict, Verdict::Kernel) << where << ": reason " << d.reason;
        EXPECT_EQ(d.reason, static_cast<uint32_t>(L7_R_POOL_MISS)) << where;
        EXPECT_EQ(kernel->key_bucket(b_addr, me), m0) << where << ": the pool miss gave the token back";
        EXPECT_EQ(slow_path_decides(1, req).kind, proxy::Verdict::Kind::Forward) << where;
        EXPECT_EQ(kernel->key_bucket(b_addr, me), m0 + 1000) << where << ": the slow path took it there";
        kernel->set_key_bucket(b_addr, me, mark_of(-3600LL * kRate * 1000));
        d = kernel_decides(req);
        EXPECT_EQ(d.verdict, Verdict::RateLimited) << where << ": reason " << d.reason;
        EXPECT_EQ(slow_path_decides(1, req).kind, proxy::Verdict::Kind::RateLimited) << where;
    }

    // a lease's end removes its table
    rt.limiters.clear();
    EXPECT_EQ(table->leased(), 0u);
    EXPECT_THROW(kernel->key_bucket(b_user, alice), std::runtime_error);
}
