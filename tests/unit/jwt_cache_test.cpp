// The verified-token cache's entries (auth/JwtCache.hpp): deadlines moved
// from the verifier's wall clock to the kernel's boot clock with the
// provider's clock skew, the key the kernel computes (bpf/include/
// l7_jwtcache.h hashes the whole token with l7_hash_cb), and the tokens
// that must never be cached.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "auth/Base64Url.hpp"
#include "auth/Jwt.hpp"
#include "auth/JwtCache.hpp"
#include "l7_common.h"
#include "common/KernelHash.hpp"

using namespace l7fast;
using namespace l7fast::auth;
using std::chrono::seconds;
using Clock = std::chrono::system_clock;

namespace {

// RFC 7515 Appendix A.1 (HS256, exp 1300819380, no nbf)
constexpr const char* kA1Token =
    "eyJ0eXAiOiJKV1QiLA0KICJhbGciOiJIUzI1NiJ9"
    ".eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ"
    ".dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
constexpr const char* kA1Key = "AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow";
constexpr int64_t kA1Exp = 1300819380;
constexpr uint64_t kSeed = 0x1234567890abcdefULL;
constexpr uint64_t kBoot = 1000ull * 1000000000ull;  // 1000 s after boot

Verifier a1_verifier(seconds skew)
{
    policy::JwtProvider p;
    p.name = "a1";
    p.algorithms = {"HS256"};
    policy::JwtKey k;
    k.alg = "HS256";
    EXPECT_TRUE(base64url_decode(kA1Key, &k.secret));
    p.keys.push_back(k);
    p.clock_skew = skew;
    std::string why;
    auto v = Verifier::create(p, &why);
    EXPECT_TRUE(v) << why;
    return std::move(*v);
}

CacheClock at(Clock::time_point wall) { return CacheClock{kBoot, wall}; }

Result ok_result(std::string token, Clock::time_point until, Clock::time_point from = Clock::time_point::min())
{
    Result r;
    r.status = Status::Ok;
    r.reason = Reason::Ok;
    r.token = std::move(token);
    r.valid_until = until;
    r.valid_from = from;
    return r;
}

}  // namespace

TEST(JwtCache, ExpiryIsTheVerifiersDeadlineInBootTimeWithTheClockSkew)
{
    const Clock::time_point now{seconds{kA1Exp - 100}};
    for (int skew : {0, 60}) {
        const Verifier v = a1_verifier(seconds{skew});
        const Result r = v.verify(kA1Token, now);
        ASSERT_TRUE(r.ok()) << reason_name(r.reason);
        const auto e = cache_entry(r, 1, 3, kSeed, L7_JWT_MAX_TOKEN, at(now));
        ASSERT_TRUE(e);
        // exp + skew is 100 + skew seconds after `now`
        EXPECT_EQ(e->entry.exp_ns, kBoot + uint64_t(100 + skew) * 1000000000ull) << skew;
        EXPECT_EQ(e->entry.nbf_ns, 0u);
        // later in wall time (the entry is made after verify): earlier deadline
        const auto later = cache_entry(r, 1, 3, kSeed, L7_JWT_MAX_TOKEN, at(now + seconds{40}));
        ASSERT_TRUE(later);
        EXPECT_EQ(later->entry.exp_ns, kBoot + uint64_t(60 + skew) * 1000000000ull);
        // past exp + skew: nothing to cache
        EXPECT_FALSE(cache_entry(r, 1, 3, kSeed, L7_JWT_MAX_TOKEN, at(now + seconds{100 + skew})));
    }
}

TEST(JwtCache, EntriesLiveAtMostTheMaximumTtl)
{
    const Clock::time_point now{seconds{1700000000}};
    // no exp (require_exp = false): the cap alone
    const auto e = cache_entry(ok_result("a.b.c", Clock::time_point::max()), 0, 0, kSeed, 100, at(now));
    ASSERT_TRUE(e);
    EXPECT_NE(e->entry.exp_ns, 0u);  // never "no expiry"
    EXPECT_EQ(e->entry.exp_ns, kBoot + uint64_t(kJwtCacheMaxTtl.count()) * 1000000000ull);
    const auto f = cache_entry(ok_result("a.b.c", now + seconds{3600}), 0, 0, kSeed, 100, at(now), seconds{10});
    ASSERT_TRUE(f);
    EXPECT_EQ(f->entry.exp_ns, kBoot + 10ull * 1000000000ull);
}

TEST(JwtCache, NotBeforeMovesToBootTime)
{
    const Clock::time_point now{seconds{1700000000}};
    // nbf - skew was 30 s ago
    const auto e = cache_entry(ok_result("a.b.c", now + seconds{60}, now - seconds{30}), 0, 0, kSeed, 100, at(now));
    ASSERT_TRUE(e);
    EXPECT_EQ(e->entry.nbf_ns, kBoot - 30ull * 1000000000ull);
    // before boot: no constraint
    const auto g = cache_entry(ok_result("a.b.c", now + seconds{60}, now - seconds{5000}), 0, 0, kSeed, 100, at(now));
    ASSERT_TRUE(g);
    EXPECT_EQ(g->entry.nbf_ns, 0u);
    // not yet valid at the clock: never cached
    EXPECT_FALSE(cache_entry(ok_result("a.b.c", now + seconds{60}, now + seconds{1}), 0, 0, kSeed, 100, at(now)));
}

TEST(JwtCache, KeyIsTheKernelsHashOfTheWholeTokenPerGenerationAndProvider)
{
    const Clock::time_point now{seconds{1700000000}};
    // longer than the 256 bytes l7_hash_window covers: the kernel hashes
    // every word (L7_JWT_MAX_TOKEN / 8 iterations of l7_hash_cb)
    std::string token(1000, 'x');
    for (size_t i = 0; i < token.size(); i++)
        token[i] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_."[i * 7 % 65];
    const auto e = cache_entry(ok_result(token, now + seconds{60}), 1, 5, kSeed, L7_JWT_MAX_TOKEN, at(now));
    ASSERT_TRUE(e);
    EXPECT_EQ(e->key.gen, 1);
    EXPECT_EQ(e->key.provider, 5);
    EXPECT_EQ(e->key.len, token.size());
    EXPECT_EQ(e->entry.token_len, token.size());
    EXPECT_EQ(e->entry.fwd_len, 0);
    EXPECT_EQ(std::memcmp(e->entry.token, token.data(), token.size()), 0);
    for (size_t i = token.size(); i < L7_JWT_MAX_TOKEN; i++)
        ASSERT_EQ(e->entry.token[i], 0) << i;

    // what the kernel computes over the request bytes, by the very callback
    const std::string head = "GET / HTTP/1.1\r\nAuthorization: Bearer " + token + "\r\n\r\n";
    std::vector<__u8> buf(L7_WS_BUF + L7_WINDOW_SLACK);
    std::memcpy(buf.data(), head.data(), head.size());
    l7_strscan c;
    std::memset(&c, 0, sizeof(c));
    c.w.buf = buf.data();
    c.w.len = static_cast<__u32>(head.size());
    c.h = l7_hash_init(kSeed);
    c.off = static_cast<__u32>(head.find("Bearer ") + 7);
    c.len = static_cast<__u32>(token.size());
    L7_LOOP(L7_JWT_MAX_TOKEN / 8, l7_hash_cb, &c);
    EXPECT_EQ(e->key.hash, l7_hash_final(c.h, c.len));

    // one byte at the end changes the key: no two tokens share an entry
    // for long, and the full comparison catches the rest
    std::string tampered = token;
    tampered.back() = tampered.back() == 'a' ? 'b' : 'a';
    const auto t = cache_entry(ok_result(tampered, now + seconds{60}), 1, 5, kSeed, L7_JWT_MAX_TOKEN, at(now));
    ASSERT_TRUE(t);
    EXPECT_NE(t->key.hash, e->key.hash);
    // another seed, another hash
    const auto s = cache_entry(ok_result(token, now + seconds{60}), 1, 5, kSeed + 1, L7_JWT_MAX_TOKEN, at(now));
    ASSERT_TRUE(s);
    EXPECT_NE(s->key.hash, e->key.hash);
}

TEST(JwtCache, WhatIsNeverCached)
{
    const Clock::time_point now{seconds{1700000000}};
    const Clock::time_point until = now + seconds{60};
    Result bad = ok_result("a.b.c", until);
    bad.status = Status::Invalid;
    bad.reason = Reason::BadSignature;
    EXPECT_FALSE(cache_entry(bad, 0, 0, kSeed, 100, at(now)));
    EXPECT_FALSE(cache_entry(ok_result("", until), 0, 0, kSeed, 100, at(now)));
    EXPECT_FALSE(cache_entry(ok_result(std::string(101, 'a'), until), 0, 0, kSeed, 100, at(now)));
    EXPECT_TRUE(cache_entry(ok_result(std::string(100, 'a'), until), 0, 0, kSeed, 100, at(now)));
    EXPECT_FALSE(cache_entry(ok_result(std::string(L7_JWT_MAX_TOKEN + 1, 'a'), until), 0, 0, kSeed, 100000, at(now)));
    EXPECT_TRUE(cache_entry(ok_result(std::string(L7_JWT_MAX_TOKEN, 'a'), until), 0, 0, kSeed, 100000, at(now)));
    EXPECT_FALSE(cache_entry(ok_result("a.b.c", until), L7_GENS, 0, kSeed, 100, at(now)));
    EXPECT_FALSE(cache_entry(ok_result("a.b.c", until), 0, L7_MAX_JWT_PROVIDERS, kSeed, 100, at(now)));
    EXPECT_FALSE(cache_entry(ok_result("a.b.c", now), 0, 0, kSeed, 100, at(now)));
}
