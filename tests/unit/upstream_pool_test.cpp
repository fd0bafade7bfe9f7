// UpstreamPool without a data plane (plain slot memory), against a real
// listening socket on loopback: request timeouts of kernel exchanges and the
// slow path's overflow connections.
#include <gtest/gtest.h>

#include <time.h>

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
        pool.set_limits(0, 1, std::chrono::milliseconds(1000));
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

    UpstreamPtr acquire()
    {
        std::optional<UpstreamPtr> out;
        asio::co_spawn(io, [this, &out]() -> awaitable<void> {
            error_code ec;
            UpstreamPtr c = co_await pool.acquire(pool_id, ec);
            EXPECT_FALSE(ec) << ec.message();
            out = c;
        }, asio::detached);
        for (int i = 0; i < 1000 && !out; i++)
            io.run_one_for(std::chrono::milliseconds(10));
        return out.value_or(nullptr);
    }
};

}  // namespace

TEST_F(UpstreamPoolTest, KernelExchangeTimesOutOnlyWhenSeenStaleTwice)
{
    UpstreamPtr c = acquire();
    ASSERT_TRUE(c);
    uint32_t id = c->slot_id();
    ASSERT_NE(id, L7_NO_SLOT);
    l7_slot* s = pool.slot(id);
    const auto timeout = std::chrono::milliseconds(1000);

    // The data plane claimed the slot but has not stamped the request yet:
    // the stamp is the previous request's, long past.
    s->state = L7_SLOT_KBUSY;
    s->uses = 5;
    s->req_start_ns = now_ns() - 10'000'000'000ull;
    pool.sweep(timeout);
    EXPECT_TRUE(ends.empty());
    EXPECT_EQ(s->state, L7_SLOT_KBUSY);

    // ... and stamps it: a fresh exchange, nothing to time out.
    s->uses = 6;
    s->req_start_ns = now_ns();
    pool.sweep(timeout);
    EXPECT_TRUE(ends.empty());

    // A real timeout: the same stale stamp on two consecutive sweeps.
    s->req_start_ns = now_ns() - 5'000'000'000ull;
    pool.sweep(timeout);
    EXPECT_TRUE(ends.empty());
    pool.sweep(timeout);
    ASSERT_EQ(ends.size(), 1u);
    EXPECT_EQ(ends[0].kind, KernelExchangeEnd::Kind::Failed);
    EXPECT_EQ(ends[0].status, 504);
    EXPECT_EQ(s->state, L7_SLOT_EMPTY);
}

TEST_F(UpstreamPoolTest, SlowPathOverflowsWhenEverySlotIsBusy)
{
    UpstreamPtr a = acquire();
    ASSERT_TRUE(a);
    EXPECT_NE(a->slot_id(), L7_NO_SLOT);
    // pool_max = 1: the second connection is an overflow connection
    UpstreamPtr b = acquire();
    ASSERT_TRUE(b);
    EXPECT_EQ(b->slot_id(), L7_NO_SLOT);
    EXPECT_EQ(pool.open_connections(), 2u);

    // a reusable overflow connection is kept idle and reused
    pool.release(b, true);
    UpstreamPtr again = acquire();
    EXPECT_EQ(again, b);
    EXPECT_EQ(pool.open_connections(), 2u);

    // an idle overflow connection the upstream closes is dropped
    pool.release(again, true);
    for (int i = 0; i < 100 && accepted.size() < 2; i++)
        io.run_one_for(std::chrono::milliseconds(10));
    ASSERT_EQ(accepted.size(), 2u);
    accepted[1].close();
    for (int i = 0; i < 100 && pool.open_connections() != 1; i++)
        io.run_one_for(std::chrono::milliseconds(10));
    EXPECT_EQ(pool.open_connections(), 1u);

    // a connection that is not reusable is closed, not kept
    UpstreamPtr c = acquire();
    ASSERT_TRUE(c);
    EXPECT_EQ(c->slot_id(), L7_NO_SLOT);
    EXPECT_EQ(pool.open_connections(), 2u);
    pool.release(c, false);
    EXPECT_EQ(pool.open_connections(), 1u);
}
