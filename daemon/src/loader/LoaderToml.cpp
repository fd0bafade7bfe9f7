// The policy loader's TOML reader and error sink (LoaderToml.hpp): the text
// of messages, error collection and ordering, positions inside strings, and
// TableReader.
#include "loader/LoaderToml.hpp"

#include <algorithm>
#include <tuple>

#include "config/Text.hpp"

namespace l7fast::policy::loader {

using text::quote;
using text::closest;

namespace {

// Errors collected before sorting; only the first kMaxErrors are reported.
constexpr size_t kMaxCollectedErrors = 1000;

bool is_bare_key(std::string_view k)
{
    return !k.empty() && std::all_of(k.begin(), k.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '_' || c == '-';
    });
}

}  // namespace

// ---- text -------------------------------------------------------------------

std::string key_text(std::string_view k)
{
    return is_bare_key(k) ? std::string(k) : quote(k);
}

std::string joined(const std::vector<std::string>& items, size_t max_items)
{
    std::string out;
    for (size_t i = 0; i < items.size() && i < max_items; i++)
        out += (i ? ", " : "") + items[i];
    if (items.size() > max_items)
        out += ", ...";
    return out;
}

std::string a_type(toml::node_type t)
{
    switch (t) {
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a floating-point number";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::date: return "a date";
    case toml::node_type::time: return "a time";
    case toml::node_type::date_time: return "a date-time";
    default: return "nothing";
    }
}

// ---- errors -------------------------------------------------------------------

void ErrorSink::add(size_t source, SourceLocation at, std::string key, std::string message)
{
    if (entries_.size() >= kMaxCollectedErrors)
        return;
    entries_.push_back({source, PolicyError{std::move(at.file), at.line, at.column,
                                            std::move(key), std::move(message)}});
}

std::vector<PolicyError> ErrorSink::take()
{
    std::stable_sort(entries_.begin(), entries_.end(), [](const Entry& a, const Entry& b) {
        return std::tie(a.source, a.error.line, a.error.column) <
               std::tie(b.source, b.error.line, b.error.column);
    });
    std::vector<PolicyError> out;
    for (size_t i = 0; i < entries_.size() && i < PolicyLoader::kMaxErrors; i++)
        out.push_back(std::move(entries_[i].error));
    return out;
}

SourceLocation FileContext::at_byte(const toml::node& n, std::string_view value, size_t offset) const
{
    SourceLocation where = at(n);
    if (where.line == 0 || where.line > doc_.line_starts.size() || where.column == 0 || offset > value.size())
        return where;
    const std::string_view text = doc_.text;
    const size_t open = doc_.line_starts[where.line - 1] + where.column - 1;
    if (open >= text.size() || (text[open] != '"' && text[open] != '\''))
        return where;
    const size_t close = open + 1 + value.size();
    if (close >= text.size() || text.substr(open + 1, value.size()) != value || text[close] != text[open])
        return where;
    if (std::any_of(value.begin(), value.begin() + static_cast<ptrdiff_t>(offset),
                    [](char c) { return static_cast<unsigned char>(c) >= 0x80; }))
        return where;
    where.column += static_cast<uint32_t>(1 + offset);
    return where;
}

// ---- TableReader --------------------------------------------------------------

TableReader::TableReader(const FileContext& cx, const toml::table& t, std::string path,
                         std::vector<std::string> allowed)
    : cx_(cx), table_(t), path_(std::move(path)), allowed_(std::move(allowed))
{
    for (auto&& [k, v] : table_) {
        if (std::find(allowed_.begin(), allowed_.end(), k.str()) != allowed_.end())
            continue;
        std::string message = "unknown key";
        if (auto guess = closest(k.str(), allowed_))
            message += " (did you mean \"" + *guess + "\"?)";
        cx_.error(cx_.at(k), child(k.str()), message + "; allowed here: " + joined(allowed_, 32));
    }
}

const char* TableReader::second_of(std::initializer_list<const char*> keys) const
{
    int seen = 0;
    for (const char* k : keys)
        if (has(k) && ++seen == 2)
            return k;
    return nullptr;
}

Located TableReader::located(std::string_view k) const
{
    const toml::node* n = table_.get(k);
    return {cx_.doc().index, n ? cx_.at(*n) : where(), child(k)};
}

void TableReader::error(std::string_view k, std::string message) const
{
    const toml::node* n = table_.get(k);
    cx_.error(n ? cx_.at(*n) : where(), child(k), std::move(message));
}

bool TableReader::is_empty_array(std::string_view k) const
{
    const toml::node* n = table_.get(k);
    return n && n->is_array() && n->as_array()->empty();
}

std::optional<std::string> TableReader::string(std::string_view k) const
{
    const toml::node* n = table_.get(k);
    if (!n)
        return std::nullopt;
    auto* v = expect<std::string>(cx_, *n, child(k), "a string");
    return v ? std::optional<std::string>(v->get()) : std::nullopt;
}

std::optional<std::string> TableReader::required_string(std::string_view k, std::string_view why) const
{
    if (!has(k)) {
        missing(k, why);
        return std::nullopt;
    }
    return string(k);
}

std::optional<bool> TableReader::boolean(std::string_view k) const
{
    const toml::node* n = table_.get(k);
    if (!n)
        return std::nullopt;
    auto* v = expect<bool>(cx_, *n, child(k), "a boolean (true or false)");
    return v ? std::optional<bool>(v->get()) : std::nullopt;
}

std::optional<int64_t> TableReader::integer(std::string_view k, int64_t lo, int64_t hi, std::string_view hint) const
{
    const toml::node* n = table_.get(k);
    if (!n)
        return std::nullopt;
    auto* v = expect<int64_t>(cx_, *n, child(k), "an integer");
    if (!v)
        return std::nullopt;
    const int64_t x = v->get();
    if (x < lo || x > hi) {
        std::string message = std::to_string(x) + " is out of range " + std::to_string(lo) + ".." +
                              std::to_string(hi);
        if (!hint.empty())
            message += " (" + std::string(hint) + ")";
        cx_.error(cx_.at(*n), child(k), message);
        return std::nullopt;
    }
    return x;
}

const toml::table* TableReader::table(std::string_view k) const
{
    const toml::node* n = table_.get(k);
    return n ? expect<toml::table>(cx_, *n, child(k), "a table") : nullptr;
}

const toml::array* TableReader::array(std::string_view k, std::string_view expected) const
{
    const toml::node* n = table_.get(k);
    return n ? expect<toml::array>(cx_, *n, child(k), expected) : nullptr;
}

std::optional<std::vector<TableReader::ListItem>> TableReader::string_list(std::string_view k,
                                                                          std::string_view empty_hint) const
{
    const toml::node* n = table_.get(k);
    if (!n)
        return std::nullopt;
    const size_t src = cx_.doc().index;
    if (auto* s = n->as_string())
        return std::vector<ListItem>{{s->get(), {src, cx_.at(*n), child(k)}}};
    auto* arr = expect<toml::array>(cx_, *n, child(k), "a string or an array of strings");
    if (!arr)
        return std::nullopt;
    if (arr->empty()) {
        cx_.error(cx_.at(*n), child(k), "empty list; " + std::string(empty_hint));
        return std::nullopt;
    }
    std::vector<ListItem> items;
    bool ok = true;
    for (size_t i = 0; i < arr->size(); i++) {
        const std::string path = child(k) + "[" + std::to_string(i) + "]";
        const toml::node& e = *arr->get(i);
        if (auto* s = expect<std::string>(cx_, e, path, "a string"))
            items.push_back({s->get(), {src, cx_.at(e), path}});
        else
            ok = false;
    }
    return ok ? std::optional(std::move(items)) : std::nullopt;
}

std::vector<const toml::table*> TableReader::tables(std::string_view k, std::string_view expected) const
{
    std::vector<const toml::table*> out;
    const toml::array* arr = array(k, expected);
    if (!arr)
        return out;
    for (size_t i = 0; i < arr->size(); i++) {
        const toml::node& e = *arr->get(i);
        if (auto* t = expect<toml::table>(cx_, e, child(k) + "[" + std::to_string(i) + "]", "a table"))
            out.push_back(t);
        else
            out.push_back(nullptr);
    }
    return out;
}

std::string index_path(const TableReader& r, std::string_view k, size_t i)
{
    return r.child(k) + "[" + std::to_string(i) + "]";
}

std::vector<const toml::table*> bounded_tables(const TableReader& r, std::string_view k, std::string_view expected,
                                               std::string_view empty_hint, size_t max)
{
    std::vector<const toml::table*> out = r.tables(k, expected);
    if (r.is_empty_array(k))
        r.error(k, "empty list; " + std::string(empty_hint));
    if (out.size() > max) {
        r.error(k, std::to_string(out.size()) + " entries; at most " + std::to_string(max));
        out.clear();
    }
    return out;
}

}  // namespace l7fast::policy::loader
