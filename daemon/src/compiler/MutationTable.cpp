// The data plane's table for a request header mutation
// (compile_request_mutation, PolicyCompiler.hpp): with it the kernel changes a
// request head's fields exactly as mutate_request_head (Mutation.hpp) does.
#include "compiler/PolicyCompiler.hpp"

#include <algorithm>
#include <cstring>

#include "common/KernelHash.hpp"
#include "config/Text.hpp"

namespace l7fast::policy {

using text::lower;

RequestMutationTable compile_request_mutation(const HeaderMutation& m,
                                              std::span<const std::string> forwarded_names)
{
    RequestMutationTable out;
    std::vector<std::string> names;
    const auto remove = [&](std::string_view name) {
        std::string n = lower(name);
        if (std::find(names.begin(), names.end(), n) == names.end())
            names.push_back(std::move(n));
    };
    for (const std::string& n : m.remove)
        remove(n);
    for (const HeaderValue& h : m.set)
        remove(h.name);
    for (const std::string& n : forwarded_names)
        remove(n);
    if (names.size() > L7_MUT_MAX_REMOVE) {
        out.reason = "header mutation removes " + std::to_string(names.size()) +
                     " header names, the kernel at most " + std::to_string(L7_MUT_MAX_REMOVE) +
                     " (remove, set and forwarded claims count)";
        return out;
    }
    for (const std::string& n : names)
        if (n.size() > L7_MAX_HDR_NAME) {
            out.reason = "header mutation names a header longer than " + std::to_string(L7_MAX_HDR_NAME) +
                         " bytes (" + n.substr(0, 16) + "...)";
            return out;
        }

    // the lines as Mutation.cpp writes them: set first, then add
    std::string lines;
    const auto line = [&](const HeaderValue& h) { lines += lower(h.name) + ": " + h.value + "\r\n"; };
    for (const HeaderValue& h : m.set)
        line(h);
    const size_t set_len = lines.size();
    for (const HeaderValue& h : m.add)
        line(h);
    if (lines.size() > L7_MUT_MAX_ADD) {
        out.reason = "header mutation adds " + std::to_string(lines.size()) +
                     " bytes of header lines, the kernel at most " + std::to_string(L7_MUT_MAX_ADD);
        return out;
    }

    l7_mutation t{};
    t.n_remove = static_cast<__u16>(names.size());
    for (size_t i = 0; i < names.size(); i++) {
        t.remove_hash[i] = kernel::header_name_hash(names[i]);
        t.remove_len[i] = static_cast<__u16>(names[i].size());
        std::memcpy(t.remove_name[i], names[i].data(), names[i].size());
    }
    t.set_len = static_cast<__u16>(set_len);
    t.add_len = static_cast<__u16>(lines.size());
    std::memcpy(t.add, lines.data(), lines.size());
    out.table = t;
    return out;
}

}  // namespace l7fast::policy
