// A minimal streaming JSON writer for l7fastctl --json: objects, arrays,
// strings (escaped, UTF-8 passed through), integers and booleans. Output is
// compact; keys appear in the order written, so the CLI's output is stable.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace l7fast::control {

// s with every byte sequence that is not valid UTF-8 (overlongs, surrogates
// and code points past U+10FFFF included) replaced by U+FFFD. D-Bus refuses
// invalid strings, and policy errors may quote bytes of a broken file.
std::string valid_utf8(std::string_view s);

class JsonWriter {
public:
    JsonWriter& begin_object();
    JsonWriter& end_object();
    JsonWriter& begin_array();
    JsonWriter& end_array();
    // Inside an object: the key of the next value.
    JsonWriter& key(std::string_view k);
    JsonWriter& value(std::string_view s);
    JsonWriter& value(const char* s) { return value(std::string_view(s)); }
    JsonWriter& value(const std::string& s) { return value(std::string_view(s)); }
    JsonWriter& value(bool b);
    JsonWriter& value(int64_t n);
    JsonWriter& value(uint64_t n);
    JsonWriter& value(double d);
    JsonWriter& null();
    template <class T>
    JsonWriter& field(std::string_view k, const T& v)
    {
        key(k);
        return value(v);
    }

    const std::string& str() const { return out_; }

    static std::string quote(std::string_view s);

private:
    void separate();

    std::string out_;
    // per open container: whether it already holds an element
    std::vector<bool> nonempty_;
    bool after_key_ = false;
};

}  // namespace l7fast::control
