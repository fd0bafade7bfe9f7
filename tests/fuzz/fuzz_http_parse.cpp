// The HTTP/1.1 head parser and body framer (bpf/include/l7_http.h, native
// build, as the slow path uses it) on arbitrary bytes.
//
// Input: one control byte, then the message. Control bit 0: response (else
// request); bit 1: the response answers a HEAD; bits 2-7: where the body
// bytes are split when fed to the framer a second time.
//
// Invariants: the result is OK, MORE or ERROR, with an HTTP status on error,
// and exactly what the strict stages alone give (the fast stages are a
// shortcut, never a second opinion);
// a parsed head lies inside the input and ends with the empty line; every
// line end, header name and value lies inside the head, names are tokens
// whose name_hash is the hash of the lower-cased name, values hold no CR/LF
// and no surrounding whitespace; Host, Content-Length and the body kind agree
// with the flags; MORE means no complete head was in the input; parsing the
// head alone gives the same result (the parser never looks past the head);
// the framer never consumes more than it is given and frames the body the
// same way however the bytes are split; an absolute-form target's authority
// is a valid Host value and its origin-form rewrite (what the slow path
// routes and forwards) is the same request with Host set to it.
#include <cstring>
#include <string>
#include <span>
#include <string_view>

#include "FuzzTarget.hpp"
#include "semantics/PathNormalize.hpp"
#include "proxy/Http.hpp"

namespace l7fast::fuzz {
namespace {

bool is_tchar(uint8_t c)
{
    return l7_is_tchar(c);
}

uint32_t name_hash(std::string_view name)
{
    return static_cast<uint32_t>(l7_hash_str(0, name.data(), static_cast<__u32>(name.size()), 1));
}

bool same_msg(const l7_msg& a, const l7_msg& b)
{
    if (a.status != b.status || a.error != b.error || a.method != b.method || a.version != b.version ||
        a.hdr_len != b.hdr_len || a.flags != b.flags || a.target_off != b.target_off ||
        a.target_len != b.target_len || a.path_off != b.path_off || a.path_len != b.path_len ||
        a.auth_off != b.auth_off || a.auth_len != b.auth_len || a.auth_host_len != b.auth_host_len ||
        a.host_idx != b.host_idx ||
        a.host_len != b.host_len || a.n_lines != b.n_lines || a.n_hdrs != b.n_hdrs ||
        a.body_kind != b.body_kind || a.content_length != b.content_length)
        return false;
    if (a.n_lines <= L7_MAX_LINES &&
        std::memcmp(a.line_end, b.line_end, a.n_lines * sizeof a.line_end[0]) != 0)
        return false;
    return a.n_hdrs > L7_MAX_HEADERS || std::memcmp(a.hdr, b.hdr, a.n_hdrs * sizeof a.hdr[0]) == 0;
}

std::string lower(std::string_view s)
{
    std::string out(s);
    for (char& c : out)
        c = static_cast<char>(l7_lower(static_cast<uint8_t>(c)));
    return out;
}

void check_head(std::string_view in, const l7_msg& m, bool is_request)
{
    const uint32_t h = m.hdr_len;
    FUZZ_CHECK(h >= 4 && h <= in.size() && h <= L7_WS_BUF);
    FUZZ_CHECK(in.substr(h - 4, 4) == "\r\n\r\n");
    FUZZ_CHECK(m.n_lines >= 1 && m.n_lines <= L7_MAX_LINES);
    FUZZ_CHECK(m.n_hdrs == m.n_lines - 1u && m.n_hdrs <= L7_MAX_HEADERS);
    uint32_t prev_end = 0;
    for (uint32_t i = 0; i < m.n_lines; i++) {
        const uint32_t e = m.line_end[i];
        FUZZ_CHECK(e + 2 <= h - 2 && in[e] == '\r' && in[e + 1] == '\n');
        FUZZ_CHECK(i == 0 || e > prev_end);
        prev_end = e;
    }
    FUZZ_CHECK(m.line_end[m.n_lines - 1] + 2u == h - 2);
    for (uint32_t i = 0; i < m.n_hdrs; i++) {
        const l7_hdr& f = m.hdr[i];
        const uint32_t line_start = m.line_end[i] + 2, line_end = m.line_end[i + 1];
        FUZZ_CHECK(f.name_off == line_start && f.name_len >= 1);
        FUZZ_CHECK(f.name_off + f.name_len < line_end && in[f.name_off + f.name_len] == ':');
        FUZZ_CHECK(f.val_off > f.name_off + f.name_len && f.val_off + f.val_len <= line_end);
        const std::string_view name = in.substr(f.name_off, f.name_len);
        const std::string_view value = in.substr(f.val_off, f.val_len);
        for (char c : name)
            FUZZ_CHECK(is_tchar(static_cast<uint8_t>(c)));
        FUZZ_CHECK(f.name_hash == (is_request ? name_hash(name) : 0));
        FUZZ_CHECK(value.find_first_of("\r\n") == std::string_view::npos);
        FUZZ_CHECK(value.empty() || (value.front() != ' ' && value.front() != '\t' && value.back() != ' ' &&
                                     value.back() != '\t'));
    }
    if (m.host_idx != L7_NONE) {
        FUZZ_CHECK(m.host_idx < m.n_hdrs);
        const l7_hdr& f = m.hdr[m.host_idx];
        FUZZ_CHECK(f.name_len == 4 && name_hash(in.substr(f.name_off, 4)) == name_hash("host"));
        FUZZ_CHECK(m.host_len >= 1 && m.host_len <= f.val_len);
    }
    if (is_request) {
        FUZZ_CHECK(m.version == 10 || m.version == 11);
        FUZZ_CHECK(m.version == 10 || m.host_idx != L7_NONE);
        FUZZ_CHECK(m.target_len >= 1 && m.target_off + m.target_len < m.line_end[0]);
        FUZZ_CHECK(m.path_len <= m.target_len);
        const std::string_view target = in.substr(m.target_off, m.target_len);
        if (m.flags & L7_MF_ABSOLUTE_FORM) {
            // "http://" authority [ "/" path ] [ "?" query ]
            FUZZ_CHECK(lower(target.substr(0, 7)) == "http://");
            FUZZ_CHECK(m.auth_off == m.target_off + 7u && m.auth_len >= 1 && m.auth_len <= 255);
            FUZZ_CHECK(m.auth_host_len >= 1 && m.auth_host_len <= m.auth_len);
            const std::string_view authority = in.substr(m.auth_off, m.auth_len);
            FUZZ_CHECK(authority.find_first_of("/?#@\\ \t") == std::string_view::npos);
            FUZZ_CHECK(m.auth_host_len == m.auth_len || authority[m.auth_host_len] == ':');
            FUZZ_CHECK(m.path_off == m.auth_off + m.auth_len);
        } else {
            FUZZ_CHECK(in[m.target_off] == '/' || target == "*");
            FUZZ_CHECK(m.path_off == m.target_off && m.auth_off == 0 && m.auth_len == 0 && m.auth_host_len == 0);
        }
        const uint32_t target_end = m.target_off + m.target_len;
        FUZZ_CHECK(m.path_off + m.path_len <= target_end);
        FUZZ_CHECK(m.path_len == 0 || in[m.path_off] == '/' || target == "*");
        FUZZ_CHECK(in.substr(m.path_off, m.path_len).find('?') == std::string_view::npos);
        FUZZ_CHECK((m.path_off + m.path_len < target_end) == !!(m.flags & L7_MF_HAS_QUERY));
        FUZZ_CHECK(m.path_off + m.path_len == target_end || in[m.path_off + m.path_len] == '?');
        for (uint32_t i = 0; i < m.target_len; i++)
            FUZZ_CHECK(static_cast<uint8_t>(in[m.target_off + i]) > 0x20 &&
                       static_cast<uint8_t>(in[m.target_off + i]) < 0x7f);
        FUZZ_CHECK(m.body_kind != L7_BODY_UNTIL_CLOSE);
    } else {
        FUZZ_CHECK(m.status >= 100 && m.status <= 999);
    }
    switch (m.body_kind) {
    case L7_BODY_CHUNKED:
        FUZZ_CHECK((m.flags & L7_MF_HAS_TE) && !(m.flags & L7_MF_HAS_CL) && m.version == 11);
        break;
    case L7_BODY_LENGTH:
        FUZZ_CHECK((m.flags & L7_MF_HAS_CL) && m.content_length > 0 && m.content_length < 1000000000000000000ULL);
        break;
    case L7_BODY_NONE:
        FUZZ_CHECK(!(m.flags & L7_MF_HAS_TE) && m.content_length == 0);
        break;
    case L7_BODY_UNTIL_CLOSE:
        FUZZ_CHECK(!(m.flags & (L7_MF_HAS_TE | L7_MF_HAS_CL)));
        break;
    default:
        FUZZ_CHECK(!"unknown body kind");
    }
}

// The acceptance rules of ARCHITECTURE.md section 6 that decide where a
// message ends, re-derived from the accepted head independently of the
// parser: these are what request smuggling plays on.
void check_rules(std::string_view in, const l7_msg& m, bool is_request)
{
    int hosts = 0, lengths = 0, codings = 0;
    bool close_token = false, keep_alive_token = false, expect_100 = false, expect_other = false;
    for (uint32_t i = 0; i < m.n_hdrs; i++) {
        const l7_hdr& f = m.hdr[i];
        const std::string name = lower(in.substr(f.name_off, f.name_len));
        const std::string_view value = in.substr(f.val_off, f.val_len);
        if (name == "host") {
            hosts++;
            FUZZ_CHECK(i == m.host_idx);
            FUZZ_CHECK(value.size() >= 1 && value.size() <= 255);
            for (char c : value)
                FUZZ_CHECK(c > 0x20 && static_cast<uint8_t>(c) < 0x7f && !std::strchr("/@?#\\", c));
        } else if (name == "content-length") {
            lengths++;
            FUZZ_CHECK(value.size() >= 1 && value.size() <= 18);
            uint64_t v = 0;
            for (char c : value) {
                FUZZ_CHECK(c >= '0' && c <= '9');
                v = v * 10 + static_cast<uint64_t>(c - '0');
            }
            FUZZ_CHECK(v == m.content_length);
        } else if (name == "transfer-encoding") {
            codings++;
            FUZZ_CHECK(lower(value) == "chunked");
        } else if (name == "connection") {
            size_t pos = 0;
            while (pos <= value.size()) {
                size_t end = value.find(',', pos);
                if (end == std::string_view::npos)
                    end = value.size();
                std::string_view tok = value.substr(pos, end - pos);
                while (!tok.empty() && (tok.front() == ' ' || tok.front() == '\t'))
                    tok.remove_prefix(1);
                while (!tok.empty() && (tok.back() == ' ' || tok.back() == '\t'))
                    tok.remove_suffix(1);
                close_token |= lower(tok) == "close";
                keep_alive_token |= lower(tok) == "keep-alive";
                pos = end + 1;
            }
        } else if (name == "expect") {
            (lower(value) == "100-continue" ? expect_100 : expect_other) = true;
        }
    }
    FUZZ_CHECK(hosts <= 1 && lengths <= 1 && codings <= 1);
    FUZZ_CHECK((hosts == 1) == (m.host_idx != L7_NONE));
    FUZZ_CHECK(!is_request || m.version == 10 || hosts == 1);
    FUZZ_CHECK((lengths == 1) == !!(m.flags & L7_MF_HAS_CL));
    FUZZ_CHECK((codings == 1) == !!(m.flags & L7_MF_HAS_TE));
    FUZZ_CHECK(!(lengths && codings));
    FUZZ_CHECK(!codings || m.version == 11);
    FUZZ_CHECK(expect_100 == !!(m.flags & L7_MF_EXPECT_100));
    FUZZ_CHECK(expect_other == !!(m.flags & L7_MF_EXPECT_OTHER));
    const bool closes = close_token || (m.version == 10 && !keep_alive_token);
    FUZZ_CHECK(closes == !!(m.flags & L7_MF_CLOSE));
}

// The kernel matches raw paths and takes only those the parser finds in
// normal form; the slow path normalises the rest (semantics/PathNormalize). So a
// path the parser calls normal must be its own normal form, or the two paths
// would match different strings; and normalising must reach a path the
// parser calls normal (unless an escape stays: those always take the slow
// path).
void check_path_normal_form(std::string_view in, const l7_msg& m)
{
    // the path and query (an absolute-form's empty path is "/")
    const std::string target = std::string((m.flags & L7_MF_ABSOLUTE_FORM) && m.path_len == 0 ? "/" : "") +
                               std::string(in.substr(m.path_off, m.target_off + m.target_len - m.path_off));
    const policy::NormalizedTarget n = policy::normalize_target(target);
    if (!(m.flags & L7_MF_PATH_NOT_NORMAL)) {
        FUZZ_CHECK(n.error.empty());
        FUZZ_CHECK(n.target == target);
        return;
    }
    if (!n.error.empty())
        return;
    const policy::NormalizedTarget again = policy::normalize_target(n.target);
    FUZZ_CHECK(again.error.empty() && again.target == n.target);
    // escapes that stay (not of unreserved characters) keep a path with
    // the slow path for good: the parser flags every '%'
    if (n.target.substr(0, n.target.find('?')).find('%') != std::string::npos)
        return;
    const std::string rq = "GET " + n.target + " HTTP/1.1\r\nHost: h\r\n\r\n";
    l7_msg nm{};
    FUZZ_CHECK(proxy::parse_head({rq.data(), rq.size()}, true, &nm) == L7_P_OK);
    FUZZ_CHECK(!(nm.flags & L7_MF_PATH_NOT_NORMAL));
}

// What the slow path routes and forwards for an absolute-form target: the
// same request in origin-form, Host set to the authority.
void check_origin_form(std::string_view in, const l7_msg& m)
{
    const std::string out = proxy::origin_form_head(in.substr(0, m.hdr_len), m);
    l7_msg o{};
    const int st = proxy::parse_head({out.data(), out.size()}, true, &o);
    // "http://" and the authority leave the target ("/" or "*" may come
    // in); the authority replaces the Host value, or comes in a line of
    // its own: at most 2 bytes more
    const int64_t host_change = m.host_idx == L7_NONE ? 8 + int64_t{m.auth_len}
                                                      : int64_t{m.auth_len} - m.hdr[m.host_idx].val_len;
    FUZZ_CHECK(static_cast<int64_t>(out.size()) ==
               int64_t{m.hdr_len} - 7 - m.auth_len + (m.path_len == 0 ? 1 : 0) + host_change);
    FUZZ_CHECK(out.size() <= m.hdr_len + 2u);
    if (st == L7_P_ERROR && m.host_idx == L7_NONE &&
        (o.error == L7_PE_TOO_LARGE || o.error == L7_PE_TOO_MANY_LINES))
        return;  // the added Host line is over a limit: refused with that status
    FUZZ_CHECK(st == L7_P_OK && o.hdr_len == out.size());
    FUZZ_CHECK(o.method == m.method && o.version == m.version && o.body_kind == m.body_kind &&
               o.content_length == m.content_length);
    FUZZ_CHECK(o.flags == (m.flags & ~unsigned{L7_MF_ABSOLUTE_FORM}));
    const std::string_view path_query = in.substr(m.path_off, m.target_off + m.target_len - m.path_off);
    const std::string_view target(out.data() + o.target_off, o.target_len);
    if (m.path_len == 0 && path_query.empty() && m.method == L7_M_OPTIONS)
        FUZZ_CHECK(target == "*");
    else
        FUZZ_CHECK(target == (m.path_len == 0 ? "/" + std::string(path_query) : std::string(path_query)));
    FUZZ_CHECK(o.host_idx != L7_NONE && o.host_len == m.auth_host_len);
    FUZZ_CHECK(std::string_view(out.data() + o.hdr[o.host_idx].val_off, o.hdr[o.host_idx].val_len) ==
               in.substr(m.auth_off, m.auth_len));
    FUZZ_CHECK(o.n_hdrs == m.n_hdrs + (m.host_idx == L7_NONE ? 1 : 0));
}

void check_framing(std::string_view body, const l7_msg& m, size_t split)
{
    proxy::BodyFramer whole(m.body_kind, m.content_length);
    const long n = whole.feed({body.data(), body.size()});
    FUZZ_CHECK(n >= -1 && n <= static_cast<long>(body.size()));
    FUZZ_CHECK(m.body_kind != L7_BODY_UNTIL_CLOSE || n == static_cast<long>(body.size()));
    FUZZ_CHECK(m.body_kind != L7_BODY_NONE || (n == 0 && whole.done()));
    FUZZ_CHECK(n < 0 || whole.done() || n == static_cast<long>(body.size()));

    // the same bytes in pieces: same end, same verdict
    proxy::BodyFramer pieces(m.body_kind, m.content_length);
    size_t pos = 0;
    long got = 0;
    while (pos < body.size() && !pieces.done()) {
        const size_t len = std::min(split == 0 ? body.size() : split, body.size() - pos);
        const long k = pieces.feed({body.data() + pos, len});
        if (k < 0) {
            got = -1;
            break;
        }
        FUZZ_CHECK(static_cast<size_t>(k) <= len);
        got += k;
        pos += len;
        if (static_cast<size_t>(k) < len)
            break;
    }
    FUZZ_CHECK(got == n);
    FUZZ_CHECK(n < 0 || pieces.done() == whole.done());
}

}  // namespace

int http_parse(const uint8_t* data, size_t size)
{
    if (size < 1)
        return 0;
    const uint8_t ctl = data[0];
    const bool is_request = !(ctl & 1);
    const std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);

    l7_msg m{};
    const int st = proxy::parse_head({in.data(), in.size()}, is_request, &m);
    FUZZ_CHECK(st == L7_P_OK || st == L7_P_MORE || st == L7_P_ERROR);

    l7_msg again{};
    FUZZ_CHECK(proxy::parse_head({in.data(), in.size()}, is_request, &again) == st);
    FUZZ_CHECK(st == L7_P_MORE || same_msg(m, again));
    // the fast stages decide only what the strict ones decide the same way
    l7_msg strict{};
    FUZZ_CHECK(proxy::parse_head({in.data(), in.size()}, is_request, &strict, true) == st);
    FUZZ_CHECK(st == L7_P_MORE || same_msg(m, strict));

    if (st == L7_P_ERROR) {
        FUZZ_CHECK(m.error > L7_PE_NONE && m.error < L7_PE_COUNT);
        FUZZ_CHECK(m.status == 400 || m.status == 421 || m.status == 431 || m.status == 501 ||
                   m.status == 505 || (!is_request && m.status == 502));
        FUZZ_CHECK((m.error == L7_PE_HTTPS_TARGET) == (m.status == 421));
        return 0;
    }
    if (st == L7_P_MORE) {
        const std::string_view window = in.substr(0, std::min<size_t>(in.size(), L7_WS_BUF));
        FUZZ_CHECK(window.find("\r\n\r\n") == std::string_view::npos);
        FUZZ_CHECK(in.size() < L7_WS_BUF);
        return 0;
    }
    check_head(in, m, is_request);
    check_rules(in, m, is_request);
    if (is_request)
        check_path_normal_form(in, m);
    if (is_request && (m.flags & L7_MF_ABSOLUTE_FORM))
        check_origin_form(in, m);

    // the head alone parses the same: nothing after it was looked at
    l7_msg head_only{};
    FUZZ_CHECK(proxy::parse_head({in.data(), m.hdr_len}, is_request, &head_only) == L7_P_OK);
    FUZZ_CHECK(same_msg(m, head_only));
    // one byte less is never a complete head
    FUZZ_CHECK(proxy::parse_head({in.data(), m.hdr_len - 1u}, is_request, &head_only) != L7_P_OK);

    if (!is_request)
        l7_response_body(&m, (ctl >> 1) & 1);
    check_framing(in.substr(m.hdr_len), m, ctl >> 2);
    return 0;
}

}  // namespace l7fast::fuzz

L7FAST_FUZZ_ENTRY(http_parse)
