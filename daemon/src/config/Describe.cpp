#include "config/Describe.hpp"

#include "config/Text.hpp"

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

std::string describe_condition(const RouteMatch& m, const ConditionRef& c)
{
    using K = ConditionRef::Kind;
    switch (c.kind) {
    case K::Method: {
        std::string t = "method=";
        for (size_t i = 0; i < m.methods.size(); i++)
            t += (i ? "|" : "") + m.methods[i];
        return t;
    }
    case K::Host: return "host=" + value(m.host.value_or(""));
    case K::Path:
        switch (m.path_kind) {
        case PathMatch::Exact: return "path=" + value(m.path);
        case PathMatch::Prefix: return "prefix=" + value(m.path);
        case PathMatch::Regex: return "regex=" + value(m.path);
        case PathMatch::Any: break;
        }
        return "*";
    case K::Header: {
        const HeaderCondition& h = m.headers.at(c.index);
        switch (h.kind) {
        case HeaderCondition::Kind::Present: return "header:" + h.name;
        case HeaderCondition::Kind::Absent: return "!header:" + h.name;
        case HeaderCondition::Kind::Exact: return "header:" + h.name + "=" + value(h.value);
        case HeaderCondition::Kind::Prefix: return "header:" + h.name + "^=" + value(h.value);
        }
        return "header:" + h.name;
    }
    case K::Query: {
        const QueryCondition& q = m.query.at(c.index);
        return "query:" + value(q.name) + (q.kind == QueryCondition::Kind::Exact ? "=" + value(q.value) : "");
    }
    case K::Source: {
        std::string t = "source=";
        for (size_t i = 0; i < m.sources.size(); i++)
            t += (i ? "," : "") + m.sources[i].str();
        return t;
    }
    case K::Claim: {
        const ClaimCondition& cl = m.claims.at(c.index);
        return "claim:" + value(cl.claim) + (cl.kind == ClaimCondition::Kind::Exact ? "=" + value(cl.value) : "");
    }
    }
    return "?";
}

std::string describe_match(const RouteMatch& m)
{
    std::string out;
    for (const ConditionRef& c : conditions_of(m))
        out += (out.empty() ? "" : " ") + describe_condition(m, c);
    return out.empty() ? "*" : out;
}

}  // namespace l7fast::policy
