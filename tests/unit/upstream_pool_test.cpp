// UpstreamPool without a data plane (its shared words in plain memory),
// against a real listening socket on loopback: request timeouts of kernel
// exchanges, growth of kernel pools, and the slow path's own connections.
#include <gtest/gtest.h>

#include <time.h>

#include <chrono>
#include <functional>
#include <optional>
#include <vector>

#include "proxy/UpstreamPool.hpp"

using namespace l7fast;
using proxy::KernelExchangeEnd;
using proxy::UpstreamPool;
using proxy::UpstreamPtr;

namespace {

uint64_t now_ns()
{
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

struct UpstreamPoolTest : ::testing::Test {
    asio::io_context io;
    tcp::acceptor acceptor{io, tcp::endpoint(asio::ip::address_v4::loopback(), 0)};
    std::vector<tcp::socket> accepted;
    std::vector<KernelExchangeEnd> ends;
    UpstreamPool pool{io, nullptr, [this](KernelExchangeEnd e) { ends.push_back(std::move(e)); }};
    uint32_t pool_id = 0;

    void SetUp() override
    {
        std::string why;
        auto a = policy::SocketAddress::parse(
            "127.0.0.1:" + std::to_string(acceptor.local_endpoint().port()), &why);
        ASSERT_TRUE(a) << why;
        pool_id = pool.pool_id_for(*a).value();
        pool.set_limits(1, 1, std::chrono::milliseconds(1000));
        accept_forever();
    }

    void accept_forever()
    {
        acceptor.async_accept([this](error_code ec, tcp::socket s) {
            if (ec)
                return;
            accepted.push_back(std::move(s));
            accept_forever();
        });
    }

    // Runs the io_context until done() holds; false only after a deadline a
    // real hang reaches. The waits are for loopback connects and accepts,
    // which a busy machine delays, never prevents: a bound on handlers run
    // or on 10 ms rounds would be a bound on time.
    bool run_until(const std::function<bool()>& done)
    {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        while (!done() && std::chrono::steady_clock::now() < deadline)
            io.run_one_for(std::chrono::milliseconds(10));
        return done();
    }

    UpstreamPtr acquire()
    {
        std::optional<UpstreamPtr> out;
        asio::co_spawn(io, [this, &out]() -> awaitable<void> {
            error_code ec;
            UpstreamPtr c = co_await pool.acquire(pool_id, ec);
            EXPECT_FALSE(ec) << ec.message();
            out = c;
        }, asio::detached);
        run_until([&] { return out.has_value(); });
        return out.value_or(nullptr);
    }

    // The first IDLE kernel slot, L7_NO_SLOT if none is.
    uint32_t idle_slot() const
    {
        for (uint32_t s = 0; s < L7_MAX_SLOTS; s++)
            if (pool.slot_state(s) == L7_SLOT_IDLE)
                return s;
        return L7_NO_SLOT;
    }

    // A kernel route's pool opens its one slot (pool_min_idle = 1,
    // pool_max = 1); its id once IDLE, L7_NO_SLOT if it never opened.
    uint32_t warm_one_slot()
    {
        pool.set_kernel_pools({{0, {pool_id}}});
        pool.warm_all();
        run_until([&] { return idle_slot() != L7_NO_SLOT; });
        EXPECT_EQ(pool.figures(pool_id).slots, 1u);
        return idle_slot();
    }
};

}  // namespace

TEST_F(UpstreamPoolTest, KernelExchangeTimesOutOnlyWhenSeenStaleTwice)
{
    const uint32_t id = warm_one_slot();
    ASSERT_NE(id, L7_NO_SLOT);
    uint64_t* st = pool.state_word(id);
    const auto timeout = std::chrono::milliseconds(1000);
    auto stamp = [&](uint32_t uses, uint64_t start) {
        l7_slot s = pool.slot(id).value();
        s.uses = uses;
        s.req_start_ns = start;
        ASSERT_TRUE(pool.slot_write(id, s));
    };

    // The data plane claimed the slot but has not stamped the request yet:
    // the stamp is the previous request's, long past.
    *st = L7_SLOT_KBUSY;
    stamp(5, now_ns() - 10'000'000'000ull);
    pool.sweep(timeout);
    EXPECT_TRUE(ends.empty());
    EXPECT_EQ(*st, L7_SLOT_KBUSY);

    // ... and stamps it: a fresh exchange, nothing to time out.
    stamp(6, now_ns());
    pool.sweep(timeout);
    EXPECT_TRUE(ends.empty());

    // A real timeout: the same stale stamp on two consecutive sweeps.
    stamp(6, now_ns() - 5'000'000'000ull);
    pool.sweep(timeout);
    EXPECT_TRUE(ends.empty());
    pool.sweep(timeout);
    ASSERT_EQ(ends.size(), 1u);
    EXPECT_EQ(ends[0].kind, KernelExchangeEnd::Kind::Failed);
    EXPECT_EQ(ends[0].status, 504);
    // retired, and a replacement is being opened for the kernel
    EXPECT_NE(*st, L7_SLOT_KBUSY);
}

// The data plane's events can be lost (a full ring while the daemon is
// stalled): the sweep does what a RELAY or DEAD event would have asked.
TEST_F(UpstreamPoolTest, SweepTakesUpWhatALostEventAsked)
{
    const uint32_t id = warm_one_slot();
    ASSERT_NE(id, L7_NO_SLOT);
    uint64_t* st = pool.state_word(id);
    const auto timeout = std::chrono::milliseconds(1000);

    // a hand-over whose event never came: relayed at the next sweep, once
    *st = L7_SLOT_RELAY;
    pool.sweep(timeout);
    ASSERT_EQ(ends.size(), 1u);
    EXPECT_EQ(ends[0].kind, KernelExchangeEnd::Kind::Relay);
    ASSERT_TRUE(ends[0].conn);
    EXPECT_TRUE(ends[0].conn->socket().is_open());
    pool.on_slot_event(id);  // the late event: already done
    pool.sweep(timeout);
    EXPECT_EQ(ends.size(), 1u);
    EXPECT_EQ(*st, L7_SLOT_RELAY);

    // the relay ends, the slot is idle again; then the data plane declares
    // it DEAD and the event is lost: retired and replaced at the next sweep
    pool.finish_relay(ends[0].conn, true);
    ASSERT_EQ(*st, L7_SLOT_IDLE);
    *st = L7_SLOT_DEAD;
    pool.sweep(timeout);
    EXPECT_EQ(ends.size(), 1u);  // no exchange was in flight
    EXPECT_NE(*st, L7_SLOT_DEAD);
    EXPECT_TRUE(run_until([&] { return idle_slot() != L7_NO_SLOT; }));
    EXPECT_EQ(pool.figures(pool_id).slots, 1u);
}

TEST_F(UpstreamPoolTest, SlowPathUsesConnectionsOfItsOwn)
{
    // the kernel's slot of this pool is open and idle ...
    pool.set_kernel_pools({{0, {pool_id}}});
    pool.warm_all();
    run_until([&] { return pool.figures(pool_id).idle >= 1; });
    ASSERT_EQ(pool.figures(pool_id).idle, 1u);

    // ... and the slow path never takes it: its connections are its own
    UpstreamPtr a = acquire();
    ASSERT_TRUE(a);
    EXPECT_EQ(a->slot_id(), L7_NO_SLOT);
    EXPECT_EQ(pool.figures(pool_id).idle, 1u);
    UpstreamPtr b = acquire();
    ASSERT_TRUE(b);
    EXPECT_EQ(b->slot_id(), L7_NO_SLOT);
    EXPECT_EQ(pool.figures(pool_id).private_open, 2u);
    EXPECT_EQ(pool.open_connections(), 3u);

    // a reusable one is kept idle and reused
    pool.release(b, true);
    UpstreamPtr again = acquire();
    EXPECT_EQ(again, b);
    EXPECT_EQ(pool.open_connections(), 3u);

    // an idle one the upstream closes is dropped
    pool.release(again, true);
    run_until([&] { return accepted.size() >= 3; });
    ASSERT_EQ(accepted.size(), 3u);
    accepted[2].close();
    run_until([&] { return pool.open_connections() == 2; });
    EXPECT_EQ(pool.open_connections(), 2u);

    // one that is not reusable is closed, not kept
    pool.release(a, false);
    EXPECT_EQ(pool.open_connections(), 1u);
    EXPECT_EQ(pool.figures(pool_id).private_open, 0u);
}

TEST_F(UpstreamPoolTest, AcceptedClientsAndMissesGrowTheKernelPool)
{
    pool.set_limits(1, 64, std::chrono::milliseconds(1000));
    pool.set_kernel_pools({{7, {pool_id}}});
    auto settle = [&](uint32_t want) { run_until([&] { return pool.figures(pool_id).idle >= want; }); };
    // pre-warming: 10 clients on listener 7 get 10 connections + pool_min_idle,
    // opened kMaxConnecting at a time (nothing has run yet: all connecting)
    pool.on_client_accepted(7, 10);
    EXPECT_EQ(pool.figures(pool_id).slots, UpstreamPool::kMaxConnecting);
    EXPECT_EQ(pool.figures(pool_id).idle, 0u);
    settle(11);
    EXPECT_EQ(pool.figures(pool_id).slots, 11u);
    EXPECT_EQ(pool.figures(pool_id).chunks, 1u);
    // another listener's clients do not grow this pool
    pool.on_client_accepted(8, 40);
    EXPECT_EQ(pool.figures(pool_id).slots, 11u);
    // a miss doubles it (the kernel raised the flag; it is cleared)
    pool.shared_pool(pool_id)->miss = 1;
    pool.on_pool_miss(pool_id);
    settle(22);
    EXPECT_EQ(pool.figures(pool_id).slots, 22u);
    EXPECT_EQ(pool.shared_pool(pool_id)->miss, 0u);
    // every idle slot is marked in the pool's hints, in its chunk's word
    const l7_pool* sp = pool.shared_pool(pool_id);
    ASSERT_EQ(sp->n_chunks, 1u);
    EXPECT_EQ(__builtin_popcountll(sp->idle[0]), 22);
    // pool_max bounds it across chunks
    pool.on_client_accepted(7, 500);
    settle(64);
    EXPECT_EQ(pool.figures(pool_id).slots, 64u);
    EXPECT_EQ(pool.figures(pool_id).chunks, 1u);
}
