// l7fastctl without a bus: command line, exit statuses for bus errors, the
// text and JSON it prints (control/CtlCommandLine.hpp, CtlBus.hpp,
// CtlRender.hpp, Json.hpp).
#include <gtest/gtest.h>

#include <cerrno>

#include "control/CtlBus.hpp"
#include "control/CtlCommandLine.hpp"
#include "control/CtlRender.hpp"
#include "control/Json.hpp"
#include "loader/PolicyLoader.hpp"

using namespace l7fast::control;

namespace {

std::optional<CtlOptions> parse(std::vector<std::string> args, std::string* error = nullptr)
{
    std::string e;
    auto o = parse_command_line(args, &e);
    if (error)
        *error = e;
    return o;
}

}  // namespace

TEST(CtlCommandLine, Commands)
{
    EXPECT_EQ(parse({"status"})->command, CtlCommand::Status);
    EXPECT_EQ(parse({"reload"})->command, CtlCommand::Reload);
    EXPECT_EQ(parse({"stats"})->command, CtlCommand::Stats);
    EXPECT_EQ(parse({"routes"})->command, CtlCommand::Routes);
    EXPECT_EQ(parse({"dump"})->command, CtlCommand::Dump);
    auto c = parse({"check", "/etc/l7fast/policy.toml"});
    ASSERT_TRUE(c);
    EXPECT_EQ(c->command, CtlCommand::Check);
    EXPECT_EQ(c->file, "/etc/l7fast/policy.toml");
    EXPECT_FALSE(c->policy_dir);
    c = parse({"log-level"});
    ASSERT_TRUE(c);
    EXPECT_EQ(c->command, CtlCommand::LogLevel);
    EXPECT_FALSE(c->level);
    c = parse({"log-level", "debug", "--json"});
    ASSERT_TRUE(c);
    EXPECT_EQ(*c->level, "debug");
    EXPECT_TRUE(c->json);
    c = parse({"drain", "10.0.0.5:8080"});
    ASSERT_TRUE(c);
    EXPECT_EQ(c->command, CtlCommand::Drain);
    EXPECT_EQ(c->endpoint, "10.0.0.5:8080");
    c = parse({"undrain", "[::1]:8080", "--json"});
    ASSERT_TRUE(c);
    EXPECT_EQ(c->command, CtlCommand::Undrain);
    EXPECT_EQ(c->endpoint, "[::1]:8080");
    EXPECT_TRUE(c->json);
}

TEST(CtlCommandLine, OptionsGoAnywhere)
{
    EXPECT_TRUE(parse({"--json", "status"})->json);
    EXPECT_TRUE(parse({"status", "--json"})->json);
    EXPECT_FALSE(parse({"status"})->json);
    auto c = parse({"check", "--policy-dir", "/etc/x.d", "p.toml", "--json"});
    ASSERT_TRUE(c);
    EXPECT_EQ(*c->policy_dir, "/etc/x.d");
    EXPECT_EQ(c->file, "p.toml");
    EXPECT_EQ(*parse({"check", "--policy-dir=", "p.toml"})->policy_dir, "");
    EXPECT_EQ(parse({"check", "--", "-odd.toml"})->file, "-odd.toml");
    EXPECT_EQ(parse({"status", "--help"})->command, CtlCommand::Help);
    EXPECT_EQ(parse({"-h"})->command, CtlCommand::Help);
    EXPECT_EQ(parse({"--version"})->command, CtlCommand::Version);
    auto ex = parse({"explain", "-H", "X-A:  1 ", "POST", "--header=Host: h", "http://h/a", "--source", "::1",
                     "--token=t", "--listener", "web", "--policy", "p.toml", "--policy-dir", ""});
    ASSERT_TRUE(ex);
    EXPECT_EQ(ex->command, CtlCommand::Explain);
    EXPECT_EQ(ex->method, "POST");
    EXPECT_EQ(ex->url, "http://h/a");
    const std::vector<std::pair<std::string, std::string>> headers{{"X-A", "1"}, {"Host", "h"}};
    EXPECT_EQ(ex->headers, headers);
    EXPECT_EQ(ex->source, "::1");
    EXPECT_EQ(ex->token, "t");
    EXPECT_EQ(ex->listener, "web");
    EXPECT_EQ(ex->policy_file, "p.toml");
    EXPECT_EQ(ex->policy_dir, "");
}

TEST(CtlCommandLine, UsageErrorsSayWhat)
{
    std::string e;
    EXPECT_FALSE(parse({}, &e));
    EXPECT_EQ(e, "no command given");
    EXPECT_FALSE(parse({"restart"}, &e));
    EXPECT_EQ(e, "unknown command \"restart\"");
    // a typo gets a guess
    EXPECT_FALSE(parse({"stat"}, &e));
    EXPECT_EQ(e, "unknown command \"stat\" (did you mean \"stats\"?)");
    EXPECT_FALSE(parse({"Routes"}, &e));
    EXPECT_EQ(e, "unknown command \"Routes\" (did you mean \"routes\"?)");
    EXPECT_FALSE(parse({"check"}, &e));
    EXPECT_EQ(e, "check needs a policy file");
    EXPECT_FALSE(parse({"check", "a", "b"}, &e));
    EXPECT_EQ(e, "check takes one argument, got \"b\"");
    EXPECT_FALSE(parse({"log-level", "debug", "info"}, &e));
    EXPECT_EQ(e, "log-level takes one argument, got \"info\"");
    EXPECT_FALSE(parse({"loglevel"}, &e));
    EXPECT_EQ(e, "unknown command \"loglevel\" (did you mean \"log-level\"?)");
    EXPECT_FALSE(parse({"status", "now"}, &e));
    EXPECT_EQ(e, "status takes no arguments, got \"now\"");
    EXPECT_FALSE(parse({"--jsn", "status"}, &e));
    EXPECT_EQ(e, "unknown option --jsn");
    EXPECT_FALSE(parse({"routes", "--policy-dir", "x"}, &e));
    EXPECT_EQ(e, "--policy-dir applies to check, and to explain with --policy");
    EXPECT_FALSE(parse({"explain", "GET", "/", "--policy-dir", "x"}, &e));
    EXPECT_EQ(e, "--policy-dir applies to check, and to explain with --policy");
    EXPECT_FALSE(parse({"explain", "GET"}, &e));
    EXPECT_EQ(e, "explain needs a method and a URL (explain GET /path)");
    EXPECT_FALSE(parse({"explain", "GET", "/", "x"}, &e));
    EXPECT_EQ(e, "explain takes two arguments, got \"x\"");
    EXPECT_FALSE(parse({"explain", "GET", "/", "-H", "no colon"}, &e));
    EXPECT_EQ(e, "-H needs 'Name: value', got \"no colon\"");
    EXPECT_FALSE(parse({"explain", "GET", "/", "--source"}, &e));
    EXPECT_EQ(e, "--source needs an IP address");
    EXPECT_FALSE(parse({"status", "--token", "t"}, &e));
    EXPECT_EQ(e, "-H, --source, --token, --listener and --policy apply to explain only");
    EXPECT_FALSE(parse({"explan", "GET", "/"}, &e));
    EXPECT_EQ(e, "unknown command \"explan\" (did you mean \"explain\"?)");
    EXPECT_FALSE(parse({"drain"}, &e));
    EXPECT_EQ(e, "drain needs an endpoint address (drain 10.0.0.5:8080)");
    EXPECT_FALSE(parse({"undrain", ""}, &e));
    EXPECT_EQ(e, "undrain needs an endpoint address, got an empty one");
    EXPECT_FALSE(parse({"drain", "a:1", "b:2"}, &e));
    EXPECT_EQ(e, "drain takes one argument, got \"b:2\"");
    EXPECT_FALSE(parse({"drian", "a:1"}, &e));
    EXPECT_EQ(e, "unknown command \"drian\" (did you mean \"drain\"?)");
    EXPECT_FALSE(parse({"check", "p.toml", "--policy-dir"}, &e));
    EXPECT_FALSE(parse({"check", ""}, &e));
}

TEST(CtlCommandLine, UsageMentionsEveryCommandAndExitStatus)
{
    const std::string u = usage_text();
    for (const char* w : {"status", "reload", "stats", "routes", "dump", "check FILE", "explain METHOD URL", "log-level [LEVEL]", "drain ENDPOINT", "undrain ENDPOINT", "--json",
                          "--help", "--version", "3 l7fastd not reachable", "4 permission denied"})
        EXPECT_NE(u.find(w), std::string::npos) << w;
}

TEST(CtlBusErrors, DaemonAbsentIsExit3WithWhatToDo)
{
    for (const char* name : {"org.freedesktop.DBus.Error.ServiceUnknown", "org.freedesktop.DBus.Error.NameHasNoOwner"}) {
        CallFailure f = classify_call_error("GetStatus", name, "The name is not activatable", -EHOSTUNREACH);
        EXPECT_EQ(f.exit_status, kExitUnreachable);
        EXPECT_EQ(f.message, "l7fastd is not running (no org.l7fast.Manager1 on the system bus): start it with "
                             "systemctl start l7fast");
    }
    EXPECT_EQ(classify_call_error("Reload", "org.freedesktop.DBus.Error.NoReply", "timeout", -ETIMEDOUT).exit_status,
              kExitUnreachable);
    EXPECT_EQ(classify_call_error("Reload", nullptr, nullptr, -ETIMEDOUT).exit_status, kExitUnreachable);
    EXPECT_EQ(classify_call_error("Reload", nullptr, nullptr, -ECONNRESET).exit_status, kExitUnreachable);
    CallFailure f = connect_failure("unix:path=/nonexistent", -ENOENT);
    EXPECT_EQ(f.exit_status, kExitUnreachable);
    EXPECT_NE(f.message.find("unix:path=/nonexistent"), std::string::npos);
    EXPECT_NE(f.message.find("No such file or directory"), std::string::npos);
}

TEST(CtlBusErrors, AccessDeniedIsExit4AndReloadSaysWhatToDo)
{
    // dbus-daemon's own wording is technical; the CLI says what to do.
    CallFailure f = classify_call_error(
        "Reload", "org.freedesktop.DBus.Error.AccessDenied",
        "Rejected send message, 2 matched rules; type=\"method_call\", sender=\":1.5\" (uid=65534 ...)", -EACCES);
    EXPECT_EQ(f.exit_status, kExitDenied);
    EXPECT_NE(f.message.find("sudo l7fastctl reload"), std::string::npos);
    EXPECT_NE(f.message.find("adduser $USER l7fast"), std::string::npos);
    EXPECT_EQ(classify_call_error("GetStats", nullptr, nullptr, -EACCES).exit_status, kExitDenied);
    f = classify_call_error("SetLogLevel", "org.freedesktop.DBus.Error.AccessDenied", "Rejected send message",
                            -EACCES);
    EXPECT_EQ(f.exit_status, kExitDenied);
    EXPECT_EQ(f.message, "permission denied: changing the log level needs root or membership of the group "
                         "\"l7fast\": run `sudo l7fastctl log-level LEVEL`, or have an administrator add you "
                         "with `adduser $USER l7fast` (then log in again)");
    f = classify_call_error("Drain", "org.freedesktop.DBus.Error.AccessDenied", "Rejected send message", -EACCES);
    EXPECT_EQ(f.exit_status, kExitDenied);
    EXPECT_NE(f.message.find("draining an endpoint needs root"), std::string::npos) << f.message;
    EXPECT_NE(f.message.find("sudo l7fastctl drain ENDPOINT"), std::string::npos) << f.message;
    f = classify_call_error("Undrain", "org.freedesktop.DBus.Error.AccessDenied", "Rejected send message", -EACCES);
    EXPECT_NE(f.message.find("sudo l7fastctl undrain ENDPOINT"), std::string::npos) << f.message;
}

TEST(CtlBusErrors, OtherErrorsAreExit1WithTheDaemonsSentence)
{
    CallFailure f = classify_call_error("CheckPolicy", "org.freedesktop.DBus.Error.InvalidArgs",
                                        "Cannot check /dev/null: it is a character device, not a regular file.",
                                        -EINVAL);
    EXPECT_EQ(f.exit_status, kExitFailed);
    EXPECT_EQ(f.message, "Cannot check /dev/null: it is a character device, not a regular file.");
    f = classify_call_error("GetStats", "org.freedesktop.DBus.Error.UnknownMethod", "Unknown method", -EBADR);
    EXPECT_EQ(f.exit_status, kExitFailed);
    EXPECT_NE(f.message.find("older version"), std::string::npos);
    f = classify_call_error("GetStats", "org.freedesktop.DBus.Error.Failed", "GetStats() failed in l7fastd: x", -EIO);
    EXPECT_EQ(f.message, "GetStats failed: GetStats() failed in l7fastd: x");
}

TEST(JsonWriter, EscapesAndNests)
{
    JsonWriter w;
    w.begin_object()
        .field("s", "a\"b\\c\n\t\x01")
        .field("n", uint64_t{18446744073709551615ull})
        .field("i", int64_t{-3})
        .field("b", false);
    w.key("a").begin_array().value("x").begin_object().end_object().begin_array().end_array().null().end_array();
    w.end_object();
    EXPECT_EQ(w.str(),
              R"({"s":"a\"b\\c\n\t\u0001","n":18446744073709551615,"i":-3,"b":false,"a":["x",{},[],null]})");
}

TEST(JsonWriter, InvalidUtf8BecomesReplacementCharacters)
{
    EXPECT_EQ(valid_utf8("caf\xc3\xa9"), "caf\xc3\xa9");
    EXPECT_EQ(valid_utf8("\xf0\x9f\x98\x80"), "\xf0\x9f\x98\x80");
    EXPECT_EQ(valid_utf8("a\xff" "b"), "a\xef\xbf\xbd" "b");
    EXPECT_EQ(valid_utf8("\xc0\xaf"), "\xef\xbf\xbd\xef\xbf\xbd") << "overlong '/'";
    EXPECT_EQ(valid_utf8("\xed\xa0\x80"), "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd") << "surrogate";
    EXPECT_EQ(valid_utf8("\xe2\x82"), "\xef\xbf\xbd\xef\xbf\xbd") << "truncated";
    EXPECT_EQ(JsonWriter::quote("\xff"), "\"\xef\xbf\xbd\"");
}

TEST(CtlRender, TablesAlignAndRightAlignNumbers)
{
    TextTable t({"NAME", "COUNT", "NOTE"}, {false, true, false});
    t.add({"a", "5", ""});
    t.add({"longer", "12345", "x"});
    EXPECT_EQ(t.str(),
              "NAME    COUNT  NOTE\n"
              "a           5\n"
              "longer  12345  x\n");
}

TEST(CtlRender, Units)
{
    EXPECT_EQ(format_bytes(0), "0 B");
    EXPECT_EQ(format_bytes(1023), "1023 B");
    EXPECT_EQ(format_bytes(1536), "1.5 KiB");
    EXPECT_EQ(format_bytes(5ull << 30), "5.0 GiB");
    EXPECT_EQ(format_duration(59), "59s");
    EXPECT_EQ(format_duration(184), "3m 04s");
    EXPECT_EQ(format_duration(7384), "2h 03m 04s");
    EXPECT_EQ(format_duration(3 * 86400 + 7260), "3d 02h 01m");
    EXPECT_EQ(format_percent(1, 3), "33.3%");
    EXPECT_EQ(format_percent(0, 0), "-");
}

TEST(CtlRender, RoutesShowPlacementAndReasonForUserOnly)
{
    std::vector<RouteInfo> routes{{"api", "*", "prefix=/api", "app", true, "ignored", "p.toml:3:1"},
                                  {"jwt", "web", "path=/login", "auth", false, "RS256 verification", "p.toml:9:1"}};
    const std::string out = render_routes(routes);
    EXPECT_NE(out.find("#  ROUTE  PLACEMENT  LISTENERS  MATCH        CLUSTERS  WHERE       REASON\n"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find("1  api    kernel     *          prefix=/api  app       p.toml:3:1\n"), std::string::npos)
        << out;
    EXPECT_NE(out.find("2  jwt    user       web        path=/login  auth      p.toml:9:1  RS256 verification\n"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find("2 routes, 1 in the kernel (50.0%)."), std::string::npos);
    EXPECT_EQ(render_routes({}), "No routes.\n");
}

TEST(CtlRender, StatsSplitDataPlaneAndFallbackCounters)
{
    StatsSnapshot s;
    s.generation = 2;
    RouteStats r;
    r.name = "api";
    r.kernel = true;
    r.requests_kernel = 90;
    r.requests_user = 10;
    r.status[2] = 95;
    r.status[5] = 5;
    r.bytes_out = 2048;
    s.routes = {r};
    s.requests_kernel = 90;
    s.requests_user = 10;
    s.no_route = 3;
    s.counters = {{"requests_kernel", 90}, {"to_slow_path_pool_miss", 7}};
    const std::string out = render_stats(s);
    EXPECT_NE(out.find("ROUTE  PLACEMENT  REQ KERNEL  REQ USER  2XX  3XX  4XX  5XX  BYTES IN  BYTES OUT\n"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find("api    kernel             90        10   95    0    0    5       0 B    2.0 KiB\n"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find("total                     90        10   95    0    0    5       0 B    2.0 KiB\n"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find("matched no route (slow path): 3"), std::string::npos);
    EXPECT_NE(out.find("TO SLOW PATH, BECAUSE  COUNT\npool_miss                  7\n"), std::string::npos) << out;
}

TEST(CtlRender, StatsShowEndpointsWithTheirOpenConnections)
{
    StatsSnapshot st;
    EndpointStats ep;
    ep.address = "127.0.0.1:9001";
    ep.clusters = "app";
    ep.requests_kernel = 7;
    ep.status[2] = 7;
    ep.kernel_idle = 5;
    ep.kernel_busy = 2;
    ep.user_idle = 1;
    st.endpoints.push_back(ep);
    const std::string out = render_stats(st);
    EXPECT_NE(out.find("Per endpoint (exchanges counted when they end; connections open now):\n"), std::string::npos)
        << out;
    EXPECT_NE(out.find("BYTES OUT   CONNS KERNEL     CONNS USER\n"), std::string::npos) << out;
    EXPECT_NE(out.find("5 idle/2 busy  1 idle/0 busy\n"), std::string::npos) << out;
}

TEST(CtlRender, StatusShowsSharesAndTheLastReloadError)
{
    StatusInfo s;
    s.version = "0.1.0";
    s.state = "degraded";
    s.degraded_reason = "no kernel data plane";
    s.generation = 4;
    s.policy_files = {"/etc/l7fast/policy.toml", "/etc/l7fast/policy.d/a.toml"};
    s.routes = 4;
    s.routes_kernel = 3;
    s.last_reload_error = "p.toml:1:1: x: bad\nsecond line";
    StatsSnapshot st;
    st.requests_kernel = 3;
    st.requests_user = 1;
    const std::string out = render_status(s, &st);
    EXPECT_EQ(out.rfind("l7fastd 0.1.0: degraded (no kernel data plane)\n", 0), 0u) << out;
    EXPECT_NE(out.find("Policy:         /etc/l7fast/policy.toml\n                /etc/l7fast/policy.d/a.toml\n"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find("Routes:         4, 3 in the kernel (75.0%)\n"), std::string::npos) << out;
    EXPECT_NE(out.find("Requests:       4, 3 in the kernel (75.0%), 1 in user space\n"), std::string::npos) << out;
    EXPECT_NE(out.find("Last reload:    failed: p.toml:1:1: x: bad\n"), std::string::npos) << out;
    EXPECT_EQ(out.find("Warnings:"), std::string::npos) << out;
    s.warnings = {"/a: first", "/b: second"};
    EXPECT_NE(render_status(s, nullptr).find("Warnings:       /a: first\n                /b: second\n"),
              std::string::npos);
    EXPECT_EQ(render_status(s, nullptr).find("Requests:"), std::string::npos);
    EXPECT_EQ(render_status(s, nullptr).find("Log level:"), std::string::npos);  // an older l7fastd
    s.log_level = "debug";
    s.log_level_source = "l7fastctl";
    EXPECT_NE(render_status(s, nullptr)
                  .find("Log level:      debug (set with l7fastctl log-level; `l7fastctl log-level reset` "
                        "returns to the configured one)\n"),
              std::string::npos);
    EXPECT_EQ(render_log_level("info", "policy"), "info (daemon.log_level)");
    EXPECT_EQ(format_utc(1764671101), "2025-12-02 10:25:01 UTC");
    s.applied_unix = 1764671101;
    s.reloads_ok = 2;
    s.reloads_failed = 1;
    const std::string with_reloads = render_status(s, nullptr);
    EXPECT_NE(with_reloads.find("Generation:     4, applied 2025-12-02 10:25:01 UTC\n"), std::string::npos)
        << with_reloads;
    EXPECT_NE(with_reloads.find("Last reload:    failed: p.toml:1:1: x: bad (2 ok, 1 failed since start)\n"),
              std::string::npos)
        << with_reloads;
    EXPECT_EQ(render_log_level("debug", "command line"), "debug (l7fastd's --log-level or --trace)");
}

TEST(CtlRender, CheckJsonCarriesEveryErrorField)
{
    auto result = l7fast::policy::PolicyLoader::load_string("[[listener]]\nname = \"x\"\nbogus = 1\n", "p.toml");
    ASSERT_FALSE(result.ok());
    CheckReport r;
    r.file = "p.toml";
    r.result = &result;
    r.placement_note = "l7fastd is not running";
    const std::string j = check_json(r);
    EXPECT_EQ(j.rfind(R"({"file":"p.toml","ok":false,"errors":[{"file":"p.toml","line":)", 0), 0u) << j;
    for (const char* k : {"\"column\":", "\"key\":", "\"message\":", "\"text\":\"p.toml:"})
        EXPECT_NE(j.find(k), std::string::npos) << k << " in " << j;
    EXPECT_NE(j.find(R"("placement":null,"placement_note":"l7fastd is not running","warnings":[]})"),
              std::string::npos)
        << j;
    EXPECT_EQ(render_check(r), "") << "errors go to stderr, not into the report";
}

TEST(CtlRender, ReloadJson)
{
    EXPECT_EQ(reload_json({true, 5, ""}), R"({"ok":true,"generation":5,"error":""})");
    EXPECT_EQ(reload_json({false, 4, "p.toml:2:1: k: bad\n"}),
              R"({"ok":false,"generation":4,"error":"p.toml:2:1: k: bad\n"})");
}
