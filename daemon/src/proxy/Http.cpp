#include "proxy/Http.hpp"

#include <algorithm>
#include <cstring>
#include <memory>

#include "semantics/Responses.hpp"

namespace l7fast::proxy {

int parse_head(std::span<const char> bytes, bool is_request, l7_msg* out, bool strict_only)
{
    // One workspace per thread: parsing is synchronous, and the workspace is
    // the size of the largest head the slow path accepts.
    thread_local std::unique_ptr<l7_ws> ws = std::make_unique<l7_ws>();
    size_t n = std::min(bytes.size(), static_cast<size_t>(L7_WS_BUF));
    std::memcpy(ws->buf, bytes.data(), n);
    ws->len = static_cast<__u32>(n);
    int st = strict_only ? l7_parse_head_strict(ws.get(), is_request ? 1 : 0)
                         : l7_parse_head(ws.get(), is_request ? 1 : 0);
    *out = ws->msg;
    return st;
}

std::string origin_form_head(std::string_view head, const l7_msg& m)
{
    const std::string_view authority = head.substr(m.auth_off, m.auth_len);
    const size_t target_end = size_t{m.target_off} + m.target_len;
    const std::string_view path_query = head.substr(m.path_off, target_end - m.path_off);
    std::string out;
    out.reserve(head.size() + authority.size() + 8);
    out.append(head.substr(0, m.target_off));
    if (m.path_len == 0)
        out += m.method == L7_M_OPTIONS && path_query.empty() ? '*' : '/';
    out.append(path_query);
    if (m.host_idx == L7_NONE) {
        const size_t fields = size_t{m.line_end[0]} + 2;
        out.append(head.substr(target_end, fields - target_end));
        out.append("Host: ").append(authority).append("\r\n");
        out.append(head.substr(fields));
    } else {
        const l7_hdr& host = m.hdr[m.host_idx];
        out.append(head.substr(target_end, host.val_off - target_end));
        out.append(authority);
        out.append(head.substr(size_t{host.val_off} + host.val_len));
    }
    return out;
}

std::string make_response(int status, std::string_view body, bool close)
{
    return policy::local_response(status, body, close).bytes;
}

long BodyFramer::feed(std::span<const char> bytes)
{
    size_t pos = 0, n = bytes.size();
    if (st_.done)
        return 0;
    switch (st_.kind) {
    case L7_BODY_UNTIL_CLOSE:
        return static_cast<long>(n);
    case L7_BODY_LENGTH: {
        uint64_t take = std::min<uint64_t>(st_.remaining, n);
        st_.remaining -= take;
        st_.done = st_.remaining == 0;
        return static_cast<long>(take);
    }
    case L7_BODY_CHUNKED:
        while (pos < n && !st_.done) {
            if (st_.phase == L7_CH_DATA) {
                uint64_t take = std::min<uint64_t>(st_.remaining, n - pos);
                pos += take;
                st_.remaining -= take;
                if (!st_.remaining)
                    st_.phase = L7_CH_DATA_CR;
                continue;
            }
            if (l7_chunk_byte(&st_, static_cast<__u8>(bytes[pos])) != L7_B_OK)
                return -1;
            pos++;
        }
        return static_cast<long>(pos);
    default:
        st_.done = 1;
        return 0;
    }
}

const char* parse_error_name(unsigned error)
{
    static const char* const names[] = {L7_PARSE_ERROR_NAMES};
    static_assert(std::size(names) == L7_PE_COUNT, "L7_PARSE_ERROR_NAMES: one per enum l7_parse_error");
    return error < std::size(names) ? names[error] : "unknown";
}

}  // namespace l7fast::proxy
