#include "Daemon.hpp"

#include <systemd/sd-bus.h>
#include <systemd/sd-daemon.h>
#include <malloc.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <random>
#include <sstream>

#include "auth/JwtKernel.hpp"
#include "common/Capabilities.hpp"
#include "common/Clock.hpp"
#include "common/FdStore.hpp"
#include "common/Log.hpp"
#include "control/ConfigDump.hpp"
#include "control/Explain.hpp"
#include "control/DbusService.hpp"
#include "control/Metrics.hpp"
#include "dataplane/TestFault.hpp"
#include "config/Describe.hpp"
#include "config/FileSafety.hpp"
#include "compiler/PolicyCompiler.hpp"
#include "loader/PolicyLoader.hpp"
#include "semantics/Router.hpp"
#include "config/Text.hpp"
#include "proxy/Pipeline.hpp"
#include "proxy/Prepare.hpp"
#include "proxy/ProxyServer.hpp"

namespace l7fast {

extern const char* const kDefaultPolicy;  // packaging/policy.toml, embedded

namespace {

constexpr auto kTickInterval = std::chrono::milliseconds(500);
constexpr const char* kEmbeddedName = "<embedded default policy>";

// Loading and compiling a policy allocates far more than the result keeps
// (the TOML tree, the automaton under construction, the staged tables);
// glibc keeps the freed pages unless asked, and l7fastd's resident size
// would then be set by the largest policy it ever compiled.
void return_freed_memory()
{
    malloc_trim(0);
}

uint64_t random_seed()
{
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

std::vector<control::RouteInfo> describe_routes(const policy::Policy& pol,
                                                const policy::CompiledTables* t,
                                                const std::string& no_kernel_reason)
{
    std::vector<control::RouteInfo> out;
    for (size_t i = 0; i < pol.routes.size(); i++) {
        const auto& r = pol.routes[i];
        control::RouteInfo ri;
        ri.name = r.name;
        for (size_t j = 0; j < r.listeners.size(); j++)
            ri.listeners += (j ? "," : "") + r.listeners[j];
        if (ri.listeners.empty())
            ri.listeners = "*";
        ri.match = policy::describe_match(r.match);
        for (size_t j = 0; j < r.clusters.size(); j++) {
            ri.clusters += (j ? "," : "") + r.clusters[j].cluster;
            if (r.clusters.size() > 1)
                ri.clusters += ":" + std::to_string(r.clusters[j].weight);
        }
        if (t && i < t->placement.size()) {
            ri.kernel = t->placement[i].kernel;
            ri.reason = t->placement[i].reason;
        } else {
            ri.kernel = false;
            ri.reason = no_kernel_reason;
        }
        ri.where = r.where.str();
        out.push_back(std::move(ri));
    }
    return out;
}

}  // namespace

struct Daemon::Prepared {
    std::shared_ptr<proxy::PolicyRuntime> rt;
    std::unique_ptr<policy::CompiledTables> tables;
    std::vector<control::RouteInfo> placement;
};

Daemon::Daemon(DaemonOptions opts)
    : opts_(std::move(opts)), signals_(io_), tick_(io_), watchdog_(io_)
{
}

Daemon::~Daemon()
{
    metrics_.reset();
    dbus_.reset();
    server_.reset();
    events_.reset();
    dp_.reset();
}

std::string Daemon::load_policy(const std::string& config, const std::string& dir,
                                policy::Policy* out)
{
    auto res = config.empty() ? policy::PolicyLoader::load_string(kDefaultPolicy, kEmbeddedName)
                              : policy::PolicyLoader::load(config, dir);
    if (!res.ok())
        return res.error_text();
    *out = std::move(res).policy();
    return {};
}

std::unique_ptr<Daemon::Prepared> Daemon::prepare(policy::Policy pol, std::string* error)
{
    auto p = std::make_unique<Prepared>();
    std::optional<policy::PolicyError> invalid;
    proxy::BucketSource buckets;
    if (dp_)
        buckets = [table = dp_->buckets()](std::optional<uint32_t> max_keys) { return table->lease(max_keys); };
    auto rt = proxy::prepare_runtime(std::move(pol), rt_.get(), &invalid, buckets);
    if (!rt) {
        *error = invalid->str();
        return nullptr;
    }
    rt->generation = generation_ + 1;
    for (const auto& l : rt->policy().listeners) {
        try {
            rt->listener_ids.push_back(server_->listener_id_for(l.address));
        } catch (const std::exception& e) {
            *error = policy::PolicyError{l.where.file, l.where.line, l.where.column,
                                         "listener \"" + l.name + "\"", e.what()}.str();
            return nullptr;
        }
    }
    for (const auto& c : rt->policy().clusters) {
        std::vector<uint32_t> pools;
        for (const auto& e : c.endpoints) {
            // prepare_runtime counted the policy's addresses; ids of the
            // previous generation's are still taken until it ends
            auto id = server_->pool().pool_id_for(e.address);
            if (!id) {
                *error = "more than " + std::to_string(L7_MAX_POOLS) +
                         " distinct upstream addresses with the running policy's: reduce the endpoints";
                return nullptr;
            }
            pools.push_back(*id);
        }
        rt->endpoint_pool.push_back(std::move(pools));
    }
    if (dp_) {
        auto pool_id = [this](const policy::SocketAddress& a) { return server_->pool().pool_id_for(a); };
        policy::CompileOptions options;
        options.rate_bucket = [&rt](size_t route) -> std::optional<uint32_t> {
            if (route < rt->limiters.size() && rt->limiters[route])
                return rt->limiters[route]->kernel_bucket();
            return std::nullopt;
        };
        p->tables = std::make_unique<policy::CompiledTables>(
            policy::compile(rt->policy(), random_seed(), pool_id, options));
        for (const auto& note : p->tables->notes)
            log::notice("policy compiler: ", note);
    }
    p->placement = describe_routes(rt->policy(), p->tables.get(),
                                   "kernel data plane not in use: " + degraded_reason_);
    for (size_t i = 0; i < p->placement.size() && i < rt->route_clusters.size(); i++)
        if (p->placement[i].kernel)
            for (size_t ci : rt->route_clusters[i])
                for (uint32_t pool : rt->endpoint_pool.at(ci))
                    if (std::find(rt->kernel_pools.begin(), rt->kernel_pools.end(), pool) == rt->kernel_pools.end())
                        rt->kernel_pools.push_back(pool);
    p->rt = std::move(rt);
    return p;
}

void Daemon::fold_kernel_counters(uint32_t gen)
{
    if (!dp_)
        return;
    // a generation slot whose names are unknown (maps adopted at a
    // restart) is emptied all the same: its counts cannot be named
    const auto& rules = gen_rules_[gen];
    const auto denied = dp_->rule_denials(gen, gen_routes_[gen].empty() ? L7_MAX_RULES
                                                                         : static_cast<uint32_t>(rules.size()),
                                          true);
    for (size_t b = 0; b < denied.size() && b < rules.size(); b++)
        if (denied[b])
            kernel_rule_totals_[rules[b].first][rules[b].second] += denied[b];
    if (gen_routes_[gen].empty())
        return;
    std::vector<dataplane::RouteCounters> drained;
    dp_->drain_route_counters(gen, static_cast<uint32_t>(gen_routes_[gen].size()), drained);
    auto& finished = server_->kernel_responses();
    for (size_t i = 0; i < drained.size() && i < gen_routes_[gen].size(); i++) {
        auto& t = kernel_totals_[gen_routes_[gen][i]];
        t += drained[i];
        auto it = finished.find(gen * L7_MAX_ROUTES + static_cast<uint32_t>(i));
        if (it != finished.end()) {
            t += it->second;
            finished.erase(it);
        }
    }
}

void Daemon::apply(std::unique_ptr<Prepared> p)
{
    // A new metrics address is bound first: a failure throws before anything
    // switched (the old listener serves on until the new one is in place).
    const auto& want = p->rt->policy().daemon.metrics_address;
    const bool metrics_change = want ? !metrics_ || metrics_->address() != *want : metrics_ != nullptr;
    std::unique_ptr<control::MetricsServer> metrics;
    if (want && metrics_change)
        metrics = std::make_unique<control::MetricsServer>(
            io_, *want, [this] {
                return control::render_prometheus(stats(), status(), control::read_process_figures(), L7FAST_VERSION);
            });
    uint32_t gen = 0;
    if (dp_)
        gen = dp_->stage(*p->tables, p->rt->listener_ids, p->rt->generation);
    server_->apply(p->rt);  // throws before anything switched
    if (dp_) {
        fold_kernel_counters(gen);
        gen_routes_[gen].clear();
        gen_rules_[gen].clear();
        const auto& routes = p->rt->policy().routes;
        for (size_t i = 0; i < routes.size(); i++) {
            gen_routes_[gen].push_back(routes[i].name);
            if (!p->tables || i >= p->tables->routes.size() || !routes[i].rbac)
                continue;
            const l7_route& kr = p->tables->routes[i];
            if (!(kr.flags & L7_RF_RBAC))
                continue;
            if (gen_rules_[gen].size() < kr.rule_first + kr.rule_count)
                gen_rules_[gen].resize(kr.rule_first + kr.rule_count);
            for (uint32_t j = 0; j < kr.rule_count && j < routes[i].rbac->rules.size(); j++)
                gen_rules_[gen][kr.rule_first + j] = {routes[i].name, routes[i].rbac->rules[j].name};
        }
        dp_->activate(gen, p->rt->generation);
    }
    generation_ = p->rt->generation;
    rt_ = p->rt;
    placement_ = std::move(p->placement);
    listener_placement_.clear();
    route_placement_.clear();
    jwt_verify_reason_.clear();
    if (p->tables) {
        listener_placement_ = p->tables->listener_placement;
        route_placement_ = p->tables->placement;
        jwt_verify_reason_ = p->tables->jwt_verify_reason;
    }
    apply_log_level(rt_->policy().daemon.log_level);
    if (dp_)
        dp_->set_access_log_sample(rt_->policy().daemon.access_log_sample);
    if (dp_ && dataplane::test_faults().bench_raw && !rt_->kernel_pools.empty())
        dp_->set_raw_pool(rt_->kernel_pools.front());
    if (metrics_change) {
        if (metrics_)
            log::info("no longer serving metrics on ", metrics_->address().str());
        metrics_ = std::move(metrics);
        if (metrics_)
            log::info("serving Prometheus metrics on http://", metrics_->address().str(), "/metrics");
    }
}

void Daemon::apply_log_level(const std::string& configured)
{
    policy_log_level_ = configured;
    log::Level want;
    if (runtime_log_level_) {
        if (log::parse_level(configured, &want) && want != *runtime_log_level_)
            log::info("daemon.log_level = \"", configured, "\" waits: the level set with l7fastctl log-level (",
                      log::level_name(*runtime_log_level_), ") holds until `l7fastctl log-level reset`");
        return;
    }
    if (opts_.log_level)
        want = *opts_.log_level;
    else if (!log::parse_level(configured, &want))
        return;  // the loader refuses such a policy
    if (want == log::level())
        return;
    log::set_level(want);
    log::notice("log level ", configured, " (daemon.log_level)");  // when it shows notices
}

control::LogLevelOutcome Daemon::log_level_in_force() const
{
    control::LogLevelOutcome out;
    out.ok = true;
    out.level = std::string(log::level_name(log::level()));
    out.source = runtime_log_level_ ? "l7fastctl" : opts_.log_level ? "command line" : "policy";
    return out;
}

control::LogLevelOutcome Daemon::set_log_level(const std::string& level)
{
    log::Level want;
    if (level == "reset") {
        runtime_log_level_.reset();
        want = opts_.log_level.value_or(log::Level::Info);
        if (!opts_.log_level)
            log::parse_level(policy_log_level_, &want);
    } else if (log::parse_level(level, &want)) {
        runtime_log_level_ = want;
    } else {
        control::LogLevelOutcome out;
        out.error = "unknown log level \"" + level + "\": use error, warning, notice, info, debug, or reset";
        if (auto guess = policy::text::closest(level, {"error", "warning", "notice", "info", "debug", "reset"}))
            out.error += " (did you mean \"" + *guess + "\"?)";
        return out;
    }
    log::set_level(want);
    return log_level_in_force();
}

std::string Daemon::stats_route_name(uint32_t stats_id) const
{
    uint32_t gen = stats_id / L7_MAX_ROUTES, i = stats_id % L7_MAX_ROUTES;
    if (gen < L7_GENS && i < gen_routes_[gen].size())
        return gen_routes_[gen][i];
    return {};
}

std::string Daemon::kernel_answer_reason(uint64_t what) const
{
    using Kind = proxy::Verdict::Kind;
    const uint32_t rule = static_cast<uint32_t>(what >> 32);
    switch (what & 0xff) {
    case L7_ANS_DIRECT:
        return proxy::verdict_reason(Kind::Direct, auth::Reason::Ok, {});
    case L7_ANS_DENY: {
        // the rule by its bit in the event's generation, as the counters name it
        const auto& rules = gen_rules_[(rule / L7_MAX_RULES) & 1];
        const uint32_t bit = rule % L7_MAX_RULES;
        const bool named = rule != L7_NO_RULE && bit < rules.size();
        return proxy::verdict_reason(Kind::RbacDenied, auth::Reason::Ok, named ? rules[bit].second : "default");
    }
    case L7_ANS_NO_TOKEN:
        return proxy::verdict_reason(Kind::JwtMissing, auth::Reason::Missing, {});
    case L7_ANS_BAD_TOKEN:
        return proxy::verdict_reason(Kind::JwtInvalid, auth::kernel_refusal_reason((what >> 8) & 0xff), {});
    case L7_ANS_LIMITED:
        return proxy::verdict_reason(Kind::RateLimited, auth::Reason::Ok, {});
    }
    return {};
}

void Daemon::on_access_event(const l7_event& ev)
{
    auto& log = server_->access_log();
    if (!log.sample())
        return;  // switched off after the kernel sampled it
    proxy::AccessEntry e;
    auto client = server_->client_of(ev.conn, ev.conn_gen);
    e.client = client ? proxy::client_address(*client) : std::string("-");
    std::string route = stats_route_name(ev.slot & 0xffff);
    e.route = route;
    e.status = static_cast<int>(ev.slot >> 16);
    e.bytes_out = ev.arg[0] & ((uint64_t{1} << 48) - 1);
    e.kernel = true;
    if (ev.type == L7_EV_ANSWER) {
        // the route's own answer, sent within the request's write: no
        // upstream, no time to speak of; why, as the slow path says it
        const std::string reason = kernel_answer_reason(ev.arg[1]);
        e.reason = reason;
        log.write(e);
        return;
    }
    e.latency_ns = ev.arg[1];
    // the endpoint by the slot's pool id, and the cluster of the route (in
    // the policy in force) that has that endpoint
    std::string_view cluster;
    if (const policy::SocketAddress* a = server_->pool().address_of(static_cast<uint32_t>(ev.arg[0] >> 48))) {
        e.endpoint = a->str();
        // the route's clusters by index, as the pipeline state holds them
        const size_t n_routes = rt_ ? rt_->route_clusters.size() : 0;
        for (size_t i = 0; i < n_routes && cluster.empty(); i++) {
            if (rt_->policy().routes[i].name != route)
                continue;
            for (size_t ci : rt_->route_clusters[i]) {
                const policy::Cluster& c = rt_->policy().clusters[ci];
                for (const auto& ep : c.endpoints)
                    if (ep.address == *a && cluster.empty())
                        cluster = c.name;
            }
        }
    }
    e.cluster = cluster;
    log.write(e);
}

namespace {

// Whether systemd is restarting this service right now (`systemctl
// restart`, a package upgrade): then its job for our unit is a restart, and
// the sockets in the fd store and the pinned data plane are handed to the
// next instance instead of being torn down. Any doubt: no.
bool systemd_restart_pending()
{
    sd_bus* bus = nullptr;
    if (sd_bus_open_system(&bus) < 0)
        return false;
    bool restart = false;
    sd_bus_error err = SD_BUS_ERROR_NULL;
    sd_bus_message* reply = nullptr;
    const char* unit = nullptr;
    if (sd_bus_call_method(bus, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                           "org.freedesktop.systemd1.Manager", "GetUnitByPID", &err, &reply, "u",
                           static_cast<uint32_t>(::getpid())) >= 0 &&
        sd_bus_message_read(reply, "o", &unit) >= 0) {
        std::string unit_path = unit;
        sd_bus_message_unref(reply);
        reply = nullptr;
        uint32_t job_id = 0;
        const char* job_path = nullptr;
        if (sd_bus_get_property(bus, "org.freedesktop.systemd1", unit_path.c_str(),
                                "org.freedesktop.systemd1.Unit", "Job", &err, &reply, "(uo)") >= 0 &&
            sd_bus_message_read(reply, "(uo)", &job_id, &job_path) >= 0 && job_id != 0) {
            std::string jp = job_path;
            char* type = nullptr;
            if (sd_bus_get_property_string(bus, "org.freedesktop.systemd1", jp.c_str(),
                                           "org.freedesktop.systemd1.Job", "JobType", &err,
                                           &type) >= 0) {
                std::string t = type;
                restart = t == "restart" || t == "try-restart" || t == "reload-or-restart" ||
                          t == "reload-or-try-restart";
                std::free(type);
            }
        }
    }
    sd_bus_message_unref(reply);
    sd_bus_error_free(&err);
    sd_bus_flush_close_unref(bus);
    return restart;
}

}  // namespace

void Daemon::start()
{
    started_ = std::chrono::steady_clock::now();
    applied_unix_ = unix_seconds();
    policy::Policy pol;
    std::string err = load_policy(opts_.config, opts_.policy_dir, &pol);
    if (!err.empty())
        throw std::runtime_error("invalid policy, not starting:\n" + err);
    // the policy's level from the first line on (apply() again on reloads)
    apply_log_level(pol.daemon.log_level);
    log::info("l7fastd ", L7FAST_VERSION, ": policy from ",
              opts_.config.empty() ? kEmbeddedName : opts_.config, " (", pol.routes.size(),
              " routes, ", pol.clusters.size(), " clusters, ", pol.listeners.size(), " listeners)");
    check_file_permissions();
    check_policy_content(pol);

    const auto& d = pol.daemon;
    // sockets a previous instance left in systemd's fd store (restart)
    std::vector<FdStore::Inherited> inherited = FdStore::take_inherited();
    cgroup_ = d.cgroup.empty() ? dataplane::Features::cgroup2_mount() : d.cgroup;
    features_ = dataplane::Features::probe(cgroup_, d.bpffs);
    for (const auto& [k, v] : features_.report())
        log::info("feature ", k, ": ", v);
    if (!features_.module.loaded || !features_.module.socket_kfuncs)
        log::notice("l7fast.ko ", features_.module.summary());
    if (!d.kernel_dataplane) {
        degraded_reason_ = "disabled by daemon.kernel_dataplane = false";
    } else if (!features_.dataplane_usable()) {
        degraded_reason_ = features_.unusable_reason;
    } else {
        try {
            // a second daemon on these pins refuses to start (BpffsInUse
            // goes on to main: exit 1)
            bpffs_lock_ = dataplane::BpffsLock::acquire(d.bpffs);
            dataplane::DataplaneOptions o;
            o.cgroup = cgroup_;
            o.bpffs = d.bpffs;
            o.ingress_budget = d.ingress_budget;
            o.trace = opts_.trace;
            o.adopt = !inherited.empty();
            o.kfuncs = features_.module.loaded && features_.module.socket_kfuncs;
            dp_ = std::make_unique<dataplane::Dataplane>(o);
            log::info(dp_->adopted() ? "data plane adopted from the previous instance"
                                     : "data plane loaded",
                      "; sockops on ", cgroup_, ", pinned under ", d.bpffs);
        } catch (const dataplane::BpffsInUse&) {
            throw;
        } catch (const std::runtime_error& e) {
            degraded_reason_ = e.what();
            // degraded: nothing pinned to guard, nothing of the data plane open
            dp_.reset();
            bpffs_lock_ = {};
            std::error_code ec;
            std::filesystem::remove(d.bpffs, ec);  // only when empty
        }
    }
    if (!degraded_reason_.empty())
        log::warning("running degraded, every request takes the slow path: ", degraded_reason_);
    drop_start_capabilities();

    server_ = std::make_unique<proxy::ProxyServer>(io_, dp_.get(), d.offload_remote_clients);
    server_->set_stats_route_names([this](uint32_t id) { return stats_route_name(id); });
    // Restart: pooled connections first (they carry their pool ids, which
    // the policy's compilation must reuse), then listeners, then clients.
    bool adopting = dp_ && dp_->adopted();
    size_t n_up = 0, n_cli = 0, n_lst = 0;
    std::vector<Fd> listeners, clients;
    for (auto& f : inherited) {
        char kind = f.name.empty() ? '?' : f.name[0];
        if (kind == 'l') {
            listeners.push_back(std::move(f.fd));
        } else if (kind == 'u' && adopting) {
            n_up += server_->pool().adopt(std::move(f.fd));
        } else if (kind == 'c') {
            clients.push_back(std::move(f.fd));
        } else {
            FdStore::get().remove(f.name);
            f.fd.reset();
        }
    }
    n_lst = listeners.size();
    server_->set_inherited_listeners(std::move(listeners));
    std::string why;
    auto p = prepare(std::move(pol), &why);
    if (!p)
        throw std::runtime_error(why);
    apply(std::move(p));
    return_freed_memory();
    const size_t n_clients = clients.size();
    for (Fd& fd : clients)
        n_cli += server_->adopt_client(std::move(fd));
    if (adopting) {
        server_->pool().reconcile_adopted();
        server_->free_orphaned_connections();
    }
    if (!inherited.empty())
        log::notice("took over from the previous instance: ", n_lst, " listening sockets, ", n_cli,
                    " of ", n_clients, " client connections, ", n_up,
                    " pooled upstream connections");

    if (dp_)
        watch_events();
    signals_.add(SIGHUP);
    signals_.add(SIGTERM);
    signals_.add(SIGINT);
    signals_.async_wait([this](error_code ec, int sig) {
        if (!ec)
            handle_signal(sig);
    });
    schedule_tick();
    uint64_t usec = 0;
    if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0) {
        watchdog_interval_ = std::chrono::microseconds(usec / 2);
        schedule_watchdog();
    }
    if (opts_.dbus) {
        try {
            dbus_ = std::make_unique<control::DbusService>(io_, *this);
        } catch (const std::exception& e) {
            log::warning("D-Bus control interface unavailable: ", e.what(),
                         " (l7fastctl will not reach this daemon)");
        }
    }
    notify("READY=1");
}

int Daemon::run()
{
    io_.run();
    return exit_status_;
}

void Daemon::notify(const std::string& state)
{
    std::string s = state;
    size_t kernel = 0;
    for (const auto& r : placement_)
        kernel += r.kernel;
    s += "\nSTATUS=generation " + std::to_string(generation_) + ", " +
         std::to_string(placement_.size()) + " routes (" + std::to_string(kernel) + " in the kernel)" +
         (degraded_reason_.empty() ? "" : ", degraded") +
         (last_reload_error_.empty() ? "" : ", last reload failed");
    sd_notify(0, s.c_str());
}

void Daemon::watch_events()
{
    int fd = ::dup(dp_->events_fd());
    if (fd < 0) {
        log::warning("data-plane events unavailable: ", std::strerror(errno));
        return;
    }
    events_ = std::make_unique<asio::posix::stream_descriptor>(io_, fd);
    arm_events();
}

void Daemon::arm_events()
{
    events_->async_wait(asio::posix::stream_descriptor::wait_read, [this](error_code ec) {
        if (ec)
            return;
        dp_->consume_events([this](const l7_event& ev) {
            if (ev.type == L7_EV_ACCESS || ev.type == L7_EV_ANSWER)
                on_access_event(ev);
            else
                server_->on_event(ev);
        });
        arm_events();
    });
}

void Daemon::schedule_tick()
{
    tick_.expires_after(kTickInterval);
    tick_.async_wait([this](error_code ec) {
        if (ec)
            return;
        server_->tick();
        schedule_tick();
    });
}

void Daemon::schedule_watchdog()
{
    sd_notify(0, "WATCHDOG=1");
    watchdog_.expires_after(watchdog_interval_);
    watchdog_.async_wait([this](error_code ec) {
        if (!ec)
            schedule_watchdog();
    });
}

void Daemon::handle_signal(int sig)
{
    if (sig == SIGHUP) {
        reload();
        signals_.async_wait([this](error_code ec, int s) {
            if (!ec)
                handle_signal(s);
        });
        return;
    }
    if (FdStore::get().enabled() && systemd_restart_pending()) {
        // Hand over: the fd store keeps every connection open and the pins
        // keep the data plane running; the next instance adopts both.
        // Nothing is closed or shut down on the way out.
        log::notice("restarting: handing the data plane and ", server_ ? server_->sessions() : 0,
                    " client connections over to the next instance");
        sd_notify(0, "STOPPING=1");
        FdStore::get().freeze();
        if (dp_)
            dp_->handover();
        dp_.reset();
        std::fflush(nullptr);
        std::_Exit(0);
    }
    log::info("stopping on signal ", sig);
    sd_notify(0, "STOPPING=1");
    dbus_.reset();
    metrics_.reset();
    if (server_)
        server_->stop();
    io_.stop();
}

control::ReloadOutcome Daemon::reload()
{
    control::ReloadOutcome out;
    sd_notifyf(0, "RELOADING=1\nMONOTONIC_USEC=%llu", static_cast<unsigned long long>(monotonic_usec()));
    last_reload_unix_ = unix_seconds();
    auto fail = [&](const std::string& e) {
        log::error("reload failed, still running generation ", generation_, ":\n", e);
        last_reload_error_ = e;
        reloads_failed_++;
        out.ok = false;
        out.error = e;
        out.generation = generation_;
        notify("READY=1");
        emit_reloaded(out);
        return out;
    };

    check_file_permissions();
    policy::Policy pol;
    std::string err = load_policy(opts_.config, opts_.policy_dir, &pol);
    if (!err.empty())
        return fail(err);
    const auto& cur = rt_->policy().daemon;
    const auto& nd = pol.daemon;
    if (nd.cgroup != cur.cgroup || nd.bpffs != cur.bpffs ||
        nd.kernel_dataplane != cur.kernel_dataplane ||
        nd.offload_remote_clients != cur.offload_remote_clients)
        return fail("daemon.cgroup, daemon.bpffs, daemon.kernel_dataplane and "
                    "daemon.offload_remote_clients take effect only at start: restart l7fast to change them");
    std::string why;
    auto p = prepare(std::move(pol), &why);
    if (!p)
        return fail(why);
    try {
        apply(std::move(p));
    } catch (const std::exception& e) {
        return fail(e.what());
    }
    return_freed_memory();
    if (dp_)
        dp_->set_ingress_budget(nd.ingress_budget);
    last_reload_error_.clear();
    reloads_ok_++;
    applied_unix_ = last_reload_unix_;
    check_policy_content(rt_->policy());
    out.ok = true;
    out.generation = generation_;
    log::info("reloaded: generation ", generation_, ", ", rt_->policy().routes.size(), " routes");
    notify("READY=1");
    emit_reloaded(out);
    return out;
}

void Daemon::drop_start_capabilities()
{
    const caps::Dropped r = caps::drop_start_only();
    if (!r.error.empty())
        log::warning("could not give up CAP_SYS_ADMIN after start-up (", r.error,
                     "), so the daemon keeps it; a system call filter must allow capset(2), as "
                     "l7fast.service does");
    else if (r.had_sys_admin && !r.bounding)
        log::notice("gave up CAP_SYS_ADMIN after loading the data plane; it stays in the bounding set "
                    "(no CAP_SETPCAP to remove it)");
    else if (r.had_sys_admin)
        log::info("gave up CAP_SYS_ADMIN after loading the data plane (bounding set too)");
}

void Daemon::check_file_permissions()
{
    file_warnings_.clear();
    if (opts_.config.empty())
        return;
    file_warnings_ = policy::policy_permission_problems(opts_.config, opts_.policy_dir);
    for (const auto& w : file_warnings_)
        log::warning("unsafe permissions: ", w);
}

void Daemon::check_policy_content(const policy::Policy& pol)
{
    content_warnings_ = policy::policy_content_problems(pol);
    for (const auto& w : content_warnings_)
        log::warning("policy: ", w);
}

void Daemon::emit_reloaded(const control::ReloadOutcome& out)
{
    if (dbus_)
        dbus_->emit_reloaded(out);
}

std::string Daemon::kernel_jwt_summary() const
{
    const auto& providers = rt_->policy().jwt_providers;
    if (providers.empty())
        return "no JWT providers";
    std::string why;
    if (!dp_)
        why = "no kernel data plane";
    else if (!features_.module.loaded || !features_.module.socket_kfuncs)
        why = "l7fast.ko's kfuncs are not callable from socket programs here (feature l7fast.ko)";
    else if (!dp_->kfuncs())
        why = "the data plane did not load with l7fast.ko's kfuncs (see the log)";
    if (!why.empty())
        return "the verified-token cache only (l7fastd verifies each token once): " + why;
    std::string out = "HS256/384/512 verified by the data plane with l7fast.ko (" +
                      std::to_string(dp_->jwt_header_entries()) + " header forms, " +
                      std::to_string(dp_->jwt_kid_entries()) + " kids)";
    for (size_t i = 0; i < providers.size(); i++) {
        const std::string& r = i < jwt_verify_reason_.size() ? jwt_verify_reason_[i] : std::string("not compiled");
        out += "; " + providers[i].name + ": " + (r.empty() ? "in the kernel" : "cache only, " + r);
    }
    return out;
}

control::StatusInfo Daemon::status()
{
    control::StatusInfo s;
    s.version = L7FAST_VERSION;
    s.state = degraded_reason_.empty() ? "running" : "degraded";
    s.degraded_reason = degraded_reason_;
    s.generation = generation_;
    s.policy_files = rt_->policy().sources;
    s.features = features_.report();
    const auto* keys = server_->module_keys();
    s.features.emplace_back("l7fast.ko keys", keys ? keys->summary() : "none: no kernel data plane");
    s.features.emplace_back("JWT in the kernel", kernel_jwt_summary());
    s.uptime_sec = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started_)
            .count());
    s.listeners = static_cast<uint32_t>(rt_->policy().listeners.size());
    s.routes = static_cast<uint32_t>(placement_.size());
    for (const auto& r : placement_)
        s.routes_kernel += r.kernel;
    s.connections = server_->sessions();
    s.upstream_connections = server_->pool().open_connections();
    s.parked_connections = server_->parked();
    s.last_reload_error = last_reload_error_;
    s.reloads_ok = reloads_ok_;
    s.reloads_failed = reloads_failed_;
    s.applied_unix = applied_unix_;
    s.last_reload_unix = last_reload_unix_;
    const control::LogLevelOutcome lv = log_level_in_force();
    s.log_level = lv.level;
    s.log_level_source = lv.source;
    s.warnings = file_warnings_;
    s.warnings.insert(s.warnings.end(), content_warnings_.begin(), content_warnings_.end());
    return s;
}

std::vector<control::RouteInfo> Daemon::routes() { return placement_; }

std::map<std::string, std::map<std::string, uint64_t>> Daemon::kernel_denials_by_rule()
{
    auto out = kernel_rule_totals_;
    if (!dp_)
        return out;
    for (uint32_t gen : {0u, 1u}) {
        const auto& rules = gen_rules_[gen];
        const auto denied = dp_->rule_denials(gen, static_cast<uint32_t>(rules.size()), false);
        for (size_t b = 0; b < denied.size(); b++)
            if (denied[b])
                out[rules[b].first][rules[b].second] += denied[b];
    }
    return out;
}

control::StatsSnapshot Daemon::stats()
{
    static const char* const counter_names[] = {L7_COUNTER_NAMES};
    static const char* const reason_names[] = {L7_REASON_NAMES};
    static_assert(std::size(counter_names) == L7_C_REASON_BASE, "L7_COUNTER_NAMES: one per enum l7_counter");
    static_assert(std::size(reason_names) == L7_R_COUNT, "L7_REASON_NAMES: one per enum l7_reason");

    control::StatsSnapshot out;
    out.generation = generation_;
    const auto& pol = rt_->policy();
    std::vector<dataplane::RouteCounters> live(pol.routes.size());
    if (dp_) {
        std::map<std::string_view, size_t> by_name;
        for (size_t r = 0; r < pol.routes.size(); r++)
            by_name.emplace(pol.routes[r].name, r);
        const auto& finished = server_->kernel_responses();
        for (uint32_t gen : {0u, 1u}) {
            for (size_t i = 0; i < gen_routes_[gen].size() && i < L7_MAX_ROUTES; i++) {
                auto r = by_name.find(gen_routes_[gen][i]);
                if (r == by_name.end())
                    continue;
                uint32_t id = gen * L7_MAX_ROUTES + static_cast<uint32_t>(i);
                live[r->second] += dp_->route_counters(gen, static_cast<uint32_t>(i));
                if (auto f = finished.find(id); f != finished.end())
                    live[r->second] += f->second;
            }
        }
        auto ctr = dp_->counters();
        for (uint32_t i = 0; i < L7_C_COUNT; i++) {
            std::string name = i < L7_C_REASON_BASE
                                   ? counter_names[i]
                                   : std::string("to_slow_path_") + reason_names[i - L7_C_REASON_BASE];
            out.counters.emplace_back(name, ctr[i]);
        }
    }
    const auto& user = server_->user_counters();
    const auto& extras = server_->user_extras();
    const auto kernel_denials = kernel_denials_by_rule();
    out.user_latency_bounds.assign(std::begin(proxy::kUserLatencyBounds), std::end(proxy::kUserLatencyBounds));
    for (size_t r = 0; r < pol.routes.size(); r++) {
        control::RouteStats rs;
        rs.name = pol.routes[r].name;
        rs.kernel = r < placement_.size() && placement_[r].kernel;
        dataplane::RouteCounters all = live[r];
        if (auto it = kernel_totals_.find(rs.name); it != kernel_totals_.end())
            all += it->second;
        rs.requests_kernel = all.requests;
        rs.kernel_codes = control::kernel_codes(all.status, all.codes);
        rs.direct_responses = all.direct_responses;
        rs.rbac_denied = all.rbac_denied;
        rs.jwt_missing = all.jwt_missing;
        rs.jwt_invalid = all.jwt_invalid;
        rs.rate_limited = all.rate_limited;
        std::map<std::string, uint64_t> denied_by_rule;
        if (auto it = kernel_denials.find(rs.name); it != kernel_denials.end())
            denied_by_rule = it->second;
        // the kernel's denials by the route's default action: those no rule decided
        uint64_t by_rules = 0;
        for (const auto& [rule, n] : denied_by_rule)
            by_rules += n;
        if (all.rbac_denied > by_rules)
            denied_by_rule["default"] += all.rbac_denied - by_rules;
        if (auto it = user.find(rs.name); it != user.end()) {
            rs.requests_user = it->second.requests;
            all += it->second;
        }
        if (auto it = extras.find(rs.name); it != extras.end()) {
            rs.jwt_missing += it->second.jwt_missing;
            rs.jwt_invalid += it->second.jwt_invalid;
            rs.rbac_denied += it->second.rbac_denied;
            for (const auto& [rule, n] : it->second.rbac_denied_by_rule)
                denied_by_rule[rule] += n;
            rs.rate_limited += it->second.rate_limited;
            rs.direct_responses += it->second.direct_responses;
            rs.user_latency.assign(std::begin(it->second.latency.buckets), std::end(it->second.latency.buckets));
            rs.user_latency_sum_ns = it->second.latency.sum_ns;
            for (const auto& [code, n] : it->second.codes)
                rs.user_codes.emplace_back(std::to_string(code), n);
        }
        rs.rbac_denied_by_rule.assign(denied_by_rule.begin(), denied_by_rule.end());
        if (rs.user_latency.empty())
            rs.user_latency.assign(out.user_latency_bounds.size() + 1, 0);
        for (int j = 0; j < L7_STATUS_CLASSES; j++)
            rs.status[j] = all.status[j];
        rs.bytes_in = all.bytes_in;
        rs.bytes_out = all.bytes_out;
        rs.latency.assign(std::begin(all.latency), std::end(all.latency));
        out.requests_kernel += rs.requests_kernel;
        out.requests_user += rs.requests_user;
        out.routes.push_back(std::move(rs));
    }
    out.no_route = server_->user_requests_no_route();
    out.refused.assign(server_->refused().begin(), server_->refused().end());
    if (dp_)
        out.dataplane_connections = dp_->connection_modes();

    // per endpoint address (pool id), in the order the clusters list them
    struct Where {
        size_t index;
        const policy::SocketAddress* address;
    };
    std::map<uint32_t, Where> by_pool;
    for (size_t c = 0; c < pol.clusters.size() && c < rt_->endpoint_pool.size(); c++) {
        const auto& cl = pol.clusters[c];
        for (size_t e = 0; e < cl.endpoints.size() && e < rt_->endpoint_pool[c].size(); e++) {
            auto [it, fresh] =
                by_pool.emplace(rt_->endpoint_pool[c][e], Where{out.endpoints.size(), &cl.endpoints[e].address});
            if (fresh) {
                control::EndpointStats es;
                es.address = cl.endpoints[e].address.str();
                es.clusters = cl.name;
                out.endpoints.push_back(std::move(es));
            } else {
                auto& names = out.endpoints[it->second.index].clusters;
                if (("," + names + ",").find("," + cl.name + ",") == std::string::npos)
                    names += "," + cl.name;
            }
        }
    }
    for (const auto& [pool, where] : by_pool) {
        dataplane::RouteCounters k, u;
        if (dp_)
            k = dp_->pool_counters(pool);
        const auto& kd = server_->kernel_endpoint_responses();
        if (auto it = kd.find(*where.address); it != kd.end())
            k += it->second;
        const auto& ud = server_->user_endpoint_counters();
        if (auto it = ud.find(*where.address); it != ud.end())
            u = it->second;
        auto& es = out.endpoints[where.index];
        es.requests_kernel = k.requests;
        es.requests_user = u.requests;
        k += u;
        for (int j = 0; j < L7_STATUS_CLASSES; j++)
            es.status[j] = k.status[j];
        es.bytes_out = k.bytes_out;
        es.latency.assign(std::begin(k.latency), std::end(k.latency));
        add_endpoint_state(pool, &es);
    }
    return out;
}

void Daemon::add_endpoint_state(uint32_t pool_id, control::EndpointStats* es) const
{
    const proxy::PoolFigures f = server_->pool().figures(pool_id);
    es->kernel_idle = f.idle;
    es->kernel_busy = f.slots - f.idle;
    es->user_idle = f.private_idle;
    es->user_busy = f.private_open > f.private_idle ? f.private_open - f.private_idle : 0;
    for (const proxy::EndpointHealth& h : server_->health().endpoints()) {
        if (h.pool != pool_id)
            continue;
        es->state = h.state();
        es->checked = h.checked;
        es->checks_passed = h.checks_passed;
        es->checks_failed = h.checks_failed;
        es->last_check = h.last_check;
        es->ejections_5xx = h.ejections_5xx;
        es->ejections_connect = h.ejections_connect;
        es->ejected_for_ms = static_cast<uint64_t>(h.ejected_for.count());
    }
}

control::DrainOutcome Daemon::set_drained(const std::string& endpoint, bool drained)
{
    control::DrainOutcome out;
    std::string why;
    const std::optional<policy::SocketAddress> addr = policy::SocketAddress::parse(endpoint, &why);
    if (!addr) {
        out.error = "\"" + endpoint + "\" is not an endpoint address (" + why +
                    "): give IP:PORT or [IPv6]:PORT as `l7fastctl dump` lists it";
        return out;
    }
    const std::optional<bool> changed = server_->health().set_drained(*addr, drained);
    if (!changed) {
        out.error = "no cluster of the running policy lists the endpoint " + addr->str() +
                    " (`l7fastctl dump` lists the endpoints)";
        return out;
    }
    out.ok = true;
    out.changed = *changed;
    for (const proxy::EndpointHealth& h : server_->health().endpoints())
        if (h.address == *addr)
            out.state = h.state();
    return out;
}

// Only the pools' figures: not the whole stats() snapshot, which reads
// every data-plane counter.
std::string Daemon::dump_config()
{
    control::DumpFacts facts;
    facts.generation = generation_;
    facts.applied_unix = applied_unix_;
    facts.placement = placement_;
    const policy::Policy& pol = rt_->policy();
    for (size_t c = 0; c < pol.clusters.size() && c < rt_->endpoint_pool.size(); c++) {
        const auto& endpoints = pol.clusters[c].endpoints;
        for (size_t e = 0; e < endpoints.size() && e < rt_->endpoint_pool[c].size(); e++)
            add_endpoint_state(rt_->endpoint_pool[c][e], &facts.endpoints[endpoints[e].address.str()]);
    }
    return control::config_json(pol, facts);
}

control::ExplainOutcome Daemon::explain(const std::string& request_json)
{
    control::ExplainOutcome out;
    std::optional<control::ExplainRequest> req = control::parse_explain_request(request_json, &out.error);
    if (!req)
        return out;
    control::ExplainPlacement where;
    if (dp_) {
        where.source = "l7fastd";
        where.routes = route_placement_;
        where.listeners = listener_placement_;
    }
    control::ExplainContext context;
    context.policy_source = "running";
    context.generation = generation_;
    if (server_) {
        std::map<policy::SocketAddress, std::string> out_now;
        for (const auto& h : server_->health().endpoints())
            if (!h.in())
                out_now[h.address] = h.state();
        context.endpoint_out = [out_now](const policy::SocketAddress& a) {
            auto it = out_now.find(a);
            return it == out_now.end() ? std::string() : it->second;
        };
    }
    if (auto json = control::explain(*rt_, *req, where, context, &out.error)) {
        out.ok = true;
        out.json = std::move(*json);
    }
    return out;
}

control::CheckOutcome Daemon::check_policy(const std::string& path)
{
    control::CheckOutcome out;
    policy::Policy pol;
    std::string err = load_policy(path, {}, &pol);
    if (!err.empty()) {
        out.errors = err;
        return out;
    }
    // No prepare_runtime here: it reads the JWKS files the policy names, and
    // any user may call CheckPolicy with a policy of their own, so root would
    // read (and describe) files the caller may not. `l7fastctl check` runs
    // that step itself, as the caller (proxy::check_policy_files).
    // placement as this kernel would see it, without touching the pools
    uint32_t next = 0;
    std::map<policy::SocketAddress, uint32_t> ids;
    auto pool_id = [&](const policy::SocketAddress& a) -> std::optional<uint32_t> {
        if (!ids.count(a)) {
            if (next >= L7_MAX_POOLS)
                return std::nullopt;
            ids[a] = next++;
        }
        return ids[a];
    };
    policy::CompiledTables t = policy::compile(pol, random_seed(), pool_id);
    out.placement = describe_routes(pol, &t, "");
    out.ok = true;
    out.routes = static_cast<uint32_t>(out.placement.size());
    for (const auto& ri : out.placement)
        out.routes_kernel += ri.kernel;
    return out;
}

}  // namespace l7fast
