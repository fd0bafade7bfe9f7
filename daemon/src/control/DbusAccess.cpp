#include "control/DbusAccess.hpp"

#include <grp.h>
#include <pwd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "common/Log.hpp"
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

struct MessageUnref {
    void operator()(sd_bus_message* m) const { sd_bus_message_unref(m); }
};

// org.freedesktop.DBus.GetConnectionCredentials of the sender: the uid and
// groups dbus-daemon itself uses for <policy user/group>. (sd-bus 252 asks
// the bus for the uid only, and would read groups from /proc, racily.)
// Returns 1 with *who filled, 0 when the bus did not say, <0 on error.
int bus_credentials(sd_bus_message* m, CallerIdentity* who, bool* groups_from_bus)
{
    const char* sender = sd_bus_message_get_sender(m);
    sd_bus* bus = sd_bus_message_get_bus(m);
    if (!sender || !bus)
        return 0;
    sd_bus_message* raw = nullptr;
    sd_bus_error error = SD_BUS_ERROR_NULL;
    int r = sd_bus_call_method(bus, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                               "GetConnectionCredentials", &error, &raw, "s", sender);
    sd_bus_error_free(&error);
    if (r < 0)
        return r;
    std::unique_ptr<sd_bus_message, MessageUnref> reply(raw);
    bool have_uid = false;
    *groups_from_bus = false;
    if ((r = sd_bus_message_enter_container(raw, 'a', "{sv}")) <= 0)
        return r < 0 ? r : -EBADMSG;
    while ((r = sd_bus_message_enter_container(raw, 'e', "sv")) > 0) {
        const char* key = nullptr;
        if ((r = sd_bus_message_read_basic(raw, 's', &key)) <= 0)
            return r < 0 ? r : -EBADMSG;
        if (std::strcmp(key, "UnixUserID") == 0 && sd_bus_message_enter_container(raw, 'v', "u") > 0) {
            uint32_t uid = 0;
            if ((r = sd_bus_message_read_basic(raw, 'u', &uid)) <= 0)
                return r < 0 ? r : -EBADMSG;
            who->uid = uid;
            have_uid = true;
        } else if (std::strcmp(key, "UnixGroupIDs") == 0 && sd_bus_message_enter_container(raw, 'v', "au") > 0) {
            const void* p = nullptr;
            size_t size = 0;
            if ((r = sd_bus_message_read_array(raw, 'u', &p, &size)) < 0)
                return r;
            const auto* g = static_cast<const uint32_t*>(p);
            who->groups.assign(g, g + size / sizeof(uint32_t));
            *groups_from_bus = true;
        } else {
            if ((r = sd_bus_message_skip(raw, "v")) < 0)
                return r;
            if ((r = sd_bus_message_exit_container(raw)) < 0)
                return r;
            continue;
        }
        if ((r = sd_bus_message_exit_container(raw)) < 0 || (r = sd_bus_message_exit_container(raw)) < 0)
            return r;
    }
    if (r < 0)
        return r;
    return have_uid ? 1 : 0;
}

}  // namespace

int query_caller(sd_bus_message* m, CallerIdentity* who, sd_bus_error* error)
{
    who->groups.clear();
    bool groups_from_bus = false;
    int r = bus_credentials(m, who, &groups_from_bus);
    if (r <= 0) {
        // Not via a bus daemon that answers GetConnectionCredentials: what
        // sd-bus knows without augmenting from /proc.
        sd_bus_creds* raw = nullptr;
        r = sd_bus_query_sender_creds(m, SD_BUS_CREDS_EUID, &raw);
        if (r < 0)
            return sd_bus_error_setf(error, SD_BUS_ERROR_ACCESS_DENIED, "Cannot identify the caller: %s.",
                                     std::strerror(-r));
        std::unique_ptr<sd_bus_creds, CredsUnref> creds(raw);
        uid_t uid = 0;
        if ((sd_bus_creds_get_augmented_mask(raw) & SD_BUS_CREDS_EUID) || sd_bus_creds_get_euid(raw, &uid) < 0)
            return sd_bus_error_set(error, SD_BUS_ERROR_ACCESS_DENIED,
                                    "Cannot identify the caller: the bus did not report its user id.");
        who->uid = uid;
    }
    if (!groups_from_bus)
        who->groups = groups_of_user(who->uid);
    if (log::level() >= log::Level::Debug) {
        std::string g;
        for (gid_t x : who->groups)
            g += (g.empty() ? "" : ",") + std::to_string(x);
        log::debug("D-Bus: caller uid ", who->uid, ", groups ", g.empty() ? "none" : g,
                   groups_from_bus ? " (from the bus)" : " (from the user database)");
    }
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

std::string denied_message(const CallerIdentity& who, const std::string& what, const std::string& command)
{
    std::string msg = what + " needs root";
    if (admin_group_gid())
        msg += std::string(" or membership of the group \"") + kAdminGroup + "\"";
    msg += " (you are uid " + std::to_string(who.uid) + "): run `sudo l7fastctl " + command + "`";
    if (admin_group_gid())
        msg += std::string(", or have an administrator add you with `adduser USER ") + kAdminGroup +
               "` and log in again";
    return msg + ".";
}

}  // namespace l7fast::control
