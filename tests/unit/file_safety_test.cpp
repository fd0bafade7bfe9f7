// policy_permission_problems: who besides root may change the policy;
// policy_content_problems: rules that a public secret makes worthless.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "config/FileSafety.hpp"
#include "loader/PolicyLoader.hpp"

namespace fs = std::filesystem;
using l7fast::policy::JwtProvider;
using l7fast::policy::kPublicDemoSecretMarker;
using l7fast::policy::Policy;
using l7fast::policy::policy_content_problems;
using l7fast::policy::policy_permission_problems;
using l7fast::policy::PolicyLoader;

namespace {

class PolicyTree : public ::testing::Test {
protected:
    void SetUp() override
    {
        char tmpl[] = "/tmp/l7fast-file-safety-XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr);
        root_ = tmpl;
        ::chmod(root_.c_str(), 0755);
        file_ = root_ / "policy.toml";
        dir_ = root_ / "policy.d";
        std::ofstream(file_) << "";
        ::chmod(file_.c_str(), 0644);
        fs::create_directory(dir_);
        ::chmod(dir_.c_str(), 0755);
    }
    void TearDown() override { fs::remove_all(root_); }

    fs::path root_, file_, dir_;
};

bool starts(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

TEST_F(PolicyTree, SafeTreeHasNoProblems)
{
    EXPECT_TRUE(policy_permission_problems(file_, dir_).empty());
    EXPECT_TRUE(policy_permission_problems(root_ / "missing.toml", root_ / "missing.d").empty());
}

TEST_F(PolicyTree, WorldWritableFileIsReportedWithTheFix)
{
    ::chmod(file_.c_str(), 0666);
    auto p = policy_permission_problems(file_, dir_);
    ASSERT_EQ(p.size(), 1u);
    EXPECT_EQ(p[0], file_.string() + ": the policy file is writable by every user (mode 0666): anyone can "
                                     "change the policy l7fastd enforces; run chmod go-w " + file_.string());
}

TEST_F(PolicyTree, GroupWritableOnlyMattersForGroupsOtherThanRoot)
{
    ::chmod(file_.c_str(), 0664);
    if (::getegid() == 0) {
        EXPECT_TRUE(policy_permission_problems(file_, dir_).empty());
    }
    ASSERT_EQ(::chown(file_.c_str(), static_cast<uid_t>(-1), 65534), 0);
    auto p = policy_permission_problems(file_, dir_);
    ASSERT_EQ(p.size(), 1u);
    EXPECT_TRUE(starts(p[0], file_.string() + ": the policy file is writable by group 65534 (mode 0664)")) << p[0];
}

TEST_F(PolicyTree, DirectoriesAndDropIns)
{
    ::chmod(root_.c_str(), 0777);  // anyone could replace policy.toml
    ::chmod(dir_.c_str(), 01777);  // sticky does not help: anyone could add a drop-in
    std::ofstream(dir_ / "10-a.toml") << "";
    std::ofstream(dir_ / "notes.txt") << "";
    ASSERT_EQ(::chown((dir_ / "10-a.toml").c_str(), 65534, 65534), 0);
    ::chmod((dir_ / "notes.txt").c_str(), 0666);  // not a drop-in: not read, not reported
    auto p = policy_permission_problems(file_, dir_);
    ASSERT_EQ(p.size(), 3u) << ::testing::PrintToString(p);
    EXPECT_TRUE(starts(p[0], root_.string() + ": the policy file's directory is writable by every user (mode 0777)"));
    EXPECT_TRUE(starts(p[1], dir_.string() + ": the drop-in directory is writable by every user (mode 1777)"));
    EXPECT_TRUE(starts(p[2], (dir_ / "10-a.toml").string() + ": the drop-in is owned by uid 65534")) << p[2];

    ::chmod(root_.c_str(), 01777);  // like /tmp: others cannot replace root's file
    EXPECT_EQ(policy_permission_problems(file_, dir_).size(), 2u);
}

TEST(PolicyContent, ThePublicDemoSecretIsReportedWhereItIsTrusted)
{
    Policy pol;
    EXPECT_TRUE(policy_content_problems(pol).empty());
    JwtProvider own;
    own.name = "idp";
    own.keys.push_back({"", "HS256", "a secret of the operator's own, 32 bytes", "", {"/etc/l7fast/policy.toml", 7, 9}});
    pol.jwt_providers.push_back(own);
    EXPECT_TRUE(policy_content_problems(pol).empty());

    JwtProvider demo;
    demo.name = "demo";
    demo.keys.push_back({"k1", "HS256", std::string(kPublicDemoSecretMarker) + ": replace me", "",
                         {"/etc/l7fast/policy.d/10-x.toml", 12, 8}});
    pol.jwt_providers.push_back(demo);
    auto p = policy_content_problems(pol);
    ASSERT_EQ(p.size(), 1u);
    EXPECT_TRUE(starts(p[0], "/etc/l7fast/policy.d/10-x.toml:12:8: JWT provider \"demo\" trusts the public demo secret"))
        << p[0];

    // the default policy that ships with l7fast is the one that trusts it
    auto shipped = PolicyLoader::load(std::string(L7FAST_TEST_DATA) + "/../../packaging/policy.toml", "");
    ASSERT_TRUE(shipped.ok()) << shipped.error_text();
    p = policy_content_problems(shipped.policy());
    ASSERT_EQ(p.size(), 1u) << ::testing::PrintToString(p);
    EXPECT_NE(p[0].find("JWT provider \"demo\""), std::string::npos) << p[0];
}
