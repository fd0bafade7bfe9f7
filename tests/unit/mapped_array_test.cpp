// MappedArray: a BPF_F_MMAPABLE array shared with the kernel, mapped window
// by window as entries are used, so the daemon's RSS holds only what it
// touches. Runs against a real BPF array map (skipped where the bpf()
// syscall is refused).
#include <bpf/bpf.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "dataplane/Dataplane.hpp"

namespace {

using l7fast::dataplane::MappedArray;

// the arrays the daemon maps, with their own types
using Sync = l7_conn_sync;  // 32 bytes
using Wide = l7_pool;       // 184 bytes: entries straddle 16 KiB windows
static_assert(sizeof(Sync) == 32 && sizeof(Wide) == 184);

class Map {
public:
    Map(uint32_t value_size, uint32_t entries)
    {
        LIBBPF_OPTS(bpf_map_create_opts, o, .map_flags = 1024 /* BPF_F_MMAPABLE */);
        fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "l7_mapped_test", 4, value_size, entries, &o);
    }
    ~Map()
    {
        if (fd >= 0)
            ::close(fd);
    }
    int fd = -1;
};

// Rss of the mapping that contains p, in KiB (/proc/self/smaps)
long rss_kib_at(const void* p)
{
    std::ifstream f("/proc/self/smaps");
    std::string line;
    const auto a = reinterpret_cast<uintptr_t>(p);
    bool in = false;
    long total = 0;
    while (std::getline(f, line)) {
        unsigned long lo = 0, hi = 0;
        char dash = 0;
        std::istringstream is(line);
        if (is >> std::hex >> lo >> dash >> hi && dash == '-') {
            in = a >= lo && a < hi;
            continue;
        }
        if (in && line.rfind("Rss:", 0) == 0)
            total += std::stol(line.substr(4));
    }
    return total;
}

TEST(MappedArray, MapsOnlyTheWindowsItsEntriesAreIn)
{
    constexpr uint32_t kEntries = 65536;  // 2 MiB, as l7_conn_sync
    Map m(sizeof(Sync), kEntries);
    if (m.fd < 0)
        GTEST_SKIP() << "bpf() refused: " << std::strerror(errno);
    MappedArray<Sync> a(m.fd, kEntries, "test map");
    EXPECT_EQ(a.size(), kEntries);
    EXPECT_EQ(a.windows_mapped(), 1u);  // the first, mapped at construction
    Sync* first = a.at(0);
    ASSERT_NE(first, nullptr);
    EXPECT_EQ(rss_kib_at(first), 16);  // one window of 16 KiB, not 2 MiB

    // an entry far away: its window only, and it is the kernel's memory
    Sync* far = a.at(40000);
    ASSERT_NE(far, nullptr);
    EXPECT_EQ(far, first + 40000);  // one contiguous array
    EXPECT_EQ(a.windows_mapped(), 2u);
    far->u_bytes = 0x1234;
    uint32_t k = 40000;
    Sync seen{};
    ASSERT_EQ(bpf_map_lookup_elem(m.fd, &k, &seen), 0);
    EXPECT_EQ(seen.u_bytes, 0x1234u);
    seen.gen = 77;
    ASSERT_EQ(bpf_map_update_elem(m.fd, &k, &seen, BPF_ANY), 0);
    EXPECT_EQ(far->gen, 77u);
    EXPECT_EQ(rss_kib_at(first) + rss_kib_at(far), 32);

    // the same window again maps nothing more; out of range is null
    EXPECT_EQ(a.at(40001), far + 1);
    EXPECT_EQ(a.windows_mapped(), 2u);
    EXPECT_EQ(a.at(kEntries), nullptr);
}

TEST(MappedArray, AnEntryAcrossTwoWindowsIsWhole)
{
    constexpr uint32_t kEntries = 256;  // like l7_pools: 46 KiB, 184-byte entries
    Map m(sizeof(Wide), kEntries);
    if (m.fd < 0)
        GTEST_SKIP() << "bpf() refused: " << std::strerror(errno);
    MappedArray<Wide> a(m.fd, kEntries, "test pools");
    // entry 89 spans bytes 16376..16559: the end of window 0, the start of 1
    constexpr uint32_t kStraddling = 89;
    static_assert(kStraddling * sizeof(Wide) < 16384 && (kStraddling + 1) * sizeof(Wide) > 16384);
    Wide* e = a.at(kStraddling);
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(a.windows_mapped(), 2u);
    for (int i = 0; i < L7_POOL_MAX_CHUNKS; i++)
        e->idle[i] = 1000 + i;  // bytes 0..127
    e->eject_5xx = 99;          // the last field, in the next window
    uint32_t k = kStraddling;
    Wide seen{};
    ASSERT_EQ(bpf_map_lookup_elem(m.fd, &k, &seen), 0);
    for (int i = 0; i < L7_POOL_MAX_CHUNKS; i++)
        EXPECT_EQ(seen.idle[i], uint64_t(1000 + i)) << "word " << i;
    EXPECT_EQ(seen.eject_5xx, 99u);
}

TEST(MappedArray, MovedArrayKeepsItsWindowsAndPointers)
{
    Map m(8, 32768);
    if (m.fd < 0)
        GTEST_SKIP() << "bpf() refused: " << std::strerror(errno);
    MappedArray<uint64_t> a(m.fd, 32768, "test states");
    uint64_t* p = a.at(20000);
    ASSERT_NE(p, nullptr);
    *p = 5;
    MappedArray<uint64_t> b;
    b = std::move(a);
    EXPECT_EQ(a.at(0), nullptr);
    EXPECT_EQ(b.at(20000), p);
    EXPECT_EQ(*b.at(20000), 5u);
    EXPECT_EQ(b.windows_mapped(), 2u);
}

TEST(MappedArray, AMapTheKernelWillNotMmapIsAnErrorAtOnce)
{
    // an array without BPF_F_MMAPABLE
    int fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "l7_nommap_test", 4, 8, 64, nullptr);
    if (fd < 0)
        GTEST_SKIP() << "bpf() refused: " << std::strerror(errno);
    try {
        MappedArray<uint64_t> a(fd, 64, "l7_plain");
        ADD_FAILURE() << "mapped a map that is not mmapable";
    } catch (const l7fast::dataplane::DataplaneError& e) {
        EXPECT_NE(std::string(e.what()).find("mapping l7_plain: "), std::string::npos) << e.what();
    }
    ::close(fd);
}

}  // namespace

TEST(BucketTable, LeasesFreshEntriesAndFreesThemWithTheLastHolder)
{
    Map m(sizeof(uint64_t), 3);
    if (m.fd < 0)
        GTEST_SKIP() << "bpf() refused: " << std::strerror(errno);
    const uint64_t dirty = 42;
    for (uint32_t k = 0; k < 3; k++)
        ASSERT_EQ(bpf_map_update_elem(m.fd, &k, &dirty, 0), 0);
    auto table = std::make_shared<l7fast::dataplane::BucketTable>(m.fd, 3);
    auto a = table->lease();
    auto b = table->lease();
    ASSERT_TRUE(a && b);
    EXPECT_NE(a->id, b->id);
    EXPECT_EQ(*a->state, 0u) << "a leased entry is a fresh bucket";
    // the mapping is the kernel's entry: a write shows through bpf()
    *a->state = 7;
    uint64_t seen = 0;
    ASSERT_EQ(bpf_map_lookup_elem(m.fd, &a->id, &seen), 0);
    EXPECT_EQ(seen, 7u);
    auto c = table->lease();
    ASSERT_TRUE(c);
    EXPECT_FALSE(table->lease()) << "every entry leased";
    EXPECT_EQ(table->leased(), 3u);
    // a copy of the hold keeps the id; the table outlives its owner
    const uint32_t id = a->id;
    auto keep = a->lease;
    a.reset();
    EXPECT_FALSE(table->lease());
    std::weak_ptr<l7fast::dataplane::BucketTable> weak = table;
    table.reset();
    EXPECT_FALSE(weak.expired()) << "leases hold the table";
    keep.reset();
    table = weak.lock();
    ASSERT_TRUE(table);
    EXPECT_EQ(table->leased(), 2u);
    auto again = table->lease();
    ASSERT_TRUE(again);
    EXPECT_EQ(again->id, id);
    EXPECT_EQ(*again->state, 0u) << "zeroed when leased again";
}
