// The strict pieces under JWT verification: base64url (RFC 4648 §5,
// canonical) and the JSON reader (RFC 8259 plus duplicate-name rejection).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "auth/Base64Url.hpp"
#include "auth/JsonReader.hpp"

using namespace l7fast::auth;

namespace {

std::optional<std::string> decode(std::string_view in)
{
    std::string out;
    if (!base64url_decode(in, &out))
        return std::nullopt;
    return out;
}

bool parses(std::string_view text, json::Limits limits = {})
{
    json::Document doc;
    return doc.parse(text, limits);
}

}  // namespace

TEST(JwtBase64Url, Rfc4648Vectors)
{
    // RFC 4648 §10, in the URL-safe alphabet without padding
    const std::vector<std::pair<std::string, std::string>> v = {
        {"", ""}, {"f", "Zg"}, {"fo", "Zm8"}, {"foo", "Zm9v"},
        {"foob", "Zm9vYg"}, {"fooba", "Zm9vYmE"}, {"foobar", "Zm9vYmFy"},
    };
    for (const auto& [plain, enc] : v) {
        EXPECT_EQ(base64url_encode(plain), enc);
        EXPECT_EQ(decode(enc), plain) << enc;
        EXPECT_EQ(base64url_decoded_size(enc.size()), plain.size());
    }
    EXPECT_EQ(decode("-_-_"), std::string("\xfb\xff\xbf", 3));
    EXPECT_EQ(base64url_encode(std::string("\xfb\xff\xbf", 3)), "-_-_");
}

TEST(JwtBase64Url, RejectsEverythingNonCanonical)
{
    EXPECT_EQ(decode("Zg=="), std::nullopt);   // padding
    EXPECT_EQ(decode("Zm8="), std::nullopt);
    EXPECT_EQ(decode("+/+/"), std::nullopt);   // standard alphabet
    EXPECT_EQ(decode("Zm9v Yg"), std::nullopt); // whitespace
    EXPECT_EQ(decode("Zm9v\nYg"), std::nullopt);
    EXPECT_EQ(decode("Z"), std::nullopt);      // 4n+1 characters
    EXPECT_EQ(decode("Zm9vY"), std::nullopt);
    EXPECT_EQ(decode("Zh"), std::nullopt);     // non-zero trailing bits ("f" is "Zg")
    EXPECT_EQ(decode("Zm9"), std::nullopt);    // "fo" is "Zm8"
    EXPECT_EQ(decode(std::string("Zm\0v", 4)), std::nullopt);
    EXPECT_EQ(decode("Zm9v\xc3\xa9"), std::nullopt);
}

TEST(JwtBase64Url, EveryByteRoundTrips)
{
    std::string all;
    for (int i = 0; i < 256; ++i)
        all.push_back(static_cast<char>(i));
    for (size_t len = 0; len <= all.size(); len += 7)
        EXPECT_EQ(decode(base64url_encode(all.substr(0, len))), all.substr(0, len));
}

TEST(JwtJson, ReadsEveryType)
{
    json::Document doc;
    ASSERT_TRUE(doc.parse(R"( {"s":"x","n":-1.5e+3,"t":true,"f":false,"z":null,"a":[1,"b",[]],"o":{"k":{}}} )"));
    const json::Node& root = doc.root();
    ASSERT_EQ(root.type, json::Type::Object);
    std::vector<std::string> keys;
    for (const json::Node& m : doc.children(root))
        keys.emplace_back(m.key);
    EXPECT_EQ(keys, (std::vector<std::string>{"s", "n", "t", "f", "z", "a", "o"}));
    EXPECT_EQ(doc.find(root, "s")->text, "x");
    EXPECT_EQ(doc.find(root, "n")->type, json::Type::Number);
    EXPECT_EQ(doc.find(root, "n")->text, "-1.5e+3");
    EXPECT_EQ(doc.find(root, "t")->type, json::Type::True);
    EXPECT_EQ(doc.find(root, "f")->type, json::Type::False);
    EXPECT_EQ(doc.find(root, "z")->type, json::Type::Null);
    const json::Node* a = doc.find(root, "a");
    std::vector<json::Type> types;
    for (const json::Node& e : doc.children(*a))
        types.push_back(e.type);
    EXPECT_EQ(types, (std::vector<json::Type>{json::Type::Number, json::Type::String, json::Type::Array}));
    EXPECT_EQ(doc.find(root, "missing"), nullptr);
    EXPECT_EQ(doc.find(*a, "s"), nullptr);  // not an object
    EXPECT_TRUE(doc.find(*doc.find(root, "o"), "k"));
}

TEST(JwtJson, DecodesEscapesAndSurrogatePairs)
{
    json::Document doc;
    ASSERT_TRUE(doc.parse(R"({"k\u0065y":"a\"b\\c\/d\b\f\n\r\t\u00e9\u20ac\ud83d\ude00","plain":"\u00C9"})"));
    EXPECT_EQ(doc.find(doc.root(), "key")->text, "a\"b\\c/d\b\f\n\r\t\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
    EXPECT_EQ(doc.find(doc.root(), "plain")->text, "\xc3\x89");
    ASSERT_TRUE(doc.parse("\"raw \xc3\xa9 \xf0\x9f\x98\x80\""));
    EXPECT_EQ(doc.root().text, "raw \xc3\xa9 \xf0\x9f\x98\x80");
    ASSERT_TRUE(doc.parse(R"("\u0000")"));
    EXPECT_EQ(doc.root().text, std::string(1, '\0'));
}

TEST(JwtJson, RejectsDuplicateNamesAtAnyDepth)
{
    EXPECT_FALSE(parses(R"({"a":1,"a":2})"));
    EXPECT_FALSE(parses(R"({"a":1,"b":2,"a":1})"));
    EXPECT_FALSE(parses(R"({"a":1,"\u0061":2})"));  // equal once decoded
    EXPECT_FALSE(parses(R"({"o":{"x":1,"x":1}})"));
    EXPECT_FALSE(parses(R"([{"x":1},{"y":1,"y":2}])"));
    EXPECT_TRUE(parses(R"({"a":{"a":{"a":1}},"b":[{"a":1},{"a":2}]})"));  // same name, different objects
    json::Document doc;
    EXPECT_FALSE(doc.parse(R"({"a":1,"a":2})"));
    EXPECT_EQ(doc.error(), "duplicate member name");
}

TEST(JwtJson, RejectsMalformedText)
{
    for (const char* bad : {
             "", " ", "{", "}", "{\"a\"}", "{\"a\":}", "{\"a\":1,}", "[1,]", "[,1]", "{a:1}", "{'a':1}",
             "01", "-", "1.", ".5", "1e", "1e+", "+1", "0x10", "NaN", "Infinity", "tru", "nul", "True",
             "\"unterminated", "\"tab\there\"", "\"nl\nhere\"", "\"\\x\"", "\"\\u12\"", "\"\\u12g4\"",
             "\"\\ud800\"", "\"\\udc00\"", "\"\\ud800\\u0041\"", "\"\\ud800x\"",
             "\"\xc3\"", "\"\xc0\xaf\"", "\"\xed\xa0\x80\"", "\"\xf4\x90\x80\x80\"", "\"\xff\"",
             "{} {}", "{}x", "[1] 2", "\xef\xbb\xbf{}",
         })
        EXPECT_FALSE(parses(std::string_view(bad, std::char_traits<char>::length(bad)))) << bad;
    EXPECT_FALSE(parses(std::string("{\"a\":1}\0", 8)));
}

TEST(JwtJson, EnforcesLimits)
{
    std::string deep16, deep17;
    for (int i = 0; i < 16; ++i)
        deep16 += "[";
    deep16 += std::string(16, ']');
    for (int i = 0; i < 17; ++i)
        deep17 += "[";
    deep17 += std::string(17, ']');
    EXPECT_TRUE(parses(deep16));
    EXPECT_FALSE(parses(deep17));
    EXPECT_FALSE(parses(std::string(60000, '[')));  // no stack overflow either

    std::string many = "[";
    for (int i = 0; i < 5000; ++i)
        many += i ? ",0" : "0";
    many += "]";
    EXPECT_FALSE(parses(many));  // > 4096 values
    json::Limits roomy;
    roomy.max_nodes = 10000;
    EXPECT_TRUE(parses(many, roomy));
    json::Limits small;
    small.max_bytes = 5;
    EXPECT_FALSE(parses("[1,2,3]", small));
    EXPECT_TRUE(parses("[1,2]", small));
}

TEST(JwtJson, ManyMembersDuplicateCheckStaysFast)
{
    std::string obj = "{";
    for (int i = 0; i < 4000; ++i)
        obj += (i ? ",\"" : "\"") + std::to_string(i) + "\":0";
    obj += "}";
    EXPECT_TRUE(parses(obj));
    obj.back() = ',';
    obj += "\"17\":1}";
    EXPECT_FALSE(parses(obj));
}

TEST(JwtJson, DocumentIsReusable)
{
    json::Document doc;
    ASSERT_TRUE(doc.parse(R"({"a":"\u00e9"})"));
    EXPECT_FALSE(doc.parse("{"));
    const std::string second = R"({"b":["x\ty"]})";
    ASSERT_TRUE(doc.parse(second));
    EXPECT_EQ(doc.find(doc.root(), "a"), nullptr);
    EXPECT_EQ(doc.children(*doc.find(doc.root(), "b")).begin()->text, "x\ty");
}

TEST(JwtJson, Utf8Validation)
{
    EXPECT_TRUE(json::valid_utf8("plain \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf"));
    EXPECT_FALSE(json::valid_utf8("\xc1\xbf"));          // overlong
    EXPECT_FALSE(json::valid_utf8("\xe0\x9f\xbf"));      // overlong
    EXPECT_FALSE(json::valid_utf8("\xed\xbf\xbf"));      // surrogate
    EXPECT_FALSE(json::valid_utf8("\xf4\x90\x80\x80"));  // > U+10FFFF
    EXPECT_FALSE(json::valid_utf8("\xe2\x82"));          // truncated
    EXPECT_FALSE(json::valid_utf8("\x80"));
}
