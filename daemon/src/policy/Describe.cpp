#include "policy/Describe.hpp"

#include "policy/Text.hpp"

namespace l7fast::policy {
namespace {

// a value as written, or quoted when it would not read as one token
std::string value(const std::string& v)
{
    bool plain = !v.empty();
    for (unsigned char c : v)
        if (c <= ' ' || c == '"' || c == '\\' || c >= 0x7f)
            plain = false;
    return plain ? v : text::quote(v);
}

}  // namespace

std::string describe_match(const RouteMatch& m)
{
    std::string out;
    auto add = [&out](const std::string& term) { out += (out.empty() ? "" : " ") + term; };
    if (!m.methods.empty()) {
        std::string t = "method=";
        for (size_t i = 0; i < m.methods.size(); i++)
            t += (i ? "|" : "") + m.methods[i];
        add(t);
    }
    if (m.host)
        add("host=" + value(*m.host));
    switch (m.path_kind) {
    case PathMatch::Exact:
        add("path=" + value(m.path));
        break;
    case PathMatch::Prefix:
        add("prefix=" + value(m.path));
        break;
    case PathMatch::Regex:
        add("regex=" + value(m.path));
        break;
    case PathMatch::Any:
        break;
    }
    for (const auto& h : m.headers) {
        switch (h.kind) {
        case HeaderCondition::Kind::Present:
            add("header:" + h.name);
            break;
        case HeaderCondition::Kind::Absent:
            add("!header:" + h.name);
            break;
        case HeaderCondition::Kind::Exact:
            add("header:" + h.name + "=" + value(h.value));
            break;
        case HeaderCondition::Kind::Prefix:
            add("header:" + h.name + "^=" + value(h.value));
            break;
        }
    }
    for (const auto& q : m.query)
        add("query:" + value(q.name) + (q.kind == QueryCondition::Kind::Exact ? "=" + value(q.value) : ""));
    if (!m.sources.empty()) {
        std::string t = "source=";
        for (size_t i = 0; i < m.sources.size(); i++)
            t += (i ? "," : "") + m.sources[i].str();
        add(t);
    }
    for (const auto& c : m.claims)
        add("claim:" + value(c.claim) + (c.kind == ClaimCondition::Kind::Exact ? "=" + value(c.value) : ""));
    return out.empty() ? "*" : out;
}

}  // namespace l7fast::policy
