#include "auth/Base64Url.hpp"

#include <array>
#include <cstdint>

namespace l7fast::auth {

namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
constexpr uint8_t kInvalid = 0xff;

constexpr std::array<uint8_t, 256> make_table()
{
    std::array<uint8_t, 256> t{};
    for (auto& v : t)
        v = kInvalid;
    for (uint8_t i = 0; i < 64; ++i)
        t[static_cast<uint8_t>(kAlphabet[i])] = i;
    return t;
}

constexpr std::array<uint8_t, 256> kTable = make_table();

}  // namespace

bool base64url_decode(std::string_view in, std::string* out)
{
    const size_t rem = in.size() % 4;
    if (rem == 1)
        return false;
    out->reserve(out->size() + base64url_decoded_size(in.size()));
    const auto* p = reinterpret_cast<const unsigned char*>(in.data());
    const size_t whole = in.size() - rem;
    for (size_t i = 0; i < whole; i += 4) {
        const uint8_t a = kTable[p[i]], b = kTable[p[i + 1]], c = kTable[p[i + 2]], d = kTable[p[i + 3]];
        if ((a | b | c | d) & 0xc0)  // kInvalid; valid values are below 64
            return false;
        const uint32_t v = uint32_t(a) << 18 | uint32_t(b) << 12 | uint32_t(c) << 6 | d;
        out->push_back(static_cast<char>(v >> 16));
        out->push_back(static_cast<char>(v >> 8));
        out->push_back(static_cast<char>(v));
    }
    if (rem == 0)
        return true;
    const uint8_t a = kTable[p[whole]], b = kTable[p[whole + 1]];
    if (a == kInvalid || b == kInvalid)
        return false;
    if (rem == 2) {
        if (b & 0x0f)  // the last character carries 4 unused bits
            return false;
        out->push_back(static_cast<char>(a << 2 | b >> 4));
        return true;
    }
    const uint8_t c = kTable[p[whole + 2]];
    if (c == kInvalid || (c & 0x03))  // 2 unused bits
        return false;
    out->push_back(static_cast<char>(a << 2 | b >> 4));
    out->push_back(static_cast<char>((b & 0x0f) << 4 | c >> 2));
    return true;
}

std::string base64url_encode(std::string_view bytes)
{
    std::string out;
    out.reserve((bytes.size() * 4 + 2) / 3);
    const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
    size_t i = 0;
    for (; i + 3 <= bytes.size(); i += 3) {
        const uint32_t v = uint32_t(p[i]) << 16 | uint32_t(p[i + 1]) << 8 | p[i + 2];
        out.push_back(kAlphabet[v >> 18]);
        out.push_back(kAlphabet[(v >> 12) & 63]);
        out.push_back(kAlphabet[(v >> 6) & 63]);
        out.push_back(kAlphabet[v & 63]);
    }
    if (bytes.size() - i == 1) {
        out.push_back(kAlphabet[p[i] >> 2]);
        out.push_back(kAlphabet[(p[i] & 3) << 4]);
    } else if (bytes.size() - i == 2) {
        const uint32_t v = uint32_t(p[i]) << 8 | p[i + 1];
        out.push_back(kAlphabet[v >> 10]);
        out.push_back(kAlphabet[(v >> 4) & 63]);
        out.push_back(kAlphabet[(v & 15) << 2]);
    }
    return out;
}

}  // namespace l7fast::auth
