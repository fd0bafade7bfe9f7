// XXH64 as the data plane and the daemon compute it (bpf/include/l7_xxhash.h):
// the published reference values, and the window variant the kernel runs on
// request bytes against the plain-memory one the daemon uses.
#include <gtest/gtest.h>

#include <arpa/inet.h>

#include <array>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "l7_xxhash.h"
#include "lb/KeyHash.hpp"

namespace {

std::string pattern(size_t n)
{
    std::string s(n, '\0');
    for (size_t i = 0; i < n; i++)
        s[i] = static_cast<char>((3 + 7 * i) & 0xff);
    return s;
}

// A parser-sized window (L7_WS_BUF + L7_WINDOW_SLACK bytes) holding `bytes`.
struct Window {
    explicit Window(const std::string& bytes) : buf(L7_WS_BUF + L7_WINDOW_SLACK, 0xa5)
    {
        std::copy(bytes.begin(), bytes.end(), buf.begin());
        w.buf = buf.data();
        w.len = static_cast<__u32>(bytes.size());
    }
    std::vector<__u8> buf;
    l7_window w{};
};

}  // namespace

// Values of the reference implementation (the same set tests/kmod checks the
// module kfunc and the pure-BPF fallback against).
TEST(XxHash, ReferenceVectors)
{
    struct Vec {
        std::string in;
        uint64_t seed;
        uint64_t h;
    };
    const std::string sentence = "Nobody inspects the spammish repetition";
    const std::vector<Vec> vecs = {
        {"", 0, 0xef46db3751d8e999ULL},
        {"", 0x9e3779b1ULL, 0xac75fda2929b17efULL},
        {"", 0xdeadbeefcafebabeULL, 0x3ad50a3a77644ff9ULL},
        {"a", 0, 0xd24ec4f1a98c6e5bULL},
        {"a", 0x9e3779b1ULL, 0x393da8b78992279bULL},
        {"abc", 0, 0x44bc2cf5ad770999ULL},
        {"abc", 0xdeadbeefcafebabeULL, 0xdc7a93329bc72779ULL},
        {sentence, 0, 0xfbcea83c8a378bf1ULL},
        {sentence, 0x9e3779b1ULL, 0x56db22dd5b051147ULL},
        {pattern(31), 0, 0xa2aa5f33cc4a6119ULL},
        {pattern(32), 0, 0x23c3c17ef790fd97ULL},
        {pattern(32), 0xdeadbeefcafebabeULL, 0xca6cd723b870d5aaULL},
        {pattern(100), 0, 0xa61f8d4c170fe531ULL},
        {pattern(100), 0x9e3779b1ULL, 0x86f549ede5ac87e2ULL},
        {pattern(100), 0xdeadbeefcafebabeULL, 0xee3db83010559ea4ULL},
    };
    for (const auto& v : vecs) {
        SCOPED_TRACE(testing::Message() << "len " << v.in.size() << " seed " << v.seed);
        EXPECT_EQ(l7fast::lb::xxh64(v.in, v.seed), v.h);
        Window w(v.in);
        EXPECT_EQ(l7_xxh64_window(&w.w, 0, static_cast<__u32>(v.in.size()), v.seed), v.h);
    }
}

// The kernel's variant reads the key where the parser left it, at any offset
// of the window; every length class (stripes, 8/4/1-byte tails) and offset.
TEST(XxHash, WindowVariantEqualsPlainMemory)
{
    std::mt19937_64 rng(7);
    std::string head(L7_SCRATCH_SIZE, '\0');
    for (auto& c : head)
        c = static_cast<char>(rng());
    Window w(head);
    for (uint32_t len = 0; len <= 300; len++) {
        for (int k = 0; k < 8; k++) {
            const uint32_t off = static_cast<uint32_t>(rng() % (head.size() - len + 1));
            const uint64_t seed = k == 0 ? 0 : rng();
            ASSERT_EQ(l7_xxh64_window(&w.w, off, len, seed),
                      l7_xxh64(head.data() + off, len, seed))
                << "off " << off << " len " << len;
        }
    }
    // the whole kernel window, and the tail right at its end
    EXPECT_EQ(l7_xxh64_window(&w.w, 0, L7_SCRATCH_SIZE, 0), l7_xxh64(head.data(), head.size(), 0));
    EXPECT_EQ(l7_xxh64_window(&w.w, L7_SCRATCH_SIZE - 37, 37, 0),
              l7_xxh64(head.data() + L7_SCRATCH_SIZE - 37, 37, 0));
}

// RequestKey::SourceIp: the address bytes in network order, hashed from the
// __u32 words of struct l7_conn_key.
TEST(XxHash, AddressKeyEqualsItsBytes)
{
    std::mt19937 rng(11);
    for (int i = 0; i < 1000; i++) {
        std::array<__u32, 4> ip{};
        for (auto& x : ip)
            x = rng();
        std::array<uint8_t, 16> bytes{};
        std::memcpy(bytes.data(), ip.data(), 16);
        EXPECT_EQ(l7_xxh64_addr(ip.data(), 4, 0),
                  l7fast::lb::key_hash(std::span<const uint8_t>(bytes.data(), 4)));
        EXPECT_EQ(l7_xxh64_addr(ip.data(), 16, 0),
                  l7fast::lb::key_hash(std::span<const uint8_t>(bytes.data(), 16)));
    }
    const std::array<__u32, 4> lo = {htonl(0x7f000001), 0, 0, 0};
    EXPECT_EQ(l7_xxh64_addr(lo.data(), 4, 0), l7fast::lb::key_hash(std::string("\x7f\0\0\x01", 4)));
}
