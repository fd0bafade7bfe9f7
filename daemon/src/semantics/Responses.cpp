#include "semantics/Responses.hpp"

#include <span>
#include <vector>

#include "config/Text.hpp"

namespace l7fast::policy {

namespace {

bool bodyless(int status)
{
    return status < 200 || status == 204 || status == 304;
}

struct Field {
    std::string_view name;
    std::string_view value;
};

LocalResponse build(int status, std::span<const Field> extra, std::string_view body, bool close)
{
    LocalResponse r;
    r.close = close;
    std::string& b = r.bytes;
    b.reserve(128 + body.size());
    b += "HTTP/1.1 ";
    b += std::to_string(status);
    b += ' ';
    b += reason_phrase(status);
    b += "\r\n";
    bool has_type = false;
    for (const Field& f : extra) {
        has_type |= text::iequals(f.name, "content-type");
        b += text::lower(f.name);
        b += ": ";
        b += f.value;
        b += "\r\n";
    }
    const bool no_body = bodyless(status);
    if (!no_body) {
        if (!has_type)
            b += "content-type: text/plain\r\n";
        b += "content-length: ";
        b += std::to_string(body.size());
        b += "\r\n";
    }
    if (close)
        b += "connection: close\r\n";
    b += "\r\n";
    r.head_size = b.size();
    if (!no_body)
        b += body;
    return r;
}

}  // namespace

const char* reason_phrase(int status)
{
    switch (status) {
    case 100: return "Continue";
    case 101: return "Switching Protocols";
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 203: return "Non-Authoritative Information";
    case 204: return "No Content";
    case 205: return "Reset Content";
    case 206: return "Partial Content";
    case 300: return "Multiple Choices";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 303: return "See Other";
    case 304: return "Not Modified";
    case 305: return "Use Proxy";
    case 307: return "Temporary Redirect";
    case 308: return "Permanent Redirect";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 402: return "Payment Required";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 406: return "Not Acceptable";
    case 407: return "Proxy Authentication Required";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 410: return "Gone";
    case 411: return "Length Required";
    case 412: return "Precondition Failed";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 416: return "Range Not Satisfiable";
    case 417: return "Expectation Failed";
    case 421: return "Misdirected Request";
    case 422: return "Unprocessable Content";
    case 426: return "Upgrade Required";
    case 428: return "Precondition Required";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 451: return "Unavailable For Legal Reasons";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    case 511: return "Network Authentication Required";
    }
    return "";
}

LocalResponse local_response(int status, std::string_view body, bool close)
{
    return build(status, {}, body, close);
}

LocalResponse direct_response(const DirectResponse& response, bool close)
{
    std::vector<Field> extra;
    extra.reserve(response.headers.size());
    for (const HeaderValue& h : response.headers)
        extra.push_back({h.name, h.value});
    return build(response.status, extra, response.body, close);
}

LocalResponse rbac_denied(const Rbac& rbac, bool close)
{
    return build(rbac.deny_status, {}, rbac.deny_body, close);
}

LocalResponse unauthorized(bool token_presented, bool close)
{
    const Field challenge{"www-authenticate", token_presented ? "Bearer realm=\"l7fast\", error=\"invalid_token\""
                                                              : "Bearer realm=\"l7fast\""};
    return build(401, std::span(&challenge, 1), "unauthorized\n", close);
}

LocalResponse too_many_requests(uint64_t retry_after_ms, bool close)
{
    const uint64_t seconds = retry_after_ms == 0 ? 1 : retry_after_ms / 1000 + (retry_after_ms % 1000 != 0);
    const std::string value = std::to_string(seconds);
    const Field retry{"retry-after", value};
    return build(429, std::span(&retry, 1), "too many requests\n", close);
}

}  // namespace l7fast::policy
