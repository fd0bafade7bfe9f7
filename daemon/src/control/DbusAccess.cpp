#include "control/DbusAccess.hpp"

#include <grp.h>
#include <pwd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "control/BusNames.hpp"

namespace l7fast::control {

namespace {

struct CredsUnref {
    void operator()(sd_bus_creds* c) const { sd_bus_creds_unref(c); }
};

// The user database's groups of uid (primary first); empty if unknown.
std::vector<gid_t> groups_of_user(uid_t uid)
{
    std::vector<char> buf(16384);
    passwd pw{};
    passwd* found = nullptr;
    if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) != 0 || !found)
        return {};
    int n = 64;
    std::vector<gid_t> groups(static_cast<size_t>(n));
    if (getgrouplist(pw.pw_name, pw.pw_gid, groups.data(), &n) < 0) {
        groups.resize(static_cast<size_t>(n));
        if (getgrouplist(pw.pw_name, pw.pw_gid, groups.data(), &n) < 0)
            return {pw.pw_gid};
    }
    groups.resize(static_cast<size_t>(n));
    return groups;
}

}  // namespace

int query_caller(sd_bus_message* m, CallerIdentity* who, sd_bus_error* error)
{
    sd_bus_creds* raw = nullptr;
    int r = sd_bus_query_sender_creds(m, SD_BUS_CREDS_EUID | SD_BUS_CREDS_SUPPLEMENTARY_GIDS, &raw);
    if (r < 0)
        return sd_bus_error_setf(error, SD_BUS_ERROR_ACCESS_DENIED, "Cannot identify the caller: %s.",
                                 std::strerror(-r));
    std::unique_ptr<sd_bus_creds, CredsUnref> creds(raw);
    const uint64_t augmented = sd_bus_creds_get_augmented_mask(raw);
    uid_t uid = 0;
    if ((augmented & SD_BUS_CREDS_EUID) || sd_bus_creds_get_euid(raw, &uid) < 0)
        return sd_bus_error_set(error, SD_BUS_ERROR_ACCESS_DENIED,
                                "Cannot identify the caller: the bus did not report its user id.");
    who->uid = uid;
    who->groups.clear();
    const gid_t* gids = nullptr;
    int n = (augmented & SD_BUS_CREDS_SUPPLEMENTARY_GIDS) ? -ENODATA
                                                          : sd_bus_creds_get_supplementary_gids(raw, &gids);
    if (n >= 0)
        who->groups.assign(gids, gids + n);
    else
        who->groups = groups_of_user(uid);
    return 0;
}

std::optional<gid_t> admin_group_gid()
{
    std::vector<char> buf(16384);
    group gr{};
    group* found = nullptr;
    if (getgrnam_r(kAdminGroup, &gr, buf.data(), buf.size(), &found) != 0 || !found)
        return std::nullopt;
    return gr.gr_gid;
}

bool may_reload(const CallerIdentity& who)
{
    if (who.uid == 0)
        return true;
    auto gid = admin_group_gid();
    return gid && who.in_group(*gid);
}

std::string reload_denied_message(const CallerIdentity& who)
{
    std::string msg = "Reloading the l7fast policy needs root";
    if (admin_group_gid())
        msg += std::string(" or membership of the group \"") + kAdminGroup + "\"";
    msg += " (you are uid " + std::to_string(who.uid) + "): run it with sudo";
    if (admin_group_gid())
        msg += std::string(", or have an administrator add you with `adduser USER ") + kAdminGroup +
               "` and log in again";
    return msg + ".";
}

}  // namespace l7fast::control
