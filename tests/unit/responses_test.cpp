// The bytes of responses l7fast generates itself (semantics/Responses.hpp).
#include <gtest/gtest.h>

#include <string>

#include "semantics/Responses.hpp"
#include "proxy/Http.hpp"

using namespace l7fast::policy;

TEST(Responses, LocalErrors)
{
    const LocalResponse r = local_response(404, "no route\n", false);
    EXPECT_EQ(r.bytes, "HTTP/1.1 404 Not Found\r\ncontent-type: text/plain\r\ncontent-length: 9\r\n\r\nno route\n");
    EXPECT_EQ(r.bytes.substr(r.head_size), "no route\n");
    EXPECT_EQ(local_response(502, "upstream failed\n", true).bytes,
              "HTTP/1.1 502 Bad Gateway\r\ncontent-type: text/plain\r\ncontent-length: 16\r\nconnection: close\r\n\r\n"
              "upstream failed\n");
    EXPECT_EQ(l7fast::proxy::make_response(502, "upstream failed\n", true),
              local_response(502, "upstream failed\n", true).bytes)
        << "one implementation";
}

TEST(Responses, DirectResponse)
{
    DirectResponse d;
    d.status = 200;
    d.body = "pong";
    EXPECT_EQ(direct_response(d, false).bytes,
              "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 4\r\n\r\npong");
    d.status = 418;
    d.headers = {{"content-type", "application/json"}, {"x-a", "1"}, {"x-a", ""}};
    d.body = "{}";
    const LocalResponse r = direct_response(d, true);
    EXPECT_EQ(r.bytes,
              "HTTP/1.1 418 \r\ncontent-type: application/json\r\nx-a: 1\r\nx-a: \r\ncontent-length: 2\r\n"
              "connection: close\r\n\r\n{}")
        << "an unregistered status has an empty reason";
    EXPECT_EQ(r.head_size, r.bytes.size() - 2);
}

TEST(Responses, BodylessStatuses)
{
    DirectResponse d;
    d.status = 204;
    d.headers = {{"access-control-allow-origin", "*"}};
    EXPECT_EQ(direct_response(d, false).bytes, "HTTP/1.1 204 No Content\r\naccess-control-allow-origin: *\r\n\r\n");
    d.status = 304;
    d.body = "ignored";
    const LocalResponse r = direct_response(d, true);
    EXPECT_EQ(r.bytes, "HTTP/1.1 304 Not Modified\r\naccess-control-allow-origin: *\r\nconnection: close\r\n\r\n");
    EXPECT_EQ(r.head_size, r.bytes.size());
}

TEST(Responses, RbacDenial)
{
    Rbac rbac;
    EXPECT_EQ(rbac_denied(rbac, false).bytes,
              "HTTP/1.1 403 Forbidden\r\ncontent-type: text/plain\r\ncontent-length: 10\r\n\r\nforbidden\n");
    rbac.deny_status = 404;
    rbac.deny_body = "";
    EXPECT_EQ(rbac_denied(rbac, true).bytes,
              "HTTP/1.1 404 Not Found\r\ncontent-type: text/plain\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
}

TEST(Responses, Unauthorized)
{
    EXPECT_EQ(unauthorized(false, false).bytes,
              "HTTP/1.1 401 Unauthorized\r\nwww-authenticate: Bearer realm=\"l7fast\"\r\ncontent-type: text/plain\r\n"
              "content-length: 13\r\n\r\nunauthorized\n");
    EXPECT_EQ(unauthorized(true, true).bytes,
              "HTTP/1.1 401 Unauthorized\r\nwww-authenticate: Bearer realm=\"l7fast\", error=\"invalid_token\"\r\n"
              "content-type: text/plain\r\ncontent-length: 13\r\nconnection: close\r\n\r\nunauthorized\n");
}

TEST(Responses, TooManyRequests)
{
    EXPECT_EQ(too_many_requests(1, false).bytes,
              "HTTP/1.1 429 Too Many Requests\r\nretry-after: 1\r\ncontent-type: text/plain\r\ncontent-length: 18\r\n"
              "\r\ntoo many requests\n");
    const auto retry_after = [](uint64_t ms) {
        const std::string b = too_many_requests(ms, true).bytes;
        const size_t at = b.find("retry-after: ") + 13;
        return b.substr(at, b.find('\r', at) - at);
    };
    EXPECT_EQ(retry_after(0), "1");
    EXPECT_EQ(retry_after(999), "1");
    EXPECT_EQ(retry_after(1000), "1");
    EXPECT_EQ(retry_after(1001), "2");
    EXPECT_EQ(retry_after(60000), "60");
    EXPECT_EQ(retry_after(UINT64_MAX), "18446744073709552");
    EXPECT_NE(too_many_requests(5, true).bytes.find("connection: close\r\n\r\n"), std::string::npos);
}

TEST(Responses, ReasonPhrases)
{
    EXPECT_STREQ(reason_phrase(200), "OK");
    EXPECT_STREQ(reason_phrase(413), "Content Too Large");
    EXPECT_STREQ(reason_phrase(451), "Unavailable For Legal Reasons");
    EXPECT_STREQ(reason_phrase(599), "");
}
