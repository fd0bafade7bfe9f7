#include "semantics/SafeRegex.hpp"

#include <algorithm>
#include <array>
#include <bitset>
#include <cstdio>
#include <limits>
#include <map>

#include "l7_dfa.h"

namespace l7fast::policy {

namespace {

// Limits on the intermediate automata, so that a pattern that would take
// long to compile is refused quickly instead (compile time is bounded by
// kMaxWork steps whatever the pattern):
constexpr size_t kMaxNesting = 32;         // group depth
constexpr size_t kMaxNfaStates = 10000;    // after expanding {m,n}
constexpr size_t kMaxSubsetStates = 4096;  // DFA states before minimisation
constexpr uint64_t kMaxWork = 20'000'000;  // subset construction + minimisation steps
constexpr uint32_t kInf = std::numeric_limits<uint32_t>::max();

using ByteSet = std::bitset<256>;

bool visible(unsigned char c)
{
    return c >= 0x21 && c <= 0x7e;
}

ByteSet visible_set()
{
    ByteSet s;
    for (int c = 0x21; c <= 0x7e; c++)
        s.set(c);
    return s;
}

bool escapable(unsigned char c)
{
    return std::string_view(".\\/-[](){}*+?|^$").find(static_cast<char>(c)) != std::string_view::npos;
}

// ---- parse tree -------------------------------------------------------------------

struct Node {
    enum Kind : uint8_t { Set, Concat, Alt, Repeat };
    Kind kind = Set;
    ByteSet set;                  // Set
    std::vector<uint32_t> kids;   // Concat, Alt: the parts; Repeat: one
    uint32_t min = 0, max = 0;    // Repeat; max kInf: unbounded
    size_t offset = 0;            // where it was written (Repeat: the quantifier)
};

class Parser {
public:
    explicit Parser(std::string_view p) : p_(p) {}

    std::vector<Node> nodes;
    std::string why;
    size_t where = 0;

    // the root node, or -1
    int64_t parse()
    {
        if (p_.empty())
            return fail(0, "empty pattern");
        const int64_t root = alternation();
        if (root < 0)
            return -1;
        if (i_ < p_.size())  // alternation() stops only at the end or at ')'
            return fail(i_, "unmatched ')'");
        return root;
    }

private:
    std::string_view p_;
    size_t i_ = 0;
    size_t depth_ = 0;

    int64_t fail(size_t at, std::string reason)
    {
        if (why.empty()) {
            why = std::move(reason);
            where = at;
        }
        return -1;
    }

    bool at(char c) const { return i_ < p_.size() && p_[i_] == c; }

    int64_t add(Node n)
    {
        nodes.push_back(std::move(n));
        return static_cast<int64_t>(nodes.size() - 1);
    }

    int64_t alternation()
    {
        std::vector<uint32_t> branches;
        std::vector<size_t> bars;  // offsets of the '|' between them
        for (;;) {
            const size_t start = i_;
            const int64_t b = sequence();
            if (b == -1)
                return -1;
            if (b == -2) {  // empty branch
                if (!bars.empty())
                    return fail(bars.back(), "empty alternative");
                if (at('|'))
                    return fail(i_, "empty alternative");
                if (depth_ > 0)
                    return fail(start, "empty group");
                return fail(i_, at(')') ? "unmatched ')'" : "empty pattern");
            }
            branches.push_back(static_cast<uint32_t>(b));
            if (!at('|'))
                break;
            bars.push_back(i_++);
        }
        if (branches.size() == 1)
            return branches[0];
        Node n;
        n.kind = Node::Alt;
        n.kids = std::move(branches);
        return add(std::move(n));
    }

    // a concatenation up to '|', ')' or the end; -2 when empty
    int64_t sequence()
    {
        std::vector<uint32_t> parts;
        while (i_ < p_.size() && p_[i_] != '|' && p_[i_] != ')') {
            const int64_t r = repetition();
            if (r < 0)
                return -1;
            parts.push_back(static_cast<uint32_t>(r));
        }
        if (parts.empty())
            return -2;
        if (parts.size() == 1)
            return parts[0];
        Node n;
        n.kind = Node::Concat;
        n.kids = std::move(parts);
        return add(std::move(n));
    }

    // "{m}", "{m,n}", "{m,}" at i_: true and the bounds, with i_ after '}';
    // false (i_ unchanged) if the text there is not a repetition
    bool brace(uint32_t* min, uint32_t* max, size_t* bad_bound)
    {
        size_t j = i_ + 1;
        auto number = [&](uint64_t* v) {
            const size_t s = j;
            *v = 0;
            while (j < p_.size() && p_[j] >= '0' && p_[j] <= '9' && j - s < 6)
                *v = *v * 10 + static_cast<uint64_t>(p_[j++] - '0');
            return j > s;
        };
        uint64_t m = 0, n = 0;
        if (!number(&m))
            return false;
        bool unbounded = false;
        if (j < p_.size() && p_[j] == ',') {
            j++;
            if (!number(&n))
                unbounded = true;
        } else {
            n = m;
        }
        if (j >= p_.size() || p_[j] != '}')
            return false;
        *bad_bound = 0;
        if (m > SafeRegex::kMaxRepeat || (!unbounded && n > SafeRegex::kMaxRepeat))
            *bad_bound = 1;
        else if (!unbounded && n < m)
            *bad_bound = 2;
        *min = static_cast<uint32_t>(m);
        *max = unbounded ? kInf : static_cast<uint32_t>(n);
        i_ = j + 1;
        return true;
    }

    // an atom and its quantifier
    int64_t repetition()
    {
        const int64_t a = atom();
        if (a < 0)
            return -1;
        if (i_ >= p_.size())
            return a;
        const size_t q = i_;
        uint32_t min = 0, max = 0;
        switch (p_[i_]) {
        case '*':
            min = 0, max = kInf, i_++;
            break;
        case '+':
            min = 1, max = kInf, i_++;
            break;
        case '?':
            min = 0, max = 1, i_++;
            break;
        case '{': {
            size_t bad = 0;
            if (!brace(&min, &max, &bad))
                return a;  // atom() refuses the '{' next
            if (bad == 1)
                return fail(q, "repetition count above " + std::to_string(SafeRegex::kMaxRepeat));
            if (bad == 2)
                return fail(q, "repetition {m,n} with n < m");
            break;
        }
        default:
            return a;
        }
        if (at('?'))
            return fail(i_, "lazy quantifiers are not supported");
        if (at('+'))
            return fail(i_, "possessive quantifiers are not supported");
        if (at('*') || at('{')) {
            size_t bad = 0;
            uint32_t m2 = 0, n2 = 0;
            const size_t save = i_;
            if (at('*') || brace(&m2, &n2, &bad)) {
                i_ = save;
                return fail(i_, "a quantifier cannot follow another one (use a group)");
            }
        }
        Node n;
        n.kind = Node::Repeat;
        n.kids = {static_cast<uint32_t>(a)};
        n.min = min;
        n.max = max;
        n.offset = q;
        return add(std::move(n));
    }

    // "\c" at i_: the character, i_ after it; or fail
    int escape()
    {
        const size_t at_ = i_;
        if (i_ + 1 >= p_.size())
            return static_cast<int>(fail(at_, "'\\' at the end of the pattern"));
        const auto c = static_cast<unsigned char>(p_[i_ + 1]);
        if (escapable(c)) {
            i_ += 2;
            return c;
        }
        if (c >= '0' && c <= '9')
            return static_cast<int>(fail(at_, "back-references are not supported"));
        if (std::string_view("dDwWsS").find(static_cast<char>(c)) != std::string_view::npos)
            return static_cast<int>(fail(at_, std::string("\\") + static_cast<char>(c) +
                                                  " is not supported: write a class such as [0-9]"));
        if (c == 'b' || c == 'B')
            return static_cast<int>(fail(at_, "word boundaries are not supported"));
        if (visible(c))
            return static_cast<int>(fail(at_, std::string("unsupported escape \\") + static_cast<char>(c)));
        return static_cast<int>(fail(at_, "unsupported escape"));
    }

    int64_t bad_byte(size_t at_, unsigned char c)
    {
        if (c == ' ')
            return fail(at_, "space is not allowed (a request path cannot contain one)");
        char hex[8];
        std::snprintf(hex, sizeof(hex), "0x%02x", c);
        return fail(at_, std::string("byte ") + hex + " is not allowed (only visible ASCII)");
    }

    int64_t atom()
    {
        const size_t start = i_;
        const auto c = static_cast<unsigned char>(p_[i_]);
        Node n;
        n.offset = start;
        switch (c) {
        case '(': {
            if (i_ + 1 < p_.size() && p_[i_ + 1] == '?')
                return fail(i_ + 1, "(? groups (lookaround, non-capturing, named) are not supported");
            if (++depth_ > kMaxNesting)
                return fail(i_, "groups nested deeper than " + std::to_string(kMaxNesting));
            i_++;
            const int64_t inner = alternation();
            if (inner < 0)
                return -1;
            if (!at(')'))
                return fail(start, "missing ')'");
            i_++;
            depth_--;
            return inner;
        }
        case '[':
            return klass();
        case '.':
            i_++;
            n.set = visible_set();
            return add(std::move(n));
        case '\\': {
            const int e = escape();
            if (e < 0)
                return -1;
            n.set.set(static_cast<size_t>(e));
            return add(std::move(n));
        }
        case '*':
        case '+':
        case '?':
            return fail(i_, "nothing to repeat");
        case '{': {
            size_t bad = 0;
            uint32_t m = 0, x = 0;
            if (brace(&m, &x, &bad)) {
                i_ = start;
                return fail(start, "nothing to repeat");
            }
            return fail(start, "'{' must be written \\{");
        }
        case '}':
            return fail(i_, "'}' must be written \\}");
        case ']':
            return fail(i_, "']' must be written \\]");
        case '^':
        case '$':
            return fail(i_, std::string("'") + static_cast<char>(c) +
                                "' is not needed: a pattern always matches the whole path (write \\" +
                                static_cast<char>(c) + " for the character)");
        default:
            if (!visible(c))
                return bad_byte(i_, c);
            i_++;
            n.set.set(c);
            return add(std::move(n));
        }
    }

    // one character of a class: the byte, or -1; *escaped says it was "\c"
    int class_char(bool* escaped)
    {
        const auto c = static_cast<unsigned char>(p_[i_]);
        *escaped = false;
        if (c == '\\') {
            *escaped = true;
            return escape();
        }
        if (c == '[')
            return static_cast<int>(fail(i_, "'[' inside a class must be written \\["));
        if (!visible(c))
            return static_cast<int>(bad_byte(i_, c));
        i_++;
        return c;
    }

    int64_t klass()
    {
        const size_t start = i_++;
        Node n;
        n.offset = start;
        const bool negate = at('^');
        if (negate)
            i_++;
        bool first = true;
        for (;;) {
            if (i_ >= p_.size())
                return fail(start, "missing ']'");
            if (p_[i_] == ']') {
                if (first)
                    return fail(start, "empty class");
                i_++;
                break;
            }
            const size_t lo_at = i_;
            bool escaped = false;
            const int lo = class_char(&escaped);
            if (lo < 0)
                return -1;
            if (lo == '-' && !escaped && !first && !at(']'))
                return fail(lo_at, "'-' must be first or last in a class, or written \\-");
            if (at('-') && i_ + 1 < p_.size() && p_[i_ + 1] != ']') {
                i_++;
                bool hi_escaped = false;
                const size_t hi_at = i_;
                const int hi = class_char(&hi_escaped);
                if (hi < 0)
                    return -1;
                if (hi == '-' && !hi_escaped)
                    return fail(hi_at, "'-' must be first or last in a class, or written \\-");
                if (hi < lo)
                    return fail(lo_at, "reversed range");
                for (int b = lo; b <= hi; b++)
                    n.set.set(static_cast<size_t>(b));
            } else {
                n.set.set(static_cast<size_t>(lo));
            }
            first = false;
        }
        if (negate)
            n.set = visible_set() & ~n.set;
        if (n.set.none())
            return fail(start, "class matches nothing");
        return add(std::move(n));
    }
};

// NFA states a subtree expands to (saturating at kMaxNfaStates + 1); the
// offset of the smallest subtree above the limit in *where.
size_t nfa_size(const std::vector<Node>& nodes, uint32_t id, size_t* where, bool* over)
{
    const Node& n = nodes[id];
    const size_t cap = kMaxNfaStates + 1;
    size_t s = 0;
    switch (n.kind) {
    case Node::Set:
        s = 1;
        break;
    case Node::Concat:
    case Node::Alt:
        for (uint32_t k : n.kids)
            s = std::min(cap, s + nfa_size(nodes, k, where, over) + 2);
        break;
    case Node::Repeat: {
        const size_t kid = nfa_size(nodes, n.kids[0], where, over) + 2;
        const size_t copies = n.max == kInf ? n.min + 1 : n.max;
        s = std::min<size_t>(cap, kid * std::max<size_t>(copies, 1) + 2);
        break;
    }
    }
    if (s >= cap && !*over) {
        *over = true;
        *where = n.offset;
    }
    return s;
}

// ---- Thompson NFA -----------------------------------------------------------------

struct Nfa {
    struct State {
        std::vector<uint32_t> eps;
        std::vector<std::pair<uint32_t, uint32_t>> moves;  // (byte set id, target)
    };
    std::vector<State> states;
    std::vector<ByteSet> sets;
    std::map<std::string, uint32_t> set_ids;
    uint32_t start = 0, final = 0;

    uint32_t add_state()
    {
        states.emplace_back();
        return static_cast<uint32_t>(states.size() - 1);
    }

    uint32_t set_id(const ByteSet& s)
    {
        const auto key = s.to_string();
        auto [it, inserted] = set_ids.emplace(key, static_cast<uint32_t>(sets.size()));
        if (inserted)
            sets.push_back(s);
        return it->second;
    }

    void eps(uint32_t a, uint32_t b) { states[a].eps.push_back(b); }

    // Adds paths from a to b that consume exactly the strings of nodes[id].
    // Every sub-automaton gets fresh entry and exit states, so the loops of
    // a star never share a state with a sibling.
    void emit(const std::vector<Node>& nodes, uint32_t id, uint32_t a, uint32_t b)
    {
        const Node& n = nodes[id];
        switch (n.kind) {
        case Node::Set:
            states[a].moves.emplace_back(set_id(n.set), b);
            return;
        case Node::Concat: {
            uint32_t cur = a;
            for (size_t k = 0; k < n.kids.size(); k++) {
                const uint32_t next = k + 1 == n.kids.size() ? b : add_state();
                emit(nodes, n.kids[k], cur, next);
                cur = next;
            }
            return;
        }
        case Node::Alt:
            for (uint32_t k : n.kids) {
                const uint32_t s = add_state(), t = add_state();
                eps(a, s);
                emit(nodes, k, s, t);
                eps(t, b);
            }
            return;
        case Node::Repeat: {
            uint32_t cur = a;
            for (uint32_t k = 0; k < n.min; k++) {
                const uint32_t next = add_state();
                emit(nodes, n.kids[0], cur, next);
                cur = next;
            }
            if (n.max == kInf) {
                const uint32_t s = add_state(), t = add_state();
                eps(cur, s);
                emit(nodes, n.kids[0], s, t);
                eps(t, s);
                eps(s, b);
                return;
            }
            for (uint32_t k = n.min; k < n.max; k++) {
                const uint32_t s = add_state(), t = add_state();
                eps(cur, s);
                emit(nodes, n.kids[0], s, t);
                eps(s, t);  // or skip this copy
                cur = t;
            }
            eps(cur, b);
            return;
        }
        }
    }
};

// ---- subset construction and minimisation ------------------------------------------

struct Dfa {
    std::vector<uint8_t> byte_class;  // 256
    uint32_t n_classes = 0;
    std::vector<uint32_t> trans;      // [state * n_classes + class]
    std::vector<bool> accept;
    size_t n() const { return accept.size(); }
};

class Builder {
public:
    explicit Builder(const Nfa& nfa) : nfa_(nfa), stamp_(nfa.states.size(), 0) {}

    std::string why;

    // state 0: the empty set (dead); *start: the start state
    bool build(Dfa* dfa, uint32_t* start)
    {
        classes(dfa);
        const uint32_t k = dfa->n_classes;
        std::vector<std::vector<uint32_t>> sets;
        std::map<std::vector<uint32_t>, uint32_t> ids;
        auto intern = [&](std::vector<uint32_t> key, uint32_t* id) {
            auto it = ids.find(key);
            if (it != ids.end()) {
                *id = it->second;
                return true;
            }
            if (sets.size() >= kMaxSubsetStates) {
                why = "the pattern needs more than " + std::to_string(kMaxSubsetStates) +
                      " automaton states";
                return false;
            }
            *id = static_cast<uint32_t>(sets.size());
            ids.emplace(key, *id);
            sets.push_back(std::move(key));
            return true;
        };
        uint32_t id = 0;
        intern({}, &id);
        intern(closure({nfa_.start}), start);

        std::vector<std::vector<uint32_t>> bucket(k);
        for (size_t d = 0; d < sets.size(); d++) {
            for (auto& b : bucket)
                b.clear();
            for (uint32_t s : sets[d])
                for (const auto& [set, to] : nfa_.states[s].moves)
                    for (uint32_t c : set_classes_[set]) {
                        bucket[c].push_back(to);
                        work_++;
                    }
            dfa->trans.resize((d + 1) * k, 0);
            for (uint32_t c = 0; c < k; c++) {
                if (bucket[c].empty())
                    continue;
                uint32_t next = 0;
                if (!intern(closure(bucket[c]), &next))
                    return false;
                // sets may have grown: index, not a reference
                dfa->trans[d * k + c] = next;
            }
            if (work_ > kMaxWork)
                return too_complex();
        }
        dfa->accept.resize(sets.size());
        for (size_t d = 0; d < sets.size(); d++)
            dfa->accept[d] = std::binary_search(sets[d].begin(), sets[d].end(), nfa_.final);
        return true;
    }

    // Hopcroft's partition refinement, O(k n log n): states start split by
    // acceptance; a block is split whenever some class leads part of it into
    // a splitter block and part elsewhere; the smaller half becomes a new
    // splitter. *block: the block of every DFA state.
    bool minimise(const Dfa& dfa, std::vector<uint32_t>* block, uint32_t* n_blocks)
    {
        const auto n = static_cast<uint32_t>(dfa.n());
        const uint32_t k = dfa.n_classes;
        // predecessors by (class, target)
        std::vector<uint32_t> inv_start(static_cast<size_t>(k) * n + 1, 0), inv(static_cast<size_t>(k) * n);
        for (uint32_t s = 0; s < n; s++)
            for (uint32_t c = 0; c < k; c++)
                inv_start[static_cast<size_t>(c) * n + dfa.trans[static_cast<size_t>(s) * k + c] + 1]++;
        for (size_t i = 1; i < inv_start.size(); i++)
            inv_start[i] += inv_start[i - 1];
        std::vector<uint32_t> fill(inv_start.begin(), inv_start.end() - 1);
        for (uint32_t s = 0; s < n; s++)
            for (uint32_t c = 0; c < k; c++)
                inv[fill[static_cast<size_t>(c) * n + dfa.trans[static_cast<size_t>(s) * k + c]]++] = s;

        // blocks are ranges of `elems`; [first, mid) of a block is marked
        std::vector<uint32_t> elems, loc(n), blk(n), first, end, mid;
        for (int accepting = 0; accepting < 2; accepting++) {
            const auto start = static_cast<uint32_t>(elems.size());
            for (uint32_t s = 0; s < n; s++)
                if (dfa.accept[s] == (accepting == 1)) {
                    loc[s] = static_cast<uint32_t>(elems.size());
                    blk[s] = static_cast<uint32_t>(first.size());
                    elems.push_back(s);
                }
            if (elems.size() > start) {
                first.push_back(start);
                end.push_back(static_cast<uint32_t>(elems.size()));
                mid.push_back(start);
            }
        }
        auto size = [&](uint32_t b) { return end[b] - first[b]; };
        std::vector<char> in_work(static_cast<size_t>(n) * k, 0);
        std::vector<std::pair<uint32_t, uint32_t>> work;
        auto push = [&](uint32_t b, uint32_t c) {
            if (!in_work[static_cast<size_t>(b) * k + c]) {
                in_work[static_cast<size_t>(b) * k + c] = 1;
                work.emplace_back(b, c);
            }
        };
        if (first.size() == 2)
            for (uint32_t c = 0; c < k; c++)
                push(size(0) <= size(1) ? 0 : 1, c);

        std::vector<uint32_t> members, touched;
        while (!work.empty()) {
            const auto [a, c] = work.back();
            work.pop_back();
            in_work[static_cast<size_t>(a) * k + c] = 0;
            members.assign(elems.begin() + first[a], elems.begin() + end[a]);
            for (uint32_t t : members) {
                const size_t key = static_cast<size_t>(c) * n + t;
                for (uint32_t i = inv_start[key]; i < inv_start[key + 1]; i++) {
                    const uint32_t s = inv[i];
                    const uint32_t b = blk[s];
                    if (loc[s] < mid[b])
                        continue;
                    if (mid[b] == first[b])
                        touched.push_back(b);
                    const uint32_t other = elems[mid[b]];
                    std::swap(elems[loc[s]], elems[mid[b]]);
                    loc[other] = loc[s];
                    loc[s] = mid[b]++;
                }
                work_ += inv_start[key + 1] - inv_start[key] + 1;
            }
            for (uint32_t b : touched) {
                if (mid[b] == end[b]) {
                    mid[b] = first[b];
                    continue;
                }
                const auto nb = static_cast<uint32_t>(first.size());
                first.push_back(first[b]);
                end.push_back(mid[b]);
                mid.push_back(first[b]);
                first[b] = mid[b];
                for (uint32_t i = first[nb]; i < end[nb]; i++)
                    blk[elems[i]] = nb;
                for (uint32_t cc = 0; cc < k; cc++) {
                    if (in_work[static_cast<size_t>(b) * k + cc])
                        push(nb, cc);
                    else
                        push(size(nb) <= size(b) ? nb : b, cc);
                }
            }
            touched.clear();
            if (work_ > kMaxWork)
                return too_complex();
        }
        *block = std::move(blk);
        *n_blocks = static_cast<uint32_t>(first.size());
        return true;
    }

private:
    const Nfa& nfa_;
    std::vector<uint32_t> stamp_;
    uint32_t epoch_ = 0;
    uint64_t work_ = 0;
    std::vector<std::vector<uint32_t>> set_classes_;

    bool too_complex()
    {
        why = "the pattern is too complex to compile";
        return false;
    }

    // Byte equivalence classes: bytes that every byte set of the NFA treats
    // alike. Numbered by their smallest byte, so class 0 holds byte 0x00 and
    // with it every byte no set contains.
    void classes(Dfa* dfa)
    {
        std::map<std::vector<bool>, uint32_t> ids;
        dfa->byte_class.assign(256, 0);
        for (size_t b = 0; b < 256; b++) {
            std::vector<bool> sig(nfa_.sets.size());
            for (size_t s = 0; s < nfa_.sets.size(); s++)
                sig[s] = nfa_.sets[s].test(b);
            const auto id = ids.emplace(std::move(sig), static_cast<uint32_t>(ids.size())).first->second;
            dfa->byte_class[b] = static_cast<uint8_t>(id);
        }
        dfa->n_classes = static_cast<uint32_t>(ids.size());
        set_classes_.assign(nfa_.sets.size(), {});
        std::vector<bool> seen(dfa->n_classes);
        for (size_t s = 0; s < nfa_.sets.size(); s++) {
            std::fill(seen.begin(), seen.end(), false);
            for (size_t b = 0; b < 256; b++)
                if (nfa_.sets[s].test(b) && !seen[dfa->byte_class[b]]) {
                    seen[dfa->byte_class[b]] = true;
                    set_classes_[s].push_back(dfa->byte_class[b]);
                }
        }
    }

    // The states reachable from `seeds` by epsilon moves that matter to the
    // DFA (those with byte moves, and the final state), sorted.
    std::vector<uint32_t> closure(const std::vector<uint32_t>& seeds)
    {
        ++epoch_;
        std::vector<uint32_t> stack(seeds.begin(), seeds.end()), out;
        while (!stack.empty()) {
            const uint32_t s = stack.back();
            stack.pop_back();
            if (stamp_[s] == epoch_)
                continue;
            stamp_[s] = epoch_;
            work_++;
            const auto& st = nfa_.states[s];
            if (!st.moves.empty() || s == nfa_.final)
                out.push_back(s);
            for (uint32_t e : st.eps)
                if (stamp_[e] != epoch_)
                    stack.push_back(e);
        }
        std::sort(out.begin(), out.end());
        return out;
    }
};

}  // namespace

std::optional<SafeRegex> SafeRegex::compile(std::string_view pattern, std::string* why,
                                            size_t* error_offset)
{
    auto fail = [&](size_t at, std::string reason) -> std::optional<SafeRegex> {
        if (why)
            *why = std::move(reason);
        if (error_offset)
            *error_offset = at;
        return std::nullopt;
    };
    if (pattern.size() > kMaxPatternBytes)
        return fail(kMaxPatternBytes, "pattern longer than " + std::to_string(kMaxPatternBytes) + " bytes");

    Parser parser(pattern);
    const int64_t root = parser.parse();
    if (root < 0)
        return fail(parser.where, parser.why);

    size_t where = 0;
    bool over = false;
    nfa_size(parser.nodes, static_cast<uint32_t>(root), &where, &over);
    if (over)
        return fail(where, "the pattern expands to more than " + std::to_string(kMaxNfaStates) +
                               " automaton states (nested repetitions)");

    Nfa nfa;
    nfa.start = nfa.add_state();
    nfa.final = nfa.add_state();
    nfa.emit(parser.nodes, static_cast<uint32_t>(root), nfa.start, nfa.final);

    Builder builder(nfa);
    Dfa dfa;
    uint32_t start = 0;
    if (!builder.build(&dfa, &start))
        return fail(0, builder.why);
    std::vector<uint32_t> block;
    uint32_t n_blocks = 0;
    if (!builder.minimise(dfa, &block, &n_blocks))
        return fail(0, builder.why);
    if (n_blocks > kMaxStates)
        return fail(0, "the pattern needs " + std::to_string(n_blocks) + " DFA states (limit " +
                           std::to_string(kMaxStates) + ")");

    // Number the blocks: dead 0, start 1, the rest in breadth-first order
    // from the start, so equal languages give equal tables.
    const uint32_t k = dfa.n_classes;
    std::vector<uint32_t> rep(n_blocks, 0);  // a DFA state of each block
    std::vector<bool> have(n_blocks, false);
    for (size_t s = 0; s < dfa.n(); s++)
        if (!have[block[s]]) {
            have[block[s]] = true;
            rep[block[s]] = static_cast<uint32_t>(s);
        }
    constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();
    std::vector<uint32_t> number(n_blocks, kNone);
    std::vector<uint32_t> order;
    auto visit = [&](uint32_t b) {
        if (number[b] == kNone) {
            number[b] = static_cast<uint32_t>(order.size());
            order.push_back(b);
        }
    };
    visit(block[0]);
    visit(block[start]);
    for (size_t q = 0; q < order.size(); q++)
        for (uint32_t c = 0; c < k; c++)
            visit(block[dfa.trans[rep[order[q]] * k + c]]);

    SafeRegex re;
    re.pattern_ = std::string(pattern);
    re.byte_class_ = std::move(dfa.byte_class);
    re.n_classes_ = static_cast<uint16_t>(k);
    re.n_states_ = static_cast<uint16_t>(order.size());
    re.start_ = static_cast<uint16_t>(number[block[start]]);
    re.trans_.resize(order.size() * k);
    re.accept_.assign((order.size() + 7) / 8, 0);
    for (size_t i = 0; i < order.size(); i++) {
        const uint32_t s = rep[order[i]];
        for (uint32_t c = 0; c < k; c++)
            re.trans_[i * k + c] = static_cast<uint16_t>(number[block[dfa.trans[s * k + c]]]);
        if (dfa.accept[s])
            re.accept_[i / 8] |= static_cast<uint8_t>(1u << (i % 8));
    }
    return re;
}

bool SafeRegex::full_match(std::string_view text) const
{
    uint32_t s = start_;
    for (char ch : text) {
        s = trans_[s * n_classes_ + byte_class_[static_cast<unsigned char>(ch)]];
        if (s == 0)
            return false;
    }
    return accepting(static_cast<uint16_t>(s));
}

bool SafeRegex::fits_kernel() const
{
    return n_states_ <= L7_DFA_MAX_STATES &&
           static_cast<size_t>(n_states_) * n_classes_ <= L7_DFA_TRANS_MAX;
}

}  // namespace l7fast::policy
