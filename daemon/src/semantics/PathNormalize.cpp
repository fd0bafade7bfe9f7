#include "semantics/PathNormalize.hpp"

#include <vector>

#include "l7_http.h"  // l7_hexval: the parser's, one definition

namespace l7fast::policy {

namespace {

bool unreserved(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
           c == '_' || c == '~';
}

}  // namespace

NormalizedTarget normalize_target(std::string_view target)
{
    NormalizedTarget out;
    if (target == "*") {
        out.target = "*";
        return out;
    }
    const size_t q = target.find('?');
    const std::string_view path = target.substr(0, q);
    const std::string_view query = q == std::string_view::npos ? std::string_view() : target.substr(q);

    // 1 and 2: escapes and backslashes
    std::string decoded;
    decoded.reserve(path.size());
    for (size_t i = 0; i < path.size(); i++) {
        const char c = path[i];
        if (c == '\\') {
            out.error = "backslash in the request path";
            out.cause = "backslash";
            return out;
        }
        if (c != '%') {
            decoded += c;
            continue;
        }
        if (i + 2 >= path.size()) {
            out.error = "truncated percent-escape in the request path";
            out.cause = "truncated_escape";
            return out;
        }
        const int a = l7_hexval(static_cast<__u8>(path[i + 1])), b = l7_hexval(static_cast<__u8>(path[i + 2]));
        if (a < 0 || b < 0) {
            out.error = "malformed percent-escape in the request path";
            out.cause = "malformed_escape";
            return out;
        }
        const auto v = static_cast<unsigned char>(a * 16 + b);
        if (v == '/' || v == '\\') {
            out.error = "encoded slash or backslash in the request path";
            out.cause = "encoded_slash";
            return out;
        }
        if (unreserved(v)) {
            decoded += static_cast<char>(v);
        } else {
            static constexpr char kHex[] = "0123456789ABCDEF";
            decoded += '%';
            decoded += kHex[v >> 4];
            decoded += kHex[v & 15];
        }
        i += 2;
    }

    // 3 and 4: segments, without empty ones, "." dropped, ".." pops
    std::vector<std::string_view> segs;
    const std::string_view d(decoded);
    size_t pos = 1;  // origin-form starts with '/'
    bool trailing_slash = false;
    while (pos <= d.size()) {
        const size_t slash = d.find('/', pos);
        const size_t end = slash == std::string_view::npos ? d.size() : slash;
        const std::string_view seg = d.substr(pos, end - pos);
        const bool last = slash == std::string_view::npos;
        if (seg == "..") {
            if (!segs.empty())
                segs.pop_back();
            trailing_slash = true;
        } else if (seg == ".") {
            trailing_slash = true;
        } else if (seg.empty()) {
            trailing_slash = true;
        } else {
            segs.push_back(seg);
            trailing_slash = false;
        }
        if (last)
            break;
        pos = slash + 1;
    }
    out.target = "/";
    for (size_t i = 0; i < segs.size(); i++) {
        out.target += segs[i];
        if (i + 1 < segs.size() || trailing_slash)
            out.target += '/';
    }
    out.target += query;
    return out;
}

}  // namespace l7fast::policy
