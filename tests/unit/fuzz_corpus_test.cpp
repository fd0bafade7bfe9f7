// The libFuzzer targets' bodies (tests/fuzz) over the committed corpus: seeds
// and every reproducer of a bug the fuzzers found. Each input must pass the
// target's invariants (they throw here instead of aborting).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace l7fast::fuzz {
int http_parse(const uint8_t* data, size_t size);
int policy(const uint8_t* data, size_t size);
int jwt(const uint8_t* data, size_t size);
int match_diff(const uint8_t* data, size_t size);
}  // namespace l7fast::fuzz

namespace {

namespace fs = std::filesystem;

void replay(const std::string& target, int (*fn)(const uint8_t*, size_t))
{
    const fs::path dir = fs::path(L7FAST_FUZZ_CORPUS) / target;
    ASSERT_TRUE(fs::is_directory(dir)) << dir;
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(dir))
        if (e.is_regular_file())
            files.push_back(e.path());
    std::sort(files.begin(), files.end());
    EXPECT_GE(files.size(), 3u) << "a corpus of a few meaningful seeds at least";
    for (const fs::path& f : files) {
        std::ifstream in(f, std::ios::binary);
        std::ostringstream ss;
        ss << in.rdbuf();
        const std::string bytes = ss.str();
        try {
            fn(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
        } catch (const std::exception& e) {
            ADD_FAILURE() << f << ": " << e.what();
        }
    }
}

}  // namespace

TEST(FuzzCorpus, HttpParse)
{
    replay("http_parse", l7fast::fuzz::http_parse);
}

// the BPF differential target's corpus, through the native parser's invariants
TEST(FuzzCorpus, HttpDiffThroughHttpParse)
{
    replay("http_diff", l7fast::fuzz::http_parse);
}

TEST(FuzzCorpus, Policy)
{
    replay("policy", l7fast::fuzz::policy);
}

TEST(FuzzCorpus, Jwt)
{
    replay("jwt", l7fast::fuzz::jwt);
}

TEST(FuzzCorpus, MatchDiff)
{
    replay("match_diff", l7fast::fuzz::match_diff);
}
