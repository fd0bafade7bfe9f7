#include "auth/JsonReader.hpp"

#include <algorithm>
#include <cstring>

namespace l7fast::auth::json {

namespace {

// Recursion depth is bounded by Limits::max_depth; this bounds that.
constexpr uint32_t kDepthCeiling = 64;

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Length of the well-formed multi-byte UTF-8 sequence at p (p[0] >= 0x80),
// or 0 (RFC 3629 §4).
size_t utf8_sequence(const char* p, const char* end)
{
    const auto* u = reinterpret_cast<const unsigned char*>(p);
    const size_t avail = static_cast<size_t>(end - p);
    const auto cont = [&](size_t i, unsigned char lo = 0x80, unsigned char hi = 0xbf) {
        return i < avail && u[i] >= lo && u[i] <= hi;
    };
    const unsigned char c = u[0];
    if (c >= 0xc2 && c <= 0xdf)
        return cont(1) ? 2 : 0;
    if (c == 0xe0)
        return cont(1, 0xa0) && cont(2) ? 3 : 0;
    if ((c >= 0xe1 && c <= 0xec) || c == 0xee || c == 0xef)
        return cont(1) && cont(2) ? 3 : 0;
    if (c == 0xed)  // U+D800..U+DFFF are not characters
        return cont(1, 0x80, 0x9f) && cont(2) ? 3 : 0;
    if (c == 0xf0)
        return cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0;
    if (c >= 0xf1 && c <= 0xf3)
        return cont(1) && cont(2) && cont(3) ? 4 : 0;
    if (c == 0xf4)  // up to U+10FFFF
        return cont(1, 0x80, 0x8f) && cont(2) && cont(3) ? 4 : 0;
    return 0;
}

bool hex4(const char* p, uint32_t* out)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
        const char c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= static_cast<uint32_t>(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= static_cast<uint32_t>(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= static_cast<uint32_t>(c - 'A' + 10);
        else
            return false;
    }
    *out = v;
    return true;
}

// UTF-8 of a scalar value (never a surrogate here); at most 4 bytes.
size_t encode_utf8(uint32_t cp, char* out)
{
    if (cp < 0x80) {
        out[0] = static_cast<char>(cp);
        return 1;
    }
    if (cp < 0x800) {
        out[0] = static_cast<char>(0xc0 | cp >> 6);
        out[1] = static_cast<char>(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = static_cast<char>(0xe0 | cp >> 12);
        out[1] = static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
        out[2] = static_cast<char>(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = static_cast<char>(0xf0 | cp >> 18);
    out[1] = static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out[2] = static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out[3] = static_cast<char>(0x80 | (cp & 0x3f));
    return 4;
}

}  // namespace

bool valid_utf8(std::string_view s)
{
    const char* p = s.data();
    const char* end = p + s.size();
    while (p < end) {
        if (static_cast<unsigned char>(*p) < 0x80) {
            ++p;
            continue;
        }
        const size_t n = utf8_sequence(p, end);
        if (n == 0)
            return false;
        p += n;
    }
    return true;
}

bool Document::parse(std::string_view text, const Limits& limits)
{
    nodes_.clear();
    keys_.clear();
    decoded_.clear();
    error_ = {};
    error_offset_ = 0;
    limits_ = limits;
    limits_.max_depth = std::min(limits_.max_depth, kDepthCeiling);
    begin_ = p_ = text.data();
    end_ = begin_ + text.size();
    if (text.size() > limits_.max_bytes)
        return fail("document too large", begin_);
    // Decoding only shrinks strings, so the whole input fits: views into
    // decoded_ stay valid because it never reallocates during this parse.
    if (decoded_.capacity() < text.size())
        decoded_.reserve(text.size());
    if (!value({}, 1))
        return false;
    skip_ws();
    if (p_ != end_)
        return fail("bytes after the value", p_);
    return true;
}

bool Document::fail(const char* why, const char* at)
{
    error_ = why;
    error_offset_ = static_cast<size_t>(at - begin_);
    return false;
}

void Document::skip_ws()
{
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\t' || *p_ == '\n' || *p_ == '\r'))
        ++p_;
}

bool Document::push(Type type, std::string_view key, std::string_view text)
{
    if (nodes_.size() >= limits_.max_nodes)
        return fail("too many values", p_);
    const auto index = static_cast<uint32_t>(nodes_.size());
    nodes_.push_back(Node{type, index + 1, key, text});
    return true;
}

bool Document::value(std::string_view key, uint32_t depth)
{
    skip_ws();
    if (p_ == end_)
        return fail("unexpected end", p_);
    switch (*p_) {
    case '{':
        return object(key, depth);
    case '[':
        return array(key, depth);
    case '"': {
        std::string_view s;
        return string(&s) && push(Type::String, key, s);
    }
    case 't':
        return literal(key, "true", Type::True);
    case 'f':
        return literal(key, "false", Type::False);
    case 'n':
        return literal(key, "null", Type::Null);
    default:
        if (*p_ == '-' || is_digit(*p_))
            return number(key);
        return fail("unexpected character", p_);
    }
}

bool Document::object(std::string_view key, uint32_t depth)
{
    if (depth > limits_.max_depth)
        return fail("nested too deeply", p_);
    const char* start = p_;
    const auto self = static_cast<uint32_t>(nodes_.size());
    if (!push(Type::Object, key, {}))
        return false;
    ++p_;
    const size_t first_key = keys_.size();
    skip_ws();
    if (p_ < end_ && *p_ == '}') {
        ++p_;
    } else {
        for (;;) {
            skip_ws();
            if (p_ == end_ || *p_ != '"')
                return fail("expected a member name", p_);
            std::string_view name;
            if (!string(&name))
                return false;
            skip_ws();
            if (p_ == end_ || *p_ != ':')
                return fail("expected ':'", p_);
            ++p_;
            keys_.push_back(name);
            if (!value(name, depth + 1))
                return false;
            skip_ws();
            if (p_ == end_)
                return fail("unexpected end", p_);
            if (*p_ == ',') {
                ++p_;
                continue;
            }
            if (*p_ == '}') {
                ++p_;
                break;
            }
            return fail("expected ',' or '}'", p_);
        }
    }
    const auto first = keys_.begin() + static_cast<ptrdiff_t>(first_key);
    std::sort(first, keys_.end());
    if (std::adjacent_find(first, keys_.end()) != keys_.end())
        return fail("duplicate member name", start);
    keys_.resize(first_key);
    nodes_[self].end = static_cast<uint32_t>(nodes_.size());
    return true;
}

bool Document::array(std::string_view key, uint32_t depth)
{
    if (depth > limits_.max_depth)
        return fail("nested too deeply", p_);
    const auto self = static_cast<uint32_t>(nodes_.size());
    if (!push(Type::Array, key, {}))
        return false;
    ++p_;
    skip_ws();
    if (p_ < end_ && *p_ == ']') {
        ++p_;
    } else {
        for (;;) {
            if (!value({}, depth + 1))
                return false;
            skip_ws();
            if (p_ == end_)
                return fail("unexpected end", p_);
            if (*p_ == ',') {
                ++p_;
                continue;
            }
            if (*p_ == ']') {
                ++p_;
                break;
            }
            return fail("expected ',' or ']'", p_);
        }
    }
    nodes_[self].end = static_cast<uint32_t>(nodes_.size());
    return true;
}

bool Document::string(std::string_view* out)
{
    const char* quote = p_;
    ++p_;
    const char* start = p_;
    // Most strings have no escapes: they stay views into the input.
    while (p_ < end_) {
        const auto c = static_cast<unsigned char>(*p_);
        if (c == '"') {
            *out = std::string_view(start, static_cast<size_t>(p_ - start));
            ++p_;
            return true;
        }
        if (c == '\\')
            break;
        if (c < 0x20)
            return fail("control character in a string", p_);
        if (c < 0x80) {
            ++p_;
            continue;
        }
        const size_t n = utf8_sequence(p_, end_);
        if (n == 0)
            return fail("invalid UTF-8 in a string", p_);
        p_ += n;
    }
    if (p_ == end_)
        return fail("unterminated string", quote);

    const size_t out_start = decoded_.size();
    const auto emit = [this](const char* bytes, size_t n) {
        if (decoded_.size() + n > decoded_.capacity())
            return false;  // cannot happen (decoding shrinks); never reallocate under live views
        decoded_.append(bytes, n);
        return true;
    };
    if (!emit(start, static_cast<size_t>(p_ - start)))
        return fail("internal decoding error", p_);
    while (p_ < end_) {
        const auto c = static_cast<unsigned char>(*p_);
        if (c == '"') {
            *out = std::string_view(decoded_.data() + out_start, decoded_.size() - out_start);
            ++p_;
            return true;
        }
        if (c < 0x20)
            return fail("control character in a string", p_);
        size_t n = 1;
        char buf[4];
        const char* bytes = p_;
        if (c >= 0x80) {
            n = utf8_sequence(p_, end_);
            if (n == 0)
                return fail("invalid UTF-8 in a string", p_);
            p_ += n;
        } else if (c != '\\') {
            ++p_;
        } else {
            if (end_ - p_ < 2)
                return fail("unterminated string", quote);
            const char* esc = p_;
            bytes = buf;
            switch (p_[1]) {
            case '"': buf[0] = '"'; break;
            case '\\': buf[0] = '\\'; break;
            case '/': buf[0] = '/'; break;
            case 'b': buf[0] = '\b'; break;
            case 'f': buf[0] = '\f'; break;
            case 'n': buf[0] = '\n'; break;
            case 'r': buf[0] = '\r'; break;
            case 't': buf[0] = '\t'; break;
            case 'u': {
                uint32_t cp = 0;
                if (end_ - p_ < 6 || !hex4(p_ + 2, &cp))
                    return fail("invalid \\u escape", esc);
                p_ += 6;
                if (cp >= 0xdc00 && cp <= 0xdfff)
                    return fail("lone low surrogate", esc);
                if (cp >= 0xd800 && cp <= 0xdbff) {
                    uint32_t lo = 0;
                    if (end_ - p_ < 6 || p_[0] != '\\' || p_[1] != 'u' || !hex4(p_ + 2, &lo) ||
                        lo < 0xdc00 || lo > 0xdfff)
                        return fail("lone high surrogate", esc);
                    p_ += 6;
                    cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                }
                n = encode_utf8(cp, buf);
                if (!emit(bytes, n))
                    return fail("internal decoding error", esc);
                continue;
            }
            default:
                return fail("invalid escape", esc);
            }
            p_ += 2;
        }
        if (!emit(bytes, n))
            return fail("internal decoding error", p_);
    }
    return fail("unterminated string", quote);
}

bool Document::number(std::string_view key)
{
    const char* start = p_;
    if (*p_ == '-')
        ++p_;
    if (p_ == end_ || !is_digit(*p_))
        return fail("invalid number", start);
    if (*p_ == '0') {
        ++p_;
    } else {
        while (p_ < end_ && is_digit(*p_))
            ++p_;
    }
    if (p_ < end_ && *p_ == '.') {
        ++p_;
        if (p_ == end_ || !is_digit(*p_))
            return fail("invalid number", start);
        while (p_ < end_ && is_digit(*p_))
            ++p_;
    }
    if (p_ < end_ && (*p_ == 'e' || *p_ == 'E')) {
        ++p_;
        if (p_ < end_ && (*p_ == '+' || *p_ == '-'))
            ++p_;
        if (p_ == end_ || !is_digit(*p_))
            return fail("invalid number", start);
        while (p_ < end_ && is_digit(*p_))
            ++p_;
    }
    return push(Type::Number, key, std::string_view(start, static_cast<size_t>(p_ - start)));
}

bool Document::literal(std::string_view key, std::string_view word, Type type)
{
    if (static_cast<size_t>(end_ - p_) < word.size() || std::memcmp(p_, word.data(), word.size()) != 0)
        return fail("unexpected character", p_);
    p_ += word.size();
    return push(type, key, {});
}

Document::Children Document::children(const Node& n) const
{
    const auto index = static_cast<uint32_t>(&n - nodes_.data());
    return {ChildIterator(nodes_.data(), index + 1), ChildIterator(nodes_.data(), n.end)};
}

const Node* Document::find(const Node& n, std::string_view key) const
{
    if (n.type != Type::Object)
        return nullptr;
    for (const Node& c : children(n))
        if (c.key == key)
            return &c;
    return nullptr;
}

}  // namespace l7fast::auth::json
