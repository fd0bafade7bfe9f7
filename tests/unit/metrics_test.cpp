// Prometheus exposition of the stats snapshot, the metrics endpoint's HTTP
// handling, and the access log's line format and rate cap.
#include <gtest/gtest.h>

#include <ctime>

#include "common/Log.hpp"
#include "control/Metrics.hpp"
#include "l7_common.h"
#include "proxy/AccessLog.hpp"
#include "proxy/ProxyServer.hpp"

using namespace l7fast;
using control::MetricsServer;

namespace {

control::StatsSnapshot sample_snapshot()
{
    control::StatsSnapshot s;
    s.generation = 3;
    control::RouteStats r;
    r.name = "api";
    r.kernel = true;
    r.requests_kernel = 5;
    r.requests_user = 2;
    r.status[2] = 6;
    r.status[5] = 1;
    r.bytes_in = 700;
    r.bytes_out = 9000;
    r.latency.assign(L7_LAT_BUCKETS, 0);
    r.latency[0] = 1;
    r.latency[3] = 4;
    r.latency[15] = 2;
    r.rbac_denied = 1;
    r.rbac_denied_by_rule = {{"admins-only", 1}};
    r.direct_responses = 1;
    s.routes.push_back(r);
    s.counters = {{"requests_kernel", 5}, {"to_slow_path_route_user", 2}};
    s.requests_kernel = 5;
    s.requests_user = 2;
    s.no_route = 4;
    s.refused = {{"bad_request:encoded_slash", 2}, {"request_timeout", 1}};
    return s;
}

}  // namespace

TEST(Metrics, ExactExpositionOfASnapshot)
{
    const char* expected = R"(# HELP l7fast_build_info l7fastd version (the value is always 1).
# TYPE l7fast_build_info gauge
l7fast_build_info{version="1.2.3"} 1
# HELP l7fast_policy_generation Policy generation in force (one more on every successful reload).
# TYPE l7fast_policy_generation gauge
l7fast_policy_generation 3
# HELP l7fast_route_info Where a route of the policy in force runs: placement kernel or user (the slow path).
# TYPE l7fast_route_info gauge
l7fast_route_info{route="api",placement="kernel"} 1
# HELP l7fast_route_requests_total Requests matched to the route, by the plane that handled them: kernel (the data plane) or user (the slow path).
# TYPE l7fast_route_requests_total counter
l7fast_route_requests_total{route="api",plane="kernel"} 5
l7fast_route_requests_total{route="api",plane="user"} 2
# HELP l7fast_route_responses_total Responses to the route's requests, by status class (other: no valid status).
# TYPE l7fast_route_responses_total counter
l7fast_route_responses_total{route="api",class="1xx"} 0
l7fast_route_responses_total{route="api",class="2xx"} 6
l7fast_route_responses_total{route="api",class="3xx"} 0
l7fast_route_responses_total{route="api",class="4xx"} 0
l7fast_route_responses_total{route="api",class="5xx"} 1
l7fast_route_responses_total{route="api",class="other"} 0
# HELP l7fast_route_request_bytes_total Request bytes received from clients (heads and Content-Length bodies).
# TYPE l7fast_route_request_bytes_total counter
l7fast_route_request_bytes_total{route="api"} 700
# HELP l7fast_route_response_bytes_total Response bytes sent to clients.
# TYPE l7fast_route_response_bytes_total counter
l7fast_route_response_bytes_total{route="api"} 9000
# HELP l7fast_route_response_latency_seconds Time from a request's arrival to the end of its response, in log2 buckets (no _sum: the data plane counts buckets only).
# TYPE l7fast_route_response_latency_seconds histogram
l7fast_route_response_latency_seconds_bucket{route="api",le="0.000002048"} 1
l7fast_route_response_latency_seconds_bucket{route="api",le="0.000004096"} 1
l7fast_route_response_latency_seconds_bucket{route="api",le="0.000008192"} 1
l7fast_route_response_latency_seconds_bucket{route="api",le="0.000016384"} 5
l7fast_route_response_latency_seconds_bucket{route="api",le="0.000032768"} 5
l7fast_route_response_latency_seconds_bucket{route="api",le="0.000065536"} 5
l7fast_route_response_latency_seconds_bucket{route="api",le="0.000131072"} 5
l7fast_route_response_latency_seconds_bucket{route="api",le="0.000262144"} 5
l7fast_route_response_latency_seconds_bucket{route="api",le="0.000524288"} 5
l7fast_route_response_latency_seconds_bucket{route="api",le="0.001048576"} 5
l7fast_route_response_latency_seconds_bucket{route="api",le="0.002097152"} 5
l7fast_route_response_latency_seconds_bucket{route="api",le="0.004194304"} 5
l7fast_route_response_latency_seconds_bucket{route="api",le="0.008388608"} 5
l7fast_route_response_latency_seconds_bucket{route="api",le="0.016777216"} 5
l7fast_route_response_latency_seconds_bucket{route="api",le="0.033554432"} 5
l7fast_route_response_latency_seconds_bucket{route="api",le="+Inf"} 7
l7fast_route_response_latency_seconds_count{route="api"} 7
# HELP l7fast_route_rejections_total Requests the route's policy refused, by reason (answered by l7fastd).
# TYPE l7fast_route_rejections_total counter
l7fast_route_rejections_total{route="api",reason="jwt_missing"} 0
l7fast_route_rejections_total{route="api",reason="jwt_invalid"} 0
l7fast_route_rejections_total{route="api",reason="rbac_denied"} 1
l7fast_route_rejections_total{route="api",reason="rate_limited"} 0
# HELP l7fast_route_rbac_denials_total Requests the route's RBAC rules denied, by the deciding rule ("default": no rule held).
# TYPE l7fast_route_rbac_denials_total counter
l7fast_route_rbac_denials_total{route="api",rule="admins-only"} 1
# HELP l7fast_route_direct_responses_total Requests answered with the route's direct response.
# TYPE l7fast_route_direct_responses_total counter
l7fast_route_direct_responses_total{route="api"} 1
# HELP l7fast_requests_no_route_total Requests that matched no route (answered 404 by the slow path).
# TYPE l7fast_requests_no_route_total counter
l7fast_requests_no_route_total 4
# HELP l7fast_requests_refused_total Requests l7fast refused itself (400 malformed, 408, 417, 501), by reason (bad_request:<cause>, ...).
# TYPE l7fast_requests_refused_total counter
l7fast_requests_refused_total{reason="bad_request:encoded_slash"} 2
l7fast_requests_refused_total{reason="request_timeout"} 1
# HELP l7fast_dataplane_events_total Kernel data-plane counters (l7fastctl stats, DATA PLANE).
# TYPE l7fast_dataplane_events_total counter
l7fast_dataplane_events_total{event="requests_kernel"} 5
# HELP l7fast_dataplane_to_slow_path_total Requests the kernel data plane handed to the slow path, by reason.
# TYPE l7fast_dataplane_to_slow_path_total counter
l7fast_dataplane_to_slow_path_total{reason="route_user"} 2
)";
    EXPECT_EQ(control::render_prometheus(sample_snapshot(), "1.2.3"), expected);
}

TEST(Metrics, LabelValuesAreEscaped)
{
    EXPECT_EQ(control::prometheus_label_value("plain-name_1"), "plain-name_1");
    EXPECT_EQ(control::prometheus_label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    auto s = sample_snapshot();
    s.routes[0].name = "we\"ird\\";
    std::string text = control::render_prometheus(s, "v\n1");
    EXPECT_NE(text.find("l7fast_build_info{version=\"v\\n1\"} 1\n"), std::string::npos);
    EXPECT_NE(text.find("l7fast_route_direct_responses_total{route=\"we\\\"ird\\\\\"} 1\n"), std::string::npos);
    // every sample line is one line: no raw line feed inside a label
    for (size_t pos = 0, next; (next = text.find('\n', pos)) != std::string::npos; pos = next + 1) {
        std::string_view line(text.data() + pos, next - pos);
        ASSERT_FALSE(line.empty());
        if (line[0] != '#') {
            size_t sp = line.rfind(' ');
            ASSERT_NE(sp, std::string_view::npos) << line;
        }
    }
}

TEST(Metrics, BucketBoundsAreThoseOfTheDataPlane)
{
    for (unsigned i = 0; i + 1 < L7_LAT_BUCKETS; i++) {
        uint64_t bound = uint64_t{1} << (i + 11);
        EXPECT_EQ(l7_lat_bucket(bound - 1), i) << i;
        EXPECT_EQ(l7_lat_bucket(bound), i + 1) << i;
        // le is the bound in seconds, exactly
        EXPECT_EQ(static_cast<uint64_t>(std::stod(control::latency_bucket_le(i)) * 1e9 + 0.5), bound);
    }
    EXPECT_EQ(control::latency_bucket_le(L7_LAT_BUCKETS - 1), "+Inf");
}

TEST(Metrics, HistogramIsCumulativeAndCountMatchesInf)
{
    auto s = sample_snapshot();
    for (unsigned i = 0; i < L7_LAT_BUCKETS; i++)
        s.routes[0].latency[i] = i + 1;
    std::string text = control::render_prometheus(s, "x");
    uint64_t prev = 0, total = 0;
    for (unsigned i = 0; i < L7_LAT_BUCKETS; i++)
        total += i + 1;
    size_t pos = 0;
    for (unsigned i = 0; i < L7_LAT_BUCKETS; i++) {
        std::string key = "_bucket{route=\"api\",le=\"" + control::latency_bucket_le(i) + "\"} ";
        pos = text.find(key, pos);
        ASSERT_NE(pos, std::string::npos) << key;
        uint64_t v = std::stoull(text.substr(pos + key.size()));
        EXPECT_EQ(v, prev + i + 1);
        prev = v;
    }
    EXPECT_EQ(prev, total);
    EXPECT_NE(text.find("l7fast_route_response_latency_seconds_count{route=\"api\"} " + std::to_string(total) + "\n"),
              std::string::npos);
    EXPECT_EQ(text.find("_seconds_sum"), std::string::npos);  // no sum: the kernel counts buckets only
}

TEST(Metrics, NoDataPlaneCountersWithoutADataPlane)
{
    auto s = sample_snapshot();
    s.counters.clear();
    std::string text = control::render_prometheus(s, "x");
    EXPECT_EQ(text.find("l7fast_dataplane"), std::string::npos);
}

TEST(MetricsHttp, ServesMetricsAndRefusesTheRest)
{
    int calls = 0;
    auto render = [&] {
        calls++;
        return std::string("m 1\n");
    };
    std::string ok = MetricsServer::respond("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", render);
    EXPECT_EQ(ok,
              "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
              "Content-Length: 4\r\nConnection: close\r\n\r\nm 1\n");
    std::string head = MetricsServer::respond("HEAD /metrics?x=1 HTTP/1.0\r\n\r\n", render);
    EXPECT_EQ(head.rfind("HTTP/1.1 200 OK\r\n", 0), 0u);
    EXPECT_NE(head.find("Content-Length: 4\r\n"), std::string::npos);
    EXPECT_EQ(head.substr(head.size() - 4), "\r\n\r\n");
    EXPECT_EQ(calls, 2);

    auto status = [&](std::string_view req) {
        std::string r = MetricsServer::respond(req, render);
        return r.substr(0, r.find("\r\n"));
    };
    EXPECT_EQ(status("GET / HTTP/1.1\r\n\r\n"), "HTTP/1.1 404 Not Found");
    EXPECT_EQ(status("GET /metrics/x HTTP/1.1\r\n\r\n"), "HTTP/1.1 404 Not Found");
    EXPECT_EQ(status("POST /metrics HTTP/1.1\r\n\r\n"), "HTTP/1.1 405 Method Not Allowed");
    EXPECT_EQ(status("GET /metrics HTTP/2.0\r\n\r\n"), "HTTP/1.1 400 Bad Request");
    EXPECT_EQ(status("GET  /metrics HTTP/1.1\r\n\r\n"), "HTTP/1.1 400 Bad Request");
    EXPECT_EQ(status("GET metrics HTTP/1.1\r\n\r\n"), "HTTP/1.1 400 Bad Request");
    EXPECT_EQ(status("G(T /metrics HTTP/1.1\r\n\r\n"), "HTTP/1.1 400 Bad Request");
    EXPECT_EQ(status("GET /metrics HTTP/1.1\r\nX: a\x01\r\n\r\n"), "HTTP/1.1 400 Bad Request");
    EXPECT_EQ(status("garbage\r\n\r\n"), "HTTP/1.1 400 Bad Request");
    EXPECT_EQ(calls, 2);
}

TEST(AccessLog, LineFormat)
{
    proxy::AccessEntry e;
    e.client = "127.0.0.1:4242";
    e.method = "GET";
    e.target = "/a?q=\"x\"\\";
    e.route = "api";
    e.status = 200;
    e.bytes_in = 77;
    e.bytes_out = 120;
    e.latency_ns = 85'600;
    EXPECT_EQ(proxy::AccessLog::format(e),
              "access client=127.0.0.1:4242 method=GET target=\"/a?q=\\\"x\\\"\\\\\" route=api status=200 in=77 "
              "out=120 latency_us=85 path=user id=-");
    proxy::AccessEntry k;
    k.client = "[::1]:80";
    k.route = "api";
    k.status = 404;
    k.bytes_out = 5;
    k.latency_ns = 999;
    k.kernel = true;
    EXPECT_EQ(proxy::AccessLog::format(k),
              "access client=[::1]:80 method=- target=- route=api status=404 in=- out=5 latency_us=0 path=kernel id=-");
    // why l7fast answered, when it knows
    e.status = 403;
    e.reason = "rbac_denied:admins-only";
    EXPECT_EQ(proxy::AccessLog::format(e),
              "access client=127.0.0.1:4242 method=GET target=\"/a?q=\\\"x\\\"\\\\\" route=api status=403 in=77 "
              "out=120 latency_us=85 path=user reason=rbac_denied:admins-only id=-");
    e.request_id = "req-7";
    EXPECT_EQ(proxy::AccessLog::format(e),
              "access client=127.0.0.1:4242 method=GET target=\"/a?q=\\\"x\\\"\\\\\" route=api status=403 in=77 "
              "out=120 latency_us=85 path=user reason=rbac_denied:admins-only id=req-7");
}

TEST(AccessLog, RequestIdIsTheClientsWhenItReadsAsOneToken)
{
    using F = l7fast::policy::HeaderField;
    const std::vector<F> ok{{"Host", "h"}, {"X-Request-ID", "abc-123_x.y"}, {"x-request-id", "second"}};
    EXPECT_EQ(proxy::AccessLog::request_id_from(ok), "abc-123_x.y");
    for (const char* bad : {"", "a b", "a\"b", "a\\b", "\x01", "caf\xc3\xa9"})
        EXPECT_EQ(proxy::AccessLog::request_id_from(std::vector<F>{{"X-Request-Id", bad}}), "") << bad;
    EXPECT_EQ(proxy::AccessLog::request_id_from(
                  std::vector<F>{{"X-Request-Id", std::string(proxy::AccessLog::kMaxRequestId + 1, 'a')}}),
              "");
    EXPECT_EQ(proxy::AccessLog::request_id_from(std::vector<F>{{"X-Request", "a"}}), "");
    const std::string made = proxy::AccessLog::make_request_id();
    EXPECT_EQ(made.size(), 16u);
    EXPECT_EQ(made.find_first_not_of("0123456789abcdef"), std::string::npos) << made;
    EXPECT_NE(made, proxy::AccessLog::make_request_id());
}

TEST(AccessLog, JsonLineFormat)
{
    proxy::AccessEntry e;
    e.client = "127.0.0.1:4242";
    e.method = "GET";
    e.authority = "api.example.com";
    e.target = "/a?q=\"x\"\\\x01\xff";
    e.route = "api";
    e.cluster = "app";
    e.endpoint = "127.0.0.1:9001";
    e.status = 403;
    e.reason = "rbac_denied:office";
    e.bytes_in = 77;
    e.bytes_out = 120;
    e.latency_ns = 85'600;
    const auto when = std::chrono::system_clock::time_point(std::chrono::milliseconds(1'796'106'600'123));
    EXPECT_EQ(proxy::AccessLog::format_json(e, when),
              R"({"time":"2026-12-01T06:30:00.123Z","type":"access","request_id":null,"client":"127.0.0.1:4242",)"
              R"("method":"GET",)"
              R"("authority":"api.example.com","target":"/a?q=\"x\"\\\u0001\u00ff","route":"api",)"
              R"("cluster":"app","endpoint":"127.0.0.1:9001","status":403,"reason":"rbac_denied:office",)"
              R"("bytes_in":77,"bytes_out":120,"duration_us":85,"path":"user"})");
    // the kernel path: what it does not know is null
    proxy::AccessEntry k;
    k.client = "[::1]:80";
    k.route = "api";
    k.status = 200;
    k.bytes_out = 5;
    k.latency_ns = 2'000;
    k.kernel = true;
    EXPECT_EQ(proxy::AccessLog::format_json(k, when),
              R"({"time":"2026-12-01T06:30:00.123Z","type":"access","request_id":null,"client":"[::1]:80","method":null,)"
              R"("authority":null,"target":null,"route":"api","cluster":null,"endpoint":null,"status":200,)"
              R"("reason":null,"bytes_in":null,"bytes_out":5,"duration_us":2,"path":"kernel"})");
}

TEST(AccessLog, TargetIsBoundedAndEscaped)
{
    std::string long_target(1000, 'a');
    std::string t = proxy::AccessLog::escape_target(long_target);
    EXPECT_EQ(t, std::string(proxy::AccessLog::kMaxTarget, 'a') + "...");
    EXPECT_EQ(proxy::AccessLog::escape_target("/\x01\x7f\xff"), "/\\x01\\x7f\\xff");
}

TEST(AccessLog, SamplesOneInN)
{
    proxy::AccessLog log;
    int n = 0;
    for (int i = 0; i < 100; i++)
        n += log.sampled();
    EXPECT_EQ(n, 0);
    log.set_sample(10);
    for (int i = 0; i < 100; i++)
        n += log.sampled();
    EXPECT_EQ(n, 10);
    log.set_sample(1);
    for (int i = 0; i < 100; i++)
        n += log.sampled();
    EXPECT_EQ(n, 110);
}

TEST(AccessLog, CapsLinesPerSecondAndCountsDrops)
{
    const auto level = log::level();
    log::set_level(log::Level::Error);  // the lines themselves are not the point here
    proxy::AccessLog log;
    proxy::AccessEntry e;
    e.client = "1.2.3.4:5";
    auto t0 = std::chrono::steady_clock::now();
    for (uint32_t i = 0; i < proxy::AccessLog::kMaxLinesPerSecond + 50; i++)
        log.write(e, t0);
    EXPECT_EQ(log.dropped(), 50u);
    log.write(e, t0 + std::chrono::milliseconds(1001));  // a new second
    EXPECT_EQ(log.dropped(), 50u);
    l7fast::log::set_level(level);
}

TEST(Metrics, EndpointFamilies)
{
    auto s = sample_snapshot();
    control::EndpointStats ep;
    ep.address = "[::1]:9001";
    ep.clusters = "app,canary";
    ep.requests_kernel = 3;
    ep.requests_user = 1;
    ep.status[2] = 4;
    ep.bytes_out = 512;
    ep.latency.assign(L7_LAT_BUCKETS, 0);
    ep.latency[2] = 4;
    ep.kernel_idle = 5;
    ep.kernel_busy = 2;
    ep.user_idle = 1;
    ep.user_busy = 0;
    ep.state = "drained+unhealthy";
    ep.checked = true;
    ep.checks_passed = 7;
    ep.checks_failed = 3;
    ep.ejections_5xx = 2;
    s.endpoints.push_back(ep);
    control::EndpointStats plain;
    plain.address = "10.0.0.1:80";
    plain.clusters = "app";
    plain.latency.assign(L7_LAT_BUCKETS, 0);
    s.endpoints.push_back(plain);
    std::string text = control::render_prometheus(s, "x");
    for (const char* line : {
             "l7fast_endpoint_info{endpoint=\"[::1]:9001\",cluster=\"app\"} 1\n",
             "l7fast_endpoint_info{endpoint=\"[::1]:9001\",cluster=\"canary\"} 1\n",
             "l7fast_endpoint_requests_total{endpoint=\"[::1]:9001\",plane=\"kernel\"} 3\n",
             "l7fast_endpoint_requests_total{endpoint=\"[::1]:9001\",plane=\"user\"} 1\n",
             "l7fast_endpoint_responses_total{endpoint=\"[::1]:9001\",class=\"2xx\"} 4\n",
             "l7fast_endpoint_response_bytes_total{endpoint=\"[::1]:9001\"} 512\n",
             "l7fast_endpoint_response_latency_seconds_bucket{endpoint=\"[::1]:9001\",le=\"0.000004096\"} 0\n",
             "l7fast_endpoint_response_latency_seconds_bucket{endpoint=\"[::1]:9001\",le=\"0.000008192\"} 4\n",
             "l7fast_endpoint_response_latency_seconds_bucket{endpoint=\"[::1]:9001\",le=\"+Inf\"} 4\n",
             "l7fast_endpoint_response_latency_seconds_count{endpoint=\"[::1]:9001\"} 4\n",
             "# TYPE l7fast_endpoint_response_latency_seconds histogram\n",
             "l7fast_endpoint_connections{endpoint=\"[::1]:9001\",pool=\"kernel\",state=\"idle\"} 5\n"
             "l7fast_endpoint_connections{endpoint=\"[::1]:9001\",pool=\"kernel\",state=\"busy\"} 2\n"
             "l7fast_endpoint_connections{endpoint=\"[::1]:9001\",pool=\"user\",state=\"idle\"} 1\n"
             "l7fast_endpoint_connections{endpoint=\"[::1]:9001\",pool=\"user\",state=\"busy\"} 0\n",
             "l7fast_endpoint_up{endpoint=\"[::1]:9001\"} 0\nl7fast_endpoint_up{endpoint=\"10.0.0.1:80\"} 1\n",
             "l7fast_endpoint_out{endpoint=\"[::1]:9001\",reason=\"drained\"} 1\n"
             "l7fast_endpoint_out{endpoint=\"[::1]:9001\",reason=\"unhealthy\"} 1\n"
             "l7fast_endpoint_out{endpoint=\"[::1]:9001\",reason=\"ejected\"} 0\n"
             "l7fast_endpoint_out{endpoint=\"10.0.0.1:80\",reason=\"drained\"} 0\n",
             "# TYPE l7fast_endpoint_health_checks_total counter\n"
             "l7fast_endpoint_health_checks_total{endpoint=\"[::1]:9001\",result=\"passed\"} 7\n"
             "l7fast_endpoint_health_checks_total{endpoint=\"[::1]:9001\",result=\"failed\"} 3\n"
             "# HELP l7fast_endpoint_ejections_total",
             "l7fast_endpoint_ejections_total{endpoint=\"[::1]:9001\",trigger=\"5xx\"} 2\n"
             "l7fast_endpoint_ejections_total{endpoint=\"[::1]:9001\",trigger=\"connect_failure\"} 0\n"})
        EXPECT_NE(text.find(line), std::string::npos) << line;
}

TEST(Metrics, DaemonStateReloadsAndProcess)
{
    control::StatusInfo st;
    st.state = "degraded";
    st.degraded_reason = "no \"sockmap\"";
    st.applied_unix = 1764600000;
    st.reloads_ok = 3;
    st.reloads_failed = 1;
    st.last_reload_unix = 1764600100;
    st.last_reload_error = "p.toml:1:1: x: bad";
    st.connections = 7;
    st.parked_connections = 2;
    const control::ProcessFigures p{.ok = true, .cpu_seconds = 1.5, .rss_bytes = 4096, .vsize_bytes = 8192,
                                    .open_fds = 12, .max_fds = 1024, .start_time_unix = 1764599000};
    const std::string text = control::render_prometheus(sample_snapshot(), st, p, "1.2.3");
    // the daemon's families first, then the snapshot's, then the process's
    EXPECT_EQ(text.rfind("# HELP l7fast_daemon_state ", 0), 0u) << text;
    for (const char* line : {
             "l7fast_daemon_state{state=\"running\"} 0\nl7fast_daemon_state{state=\"degraded\"} 1\n",
             "l7fast_daemon_degraded_info{reason=\"no \\\"sockmap\\\"\"} 1\n",
             "l7fast_policy_applied_timestamp_seconds 1764600000\n",
             "l7fast_reloads_total{result=\"ok\"} 3\nl7fast_reloads_total{result=\"failed\"} 1\n",
             "l7fast_reload_last_success 0\n",
             "l7fast_reload_last_timestamp_seconds 1764600100\n",
             "l7fast_slow_path_connections 7\n",
             "# TYPE l7fast_parked_connections gauge\nl7fast_parked_connections 2\n",
             "l7fast_build_info{version=\"1.2.3\"} 1\n",
             "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 1.50\n",
             "process_resident_memory_bytes 4096\n",
             "process_virtual_memory_bytes 8192\n",
             "process_open_fds 12\n",
             "process_max_fds 1024\n",
             "process_start_time_seconds 1764599000\n"})
        EXPECT_NE(text.find(line), std::string::npos) << line;
    EXPECT_LT(text.find("l7fast_build_info"), text.find("process_cpu_seconds_total"));

    // running, no reload yet, /proc unreadable: no degraded or last-reload
    // time series, no process families
    st = control::StatusInfo{};
    st.state = "running";
    const std::string plain = control::render_prometheus(sample_snapshot(), st, control::ProcessFigures{}, "x");
    EXPECT_NE(plain.find("l7fast_daemon_state{state=\"running\"} 1\n"), std::string::npos);
    EXPECT_NE(plain.find("l7fast_reload_last_success 1\n"), std::string::npos);
    for (const char* absent : {"l7fast_daemon_degraded_info", "l7fast_reload_last_timestamp_seconds", "process_"})
        EXPECT_EQ(plain.find(absent), std::string::npos) << absent;
}

TEST(Metrics, SlowPathLatencyHasBoundsSumAndCodes)
{
    auto s = sample_snapshot();
    s.user_latency_bounds = {0.001, 0.5, 30};
    s.routes[0].user_latency = {2, 0, 1, 1};  // the last one above 30 s
    s.routes[0].user_latency_sum_ns = 45'250'000'000;
    s.routes[0].user_codes = {{"200", 3}, {"504", 1}};
    const std::string text = control::render_prometheus(s, "x");
    EXPECT_NE(text.find("# TYPE l7fast_route_user_latency_seconds histogram\n"
                        "l7fast_route_user_latency_seconds_bucket{route=\"api\",le=\"0.001\"} 2\n"
                        "l7fast_route_user_latency_seconds_bucket{route=\"api\",le=\"0.5\"} 2\n"
                        "l7fast_route_user_latency_seconds_bucket{route=\"api\",le=\"30\"} 3\n"
                        "l7fast_route_user_latency_seconds_bucket{route=\"api\",le=\"+Inf\"} 4\n"
                        "l7fast_route_user_latency_seconds_sum{route=\"api\"} 45.250000\n"
                        "l7fast_route_user_latency_seconds_count{route=\"api\"} 4\n"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("l7fast_route_user_responses_total{route=\"api\",code=\"200\"} 3\n"
                        "l7fast_route_user_responses_total{route=\"api\",code=\"504\"} 1\n"),
              std::string::npos)
        << text;
}

TEST(Metrics, SlowPathLatencyBuckets)
{
    proxy::UserLatency l;
    l.add(1'000'000);       // 1 ms: on the first bound, in its bucket
    l.add(1'000'001);       // just above: the next one
    l.add(61'000'000'000);  // above a minute
    EXPECT_EQ(l.buckets[0], 1u);
    EXPECT_EQ(l.buckets[1], 1u);
    EXPECT_EQ(l.buckets[std::size(proxy::kUserLatencyBounds)], 1u);
    EXPECT_EQ(l.sum_ns, 61'002'000'001u);
}

TEST(Metrics, ProcessFiguresOfThisProcess)
{
    const control::ProcessFigures p = control::read_process_figures();
    ASSERT_TRUE(p.ok);
    EXPECT_GT(p.rss_bytes, 0u);
    EXPECT_GE(p.vsize_bytes, p.rss_bytes);
    EXPECT_GE(p.open_fds, 3u);  // at least stdin, stdout, stderr (and the directory being listed)
    EXPECT_GE(p.max_fds, p.open_fds);
    EXPECT_GE(p.cpu_seconds, 0.0);
    const uint64_t now = static_cast<uint64_t>(std::time(nullptr));
    EXPECT_LE(p.start_time_unix, now + 1);
    EXPECT_GT(p.start_time_unix, 1600000000u);
}

TEST(Metrics, KernelResponsesByCodeWithTheRestOfEachClassUnderItsName)
{
    auto s = sample_snapshot();
    // L7_KERNEL_CODES' order: l7_code_slot gives each its index, and a code
    // not listed has none
#define L7_SLOT_OF(i, code) EXPECT_EQ(l7_code_slot(code), uint32_t(i)) << code;
    L7_KERNEL_CODES(L7_SLOT_OF)
#undef L7_SLOT_OF
    for (uint32_t st : {0u, 100u, 202u, 418u, 599u, 600u, 65535u})
        EXPECT_EQ(l7_code_slot(st), uint32_t(L7_N_KERNEL_CODES)) << st;

    uint64_t status[L7_STATUS_CLASSES] = {1, 0, 12, 0, 9, 2};  // other, 1xx..5xx
    uint64_t codes[L7_N_KERNEL_CODES] = {};
    codes[l7_code_slot(200)] = 12;
    codes[l7_code_slot(404)] = 4;
    codes[l7_code_slot(429)] = 2;
    codes[l7_code_slot(503)] = 2;
    s.routes[0].kernel_codes = control::kernel_codes(status, codes);
    const std::vector<std::pair<std::string, uint64_t>> want = {
        {"200", 12}, {"404", 4}, {"429", 2}, {"503", 2}, {"4xx", 3}, {"other", 1}};
    EXPECT_EQ(s.routes[0].kernel_codes, want);
    const std::string text = control::render_prometheus(s, "x");
    EXPECT_NE(text.find("# TYPE l7fast_route_kernel_responses_total counter\n"
                        "l7fast_route_kernel_responses_total{route=\"api\",code=\"200\"} 12\n"
                        "l7fast_route_kernel_responses_total{route=\"api\",code=\"404\"} 4\n"
                        "l7fast_route_kernel_responses_total{route=\"api\",code=\"429\"} 2\n"
                        "l7fast_route_kernel_responses_total{route=\"api\",code=\"503\"} 2\n"
                        "l7fast_route_kernel_responses_total{route=\"api\",code=\"4xx\"} 3\n"
                        "l7fast_route_kernel_responses_total{route=\"api\",code=\"other\"} 1\n"),
              std::string::npos)
        << text;
}
