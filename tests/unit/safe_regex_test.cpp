// The safe regex subset (daemon/src/semantics/SafeRegex.cpp) and the kernel's
// DFA runner (bpf/include/l7_dfa.h): accepted and refused patterns with
// their error offsets, matching, the state cap, compile time of patterns that
// are pathological for backtracking engines, and two differential tests:
// SafeRegex against std::regex (ECMAScript, whole-subject match) on random
// patterns of the subset, and the C runner against SafeRegex on random
// subjects.
#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include "l7_dfa.h"
#include "semantics/SafeRegex.hpp"

using l7fast::policy::SafeRegex;

namespace {

SafeRegex must(const std::string& pattern)
{
    std::string why;
    size_t off = 0;
    auto re = SafeRegex::compile(pattern, &why, &off);
    EXPECT_TRUE(re) << pattern << ": " << why << " at " << off;
    return re ? std::move(*re) : *SafeRegex::compile("x", nullptr, nullptr);
}

// The DFA as the data plane holds it: arrays of the kernel's capacities.
class KernelDfa {
public:
    explicit KernelDfa(const SafeRegex& re)
        : cls_(re.byte_class()), trans_(L7_DFA_TRANS_MAX, 0), accept_(L7_DFA_ACCEPT_BYTES, 0),
          buf_(L7_WS_BUF + L7_WINDOW_SLACK, 0)
    {
        std::copy(re.transitions().begin(), re.transitions().end(), trans_.begin());
        std::copy(re.accept().begin(), re.accept().end(), accept_.begin());
        d_.byte_class = cls_.data();
        d_.trans = trans_.data();
        d_.accept = accept_.data();
        d_.n_classes = re.n_classes();
        d_.start = re.start_state();
        d_.dead = re.dead_state();
    }

    // the subject at an offset inside a request-sized window, as the
    // kernel finds a path in the request head
    bool match(const std::string& s, uint32_t off = 4)
    {
        std::fill(buf_.begin(), buf_.begin() + off + s.size() + 16, 'a');
        std::copy(s.begin(), s.end(), buf_.begin() + off);
        const l7_window w{buf_.data(), static_cast<__u32>(off + s.size() + 11), 0};
        return l7_dfa_match(&d_, &w, off, static_cast<__u32>(s.size())) != 0;
    }

private:
    std::vector<__u8> cls_;
    std::vector<__u16> trans_;
    std::vector<__u8> accept_;
    std::vector<__u8> buf_;
    l7_dfa d_{};
};

}  // namespace

TEST(SafeRegex, MatchesWholePaths)
{
    const auto api = must("/api/v[0-9]+/users/[^/]+");
    EXPECT_TRUE(api.full_match("/api/v1/users/alice"));
    EXPECT_TRUE(api.full_match("/api/v42/users/a.b-c"));
    EXPECT_FALSE(api.full_match("/api/v1/users/alice/"));    // anchored at the end
    EXPECT_FALSE(api.full_match("x/api/v1/users/alice"));    // and at the start
    EXPECT_FALSE(api.full_match("/api/v/users/alice"));
    EXPECT_FALSE(api.full_match("/api/v1/users/"));

    const auto images = must(".*/[^/]*\\.(png|jpe?g|gif)");
    EXPECT_TRUE(images.full_match("/static/a/b.png"));
    EXPECT_TRUE(images.full_match("/x.jpeg"));
    EXPECT_TRUE(images.full_match("/x.jpg"));
    EXPECT_FALSE(images.full_match("/x.png/"));
    EXPECT_FALSE(images.full_match("/xpng"));

    const auto counted = must("/(ab){2,3}[-_]?x{3}");
    EXPECT_TRUE(counted.full_match("/ababxxx"));
    EXPECT_TRUE(counted.full_match("/ababab-xxx"));
    EXPECT_FALSE(counted.full_match("/abxxx"));
    EXPECT_FALSE(counted.full_match("/abababab_xxx"));
    EXPECT_FALSE(counted.full_match("/ababxx"));

    const auto at_least = must("/a{2,}");
    EXPECT_FALSE(at_least.full_match("/a"));
    EXPECT_TRUE(at_least.full_match("/aa"));
    EXPECT_TRUE(at_least.full_match("/aaaaaaa"));

    const auto escapes = must("\\.\\\\\\/\\-\\[\\]\\(\\)\\{\\}\\*\\+\\?\\|\\^\\$");
    EXPECT_TRUE(escapes.full_match(".\\/-[](){}*+?|^$"));

    const auto klass = must("[-a][a-][\\]\\[][.*+?(){}|^$][^-/]");
    EXPECT_TRUE(klass.full_match("-a].z"));
    EXPECT_TRUE(klass.full_match("a-[$!"));
    EXPECT_FALSE(klass.full_match("aa]./"));
    EXPECT_FALSE(klass.full_match("aa].-"));

    const auto empty_only = must("a{0}");
    EXPECT_TRUE(empty_only.full_match(""));
    EXPECT_FALSE(empty_only.full_match("a"));
}

// '.' and negated classes range over visible ASCII, the bytes a request
// target can hold.
TEST(SafeRegex, OnlyVisibleAsciiEverMatches)
{
    const auto any = must(".*");
    EXPECT_TRUE(any.full_match("!~/azAZ09"));
    EXPECT_FALSE(any.full_match("a b"));
    EXPECT_FALSE(any.full_match("a\tb"));
    EXPECT_FALSE(any.full_match(std::string("a\0b", 3)));
    EXPECT_FALSE(any.full_match("\x7f"));
    EXPECT_FALSE(any.full_match("caf\xc3\xa9"));
    const auto not_slash = must("[^/]+");
    EXPECT_TRUE(not_slash.full_match("abc"));
    EXPECT_FALSE(not_slash.full_match("a\x80"));
    EXPECT_EQ(not_slash.byte_class()[0], 0);
    EXPECT_EQ(not_slash.byte_class()[' '], 0);
    EXPECT_EQ(not_slash.byte_class()[0xff], 0);
}

TEST(SafeRegex, RefusesOutsideTheSubsetWithOffsets)
{
    struct Bad {
        std::string pattern;
        size_t offset;
        std::string reason;  // a part of the message
    };
    const std::vector<Bad> bad = {
        {"", 0, "empty pattern"},
        {"a|", 1, "empty alternative"},
        {"|a", 0, "empty alternative"},
        {"(a|)", 2, "empty alternative"},
        {"/x()", 3, "empty group"},
        {"/(a", 1, "missing ')'"},
        {"/a)", 2, "unmatched ')'"},
        {"*a", 0, "nothing to repeat"},
        {"/(*a)", 2, "nothing to repeat"},
        {"/({2})", 2, "nothing to repeat"},
        {"a**", 2, "cannot follow"},
        {"a+{2}", 2, "cannot follow"},
        {"a*?", 2, "lazy"},
        {"a+?", 2, "lazy"},
        {"a?+", 2, "possessive"},
        {"/a{33}", 2, "above 32"},
        {"/a{1,40}", 2, "above 32"},
        {"/a{3,2}", 2, "n < m"},
        {"/a{,3}", 2, "'{' must be written"},
        {"/a{x}", 2, "'{' must be written"},
        {"/a}", 2, "'}' must be written"},
        {"/a]", 2, "']' must be written"},
        {"/[a", 1, "missing ']'"},
        {"/[]", 1, "empty class"},
        {"/[^]", 1, "empty class"},
        {"/[z-a]", 2, "reversed range"},
        {"/[a-z-9]", 5, "'-' must be first or last"},
        {"/[[:alpha:]]", 2, "'[' inside a class"},
        {"/[^!-~]", 1, "matches nothing"},
        {"/\\d+", 1, "\\d is not supported"},
        {"/\\w", 1, "\\w is not supported"},
        {"/\\bx", 1, "word boundaries"},
        {"/(a)\\1", 4, "back-references"},
        {"/\\n", 1, "unsupported escape \\n"},
        {"/a\\", 2, "at the end"},
        {"/(?:a)", 2, "(? groups"},
        {"/(?=a)", 2, "(? groups"},
        {"/(?<n>a)", 2, "(? groups"},
        {"^/a", 0, "'^' is not needed"},
        {"/a$", 2, "'$' is not needed"},
        {"/a b", 2, "space"},
        {"/a\tb", 2, "byte 0x09"},
        {"/caf\xc3\xa9", 4, "byte 0xc3"},
        {"/[a\x01]", 3, "byte 0x01"},
        {std::string(33, '(') + "a" + std::string(33, ')'), 32, "nested deeper"},
        {"/" + std::string(1024, 'a'), 1024, "longer than 1024"},
    };
    for (const auto& b : bad) {
        std::string why;
        size_t off = 12345;
        EXPECT_FALSE(SafeRegex::compile(b.pattern, &why, &off)) << b.pattern;
        EXPECT_EQ(off, b.offset) << b.pattern << ": " << why;
        EXPECT_NE(why.find(b.reason), std::string::npos) << b.pattern << ": " << why;
    }
    // null out-parameters are allowed
    EXPECT_FALSE(SafeRegex::compile("(", nullptr, nullptr));
}

TEST(SafeRegex, StateCapRefusesExponentialPatterns)
{
    // the last-but-n character is an 'a': 2^(n+1) DFA states
    std::string why;
    size_t off = 99;
    EXPECT_TRUE(SafeRegex::compile("(a|b)*a(a|b){6}", &why, &off));
    EXPECT_FALSE(SafeRegex::compile("(a|b)*a(a|b){7}", &why, &off));
    EXPECT_NE(why.find("limit 256"), std::string::npos) << why;
    EXPECT_EQ(off, 0u);
    EXPECT_FALSE(SafeRegex::compile("(a|b)*a(a|b){20}", &why, &off));
    // a long chain: as many states as characters
    EXPECT_TRUE(SafeRegex::compile("/a{32}b{32}c{32}d{32}e{32}f{32}g{32}", &why, &off)) << why;
    EXPECT_FALSE(SafeRegex::compile("/a{32}b{32}c{32}d{32}e{32}f{32}g{32}h{32}", &why, &off));
    // nested counts are refused before any automaton is built, at the
    // repetition that blows up
    EXPECT_FALSE(SafeRegex::compile("/(((a{32}){32}){32})", &why, &off));
    EXPECT_NE(why.find("expands to more than"), std::string::npos) << why;
    EXPECT_EQ(off, 15u);  // the third '{'
}

// Patterns that make backtracking engines exponential either compile to a
// few states or are refused, and either way quickly.
TEST(SafeRegex, PathologicalPatternsCompileFastOrAreRefused)
{
    const std::vector<std::string> patterns = {
        "(a|a)*",  "(a*)*b",   "(.*a){20}",  "(a+)+b",       "(a|aa)*b",       "(.*.*.*.*)*x{32}",
        "(.*){32}", "([^/]*/){32}", "(a|b)*a(a|b){12}", "((a{32}){32}){3}", "((a|b){32}){32}",
        "([a-z]{32}){32}", "(.{32}){8}x", "(((.*)*)*)*", "(x+x+)+y", "(.*a.*b){32}",
    };
    for (const auto& p : patterns) {
        const auto t0 = std::chrono::steady_clock::now();
        std::string why;
        size_t off = 0;
        auto re = SafeRegex::compile(p, &why, &off);
        const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::steady_clock::now() - t0)
                            .count();
        // The bound is the DFA's state limit (checked below), not the clock:
        // this only catches an exponential blow-up (hours), not slowness on
        // a loaded machine (speed belongs in the benchmark).
        EXPECT_LT(ms, 5000) << p;
        if (re) {
            EXPECT_LE(re->n_states(), SafeRegex::kMaxStates);
            // linear matching on a subject that defeats backtracking
            const std::string subject(100000, 'a');
            const auto t1 = std::chrono::steady_clock::now();
            (void)re->full_match(subject);
            EXPECT_LT(std::chrono::steady_clock::now() - t1, std::chrono::milliseconds(5000)) << p;
        }
    }
    EXPECT_EQ(must("(a|a)*").n_states(), 2);
    EXPECT_EQ(must("(a*)*b").n_states(), 3);
    EXPECT_EQ(must("(.*a){20}").n_states(), 22);
    EXPECT_TRUE(must("(a|a)*").full_match("aaaa"));
    EXPECT_FALSE(must("(a*)*b").full_match(std::string(5000, 'a')));
    EXPECT_TRUE(must("(.*a){20}").full_match(std::string(20, 'a')));
    EXPECT_FALSE(must("(.*a){20}").full_match(std::string(19, 'a') + "b"));
}

TEST(SafeRegex, TablesHaveTheDocumentedShape)
{
    const auto re = must("/(foo|bar)/[0-9]+");
    ASSERT_EQ(re.byte_class().size(), 256u);
    EXPECT_EQ(re.transitions().size(), static_cast<size_t>(re.n_states()) * re.n_classes());
    EXPECT_EQ(re.accept().size(), (re.n_states() + 7u) / 8u);
    EXPECT_EQ(re.dead_state(), 0);
    EXPECT_EQ(re.start_state(), 1);
    EXPECT_FALSE(re.accepting(re.dead_state()));
    for (uint16_t c = 0; c < re.n_classes(); c++)
        EXPECT_EQ(re.transitions()[c], 0);  // nothing leaves the dead state
    EXPECT_TRUE(re.fits_kernel());
    // minimal and canonically numbered: the same language, the same tables
    const auto again = must("/(foo|bar|foo)/[0-9][0-9]*");
    EXPECT_EQ(again.transitions(), re.transitions());
    EXPECT_EQ(again.accept(), re.accept());
    // dead, start, "/", "/f", "/b", "/fo", "/ba", "/foo"="/bar", "/foo/", digits
    EXPECT_EQ(re.n_states(), 10);
}

namespace {

// A random pattern of the subset over the subject alphabet "abc/-.x", with
// a generator of strings it matches.
struct Expr {
    enum Kind { Leaf, Cat, Alt, Rep } kind = Leaf;
    std::string text;   // Leaf: the pattern text
    std::string chars;  // Leaf: the subject characters it matches
    std::vector<Expr> kids;
    int min = 0, max = 0;  // Rep; max -1: unbounded
};

const std::string kAlphabet = "abc/-.x";

Expr random_expr(std::mt19937& rng, int depth)
{
    auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
    Expr e;
    if (depth <= 0 || pick(10) < 4) {
        struct L {
            const char* text;
            const char* chars;
        };
        static const L leaves[] = {
            {"a", "a"},       {"b", "b"},      {"c", "c"},       {"/", "/"},      {"\\/", "/"},
            {"-", "-"},       {"\\-", "-"},    {"\\.", "."},     {".", "abc/-.x"}, {"[ab]", "ab"},
            {"[^a]", "bc/-.x"}, {"[a-c]", "abc"}, {"[-/]", "-/"}, {"[^/.]", "abc-x"}, {"[.a]", ".a"},
            {"[\\-a]", "-a"}, {"[^-]", "abc/.x"},
        };
        const auto& l = leaves[pick(sizeof(leaves) / sizeof(leaves[0]))];
        e.text = l.text;
        e.chars = l.chars;
        return e;
    }
    switch (pick(3)) {
    case 0:
        e.kind = Expr::Cat;
        for (int i = 0, n = 2 + pick(2); i < n; i++)
            e.kids.push_back(random_expr(rng, depth - 1));
        break;
    case 1:
        e.kind = Expr::Alt;
        for (int i = 0, n = 2 + pick(2); i < n; i++)
            e.kids.push_back(random_expr(rng, depth - 1));
        break;
    default: {
        e.kind = Expr::Rep;
        e.kids.push_back(random_expr(rng, depth - 1));
        static const int q[][2] = {{0, -1}, {1, -1}, {0, 1}, {2, 2}, {0, 2}, {1, 3}, {2, -1}, {0, 0}};
        const auto& b = q[pick(8)];
        e.min = b[0];
        e.max = b[1];
        break;
    }
    }
    return e;
}

std::string render(const Expr& e)
{
    switch (e.kind) {
    case Expr::Leaf:
        return e.text;
    case Expr::Cat: {
        std::string s;
        for (const auto& k : e.kids)
            s += k.kind == Expr::Alt ? "(" + render(k) + ")" : render(k);
        return s;
    }
    case Expr::Alt: {
        std::string s;
        for (size_t i = 0; i < e.kids.size(); i++)
            s += (i ? "|" : "") + render(e.kids[i]);
        return s;
    }
    case Expr::Rep: {
        const auto& k = e.kids[0];
        std::string s = k.kind == Expr::Leaf ? render(k) : "(" + render(k) + ")";
        if (e.min == 0 && e.max == -1)
            return s + "*";
        if (e.min == 1 && e.max == -1)
            return s + "+";
        if (e.min == 0 && e.max == 1)
            return s + "?";
        if (e.max == -1)
            return s + "{" + std::to_string(e.min) + ",}";
        if (e.min == e.max)
            return s + "{" + std::to_string(e.min) + "}";
        return s + "{" + std::to_string(e.min) + "," + std::to_string(e.max) + "}";
    }
    }
    return {};
}

std::string sample(const Expr& e, std::mt19937& rng)
{
    switch (e.kind) {
    case Expr::Leaf:
        return std::string(1, e.chars[rng() % e.chars.size()]);
    case Expr::Cat: {
        std::string s;
        for (const auto& k : e.kids)
            s += sample(k, rng);
        return s;
    }
    case Expr::Alt:
        return sample(e.kids[rng() % e.kids.size()], rng);
    case Expr::Rep: {
        const int n = e.min + static_cast<int>(rng() % static_cast<unsigned>((e.max == -1 ? 3 : e.max - e.min) + 1));
        std::string s;
        for (int i = 0; i < n; i++)
            s += sample(e.kids[0], rng);
        return s;
    }
    }
    return {};
}

std::vector<std::string> subjects(const Expr& e, std::mt19937& rng)
{
    std::vector<std::string> out;
    for (int i = 0; i < 12; i++) {
        std::string s = sample(e, rng);
        if (s.size() > 24)
            continue;
        out.push_back(s);
        if (!s.empty()) {  // near misses
            std::string t = s;
            t[rng() % t.size()] = kAlphabet[rng() % kAlphabet.size()];
            out.push_back(t);
            out.push_back(s.substr(0, s.size() - 1));
        }
        out.push_back(s + kAlphabet[rng() % kAlphabet.size()]);
    }
    for (int i = 0; i < 12; i++) {
        std::string s;
        for (int n = static_cast<int>(rng() % 9); n > 0; n--)
            s += kAlphabet[rng() % kAlphabet.size()];
        out.push_back(s);
    }
    return out;
}

}  // namespace

// Every pattern of the subset means what ECMAScript says it means, matched
// against the whole subject (std::regex_match).
TEST(SafeRegex, AgreesWithStdRegexOnRandomPatterns)
{
    std::mt19937 rng(2026);
    size_t compared = 0, matched = 0;
    for (int i = 0; i < 1500; i++) {
        const Expr e = random_expr(rng, 4);
        const std::string pattern = render(e);
        std::string why;
        size_t off = 0;
        auto re = SafeRegex::compile(pattern, &why, &off);
        if (!re) {
            // only the state cap may refuse what the generator writes
            ASSERT_NE(why.find("states"), std::string::npos) << pattern << ": " << why;
            continue;
        }
        // libstdc++'s polynomial (breadth-first) executor: the backtracking
        // one is exponential on some of these patterns
        const std::regex ecma(pattern, std::regex::ECMAScript | std::regex_constants::__polynomial);
        KernelDfa k(*re);
        for (const auto& s : subjects(e, rng)) {
            const bool want = std::regex_match(s, ecma);
            ASSERT_EQ(re->full_match(s), want) << "pattern " << pattern << " subject " << s;
            ASSERT_EQ(k.match(s), want) << "pattern " << pattern << " subject " << s;
            compared++;
            matched += want;
        }
    }
    // both outcomes well represented
    EXPECT_GT(compared, 30000u);
    EXPECT_GT(matched, compared / 5);
    EXPECT_LT(matched, compared * 4 / 5);
}

// The kernel's runner on the daemon's tables: any byte, any length (the
// 8-byte steps and their tails), any offset in the window.
TEST(SafeRegex, KernelRunnerAgreesOnRandomSubjects)
{
    const std::vector<std::string> patterns = {
        "/api/v[0-9]+/users/[^/]+", ".*/[^/]*\\.(png|jpe?g|gif)", "(.*a){5}", "/[a-z]{8}",
        "(a|b)*a(a|b){6}", "/(ab){2,3}[-_]?x{3}", ".*", "a{0}", "/static/.*",
        "/[^/]+/[^/]+/[^/]+", "/a{32}b{32}c{32}d{32}e{32}f{32}g{32}",
    };
    std::mt19937 rng(77);
    for (const auto& p : patterns) {
        const auto re = must(p);
        ASSERT_TRUE(re.fits_kernel()) << p;
        KernelDfa k(re);
        for (int i = 0; i < 4000; i++) {
            std::string s;
            const int len = static_cast<int>(rng() % 40);
            const int kind = static_cast<int>(rng() % 3);
            for (int j = 0; j < len; j++) {
                if (kind == 0)
                    s += static_cast<char>(rng() % 256);
                else if (kind == 1)
                    s += "/abxyz019._-"[rng() % 12];
                else
                    s += static_cast<char>(0x21 + rng() % 94);
            }
            if (i % 4 == 0)
                s = "/api/v" + std::to_string(rng() % 100) + "/users/" + s.substr(0, len / 2);
            const auto off = static_cast<uint32_t>(rng() % 300);
            ASSERT_EQ(k.match(s, off), re.full_match(s)) << p << " on " << testing::PrintToString(s);
        }
        // long subjects, up to the kernel's whole window
        const std::string long_ok = "/api/v1/users/" + std::string(L7_SCRATCH_SIZE - 40, 'u');
        EXPECT_EQ(k.match(long_ok, 16), re.full_match(long_ok)) << p;
    }
}

// The alphabet has 94 visible bytes, so at most 95 classes (94 and the
// rest): every DFA of at most 256 states fits the kernel's table.
TEST(SafeRegex, EveryDfaFitsTheKernel)
{
    static_assert(SafeRegex::kMaxStates * 95 <= L7_DFA_TRANS_MAX);
    static_assert(SafeRegex::kMaxStates == L7_DFA_MAX_STATES);
    std::string every = "(";
    for (int c = 0x21; c <= 0x7e; c++) {
        if (std::string_view(".\\/-[](){}*+?|^$").find(static_cast<char>(c)) != std::string_view::npos)
            every += '\\';
        every += static_cast<char>(c);
        every += c < 0x7e ? "|" : ")";
    }
    every += "{2}(a|b)*a(a|b){5}";
    const auto re = must(every);
    EXPECT_EQ(re.n_classes(), 95);
    EXPECT_GT(re.n_states(), 64);
    EXPECT_TRUE(re.fits_kernel());
    KernelDfa k(re);
    EXPECT_TRUE(k.match("~}aabaab"));
    EXPECT_EQ(k.match("~}aabbab"), re.full_match("~}aabbab"));
}
