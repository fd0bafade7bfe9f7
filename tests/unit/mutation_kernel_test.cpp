// Request header mutation in the kernel: the compiled table
// (compile_request_mutation) and the data plane's plan (bpf/include/
// l7_mutate.h, compiled natively) applied the way l7_req_mutate() moves the
// bytes — push the inserted block at the final CRLF, then pop the dropped
// lines from the last to the first — must give mutate_request_head()'s bytes
// exactly, on hand-written and generated heads.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "l7_mutate.h"
#include "semantics/Mutation.hpp"
#include "compiler/PolicyCompiler.hpp"

using namespace l7fast::policy;

namespace {

// The kernel's output for `head` + `body`, or nullopt when the head does not
// parse (the kernel never mutates those). `fwd`: the forwarded-claim lines
// the token cache would supply.
std::optional<std::string> kernel_mutate(const std::string& head, const std::string& body,
                                         const l7_mutation& mu, const std::string& fwd = "")
{
    auto ws = std::make_unique<l7_ws>();
    std::memcpy(ws->buf, head.data(), head.size());
    ws->len = static_cast<__u32>(head.size());
    if (l7_parse_head(ws.get(), 1) != L7_P_OK || ws->msg.hdr_len != head.size())
        return std::nullopt;
    l7_mut_plan plan{};
    l7_mut_make_plan(ws.get(), &mu, &plan);

    std::string msg = head + body;
    const std::string add(reinterpret_cast<const char*>(mu.add), mu.add_len);
    msg.insert(plan.insert_at, add.substr(0, mu.set_len) + fwd + add.substr(mu.set_len));
    uint32_t removed = 0;
    for (int i = L7_MAX_HEADERS - 2; i >= 0; i--) {
        if (!((plan.drop >> i) & 1))
            continue;
        __u32 off = 0, len = 0;
        l7_mut_line(&ws->msg, static_cast<__u32>(i), &off, &len);
        EXPECT_LT(off + len, plan.insert_at + 1);
        msg.erase(off, len);
        removed += len;
    }
    EXPECT_EQ(removed, plan.removed);
    return msg;
}

l7_mutation table(const HeaderMutation& m, std::vector<std::string> forwarded = {})
{
    RequestMutationTable t = compile_request_mutation(m, forwarded);
    EXPECT_TRUE(t.table.has_value()) << t.reason;
    return t.table.value_or(l7_mutation{});
}

const std::string kHead =
    "POST /x?y=1 HTTP/1.1\r\n"
    "Host: a.example\r\n"
    "X-A: 1\r\n"
    "x-b: 2\r\n"
    "X-A: 3\r\n"
    "Accept:  */*\r\n"
    "Content-Length: 5\r\n"
    "X-User: forged\r\n"
    "\r\n";

}  // namespace

TEST(MutationKernel, RemoveEveryOccurrenceSetAndAdd)
{
    HeaderMutation m;
    m.remove = {"X-A"};
    m.set = {{"x-b", "two"}, {"x-new", ""}};
    m.add = {{"X-Added", "v"}, {"x-a", "again"}};
    const std::string want = *mutate_request_head(kHead, m) + "hello";
    EXPECT_EQ(kernel_mutate(kHead, "hello", table(m)), want);
    // the table's layout: set lines first, names lower-cased
    const l7_mutation t = table(m);
    EXPECT_EQ(t.n_remove, 3u);  // x-a, x-b, x-new
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(t.add), t.add_len),
              "x-b: two\r\nx-new: \r\nx-added: v\r\nx-a: again\r\n");
    EXPECT_EQ(t.set_len, std::string("x-b: two\r\nx-new: \r\n").size());
}

TEST(MutationKernel, NothingToRemoveOrNothingToAdd)
{
    HeaderMutation add_only;
    add_only.add = {{"x-z", "1"}};
    EXPECT_EQ(kernel_mutate(kHead, "", table(add_only)), mutate_request_head(kHead, add_only));
    HeaderMutation remove_only;
    remove_only.remove = {"accept", "x-user", "absent"};
    EXPECT_EQ(kernel_mutate(kHead, "", table(remove_only)), mutate_request_head(kHead, remove_only));
    HeaderMutation remove_all_fields;
    remove_all_fields.remove = {"host", "x-a", "x-b", "accept", "content-length", "x-user"};
    EXPECT_EQ(kernel_mutate(kHead, "", table(remove_all_fields)), mutate_request_head(kHead, remove_all_fields));
}

TEST(MutationKernel, ForwardedClaimNamesAreRemovedAndTheirLinesGoAfterSet)
{
    HeaderMutation m;
    m.set = {{"x-b", "s"}};
    m.add = {{"x-c", "a"}};
    const std::vector<std::string> names = {"x-user", "x-role"};
    const l7_mutation t = table(m, names);
    // no claim values: the names still go
    std::vector<ForwardedHeader> none = {{"x-user", std::nullopt}, {"x-role", std::nullopt}};
    EXPECT_EQ(kernel_mutate(kHead, "", t), mutate_request_head(kHead, m, none));
    std::vector<ForwardedHeader> some = {{"x-user", "alice"}, {"x-role", std::nullopt}};
    EXPECT_EQ(kernel_mutate(kHead, "", t, "x-user: alice\r\n"), mutate_request_head(kHead, m, some));
}

TEST(MutationKernel, NameComparisonIsExactNotByHashOrPrefix)
{
    HeaderMutation m;
    m.remove = {"x-a"};
    const std::string head = "GET / HTTP/1.1\r\nHost: h\r\nx-aa: 1\r\nx-: 2\r\nX-A: 3\r\nxa: 4\r\n\r\n";
    EXPECT_EQ(kernel_mutate(head, "", table(m)), mutate_request_head(head, m));
    // a table whose hash matches but whose bytes do not: kept
    l7_mutation t = table(m);
    t.remove_name[0][2] = 'b';
    EXPECT_EQ(kernel_mutate(head, "", t), head);
}

TEST(MutationKernel, LimitsOfTheTable)
{
    HeaderMutation eight;
    for (int i = 0; i < L7_MUT_MAX_REMOVE; i++)
        eight.remove.push_back("x-" + std::to_string(i));
    EXPECT_TRUE(compile_request_mutation(eight).table);
    HeaderMutation nine = eight;
    nine.set.push_back({"x-9", "v"});
    RequestMutationTable t = compile_request_mutation(nine);
    EXPECT_FALSE(t.table);
    EXPECT_NE(t.reason.find("removes 9 header names"), std::string::npos) << t.reason;
    // duplicates (any case) count once; forwarded names count
    HeaderMutation dup = eight;
    dup.remove.push_back("X-0");
    EXPECT_TRUE(compile_request_mutation(dup).table);
    EXPECT_FALSE(compile_request_mutation(eight, std::vector<std::string>{"x-user"}).table);

    HeaderMutation long_name;
    long_name.remove.push_back(std::string(L7_MAX_HDR_NAME, 'n'));
    EXPECT_TRUE(compile_request_mutation(long_name).table);
    long_name.remove[0] += "n";
    t = compile_request_mutation(long_name);
    EXPECT_FALSE(t.table);
    EXPECT_NE(t.reason.find("longer than 64 bytes"), std::string::npos) << t.reason;

    // "x-big: " + value + CRLF is exactly L7_MUT_MAX_ADD bytes, then one more
    HeaderMutation big;
    big.add.push_back({"x-big", std::string(L7_MUT_MAX_ADD - 9, 'v')});
    EXPECT_TRUE(compile_request_mutation(big).table);
    const std::string head = "GET / HTTP/1.1\r\nHost: h\r\n\r\n";
    EXPECT_EQ(kernel_mutate(head, "", table(big)), mutate_request_head(head, big));
    big.add[0].value += "v";
    t = compile_request_mutation(big);
    EXPECT_FALSE(t.table);
    EXPECT_NE(t.reason.find("adds 513 bytes"), std::string::npos) << t.reason;
}

// Generated heads (names in random case, repeated, with OWS) and mutations:
// the kernel's bytes equal the reference's.
TEST(MutationKernel, GeneratedHeadsMatchTheReference)
{
    std::mt19937 rng(20261130);
    const std::vector<std::string> pool = {"x-a", "X-B", "accept", "user-agent", "x-user", "x-role",
                                           "cookie", "x-forwarded-for", "x-request-id",
                                           std::string(L7_MAX_HDR_NAME, 'k')};
    const auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
    const auto mixcase = [&](std::string s) {
        for (char& c : s)
            if (rng() % 2)
                c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
        return s;
    };
    const auto value = [&]() {
        std::string v;
        for (size_t i = pick(20); i > 0; i--)
            v += static_cast<char>('!' + pick(94));
        return v;
    };
    int compared = 0;
    for (int iter = 0; iter < 3000; iter++) {
        std::string head = "GET /p" + std::to_string(iter) + " HTTP/1.1\r\n";
        const size_t n_fields = pick(40);
        const size_t host_at = pick(n_fields + 1);
        for (size_t i = 0; i <= n_fields; i++) {
            if (i == host_at)
                head += mixcase("host") + ":" + (rng() % 2 ? " " : "") + "h.example\r\n";
            if (i < n_fields)
                head += mixcase(pool[pick(pool.size())]) + ":" + std::string(pick(3), ' ') + value() +
                        std::string(pick(2), '\t') + "\r\n";
        }
        head += "\r\n";

        HeaderMutation m;
        for (size_t i = pick(4); i > 0; i--)
            m.remove.push_back(mixcase(pool[pick(pool.size())]));
        for (size_t i = pick(3); i > 0; i--)
            m.set.push_back({pool[pick(pool.size() - 1)], value()});
        for (size_t i = pick(3); i > 0; i--)
            m.add.push_back({pool[pick(pool.size() - 1)], value()});
        std::vector<std::string> fwd_names;
        if (rng() % 4 == 0)
            fwd_names.push_back("x-role");
        RequestMutationTable t = compile_request_mutation(m, fwd_names);
        if (!t.table)
            continue;  // too many names: the compiler keeps such a route in user space
        std::vector<ForwardedHeader> fwd;
        for (const std::string& n : fwd_names)
            fwd.push_back({n, std::nullopt});
        const std::string body = rng() % 2 ? "body-bytes" : "";
        auto want = mutate_request_head(head, m, fwd);
        ASSERT_TRUE(want) << head;
        auto got = kernel_mutate(head, body, *t.table);
        ASSERT_TRUE(got) << head;
        ASSERT_EQ(*got, *want + body) << head;
        compared++;
    }
    EXPECT_GT(compared, 2000);
}
