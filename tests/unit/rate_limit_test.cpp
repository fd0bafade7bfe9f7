// Rate limits: the token-bucket arithmetic shared with the data plane
// (bpf/include/l7_bucket.h) and the slow path's keyed buckets
// (proxy/RateLimiter).
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

#include "l7_bucket.h"
#include "proxy/RateLimiter.hpp"

using l7fast::policy::RateLimit;
using l7fast::policy::RateLimiter;

namespace {

constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kSec = 1000 * kMs;
constexpr uint64_t kT0 = 5 * kSec;  // any non-zero start

}  // namespace

TEST(Bucket, FreshBucketStartsFull)
{
    l7_bucket b{};
    for (int i = 0; i < 3; i++)
        EXPECT_EQ(l7_bucket_take(&b, kT0, 1, 3), 0u) << i;
    EXPECT_EQ(b.tokens_milli, 0u);
    EXPECT_EQ(b.last_ns, kT0);
    EXPECT_EQ(l7_bucket_take(&b, kT0, 1, 3), 1000u) << "one token per second: a second to wait";
}

TEST(Bucket, ExactRefill)
{
    l7_bucket b{};
    ASSERT_EQ(l7_bucket_take(&b, kT0, 10, 1), 0u);
    // 10 tokens/s: 10 milli-tokens per millisecond
    EXPECT_EQ(l7_bucket_take(&b, kT0 + 99 * kMs, 10, 1), 1u) << "990 milli-tokens: 10 missing, 1 ms";
    EXPECT_EQ(b.tokens_milli, 990u);
    EXPECT_EQ(l7_bucket_take(&b, kT0 + 100 * kMs, 10, 1), 0u);
    EXPECT_EQ(b.tokens_milli, 0u);
    EXPECT_EQ(b.last_ns, kT0 + 100 * kMs);
}

TEST(Bucket, RetryAfterIsRoundedUp)
{
    l7_bucket b{};
    ASSERT_EQ(l7_bucket_take(&b, kT0, 3, 1), 0u);
    EXPECT_EQ(l7_bucket_take(&b, kT0, 3, 1), 334u) << "1000 milli-tokens at 3 per ms";
    EXPECT_EQ(l7_bucket_take(&b, kT0 + 333 * kMs, 3, 1), 1u) << "999 of 1000";
    EXPECT_EQ(l7_bucket_take(&b, kT0 + 334 * kMs, 3, 1), 0u);
    EXPECT_EQ(b.tokens_milli, 0u) << "refilled to the burst of one token, then taken";
}

TEST(Bucket, BurstCapsTheRefill)
{
    l7_bucket b{};
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
    l7_bucket b{};
    ASSERT_EQ(l7_bucket_take(&b, kT0, 1, 1), 0u);
    for (uint64_t k = 1; k < 2000; k++)
        ASSERT_NE(l7_bucket_take(&b, kT0 + k * 500'000, 1, 1), 0u) << k;
    EXPECT_EQ(l7_bucket_take(&b, kT0 + kSec, 1, 1), 0u);
}

TEST(Bucket, NoOverflowAtTheLimits)
{
    const uint32_t max = std::numeric_limits<uint32_t>::max();
    const uint64_t cap = static_cast<uint64_t>(max) * 1000;
    {
        l7_bucket b{};
        ASSERT_EQ(l7_bucket_take(&b, 1, max, max), 0u);
        EXPECT_EQ(b.tokens_milli, cap - 1000);
        b.tokens_milli = 0;
        EXPECT_EQ(l7_bucket_take(&b, std::numeric_limits<uint64_t>::max(), max, max), 0u);
        EXPECT_EQ(b.tokens_milli, cap - 1000) << "refilled to exactly the capacity";
    }
    {
        // slowest refill, biggest bucket, longest gap
        l7_bucket b{0, 1};
        EXPECT_EQ(l7_bucket_take(&b, std::numeric_limits<uint64_t>::max(), 1, max), 0u);
        EXPECT_EQ(b.tokens_milli, cap - 1000);
    }
    {
        // fastest refill into a one-token bucket: 1 ns refills 4294 milli-tokens
        l7_bucket b{0, kT0};
        EXPECT_EQ(l7_bucket_take(&b, kT0 + 1, max, 1), 0u);
        EXPECT_EQ(b.tokens_milli, 0u);
        EXPECT_EQ(l7_bucket_take(&b, kT0 + 1, max, 1), 1u) << "at least 1 ms";
    }
    {
        // 1 ns short of full: the largest product that is computed, exactly
        l7_bucket b{0, kT0};
        const uint64_t full = cap * 1'000'000 / max;  // 1 s
        EXPECT_EQ(l7_bucket_take(&b, kT0 + full - 1, max, max), 0u);
        EXPECT_EQ(b.tokens_milli, (full - 1) * max / 1'000'000 - 1000);
        EXPECT_EQ(b.tokens_milli, 4294967289705u);
    }
}

TEST(Bucket, ClockGoingBackRefillsNothing)
{
    l7_bucket b{};
    ASSERT_EQ(l7_bucket_take(&b, kT0, 1, 1), 0u);
    EXPECT_EQ(l7_bucket_take(&b, kT0 - kSec, 1, 1), 1000u);
    EXPECT_EQ(b.last_ns, kT0) << "last_ns does not move back";
    EXPECT_EQ(l7_bucket_take(&b, kT0 + kSec, 1, 1), 0u);
}

TEST(Bucket, ZeroRateOrBurstNeverRefills)
{
    l7_bucket b{};
    EXPECT_EQ(l7_bucket_take(&b, kT0, 0, 1), 0u) << "a fresh bucket is full";
    EXPECT_EQ(l7_bucket_take(&b, kT0 + 3600 * kSec, 0, 1), L7_BUCKET_NEVER);
    l7_bucket empty{};
    EXPECT_EQ(l7_bucket_take(&empty, kT0, 5, 0), L7_BUCKET_NEVER);
}

TEST(Bucket, LoweredBurstClampsTheTokens)
{
    l7_bucket b{50'000, kT0};  // 50 tokens from a previous policy
    EXPECT_EQ(l7_bucket_take(&b, kT0, 1, 2), 0u);
    EXPECT_EQ(b.tokens_milli, 1000u);
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
