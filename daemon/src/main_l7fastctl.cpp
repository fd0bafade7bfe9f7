// l7fastctl: the operator's command line for l7fastd (docs/l7fastctl.md).
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "common/Log.hpp"
#include "control/BusCodec.hpp"
#include "control/CtlBus.hpp"
#include "control/CtlCommandLine.hpp"
#include "control/ConfigDump.hpp"
#include "control/CtlRender.hpp"
#include "control/Explain.hpp"
#include "config/FileSafety.hpp"
#include "loader/PolicyLoader.hpp"
#include "proxy/Prepare.hpp"

using namespace l7fast;
using namespace l7fast::control;

namespace {

constexpr uint64_t kCallTimeoutUsec = 25'000'000;
// A reload compiles and swaps the whole policy; systemd gives ExecReload
// TimeoutStartSec (120 s in l7fast.service).
constexpr uint64_t kReloadTimeoutUsec = 120'000'000;
// check asks the daemon only for extra information: never wait long.
constexpr uint64_t kCheckTimeoutUsec = 10'000'000;

struct MessageUnref {
    void operator()(sd_bus_message* m) const { sd_bus_message_unref(m); }
};
using Reply = std::unique_ptr<sd_bus_message, MessageUnref>;

int fail(const CallFailure& f)
{
    std::cerr << "l7fastctl: " << f.message << "\n";
    return f.exit_status;
}

int bad_reply(const char* method, int r)
{
    std::cerr << "l7fastctl: cannot read l7fastd's answer to " << method << ": " << std::strerror(-r)
              << " (l7fastctl and l7fastd of different versions?)\n";
    return kExitFailed;
}

// Calls method on the daemon; exits with the failure's status on error.
std::optional<CallFailure> call(ManagerClient& c, const char* method, const char* arg, uint64_t timeout, Reply* out)
{
    sd_bus_message* reply = nullptr;
    auto f = c.call(method, arg, timeout, &reply);
    out->reset(reply);
    return f;
}

int print_json_reply(sd_bus_message* m, const char* method, const char* wrap_key = nullptr)
{
    JsonWriter w;
    if (wrap_key)
        w.begin_object().key(wrap_key);
    int r = codec::write_json(m, w);
    if (r < 0)
        return bad_reply(method, r);
    if (wrap_key)
        w.end_object();
    std::cout << w.str() << "\n";
    return kExitOk;
}

int cmd_status(ManagerClient& c, bool json)
{
    Reply reply;
    if (auto f = call(c, "GetStatus", nullptr, kCallTimeoutUsec, &reply))
        return fail(*f);
    if (json)
        return print_json_reply(reply.get(), "GetStatus");
    StatusInfo st;
    if (int r = codec::read_status(reply.get(), &st); r < 0)
        return bad_reply("GetStatus", r);
    StatsSnapshot stats;
    Reply sreply;
    bool have_stats = !call(c, "GetStats", nullptr, kCallTimeoutUsec, &sreply) &&
                      codec::read_stats(sreply.get(), &stats) >= 0;
    std::cout << render_status(st, have_stats ? &stats : nullptr);
    return kExitOk;
}

int cmd_reload(ManagerClient& c, bool json)
{
    Reply reply;
    if (auto f = call(c, "Reload", nullptr, kReloadTimeoutUsec, &reply))
        return fail(*f);
    ReloadOutcome out;
    if (int r = codec::read_reload(reply.get(), &out); r < 0)
        return bad_reply("Reload", r);
    if (json) {
        std::cout << reload_json(out) << "\n";
    } else if (out.ok) {
        std::cout << "Reloaded: policy generation " << out.generation << " is in force.\n";
    } else {
        std::string err = out.error;
        if (!err.empty() && err.back() != '\n')
            err += '\n';
        std::cerr << "l7fastctl: reload rejected; generation " << out.generation << " stays in force:\n" << err;
    }
    return out.ok ? kExitOk : kExitFailed;
}

int cmd_stats(ManagerClient& c, bool json)
{
    Reply reply;
    if (auto f = call(c, "GetStats", nullptr, kCallTimeoutUsec, &reply))
        return fail(*f);
    if (json)
        return print_json_reply(reply.get(), "GetStats");
    StatsSnapshot st;
    if (int r = codec::read_stats(reply.get(), &st); r < 0)
        return bad_reply("GetStats", r);
    std::cout << render_stats(st);
    return kExitOk;
}

int cmd_routes(ManagerClient& c, bool json)
{
    Reply reply;
    if (auto f = call(c, "ListRoutes", nullptr, kCallTimeoutUsec, &reply))
        return fail(*f);
    if (json)
        return print_json_reply(reply.get(), "ListRoutes", "routes");
    std::vector<RouteInfo> routes;
    if (int r = codec::read_routes(reply.get(), &routes); r < 0)
        return bad_reply("ListRoutes", r);
    std::cout << render_routes(routes);
    return kExitOk;
}

int cmd_dump(ManagerClient& c, bool json)
{
    Reply reply;
    if (auto f = call(c, "DumpConfig", nullptr, kCallTimeoutUsec, &reply))
        return fail(*f);
    const char* doc = nullptr;
    if (int r = sd_bus_message_read(reply.get(), "s", &doc); r < 0)
        return bad_reply("DumpConfig", r);
    if (json) {
        std::cout << doc << "\n";
        return kExitOk;
    }
    std::string text, error;
    if (!render_json_as_text(doc, &text, &error)) {
        std::cerr << "l7fastctl: l7fastd's DumpConfig answer is not JSON (" << error << ")\n";
        return kExitFailed;
    }
    std::cout << text;
    return kExitOk;
}

// Without a level: the one in force (GetStatus). With one: SetLogLevel.
int cmd_log_level(ManagerClient& c, const std::optional<std::string>& level, bool json)
{
    Reply reply;
    LogLevelOutcome out;
    if (level) {
        if (auto f = call(c, "SetLogLevel", level->c_str(), kCallTimeoutUsec, &reply))
            return fail(*f);
        if (int r = codec::read_log_level(reply.get(), &out); r < 0)
            return bad_reply("SetLogLevel", r);
    } else {
        if (auto f = call(c, "GetStatus", nullptr, kCallTimeoutUsec, &reply))
            return fail(*f);
        StatusInfo st;
        if (int r = codec::read_status(reply.get(), &st); r < 0)
            return bad_reply("GetStatus", r);
        if (st.log_level.empty()) {
            std::cerr << "l7fastctl: l7fastd does not report its log level: is it an older version?\n";
            return kExitFailed;
        }
        out.level = st.log_level;
        out.source = st.log_level_source;
    }
    if (json) {
        JsonWriter w;
        w.begin_object().key("level").value(out.level).key("source").value(out.source).end_object();
        std::cout << w.str() << "\n";
    } else {
        std::cout << "Log level: " << render_log_level(out.level, out.source) << "\n";
    }
    return kExitOk;
}

int cmd_drain(ManagerClient& c, const std::string& endpoint, bool drain, bool json)
{
    const char* method = drain ? "Drain" : "Undrain";
    Reply reply;
    if (auto f = call(c, method, endpoint.c_str(), kCallTimeoutUsec, &reply))
        return fail(*f);
    DrainOutcome out;
    if (int r = codec::read_drain(reply.get(), &out); r < 0)
        return bad_reply(method, r);
    if (json) {
        JsonWriter w;
        w.begin_object().key("endpoint").value(endpoint).key("changed").value(out.changed);
        w.key("state").value(out.state).end_object();
        std::cout << w.str() << "\n";
    } else {
        std::cout << endpoint << ": " << (drain ? "drained" : "undrained")
                  << (out.changed ? "" : " already") << "; state " << out.state << "\n";
    }
    return kExitOk;
}

// Validates offline, as the calling user; asks the daemon for placement
// only when the policy is valid, and carries on without it.
int cmd_check(const CtlOptions& o)
{
    namespace fs = std::filesystem;
    const fs::path file = o.file;
    const fs::path dropins = o.policy_dir ? fs::path(*o.policy_dir) : file.parent_path() / "policy.d";
    // the loader and the step every reload runs after it (proxy/Prepare.hpp)
    std::vector<std::string> unchecked;
    const policy::PolicyLoadResult result = proxy::check_policy_files(file, dropins, &unchecked);

    CheckReport report;
    report.file = o.file;
    report.result = &result;
    report.warnings = policy::policy_permission_problems(file, dropins);
    report.warnings.insert(report.warnings.end(), unchecked.begin(), unchecked.end());
    if (result.ok())
        for (auto& w : policy::policy_content_problems(result.policy()))
            report.warnings.push_back(std::move(w));
    CheckOutcome placement;
    if (result.ok()) {
        std::error_code ec;
        const fs::path abs = fs::absolute(file, ec);
        ManagerClient c;
        Reply reply;
        std::optional<CallFailure> f = c.connect();
        if (!f)
            f = call(c, "CheckPolicy", (ec ? file : abs).c_str(), kCheckTimeoutUsec, &reply);
        if (f) {
            report.placement_note = f->message;
        } else if (int r = codec::read_check(reply.get(), &placement); r < 0) {
            report.placement_note = std::string("unreadable answer from l7fastd: ") + std::strerror(-r);
        } else if (!placement.ok) {
            std::string first = placement.errors.substr(0, placement.errors.find('\n'));
            report.placement_note = "l7fastd could not place the routes: " + first;
        } else {
            report.placement = &placement;
        }
    }
    if (o.json) {
        std::cout << check_json(report) << "\n";
    } else if (result.ok()) {
        std::cout << render_check(report);
    } else {
        std::cerr << result.error_text();
    }
    return result.ok() ? kExitOk : kExitFailed;
}

// On the running policy (D-Bus Explain), or offline on --policy FILE
// (as check: the loader and prepare_runtime, as the calling user).
int cmd_explain(const CtlOptions& o)
{
    ExplainRequest req;
    req.method = o.method;
    req.url = o.url;
    req.headers = o.headers;
    req.source = o.source.value_or("");
    req.token = o.token.value_or("");
    req.listener = o.listener.value_or("");
    std::string json;
    if (o.policy_file) {
        namespace fs = std::filesystem;
        const fs::path file = *o.policy_file;
        const fs::path dropins = o.policy_dir ? fs::path(*o.policy_dir) : file.parent_path() / "policy.d";
        std::vector<std::string> unchecked;
        policy::PolicyLoadResult result = proxy::check_policy_files(file, dropins, &unchecked);
        if (!result.ok()) {
            std::cerr << result.error_text();
            return kExitFailed;
        }
        const ExplainPlacement where = offline_placement(result.policy());
        std::optional<policy::PolicyError> perr;
        auto rt = proxy::prepare_runtime(std::move(result).policy(), nullptr, &perr);
        if (!rt) {
            std::cerr << (perr ? perr->str() : std::string("the policy cannot be prepared")) << "\n";
            return kExitFailed;
        }
        ExplainContext context;
        context.policy_source = *o.policy_file;
        std::string error;
        auto doc = explain(*rt, req, where, context, &error);
        if (!doc) {
            std::cerr << "l7fastctl: explain: " << error << "\n";
            return kExitFailed;
        }
        json = std::move(*doc);
    } else {
        ManagerClient c;
        if (auto f = c.connect())
            return fail(*f);
        Reply reply;
        const std::string arg = explain_request_json(req);
        if (auto f = call(c, "Explain", arg.c_str(), kCallTimeoutUsec, &reply))
            return fail(*f);
        const char* doc = nullptr;
        if (int r = sd_bus_message_read(reply.get(), "s", &doc); r < 0)
            return bad_reply("Explain", r);
        json = doc ? doc : "";
    }
    if (o.json) {
        std::cout << json << "\n";
        return kExitOk;
    }
    std::string text, error;
    if (!render_explain_text(json, &text, &error)) {
        std::cerr << "l7fastctl: the explanation is not JSON (" << error << ")\n";
        return kExitFailed;
    }
    std::cout << text;
    return kExitOk;
}

}  // namespace

int main(int argc, char** argv)
{
    log::set_level(log::Level::Warning);
    std::vector<std::string> args(argv + (argc > 0), argv + argc);
    std::string error;
    auto opts = parse_command_line(args, &error);
    if (!opts) {
        std::cerr << "l7fastctl: " << error << "\nTry 'l7fastctl --help'.\n";
        return kExitUsage;
    }
    switch (opts->command) {
    case CtlCommand::Help:
        std::cout << usage_text();
        return kExitOk;
    case CtlCommand::Version:
        std::cout << "l7fastctl " << L7FAST_VERSION << "\n";
        return kExitOk;
    case CtlCommand::Check:
        return cmd_check(*opts);
    case CtlCommand::Explain:
        return cmd_explain(*opts);
    default:
        break;
    }
    ManagerClient client;
    if (auto f = client.connect())
        return fail(*f);
    switch (opts->command) {
    case CtlCommand::Status: return cmd_status(client, opts->json);
    case CtlCommand::Reload: return cmd_reload(client, opts->json);
    case CtlCommand::Stats: return cmd_stats(client, opts->json);
    case CtlCommand::Routes: return cmd_routes(client, opts->json);
    case CtlCommand::LogLevel: return cmd_log_level(client, opts->level, opts->json);
    case CtlCommand::Drain: return cmd_drain(client, opts->endpoint, true, opts->json);
    case CtlCommand::Undrain: return cmd_drain(client, opts->endpoint, false, opts->json);
    case CtlCommand::Dump: return cmd_dump(client, opts->json);
    default: return kExitUsage;
    }
}
