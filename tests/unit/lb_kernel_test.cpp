// The data plane's consistent-hash lookups (bpf/include/l7_lb.h), compiled
// natively, against the daemon's reference (RingHash, Maglev) on random
// keys and on every edge of the tables: the kernel must choose the same
// endpoint as the slow path for every key.
#include <gtest/gtest.h>

#include <limits>
#include <random>
#include <string>
#include <vector>

#include "l7_lb.h"
#include "l7_xxhash.h"
#include "lb/KeyHash.hpp"
#include "lb/Maglev.hpp"
#include "lb/RingHash.hpp"

using l7fast::lb::HashTarget;
using l7fast::lb::Maglev;
using l7fast::lb::RingHash;

namespace {

std::vector<HashTarget> targets(uint32_t n, std::mt19937_64& rng, bool weighted)
{
    std::vector<HashTarget> t;
    for (uint32_t i = 0; i < n; i++)
        t.push_back({"10.1." + std::to_string(i / 250) + "." + std::to_string(i % 250) + ":8080",
                     weighted ? static_cast<uint32_t>(1 + rng() % 5) : 1u});
    return t;
}

// The ring as the daemon will store it in a map value: arrays of the full
// capacity; the slots past n hold junk the search must never use.
struct KernelRing {
    KernelRing(const RingHash& r, std::mt19937_64& rng)
        : hash(L7_LB_RING_MAX), ep(L7_LB_RING_MAX), n(static_cast<__u32>(r.size()))
    {
        for (auto& h : hash)
            h = rng();
        for (auto& e : ep)
            e = static_cast<__u16>(rng());
        std::copy(r.hashes().begin(), r.hashes().end(), hash.begin());
        std::copy(r.endpoints().begin(), r.endpoints().end(), ep.begin());
    }
    std::vector<__u64> hash;
    std::vector<__u16> ep;
    __u32 n;
};

void expect_same_ring_choice(const RingHash& r, std::mt19937_64& rng)
{
    const KernelRing k(r, rng);
    auto check = [&](uint64_t key) {
        ASSERT_EQ(l7_lb_ring_find(k.hash.data(), k.n, key), r.find(key)) << "key " << key;
        ASSERT_EQ(l7_lb_ring_pick(k.hash.data(), k.ep.data(), k.n, key), *r.choose(key))
            << "key " << key;
    };
    check(0);
    check(1);
    check(std::numeric_limits<uint64_t>::max());
    for (uint64_t h : r.hashes()) {
        check(h);
        check(h - 1);
        check(h + 1);
    }
    for (int i = 0; i < 100000; i++)
        check(rng());
}

}  // namespace

TEST(LbKernel, RingLookupEqualsReference)
{
    std::mt19937_64 rng(1);
    struct Case {
        uint32_t endpoints;
        uint64_t min, max;
        bool weighted;
    };
    const std::vector<Case> cases = {
        {1, 1, 1, false},        // a single point
        {2, 3, 3, false},        // 3 points: not a power of two
        {6, 12, 12, false},      // Envoy's "Basic"
        {7, 1024, 8388608, true},
        {100, 1024, 8388608, false},
        {1000, 4096, 8388608, true},
        {5, 32768, 32768, false},
        {8, L7_LB_RING_MAX, L7_LB_RING_MAX, false},          // exactly the capacity
        {9, L7_LB_RING_MAX - 1, L7_LB_RING_MAX - 1, true},   // one below
    };
    for (const auto& c : cases) {
        SCOPED_TRACE(testing::Message() << c.endpoints << " endpoints, ring " << c.min);
        std::string why;
        auto r = RingHash::build(targets(c.endpoints, rng, c.weighted), c.min, c.max, &why);
        ASSERT_TRUE(r) << why;
        ASSERT_LE(r->size(), L7_LB_RING_MAX);
        expect_same_ring_choice(*r, rng);
    }
}

TEST(LbKernel, RingOutsideTheCapacityIsRefused)
{
    std::vector<__u64> hash(L7_LB_RING_MAX, 0);
    std::vector<__u16> ep(L7_LB_RING_MAX, 0);
    EXPECT_EQ(l7_lb_ring_pick(hash.data(), ep.data(), 0, 5), L7_LB_NONE);
    EXPECT_EQ(l7_lb_ring_pick(hash.data(), ep.data(), L7_LB_RING_MAX + 1, 5), L7_LB_NONE);
}

TEST(LbKernel, MaglevLookupEqualsReference)
{
    std::mt19937_64 rng(2);
    for (uint64_t size : std::vector<uint64_t>{2, 7, 17, 257, 65521, 65537}) {
        for (uint32_t n : {1u, 3u, 6u, 100u}) {
            SCOPED_TRACE(testing::Message() << n << " endpoints, table " << size);
            std::string why;
            auto m = Maglev::build(targets(n, rng, n % 2 == 1), size, &why);
            ASSERT_TRUE(m) << why;
            std::vector<__u16> table(L7_LB_MAGLEV_MAX, 0xdead);
            std::copy(m->table().begin(), m->table().end(), table.begin());
            const auto sz = static_cast<__u32>(size);
            for (uint64_t key : std::vector<uint64_t>{0, 1, size - 1, size, ~0ull})
                ASSERT_EQ(l7_lb_maglev_pick(table.data(), sz, key), *m->choose(key)) << key;
            for (int i = 0; i < 20000; i++) {
                const uint64_t key = rng();
                ASSERT_EQ(l7_lb_maglev_pick(table.data(), sz, key), *m->choose(key)) << key;
            }
        }
    }
    std::vector<__u16> table(L7_LB_MAGLEV_MAX, 0);
    EXPECT_EQ(l7_lb_maglev_pick(table.data(), 0, 5), L7_LB_NONE);
    EXPECT_EQ(l7_lb_maglev_pick(table.data(), L7_LB_MAGLEV_MAX + 2, 5), L7_LB_NONE);
}

// End to end on a request head: the key hashed where the parser left it
// (l7_xxh64_window) and looked up, against the slow path's key_hash() and
// choose().
TEST(LbKernel, KeyInTheRequestHeadChoosesLikeTheSlowPath)
{
    std::mt19937_64 rng(3);
    std::string why;
    auto r = RingHash::build(targets(10, rng, true), 1024, 8388608, &why);
    auto m = Maglev::build(targets(10, rng, true), 65537, &why);
    ASSERT_TRUE(r && m);
    const KernelRing k(*r, rng);
    std::vector<__u16> table(L7_LB_MAGLEV_MAX);
    std::copy(m->table().begin(), m->table().end(), table.begin());

    std::vector<__u8> buf(L7_WS_BUF + L7_WINDOW_SLACK);
    for (int i = 0; i < 2000; i++) {
        const std::string user = "u" + std::to_string(rng() % 100000) + std::string(rng() % 80, 'x');
        const std::string head = "GET / HTTP/1.1\r\nHost: a\r\nX-User: " + user + "\r\n\r\n";
        std::copy(head.begin(), head.end(), buf.begin());
        l7_window w{buf.data(), static_cast<__u32>(head.size()), 0};
        const auto off = static_cast<__u32>(head.find(user));
        const __u64 h = l7_xxh64_window(&w, off, static_cast<__u32>(user.size()), 0);
        ASSERT_EQ(h, l7fast::lb::key_hash(user));
        ASSERT_EQ(l7_lb_ring_pick(k.hash.data(), k.ep.data(), k.n, h), *r->choose(h));
        ASSERT_EQ(l7_lb_maglev_pick(table.data(), 65537, h), *m->choose(h));
    }
}
