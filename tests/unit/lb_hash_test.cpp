// Ring hash, Maglev and bounded load (daemon/src/lb): the concrete rings and
// tables Envoy's own tests print (test/extensions/load_balancing_policies/
// {ring_hash,maglev}/*_test.cc), remapping and weight statistics, and the
// cluster-level builder with its kernel placement rule.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "l7_lb.h"
#include "lb/HashBalancer.hpp"
#include "lb/KeyHash.hpp"
#include "lb/Maglev.hpp"
#include "lb/RingHash.hpp"

using l7fast::lb::BoundedLoad;
using l7fast::lb::HashBalancer;
using l7fast::lb::HashTarget;
using l7fast::lb::Maglev;
using l7fast::lb::RingHash;

namespace {

constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();

std::vector<HashTarget> ports(uint32_t first, uint32_t last, std::vector<uint32_t> weights = {})
{
    std::vector<HashTarget> t;
    for (uint32_t p = first; p <= last; p++)
        t.push_back({"127.0.0.1:" + std::to_string(p),
                     weights.empty() ? 1 : weights[p - first]});
    return t;
}

RingHash ring(const std::vector<HashTarget>& t, uint64_t min_size,
              uint64_t max_size = RingHash::kMaxRingSize)
{
    std::string why;
    auto r = RingHash::build(t, min_size, max_size, &why);
    EXPECT_TRUE(r) << why;
    return r ? std::move(*r) : RingHash{};
}

Maglev maglev(const std::vector<HashTarget>& t, uint64_t size)
{
    std::string why;
    auto m = Maglev::build(t, size, &why);
    EXPECT_TRUE(m) << why;
    return m ? std::move(*m) : Maglev{};
}

uint64_t min_of(const std::vector<uint64_t>& v) { return *std::min_element(v.begin(), v.end()); }
uint64_t max_of(const std::vector<uint64_t>& v) { return *std::max_element(v.begin(), v.end()); }

// Envoy's sweeps: hashes i * (2^64 - 1) / n for i < n.
std::vector<uint32_t> sweep(const RingHash& r, uint32_t n, size_t endpoints)
{
    std::vector<uint32_t> counts(endpoints);
    for (uint32_t i = 0; i < n; i++)
        counts[*r.choose(i * (kMax / n))]++;
    return counts;
}

}  // namespace

// ---- ring hash ------------------------------------------------------------------

TEST(RingHash, EnvoyBasicRing)
{
    const auto r = ring(ports(90, 95), 12);
    EXPECT_EQ(r.target_size(), 12u);
    ASSERT_EQ(r.size(), 12u);
    EXPECT_EQ(min_of(r.points_per_endpoint()), 2u);
    EXPECT_EQ(max_of(r.points_per_endpoint()), 2u);
    // port | position, as Envoy prints the ring
    const std::vector<std::pair<uint32_t, uint64_t>> expected = {
        {94, 833437586790550860ULL},   {92, 928266305478181108ULL},
        {90, 1033482794131418490ULL},  {95, 3551244743356806947ULL},
        {93, 3851675632748031481ULL},  {91, 5583722120771150861ULL},
        {91, 6311230543546372928ULL},  {93, 7700377290971790572ULL},
        {95, 13144177310400110813ULL}, {92, 13444792449719432967ULL},
        {94, 15516499411664133160ULL}, {90, 16117243373044804889ULL},
    };
    for (size_t i = 0; i < expected.size(); i++) {
        EXPECT_EQ(r.hashes()[i], expected[i].second) << i;
        EXPECT_EQ(r.endpoints()[i], expected[i].first - 90) << i;
    }
    EXPECT_EQ(r.choose(0), 4u);
    EXPECT_EQ(r.choose(kMax), 4u);
    EXPECT_EQ(r.choose(3551244743356806947ULL), 5u);
    EXPECT_EQ(r.choose(3551244743356806948ULL), 3u);
    EXPECT_EQ(r.choose(16117243373044804880ULL), 0u);
}

// Envoy's "BasicWithHostname": the same code with the names "90".."95".
TEST(RingHash, EnvoyRingOfOtherNames)
{
    std::vector<HashTarget> t;
    for (int p = 90; p <= 95; p++)
        t.push_back({std::to_string(p), 1});
    const auto r = ring(t, 12);
    const std::vector<uint64_t> expected = {
        1975508444536362413ULL,  2376063919839173711ULL,  2386806903309390596ULL,
        6749904478991551885ULL,  6803900775736438537ULL,  7225015537174310577ULL,
        8787465352164086522ULL,  11282020843382717940ULL, 13723418369486627818ULL,
        13776502110861797421ULL, 14338313586354474791ULL, 15364271037087512980ULL,
    };
    EXPECT_TRUE(std::equal(r.hashes().begin(), r.hashes().end(), expected.begin(), expected.end()));
    EXPECT_EQ(r.choose(0), 5u);
    EXPECT_EQ(r.choose(kMax), 5u);
    EXPECT_EQ(r.choose(7225015537174310577ULL), 2u);
    EXPECT_EQ(r.choose(6803900775736438537ULL), 3u);
}

TEST(RingHash, EnvoyUnevenHosts)
{
    const auto r = ring(ports(80, 81), 3);
    EXPECT_EQ(r.size(), 4u);
    const std::vector<uint64_t> expected = {5454692015285649509ULL, 7859399908942313493ULL,
                                            13838424394637650569ULL, 16064866803292627174ULL};
    EXPECT_TRUE(std::equal(r.hashes().begin(), r.hashes().end(), expected.begin(), expected.end()));
    EXPECT_EQ(r.choose(0), 0u);

    const auto r2 = ring(ports(81, 82), 3);
    const std::vector<uint64_t> expected2 = {7859399908942313493ULL, 8241336090459785962ULL,
                                             12882406409176325258ULL, 16064866803292627174ULL};
    EXPECT_TRUE(std::equal(r2.hashes().begin(), r2.hashes().end(), expected2.begin(), expected2.end()));
    EXPECT_EQ(r2.choose(0), 0u);
}

TEST(RingHash, EnvoyHostWeightedTinyRing)
{
    const auto r = ring(ports(90, 92, {1, 2, 3}), 6, 6);
    EXPECT_EQ(r.size(), 6u);
    EXPECT_EQ(r.points_per_endpoint(), (std::vector<uint64_t>{1, 2, 3}));
    const std::map<uint64_t, uint32_t> expected = {
        {928266305478181108ULL, 2},  {4443673547860492590ULL, 2},  {5583722120771150861ULL, 1},
        {6311230543546372928ULL, 1}, {13444792449719432967ULL, 2}, {16117243373044804889ULL, 0}};
    for (const auto& [hash, ep] : expected)
        EXPECT_EQ(r.choose(hash), ep) << hash;
}

TEST(RingHash, EnvoyHostWeightedLargeRing)
{
    const auto r = ring(ports(90, 92, {1, 2, 3}), 6144);
    EXPECT_EQ(r.size(), 6144u);
    EXPECT_EQ(r.points_per_endpoint(), (std::vector<uint64_t>{1024, 2048, 3072}));
    EXPECT_EQ(sweep(r, 6000, 3), (std::vector<uint32_t>{987, 1932, 3081}));
}

TEST(RingHash, EnvoySmallFractionalScale)
{
    const auto r = ring(ports(90, 93), 2, 2);
    EXPECT_EQ(r.size(), 2u);
    EXPECT_EQ(min_of(r.points_per_endpoint()), 0u);
    EXPECT_EQ(max_of(r.points_per_endpoint()), 1u);
    const auto counts = sweep(r, 1024, 4);
    EXPECT_EQ(std::count(counts.begin(), counts.end(), 0u), 2);
}

TEST(RingHash, EnvoyLargeFractionalScale)
{
    const auto r = ring(ports(90, 91), 1023, 1023);
    EXPECT_EQ(r.size(), 1023u);
    EXPECT_EQ(min_of(r.points_per_endpoint()), 511u);
    EXPECT_EQ(max_of(r.points_per_endpoint()), 512u);
    EXPECT_EQ(sweep(r, 1023, 2), (std::vector<uint32_t>{526, 497}));
}

// Envoy's "LopsidedWeightSmallScale" uses locality weights 127:1 over hosts
// :0 and :1..:1023; host weights 129921 (= 127 * 1023) and 1 normalise to the
// very same doubles (127/128 and 2^-7/1023).
TEST(RingHash, EnvoyLopsidedWeightSmallScale)
{
    std::vector<HashTarget> t = ports(0, 1023);
    t[0].weight = 129921;
    const auto r = ring(t, 1024, 1024);
    EXPECT_EQ(r.size(), 1024u);
    EXPECT_EQ(min_of(r.points_per_endpoint()), 0u);
    EXPECT_EQ(r.points_per_endpoint()[0], 1016u);
    const std::map<uint64_t, uint32_t> expected = {
        {11664790346325243808ULL, 1},   {15894554872961148518ULL, 128},
        {13958138884277627155ULL, 256}, {15803774069438192949ULL, 384},
        {3829253010855396576ULL, 512},  {17918147347826565154ULL, 640},
        {6442769608292299103ULL, 768},  {5881074926069334434ULL, 896}};
    for (const auto& [hash, ep] : expected)
        EXPECT_EQ(r.choose(hash), ep) << hash;
}

TEST(RingHash, RejectsBadBoundsAndWeights)
{
    std::string why;
    EXPECT_FALSE(RingHash::build(ports(90, 91), 20, 10, &why));
    EXPECT_EQ(why, "ring hash: minimum ring size (20) > maximum ring size (10)");
    EXPECT_FALSE(RingHash::build(ports(90, 91), 0, 10, &why));
    EXPECT_FALSE(RingHash::build(ports(90, 91), 10, RingHash::kMaxRingSize + 1, &why));
    EXPECT_FALSE(RingHash::build(ports(90, 91, {1, 0}), 10, 100, &why));
    EXPECT_NE(why.find("weight 0"), std::string::npos) << why;
    EXPECT_FALSE(RingHash::build(ports(90, 91, {0xffffffffu, 1}), 10, 100, &why));
}

TEST(RingHash, EmptyRingChoosesNothing)
{
    const auto r = ring({}, 1024);
    EXPECT_TRUE(r.empty());
    EXPECT_FALSE(r.choose(42));
    EXPECT_FALSE(r.fits_kernel());
}

TEST(RingHash, DeterministicAndOrderIndependentForEqualWeights)
{
    auto t = ports(1000, 1009);
    const auto a = ring(t, 1024);
    const auto b = ring(t, 1024);
    EXPECT_TRUE(std::equal(a.hashes().begin(), a.hashes().end(), b.hashes().begin(), b.hashes().end()));
    EXPECT_TRUE(std::equal(a.endpoints().begin(), a.endpoints().end(), b.endpoints().begin(),
                           b.endpoints().end()));
    // listing the endpoints in another order places every one where it was
    std::reverse(t.begin(), t.end());
    const auto c = ring(t, 1024);
    ASSERT_EQ(a.size(), c.size());
    for (size_t i = 0; i < a.size(); i++) {
        EXPECT_EQ(a.hashes()[i], c.hashes()[i]);
        EXPECT_EQ(a.endpoints()[i], 9 - c.endpoints()[i]);
    }
}

// ---- Maglev ---------------------------------------------------------------------

namespace {

void expect_table(const Maglev& m, const std::vector<uint32_t>& expected)
{
    ASSERT_EQ(m.table_size(), expected.size());
    for (uint64_t i = 0; i < 3 * expected.size(); i++)
        EXPECT_EQ(m.choose(i), expected[i % expected.size()]) << "hash " << i;
}

}  // namespace

TEST(Maglev, EnvoyBasic)
{
    const auto m = maglev(ports(90, 95), 7);
    expect_table(m, {2, 4, 0, 1, 5, 0, 3});
    EXPECT_EQ(min_of(m.slots_per_endpoint()), 1u);
    EXPECT_EQ(max_of(m.slots_per_endpoint()), 2u);
}

TEST(Maglev, EnvoyOtherNames)
{
    std::vector<HashTarget> t;
    for (int p = 90; p <= 95; p++)
        t.push_back({std::to_string(p), 1});
    expect_table(maglev(t, 7), {2, 5, 0, 3, 4, 1, 0});
}

TEST(Maglev, EnvoyWeighted)
{
    const auto m = maglev(ports(90, 91, {1, 2}), 17);
    expect_table(m, {1, 0, 0, 1, 0, 1, 1, 0, 1, 1, 1, 1, 1, 0, 1, 0, 1});
    EXPECT_EQ(m.slots_per_endpoint(), (std::vector<uint64_t>{6, 11}));
}

// Envoy's locality-weighted cases with host weights that normalise to the
// same doubles: 1:1 and 0.8:0.2.
TEST(Maglev, EnvoyLocalityEquivalents)
{
    const auto same = maglev(ports(90, 91), 17);
    expect_table(same, {1, 0, 0, 1, 0, 1, 1, 0, 0, 1, 0, 1, 0, 0, 1, 0, 1});
    EXPECT_EQ(same.slots_per_endpoint(), (std::vector<uint64_t>{9, 8}));
    const auto different = maglev(ports(90, 91, {4, 1}), 17);
    expect_table(different, {1, 0, 0, 0, 0, 0, 1, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0});
    EXPECT_EQ(different.slots_per_endpoint(), (std::vector<uint64_t>{13, 4}));
}

TEST(Maglev, EnvoyLopsided)
{
    std::vector<HashTarget> t = ports(0, 1023);
    t[0].weight = 129921;
    const auto m = maglev(t, Maglev::kDefaultTableSize);
    EXPECT_EQ(m.slots_per_endpoint()[0], Maglev::kDefaultTableSize - 1023);
    for (uint32_t i = 1; i < 1024; i++)
        ASSERT_EQ(m.slots_per_endpoint()[i], 1u) << i;
}

TEST(Maglev, StableUnderReordering)
{
    auto t = ports(90, 95);
    const auto a = maglev(t, 7);
    std::shuffle(t.begin(), t.end(), std::mt19937(3));
    const auto b = maglev(t, 7);
    for (uint64_t i = 0; i < 7; i++)
        EXPECT_EQ(t[*b.choose(i)].name, "127.0.0.1:" + std::to_string(90 + *a.choose(i)));
}

TEST(Maglev, SingleEndpointAndErrors)
{
    const auto one = maglev(ports(90, 90, {7}), 17);
    for (uint64_t i = 0; i < 17; i++)
        EXPECT_EQ(one.choose(i), 0u);
    std::string why;
    EXPECT_FALSE(Maglev::build(ports(90, 91), 8, &why));
    EXPECT_EQ(why, "maglev: table size 8 is not a prime number");
    EXPECT_FALSE(Maglev::build(ports(90, 91), 1, &why));
    EXPECT_FALSE(Maglev::build(ports(90, 91), 5000077, &why));  // prime, above Envoy's bound
    EXPECT_FALSE(maglev({}, 7).choose(1));
}

// ---- properties of both ---------------------------------------------------------

namespace {

template <typename Table>
double moved_fraction(const Table& before, const Table& after, uint32_t removed, size_t keys,
                      double* moved_elsewhere)
{
    std::mt19937_64 rng(99);
    size_t moved = 0, stray = 0;
    for (size_t i = 0; i < keys; i++) {
        const uint64_t h = l7fast::lb::key_hash("user-" + std::to_string(rng()));
        const uint32_t a = *before.choose(h);
        uint32_t b = *after.choose(h);
        b = b >= removed ? b + 1 : b;  // indexes after the removed endpoint shift down
        if (a != b) {
            moved++;
            if (a != removed)
                stray++;
        }
    }
    *moved_elsewhere = static_cast<double>(stray) / static_cast<double>(keys);
    return static_cast<double>(moved) / static_cast<double>(keys);
}

}  // namespace

// Removing one of N endpoints moves about 1/N of the keys. With the same
// number of points per endpoint before and after, a ring moves exactly the
// removed endpoint's keys; with a fixed minimum ring size (Envoy's scaling
// keeps the ring size, so the survivors get more points each: 103 -> 114
// here) some keys also move between survivors. Maglev's table keeps its
// size too and moves a little more than 1/N, as the paper says.
TEST(ConsistentHash, RemovingOneOfTenMovesAboutATenth)
{
    constexpr size_t kKeys = 100000;
    auto all = ports(2000, 2009);
    auto fewer = all;
    fewer.erase(fewer.begin() + 3);
    double stray = 0;

    double moved = moved_fraction(ring(all, 1000), ring(fewer, 900), 3, kKeys, &stray);
    EXPECT_GT(moved, 0.07);
    EXPECT_LT(moved, 0.13);
    EXPECT_EQ(stray, 0.0);

    moved = moved_fraction(ring(all, 1024), ring(fewer, 1024), 3, kKeys, &stray);
    EXPECT_GT(moved, 0.07);
    EXPECT_LT(moved, 0.2);
    EXPECT_LT(stray, 0.08);

    moved = moved_fraction(maglev(all, 65537), maglev(fewer, 65537), 3, kKeys, &stray);
    EXPECT_GT(moved, 0.07);
    EXPECT_LT(moved, 0.15);
    EXPECT_LT(stray, 0.03);
}

TEST(ConsistentHash, WeightsAreRespected)
{
    constexpr size_t kKeys = 100000;
    const auto t = ports(3000, 3003, {1, 2, 3, 4});
    const auto r = ring(t, 4096);
    const auto m = maglev(t, 65537);
    std::vector<size_t> on_ring(4), in_table(4);
    std::mt19937_64 rng(5);
    for (size_t i = 0; i < kKeys; i++) {
        const uint64_t h = l7fast::lb::key_hash(std::to_string(rng()));
        on_ring[*r.choose(h)]++;
        in_table[*m.choose(h)]++;
    }
    for (size_t i = 0; i < 4; i++) {
        const double expected = kKeys * (i + 1) / 10.0;
        EXPECT_NEAR(on_ring[i], expected, expected * 0.15) << "ring endpoint " << i;
        EXPECT_NEAR(in_table[i], expected, expected * 0.05) << "maglev endpoint " << i;
        EXPECT_NEAR(m.slots_per_endpoint()[i], 65537 * (i + 1) / 10.0, 65537 * 0.01) << i;
    }
}

// ---- bounded load ---------------------------------------------------------------

TEST(BoundedLoad, EnvoySlotArithmetic)
{
    const BoundedLoad b({0.25, 0.25, 0.25, 0.25}, 150);
    // cluster_active 7: total slots ceil(8 * 1.5) = 12, 3 per endpoint
    EXPECT_DOUBLE_EQ(b.overload(0, 3, 7), 1.0);
    EXPECT_DOUBLE_EQ(b.overload(0, 4, 7), 4.0 / 3.0);
    // an idle cluster still gives every endpoint one slot
    EXPECT_DOUBLE_EQ(b.overload(1, 1, 0), 1.0);
}

TEST(BoundedLoad, KeepsTheHashedEndpointUnlessOverloaded)
{
    const BoundedLoad b({0.25, 0.25, 0.25, 0.25}, 150);
    std::vector<uint32_t> active = {3, 4, 4, 4};
    auto count = [&](uint32_t e) { return active[e]; };
    EXPECT_EQ(b.choose(12345, 0, count, 15), 0u);
    // 11 active: 5 slots each; only endpoint 3 has room
    active = {6, 6, 6, 0};
    for (uint64_t h = 0; h < 100; h++)
        EXPECT_EQ(b.choose(h, 1, count, 11), 3u);
    // everything overloaded: the least overloaded
    active = {9, 9, 7, 8};
    EXPECT_EQ(b.choose(77, 0, count, 3), 2u);
}

TEST(BoundedLoad, ProbeOrderDependsOnlyOnTheHash)
{
    std::vector<double> w(16, 1.0 / 16);
    const BoundedLoad b(w, 125);
    std::vector<uint32_t> active(16, 0);
    active[5] = 100;
    auto count = [&](uint32_t e) { return active[e]; };
    std::map<uint32_t, int> seen;
    for (uint64_t h = 0; h < 2000; h++) {
        const uint32_t first = b.choose(h, 5, count, 100);
        EXPECT_NE(first, 5u);
        EXPECT_EQ(b.choose(h, 5, count, 100), first);
        seen[first]++;
    }
    // a random jump, not "the next endpoint": the overflow spreads out
    EXPECT_EQ(seen.size(), 15u);
}

// ---- the cluster-level builder --------------------------------------------------

namespace {

l7fast::policy::Cluster cluster(l7fast::policy::LbPolicy lb, int endpoints)
{
    l7fast::policy::Cluster c;
    c.name = "c";
    c.lb = lb;
    for (int i = 0; i < endpoints; i++) {
        std::string why;
        auto a = l7fast::policy::SocketAddress::parse("127.0.0.1:" + std::to_string(90 + i), &why);
        c.endpoints.push_back({*a, 1});
    }
    return c;
}

}  // namespace

TEST(HashBalancer, BuildsFromTheClusterAsEnvoyWould)
{
    auto c = cluster(l7fast::policy::LbPolicy::RingHash, 6);
    c.ring_min_size = 12;
    std::string why;
    auto b = HashBalancer::build(c, &why);
    ASSERT_TRUE(b) << why;
    ASSERT_TRUE(b->ring());
    EXPECT_EQ(b->choose(3551244743356806947ULL), 5u);
    EXPECT_FALSE(b->kernel_refusal());

    auto m = cluster(l7fast::policy::LbPolicy::Maglev, 6);
    m.maglev_table_size = 7;
    b = HashBalancer::build(m, &why);
    ASSERT_TRUE(b) << why;
    ASSERT_TRUE(b->maglev());
    EXPECT_EQ(b->choose(1), 4u);
}

TEST(HashBalancer, KernelPlacement)
{
    std::string why;
    auto c = cluster(l7fast::policy::LbPolicy::RingHash, 3);
    c.ring_min_size = L7_LB_RING_MAX;  // 3 * ceil(65536 / 3) points: too many
    auto b = HashBalancer::build(c, &why);
    ASSERT_TRUE(b) << why;
    EXPECT_GT(b->ring()->size(), L7_LB_RING_MAX);
    EXPECT_NE(b->kernel_refusal().value_or("").find("ring of"), std::string::npos);

    c.ring_min_size = c.ring_max_size = L7_LB_RING_MAX;  // exactly the capacity
    b = HashBalancer::build(c, &why);
    ASSERT_TRUE(b) << why;
    EXPECT_EQ(b->ring()->size(), L7_LB_RING_MAX);
    EXPECT_FALSE(b->kernel_refusal());

    auto m = cluster(l7fast::policy::LbPolicy::Maglev, 3);
    b = HashBalancer::build(m, &why);  // default 65537
    ASSERT_TRUE(b) << why;
    EXPECT_FALSE(b->kernel_refusal());
    m.maglev_table_size = 131071;
    b = HashBalancer::build(m, &why);
    ASSERT_TRUE(b) << why;
    EXPECT_TRUE(b->kernel_refusal());

    m.maglev_table_size = 65537;
    m.hash_balance_factor = 150;
    b = HashBalancer::build(m, &why);
    ASSERT_TRUE(b) << why;
    EXPECT_TRUE(b->bounded());
    EXPECT_NE(b->kernel_refusal().value_or("").find("bounded load"), std::string::npos);

    EXPECT_TRUE(HashBalancer::build(cluster(l7fast::policy::LbPolicy::Maglev, 0), &why)->kernel_refusal());
}

TEST(HashBalancer, BoundedChoiceUsesActiveCounts)
{
    auto c = cluster(l7fast::policy::LbPolicy::Maglev, 4);
    c.hash_balance_factor = 100;
    std::string why;
    auto b = HashBalancer::build(c, &why);
    ASSERT_TRUE(b) << why;
    const uint64_t h = l7fast::lb::key_hash("session-1");
    const uint32_t home = *b->choose(h);
    std::vector<uint32_t> active(4, 0);
    auto count = [&](uint32_t e) { return active[e]; };
    EXPECT_EQ(b->choose(h, count), home);
    active[home] = 10;  // 11 active in all: 3 slots each at factor 100
    EXPECT_NE(b->choose(h, count), home);
    EXPECT_EQ(b->choose(h, count, 1000), home);  // plenty of room cluster-wide
}

TEST(HashBalancer, RejectsWhatEnvoyRejects)
{
    std::string why;
    auto c = cluster(l7fast::policy::LbPolicy::RoundRobin, 2);
    EXPECT_FALSE(HashBalancer::build(c, &why));
    c.lb = l7fast::policy::LbPolicy::RingHash;
    c.hash_balance_factor = 99;
    EXPECT_FALSE(HashBalancer::build(c, &why));
    EXPECT_NE(why.find("at least 100"), std::string::npos) << why;
    c.hash_balance_factor = 0;
    c.ring_min_size = 10;
    c.ring_max_size = 5;
    EXPECT_FALSE(HashBalancer::build(c, &why));
    c.lb = l7fast::policy::LbPolicy::Maglev;
    c.maglev_table_size = 65536;
    EXPECT_FALSE(HashBalancer::build(c, &why));
    EXPECT_NE(why.find("not a prime"), std::string::npos) << why;
}
