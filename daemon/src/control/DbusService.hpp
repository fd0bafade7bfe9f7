// org.l7fast.Manager1 on the system bus: l7fastd's control interface, for
// l7fastctl and for anything else that speaks D-Bus (busctl, monitoring).
// The API is documented in docs/l7fastctl.md; this class only marshals
// between sd-bus and ControlApi, and decides who may call what:
//  - Reload: root, or a member of the group "l7fast" (if that group exists).
//    The bus policy (systemd/org.l7fast.Manager1.conf) says the same; this
//    is the second line, for buses configured without it.
//  - CheckPolicy: everyone, restricted to files the caller could read
//    (control/PolicyFileAccess.hpp).
//  - Everything else is read-only and open to every local user.
//
// sd-bus runs on the daemon's Asio loop, without threads: the connection's
// descriptor is watched for what sd_bus_get_events() asks for, a timer
// follows sd_bus_get_timeout(), and sd_bus_process() runs until it has
// nothing left to do. If the bus goes away (dbus-daemon restarted), the
// service reconnects every few seconds.
#pragma once

#include <systemd/sd-bus.h>

#include <memory>
#include <string>

#include "common/Asio.hpp"
#include "control/ControlApi.hpp"

namespace l7fast::control {

class DbusService {
public:
    // Connects to the system bus (DBUS_SYSTEM_BUS_ADDRESS if set), publishes
    // the object and takes the name. Throws std::runtime_error, with a
    // message for the operator, when the bus cannot be used or the name is
    // taken or not allowed.
    DbusService(asio::io_context& io, ControlApi& api);
    // Releases the name and closes the connection.
    ~DbusService();
    DbusService(const DbusService&) = delete;
    DbusService& operator=(const DbusService&) = delete;

    // Emits Reloaded(b ok, t generation, s error) and PropertiesChanged for
    // whatever of Generation, State and Features changed.
    void emit_reloaded(const ReloadOutcome& outcome);

private:
    struct BusUnref {
        void operator()(sd_bus* b) const { sd_bus_flush_close_unref(b); }
    };
    struct SlotUnref {
        void operator()(sd_bus_slot* s) const { sd_bus_slot_unref(s); }
    };

    void connect();  // throws std::runtime_error
    void disconnect();
    void process();
    void arm();
    void schedule_reconnect();
    void remember_properties();

    static const sd_bus_vtable vtable_[];

    static int method_dump_config(sd_bus_message* m, void* userdata, sd_bus_error* error);
    static int method_explain(sd_bus_message* m, void* userdata, sd_bus_error* error);
    static int method_set_log_level(sd_bus_message* m, void* userdata, sd_bus_error* error);
    static int method_drain(sd_bus_message* m, void* userdata, sd_bus_error* error);
    static int method_reload(sd_bus_message* m, void* userdata, sd_bus_error* error);
    static int method_get_status(sd_bus_message* m, void* userdata, sd_bus_error* error);
    static int method_get_stats(sd_bus_message* m, void* userdata, sd_bus_error* error);
    static int method_list_routes(sd_bus_message* m, void* userdata, sd_bus_error* error);
    static int method_check_policy(sd_bus_message* m, void* userdata, sd_bus_error* error);
    static int property_get(sd_bus* bus, const char* path, const char* interface, const char* property,
                            sd_bus_message* reply, void* userdata, sd_bus_error* error);

    asio::io_context& io_;
    ControlApi& api_;
    std::unique_ptr<sd_bus, BusUnref> bus_;
    std::unique_ptr<sd_bus_slot, SlotUnref> vtable_slot_;
    std::unique_ptr<asio::posix::stream_descriptor> fd_;
    asio::steady_timer timer_;
    asio::steady_timer reconnect_;
    bool waiting_read_ = false, waiting_write_ = false;
    uint64_t timer_deadline_ = UINT64_MAX;
    // bumped on every (dis)connect: a wait armed on an earlier connection
    // completes into nothing
    uint64_t epoch_ = 0;
    // Handlers hold a weak reference: they may run after this is gone.
    std::shared_ptr<DbusService*> self_;
    // last values announced, for PropertiesChanged
    uint64_t generation_ = 0;
    std::string state_, features_;
};

}  // namespace l7fast::control
