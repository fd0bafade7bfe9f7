// The safe regular expressions of path_regex: a small, strict subset that
// compiles to a DFA of at most 256 states, so matching is one table lookup
// per byte (linear time, whatever the pattern and the path). The table is
// laid out for bpf/include/l7_dfa.h, a runner that compiles as BPF and
// natively; no data-plane program runs it yet: a route with path_regex is
// placed in user space (PolicyCompiler).
//
// The subset (whole-path match: the pattern is implicitly anchored at both
// ends). The alphabet is visible ASCII, 0x21..0x7e: the bytes a request
// target can hold (the HTTP parser refuses any other); other bytes never
// match.
//
//   x          a visible ASCII character other than  \ . [ ] ( ) { } * + ? | ^ $
//              matches itself
//   \c         c one of  . \ / - [ ] ( ) { } * + ? | ^ $  matches c
//   .          any visible ASCII character (including '/')
//   [abc]      one of the listed characters; ranges [a-z0-9]; '-' is literal
//              first or last ([-a], [a-]); inside a class every visible
//              character but  \ ] [  is literal, those three are written \\ \] \[,
//              and any escape above may be used
//   [^/]       any visible ASCII character not listed
//   (r)        grouping (no capture semantics)
//   r|s        alternation (lowest precedence)
//   r* r+ r?   zero or more, one or more, zero or one
//   r{m} r{m,n} r{m,}   m..n repetitions, 0 <= m <= n <= 32 (r{m,}: m <= 32)
//
// Refused, each with a reason and the byte offset in the pattern: ^ and $
// (anchoring is implicit), back-references \1, class escapes \d \w \s (write
// [0-9] etc.), any other escape, lazy or possessive quantifiers (*? +?
// ??), a quantifier on nothing or on a quantifier, lookaround and other (?
// groups, empty patterns, empty alternatives and groups, empty classes [] and
// [^], reversed ranges, POSIX classes, unescaped ] } outside a class,
// spaces, control and non-ASCII bytes, groups nested deeper than 32,
// patterns longer than 1024 bytes, and patterns whose automaton is too big:
// more than 256 DFA states after minimisation (e.g. "(a|b)*a(a|b){7}"), or
// intermediate limits in SafeRegex.cpp that bound compile time.
//
// For the differential tests, every accepted pattern means what the same
// text means to ECMAScript (std::regex) matching the whole subject, on
// subjects of visible ASCII.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace l7fast::policy {

class SafeRegex {
public:
    static constexpr size_t kMaxPatternBytes = 1024;
    static constexpr uint32_t kMaxRepeat = 32;
    static constexpr size_t kMaxStates = 256;  // DFA states, the dead state included

    // The compiled DFA, or nullopt with a reason in *why and the byte offset
    // of the problem in *error_offset (either pointer may be null).
    static std::optional<SafeRegex> compile(std::string_view pattern, std::string* why,
                                            size_t* error_offset);

    // True if the whole of `text` matches.
    bool full_match(std::string_view text) const;

    const std::string& pattern() const { return pattern_; }

    // ---- the DFA, in the form bpf/include/l7_dfa.h runs -----------------------
    // byte -> class, 256 entries; class 0 holds the bytes no part of the
    // pattern matches (at least everything outside 0x21..0x7e)
    const std::vector<uint8_t>& byte_class() const { return byte_class_; }
    uint16_t n_classes() const { return n_classes_; }
    uint16_t n_states() const { return n_states_; }
    // next state = transitions()[state * n_classes() + class]
    const std::vector<uint16_t>& transitions() const { return trans_; }
    // state s accepts iff bit s % 8 of accept()[s / 8]; (n_states + 7) / 8 bytes
    const std::vector<uint8_t>& accept() const { return accept_; }
    bool accepting(uint16_t state) const { return (accept_[state / 8] >> (state % 8)) & 1; }
    // dead_state() is 0: no input leaves it and it never accepts; the start
    // state is 1 unless the pattern can never match anything.
    uint16_t start_state() const { return start_; }
    uint16_t dead_state() const { return 0; }
    // l7_dfa.h's tables hold it (L7_DFA_MAX_STATES, L7_DFA_TRANS_MAX).
    bool fits_kernel() const;

private:
    std::string pattern_;
    std::vector<uint8_t> byte_class_;
    std::vector<uint16_t> trans_;
    std::vector<uint8_t> accept_;
    uint16_t n_classes_ = 0;
    uint16_t n_states_ = 0;
    uint16_t start_ = 0;
};

}  // namespace l7fast::policy
