// A strict JSON reader (RFC 8259) for JOSE headers, JWT payloads and JWKS
// files. Stricter than the RFC where JOSE needs it: a member name twice in one
// object is an error (RFC 7515 §4, RFC 7519 §4: a JWT with duplicate names
// must be rejected, or two parsers could read different claims), strings
// must be UTF-8 and \u escapes must not leave a lone surrogate, and depth,
// node count and size are bounded because every input is hostile.
//
// The document is a flat array of nodes in document order; a container's
// children follow it and `end` skips its subtree. Strings without escapes
// are views into the input, so the input must outlive the document; escaped
// strings are decoded into the document's own buffer. A Document can be
// reused: parse() keeps the buffers' capacity, so parsing in steady state
// does not allocate.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace l7fast::auth::json {

enum class Type : uint8_t { Null, False, True, Number, String, Array, Object };

struct Node {
    Type type = Type::Null;
    uint32_t end = 0;       // index one past the last node of this value's subtree
    std::string_view key;   // the member name (decoded) when the parent is an object
    std::string_view text;  // String: the decoded value; Number: the text as written
};

struct Limits {
    size_t max_bytes = 65536;
    uint32_t max_depth = 16;    // nested arrays and objects, the outermost one counting 1
    uint32_t max_nodes = 4096;  // values, containers included
};

class Document {
public:
    class ChildIterator {
    public:
        ChildIterator(const Node* nodes, uint32_t index) : nodes_(nodes), index_(index) {}
        const Node& operator*() const { return nodes_[index_]; }
        const Node* operator->() const { return nodes_ + index_; }
        ChildIterator& operator++()
        {
            index_ = nodes_[index_].end;
            return *this;
        }
        bool operator==(const ChildIterator& o) const { return index_ == o.index_; }

    private:
        const Node* nodes_;
        uint32_t index_;
    };

    struct Children {
        ChildIterator first, last;
        ChildIterator begin() const { return first; }
        ChildIterator end() const { return last; }
    };

    // False when `text` is not one JSON value within `limits`; error() then
    // says why and error_offset() where.
    bool parse(std::string_view text, const Limits& limits = {});

    std::string_view error() const { return error_; }
    size_t error_offset() const { return error_offset_; }

    // Only after a successful parse.
    const Node& root() const { return nodes_.front(); }
    // The members of an object or the elements of an array, in order; empty
    // for scalars. `n` must be a node of this document.
    Children children(const Node& n) const;
    // The member called `key` of object `n`, nullptr if none.
    const Node* find(const Node& n, std::string_view key) const;

private:
    bool fail(const char* why, const char* at);
    bool value(std::string_view key, uint32_t depth);
    bool object(std::string_view key, uint32_t depth);
    bool array(std::string_view key, uint32_t depth);
    bool string(std::string_view* out);
    bool number(std::string_view key);
    bool literal(std::string_view key, std::string_view word, Type type);
    bool push(Type type, std::string_view key, std::string_view text);
    void skip_ws();

    std::vector<Node> nodes_;
    std::string decoded_;                // escaped strings, decoded; never reallocated during a parse
    std::vector<std::string_view> keys_; // member names of the objects being parsed (duplicate check)
    const char* begin_ = nullptr;
    const char* p_ = nullptr;
    const char* end_ = nullptr;
    Limits limits_;
    std::string_view error_;
    size_t error_offset_ = 0;
};

// Whether `s` is well-formed UTF-8 (RFC 3629: no overlongs, no surrogates,
// nothing past U+10FFFF).
bool valid_utf8(std::string_view s);

}  // namespace l7fast::auth::json
