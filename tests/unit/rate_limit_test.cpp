// Rate limits: the token-bucket arithmetic shared with the data plane
// (bpf/include/l7_bucket.h) and the slow path's keyed buckets
// (proxy/RateLimiter).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>
#include <string>
#include <thread>

#include "l7_bucket.h"
#include "common/Clock.hpp"
#include "proxy/RateLimiter.hpp"

using l7fast::policy::RateLimit;
using l7fast::policy::RateLimiter;

namespace {

constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kSec = 1000 * kMs;
constexpr uint64_t kT0 = 5 * kSec;  // any non-zero start

}  // namespace

namespace {

// milli-tokens a bucket holds at now_ns
uint64_t held(__u64 b, uint64_t now_ns, uint32_t rate, uint32_t burst)
{
    const uint64_t v = l7_bucket_clock(now_ns, rate);
    return std::min<uint64_t>(v > b ? v - b : 0, uint64_t{burst} * 1000);
}

}  // namespace

TEST(Bucket, FreshBucketStartsFull)
{
    __u64 b = 0;
    for (int i = 0; i < 3; i++)
        EXPECT_EQ(l7_bucket_take(&b, kT0, 1, 3), 0u) << i;
    EXPECT_EQ(held(b, kT0, 1, 3), 0u);
    EXPECT_EQ(l7_bucket_take(&b, kT0, 1, 3), 1000u) << "one token per second: a second to wait";
    __u64 empty = 0;
    EXPECT_EQ(l7_bucket_take(&empty, kT0, 5, 0), L7_BUCKET_NEVER);
    __u64 at_boot = 0;
    EXPECT_EQ(l7_bucket_take(&at_boot, 0, 1, 1'000'000), 0u) << "full even at clock 0";
    EXPECT_EQ(held(at_boot, 0, 1, 1'000'000), 999'999'000u);
}

TEST(Bucket, ExactRefill)
{
    __u64 b = 0;
    ASSERT_EQ(l7_bucket_take(&b, kT0, 10, 1), 0u);
    // 10 tokens/s: 10 milli-tokens per millisecond
    EXPECT_EQ(l7_bucket_take(&b, kT0 + 99 * kMs, 10, 1), 1u) << "990 milli-tokens: 10 missing, 1 ms";
    EXPECT_EQ(held(b, kT0 + 99 * kMs, 10, 1), 990u) << "a refused take changes nothing";
    EXPECT_EQ(l7_bucket_take(&b, kT0 + 100 * kMs, 10, 1), 0u);
    EXPECT_EQ(held(b, kT0 + 100 * kMs, 10, 1), 0u);
}

TEST(Bucket, RetryAfterIsRoundedUp)
{
    __u64 b = 0;
    ASSERT_EQ(l7_bucket_take(&b, kT0, 3, 1), 0u);
    EXPECT_EQ(l7_bucket_take(&b, kT0, 3, 1), 334u) << "1000 milli-tokens at 3 per ms";
    EXPECT_EQ(l7_bucket_take(&b, kT0 + 333 * kMs, 3, 1), 1u) << "999 of 1000";
    EXPECT_EQ(l7_bucket_take(&b, kT0 + 334 * kMs, 3, 1), 0u);
    EXPECT_EQ(held(b, kT0 + 334 * kMs, 3, 1), 0u) << "refilled to the burst of one token, then taken";
}

TEST(Bucket, BurstCapsTheRefill)
{
    __u64 b = 0;
    for (int i = 0; i < 5; i++)
        ASSERT_EQ(l7_bucket_take(&b, kT0, 100, 5), 0u);
    ASSERT_NE(l7_bucket_take(&b, kT0, 100, 5), 0u);
    // an hour later the bucket holds 5 tokens, not 360000
    const uint64_t later = kT0 + 3600 * kSec;
    for (int i = 0; i < 5; i++)
        EXPECT_EQ(l7_bucket_take(&b, later, 100, 5), 0u) << i;
    EXPECT_EQ(l7_bucket_take(&b, later, 100, 5), 10u);
}

TEST(Bucket, FractionsOfAMilliTokenAreCarriedOver)
{
    // 1 token/s is 0.001 milli-tokens per µs: calls every 500 µs each refill
    // less than one milli-token, and the token still arrives after exactly
    // one second
    __u64 b = 0;
    ASSERT_EQ(l7_bucket_take(&b, kT0, 1, 1), 0u);
    for (uint64_t k = 1; k < 2000; k++)
        ASSERT_NE(l7_bucket_take(&b, kT0 + k * 500'000, 1, 1), 0u) << k;
    EXPECT_EQ(l7_bucket_take(&b, kT0 + kSec, 1, 1), 0u);
    // at 3 tokens/s a token takes 333.33 ms: three in exactly one second
    __u64 c = 0;
    ASSERT_EQ(l7_bucket_take(&c, kT0, 3, 1), 0u);
    int taken = 0;
    for (uint64_t us = 1; us <= 1'000'000; us++)
        taken += l7_bucket_take(&c, kT0 + us * 1000, 3, 1) == 0;
    EXPECT_EQ(taken, 3);
}

TEST(Bucket, NoOverflowAtTheLimits)
{
    // the policy's largest rate and burst, 100 years of uptime
    const uint32_t max = 1'000'000;
    const uint64_t cap = uint64_t{max} * 1000;
    const uint64_t century = 100ULL * 365 * 24 * 3600 * kSec;
    __u64 b = 0;
    ASSERT_EQ(l7_bucket_take(&b, century, max, max), 0u);
    EXPECT_EQ(held(b, century, max, max), cap - 1000);
    EXPECT_GT(l7_bucket_clock(century, max), l7_bucket_clock(century - 1, max));
    EXPECT_LT(l7_bucket_clock(century, max), uint64_t{1} << 63);
    // fastest refill into a one-token bucket: 1 ns refills 1 milli-token
    __u64 f = 0;
    ASSERT_EQ(l7_bucket_take(&f, kT0, max, 1), 0u);
    EXPECT_EQ(l7_bucket_take(&f, kT0 + 1, max, 1), 1u) << "at least 1 ms";
    EXPECT_EQ(l7_bucket_take(&f, kT0 + 1000, max, 1), 0u) << "1 µs: a token";
}

TEST(Bucket, AMarkAheadOfTheClockIsAnEmptyBucket)
{
    // another taker read a later clock: nothing is refilled before it
    __u64 b = 0;
    ASSERT_EQ(l7_bucket_take(&b, kT0, 1, 1), 0u);
    EXPECT_EQ(l7_bucket_take(&b, kT0 - kSec, 1, 1), 1000u);
    EXPECT_EQ(l7_bucket_take(&b, kT0 + kSec, 1, 1), 0u);
}

TEST(Bucket, ZeroRateOrBurstNeverRefills)
{
    __u64 b = 0;
    EXPECT_EQ(l7_bucket_take(&b, kT0, 0, 1), 0u) << "a fresh bucket is full";
    EXPECT_EQ(l7_bucket_take(&b, kT0 + 3600 * kSec, 0, 1), L7_BUCKET_NEVER);
    __u64 empty = 0;
    EXPECT_EQ(l7_bucket_take(&empty, kT0, 5, 0), L7_BUCKET_NEVER);
}

TEST(Bucket, ARefundRestoresTheBucketExactly)
{
    for (const uint64_t gap : {uint64_t{0}, 250 * kMs, 10 * kSec}) {
        __u64 taken = 0, untouched = 0;
        ASSERT_EQ(l7_bucket_take(&taken, kT0, 4, 2), 0u);
        ASSERT_EQ(l7_bucket_take(&untouched, kT0, 4, 2), 0u);
        // one more take and its refund, against none
        ASSERT_EQ(l7_bucket_take(&taken, kT0 + gap, 4, 2), 0u);
        l7_bucket_refund(&taken);
        for (uint64_t t = kT0 + gap; t < kT0 + gap + 2 * kSec; t += 50 * kMs)
            ASSERT_EQ(held(taken, t, 4, 2), held(untouched, t, 4, 2)) << gap << " " << t;
    }
}

TEST(Bucket, SharedTakesAdmitExactlyTheBurstFromConcurrentTakers)
{
    // no refill: however the two threads interleave, exactly `burst`
    // requests are admitted between them, and every other one is refused
    constexpr uint32_t kBurst = 50'000;
    __u64 b = 0;
    std::atomic<uint64_t> admitted{0}, refused{0};
    auto taker = [&] {
        for (int i = 0; i < 40'000; i++) {
            uint64_t wait = 0;
            L7_BUCKET_TAKE_SHARED(&b, kT0, 0, kBurst, 1'000'000, wait);
            ASSERT_NE(wait, L7_BUCKET_BUSY);
            (wait == 0 ? admitted : refused)++;
        }
    };
    std::thread t1(taker), t2(taker);
    t1.join();
    t2.join();
    EXPECT_EQ(admitted.load(), kBurst);
    EXPECT_EQ(refused.load(), 80'000u - kBurst);
}

TEST(RateLimiter, OneBucketPerKey)
{
    RateLimiter limiter(RateLimit{1, 2, std::nullopt, 100});
    EXPECT_EQ(limiter.take("a", kT0), 0u);
    EXPECT_EQ(limiter.take("a", kT0), 0u);
    EXPECT_EQ(limiter.take("a", kT0), 1000u);
    EXPECT_EQ(limiter.take("b", kT0), 0u) << "another key, another bucket";
    EXPECT_EQ(limiter.keys(), 2u);
    EXPECT_EQ(limiter.take("a", kT0 + kSec), 0u);
}

TEST(RateLimiter, RequestsWithoutTheKeyShareOneBucket)
{
    RateLimiter limiter(1, 1, 10);
    EXPECT_EQ(limiter.take(std::nullopt, kT0), 0u);
    EXPECT_EQ(limiter.take(std::nullopt, kT0), 1000u);
    EXPECT_EQ(limiter.take("", kT0), 0u) << "an empty key is a key";
    EXPECT_EQ(limiter.keys(), 1u) << "the keyless bucket is not counted";
}

TEST(RateLimiter, LeastRecentlyUsedKeyIsEvicted)
{
    RateLimiter limiter(1, 1, 2);
    ASSERT_EQ(limiter.take("a", kT0), 0u);
    ASSERT_EQ(limiter.take("b", kT0), 0u);
    ASSERT_NE(limiter.take("a", kT0), 0u);  // a is now the most recent
    ASSERT_EQ(limiter.take("c", kT0), 0u);  // evicts b
    EXPECT_EQ(limiter.keys(), 2u);
    EXPECT_NE(limiter.take("a", kT0), 0u) << "a kept its empty bucket";
    EXPECT_NE(limiter.take("c", kT0), 0u);
    EXPECT_EQ(limiter.take("b", kT0), 0u) << "b was evicted: a fresh, full bucket (evicts a)";
    EXPECT_EQ(limiter.take("a", kT0), 0u) << "a was evicted in turn";
    EXPECT_EQ(limiter.keys(), 2u);
}

TEST(RateLimiter, LongKeysAreDigestedNotConfused)
{
    RateLimiter limiter(1, 1, 100);
    const std::string common(RateLimiter::kMaxKeyBytes, 'k');
    EXPECT_EQ(limiter.take(common + "1", kT0), 0u);
    EXPECT_EQ(limiter.take(common + "2", kT0), 0u) << "same first bytes, another key";
    EXPECT_NE(limiter.take(common + "1", kT0), 0u);
    EXPECT_EQ(limiter.take(common, kT0), 0u) << "a short key never equals a digest";
    EXPECT_EQ(limiter.take(std::string(1 << 16, 'x'), kT0), 0u);
    EXPECT_EQ(limiter.keys(), 4u);
}

TEST(RateLimiter, ManyKeysStayBounded)
{
    RateLimiter limiter(1, 1, 1000);
    for (int i = 0; i < 20000; i++)
        ASSERT_EQ(limiter.take("client-" + std::to_string(i), kT0), 0u);
    EXPECT_EQ(limiter.keys(), 1000u);
    EXPECT_EQ(limiter.take("client-19999", kT0), 1000u) << "recent keys are still there";
    EXPECT_EQ(limiter.take("client-0", kT0), 0u) << "old ones were evicted";
}

TEST(RateLimiter, TheKeylessBucketCanBeTheKernels)
{
    // the data plane's entry (here a plain word): reset to a full bucket,
    // then every request without the key takes from it; keyed ones do not
    __u64 entry = 12345;
    bool released = false;
    {
        auto lease = std::shared_ptr<void>(&entry, [&](void*) { released = true; });
        RateLimiter limiter(RateLimit{1, 2, std::nullopt, 100}, l7fast::dataplane::SharedBucket{7, &entry, lease, {}});
        lease.reset();
        EXPECT_EQ(entry, 0u);
        EXPECT_EQ(limiter.kernel_bucket(), std::optional<uint32_t>(7));
        EXPECT_EQ(limiter.take(std::nullopt, kT0), 0u);
        EXPECT_NE(entry, 0u) << "the token came from the shared entry";
        // the other side (the kernel) emptied it for an hour: refused here
        // too, and a refusal leaves the entry as it is
        entry = l7_bucket_clock(l7fast::monotonic_ns(), 1) + 3600 * 1000;
        const __u64 emptied = entry;
        EXPECT_NE(limiter.take(std::nullopt, kT0), 0u);
        EXPECT_EQ(entry, emptied);
        EXPECT_EQ(limiter.take("k", kT0), 0u) << "keyed buckets are the limiter's own";
        EXPECT_FALSE(released) << "the limiter holds the lease";
    }
    EXPECT_TRUE(released);
    EXPECT_EQ(RateLimiter(RateLimit{1, 2, std::nullopt, 100}).kernel_bucket(), std::nullopt);
}
