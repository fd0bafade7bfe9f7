// Reads /etc/l7fast/policy.toml and its drop-in fragments into a validated
// Policy. The format is documented in docs/policy.md (l7fast.toml(5)); every
// rule there is enforced here, and every error names the file, line, column
// and key it is about, so `systemctl reload` failures are actionable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "config/Policy.hpp"

namespace l7fast::policy {

struct PolicyError {
    std::string file;
    uint32_t line = 0;    // 1-based; 0 when the error is about the file as a whole
    uint32_t column = 0;  // 1-based
    std::string key;      // e.g. `route "api".match.path_prefix`; empty for syntax errors
    std::string message;

    // "file:line:column: key: message"; the position is left out when line is
    // 0 and the key when it is empty.
    std::string str() const;
};

// A validated Policy, or the errors that prevented one (ordered by file, then
// position; never empty on failure).
class PolicyLoadResult {
public:
    explicit PolicyLoadResult(Policy policy);
    explicit PolicyLoadResult(std::vector<PolicyError> errors);

    bool ok() const { return policy_.has_value(); }
    explicit operator bool() const { return ok(); }
    // Precondition ok(); throws std::logic_error otherwise.
    const Policy& policy() const&;
    Policy&& policy() &&;
    const std::vector<PolicyError>& errors() const { return errors_; }
    // Every error's str(), one per line.
    std::string error_text() const;

private:
    std::optional<Policy> policy_;
    std::vector<PolicyError> errors_;
};

// One file's text and the name errors should call it by.
struct PolicySource {
    std::string filename;
    std::string text;
};

class PolicyLoader {
public:
    // Validation goes on past the first error so an operator can fix several
    // at once; beyond this many the rest are not reported.
    static constexpr size_t kMaxErrors = 20;
    // A policy file larger than this is refused before parsing.
    static constexpr size_t kMaxFileBytes = 16u << 20;

    // The main file, then every "*.toml" directly in dropin_dir (not
    // starting with '.') in byte-wise name order. A missing dropin_dir, or an
    // empty path, means no fragments. Never throws.
    static PolicyLoadResult load(const std::filesystem::path& main_file,
                                 const std::filesystem::path& dropin_dir);
    // One main file given as text (the embedded default, tests).
    static PolicyLoadResult load_string(std::string_view text, const std::string& pseudo_filename);
    // sources[0] is the main file, the rest are fragments in load order.
    static PolicyLoadResult load_sources(std::span<const PolicySource> sources);
};

}  // namespace l7fast::policy
