#include "control/CtlBus.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "control/BusNames.hpp"
#include "control/CtlCommandLine.hpp"

namespace l7fast::control {

namespace {

bool is(const char* name, const char* what) { return name && std::strcmp(name, what) == 0; }

std::string not_running()
{
    return std::string("l7fastd is not running (no ") + kBusName +
           " on the system bus): start it with systemctl start l7fast";
}

}  // namespace

CallFailure classify_call_error(const std::string& method, const char* name, const char* message, int err)
{
    const std::string msg = message && *message ? message : std::strerror(err < 0 ? -err : err);
    if (is(name, SD_BUS_ERROR_SERVICE_UNKNOWN) || is(name, SD_BUS_ERROR_NAME_HAS_NO_OWNER))
        return {kExitUnreachable, not_running()};
    if (is(name, SD_BUS_ERROR_NO_REPLY) || is(name, SD_BUS_ERROR_TIMEOUT) || (!name && err == -ETIMEDOUT))
        return {kExitUnreachable, "l7fastd did not answer " + method + " in time (" + msg + ")"};
    if (is(name, SD_BUS_ERROR_DISCONNECTED) || is(name, SD_BUS_ERROR_NO_SERVER) ||
        (!name && (err == -ECONNRESET || err == -ENOTCONN || err == -ECONNREFUSED)))
        return {kExitUnreachable, "lost the connection to the system bus (" + msg + ")"};
    if (is(name, SD_BUS_ERROR_ACCESS_DENIED) || is(name, SD_BUS_ERROR_AUTH_FAILED) ||
        is(name, SD_BUS_ERROR_INTERACTIVE_AUTHORIZATION_REQUIRED) || (!name && (err == -EACCES || err == -EPERM))) {
        const char* what = method == "Reload"        ? "reloading the policy"
                           : method == "SetLogLevel" ? "changing the log level"
                           : method == "Drain"       ? "draining an endpoint"
                           : method == "Undrain"     ? "undraining an endpoint"
                                                     : nullptr;
        const char* command = method == "Reload"        ? "reload"
                              : method == "SetLogLevel" ? "log-level LEVEL"
                              : method == "Drain"       ? "drain ENDPOINT"
                                                        : "undrain ENDPOINT";
        if (what)
            return {kExitDenied, std::string("permission denied: ") + what +
                                     " needs root or membership of the group \"" + kAdminGroup +
                                     "\": run `sudo l7fastctl " + command +
                                     "`, or have an administrator add you with `adduser $USER " + kAdminGroup +
                                     "` (then log in again)"};
        return {kExitDenied, "permission denied: " + msg};
    }
    if (is(name, SD_BUS_ERROR_UNKNOWN_METHOD) || is(name, SD_BUS_ERROR_UNKNOWN_OBJECT) ||
        is(name, SD_BUS_ERROR_UNKNOWN_INTERFACE))
        return {kExitFailed, "l7fastd does not offer " + method + " (" + msg + "): is it an older version?"};
    if (is(name, SD_BUS_ERROR_INVALID_ARGS))
        return {kExitFailed, msg};
    return {kExitFailed, method + " failed: " + msg};
}

CallFailure connect_failure(const std::string& address, int err)
{
    return {kExitUnreachable, "cannot connect to the system bus at " + address + " (" + std::strerror(-err) +
                                  "): is dbus running? l7fastd is not reachable without it"};
}

ManagerClient::~ManagerClient()
{
    if (bus_)
        sd_bus_flush_close_unref(bus_);
}

std::optional<CallFailure> ManagerClient::connect()
{
    int r = sd_bus_open_system(&bus_);
    if (r < 0) {
        bus_ = nullptr;
        const char* a = std::getenv("DBUS_SYSTEM_BUS_ADDRESS");
        return connect_failure(a && *a ? a : "unix:path=/run/dbus/system_bus_socket", r);
    }
    return std::nullopt;
}

std::optional<CallFailure> ManagerClient::call(const char* method, const char* str_arg, uint64_t timeout_usec,
                                               sd_bus_message** reply)
{
    sd_bus_message* m = nullptr;
    int r = sd_bus_message_new_method_call(bus_, &m, kBusName, kObjectPath, kInterface, method);
    if (r >= 0)
        r = sd_bus_message_set_auto_start(m, 0);
    if (r >= 0 && str_arg)
        r = sd_bus_message_append_basic(m, 's', str_arg);
    if (r < 0) {
        sd_bus_message_unref(m);
        return CallFailure{kExitFailed, std::string("cannot build the ") + method + " call: " + std::strerror(-r)};
    }
    sd_bus_error error = SD_BUS_ERROR_NULL;
    r = sd_bus_call(bus_, m, timeout_usec, &error, reply);
    sd_bus_message_unref(m);
    if (r < 0) {
        CallFailure f = classify_call_error(method, error.name, error.message, r);
        sd_bus_error_free(&error);
        return f;
    }
    sd_bus_error_free(&error);
    return std::nullopt;
}

}  // namespace l7fast::control
