#include "control/DbusService.hpp"

#include <fcntl.h>
#include <poll.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "common/Clock.hpp"
#include "common/Log.hpp"
#include "control/BusCodec.hpp"
#include "control/BusNames.hpp"
#include "control/DbusAccess.hpp"
#include "control/PolicyFileAccess.hpp"
#include "loader/PolicyLoader.hpp"

namespace l7fast::control {

namespace {

// sd_bus_process() calls per turn of the loop before other work gets a go.
constexpr int kProcessBatch = 64;
constexpr auto kReconnectInterval = std::chrono::seconds(5);
// Synchronous calls to the bus driver (RequestName at start, credentials of
// a caller, ReleaseName at exit) must not stall the daemon for sd-bus's
// default 25 s when dbus-daemon is wedged.
constexpr uint64_t kDriverCallTimeoutUsec = 5'000'000;

std::string system_bus_address()
{
    const char* a = std::getenv("DBUS_SYSTEM_BUS_ADDRESS");
    return a && *a ? a : "unix:path=/run/dbus/system_bus_socket";
}

std::string serialize_features(const std::vector<std::pair<std::string, std::string>>& f)
{
    std::string s;
    for (const auto& [k, v] : f)
        s += k + '\0' + v + '\0';
    return s;
}

// A reply or an error, never an exception through sd-bus's C frames.
template <class F>
int run_method(sd_bus_error* error, const char* member, F&& body)
{
    try {
        return body();
    } catch (const std::exception& e) {
        log::error("D-Bus ", member, "() failed: ", e.what());
        return sd_bus_error_setf(error, SD_BUS_ERROR_FAILED, "%s() failed in l7fastd: %s", member, e.what());
    } catch (...) {
        return sd_bus_error_setf(error, SD_BUS_ERROR_FAILED, "%s() failed in l7fastd.", member);
    }
}

template <class Append>
int reply_with(sd_bus_message* m, Append&& append)
{
    sd_bus_message* reply = nullptr;
    int r = sd_bus_message_new_method_return(m, &reply);
    if (r < 0)
        return r;
    r = append(reply);
    if (r >= 0)
        r = sd_bus_send(nullptr, reply, nullptr);
    sd_bus_message_unref(reply);
    return r < 0 ? r : 1;
}

// Root or a member of the group l7fast (may_reload): 1 when admitted, with
// *who filled in; otherwise a negative errno with *error set to what the
// caller is told (and the refusal logged).
int admit_admin(sd_bus_message* m, const char* member, const char* what, const char* command,
                CallerIdentity* who, sd_bus_error* error)
{
    int r = query_caller(m, who, error);
    if (r < 0)
        return r;
    if (may_reload(*who))
        return 1;
    log::notice("D-Bus: refused ", member, " from uid ", who->uid, " (neither root nor in group ", kAdminGroup, ")");
    return sd_bus_error_set(error, SD_BUS_ERROR_ACCESS_DENIED, denied_message(*who, what, command).c_str());
}

void replace_all(std::string& s, const std::string& from, const std::string& to)
{
    for (size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size())
        s.replace(pos, from.size(), to);
}

}  // namespace

// clang-format off
const sd_bus_vtable DbusService::vtable_[] = {
    SD_BUS_VTABLE_START(0),
    SD_BUS_PROPERTY("Version", "s", DbusService::property_get, 0, SD_BUS_VTABLE_PROPERTY_CONST),
    SD_BUS_PROPERTY("Generation", "t", DbusService::property_get, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
    SD_BUS_PROPERTY("State", "s", DbusService::property_get, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
    SD_BUS_PROPERTY("Features", "a{ss}", DbusService::property_get, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
    // UNPRIVILEGED everywhere: sd-bus would otherwise admit only callers
    // with CAP_SYS_ADMIN; Reload, SetLogLevel, Drain and Undrain do their own
    // check (root or group l7fast).
    SD_BUS_METHOD_WITH_ARGS("Reload", SD_BUS_NO_ARGS,
                            SD_BUS_RESULT("b", ok, "t", generation, "s", error),
                            DbusService::method_reload, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_ARGS("GetStatus", SD_BUS_NO_ARGS, SD_BUS_RESULT("a{sv}", status),
                            DbusService::method_get_status, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_ARGS("GetStats", SD_BUS_NO_ARGS, SD_BUS_RESULT("a{sv}", stats),
                            DbusService::method_get_stats, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_ARGS("ListRoutes", SD_BUS_NO_ARGS, SD_BUS_RESULT("aa{sv}", routes),
                            DbusService::method_list_routes, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_ARGS("CheckPolicy", SD_BUS_ARGS("s", path),
                            SD_BUS_RESULT("b", ok, "s", errors, "aa{sv}", placement),
                            DbusService::method_check_policy, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_ARGS("DumpConfig", SD_BUS_NO_ARGS, SD_BUS_RESULT("s", json),
                            DbusService::method_dump_config, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_ARGS("Explain", SD_BUS_ARGS("s", request), SD_BUS_RESULT("s", json),
                            DbusService::method_explain, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_ARGS("SetLogLevel", SD_BUS_ARGS("s", level),
                            SD_BUS_RESULT("s", level, "s", source),
                            DbusService::method_set_log_level, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_ARGS("Drain", SD_BUS_ARGS("s", endpoint), SD_BUS_RESULT("b", changed, "s", state),
                            DbusService::method_drain, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_ARGS("Undrain", SD_BUS_ARGS("s", endpoint), SD_BUS_RESULT("b", changed, "s", state),
                            DbusService::method_drain, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_SIGNAL_WITH_ARGS("Reloaded", SD_BUS_ARGS("b", ok, "t", generation, "s", error), 0),
    SD_BUS_VTABLE_END,
};
// clang-format on

DbusService::DbusService(asio::io_context& io, ControlApi& api)
    : io_(io), api_(api), timer_(io), reconnect_(io), self_(std::make_shared<DbusService*>(this))
{
    connect();
    remember_properties();
    log::info("D-Bus: serving ", kBusName, " on the system bus");
}

DbusService::~DbusService()
{
    self_.reset();
    reconnect_.cancel();
    if (bus_) {
        // Closing the connection would drop the name too; releasing it first
        // lets watchers see the owner go before the connection does.
        sd_bus_set_method_call_timeout(bus_.get(), 1'000'000);
        sd_bus_release_name(bus_.get(), kBusName);
    }
    disconnect();
}

void DbusService::connect()
{
    const std::string address = system_bus_address();
    sd_bus* raw = nullptr;
    int r = sd_bus_open_system(&raw);
    if (r < 0)
        throw std::runtime_error("cannot connect to the system bus at " + address + ": " + std::strerror(-r));
    std::unique_ptr<sd_bus, BusUnref> bus(raw);
    sd_bus_set_method_call_timeout(raw, kDriverCallTimeoutUsec);

    sd_bus_slot* slot = nullptr;
    r = sd_bus_add_object_vtable(raw, &slot, kObjectPath, kInterface, vtable_, this);
    if (r < 0)
        throw std::runtime_error(std::string("cannot publish ") + kObjectPath + ": " + std::strerror(-r));
    std::unique_ptr<sd_bus_slot, SlotUnref> vslot(slot);

    r = sd_bus_request_name(raw, kBusName, 0);
    if (r == -EEXIST)
        throw std::runtime_error(std::string(kBusName) +
                                 " is already owned on the system bus: is another l7fastd running?");
    if (r == -EACCES || r == -EPERM)
        throw std::runtime_error(
            "the system bus does not allow uid " + std::to_string(geteuid()) + " to own " + kBusName +
            ": install the bus policy org.l7fast.Manager1.conf in /usr/share/dbus-1/system.d/ and reload "
            "dbus (systemctl reload dbus)");
    if (r < 0 && r != -EALREADY)
        throw std::runtime_error(std::string("cannot own ") + kBusName + " on the system bus at " + address +
                                 ": " + std::strerror(-r));

    int fd = sd_bus_get_fd(raw);
    if (fd < 0)
        throw std::runtime_error(std::string("cannot watch the system bus connection: ") + std::strerror(-fd));
    // Asio closes what it owns; sd-bus owns the connection's descriptor.
    int dup_fd = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
    if (dup_fd < 0)
        throw std::runtime_error(std::string("cannot watch the system bus connection: ") + std::strerror(errno));
    fd_ = std::make_unique<asio::posix::stream_descriptor>(io_, dup_fd);
    bus_ = std::move(bus);
    vtable_slot_ = std::move(vslot);
    epoch_++;
    // RequestName's reply may have brought other messages along.
    asio::post(io_, [w = std::weak_ptr(self_)] {
        if (auto s = w.lock())
            (*s)->process();
    });
}

void DbusService::disconnect()
{
    epoch_++;
    fd_.reset();
    timer_.cancel();
    waiting_read_ = waiting_write_ = false;
    timer_deadline_ = UINT64_MAX;
    vtable_slot_.reset();
    bus_.reset();
}

void DbusService::schedule_reconnect()
{
    reconnect_.expires_after(kReconnectInterval);
    reconnect_.async_wait([w = std::weak_ptr(self_)](boost::system::error_code ec) {
        auto s = w.lock();
        if (!s || ec)
            return;
        DbusService* self = *s;
        try {
            self->connect();
            log::notice("D-Bus: reconnected, serving ", kBusName, " again");
        } catch (const std::exception& e) {
            log::debug("D-Bus: reconnecting failed: ", e.what());
            self->disconnect();
            self->schedule_reconnect();
        }
    });
}

void DbusService::process()
{
    if (!bus_)
        return;
    for (int i = 0; i < kProcessBatch; i++) {
        int r = sd_bus_process(bus_.get(), nullptr);
        if (r < 0) {
            log::warning("D-Bus: lost the system bus connection (", std::strerror(-r),
                         "); l7fastctl cannot reach the daemon until it reconnects");
            disconnect();
            schedule_reconnect();
            return;
        }
        if (r == 0) {
            arm();
            return;
        }
    }
    asio::post(io_, [w = std::weak_ptr(self_)] {
        if (auto s = w.lock())
            (*s)->process();
    });
}

void DbusService::arm()
{
    int events = sd_bus_get_events(bus_.get());
    if (events < 0) {
        log::warning("D-Bus: connection unusable (", std::strerror(-events), ")");
        disconnect();
        schedule_reconnect();
        return;
    }
    auto watch = [this](asio::posix::stream_descriptor::wait_type type, bool DbusService::*flag) {
        this->*flag = true;
        fd_->async_wait(type, [w = std::weak_ptr(self_), epoch = epoch_, flag](boost::system::error_code ec) {
            auto s = w.lock();
            if (!s || (*s)->epoch_ != epoch)
                return;
            (*s)->*flag = false;
            if (ec != asio::error::operation_aborted)
                (*s)->process();
        });
    };
    if ((events & POLLIN) && !waiting_read_)
        watch(asio::posix::stream_descriptor::wait_read, &DbusService::waiting_read_);
    if ((events & POLLOUT) && !waiting_write_)
        watch(asio::posix::stream_descriptor::wait_write, &DbusService::waiting_write_);

    uint64_t until = UINT64_MAX;
    if (sd_bus_get_timeout(bus_.get(), &until) < 0)
        until = UINT64_MAX;
    if (until == timer_deadline_)
        return;
    timer_deadline_ = until;
    if (until == UINT64_MAX) {
        timer_.cancel();
        return;
    }
    const uint64_t now = monotonic_usec();
    timer_.expires_after(std::chrono::microseconds(until > now ? until - now : 0));
    timer_.async_wait([w = std::weak_ptr(self_), epoch = epoch_](boost::system::error_code ec) {
        auto s = w.lock();
        if (!s || (*s)->epoch_ != epoch || ec)
            return;
        (*s)->timer_deadline_ = UINT64_MAX;
        (*s)->process();
    });
}

void DbusService::remember_properties()
{
    try {
        StatusInfo st = api_.status();
        generation_ = st.generation;
        state_ = st.state;
        features_ = serialize_features(st.features);
    } catch (const std::exception& e) {
        log::debug("D-Bus: status unavailable: ", e.what());
    }
}

void DbusService::emit_reloaded(const ReloadOutcome& outcome)
{
    if (!bus_)
        return;
    const std::string error = valid_utf8(outcome.error);
    int r = sd_bus_emit_signal(bus_.get(), kObjectPath, kInterface, "Reloaded", "bts", static_cast<int>(outcome.ok),
                               static_cast<uint64_t>(outcome.generation), error.c_str());
    if (r < 0)
        log::warning("D-Bus: cannot emit Reloaded: ", std::strerror(-r));

    try {
        StatusInfo st = api_.status();
        std::vector<const char*> changed;
        if (st.generation != generation_)
            changed.push_back("Generation");
        if (st.state != state_)
            changed.push_back("State");
        const std::string features = serialize_features(st.features);
        if (features != features_)
            changed.push_back("Features");
        generation_ = st.generation;
        state_ = st.state;
        features_ = features;
        if (!changed.empty()) {
            changed.push_back(nullptr);
            r = sd_bus_emit_properties_changed_strv(bus_.get(), kObjectPath, kInterface,
                                                    const_cast<char**>(changed.data()));
            if (r < 0)
                log::warning("D-Bus: cannot emit PropertiesChanged: ", std::strerror(-r));
        }
    } catch (const std::exception& e) {
        log::warning("D-Bus: cannot read the status for PropertiesChanged: ", e.what());
    }
    // Whatever did not fit into the socket now must be flushed when it can.
    asio::post(io_, [w = std::weak_ptr(self_)] {
        if (auto s = w.lock())
            (*s)->process();
    });
}

int DbusService::method_reload(sd_bus_message* m, void* userdata, sd_bus_error* error)
{
    auto* self = static_cast<DbusService*>(userdata);
    return run_method(error, "Reload", [&] {
        CallerIdentity who;
        if (int r = admit_admin(m, "Reload", "Reloading the l7fast policy", "reload", &who, error); r < 0)
            return r;
        log::info("D-Bus: Reload requested by uid ", who.uid);
        ReloadOutcome out = self->api_.reload();
        return reply_with(m, [&](sd_bus_message* reply) { return codec::append_reload(reply, out); });
    });
}

int DbusService::method_set_log_level(sd_bus_message* m, void* userdata, sd_bus_error* error)
{
    auto* self = static_cast<DbusService*>(userdata);
    return run_method(error, "SetLogLevel", [&] {
        const char* level = nullptr;
        int r = sd_bus_message_read(m, "s", &level);
        if (r < 0)
            return r;
        CallerIdentity who;
        if ((r = admit_admin(m, "SetLogLevel", "Changing l7fastd's log level", "log-level", &who, error)) < 0)
            return r;
        LogLevelOutcome out = self->api_.set_log_level(level ? level : "");
        if (!out.ok)
            return sd_bus_error_set(error, SD_BUS_ERROR_INVALID_ARGS, out.error.c_str());
        log::notice("D-Bus: log level ", out.level, " (", out.source, ") set by uid ", who.uid);
        return reply_with(m, [&](sd_bus_message* reply) { return codec::append_log_level(reply, out); });
    });
}

// Drain and Undrain: one handler, the member says which.
int DbusService::method_drain(sd_bus_message* m, void* userdata, sd_bus_error* error)
{
    auto* self = static_cast<DbusService*>(userdata);
    const char* member = sd_bus_message_get_member(m);
    const bool drain = member && std::string_view(member) == "Drain";
    return run_method(error, drain ? "Drain" : "Undrain", [&] {
        const char* endpoint = nullptr;
        int r = sd_bus_message_read(m, "s", &endpoint);
        if (r < 0)
            return r;
        CallerIdentity who;
        if ((r = admit_admin(m, drain ? "Drain" : "Undrain",
                             drain ? "Draining an upstream endpoint" : "Undraining an upstream endpoint",
                             drain ? "drain ENDPOINT" : "undrain ENDPOINT", &who, error)) < 0)
            return r;
        DrainOutcome out = self->api_.set_drained(endpoint ? endpoint : "", drain);
        if (!out.ok)
            return sd_bus_error_set(error, SD_BUS_ERROR_INVALID_ARGS, out.error.c_str());
        log::notice("D-Bus: endpoint ", valid_utf8(endpoint ? endpoint : ""), drain ? " drained" : " undrained",
                    out.changed ? "" : " (already)", " by uid ", who.uid, "; now ", out.state);
        return reply_with(m, [&](sd_bus_message* reply) { return codec::append_drain(reply, out); });
    });
}

int DbusService::method_dump_config(sd_bus_message* m, void* userdata, sd_bus_error* error)
{
    auto* self = static_cast<DbusService*>(userdata);
    return run_method(error, "DumpConfig", [&] {
        const std::string json = valid_utf8(self->api_.dump_config());
        return reply_with(m, [&](sd_bus_message* reply) { return sd_bus_message_append(reply, "s", json.c_str()); });
    });
}

int DbusService::method_explain(sd_bus_message* m, void* userdata, sd_bus_error* error)
{
    auto* self = static_cast<DbusService*>(userdata);
    return run_method(error, "Explain", [&] {
        const char* request = nullptr;
        int r = sd_bus_message_read(m, "s", &request);
        if (r < 0)
            return r;
        ExplainOutcome out = self->api_.explain(request ? request : "");
        if (!out.ok)
            return sd_bus_error_set(error, SD_BUS_ERROR_INVALID_ARGS, valid_utf8(out.error).c_str());
        const std::string json = valid_utf8(out.json);
        return reply_with(m, [&](sd_bus_message* reply) { return sd_bus_message_append(reply, "s", json.c_str()); });
    });
}

int DbusService::method_get_status(sd_bus_message* m, void* userdata, sd_bus_error* error)
{
    auto* self = static_cast<DbusService*>(userdata);
    return run_method(error, "GetStatus", [&] {
        StatusInfo st = self->api_.status();
        return reply_with(m, [&](sd_bus_message* reply) { return codec::append_status(reply, st); });
    });
}

int DbusService::method_get_stats(sd_bus_message* m, void* userdata, sd_bus_error* error)
{
    auto* self = static_cast<DbusService*>(userdata);
    return run_method(error, "GetStats", [&] {
        StatsSnapshot st = self->api_.stats();
        return reply_with(m, [&](sd_bus_message* reply) { return codec::append_stats(reply, st); });
    });
}

int DbusService::method_list_routes(sd_bus_message* m, void* userdata, sd_bus_error* error)
{
    auto* self = static_cast<DbusService*>(userdata);
    return run_method(error, "ListRoutes", [&] {
        std::vector<RouteInfo> routes = self->api_.routes();
        return reply_with(m, [&](sd_bus_message* reply) { return codec::append_routes(reply, routes); });
    });
}

int DbusService::method_check_policy(sd_bus_message* m, void* userdata, sd_bus_error* error)
{
    auto* self = static_cast<DbusService*>(userdata);
    return run_method(error, "CheckPolicy", [&] {
        const char* path = nullptr;
        int r = sd_bus_message_read(m, "s", &path);
        if (r < 0)
            return r;
        if (std::string why = policy_path_problem(path); !why.empty())
            return sd_bus_error_set(error, SD_BUS_ERROR_INVALID_ARGS, why.c_str());
        CallerIdentity who;
        if ((r = query_caller(m, &who, error)) < 0)
            return r;
        const bool root = who.uid == 0;
        PolicyFile file = open_policy_file(path, root ? nullptr : &who, policy::PolicyLoader::kMaxFileBytes);
        if (!file.error.empty())
            return sd_bus_error_set(error, SD_BUS_ERROR_INVALID_ARGS, file.error.c_str());
        // Root's path is loaded as given, fragments next to it included. For
        // anyone else the daemon reads exactly the inode it checked, through
        // its descriptor, and no fragments (it checked none of them).
        const std::string load_path = root ? std::string(path) : "/proc/self/fd/" + std::to_string(file.fd.get());
        CheckOutcome out = self->api_.check_policy(load_path);
        if (!root) {
            replace_all(out.errors, load_path + ":", std::string(path) + ":");
            for (auto& ri : out.placement)
                replace_all(ri.where, load_path + ":", std::string(path) + ":");
        }
        return reply_with(m, [&](sd_bus_message* reply) { return codec::append_check(reply, out); });
    });
}

int DbusService::property_get(sd_bus* bus, const char* path, const char* interface, const char* property,
                              sd_bus_message* reply, void* userdata, sd_bus_error* error)
{
    auto* self = static_cast<DbusService*>(userdata);
    return run_method(error, "Get", [&] {
        StatusInfo st = self->api_.status();
        const std::string p = property;
        if (p == "Version")
            return sd_bus_message_append_basic(reply, 's', valid_utf8(st.version).c_str());
        if (p == "Generation")
            return sd_bus_message_append_basic(reply, 't', &st.generation);
        if (p == "State")
            return sd_bus_message_append_basic(reply, 's', valid_utf8(st.state).c_str());
        if (p == "Features")
            return codec::append_features(reply, st.features);
        return sd_bus_error_setf(error, SD_BUS_ERROR_UNKNOWN_PROPERTY, "Unknown property %s.", property);
    });
}

}  // namespace l7fast::control
