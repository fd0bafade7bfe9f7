#include "semantics/Mutation.hpp"

#include <algorithm>

#include "config/Text.hpp"

namespace l7fast::policy {

namespace {

using text::iequals;

bool sendable(std::string_view value)
{
    return std::none_of(value.begin(), value.end(), [](char ch) {
        const auto c = static_cast<unsigned char>(ch);
        return (c < 0x20 && c != '\t') || c == 0x7f;
    });
}

void append_line(std::string& out, std::string_view name, std::string_view value)
{
    out += text::lower(name);
    out += ": ";
    out += value;
    out += "\r\n";
}

std::optional<std::string> mutate_head(std::string_view head, const HeaderMutation& m,
                                       std::span<const ForwardedHeader> forwarded)
{
    const size_t end = head.find("\r\n\r\n");
    if (end == std::string_view::npos || end + 4 != head.size())
        return std::nullopt;
    const auto dropped = [&](std::string_view name) {
        return std::any_of(m.remove.begin(), m.remove.end(), [&](const std::string& n) { return iequals(n, name); }) ||
               std::any_of(m.set.begin(), m.set.end(), [&](const HeaderValue& h) { return iequals(h.name, name); }) ||
               std::any_of(forwarded.begin(), forwarded.end(),
                           [&](const ForwardedHeader& f) { return iequals(f.name, name); });
    };

    std::string out;
    out.reserve(head.size() + 64);
    size_t pos = head.find("\r\n") + 2;  // after the start line
    out.append(head.substr(0, pos));
    while (pos < end + 2) {
        const size_t eol = head.find("\r\n", pos);
        const std::string_view line = head.substr(pos, eol - pos);
        const size_t colon = line.find(':');
        if (colon == std::string_view::npos || colon == 0)
            return std::nullopt;
        if (!dropped(line.substr(0, colon)))
            out.append(head.substr(pos, eol + 2 - pos));
        pos = eol + 2;
    }
    for (const HeaderValue& h : m.set)
        append_line(out, h.name, h.value);
    for (const ForwardedHeader& f : forwarded)
        if (f.value)
            append_line(out, f.name, *f.value);
    for (const HeaderValue& h : m.add)
        append_line(out, h.name, h.value);
    out += "\r\n";
    return out;
}

}  // namespace

std::vector<ForwardedHeader> forwarded_claim_headers(const JwtProvider& provider, const Claims* claims)
{
    std::vector<ForwardedHeader> out;
    out.reserve(provider.forward_claims.size());
    for (const JwtProvider::ForwardClaim& fc : provider.forward_claims) {
        ForwardedHeader h{text::lower(fc.header), std::nullopt};
        if (claims) {
            auto it = claims->members.find(fc.claim);
            if (it != claims->members.end() && !it->second.empty() &&
                std::all_of(it->second.begin(), it->second.end(), [](const std::string& v) { return sendable(v); })) {
                std::string joined;
                for (size_t i = 0; i < it->second.size(); i++)
                    joined += (i ? ", " : "") + it->second[i];
                h.value = std::move(joined);
            }
        }
        out.push_back(std::move(h));
    }
    return out;
}

std::optional<std::string> mutate_request_head(std::string_view head, const HeaderMutation& mutation,
                                               std::span<const ForwardedHeader> forwarded)
{
    return mutate_head(head, mutation, forwarded);
}

std::optional<std::string> mutate_response_head(std::string_view head, const HeaderMutation& mutation)
{
    return mutate_head(head, mutation, {});
}

}  // namespace l7fast::policy
