// The HTTP/1.1 head parser and body framer shared by the kernel and the slow
// path (bpf/include/l7_http.h), exercised natively: acceptance rules with
// their exact statuses and reasons, and framing under arbitrary splits.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <memory>
#include <random>
#include <string>

#include "proxy/Http.hpp"

using l7fast::proxy::BodyFramer;
using l7fast::proxy::origin_form_head;
using l7fast::proxy::parse_head;

namespace {

struct Parsed {
    int status;  // enum l7_parse_status
    l7_msg m;
};

Parsed req(const std::string& s)
{
    Parsed p{};
    p.status = parse_head({s.data(), s.size()}, true, &p.m);
    return p;
}

Parsed resp(const std::string& s)
{
    Parsed p{};
    p.status = parse_head({s.data(), s.size()}, false, &p.m);
    return p;
}

std::string field(const std::string& head, const l7_msg& m, unsigned i, bool value)
{
    const l7_hdr& h = m.hdr[i];
    return value ? head.substr(h.val_off, h.val_len) : head.substr(h.name_off, h.name_len);
}

std::string part(const std::string& s, unsigned off, unsigned len)
{
    return s.substr(off, len);
}

// Which stages decide a head: stage 1, then the fast stages on their own
// (L7_P_SLOW: they leave it to the strict ones).
int fast_stages(const std::string& s, bool is_request)
{
    auto ws = std::make_unique<l7_ws>();
    std::memcpy(ws->buf, s.data(), s.size());
    ws->len = static_cast<__u32>(s.size());
    l7_msg_reset(&ws->msg);
    int st = l7_step_lines(ws.get());
    return st == L7_P_OK ? l7_step_fast(ws.get(), is_request ? 1 : 0) : st;
}

bool same_result(const std::string& s, bool is_request)
{
    l7_msg a{}, b{};
    int sa = parse_head({s.data(), s.size()}, is_request, &a);
    int sb = parse_head({s.data(), s.size()}, is_request, &b, true);
    return sa == sb && std::memcmp(&a, &b, offsetof(l7_msg, line_end)) == 0 &&
           std::memcmp(a.line_end, b.line_end, a.n_lines * sizeof a.line_end[0]) == 0 &&
           std::memcmp(a.hdr, b.hdr, a.n_hdrs * sizeof a.hdr[0]) == 0;
}

}  // namespace

TEST(HttpParser, ParsesARequestHead)
{
    std::string s = "GET /a/b?x=1 HTTP/1.1\r\nHost: Example.COM:8080\r\nX-A:  v w  \r\n\r\nBODY";
    Parsed p = req(s);
    ASSERT_EQ(p.status, L7_P_OK);
    EXPECT_EQ(p.m.method, L7_M_GET);
    EXPECT_EQ(p.m.version, 11);
    EXPECT_EQ(p.m.hdr_len, s.size() - 4);
    EXPECT_EQ(s.substr(p.m.target_off, p.m.target_len), "/a/b?x=1");
    EXPECT_EQ(p.m.path_len, 4);
    EXPECT_TRUE(p.m.flags & L7_MF_HAS_QUERY);
    ASSERT_EQ(p.m.n_hdrs, 2);
    EXPECT_EQ(field(s, p.m, 1, false), "X-A");
    EXPECT_EQ(field(s, p.m, 1, true), "v w");  // OWS trimmed, inner space kept
    ASSERT_NE(p.m.host_idx, L7_NONE);
    EXPECT_EQ(p.m.host_len, 11);  // "Example.COM" without the port
    EXPECT_EQ(p.m.body_kind, L7_BODY_NONE);
    EXPECT_FALSE(p.m.flags & L7_MF_CLOSE);
}

TEST(HttpParser, RecognisesMethods)
{
    const std::pair<const char*, int> cases[] = {
        {"GET", L7_M_GET},         {"HEAD", L7_M_HEAD},       {"POST", L7_M_POST},
        {"PUT", L7_M_PUT},         {"DELETE", L7_M_DELETE},   {"PATCH", L7_M_PATCH},
        {"OPTIONS", L7_M_OPTIONS}, {"TRACE", L7_M_TRACE},     {"PURGE", L7_M_OTHER},
        {"get", L7_M_OTHER},  // methods are case-sensitive
    };
    for (const auto& [name, id] : cases) {
        Parsed p = req(std::string(name) + " / HTTP/1.1\r\nHost: h\r\n\r\n");
        ASSERT_EQ(p.status, L7_P_OK) << name;
        EXPECT_EQ(p.m.method, id) << name;
    }
}

TEST(HttpParser, FramesBodies)
{
    Parsed cl = req("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 12\r\n\r\n");
    ASSERT_EQ(cl.status, L7_P_OK);
    EXPECT_EQ(cl.m.body_kind, L7_BODY_LENGTH);
    EXPECT_EQ(cl.m.content_length, 12u);
    Parsed zero = req("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n");
    EXPECT_EQ(zero.m.body_kind, L7_BODY_NONE);
    Parsed ch = req("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: Chunked\r\n\r\n");
    ASSERT_EQ(ch.status, L7_P_OK);
    EXPECT_EQ(ch.m.body_kind, L7_BODY_CHUNKED);
}

TEST(HttpParser, ConnectionSemantics)
{
    EXPECT_TRUE(req("GET / HTTP/1.1\r\nHost: h\r\nConnection: keep-alive, Close\r\n\r\n").m.flags &
                L7_MF_CLOSE);
    EXPECT_TRUE(req("GET / HTTP/1.0\r\n\r\n").m.flags & L7_MF_CLOSE);
    // optional whitespace around elements, empty elements (RFC 9110 5.6.1)
    const Parsed list = req("GET / HTTP/1.1\r\nHost: h\r\nConnection: \tupgrade ,, keep-alive\t,close\r\n\r\n");
    ASSERT_EQ(list.status, L7_P_OK);
    EXPECT_EQ(list.m.flags & (L7_MF_UPGRADE | L7_MF_KEEP_ALIVE | L7_MF_CLOSE),
              unsigned{L7_MF_UPGRADE | L7_MF_KEEP_ALIVE | L7_MF_CLOSE});
    EXPECT_FALSE(req("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").m.flags & L7_MF_CLOSE);
    EXPECT_TRUE(req("GET / HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
                    .m.flags &
                L7_MF_UPGRADE);
    EXPECT_TRUE(req("PUT / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n")
                    .m.flags &
                L7_MF_EXPECT_100);
    EXPECT_TRUE(req("PUT / HTTP/1.1\r\nHost: h\r\nExpect: something\r\n\r\n").m.flags &
                L7_MF_EXPECT_OTHER);
}

TEST(HttpParser, IncompleteHeadsAskForMore)
{
    EXPECT_EQ(req("").status, L7_P_MORE);
    EXPECT_EQ(req("GET / HTTP/1.1\r\nHost: h\r\n").status, L7_P_MORE);
    EXPECT_EQ(req("GET / HTTP/1.1\r\nHost: h\r\n\r").status, L7_P_MORE);
}

struct Rejection {
    const char* name;
    std::string head;
    int status;
    int error;
};

class HttpRejects : public ::testing::TestWithParam<Rejection> {};

TEST_P(HttpRejects, WithThePreciseStatus)
{
    const Rejection& r = GetParam();
    Parsed p = req(r.head);
    ASSERT_EQ(p.status, L7_P_ERROR) << r.name;
    EXPECT_EQ(p.m.status, r.status) << r.name;
    EXPECT_EQ(p.m.error, r.error) << r.name;
}

INSTANTIATE_TEST_SUITE_P(
    SmugglingAndMalformedShapes, HttpRejects,
    ::testing::Values(
        Rejection{"te_and_cl", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", 400, L7_PE_TE_AND_CL},
        Rejection{"cl_and_te", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", 400, L7_PE_TE_AND_CL},
        Rejection{"dup_cl", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n", 400, L7_PE_DUP_CONTENT_LENGTH},
        Rejection{"cl_list", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3, 3\r\n\r\n", 400, L7_PE_BAD_CONTENT_LENGTH},
        Rejection{"cl_sign", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: +3\r\n\r\n", 400, L7_PE_BAD_CONTENT_LENGTH},
        Rejection{"cl_overflow", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1234567890123456789\r\n\r\n", 400, L7_PE_BAD_CONTENT_LENGTH},
        Rejection{"te_gzip", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501, L7_PE_UNKNOWN_CODING},
        Rejection{"te_chunked_twice", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked, chunked\r\n\r\n", 501, L7_PE_UNKNOWN_CODING},
        Rejection{"te_dup_lines", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 400, L7_PE_DUP_TRANSFER_ENCODING},
        Rejection{"te_http10", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400, L7_PE_TE_HTTP10},
        Rejection{"obs_fold", "GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n b\r\n\r\n", 400, L7_PE_OBS_FOLD},
        Rejection{"space_before_colon", "GET / HTTP/1.1\r\nHost : h\r\n\r\n", 400, L7_PE_BAD_NAME},
        Rejection{"empty_name", "GET / HTTP/1.1\r\nHost: h\r\n: v\r\n\r\n", 400, L7_PE_BAD_NAME},
        Rejection{"no_colon", "GET / HTTP/1.1\r\nHost: h\r\nX\r\n\r\n", 400, L7_PE_NO_COLON},
        Rejection{"bare_lf", "GET / HTTP/1.1\nHost: h\r\n\r\n", 400, L7_PE_BARE_LF},
        Rejection{"bare_cr", "GET / HTTP/1.1\r\nHost: h\rX: y\r\n\r\n", 400, L7_PE_BARE_CR},
        Rejection{"nul_in_value", std::string("GET / HTTP/1.1\r\nHost: h\r\nX: a\0b\r\n\r\n", 37), 400, L7_PE_CTL},
        Rejection{"del_in_value", "GET / HTTP/1.1\r\nHost: h\r\nX: a\x7f\r\n\r\n", 400, L7_PE_CTL},
        Rejection{"no_host", "GET / HTTP/1.1\r\n\r\n", 400, L7_PE_NO_HOST},
        Rejection{"dup_host", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, L7_PE_DUP_HOST},
        Rejection{"bad_host", "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", 400, L7_PE_BAD_HOST},
        Rejection{"host_userinfo", "GET / HTTP/1.1\r\nHost: evil@good\r\n\r\n", 400, L7_PE_BAD_HOST},
        Rejection{"double_space", "GET  / HTTP/1.1\r\nHost: h\r\n\r\n", 400, L7_PE_BAD_TARGET},
        // absolute-form is accepted (HttpParser.AcceptsAbsoluteForm), these are not
        Rejection{"absolute_empty_authority", "GET http:///x HTTP/1.1\r\nHost: h\r\n\r\n", 400, L7_PE_BAD_TARGET},
        Rejection{"absolute_empty_authority_no_path", "GET http:// HTTP/1.1\r\nHost: h\r\n\r\n", 400, L7_PE_BAD_TARGET},
        Rejection{"absolute_port_only", "GET http://:80/ HTTP/1.1\r\nHost: h\r\n\r\n", 400, L7_PE_BAD_TARGET},
        Rejection{"absolute_userinfo", "GET http://u:p@h/ HTTP/1.1\r\nHost: h\r\n\r\n", 400, L7_PE_BAD_TARGET},
        Rejection{"absolute_bad_port", "GET http://h:8x/ HTTP/1.1\r\nHost: h\r\n\r\n", 400, L7_PE_BAD_TARGET},
        Rejection{"absolute_two_colons", "GET http://h:1:2/ HTTP/1.1\r\nHost: h\r\n\r\n", 400, L7_PE_BAD_TARGET},
        Rejection{"absolute_open_ip_literal", "GET http://[::1/ HTTP/1.1\r\nHost: h\r\n\r\n", 400, L7_PE_BAD_TARGET},
        Rejection{"absolute_fragment", "GET http://h#f/ HTTP/1.1\r\nHost: h\r\n\r\n", 400, L7_PE_BAD_TARGET},
        Rejection{"absolute_backslash", "GET http://h\\x/ HTTP/1.1\r\nHost: h\r\n\r\n", 400, L7_PE_BAD_TARGET},
        Rejection{"absolute_high_bit_authority", "GET http://h\x80/ HTTP/1.1\r\nHost: h\r\n\r\n", 400, L7_PE_BAD_TARGET},
        Rejection{"absolute_high_bit_path", "GET http://h/\x80 HTTP/1.1\r\nHost: h\r\n\r\n", 400, L7_PE_BAD_TARGET},
        Rejection{"absolute_authority_256", "GET http://" + std::string(256, 'a') + "/ HTTP/1.1\r\nHost: h\r\n\r\n", 400, L7_PE_BAD_TARGET},
        Rejection{"absolute_one_slash", "GET http:/h/ HTTP/1.1\r\nHost: h\r\n\r\n", 400, L7_PE_BAD_TARGET},
        Rejection{"absolute_other_scheme", "GET ftp://h/ HTTP/1.1\r\nHost: h\r\n\r\n", 400, L7_PE_BAD_TARGET},
        Rejection{"absolute_scheme_prefix", "GET httpx://h/ HTTP/1.1\r\nHost: h\r\n\r\n", 400, L7_PE_BAD_TARGET},
        Rejection{"absolute_https", "GET https://h/ HTTP/1.1\r\nHost: h\r\n\r\n", 421, L7_PE_HTTPS_TARGET},
        Rejection{"absolute_https_upper", "GET HTTPS://h/ HTTP/1.1\r\nHost: h\r\n\r\n", 421, L7_PE_HTTPS_TARGET},
        // Host is still required, once and valid (RFC 9112 3.2), even
        // though the authority overrides it
        Rejection{"absolute_no_host", "GET http://h/ HTTP/1.1\r\n\r\n", 400, L7_PE_NO_HOST},
        Rejection{"absolute_bad_host", "GET http://h/ HTTP/1.1\r\nHost: a b\r\n\r\n", 400, L7_PE_BAD_HOST},
        Rejection{"absolute_dup_host", "GET http://h/ HTTP/1.1\r\nHost: h\r\nHost: h\r\n\r\n", 400, L7_PE_DUP_HOST},
        Rejection{"absolute_http2", "GET http://h/ HTTP/2.0\r\nHost: h\r\n\r\n", 505, L7_PE_VERSION_UNSUPPORTED},
        Rejection{"authority_form", "CONNECT h:443 HTTP/1.1\r\nHost: h:443\r\n\r\n", 400, L7_PE_BAD_TARGET},
        Rejection{"asterisk_not_options", "GET * HTTP/1.1\r\nHost: h\r\n\r\n", 400, L7_PE_BAD_TARGET},
        Rejection{"asterisk_and_more", "OPTIONS *x HTTP/1.1\r\nHost: h\r\n\r\n", 400, L7_PE_BAD_TARGET},
        Rejection{"target_high_bit", "GET /\x80 HTTP/1.1\r\nHost: h\r\n\r\n", 400, L7_PE_BAD_TARGET},
        Rejection{"target_tab", "GET /\t HTTP/1.1\r\nHost: h\r\n\r\n", 400, L7_PE_BAD_TARGET},
        Rejection{"bad_method", "G(T / HTTP/1.1\r\nHost: h\r\n\r\n", 400, L7_PE_BAD_METHOD},
        Rejection{"http2", "GET / HTTP/2.0\r\nHost: h\r\n\r\n", 505, L7_PE_VERSION_UNSUPPORTED},
        Rejection{"bad_version", "GET / HTTX/1.1\r\nHost: h\r\n\r\n", 400, L7_PE_BAD_VERSION},
        Rejection{"lowercase_version", "GET / http/1.1\r\nHost: h\r\n\r\n", 400, L7_PE_BAD_VERSION},
        Rejection{"empty_line_first", "\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n", 400, L7_PE_EMPTY_LINE_FIRST},
        Rejection{"bad_connection", "GET / HTTP/1.1\r\nHost: h\r\nConnection: close;x\r\n\r\n", 400, L7_PE_BAD_CONNECTION},
        // found by fuzz_http_parse: whitespace is not a list separator
        Rejection{"connection_space_list", "GET / HTTP/1.1\r\nHost: h\r\nConnection: + close    x\r\n\r\n", 400, L7_PE_BAD_CONNECTION},
        Rejection{"connection_two_tokens", "GET / HTTP/1.1\r\nHost: h\r\nConnection: keep-alive close\r\n\r\n", 400, L7_PE_BAD_CONNECTION}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(HttpParser, AcceptsAbsoluteForm)
{
    // RFC 9112 3.2.2: the target's authority and path are recorded; Host
    // is parsed as usual (the slow path replaces it by the authority)
    const std::string s = "GET HTTP://Example.COM:8080/a/b?x=1 HTTP/1.1\r\nHost: other.example\r\n\r\n";
    Parsed p = req(s);
    ASSERT_EQ(p.status, L7_P_OK);
    EXPECT_EQ(p.m.flags & (L7_MF_ABSOLUTE_FORM | L7_MF_HAS_QUERY | L7_MF_PATH_NOT_NORMAL),
              unsigned{L7_MF_ABSOLUTE_FORM | L7_MF_HAS_QUERY});
    EXPECT_EQ(part(s, p.m.target_off, p.m.target_len), "HTTP://Example.COM:8080/a/b?x=1");
    EXPECT_EQ(part(s, p.m.auth_off, p.m.auth_len), "Example.COM:8080");
    EXPECT_EQ(p.m.auth_host_len, 11);
    EXPECT_EQ(part(s, p.m.path_off, p.m.path_len), "/a/b");
    ASSERT_EQ(p.m.host_idx, 0);
    EXPECT_EQ(p.m.host_len, 13);  // "other.example": Host is parsed as usual

    struct Case {
        std::string head, authority, path;
        unsigned host_len, flags;
    };
    const Case cases[] = {
        // no path: the path is "/" (RFC 9110 4.2.3), recorded as empty
        {"GET http://h HTTP/1.1\r\nHost: h\r\n\r\n", "h", "", 1, 0},
        {"GET hTtP://h?q=1 HTTP/1.1\r\nHost: h\r\n\r\n", "h", "", 1, L7_MF_HAS_QUERY},
        {"OPTIONS http://h HTTP/1.1\r\nHost: h\r\n\r\n", "h", "", 1, 0},
        {"GET http://[::1]:80/x HTTP/1.1\r\nHost: h\r\n\r\n", "[::1]:80", "/x", 5, 0},
        {"GET http://h:/x HTTP/1.1\r\nHost: h\r\n\r\n", "h:", "/x", 1, 0},  // an empty port, as in Host
        {"GET http://h/a?b/c HTTP/1.1\r\nHost: h\r\n\r\n", "h", "/a", 1, L7_MF_HAS_QUERY},
        // the path's shape is the path's: "//" after the scheme does not count
        {"GET http://h//a/../b HTTP/1.1\r\nHost: h\r\n\r\n", "h", "//a/../b", 1, L7_MF_PATH_NOT_NORMAL},
        {"GET http://h/%61 HTTP/1.1\r\nHost: h\r\n\r\n", "h", "/%61", 1, L7_MF_PATH_NOT_NORMAL},
        // HTTP/1.0 needs no Host: the authority is the host
        {"GET http://h/x HTTP/1.0\r\n\r\n", "h", "/x", 1, L7_MF_HTTP10 | L7_MF_CLOSE},
        {"POST http://" + std::string(255, 'a') + "/ HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\n",
         std::string(255, 'a'), "/", 255, L7_MF_HAS_CL},
    };
    for (const Case& c : cases) {
        Parsed q = req(c.head);
        ASSERT_EQ(q.status, L7_P_OK) << c.head;
        EXPECT_EQ(q.m.flags & ~unsigned{L7_MF_KEEP_ALIVE}, L7_MF_ABSOLUTE_FORM | c.flags) << c.head;
        EXPECT_EQ(part(c.head, q.m.auth_off, q.m.auth_len), c.authority) << c.head;
        EXPECT_EQ(q.m.auth_host_len, c.host_len) << c.head;
        EXPECT_EQ(q.m.path_off, q.m.auth_off + q.m.auth_len) << c.head;
        EXPECT_EQ(part(c.head, q.m.path_off, q.m.path_len), c.path) << c.head;
        EXPECT_TRUE(same_result(c.head, true)) << c.head;
    }

    // origin-form and "*": the path is the target's start, no authority
    for (const std::string& o : {std::string("GET /a?b HTTP/1.1\r\nHost: h\r\n\r\n"),
                                 std::string("OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n"),
                                 std::string("GET /x:y@z HTTP/1.1\r\nHost: h\r\n\r\n")}) {
        Parsed q = req(o);
        ASSERT_EQ(q.status, L7_P_OK) << o;
        EXPECT_FALSE(q.m.flags & L7_MF_ABSOLUTE_FORM) << o;
        EXPECT_EQ(q.m.path_off, q.m.target_off) << o;
        EXPECT_EQ(q.m.auth_off + q.m.auth_len + q.m.auth_host_len, 0) << o;
    }
}

TEST(HttpParser, AbsoluteFormIsForwardedInOriginForm)
{
    struct Case {
        std::string in, out;
    };
    const Case cases[] = {
        // Host replaced by the authority, port and case as in the target
        {"GET http://A.example:8080/p?q=1 HTTP/1.1\r\nX-A: 1\r\nHost:  other \r\nX-B: 2\r\n\r\n",
         "GET /p?q=1 HTTP/1.1\r\nX-A: 1\r\nHost:  A.example:8080 \r\nX-B: 2\r\n\r\n"},
        // an empty path is "/"; for OPTIONS with no query, "*" (RFC 9112 3.2.4)
        {"GET http://a HTTP/1.1\r\nHost: a\r\n\r\n", "GET / HTTP/1.1\r\nHost: a\r\n\r\n"},
        {"GET http://a?x HTTP/1.1\r\nHost: a\r\n\r\n", "GET /?x HTTP/1.1\r\nHost: a\r\n\r\n"},
        {"OPTIONS http://a HTTP/1.1\r\nHost: a\r\n\r\n", "OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n"},
        {"OPTIONS http://a?x HTTP/1.1\r\nHost: a\r\n\r\n", "OPTIONS /?x HTTP/1.1\r\nHost: a\r\n\r\n"},
        {"OPTIONS http://a/ HTTP/1.1\r\nHost: a\r\n\r\n", "OPTIONS / HTTP/1.1\r\nHost: a\r\n\r\n"},
        // HTTP/1.0 without Host: one is added after the request line
        {"GET http://[::1]:81/x HTTP/1.0\r\nX: y\r\n\r\n", "GET /x HTTP/1.0\r\nHost: [::1]:81\r\nX: y\r\n\r\n"},
        {"GET http://h/x HTTP/1.0\r\n\r\n", "GET /x HTTP/1.0\r\nHost: h\r\n\r\n"},
        // the path as received: the slow path normalises what it routes
        {"GET http://h//a/./b HTTP/1.1\r\nHost: h\r\n\r\n", "GET //a/./b HTTP/1.1\r\nHost: h\r\n\r\n"},
    };
    for (const Case& c : cases) {
        Parsed p = req(c.in);
        ASSERT_EQ(p.status, L7_P_OK) << c.in;
        ASSERT_TRUE(p.m.flags & L7_MF_ABSOLUTE_FORM) << c.in;
        const std::string out = origin_form_head(c.in, p.m);
        EXPECT_EQ(out, c.out);
        // the result is an origin-form request whose Host is the authority
        Parsed o = req(out);
        ASSERT_EQ(o.status, L7_P_OK) << out;
        EXPECT_FALSE(o.m.flags & L7_MF_ABSOLUTE_FORM);
        ASSERT_NE(o.m.host_idx, L7_NONE);
        EXPECT_EQ(field(out, o.m, o.m.host_idx, true), part(c.in, p.m.auth_off, p.m.auth_len));
        EXPECT_EQ(o.m.host_len, p.m.auth_host_len);
        EXPECT_EQ(o.m.flags & L7_MF_PATH_NOT_NORMAL, p.m.flags & L7_MF_PATH_NOT_NORMAL);
    }
}

TEST(HttpParser, OversizedHeadsAre431)
{
    std::string many = "GET / HTTP/1.1\r\nHost: h\r\n";
    for (int i = 0; i < L7_MAX_LINES; i++)
        many += "X-" + std::to_string(i) + ": v\r\n";
    Parsed p = req(many + "\r\n");
    ASSERT_EQ(p.status, L7_P_ERROR);
    EXPECT_EQ(p.m.status, 431);

    std::string huge = "GET / HTTP/1.1\r\nHost: h\r\nX: " + std::string(L7_WS_BUF, 'a');
    Parsed q = req(huge);
    ASSERT_EQ(q.status, L7_P_ERROR);
    EXPECT_EQ(q.m.status, 431);
    EXPECT_EQ(q.m.error, L7_PE_TOO_LARGE);
}

TEST(HttpParser, ParsesResponses)
{
    Parsed ok = resp("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello");
    ASSERT_EQ(ok.status, L7_P_OK);
    EXPECT_EQ(ok.m.status, 200);
    EXPECT_EQ(ok.m.body_kind, L7_BODY_LENGTH);

    Parsed bare = resp("HTTP/1.1 204\r\n\r\n");  // no reason phrase, no SP
    ASSERT_EQ(bare.status, L7_P_OK);
    EXPECT_EQ(bare.m.status, 204);

    Parsed old = resp("HTTP/1.0 200 OK\r\n\r\n");
    ASSERT_EQ(old.status, L7_P_OK);
    EXPECT_EQ(old.m.body_kind, L7_BODY_UNTIL_CLOSE);

    Parsed bad = resp("HTTP/1.1 2x0 OK\r\n\r\n");
    ASSERT_EQ(bad.status, L7_P_ERROR);
    EXPECT_EQ(bad.m.status, 502);

    Parsed smuggle = resp("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n");
    ASSERT_EQ(smuggle.status, L7_P_ERROR);
    EXPECT_EQ(smuggle.m.status, 502);
}

TEST(HttpParser, ResponseBodyDependsOnTheRequest)
{
    for (int code : {100, 103, 204, 304}) {
        Parsed p = resp("HTTP/1.1 " + std::to_string(code) + " X\r\nContent-Length: 10\r\n\r\n");
        ASSERT_EQ(p.status, L7_P_OK);
        l7_response_body(&p.m, 0);
        EXPECT_EQ(p.m.body_kind, L7_BODY_NONE) << code;
    }
    Parsed head = resp("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n");
    l7_response_body(&head.m, 1);
    EXPECT_EQ(head.m.body_kind, L7_BODY_NONE);
    Parsed until = resp("HTTP/1.1 200 OK\r\n\r\n");
    l7_response_body(&until.m, 0);
    EXPECT_EQ(until.m.body_kind, L7_BODY_UNTIL_CLOSE);
    EXPECT_TRUE(until.m.flags & L7_MF_CLOSE);
}

// ---- body framing ------------------------------------------------------------

namespace {

// Feeds `bytes` in pieces cut at `cuts`; returns bytes that belonged to the
// body, or -1 on a framing error.
long feed_split(BodyFramer f, const std::string& bytes, std::mt19937& rng, bool* done)
{
    size_t pos = 0;
    long body = 0;
    while (pos < bytes.size() && !f.done()) {
        size_t n = 1 + rng() % std::min<size_t>(bytes.size() - pos, 50);
        long k = f.feed({bytes.data() + pos, n});
        if (k < 0)
            return -1;
        body += k;
        if (static_cast<size_t>(k) < n && !f.done())
            return -1;  // the framer must take all it is given unless done
        pos += static_cast<size_t>(k);
    }
    *done = f.done();
    return body;
}

}  // namespace

TEST(BodyFramer, ChunkedWithExtensionsAndTrailers)
{
    std::string body = "5;ext=1\r\nhello\r\n10\r\n0123456789abcdef\r\n0\r\nTrailer: x\r\n\r\n";
    std::mt19937 rng(1);
    for (int i = 0; i < 200; i++) {
        bool done = false;
        EXPECT_EQ(feed_split(BodyFramer(L7_BODY_CHUNKED, 0), body + "NEXT", rng, &done),
                  static_cast<long>(body.size()));
        EXPECT_TRUE(done);
    }
}

TEST(BodyFramer, LengthStopsExactly)
{
    BodyFramer f(L7_BODY_LENGTH, 7);
    std::string s = "abcdefgNEXT";
    EXPECT_EQ(f.feed({s.data(), 3}), 3);
    EXPECT_EQ(f.feed({s.data() + 3, s.size() - 3}), 4);
    EXPECT_TRUE(f.done());
}

TEST(BodyFramer, RejectsMalformedChunking)
{
    const char* bad[] = {
        "x\r\n",                         // not hex
        "\r\n",                          // no size
        "5\nhello\r\n",                  // bare LF after size
        "5\r\nhelloX\r\n",               // data longer than the size
        "1000000000000000\r\n",          // 16 hex digits: could overflow
        "5;a\nb\r\nhello\r\n",           // LF inside an extension
        "0\r\nbad trailer\r\n\r\n",      // trailer line without a field name start
    };
    for (const char* b : bad) {
        BodyFramer f(L7_BODY_CHUNKED, 0);
        std::string s(b);
        EXPECT_EQ(f.feed({s.data(), s.size()}), -1) << b;
    }
}


TEST(HttpParserFast, PlainHeadsAreDecidedWordAtATime)
{
    for (const std::string& s : {
             std::string("GET /svc0009/item HTTP/1.1\r\nHost: bench.example\r\nUser-Agent: wrk\r\nAccept: */*\r\n"
                         "X-Tenant: gold\r\nX-User: alice\r\n\r\n"),
             std::string("POST /api?x=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nContent-Length: 12\r\n"
                         "Connection: keep-alive\r\n\r\nhello world!"),
             std::string("HEAD / HTTP/1.0\r\nConnection: close\r\nhost:h\r\n\r\n"),
             std::string("DELETE /a/b/c HTTP/1.1\r\nHost: a.example:\r\nX-Empty:\r\nX-Tab:\tv\r\n\r\n"),
             std::string("POST /up HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"),
             std::string("PUT /up HTTP/1.1\r\ntransfer-encoding:CHUNKED\r\nHost: h\r\n\r\n"),
         }) {
        EXPECT_EQ(fast_stages(s, true), L7_P_OK) << s;
        EXPECT_TRUE(same_result(s, true)) << s;
    }
    const std::string r = "HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nDate: Tue, 01 Dec 2026 21:00:00 GMT\r\n"
                          "Content-Type: text/plain\r\nContent-Length: 3\r\nConnection: keep-alive\r\n\r\nok\n";
    EXPECT_EQ(fast_stages(r, false), L7_P_OK);
    EXPECT_TRUE(same_result(r, false));
    const std::string chunked = "HTTP/1.1 200 OK\r\nServer: gunicorn\r\nTransfer-Encoding: chunked\r\n"
                                "Content-Type: application/json\r\n\r\n3\r\nok\n\r\n0\r\n\r\n";
    EXPECT_EQ(fast_stages(chunked, false), L7_P_OK);
    EXPECT_TRUE(same_result(chunked, false));
    l7_msg m{};
    ASSERT_EQ(parse_head({chunked.data(), chunked.size()}, false, &m), L7_P_OK);
    EXPECT_EQ(m.body_kind, L7_BODY_CHUNKED);
}

TEST(HttpParserFast, EverythingElseIsLeftToTheStrictStages)
{
    // each is one shape the fast stages do not decide; the strict stages
    // then decide it (accepted or refused) exactly as they would alone
    for (const std::string& s : {
             std::string("get / HTTP/1.1\r\nHost: h\r\n\r\n"),             // unknown method token
             std::string("GET * HTTP/1.1\r\nHost: h\r\n\r\n"),             // not origin-form
             std::string("GET http://h/ HTTP/1.1\r\nHost: h\r\n\r\n"),     // absolute-form
             std::string("GET https://h/ HTTP/1.1\r\nHost: h\r\n\r\n"),    // (421)
             std::string("GET /a b HTTP/1.1\r\nHost: h\r\n\r\n"),          // SP in the target
             std::string("GET / HTTP/2.0\r\nHost: h\r\n\r\n"),             // another version (505)
             std::string("GET / HTTP/1.1\r\nX_A: v\r\nHost: h\r\n\r\n"),    // a tchar outside [A-Za-z0-9-]
             std::string("GET / HTTP/1.1\r\nX-A : v\r\nHost: h\r\n\r\n"),   // space before the colon (400)
             std::string("GET / HTTP/1.1\r\nX-A:  v\r\nHost: h\r\n\r\n"),   // two spaces of OWS
             std::string("GET / HTTP/1.1\r\nX-A: v \r\nHost: h\r\n\r\n"),   // trailing OWS
             std::string("GET / HTTP/1.1\r\n X-A: v\r\nHost: h\r\n\r\n"),   // obsolete folding (400)
             std::string("GET / HTTP/1.1\r\nHost: [::1]:80\r\n\r\n"),       // IP literal
             std::string("GET / HTTP/1.1\r\nHost: a:b\r\n\r\n"),            // a port that is no number (400)
             std::string("GET / HTTP/1.1\r\nHost: h\r\nHost: h\r\n\r\n"),   // Host twice (400)
             std::string("GET / HTTP/1.1\r\nHost: h\r\nConnection: close, x\r\n\r\n"),  // a token list
             std::string("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\n"),  // (501)
             std::string("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked, chunked\r\n\r\n"),
             std::string("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n"
                         "Transfer-Encoding: chunked\r\n\r\n"),  // twice (400)
             std::string("GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n"),
             std::string("GET / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\n\r\n"),
             std::string("GET / HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\n\r\n"),
             std::string("GET / HTTP/1.1\r\nX-A-Very-Long-Header-Name-Beyond-Sixty-Four-Bytes-Of-Letters-Only: v\r\n"
                         "Host: h\r\n\r\n"),
         }) {
        EXPECT_EQ(fast_stages(s, true), L7_P_SLOW) << s;
        EXPECT_TRUE(same_result(s, true)) << s;
    }
}

TEST(HttpParserFast, AgreesWithTheStrictStagesOnGeneratedHeads)
{
    // the fuzzers do this at length (http_parse, http_diff); here a fixed
    // sample of mutations of plain heads, every one compared field by field
    std::mt19937 rng(7);
    const std::string bases[] = {
        "GET /svc/item?q=1 HTTP/1.1\r\nHost: bench.example:8080\r\nUser-Agent: wrk\r\n"
        "Content-Length: 4\r\nConnection: close\r\nX-User: alice\r\n\r\nbody",
        "POST /svc/up HTTP/1.1\r\nHost: bench.example\r\nTransfer-Encoding: chunked\r\n"
        "Connection: keep-alive\r\n\r\n4\r\nbody\r\n0\r\n\r\n",
    };
    const char alphabet[] = " \t:/?#@[]\\-_.%AZaz09\r\n\x7f\x80";
    unsigned fast = 0;
    for (int i = 0; i < 20000; i++) {
        std::string s = bases[i % 2];
        int edits = 1 + static_cast<int>(rng() % 3);
        for (int e = 0; e < edits; e++) {
            size_t at = rng() % s.size();
            char c = alphabet[rng() % (sizeof alphabet - 1)];
            switch (rng() % 3) {
            case 0: s[at] = c; break;
            case 1: s.insert(at, 1, c); break;
            default: s.erase(at, 1); break;
            }
        }
        ASSERT_TRUE(same_result(s, true)) << s;
        fast += fast_stages(s, true) == L7_P_OK;
    }
    EXPECT_GT(fast, 1000u) << "the sample should exercise the fast stages";
}

TEST(HttpParserFast, PathShapesAgreeAcrossWordBoundaries)
{
    // The fast stages judge a path's shape (//, . and .. segments, escapes)
    // from masks of whole words, carrying the last bytes of one word into
    // the next. Paths of plain segments with at most a few odd ones among
    // them, of every length, put each shape at every offset of a word:
    // each must come out as the strict stages say.
    const char* odd[] = {"", ".", "..", "...", ".a", "a.", "%2e", "\\", "a%41"};
    std::mt19937 rng(11);
    unsigned not_normal = 0, fast = 0, total = 0;
    for (int i = 0; i < 60000; i++) {
        std::string path;
        const int segs = 1 + static_cast<int>(rng() % 4);
        for (int k = 0; k < segs; k++) {
            path += '/';
            if (rng() % 4)
                path += std::string(rng() % 10, 'a' + static_cast<char>(rng() % 26));
            else
                path += odd[rng() % (sizeof odd / sizeof *odd)];
        }
        if (rng() % 3 == 0)
            path += rng() % 2 ? "/" : "?q=1";
        const std::string s = "GET " + path + " HTTP/1.1\r\nHost: h\r\n\r\n";
        ASSERT_TRUE(same_result(s, true)) << s;
        l7_msg m{};
        total++;
        if (parse_head({s.data(), s.size()}, true, &m) == L7_P_OK && (m.flags & L7_MF_PATH_NOT_NORMAL))
            not_normal++;
        fast += fast_stages(s, true) == L7_P_OK;
    }
    // both kinds of path, all decided by the fast stages themselves
    EXPECT_GT(not_normal, total / 10);
    EXPECT_LT(not_normal, total / 2);
    EXPECT_EQ(fast, total);
}
