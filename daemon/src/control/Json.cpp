#include "control/Json.hpp"

#include <cinttypes>
#include <cmath>
#include <cstdio>

namespace l7fast::control {

void JsonWriter::separate()
{
    if (after_key_) {
        after_key_ = false;
        return;
    }
    if (!nonempty_.empty()) {
        if (nonempty_.back())
            out_ += ',';
        nonempty_.back() = true;
    }
}

JsonWriter& JsonWriter::begin_object()
{
    separate();
    out_ += '{';
    nonempty_.push_back(false);
    return *this;
}

JsonWriter& JsonWriter::end_object()
{
    out_ += '}';
    nonempty_.pop_back();
    return *this;
}

JsonWriter& JsonWriter::begin_array()
{
    separate();
    out_ += '[';
    nonempty_.push_back(false);
    return *this;
}

JsonWriter& JsonWriter::end_array()
{
    out_ += ']';
    nonempty_.pop_back();
    return *this;
}

JsonWriter& JsonWriter::key(std::string_view k)
{
    separate();
    out_ += quote(k);
    out_ += ':';
    after_key_ = true;
    return *this;
}

JsonWriter& JsonWriter::value(std::string_view s)
{
    separate();
    out_ += quote(s);
    return *this;
}

JsonWriter& JsonWriter::value(bool b)
{
    separate();
    out_ += b ? "true" : "false";
    return *this;
}

JsonWriter& JsonWriter::value(int64_t n)
{
    separate();
    out_ += std::to_string(n);
    return *this;
}

JsonWriter& JsonWriter::value(uint64_t n)
{
    separate();
    out_ += std::to_string(n);
    return *this;
}

JsonWriter& JsonWriter::value(double d)
{
    separate();
    if (!std::isfinite(d)) {
        out_ += "null";
        return *this;
    }
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.17g", d);
    out_ += buf;
    return *this;
}

JsonWriter& JsonWriter::null()
{
    separate();
    out_ += "null";
    return *this;
}

std::string valid_utf8(std::string_view s)
{
    std::string out;
    out.reserve(s.size());
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    const size_t n = s.size();
    size_t i = 0;
    while (i < n) {
        unsigned char c = p[i];
        size_t len = 0;
        uint32_t cp = 0;
        if (c < 0x80) {
            out += static_cast<char>(c);
            i++;
            continue;
        } else if ((c & 0xe0) == 0xc0) {
            len = 2;
            cp = c & 0x1f;
        } else if ((c & 0xf0) == 0xe0) {
            len = 3;
            cp = c & 0x0f;
        } else if ((c & 0xf8) == 0xf0) {
            len = 4;
            cp = c & 0x07;
        }
        bool ok = len != 0 && i + len <= n;
        for (size_t k = 1; ok && k < len; k++) {
            if ((p[i + k] & 0xc0) != 0x80)
                ok = false;
            else
                cp = (cp << 6) | (p[i + k] & 0x3f);
        }
        static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (ok && (cp < kMin[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)))
            ok = false;
        if (ok) {
            out.append(s.substr(i, len));
            i += len;
        } else {
            out += "\xef\xbf\xbd";
            i++;
        }
    }
    return out;
}

std::string JsonWriter::quote(std::string_view raw)
{
    const std::string s = valid_utf8(raw);
    std::string q;
    q.reserve(s.size() + 2);
    q += '"';
    for (unsigned char c : s) {
        switch (c) {
        case '"': q += "\\\""; break;
        case '\\': q += "\\\\"; break;
        case '\n': q += "\\n"; break;
        case '\r': q += "\\r"; break;
        case '\t': q += "\\t"; break;
        case '\b': q += "\\b"; break;
        case '\f': q += "\\f"; break;
        default:
            if (c < 0x20 || c == 0x7f) {
                char buf[8];
                std::snprintf(buf, sizeof buf, "\\u%04x", c);
                q += buf;
            } else {
                q += static_cast<char>(c);
            }
        }
    }
    q += '"';
    return q;
}

}  // namespace l7fast::control
