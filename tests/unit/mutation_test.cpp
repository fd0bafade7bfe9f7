// Header mutation: byte-exact heads (semantics/Mutation.hpp), the bytes the
// kernel must reproduce.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "semantics/Mutation.hpp"

using namespace l7fast::policy;

namespace {

const std::string kRequest =
    "GET /x?y=1 HTTP/1.1\r\n"
    "Host: a.example\r\n"
    "X-A: 1\r\n"
    "x-b: 2\r\n"
    "X-A: 3\r\n"
    "Accept:  */*\r\n"
    "X-User: forged\r\n"
    "x-ROLE: forged\r\n"
    "\r\n";

}  // namespace

TEST(Mutation, EmptyMutationKeepsTheHead)
{
    EXPECT_EQ(mutate_request_head(kRequest, {}), kRequest);
    EXPECT_EQ(mutate_request_head("GET / HTTP/1.0\r\n\r\n", {}), "GET / HTTP/1.0\r\n\r\n");
}

TEST(Mutation, RemoveSetAddAndForwardedClaimsInTheirOrder)
{
    HeaderMutation m;
    m.remove = {"x-b"};
    m.set = {{"x-a", "new"}, {"x-set", "s"}};
    m.add = {{"x-c", "c1"}, {"x-c", ""}, {"X-A", "again"}};
    const std::vector<ForwardedHeader> fwd{{"x-user", "alice"}, {"x-role", std::nullopt}};
    EXPECT_EQ(mutate_request_head(kRequest, m, fwd),
              "GET /x?y=1 HTTP/1.1\r\n"
              "Host: a.example\r\n"
              "Accept:  */*\r\n"
              "x-a: new\r\n"
              "x-set: s\r\n"
              "x-user: alice\r\n"
              "x-c: c1\r\n"
              "x-c: \r\n"
              "x-a: again\r\n"
              "\r\n");
}

TEST(Mutation, NamesCompareCaseInsensitively)
{
    HeaderMutation m;
    m.remove = {"x-a", "accept"};
    EXPECT_EQ(mutate_request_head(kRequest, m),
              "GET /x?y=1 HTTP/1.1\r\nHost: a.example\r\nx-b: 2\r\nX-User: forged\r\nx-ROLE: forged\r\n\r\n")
        << "every line of a repeated name goes";
}

TEST(Mutation, ForwardedHeadersAreRemovedEvenWithoutAValue)
{
    const std::vector<ForwardedHeader> fwd{{"x-user", std::nullopt}, {"x-role", std::nullopt}};
    EXPECT_EQ(mutate_request_head(kRequest, {}, fwd),
              "GET /x?y=1 HTTP/1.1\r\nHost: a.example\r\nX-A: 1\r\nx-b: 2\r\nX-A: 3\r\nAccept:  */*\r\n\r\n");
}

TEST(Mutation, SetAndAddOnAHeadWithoutFields)
{
    HeaderMutation m;
    m.set = {{"x-s", ""}};
    m.add = {{"x-a", "v\twith tab"}};
    EXPECT_EQ(mutate_request_head("GET / HTTP/1.0\r\n\r\n", m),
              "GET / HTTP/1.0\r\nx-s: \r\nx-a: v\twith tab\r\n\r\n");
}

TEST(Mutation, ResponseHeadKeepsItsStatusLine)
{
    HeaderMutation m;
    m.remove = {"server"};
    m.set = {{"x-frame-options", "DENY"}, {"cache-control", "no-store"}};
    EXPECT_EQ(mutate_response_head("HTTP/1.1 200 OK\r\nServer: x\r\nContent-Length: 2\r\nCache-Control: max-age=60\r\n"
                                   "Cache-Control: public\r\n\r\n",
                                   m),
              "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nx-frame-options: DENY\r\ncache-control: no-store\r\n\r\n");
}

TEST(Mutation, MalformedHeadsAreRefused)
{
    HeaderMutation m;
    m.set = {{"x", "1"}};
    EXPECT_EQ(mutate_request_head("GET / HTTP/1.1\r\nHost: a\r\n", m), std::nullopt) << "no end";
    EXPECT_EQ(mutate_request_head("GET / HTTP/1.1\r\nHost: a\r\n\r\nbody", m), std::nullopt) << "bytes after it";
    EXPECT_EQ(mutate_request_head("GET / HTTP/1.1\r\nHost a\r\n\r\n", m), std::nullopt) << "no colon";
    EXPECT_EQ(mutate_request_head("GET / HTTP/1.1\r\n: a\r\n\r\n", m), std::nullopt) << "no name";
    EXPECT_EQ(mutate_request_head("", m), std::nullopt);
    EXPECT_EQ(mutate_response_head("\r\n\r\n", m), "\r\nx: 1\r\n\r\n") << "an empty start line is the parser's business";
}

TEST(Mutation, ForwardedClaimValues)
{
    JwtProvider p;
    p.forward_claims = {{"sub", "X-User"}, {"n", "x-n"}, {"groups", "x-groups"}, {"obj", "x-obj"},
                        {"evil", "x-evil"},  {"missing", "x-missing"}, {"empty", "x-empty"}};
    Claims c;
    c.members = {{"sub", {"alice"}},         {"n", {"42"}},  {"groups", {"a", "b c"}},
                 {"obj", {}},               {"evil", {"ok", "x\r\nInjected: 1"}}, {"empty", {""}}};
    const std::vector<ForwardedHeader> expected{{"x-user", "alice"},        {"x-n", "42"},
                                                {"x-groups", "a, b c"},     {"x-obj", std::nullopt},
                                                {"x-evil", std::nullopt},  {"x-missing", std::nullopt},
                                                {"x-empty", ""}};
    EXPECT_EQ(forwarded_claim_headers(p, &c), expected);
    const std::vector<ForwardedHeader> none = forwarded_claim_headers(p, nullptr);
    ASSERT_EQ(none.size(), 7u);
    for (const ForwardedHeader& h : none)
        EXPECT_EQ(h.value, std::nullopt) << h.name;
}
