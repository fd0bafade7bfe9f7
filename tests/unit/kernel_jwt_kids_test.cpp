// The kids the kernel's HS verifier looks up for headers it scans
// (proxy::kernel_header_entries' kids, l7_jwt_kids): per kid and algorithm
// what auth::Verifier::verify would do after check_header (the kid, then
// its alg, then the keys), and the provider-wide entry that lets a kid not
// found be unknown only when every kid is there. Run by the kmod matrix
// with the module (tests/kernel/jwt_verify_kernel_test.cpp); here the
// entries themselves.
#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "auth/Jwt.hpp"
#include "proxy/KernelJwt.hpp"

using namespace l7fast;

namespace {

std::string data_file(const std::string& name)
{
    std::ifstream in(std::string(L7FAST_TEST_DATA) + "/jwt/" + name, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

policy::JwtKey hmac(std::string kid, std::string alg, char fill)
{
    policy::JwtKey k;
    k.kid = std::move(kid);
    k.alg = std::move(alg);
    k.secret = std::string(64, fill);
    return k;
}

std::shared_ptr<auth::Verifier> verifier(std::vector<std::string> algs, std::vector<policy::JwtKey> keys)
{
    policy::JwtProvider p;
    p.name = "p";
    p.algorithms = std::move(algs);
    p.keys = std::move(keys);
    std::string why;
    auto v = auth::Verifier::create(p, &why);
    EXPECT_TRUE(v) << why;
    return v ? std::make_shared<auth::Verifier>(std::move(*v)) : nullptr;
}

// module ids 100, 101, ... for every key of the set; -1 at `missing`
std::vector<int32_t> ids_for(const proxy::ModuleKeySet& set, int missing = -1)
{
    std::vector<int32_t> ids;
    for (size_t i = 0; i < set.keys.size(); i++)
        ids.push_back(static_cast<int>(i) == missing ? -1 : 100 + static_cast<int32_t>(i));
    return ids;
}

const dataplane::JwtKidEntry* find(const proxy::KernelHeaders& h, uint32_t provider, const std::string& kid)
{
    for (const auto& e : h.kids)
        if (e.provider == provider && !e.all && e.kid == kid)
            return &e;
    return nullptr;
}

bool has_all(const proxy::KernelHeaders& h, uint32_t provider)
{
    for (const auto& e : h.kids)
        if (e.provider == provider && e.all)
            return true;
    return false;
}

}  // namespace

TEST(KernelJwtKids, EachKidSaysPerAlgorithmWhatTheReferenceDoes)
{
    policy::JwtKey rs;
    rs.kid = "rsa";
    rs.alg = "RS256";
    rs.pem = data_file("rfc7515-a2.pem");
    ASSERT_FALSE(rs.pem.empty());
    // two HS256 keys share k1; k1 also has an HS512 key; "" an HS384 key;
    // rsa an RS256 key; the provider does not accept HS512
    const std::vector<std::shared_ptr<auth::Verifier>> vs{
        verifier({"HS256", "HS384", "RS256"},
                 {hmac("k1", "HS256", 'a'), hmac("k1", "HS256", 'b'), hmac("k1", "HS512", 'c'), hmac("", "HS384", 'd'), rs}),
    };
    const proxy::ModuleKeySet set = proxy::module_keys_of(vs);
    ASSERT_EQ(set.keys.size(), 3u) << "HS256 twice and HS384: HS512 is not accepted";
    const proxy::KernelHeaders h = proxy::kernel_header_entries(set, ids_for(set), vs);

    const auto* k1 = find(h, 0, "k1");
    ASSERT_NE(k1, nullptr);
    EXPECT_EQ(k1->verdict[L7_JA_HS256], L7_JK_VERIFY);
    EXPECT_EQ(k1->hs[L7_JA_HS256].mac_len, 32);
    ASSERT_EQ(k1->hs[L7_JA_HS256].n_keys, 2);
    EXPECT_EQ(k1->hs[L7_JA_HS256].key_id[0], 100u);
    EXPECT_EQ(k1->hs[L7_JA_HS256].key_id[1], 101u);
    EXPECT_EQ(k1->verdict[L7_JA_HS384], L7_JK_MISMATCH) << "k1 has no HS384 key";
    EXPECT_EQ(k1->verdict[L7_JA_HS512], L7_JK_USER) << "a key the module was not given";
    EXPECT_EQ(k1->verdict[L7_JA_RS256], L7_JK_MISMATCH);
    EXPECT_EQ(k1->verdict[L7_JA_ES256], L7_JK_MISMATCH);

    const auto* none = find(h, 0, "");
    ASSERT_NE(none, nullptr) << "a key without a kid: tokens without one (or with \"\") name it";
    EXPECT_EQ(none->verdict[L7_JA_HS384], L7_JK_VERIFY);
    EXPECT_EQ(none->hs[L7_JA_HS384].mac_len, 48);
    ASSERT_EQ(none->hs[L7_JA_HS384].n_keys, 1);
    EXPECT_EQ(none->hs[L7_JA_HS384].key_id[0], 102u);
    EXPECT_EQ(none->verdict[L7_JA_HS256], L7_JK_MISMATCH);

    const auto* rsa = find(h, 0, "rsa");
    ASSERT_NE(rsa, nullptr) << "an RS256 key's kid is known: its tokens are the slow path's, not unknown";
    EXPECT_EQ(rsa->verdict[L7_JA_RS256], L7_JK_USER);
    EXPECT_EQ(rsa->verdict[L7_JA_HS256], L7_JK_MISMATCH);

    EXPECT_EQ(h.kids.size(), 4u);
    EXPECT_TRUE(has_all(h, 0));
    EXPECT_EQ(h.complete, 1u);
    EXPECT_TRUE(h.kids.back().all) << "the provider-wide entry comes after its kids";
}

TEST(KernelJwtKids, AKeyTheModuleLacksIsTheSlowPaths)
{
    const std::vector<std::shared_ptr<auth::Verifier>> vs{
        verifier({"HS256"}, {hmac("k1", "HS256", 'a'), hmac("k1", "HS256", 'b'), hmac("k2", "HS256", 'c')}),
    };
    const proxy::ModuleKeySet set = proxy::module_keys_of(vs);
    const proxy::KernelHeaders h = proxy::kernel_header_entries(set, ids_for(set, 1), vs);
    ASSERT_NE(find(h, 0, "k1"), nullptr);
    EXPECT_EQ(find(h, 0, "k1")->verdict[L7_JA_HS256], L7_JK_USER) << "one of k1's two keys is not in the module";
    ASSERT_NE(find(h, 0, "k2"), nullptr);
    EXPECT_EQ(find(h, 0, "k2")->verdict[L7_JA_HS256], L7_JK_VERIFY);
    EXPECT_TRUE(has_all(h, 0)) << "k1 is still known";
}

TEST(KernelJwtKids, MoreKeysOfOneKidThanTheKernelTriesAreTheSlowPaths)
{
    std::vector<policy::JwtKey> keys;
    for (int i = 0; i <= L7_JWT_HDR_KEYS; i++)
        keys.push_back(hmac("k", "HS256", static_cast<char>('a' + i)));
    const std::vector<std::shared_ptr<auth::Verifier>> vs{verifier({"HS256"}, keys)};
    const proxy::ModuleKeySet set = proxy::module_keys_of(vs);
    const proxy::KernelHeaders h = proxy::kernel_header_entries(set, ids_for(set), vs);
    ASSERT_NE(find(h, 0, "k"), nullptr);
    EXPECT_EQ(find(h, 0, "k")->verdict[L7_JA_HS256], L7_JK_USER);
}

TEST(KernelJwtKids, AKidTooLongToLookUpLeavesUnknownKidsToTheSlowPath)
{
    const std::string long_kid(L7_JWT_MAX_KID + 1, 'x');
    const std::vector<std::shared_ptr<auth::Verifier>> vs{
        verifier({"HS256"}, {hmac("k1", "HS256", 'a'), hmac(long_kid, "HS256", 'b')}),
        verifier({"HS256"}, {hmac(std::string(L7_JWT_MAX_KID, 'y'), "HS256", 'c')}),
    };
    const proxy::ModuleKeySet set = proxy::module_keys_of(vs);
    const proxy::KernelHeaders h = proxy::kernel_header_entries(set, ids_for(set), vs);
    EXPECT_NE(find(h, 0, "k1"), nullptr);
    EXPECT_EQ(find(h, 0, long_kid), nullptr);
    EXPECT_FALSE(has_all(h, 0)) << "a token naming the long kid must not be refused as unknown";
    EXPECT_NE(find(h, 1, std::string(L7_JWT_MAX_KID, 'y')), nullptr) << "64 bytes are looked up";
    EXPECT_TRUE(has_all(h, 1));
    EXPECT_EQ(h.complete, 1u);
}

TEST(KernelJwtKids, AGenerationKeepsToHalfOfTheMap)
{
    std::vector<policy::JwtKey> keys;
    for (int i = 0; i < L7_JWT_KIDS; i++)
        keys.push_back(hmac("k" + std::to_string(i), "HS256", 'a'));
    const std::vector<std::shared_ptr<auth::Verifier>> vs{verifier({"HS256"}, {hmac("first", "HS256", 'z')}),
                                                           verifier({"HS256"}, keys)};
    const proxy::ModuleKeySet set = proxy::module_keys_of(vs);
    const proxy::KernelHeaders h = proxy::kernel_header_entries(set, ids_for(set), vs);
    EXPECT_LE(h.kids.size(), size_t{L7_JWT_KIDS / 2});
    EXPECT_GE(h.kids.size(), size_t{L7_JWT_KIDS / 2 - 1}) << "provider 1's kids fill the rest";
    EXPECT_TRUE(has_all(h, 0));
    EXPECT_FALSE(has_all(h, 1)) << "not every kid of provider 1 fits";
    EXPECT_EQ(h.complete, 1u);
}
