#include "control/PolicyFileAccess.hpp"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/statfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <deque>

namespace l7fast::control {

namespace {

constexpr uint16_t kAclUserObj = 0x01, kAclUser = 0x02, kAclGroupObj = 0x04, kAclGroup = 0x08,
                   kAclMask = 0x10, kAclOther = 0x20;
constexpr uint32_t kAclXattrVersion = 2;
// Linux's MAXSYMLINKS.
constexpr int kMaxSymlinks = 40;

// File systems whose "regular files" are kernel interfaces, not data.
struct PseudoFs {
    unsigned long magic;
    const char* name;
};
constexpr PseudoFs kPseudoFs[] = {
    {PROC_SUPER_MAGIC, "proc"},      {SYSFS_MAGIC, "sysfs"},
    {DEBUGFS_MAGIC, "debugfs"},      {TRACEFS_MAGIC, "tracefs"},
    {SECURITYFS_MAGIC, "securityfs"}, {BPF_FS_MAGIC, "bpf"},
    {CGROUP_SUPER_MAGIC, "cgroup"},  {CGROUP2_SUPER_MAGIC, "cgroup2"},
    {EFIVARFS_MAGIC, "efivarfs"},    {DEVPTS_SUPER_MAGIC, "devpts"},
    {PSTOREFS_MAGIC, "pstore"},      {0x62656570 /* CONFIGFS_MAGIC */, "configfs"},
    {0x65735543 /* FUSECTL_SUPER_MAGIC */, "fusectl"},
};

const char* file_type(mode_t mode)
{
    switch (mode & S_IFMT) {
    case S_IFDIR: return "a directory";
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    case S_IFIFO: return "a FIFO";
    case S_IFSOCK: return "a socket";
    case S_IFLNK: return "a symbolic link";
    default: return "not a regular file";
    }
}

std::string lower_first(std::string s)
{
    if (!s.empty())
        s[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(s[0])));
    return s;
}

// The access ACL of an O_PATH descriptor: nullopt without one; *failed when
// it cannot be read (then access must be refused).
std::optional<std::vector<AclEntry>> acl_of(int fd, bool* failed)
{
    *failed = false;
    const std::string proc = "/proc/self/fd/" + std::to_string(fd);
    char buf[4096];
    ssize_t n = ::getxattr(proc.c_str(), "system.posix_acl_access", buf, sizeof buf);
    if (n < 0) {
        if (errno == ENODATA || errno == EOPNOTSUPP)
            return std::nullopt;
        *failed = true;
        return std::nullopt;
    }
    auto acl = parse_posix_acl(std::string_view(buf, static_cast<size_t>(n)));
    if (!acl)
        *failed = true;
    return acl;
}

std::deque<std::string> split_path(std::string_view p)
{
    std::deque<std::string> out;
    size_t i = 0;
    while (i <= p.size()) {
        size_t j = p.find('/', i);
        if (j == std::string_view::npos)
            j = p.size();
        out.emplace_back(p.substr(i, j - i));
        i = j + 1;
    }
    return out;
}

}  // namespace

bool CallerIdentity::in_group(gid_t g) const
{
    return std::find(groups.begin(), groups.end(), g) != groups.end();
}

std::optional<std::vector<AclEntry>> parse_posix_acl(std::string_view blob)
{
    if (blob.size() < 4 || (blob.size() - 4) % 8 != 0)
        return std::nullopt;
    auto le16 = [&](size_t off) {
        return static_cast<uint16_t>(static_cast<uint8_t>(blob[off]) | static_cast<uint8_t>(blob[off + 1]) << 8);
    };
    auto le32 = [&](size_t off) {
        return static_cast<uint32_t>(le16(off)) | static_cast<uint32_t>(le16(off + 2)) << 16;
    };
    if (le32(0) != kAclXattrVersion)
        return std::nullopt;
    std::vector<AclEntry> out;
    for (size_t off = 4; off < blob.size(); off += 8)
        out.push_back({le16(off), le16(off + 2), le32(off + 4)});
    return out;
}

bool dac_permits(const struct stat& st, const std::vector<AclEntry>* acl, const CallerIdentity& who,
                 unsigned want)
{
    want &= 7;
    if (who.uid == st.st_uid)
        return ((st.st_mode >> 6) & want) == want;
    if (!acl || acl->empty()) {
        unsigned bits = who.in_group(st.st_gid) ? st.st_mode >> 3 : st.st_mode;
        return (bits & want) == want;
    }
    // posix_acl_permission(), for a caller who is not the owner
    bool found = false;
    for (size_t i = 0; i < acl->size(); i++) {
        const AclEntry& e = (*acl)[i];
        bool matched = false;
        switch (e.tag) {
        case kAclUserObj:
            break;  // the owner was handled above
        case kAclUser:
            if (e.id == who.uid) {
                matched = true;
            }
            break;
        case kAclGroupObj:
        case kAclGroup:
            if (who.in_group(e.tag == kAclGroupObj ? st.st_gid : e.id)) {
                found = true;
                matched = (e.perm & want) == want;
            }
            break;
        case kAclMask:
            break;
        case kAclOther:
            return !found && (e.perm & want) == want;
        default:
            return false;
        }
        if (matched) {
            for (size_t j = i + 1; j < acl->size(); j++)
                if ((*acl)[j].tag == kAclMask)
                    return (e.perm & (*acl)[j].perm & want) == want;
            return (e.perm & want) == want;
        }
    }
    return false;
}

std::string policy_path_problem(std::string_view path)
{
    if (path.empty())
        return "CheckPolicy needs the absolute path of a policy file; got an empty string.";
    if (path.front() != '/')
        return "The policy path must be absolute (the daemon does not share your working directory); got \"" +
               std::string(path) + "\".";
    if (path.size() >= PATH_MAX)
        return "The policy path is longer than " + std::to_string(PATH_MAX - 1) + " bytes.";
    return {};
}

PolicyFile open_policy_file(const std::string& path, const CallerIdentity* who, uint64_t max_bytes)
{
    PolicyFile out;
    if (std::string why = policy_path_problem(path); !why.empty()) {
        out.error = why;
        return out;
    }
    const std::string prefix = "Cannot check " + path + ": ";
    auto fail = [&](const std::string& why) {
        out.fd.reset();
        out.error = prefix + why;
        return std::move(out);
    };
    auto fail_errno = [&](int err) { return fail(lower_first(std::strerror(err)) + "."); };
    auto denied = [&] {
        return fail("permission denied for uid " + std::to_string(who->uid) +
                    " (CheckPolicy reads only files that you could read yourself; use `l7fastctl check`, which "
                    "reads the file as you, or run it as root).");
    };
    // Permission of `who` on an inode; false also when its ACL is unreadable.
    auto permits = [&](int fd, const struct stat& st, unsigned want) {
        bool failed = false;
        auto acl = acl_of(fd, &failed);
        return !failed && dac_permits(st, acl ? &*acl : nullptr, *who, want);
    };

    Fd cur(::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!cur.valid())
        return fail_errno(errno);
    std::deque<std::string> todo = split_path(path);
    int links = 0;
    struct stat st {};
    if (::fstat(cur.get(), &st) != 0)
        return fail_errno(errno);
    while (!todo.empty()) {
        std::string comp = std::move(todo.front());
        todo.pop_front();
        if (comp.empty() || comp == ".")
            continue;
        if (!S_ISDIR(st.st_mode))
            return fail_errno(ENOTDIR);
        if (who && !permits(cur.get(), st, 1))
            return denied();
        Fd next(::openat(cur.get(), comp.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
        if (!next.valid())
            return fail_errno(errno);
        struct stat nst {};
        if (::fstat(next.get(), &nst) != 0)
            return fail_errno(errno);
        if (S_ISLNK(nst.st_mode)) {
            if (++links > kMaxSymlinks)
                return fail_errno(ELOOP);
            char target[PATH_MAX];
            ssize_t n = ::readlinkat(next.get(), "", target, sizeof target);
            if (n < 0)
                return fail_errno(errno);
            if (n == 0 || static_cast<size_t>(n) >= sizeof target)
                return fail_errno(n == 0 ? ENOENT : ENAMETOOLONG);
            const std::string_view t(target, static_cast<size_t>(n));
            auto parts = split_path(t);
            todo.insert(todo.begin(), parts.begin(), parts.end());
            if (t.front() == '/') {
                cur.reset(::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
                if (!cur.valid() || ::fstat(cur.get(), &st) != 0)
                    return fail_errno(errno);
            }
            continue;
        }
        cur = std::move(next);
        st = nst;
    }

    struct statfs sfs {};
    if (::fstatfs(cur.get(), &sfs) != 0)
        return fail_errno(errno);
    for (const auto& fs : kPseudoFs)
        if (static_cast<unsigned long>(sfs.f_type) == fs.magic)
            return fail(std::string("it is on the ") + fs.name +
                        " pseudo file system; a policy must be a regular file.");
    if (!S_ISREG(st.st_mode))
        return fail(std::string("it is ") + file_type(st.st_mode) + ", not a regular file.");
    if (who && !permits(cur.get(), st, 4))
        return denied();
    if (static_cast<uint64_t>(st.st_size) > max_bytes)
        return fail("it is " + std::to_string(st.st_size) + " bytes; policy files are limited to " +
                    std::to_string(max_bytes >> 20) + " MiB.");
    out.fd = std::move(cur);
    out.size = static_cast<uint64_t>(st.st_size);
    return out;
}

}  // namespace l7fast::control
