#include "bootstrap_messages.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <cstring>

#include "hyrun/common/error.hpp"

namespace hyrun::bootstrap {
namespace {

class Writer {
 public:
  void u32(uint32_t v) { raw(&v, sizeof v); }
  void blob(std::span<const std::byte> b) {
    u32(static_cast<uint32_t>(b.size()));
    raw(b.data(), b.size());
  }
  std::vector<std::byte> take() { return std::move(out_); }

 private:
  void raw(const void* p, std::size_t n) {
    const auto* b = static_cast<const std::byte*>(p);
    out_.insert(out_.end(), b, b + n);
  }
  std::vector<std::byte> out_;
};

class Reader {
 public:
  Reader(std::span<const std::byte> in, const char* what) : in_(in), what_(what) {}
  uint32_t u32() {
    uint32_t v;
    std::memcpy(&v, take(sizeof v).data(), sizeof v);
    return v;
  }
  std::vector<std::byte> blob() {
    auto b = take(u32());
    return {b.begin(), b.end()};
  }
  void expect_end() const {
    if (pos_ != in_.size()) throw Error(std::string("malformed ") + what_ + " message: trailing bytes");
  }

 private:
  std::span<const std::byte> take(std::size_t n) {
    if (in_.size() - pos_ < n) throw Error(std::string("malformed ") + what_ + " message: truncated");
    auto s = in_.subspan(pos_, n);
    pos_ += n;
    return s;
  }
  std::span<const std::byte> in_;
  const char* what_;
  std::size_t pos_ = 0;
};

ProcessIdentity decode_process(const std::vector<std::byte>& bytes, const char* what) {
  try {
    return ProcessIdentity::decode(bytes);
  } catch (const Error& e) {
    throw Error(fmt::format("malformed {} message: {}", what, e.what()));
  }
}

}  // namespace

std::vector<std::byte> encode(const JoinRequest& join) {
  Writer w;
  w.u32(static_cast<uint32_t>(join.rank));
  w.u32(static_cast<uint32_t>(join.node));
  w.blob(join.address);
  w.blob(join.process.encode());
  return w.take();
}

JoinRequest decode_join(std::span<const std::byte> bytes) {
  if (bytes.size() > kMaxJoinBytes)
    throw Error(fmt::format("malformed join message: {} bytes, at most {}", bytes.size(), kMaxJoinBytes));
  Reader r(bytes, "join");
  JoinRequest join;
  join.rank = static_cast<int>(r.u32());
  join.node = static_cast<int>(r.u32());
  join.address = r.blob();
  join.process = decode_process(r.blob(), "join");
  r.expect_end();
  if (join.address.empty()) throw Error("malformed join message: empty worker address");
  return join;
}

std::vector<std::byte> encode_bundle(const std::vector<std::vector<std::byte>>& sealed_joins) {
  Writer w;
  w.u32(static_cast<uint32_t>(sealed_joins.size()));
  for (const auto& join : sealed_joins) w.blob(join);
  return w.take();
}

std::vector<std::vector<std::byte>> decode_bundle(std::span<const std::byte> bytes, std::size_t max_joins) {
  Reader r(bytes, "join bundle");
  const uint32_t count = r.u32();
  if (count == 0 || count > max_joins)
    throw Error(fmt::format("malformed join bundle message: {} joins, expected 1 to {}", count, max_joins));
  std::vector<std::vector<std::byte>> joins(count);
  for (auto& join : joins) {
    join = r.blob();
    if (join.size() > kMaxSealedJoinBytes)
      throw Error(fmt::format("malformed join bundle message: a join of {} bytes, at most {}", join.size(),
                              kMaxSealedJoinBytes));
  }
  r.expect_end();
  return joins;
}

std::vector<std::byte> encode_table(const std::vector<Peer>& peers) {
  Writer w;
  w.u32(static_cast<uint32_t>(peers.size()));
  for (const auto& p : peers) {
    w.u32(static_cast<uint32_t>(p.node));
    w.blob(p.address);
    w.blob(p.process.encode());
  }
  return w.take();
}

std::vector<Peer> decode_table(std::span<const std::byte> bytes) {
  Reader r(bytes, "address table");
  const uint32_t count = r.u32();
  if (count > bytes.size()) throw Error("malformed address table message: more entries than bytes");
  std::vector<Peer> peers(count);
  for (auto& p : peers) {
    p.node = static_cast<int>(r.u32());
    p.address = r.blob();
    if (p.address.size() > kMaxAddressBytes)
      throw Error(fmt::format("malformed address table message: an address of {} bytes, at most {}", p.address.size(),
                              kMaxAddressBytes));
    p.process = decode_process(r.blob(), "address table");
  }
  r.expect_end();
  return peers;
}

}  // namespace hyrun::bootstrap
