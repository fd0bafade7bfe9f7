// l7fastctl's side of org.l7fast.Manager1: calling the daemon, and turning
// what went wrong into an exit status and a sentence that says what to do.
#pragma once

#include <systemd/sd-bus.h>

#include <cstdint>
#include <optional>
#include <string>

namespace l7fast::control {

struct CallFailure {
    int exit_status = 1;
    std::string message;  // without the "l7fastctl: " prefix
};

// A failed call of method: error_name/error_message from the reply (null for
// local errors), err the negative errno sd-bus returned.
CallFailure classify_call_error(const std::string& method, const char* error_name, const char* error_message,
                                int err);

// The system bus could not be opened.
CallFailure connect_failure(const std::string& address, int err);

class ManagerClient {
public:
    ManagerClient() = default;
    ~ManagerClient();
    ManagerClient(const ManagerClient&) = delete;
    ManagerClient& operator=(const ManagerClient&) = delete;

    std::optional<CallFailure> connect();
    // Calls method (with one string argument when str_arg is set) and stores
    // the reply in *reply, which the caller unrefs. l7fastd is never
    // auto-started.
    std::optional<CallFailure> call(const char* method, const char* str_arg, uint64_t timeout_usec,
                                    sd_bus_message** reply);

private:
    sd_bus* bus_ = nullptr;
};

}  // namespace l7fast::control
