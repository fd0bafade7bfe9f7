// Marshalling of the ControlApi types over D-Bus (control/BusCodec.hpp), and
// the JSON l7fastctl prints from the same messages. No bus is needed: the
// messages are built on an unconnected sd-bus object, sealed and read back.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <systemd/sd-bus.h>

#include "control/BusCodec.hpp"
#include "control/CtlRender.hpp"
#include "control/Json.hpp"

using namespace l7fast::control;

namespace {

class BusMessage : public ::testing::Test {
protected:
    void SetUp() override
    {
        int fds[2];
        ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
        peer_ = fds[1];
        ASSERT_GE(sd_bus_new(&bus_), 0);
        ASSERT_GE(sd_bus_set_fd(bus_, fds[0], fds[0]), 0);
        ASSERT_GE(sd_bus_start(bus_), 0);
        ASSERT_GE(sd_bus_message_new_method_call(bus_, &m_, "org.l7fast.Manager1", "/org/l7fast/Manager1",
                                                 "org.l7fast.Manager1", "Test"),
                  0);
    }
    void TearDown() override
    {
        sd_bus_message_unref(m_);
        // not flush: the peer never answers the authentication, so a flush
        // would wait forever
        sd_bus_close_unref(bus_);
        close(peer_);
    }
    // Done appending: from now on m_ is read from the start.
    void seal()
    {
        ASSERT_GE(sd_bus_message_seal(m_, 1, 0), 0);
        ASSERT_GE(sd_bus_message_rewind(m_, 1), 0);
    }
    std::string json()
    {
        JsonWriter w;
        EXPECT_GE(codec::write_json(m_, w), 0);
        return w.str();
    }
    // in appended with append, sealed, checked against signature and read
    // back with read
    template <class T, class Append, class Read>
    T round_trip(const T& in, Append append, Read read, const char* signature)
    {
        EXPECT_GE(append(m_, in), 0);
        seal();
        EXPECT_STREQ(sd_bus_message_get_signature(m_, 1), signature);
        T out;
        EXPECT_GE(read(m_, &out), 0);
        return out;
    }

    sd_bus* bus_ = nullptr;
    sd_bus_message* m_ = nullptr;
    int peer_ = -1;
};

StatusInfo sample_status()
{
    StatusInfo s;
    s.version = "0.1.0";
    s.state = "degraded";
    s.degraded_reason = "l7fast.ko not loaded";
    s.generation = 7;
    s.policy_files = {"/etc/l7fast/policy.toml", "/etc/l7fast/policy.d/10-a.toml"};
    s.features = {{"sk_msg", "yes"}, {"kfuncs", "no, module missing"}};
    s.uptime_sec = 3723;
    s.listeners = 2;
    s.routes = 5;
    s.routes_kernel = 4;
    s.connections = 3;
    s.upstream_connections = 10;
    s.parked_connections = 4;
    s.last_reload_error = "p.toml:1:2: x: bad";
    s.log_level = "debug";
    s.log_level_source = "l7fastctl";
    s.warnings = {"/etc/l7fast/policy.toml: the policy file is writable by every user"};
    return s;
}

StatsSnapshot sample_stats()
{
    StatsSnapshot s;
    s.generation = 3;
    RouteStats a;
    a.name = "api";
    a.kernel = true;
    a.requests_kernel = 1000;
    a.requests_user = 5;
    for (int i = 0; i < L7_STATUS_CLASSES; i++)
        a.status[i] = 10 + i;
    a.bytes_in = 1 << 20;
    a.bytes_out = 3ull << 32;
    a.latency = {0, 1, 2, 3};
    RouteStats b;
    b.name = "admin";
    b.requests_user = 9;
    s.routes = {a, b};
    s.counters = {{"requests_kernel", 1000}, {"to_slow_path_no_route", 4}};
    s.requests_kernel = 1000;
    s.requests_user = 14;
    s.no_route = 4;
    return s;
}

std::vector<RouteInfo> sample_routes()
{
    return {{"api", "*", "prefix=/api", "app:90,canary:10", true, "", "/etc/l7fast/policy.toml:20:1"},
            {"admin", "web,internal", "path=/admin", "admin", false, "jwt: RS256 needs the slow path",
             "/etc/l7fast/policy.d/10-a.toml:3:1"}};
}

void expect_route_eq(const RouteInfo& a, const RouteInfo& b)
{
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.listeners, b.listeners);
    EXPECT_EQ(a.match, b.match);
    EXPECT_EQ(a.clusters, b.clusters);
    EXPECT_EQ(a.kernel, b.kernel);
    EXPECT_EQ(a.reason, b.reason);
    EXPECT_EQ(a.where, b.where);
}

}  // namespace

TEST_F(BusMessage, StatusRoundTrips)
{
    const StatusInfo in = sample_status();
    ASSERT_GE(codec::append_status(m_, in), 0);
    seal();
    EXPECT_STREQ(sd_bus_message_get_signature(m_, 1), "a{sv}");
    StatusInfo out;
    ASSERT_GE(codec::read_status(m_, &out), 0);
    EXPECT_EQ(out.version, in.version);
    EXPECT_EQ(out.state, in.state);
    EXPECT_EQ(out.degraded_reason, in.degraded_reason);
    EXPECT_EQ(out.generation, in.generation);
    EXPECT_EQ(out.policy_files, in.policy_files);
    EXPECT_EQ(out.features, in.features);
    EXPECT_EQ(out.uptime_sec, in.uptime_sec);
    EXPECT_EQ(out.listeners, in.listeners);
    EXPECT_EQ(out.routes, in.routes);
    EXPECT_EQ(out.routes_kernel, in.routes_kernel);
    EXPECT_EQ(out.connections, in.connections);
    EXPECT_EQ(out.upstream_connections, in.upstream_connections);
    EXPECT_EQ(out.parked_connections, in.parked_connections);
    EXPECT_EQ(out.last_reload_error, in.last_reload_error);
    EXPECT_EQ(out.log_level, in.log_level);
    EXPECT_EQ(out.log_level_source, in.log_level_source);
    EXPECT_EQ(out.warnings, in.warnings);
}

TEST_F(BusMessage, StatusJsonHasTheDocumentedKeysInOrder)
{
    ASSERT_GE(codec::append_status(m_, sample_status()), 0);
    seal();
    EXPECT_EQ(json(),
              R"({"version":"0.1.0","state":"degraded","degraded_reason":"l7fast.ko not loaded","generation":7,)"
              R"("policy_files":["/etc/l7fast/policy.toml","/etc/l7fast/policy.d/10-a.toml"],)"
              R"("features":{"sk_msg":"yes","kfuncs":"no, module missing"},"uptime_sec":3723,"listeners":2,)"
              R"("routes":5,"routes_kernel":4,"connections":3,"upstream_connections":10,"parked_connections":4,)"
              R"("last_reload_error":"p.toml:1:2: x: bad","reloads_ok":0,"reloads_failed":0,"applied_unix":0,)"
              R"("last_reload_unix":0,"log_level":"debug","log_level_source":"l7fastctl",)"
              R"("warnings":["/etc/l7fast/policy.toml: the policy file is writable by every user"]})");
}

TEST_F(BusMessage, StatsRoundTrip)
{
    const StatsSnapshot in = sample_stats();
    ASSERT_GE(codec::append_stats(m_, in), 0);
    seal();
    StatsSnapshot out;
    ASSERT_GE(codec::read_stats(m_, &out), 0);
    EXPECT_EQ(out.generation, 3u);
    EXPECT_EQ(out.requests_kernel, 1000u);
    EXPECT_EQ(out.requests_user, 14u);
    EXPECT_EQ(out.no_route, 4u);
    EXPECT_EQ(out.counters, in.counters);
    ASSERT_EQ(out.routes.size(), 2u);
    const RouteStats& a = out.routes[0];
    EXPECT_EQ(a.name, "api");
    EXPECT_TRUE(a.kernel);
    EXPECT_EQ(a.requests_kernel, 1000u);
    EXPECT_EQ(a.requests_user, 5u);
    for (int i = 0; i < L7_STATUS_CLASSES; i++)
        EXPECT_EQ(a.status[i], 10u + i) << "status class " << i;
    EXPECT_EQ(a.bytes_in, 1u << 20);
    EXPECT_EQ(a.bytes_out, 3ull << 32);
    EXPECT_EQ(a.latency, (std::vector<uint64_t>{0, 1, 2, 3}));
    EXPECT_EQ(out.routes[1].name, "admin");
    EXPECT_FALSE(out.routes[1].kernel);
    EXPECT_EQ(out.routes[1].requests_user, 9u);
}

TEST_F(BusMessage, StatsJsonNestsRoutesAndCounters)
{
    StatsSnapshot s = sample_stats();
    s.routes.resize(1);
    s.routes[0].user_latency = {3, 0, 1};
    s.routes[0].user_latency_sum_ns = 2500000;
    s.routes[0].user_codes = {{"200", 3}, {"504", 1}};
    s.routes[0].kernel_codes = {{"200", 990}, {"404", 7}, {"4xx", 3}};
    ASSERT_GE(codec::append_stats(m_, s), 0);
    seal();
    EXPECT_EQ(json(),
              R"({"generation":3,"requests_kernel":1000,"requests_user":14,"no_route":4,"routes":[)"
              R"({"name":"api","placement":"kernel","requests_kernel":1000,"requests_user":5,)"
              R"("responses":{"1xx":11,"2xx":12,"3xx":13,"4xx":14,"5xx":15,"other":10},)"
              R"("bytes_in":1048576,"bytes_out":12884901888,"latency_buckets":[0,1,2,3],)"
              R"("rejected":{"jwt_missing":0,"jwt_invalid":0,"rbac_denied":0,"rate_limited":0},)"
              R"("rbac_denied_by_rule":{},"direct_responses":0,"user_latency_buckets":[3,0,1],)"
              R"("user_latency_sum_ns":2500000,"user_codes":{"200":3,"504":1},)"
              R"("kernel_codes":{"200":990,"404":7,"4xx":3}}],"endpoints":[],)"
              R"("counters":{"requests_kernel":1000,"to_slow_path_no_route":4},"refused":{}})");
    sd_bus_message_rewind(m_, 1);
    StatsSnapshot out;
    ASSERT_GE(codec::read_stats(m_, &out), 0);
    ASSERT_EQ(out.routes.size(), 1u);
    EXPECT_EQ(out.routes[0].user_latency, s.routes[0].user_latency);
    EXPECT_EQ(out.routes[0].user_latency_sum_ns, 2500000u);
    EXPECT_EQ(out.routes[0].user_codes, s.routes[0].user_codes);
    EXPECT_EQ(out.routes[0].kernel_codes, s.routes[0].kernel_codes);
}

TEST_F(BusMessage, StatsRefusalsAndRbacRulesRoundTrip)
{
    StatsSnapshot in;
    in.refused = {{"bad_request:bare_lf", 3}, {"request_timeout", 1}};
    RouteStats r;
    r.name = "admin";
    r.rbac_denied = 2;
    r.rbac_denied_by_rule = {{"default", 1}, {"office-only", 1}};
    in.routes.push_back(r);
    ASSERT_GE(codec::append_stats(m_, in), 0);
    seal();
    StatsSnapshot out;
    ASSERT_GE(codec::read_stats(m_, &out), 0);
    EXPECT_EQ(out.refused, in.refused);
    ASSERT_EQ(out.routes.size(), 1u);
    EXPECT_EQ(out.routes[0].rbac_denied, 2u);
    EXPECT_EQ(out.routes[0].rbac_denied_by_rule, r.rbac_denied_by_rule);
}

TEST_F(BusMessage, StatsEndpointsRoundTripAndJson)
{
    StatsSnapshot in;
    in.generation = 1;
    EndpointStats e;
    e.address = "127.0.0.1:9001";
    e.clusters = "app,canary";
    e.requests_kernel = 7;
    e.requests_user = 2;
    e.status[2] = 8;
    e.status[5] = 1;
    e.bytes_out = 900;
    e.latency = {1, 0, 8};
    e.kernel_idle = 4;
    e.kernel_busy = 1;
    e.user_idle = 2;
    e.user_busy = 3;
    e.state = "drained+ejected";
    e.checked = true;
    e.checks_passed = 9;
    e.checks_failed = 2;
    e.last_check = "status 503";
    e.ejections_5xx = 1;
    e.ejections_connect = 4;
    e.ejected_for_ms = 1500;
    in.endpoints.push_back(e);
    ASSERT_GE(codec::append_stats(m_, in), 0);
    seal();
    StatsSnapshot out;
    ASSERT_GE(codec::read_stats(m_, &out), 0);
    ASSERT_EQ(out.endpoints.size(), 1u);
    const EndpointStats& o = out.endpoints[0];
    EXPECT_EQ(o.address, e.address);
    EXPECT_EQ(o.clusters, e.clusters);
    EXPECT_EQ(o.requests_kernel, 7u);
    EXPECT_EQ(o.requests_user, 2u);
    for (int i = 0; i < L7_STATUS_CLASSES; i++)
        EXPECT_EQ(o.status[i], e.status[i]) << i;
    EXPECT_EQ(o.bytes_out, 900u);
    EXPECT_EQ(o.latency, e.latency);
    EXPECT_EQ(o.kernel_idle, 4u);
    EXPECT_EQ(o.kernel_busy, 1u);
    EXPECT_EQ(o.user_idle, 2u);
    EXPECT_EQ(o.user_busy, 3u);
    EXPECT_EQ(o.state, "drained+ejected");
    EXPECT_TRUE(o.checked);
    EXPECT_EQ(o.checks_passed, 9u);
    EXPECT_EQ(o.checks_failed, 2u);
    EXPECT_EQ(o.last_check, "status 503");
    EXPECT_EQ(o.ejections_5xx, 1u);
    EXPECT_EQ(o.ejections_connect, 4u);
    EXPECT_EQ(o.ejected_for_ms, 1500u);
    sd_bus_message_rewind(m_, 1);
    EXPECT_EQ(json(),
              R"({"generation":1,"requests_kernel":0,"requests_user":0,"no_route":0,"routes":[],"endpoints":[)"
              R"({"address":"127.0.0.1:9001","clusters":"app,canary","requests_kernel":7,"requests_user":2,)"
              R"("responses":{"1xx":0,"2xx":8,"3xx":0,"4xx":0,"5xx":1,"other":0},"bytes_out":900,)"
              R"("latency_buckets":[1,0,8],"kernel_idle":4,"kernel_busy":1,"user_idle":2,"user_busy":3,)"
              R"("state":"drained+ejected","checked":true,"checks_passed":9,"checks_failed":2,)"
              R"("last_check":"status 503","ejections_5xx":1,"ejections_connect_failure":4,"ejected_for_ms":1500}],)"
              R"("counters":{},"refused":{}})");
}

TEST_F(BusMessage, RoutesRoundTripInOrder)
{
    const auto in = sample_routes();
    ASSERT_GE(codec::append_routes(m_, in), 0);
    seal();
    EXPECT_STREQ(sd_bus_message_get_signature(m_, 1), "aa{sv}");
    std::vector<RouteInfo> out;
    ASSERT_GE(codec::read_routes(m_, &out), 0);
    ASSERT_EQ(out.size(), 2u);
    expect_route_eq(out[0], in[0]);
    expect_route_eq(out[1], in[1]);
}

TEST_F(BusMessage, EmptyRouteListRoundTrips)
{
    ASSERT_GE(codec::append_routes(m_, {}), 0);
    seal();
    std::vector<RouteInfo> out{RouteInfo{}};
    ASSERT_GE(codec::read_routes(m_, &out), 0);
    EXPECT_TRUE(out.empty());
}

// l7fastctl check --json builds route objects from structs; they must carry
// exactly the keys of ListRoutes' dictionaries.
TEST_F(BusMessage, RouteJsonFromStructsMatchesTheWire)
{
    const auto routes = sample_routes();
    ASSERT_GE(codec::append_routes(m_, routes), 0);
    seal();
    JsonWriter w;
    w.begin_array();
    for (const auto& r : routes)
        route_json(w, r);
    w.end_array();
    EXPECT_EQ(json(), w.str());
}

TEST_F(BusMessage, CheckOutcomeRoundTrips)
{
    CheckOutcome in;
    in.ok = true;
    in.placement = sample_routes();
    const CheckOutcome out = round_trip(in, codec::append_check, codec::read_check, "bsaa{sv}");
    EXPECT_TRUE(out.ok);
    EXPECT_EQ(out.errors, "");
    ASSERT_EQ(out.placement.size(), 2u);
    expect_route_eq(out.placement[1], in.placement[1]);
    EXPECT_EQ(out.routes, 2u);
    EXPECT_EQ(out.routes_kernel, 1u);
}

TEST_F(BusMessage, LogLevelRoundTrips)
{
    LogLevelOutcome in;
    in.ok = true;
    in.level = "warning";
    in.source = "command line";
    const LogLevelOutcome out = round_trip(in, codec::append_log_level, codec::read_log_level, "ss");
    EXPECT_TRUE(out.ok);
    EXPECT_EQ(out.level, "warning");
    EXPECT_EQ(out.source, "command line");
}

TEST_F(BusMessage, ReloadOutcomeRoundTrips)
{
    ASSERT_GE(codec::append_reload(m_, {false, 41, "p.toml:3:1: route \"a\": bad"}), 0);
    seal();
    EXPECT_STREQ(sd_bus_message_get_signature(m_, 1), "bts");
    ReloadOutcome out;
    ASSERT_GE(codec::read_reload(m_, &out), 0);
    EXPECT_FALSE(out.ok);
    EXPECT_EQ(out.generation, 41u);
    EXPECT_EQ(out.error, "p.toml:3:1: route \"a\": bad");
}

// sd-bus refuses strings that are not UTF-8; a policy error quoting a byte
// of a binary file must still get through, as U+FFFD.
TEST_F(BusMessage, InvalidUtf8IsReplacedNotRefused)
{
    ASSERT_GE(codec::append_reload(m_, {false, 1, "p.toml:1:1: saw '\xff'"}), 0);
    seal();
    ReloadOutcome out;
    ASSERT_GE(codec::read_reload(m_, &out), 0);
    EXPECT_EQ(out.error, "p.toml:1:1: saw '\xef\xbf\xbd'");
}

// A newer daemon may add keys, or change a key's type: older readers skip
// what they do not understand instead of failing or misreading.
TEST_F(BusMessage, UnknownKeysAndUnexpectedTypesAreSkipped)
{
    ASSERT_GE(sd_bus_message_append(m_, "a{sv}", 4, "version", "s", "9.9", "future", "a(ii)", 2, 1, 2, 3, 4,
                                    "generation", "s", "not a number", "routes", "u", 12u),
              0);
    seal();
    StatusInfo out;
    ASSERT_GE(codec::read_status(m_, &out), 0);
    EXPECT_EQ(out.version, "9.9");
    EXPECT_EQ(out.generation, 0u);
    EXPECT_EQ(out.routes, 12u);
}

TEST_F(BusMessage, ReadingTheWrongShapeFails)
{
    ASSERT_GE(sd_bus_message_append(m_, "s", "hello"), 0);
    seal();
    StatusInfo out;
    EXPECT_LT(codec::read_status(m_, &out), 0);
}

TEST_F(BusMessage, FeaturesAreAStringMap)
{
    ASSERT_GE(codec::append_features(m_, {{"a", "1"}, {"b", "2"}}), 0);
    seal();
    EXPECT_STREQ(sd_bus_message_get_signature(m_, 1), "a{ss}");
    EXPECT_EQ(json(), R"({"a":"1","b":"2"})");
}

TEST_F(BusMessage, JsonOfStructsArraysAndNumbers)
{
    ASSERT_GE(sd_bus_message_append(m_, "(bxd)", 1, int64_t{-5}, 0.5), 0);
    ASSERT_GE(sd_bus_message_append(m_, "a{it}", 1, 7, uint64_t{18446744073709551615ull}), 0);
    seal();
    EXPECT_EQ(json(), "[true,-5,0.5]");
    EXPECT_EQ(json(), R"({"7":18446744073709551615})");
}
