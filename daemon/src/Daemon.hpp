// l7fastd: policy lifecycle, the data plane, the slow path, systemd and the
// control interface, on one Boost.Asio event loop.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/Asio.hpp"
#include "common/Log.hpp"
#include "control/ControlApi.hpp"
#include "dataplane/BpffsLock.hpp"
#include "dataplane/Dataplane.hpp"
#include "dataplane/Features.hpp"
#include "config/Policy.hpp"
#include "compiler/PolicyCompiler.hpp"

namespace l7fast::proxy {
class ProxyServer;
struct PolicyRuntime;
}  // namespace l7fast::proxy
namespace l7fast::policy {
struct CompiledTables;
}
namespace l7fast::control {
class DbusService;
class MetricsServer;
}

namespace l7fast {

struct DaemonOptions {
    std::string config;       // main policy file; empty: the embedded default
    std::string policy_dir;   // drop-in fragments
    bool dbus = true;         // serve org.l7fast.Manager1
    bool trace = false;       // data-plane decision traces at debug level
    // --log-level (or --trace: debug): wins over the policy's
    // daemon.log_level, which applies otherwise, at start and on reload
    std::optional<log::Level> log_level;
};

class Daemon : public control::ControlApi {
public:
    explicit Daemon(DaemonOptions opts);
    ~Daemon() override;

    // Loads the policy and starts everything; throws std::runtime_error with a
    // message for the operator when the daemon cannot start.
    void start();
    // Runs until SIGTERM/SIGINT; returns the exit status.
    int run();

    // control::ControlApi
    control::ReloadOutcome reload() override;
    control::StatusInfo status() override;
    std::vector<control::RouteInfo> routes() override;
    control::StatsSnapshot stats() override;
    control::CheckOutcome check_policy(const std::string& path) override;
    control::LogLevelOutcome set_log_level(const std::string& level) override;
    control::DrainOutcome set_drained(const std::string& endpoint, bool drained) override;
    std::string dump_config() override;
    control::ExplainOutcome explain(const std::string& request_json) override;

    // Loading and compiling without applying (also for `l7fastctl check`).
    struct Prepared;
    static std::string load_policy(const std::string& config, const std::string& dir,
                                   policy::Policy* out);

private:
    std::unique_ptr<Prepared> prepare(policy::Policy pol, std::string* error);
    void apply(std::unique_ptr<Prepared> p);
    void apply_log_level(const std::string& configured);
    // The level in force and where it comes from (LogLevelOutcome::source).
    control::LogLevelOutcome log_level_in_force() const;
    // an endpoint's open connections now, from its pool's figures
    // The endpoint's connections and health now.
    void add_endpoint_state(uint32_t pool_id, control::EndpointStats* es) const;
    void watch_events();
    void arm_events();
    void schedule_tick();
    void schedule_watchdog();
    void handle_signal(int sig);
    void notify(const std::string& state);
    void emit_reloaded(const control::ReloadOutcome& out);
    // gives up CAP_SYS_ADMIN once the programs are loaded (common/Capabilities)
    void drop_start_capabilities();
    // logs and keeps (for GetStatus) who else may write the policy files
    void check_file_permissions();
    void check_policy_content(const policy::Policy& pol);
    void fold_kernel_counters(uint32_t gen);
    // A sampled kernel response (L7_EV_ACCESS) or answer (L7_EV_ANSWER) to
    // the access log.
    void on_access_event(const l7_event& ev);
    // Why the kernel answered (L7_EV_ANSWER's arg[1]), in the words the
    // slow path's access log uses (proxy::verdict_reason).
    std::string kernel_answer_reason(uint64_t what) const;
    std::string stats_route_name(uint32_t stats_id) const;

    DaemonOptions opts_;
    asio::io_context io_;
    asio::signal_set signals_;
    asio::steady_timer tick_;
    asio::steady_timer watchdog_;
    std::unique_ptr<asio::posix::stream_descriptor> events_;
    dataplane::Features features_;
    std::string cgroup_;  // where sockops is attached (daemon.cgroup or the v2 root)
    dataplane::BpffsLock bpffs_lock_;  // held while dp_ exists (declared first: outlives it)
    std::unique_ptr<dataplane::Dataplane> dp_;
    std::unique_ptr<proxy::ProxyServer> server_;
    std::unique_ptr<control::DbusService> dbus_;
    std::unique_ptr<control::MetricsServer> metrics_;  // daemon.metrics_address
    std::shared_ptr<const proxy::PolicyRuntime> rt_;
    std::vector<control::RouteInfo> placement_;
    std::vector<policy::ListenerPlacement> listener_placement_;  // the data plane's, when it runs
    std::vector<policy::RoutePlacement> route_placement_;        // the compiler's, when the data plane runs
    // per JWT provider of the policy: why the kernel does not verify its HS
    // tokens itself ("" when it does; CompiledTables::jwt_verify_reason)
    std::vector<std::string> jwt_verify_reason_;
    // status: how JWTs are decided in the kernel, and per provider
    std::string kernel_jwt_summary() const;
    std::string degraded_reason_;
    std::string last_reload_error_;
    uint64_t reloads_ok_ = 0, reloads_failed_ = 0;
    uint64_t applied_unix_ = 0, last_reload_unix_ = 0;
    // l7fastctl log-level: wins over --log-level and daemon.log_level until
    // `l7fastctl log-level reset` or a restart
    std::optional<log::Level> runtime_log_level_;
    std::string policy_log_level_;  // daemon.log_level of the policy in force
    // unsafe permissions of the policy files (config/FileSafety.hpp)
    std::vector<std::string> file_warnings_;     // policy files others can change
    std::vector<std::string> content_warnings_;  // of the policy in effect
    uint64_t generation_ = 0;
    std::chrono::steady_clock::time_point started_;
    std::chrono::microseconds watchdog_interval_{0};
    // kernel counters of earlier generations, by route name
    std::map<std::string, dataplane::RouteCounters> kernel_totals_;
    // route names per generation slot, to fold counters under the right name
    std::vector<std::string> gen_routes_[L7_GENS];
    // per generation slot, the (route, rule) name of each kernel RBAC rule
    // bit: the kernel counts its denials by bit (l7_rule_denied)
    std::vector<std::pair<std::string, std::string>> gen_rules_[L7_GENS];
    // the kernel's RBAC denials of earlier generations: route -> rule -> n
    std::map<std::string, std::map<std::string, uint64_t>> kernel_rule_totals_;
    // the kernel's RBAC denials by rule name for each route, live and
    // earlier generations together
    std::map<std::string, std::map<std::string, uint64_t>> kernel_denials_by_rule();
    int exit_status_ = 0;
};

}  // namespace l7fast
