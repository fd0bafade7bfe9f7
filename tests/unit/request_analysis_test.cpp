// The slow path's analysis (proxy/RequestAnalysis.hpp) without a socket: a
// parsed head in, one outcome out — refused, answered by l7fast, answered
// by the policy, or forwarded with which endpoints and which head — and
// what it counts on the way.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <sys/socket.h>

#include <string>
#include <variant>

#include "proxy/ProxyServer.hpp"
#include "proxy/RequestAnalysis.hpp"
#include "semantics/Router.hpp"

using namespace l7fast;
using namespace l7fast::proxy;

namespace {

policy::SocketAddress addr(const char* text)
{
    std::string why;
    auto a = policy::SocketAddress::parse(text, &why);
    EXPECT_TRUE(a) << why;
    return *a;
}

std::shared_ptr<PolicyRuntime> runtime()
{
    policy::Policy p;
    p.listeners.push_back({"web", addr("127.0.0.1:8080"), {}});
    policy::Cluster app;
    app.name = "app";
    app.endpoints = {{addr("127.0.0.1:9001"), 1}, {addr("127.0.0.1:9002"), 1}, {addr("127.0.0.1:9003"), 1}};
    p.clusters.push_back(app);
    policy::Route api;
    api.name = "api";
    api.match.path_kind = policy::PathMatch::Prefix;
    api.match.path = "/api";
    api.clusters = {{"app", 1}};
    api.request_headers.set = {{"x-a", "1"}};
    api.connect_retries = 1;
    api.timeout = std::chrono::milliseconds(250);
    p.routes.push_back(api);
    policy::Route hello;
    hello.name = "hello";
    hello.match.path_kind = policy::PathMatch::Exact;
    hello.match.path = "/hello";
    hello.direct_response = policy::DirectResponse{200, {}, "hi\n"};
    p.routes.push_back(hello);

    auto rt = std::make_shared<PolicyRuntime>();
    rt->router = std::make_shared<policy::Router>(std::move(p));
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

class RequestAnalysisTest : public ::testing::Test {
protected:
    // `bytes`: the head and whatever of the body came with it
    Analysed analyse_bytes(std::string bytes)
    {
        Analysed a;
        a.bytes = std::move(bytes);
        EXPECT_EQ(parse_head({a.bytes.data(), a.bytes.size()}, true, &a.m), L7_P_OK) << a.bytes;
        a.ex = std::make_unique<RequestExchange>(rt, a.m, std::span<const char>(a.bytes.data(), a.bytes.size()));
        a.outcome = analyse(*a.ex, server, client_key(), addr("127.0.0.1:8080"));
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
    const auto* an = std::get_if<Answer>(&a.outcome);
    ASSERT_NE(an, nullptr);
    EXPECT_EQ(an->status, 404);
    EXPECT_EQ(an->text, "no route\n");
    EXPECT_FALSE(an->close);
    EXPECT_EQ(a.ex->record->reason(), "no_route");
    EXPECT_EQ(server.user_requests_no_route(), 1u);

    Analysed b = analyse_bytes("POST /other HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc");
    an = std::get_if<Answer>(&b.outcome);
    ASSERT_NE(an, nullptr);
    EXPECT_TRUE(an->close);
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
    const auto* an = std::get_if<Answer>(&a.outcome);
    ASSERT_NE(an, nullptr);
    EXPECT_EQ(an->status, 400);
    EXPECT_EQ(an->text, "malformed chunked body\n");
    EXPECT_TRUE(an->close);
    EXPECT_STREQ(an->why, "malformed chunked body");
}

}  // namespace
