#include "config/FileSafety.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace l7fast::policy {

namespace fs = std::filesystem;

namespace {

std::string mode_text(mode_t m)
{
    char buf[8];
    std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(m & 07777));
    return buf;
}

bool trusted_owner(uid_t uid) { return uid == 0 || uid == ::geteuid(); }

// `what` is "policy file", "drop-in" or "drop-in directory".
void check_writers(const fs::path& p, const struct stat& st, const char* what,
                   std::vector<std::string>& out)
{
    const std::string path = p.string();
    const std::string fix = "chmod go-w ";
    if (st.st_mode & S_IWOTH) {
        out.push_back(path + ": the " + what + " is writable by every user (mode " + mode_text(st.st_mode) +
                      "): anyone can change the policy l7fastd enforces; run " + fix + path);
    } else if ((st.st_mode & S_IWGRP) && st.st_gid != 0) {
        out.push_back(path + ": the " + what + " is writable by group " + std::to_string(st.st_gid) +
                      " (mode " + mode_text(st.st_mode) +
                      "): its members can change the policy l7fastd enforces; run " + fix + path);
    }
    if (!trusted_owner(st.st_uid))
        out.push_back(path + ": the " + what + " is owned by uid " + std::to_string(st.st_uid) +
                      ", who can change the policy l7fastd enforces; run chown root: " + path);
}

}  // namespace

std::vector<std::string> policy_permission_problems(const fs::path& file, const fs::path& dropin_dir)
{
    std::vector<std::string> out;
    struct stat st{};
    if (::stat(file.c_str(), &st) == 0 && S_ISREG(st.st_mode))
        check_writers(file, st, "policy file", out);
    fs::path parent = file.parent_path();
    if (parent.empty())
        parent = ".";
    if (::stat(parent.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & S_IWOTH) &&
        !(st.st_mode & S_ISVTX) && parent != dropin_dir)
        out.push_back(parent.string() + ": the policy file's directory is writable by every user (mode " +
                      mode_text(st.st_mode) + "): anyone can replace " + file.string() +
                      "; run chmod o-w " + parent.string());
    if (::stat(dropin_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
        return out;
    check_writers(dropin_dir, st, "drop-in directory", out);
    std::error_code ec;
    std::vector<fs::path> dropins;
    for (const auto& e : fs::directory_iterator(dropin_dir, ec))
        if (e.path().extension() == ".toml")
            dropins.push_back(e.path());
    std::sort(dropins.begin(), dropins.end());
    for (const auto& p : dropins)
        if (::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode))
            check_writers(p, st, "drop-in", out);
    return out;
}

std::vector<std::string> policy_content_problems(const Policy& policy)
{
    std::vector<std::string> out;
    for (const auto& p : policy.jwt_providers)
        for (const auto& k : p.keys)
            if (std::string_view(k.secret).substr(0, kPublicDemoSecretMarker.size()) == kPublicDemoSecretMarker)
                out.push_back(k.where.str() + ": JWT provider \"" + p.name +
                              "\" trusts the public demo secret of the default policy, so anyone can mint tokens "
                              "it accepts; give it a secret of your own (openssl rand 32 | basenc --base64url | tr -d =)");
    return out;
}

}  // namespace l7fast::policy
