// The slow path's analysis (proxy/RequestAnalysis.hpp) without a socket: a
// parsed head in, one outcome out — refused, answered by l7fast, answered
// by the policy, or forwarded with which endpoints and which head — and
// what it counts on the way.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <sys/socket.h>

#include <string>
#include <variant>

#include "loader/PolicyLoader.hpp"
#include "proxy/ProxyServer.hpp"
#include "proxy/RequestAnalysis.hpp"
#include "semantics/Router.hpp"

using namespace l7fast;
using namespace l7fast::proxy;

namespace {

constexpr const char* kPolicy = R"(
listener = [ { name = "web", address = "127.0.0.1:8080" } ]
cluster = [ { name = "app", endpoints = [ { address = "127.0.0.1:9001" }, { address = "127.0.0.1:9002" },
                                          { address = "127.0.0.1:9003" } ] } ]
[[route]]
name = "api"
cluster = "app"
match = { path_prefix = "/api" }
timeout_ms = 250
connect_retries = 1
[route.request_headers]
set = [ { name = "x-a", value = "1" } ]
[[route]]
name = "hello"
direct_response = { status = 200, body = "hi\n" }
match = { path_exact = "/hello" }
)";

std::shared_ptr<PolicyRuntime> runtime()
{
    auto r = policy::PolicyLoader::load_string(kPolicy, "analysis.toml");
    EXPECT_TRUE(r.ok()) << r.error_text();
    auto rt = std::make_shared<PolicyRuntime>();
    rt->router = std::make_shared<policy::Router>(r.ok() ? std::move(r).policy() : policy::Policy{});
    auto e = build_pipeline_state(*rt, nullptr);
    EXPECT_FALSE(e) << e->str();
    rt->endpoint_pool = {{1, 2, 3}};
    return rt;
}

l7_conn_key client_key()
{
    l7_conn_key k{};
    k.family = AF_INET;
    inet_pton(AF_INET, "127.0.0.1", &k.client_ip[0]);
    inet_pton(AF_INET, "127.0.0.1", &k.server_ip[0]);
    k.client_port = 40000;
    k.server_port = 8080;
    return k;
}

struct Analysed {
    l7_msg m{};
    std::string bytes;
    std::unique_ptr<RequestExchange> ex;
    Outcome outcome;
};

void expect_answer(const Outcome& outcome, int status, std::string_view text, bool close,
                   std::string_view why = "closing")
{
    const auto* an = std::get_if<Answer>(&outcome);
    ASSERT_NE(an, nullptr);
    EXPECT_EQ(an->status, status);
    EXPECT_EQ(an->text, text);
    EXPECT_EQ(an->close, close);
    EXPECT_EQ(an->why, why);
}

class RequestAnalysisTest : public ::testing::Test {
protected:
    // `bytes`: the head and whatever of the body came with it
    Analysed analyse_bytes(std::string bytes)
    {
        Analysed a;
        a.bytes = std::move(bytes);
        EXPECT_EQ(parse_head({a.bytes.data(), a.bytes.size()}, true, &a.m), L7_P_OK) << a.bytes;
        a.ex = std::make_unique<RequestExchange>(rt, a.m, std::span<const char>(a.bytes.data(), a.bytes.size()));
        a.outcome = analyse(*a.ex, server, client_key(), rt->policy().listeners.at(0).address);
        return a;
    }

    asio::io_context io;
    ProxyServer server{io, nullptr, false};
    std::shared_ptr<PolicyRuntime> rt = runtime();
};

TEST_F(RequestAnalysisTest, RefusesAnUnknownExpectationBeforeAnyRoute)
{
    Analysed a = analyse_bytes("GET /api/x HTTP/1.1\r\nHost: a\r\nExpect: later\r\n\r\n");
    const auto* r = std::get_if<Refuse>(&a.outcome);
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(r->status, 417);
    EXPECT_EQ(r->reason, "unsupported:expect");
    EXPECT_FALSE(a.ex->record);  // refuse() keeps its own record
    EXPECT_EQ(a.ex->method, "GET");
    EXPECT_EQ(a.ex->target, "/api/x");
}

TEST_F(RequestAnalysisTest, NoRouteIsA404ThatClosesWhenABodyWasNotRead)
{
    Analysed a = analyse_bytes("GET /other HTTP/1.1\r\nHost: a\r\n\r\n");
    expect_answer(a.outcome, 404, "no route\n", false);
    EXPECT_EQ(a.ex->record->reason(), "no_route");
    EXPECT_EQ(server.user_requests_no_route(), 1u);

    Analysed b = analyse_bytes("POST /other HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc");
    expect_answer(b.outcome, 404, "no route\n", true);
    EXPECT_EQ(server.user_requests_no_route(), 2u);
}

TEST_F(RequestAnalysisTest, ThePolicysOwnAnswerIsCountedByVerdict)
{
    Analysed a = analyse_bytes("GET /hello HTTP/1.1\r\nHost: a\r\n\r\n");
    const auto* l = std::get_if<Local>(&a.outcome);
    ASSERT_NE(l, nullptr);
    EXPECT_EQ(l->status, 200);
    EXPECT_EQ(a.ex->route->name, "hello");
    EXPECT_EQ(a.ex->verdict.kind, Verdict::Kind::Direct);
    EXPECT_EQ(a.ex->record->reason(), "direct_response");
    EXPECT_EQ(server.user_extras().at("hello").direct_responses, 1u);
    EXPECT_EQ(server.user_counters().at("hello").requests, 1u);
}

TEST_F(RequestAnalysisTest, ForwardsWithTheRewrittenHeadTheRetryEndpointsAndTheRoutesTimeout)
{
    Analysed a = analyse_bytes("GET /api/x HTTP/1.1\r\nHost: a\r\n\r\n");
    const auto* f = std::get_if<Forward>(&a.outcome);
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->cluster->name, "app");
    ASSERT_EQ(f->attempts.size(), 2u);  // the chosen endpoint, then connect_retries = 1 other
    EXPECT_NE(f->attempts[0], f->attempts[1]);
    EXPECT_EQ(f->pools->size(), 3u);
    EXPECT_EQ(f->timeout, std::chrono::milliseconds(250));
    EXPECT_EQ(std::string(f->head), "GET /api/x HTTP/1.1\r\nHost: a\r\nx-a: 1\r\n\r\n");
}

TEST_F(RequestAnalysisTest, AnAbsoluteFormTargetIsRoutedAndForwardedInOriginForm)
{
    Analysed a = analyse_bytes("GET http://b.example/api/y?q HTTP/1.1\r\nHost: a\r\n\r\n");
    const auto* f = std::get_if<Forward>(&a.outcome);
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(a.ex->target, "http://b.example/api/y?q");  // the access log's target
    EXPECT_EQ(a.ex->view.target, "/api/y?q");
    EXPECT_EQ(std::string(f->head), "GET /api/y?q HTTP/1.1\r\nHost: b.example\r\nx-a: 1\r\n\r\n");
}

TEST_F(RequestAnalysisTest, APathNotInNormalFormIsMatchedAndForwardedNormalised)
{
    Analysed a = analyse_bytes("GET /x/../api/%7Ez HTTP/1.1\r\nHost: a\r\n\r\n");
    const auto* f = std::get_if<Forward>(&a.outcome);
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(std::string(f->head), "GET /api/~z HTTP/1.1\r\nHost: a\r\nx-a: 1\r\n\r\n");

    Analysed b = analyse_bytes("GET /api/a%2Fb HTTP/1.1\r\nHost: a\r\n\r\n");
    const auto* r = std::get_if<Refuse>(&b.outcome);
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(r->status, 400);
    EXPECT_EQ(r->reason.rfind("bad_request:", 0), 0u) << r->reason;
}

TEST_F(RequestAnalysisTest, AChunkedBodyAlreadyMalformedIsAnsweredBeforeForwarding)
{
    Analysed a = analyse_bytes("POST /api/x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n");
    expect_answer(a.outcome, 400, "malformed chunked body\n", true, "malformed chunked body");
}

}  // namespace
