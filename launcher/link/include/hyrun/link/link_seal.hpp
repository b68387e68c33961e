#pragma once
// Authentication of the node link's lines after the hello (node_link.hpp). A node opens its
// connection with a fresh nonce; both ends derive the session's key from the job token, the
// node's task and that nonce, and every later line in either direction is sealed:
//
//   <mac> <seq> <body>    mac = the first 32 hex digits of HMAC-SHA256(key, "<direction> <seq> <body>")
//
// with <seq> counting 1, 2, ... per direction. So a line that someone who can write into
// the TCP connection makes up ("bye", "lost ..."), changes, replays, reorders, or reflects
// back to its sender is refused; without the token no one can make the key. A session
// replayed whole is refused too: the root takes one connection per task and job.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "hyrun/common/hmac_sha256.hpp"
#include "hyrun/link/link_message.hpp"

namespace hyrun {

/// 32 hex digits from the kernel's CSPRNG: a node's nonce for one connection.
std::string new_link_nonce();
/// What a node sends to prove that it holds the job token: hex HMAC-SHA256(token,
/// "hyrun-link v7 <task> to <to> <nonce>", or "... to <to> direct-modex <nonce>"). Bound to
/// the hyrun it connects to (the root, its parent in the tree, or a node it asks for direct
/// modex) and to what for, so a hello seen on one connection opens no other.
/// What a connection is for, proved with it: the root's or the tree's, or direct modex
/// (node_link.hpp), so that a hello of one kind never opens the other.
enum class LinkPurpose { kTree, kDirectModex };
std::string link_hello_proof(const std::string& token, int task, int to, std::string_view nonce,
                             LinkPurpose purpose = LinkPurpose::kTree);

/// One direction of one connection: seals what it sends, or opens what it receives.
class LinkSeal {
 public:
  enum class Direction { kToRoot, kFromRoot };
  LinkSeal(const std::string& token, int task, std::string_view nonce, Direction direction);

  /// The next line to send for `body` (without newline).
  std::string seal(std::string_view body);
  /// The same line's start, "<mac> <seq> ": the body follows it on the wire.
  std::string seal_head(std::string_view body);
  /// The body of `line` when it is the next authentic line of this direction, else nullopt
  /// (and the expected number stays: a refused line ends the link anyway).
  std::optional<std::string> open(std::string_view line);

 private:
  std::string mac(std::uint64_t seq, std::string_view body) const;

  HmacSha256 key_;
  std::string_view direction_;
  std::uint64_t next_ = 1;
};

}  // namespace hyrun
