// The policy loader's view of a TOML file: the error sink every message goes
// through, one file's context (where a node was written), and TableReader,
// typed access to the keys of one table that reports unknown keys, wrong
// types and values out of range. Internal to the policy loader
// (PolicyLoader.cpp, Loader*.cpp, Load*.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <toml++/toml.h>

#include "config/Policy.hpp"
#include "loader/PolicyLoader.hpp"

namespace l7fast::policy::loader {

// ---- text -------------------------------------------------------------------

// A key as a key path writes it: bare when TOML allows, quoted otherwise.
std::string key_text(std::string_view k);
// The first max_items items, comma-separated, then ", ..." when there are more.
std::string joined(const std::vector<std::string>& items, size_t max_items = 12);
// "a table", "an integer", ...: for "expected X, got Y".
std::string a_type(toml::node_type t);

// ---- errors -------------------------------------------------------------------

class ErrorSink {
public:
    void add(size_t source, SourceLocation at, std::string key, std::string message);
    bool empty() const { return entries_.empty(); }

    // By file (load order), then position; at most kMaxErrors.
    std::vector<PolicyError> take();

private:
    struct Entry {
        size_t source;
        PolicyError error;
    };
    std::vector<Entry> entries_;
};

// A parsed file.
struct Document {
    size_t index = 0;  // load order; 0 is the main file
    std::string file;
    std::string_view text;
    std::vector<size_t> line_starts;  // byte offset of each line, from line 1
    toml::table root;
};

// Reports errors about one document's nodes.
class FileContext {
public:
    FileContext(const Document& doc, ErrorSink& sink) : doc_(doc), sink_(sink) {}

    const Document& doc() const { return doc_; }
    SourceLocation at(const toml::node& n) const { return at(n.source()); }
    SourceLocation at(const toml::key& k) const { return at(k.source()); }
    // The position of byte `offset` of the string value `n` when it is
    // written on one line without escapes and is ASCII up to there (so a
    // column is a byte); otherwise the position of the value.
    SourceLocation at_byte(const toml::node& n, std::string_view value, size_t offset) const;
    void error(const SourceLocation& where, std::string key, std::string message) const
    {
        sink_.add(doc_.index, where, std::move(key), std::move(message));
    }

private:
    SourceLocation at(const toml::source_region& r) const { return {doc_.file, r.begin.line, r.begin.column}; }

    const Document& doc_;
    ErrorSink& sink_;
};

// Where something was written, with the key path errors about it use.
struct Located {
    size_t source = 0;
    SourceLocation at;
    std::string key;
};

template <class T>
auto expect(const FileContext& cx, const toml::node& n, const std::string& path, std::string_view expected)
{
    auto* v = n.as<T>();
    if (!v)
        cx.error(cx.at(n), path, "expected " + std::string(expected) + ", got " + a_type(n.type()));
    return v;
}

// Typed access to the keys of one table. Keys not in `allowed` are reported
// when the reader is made: unknown keys are errors, never ignored.
class TableReader {
public:
    TableReader(const FileContext& cx, const toml::table& t, std::string path,
                std::vector<std::string> allowed);

    const FileContext& context() const { return cx_; }
    const std::string& path() const { return path_; }
    std::string child(std::string_view k) const
    {
        return path_.empty() ? key_text(k) : path_ + "." + key_text(k);
    }
    SourceLocation where() const { return cx_.at(table_); }
    bool has(std::string_view k) const { return table_.get(k) != nullptr; }
    const toml::node* node(std::string_view k) const { return table_.get(k); }
    // The first of `keys` written here after another of them, to report "give
    // only one of"; nullptr when at most one is present.
    const char* second_of(std::initializer_list<const char*> keys) const;
    Located located(std::string_view k) const;

    void error(std::string_view k, std::string message) const;
    void error_here(std::string message) const { cx_.error(where(), path_, std::move(message)); }
    bool is_empty_array(std::string_view k) const;
    void missing(std::string_view k, std::string_view why) const
    {
        cx_.error(where(), child(k), "missing; " + std::string(why));
    }

    std::optional<std::string> string(std::string_view k) const;
    std::optional<std::string> required_string(std::string_view k, std::string_view why) const;
    std::optional<bool> boolean(std::string_view k) const;
    std::optional<int64_t> integer(std::string_view k, int64_t lo, int64_t hi, std::string_view hint = {}) const;
    const toml::table* table(std::string_view k) const;
    const toml::array* array(std::string_view k, std::string_view expected) const;

    // A string, or an array of strings: each element with its key path.
    struct ListItem {
        std::string value;
        Located where;
    };
    std::optional<std::vector<ListItem>> string_list(std::string_view k, std::string_view empty_hint) const;

    // The elements of an array of tables (`[[x]]` or `[{...}, {...}]`).
    std::vector<const toml::table*> tables(std::string_view k, std::string_view expected) const;

private:
    const FileContext& cx_;
    const toml::table& table_;
    std::string path_;
    std::vector<std::string> allowed_;
};

// `k[i]`: the key path of element i of array `k`.
std::string index_path(const TableReader& r, std::string_view k, size_t i);

// An array of tables `k`, each read with its own TableReader (nullptr
// entries are elements that are not tables, already reported). An empty
// array is reported with `empty_hint`, a longer one than `max` too.
std::vector<const toml::table*> bounded_tables(const TableReader& r, std::string_view k, std::string_view expected,
                                               std::string_view empty_hint, size_t max);

}  // namespace l7fast::policy::loader
