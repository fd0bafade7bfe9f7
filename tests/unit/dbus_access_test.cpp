// Who may call what on org.l7fast.Manager1, and which files CheckPolicy
// reads on a caller's behalf (control/PolicyFileAccess.hpp,
// control/DbusAccess.hpp). The file tests make a scratch tree; they check
// permissions for uid 65534 (nobody) whoever runs them.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>

#include "control/DbusAccess.hpp"
#include "control/PolicyFileAccess.hpp"

using namespace l7fast::control;
namespace fs = std::filesystem;

namespace {

constexpr uid_t kNobody = 65534;

std::string acl_blob(std::initializer_list<AclEntry> entries, uint32_t version = 2)
{
    std::string b;
    auto put16 = [&](uint16_t v) {
        b += static_cast<char>(v & 0xff);
        b += static_cast<char>(v >> 8);
    };
    auto put32 = [&](uint32_t v) {
        put16(static_cast<uint16_t>(v & 0xffff));
        put16(static_cast<uint16_t>(v >> 16));
    };
    put32(version);
    for (const auto& e : entries) {
        put16(e.tag);
        put16(e.perm);
        put32(e.id);
    }
    return b;
}

struct stat file_stat(uid_t uid, gid_t gid, mode_t mode)
{
    struct stat st {};
    st.st_uid = uid;
    st.st_gid = gid;
    st.st_mode = S_IFREG | mode;
    return st;
}

class ScratchTree : public ::testing::Test {
protected:
    void SetUp() override
    {
        char tmpl[] = "/tmp/l7fast-dbus-access-XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr);
        root_ = tmpl;
        chmod(root_.c_str(), 0755);
    }
    void TearDown() override
    {
        std::error_code ec;
        fs::permissions(root_, fs::perms::owner_all, fs::perm_options::add, ec);
        for (auto& p : fs::recursive_directory_iterator(root_, ec))
            if (p.is_directory(ec) && !p.is_symlink(ec))
                fs::permissions(p.path(), fs::perms::owner_all, fs::perm_options::add, ec);
        fs::remove_all(root_, ec);
    }
    std::string write(const std::string& rel, const std::string& text, mode_t mode = 0644)
    {
        const std::string p = root_ + "/" + rel;
        fs::create_directories(fs::path(p).parent_path());
        std::ofstream(p) << text;
        chmod(p.c_str(), mode);
        return p;
    }
    std::string dir(const std::string& rel, mode_t mode)
    {
        const std::string p = root_ + "/" + rel;
        fs::create_directories(p);
        chmod(p.c_str(), mode);
        return p;
    }

    std::string root_;
    const CallerIdentity nobody_{kNobody, {kNobody}};
};

}  // namespace

TEST(PosixAcl, ParsesTheXattrFormat)
{
    auto acl = parse_posix_acl(acl_blob({{0x01, 6, 0xffffffff}, {0x02, 4, 1000}, {0x04, 4, 0xffffffff},
                                         {0x10, 4, 0xffffffff}, {0x20, 0, 0xffffffff}}));
    ASSERT_TRUE(acl);
    ASSERT_EQ(acl->size(), 5u);
    EXPECT_EQ((*acl)[1].tag, 0x02);
    EXPECT_EQ((*acl)[1].perm, 4);
    EXPECT_EQ((*acl)[1].id, 1000u);
}

TEST(PosixAcl, RefusesMalformedBlobs)
{
    EXPECT_FALSE(parse_posix_acl(""));
    EXPECT_FALSE(parse_posix_acl(acl_blob({{0x01, 6, 0}}, 1)));      // unknown version
    EXPECT_FALSE(parse_posix_acl(acl_blob({{0x01, 6, 0}}) + "xyz"));  // torn entry
}

TEST(DacPermits, ModeBitsByClass)
{
    const CallerIdentity who{1000, {1000, 50}};
    EXPECT_TRUE(dac_permits(file_stat(1000, 0, 0400), nullptr, who, 4));
    EXPECT_FALSE(dac_permits(file_stat(1000, 0, 0044), nullptr, who, 4)) << "the owner class decides for the owner";
    EXPECT_TRUE(dac_permits(file_stat(0, 50, 0040), nullptr, who, 4)) << "supplementary group";
    EXPECT_FALSE(dac_permits(file_stat(0, 50, 0004), nullptr, who, 4)) << "the group class decides for members";
    EXPECT_TRUE(dac_permits(file_stat(0, 0, 0004), nullptr, who, 4));
    EXPECT_FALSE(dac_permits(file_stat(0, 0, 0640), nullptr, who, 4)) << "/etc/shadow-like";
    EXPECT_TRUE(dac_permits(file_stat(0, 0, 0711), nullptr, who, 1));
    EXPECT_FALSE(dac_permits(file_stat(0, 0, 0744), nullptr, who, 1));
}

TEST(DacPermits, AccessAclNamedEntriesAndMask)
{
    const CallerIdentity who{1000, {1000}};
    // user::rw- user:1000:r-- group::--- mask::r-- other::---
    std::vector<AclEntry> acl{{0x01, 6, 0}, {0x02, 4, 1000}, {0x04, 0, 0}, {0x10, 4, 0}, {0x20, 0, 0}};
    EXPECT_TRUE(dac_permits(file_stat(0, 0, 0640), &acl, who, 4));
    acl[3].perm = 0;  // mask::---
    EXPECT_FALSE(dac_permits(file_stat(0, 0, 0600), &acl, who, 4));
    // user:1000:--- overrides other::r--
    std::vector<AclEntry> deny{{0x01, 6, 0}, {0x02, 0, 1000}, {0x04, 4, 0}, {0x10, 4, 0}, {0x20, 4, 0}};
    EXPECT_FALSE(dac_permits(file_stat(0, 0, 0644), &deny, who, 4));
    // a matching group without the permission denies even when other allows
    std::vector<AclEntry> grp{{0x01, 6, 0}, {0x04, 0, 0}, {0x08, 0, 1000}, {0x10, 7, 0}, {0x20, 4, 0}};
    EXPECT_FALSE(dac_permits(file_stat(0, 0, 0674), &grp, who, 4));
    const CallerIdentity stranger{2000, {2000}};
    EXPECT_TRUE(dac_permits(file_stat(0, 0, 0674), &grp, stranger, 4));
}

TEST(PolicyPath, ArgumentsAreCheckedBeforeAnyFileIsTouched)
{
    EXPECT_NE(policy_path_problem("").find("empty"), std::string::npos);
    EXPECT_NE(policy_path_problem("policy.toml").find("must be absolute"), std::string::npos);
    EXPECT_NE(policy_path_problem("./policy.toml").find("\"./policy.toml\""), std::string::npos);
    EXPECT_NE(policy_path_problem("/" + std::string(5000, 'a')).find("longer than"), std::string::npos);
    EXPECT_EQ(policy_path_problem("/etc/l7fast/policy.toml"), "");
}

TEST_F(ScratchTree, RootMayCheckAnyRegularFile)
{
    const auto p = write("secret.toml", "x = 1\n", 0600);
    PolicyFile f = open_policy_file(p, nullptr, 1 << 20);
    EXPECT_EQ(f.error, "");
    EXPECT_TRUE(f.fd.valid());
    EXPECT_EQ(f.size, 6u);
}

TEST_F(ScratchTree, NonRegularFilesAreRefused)
{
    EXPECT_NE(open_policy_file(root_, nullptr, 1 << 20).error.find("is a directory, not a regular file"),
              std::string::npos);
    EXPECT_NE(open_policy_file("/dev/null", nullptr, 1 << 20).error.find("character device"), std::string::npos);
    const std::string fifo = root_ + "/fifo";
    ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0);
    // A FIFO nobody writes would block a reader for ever: the call must not
    // wait for a writer. One that does is released after a deadline only a
    // real block reaches (a writer comes and goes), so the test fails
    // instead of hanging; how fast the call returns is not judged.
    auto refused = std::async(std::launch::async, [&] { return open_policy_file(fifo, nullptr, 1 << 20).error; });
    if (refused.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
        ADD_FAILURE() << "open_policy_file blocked on a FIFO";
        const int writer = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
        if (writer >= 0)
            ::close(writer);
    }
    EXPECT_NE(refused.get().find("is a FIFO"), std::string::npos);
}

TEST_F(ScratchTree, PseudoFileSystemsAreRefused)
{
    PolicyFile f = open_policy_file("/proc/self/status", nullptr, 1 << 20);
    EXPECT_NE(f.error.find("proc pseudo file system"), std::string::npos) << f.error;
    EXPECT_FALSE(f.fd.valid());
    f = open_policy_file("/proc/self/environ", &nobody_, 1 << 20);
    EXPECT_NE(f.error.find("proc pseudo file system"), std::string::npos) << f.error;
    if (access("/sys/kernel/mm/transparent_hugepage/enabled", F_OK) == 0) {
        EXPECT_NE(open_policy_file("/sys/kernel/mm/transparent_hugepage/enabled", nullptr, 1 << 20)
                      .error.find("sysfs"),
                  std::string::npos);
    }
}

TEST_F(ScratchTree, FilesOverTheLimitAreRefusedUnread)
{
    const auto p = write("big.toml", std::string(4096, '#'));
    PolicyFile f = open_policy_file(p, nullptr, 1024);
    EXPECT_NE(f.error.find("4096 bytes"), std::string::npos) << f.error;
    EXPECT_FALSE(f.fd.valid());
}

TEST_F(ScratchTree, MissingFilesAndLoopsSayWhat)
{
    EXPECT_EQ(open_policy_file(root_ + "/none.toml", nullptr, 1 << 20).error,
              "Cannot check " + root_ + "/none.toml: no such file or directory.");
    ASSERT_EQ(symlink("loop", (root_ + "/loop").c_str()), 0);
    EXPECT_NE(open_policy_file(root_ + "/loop", nullptr, 1 << 20).error.find("too many levels of symbolic links"),
              std::string::npos);
    write("plain.toml", "");
    EXPECT_NE(open_policy_file(root_ + "/plain.toml/x", nullptr, 1 << 20).error.find("not a directory"),
              std::string::npos);
}

TEST_F(ScratchTree, OthersMayCheckOnlyWhatTheyCouldRead)
{
    // run as root or not, these files are not nobody's
    const auto readable = write("open/p.toml", "a = 1\n", 0644);
    const auto unreadable = write("open/secret.toml", "password = \"hunter2\"\n", 0600);
    const auto hidden = write("closed/p.toml", "a = 1\n", 0644);
    dir("closed", 0700);

    PolicyFile f = open_policy_file(readable, &nobody_, 1 << 20);
    EXPECT_EQ(f.error, "");
    EXPECT_TRUE(f.fd.valid());

    f = open_policy_file(unreadable, &nobody_, 1 << 20);
    EXPECT_NE(f.error.find("permission denied for uid 65534"), std::string::npos) << f.error;
    EXPECT_EQ(f.error.find("hunter2"), std::string::npos);
    EXPECT_FALSE(f.fd.valid());

    // no search permission: existence is not revealed either
    EXPECT_NE(open_policy_file(hidden, &nobody_, 1 << 20).error.find("permission denied"), std::string::npos);
    EXPECT_NE(open_policy_file(root_ + "/closed/none.toml", &nobody_, 1 << 20).error.find("permission denied"),
              std::string::npos);
}

TEST_F(ScratchTree, SymlinksAreFollowedAsTheCaller)
{
    write("open/p.toml", "a = 1\n", 0644);
    write("closed/q.toml", "a = 1\n", 0644);
    dir("closed", 0700);
    dir("links", 0755);
    ASSERT_EQ(symlink("../open/p.toml", (root_ + "/links/rel").c_str()), 0);
    ASSERT_EQ(symlink((root_ + "/closed/q.toml").c_str(), (root_ + "/links/abs").c_str()), 0);
    ASSERT_EQ(symlink("/etc/shadow", (root_ + "/links/shadow").c_str()), 0);

    EXPECT_EQ(open_policy_file(root_ + "/links/rel", &nobody_, 1 << 20).error, "");
    EXPECT_NE(open_policy_file(root_ + "/links/abs", &nobody_, 1 << 20).error.find("permission denied"),
              std::string::npos);
    if (access("/etc/shadow", F_OK) == 0) {
        EXPECT_NE(open_policy_file(root_ + "/links/shadow", &nobody_, 1 << 20).error.find("permission denied"),
                  std::string::npos);
        EXPECT_NE(open_policy_file("/etc/shadow", &nobody_, 1 << 20).error.find("permission denied"),
                  std::string::npos);
    }
    EXPECT_EQ(open_policy_file(root_ + "/links/../open/./p.toml", &nobody_, 1 << 20).error, "");
}

// The checked descriptor is what the daemon reads: replacing the path after
// the check does not change which file is read.
TEST_F(ScratchTree, TheCheckedInodeIsTheOneRead)
{
    const auto p = write("open/p.toml", "first = 1\n", 0644);
    PolicyFile f = open_policy_file(p, &nobody_, 1 << 20);
    ASSERT_EQ(f.error, "");
    ASSERT_EQ(rename(p.c_str(), (root_ + "/open/old.toml").c_str()), 0);
    write("open/p.toml", "second = 2\n", 0644);
    std::ifstream in("/proc/self/fd/" + std::to_string(f.fd.get()));
    std::string line;
    std::getline(in, line);
    EXPECT_EQ(line, "first = 1");
}

TEST(ReloadAccess, RootAlwaysOthersOnlyThroughTheGroup)
{
    EXPECT_TRUE(may_reload({0, {}}));
    EXPECT_FALSE(may_reload({kNobody, {kNobody}}));
    if (auto gid = admin_group_gid()) {
        EXPECT_TRUE(may_reload({kNobody, {kNobody, *gid}}));
        EXPECT_NE(denied_message({kNobody, {}}, "Reloading the l7fast policy", "reload").find("adduser"),
                  std::string::npos);
    }
    const std::string msg = denied_message({kNobody, {kNobody}}, "Changing l7fastd's log level", "log-level");
    EXPECT_EQ(msg.rfind("Changing l7fastd's log level needs root", 0), 0u) << msg;
    EXPECT_NE(msg.find("`sudo l7fastctl log-level`"), std::string::npos) << msg;
    EXPECT_NE(msg.find("uid 65534"), std::string::npos);
}
