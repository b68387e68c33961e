#pragma once
// The node link's protocol (docs/architecture.md, "The node link"): the one table of its
// message kinds, and for each kind one formatter and one strict parser. The first line of
// a connection is the hello, unsealed, whose first words name the protocol's version; every
// later line is sealed (link_seal.hpp) and its body starts with its kind's word. A body whose
// kind is not one of this version's, or whose fields are not exactly its kind's, is refused
// (the link then ends), never half read.
//
//   hello          hyrun-link v7 <task> <nonce> <proof>    a node, first (unsealed)
//   alive          alive                                   both: heartbeat
//   bye            bye                                     both: this hyrun ends by itself
//   lost           lost <task> <reporter> <host> <why>     up the tree: <reporter>'s hyrun lost node
//                                                          <task>, its tree parent or child, for the
//                                                          root to judge; down from the root (or a
//                                                          parent): the root's word on that loss
//   fence          fence <n> <hex>                         node -> root: its part of fence n
//   fenced         fenced <n> <hex>                        root -> nodes: fence n, every part
//   fence-failed   fence-failed <n> <why>                  fence n fails on every node (too large)
//   dmodex-get     dmodex-get <id> <rank>                  a rank's data, asked (routed by the root)
//   dmodex-data    dmodex-data <id> <hex>                  the answer to request <id>
//   dmodex-none    dmodex-none <id>                        request <id> has no answer
//   more           more <hex>                              both: the first bytes of the next fence,
//                                                          fenced or dmodex-data line of the sender
//   costs          costs <task> <cpu> <helper> <sent> <got> <fences> <bytes>
//                                                          up the tree to the root, before the bye
//                                                          (--timings): what the launch cost
//                                                          node <task> (LinkCosts)
//   ended          ended <task>                            a parent, up the tree: its child <task>
//                                                          said bye (its subtree ended), so that
//                                                          the root does not wait for it once the
//                                                          parent is lost (to the grandparent,
//                                                          which passes it up then)
//
// Bytes travel in pieces of at most kLinkPieceBytes (format_link_pieces): a message of more
// is sent as "more" lines and then its kind's line with the last piece, back to back, so no
// line of the link is longer than kLinkMaxLine and no hex copy of a whole fence is made.
//
// <task>, <reporter>, <n>, <id>, <rank>: decimal, digits only, within their type (int, 64 and 32 bits
// unsigned); <hex>: lower- or upper-case hex digits, possibly none (opaque bytes); <host>: one
// word of at most 128 characters; <why>: the rest of the line, possibly empty (fence-failed:
// not empty, at most kLinkMaxWhy characters); more's <hex>: at least one byte, at most
// kLinkPieceBytes.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace hyrun {

/// The hello's first words: the protocol and its version. Every kind below is this version's.
inline constexpr std::string_view kLinkHello = "hyrun-link v7";
/// The most bytes one line carries: longer data goes in pieces ("more").
inline constexpr std::size_t kLinkPieceBytes = std::size_t{4} << 20;
/// The longest sealed line (without its newline): a piece as hex, its kind, number and seal.
inline constexpr std::size_t kLinkMaxLine = 2 * kLinkPieceBytes + 1024;

/// The kinds of sealed lines.
enum class LinkKind {
  kAlive,
  kBye,
  kLost,
  kFence,
  kFenced,
  kFenceFailed,
  kDmodexGet,
  kDmodexData,
  kDmodexNone,
  kMore,
  kCosts,
  kEnded
};

struct LinkKindInfo {
  LinkKind kind;
  std::string_view word;  ///< the body's first word
  std::string_view from;  ///< who sends it
};
/// Every kind of this version, in the order of docs/architecture.md's table.
std::span<const LinkKindInfo> link_kinds();
/// A body's kind, by its first word (up to a space or the end); nullopt when no kind of this
/// version has that word.
std::optional<LinkKind> link_kind_of(std::string_view body);
/// The word of `kind`.
std::string_view link_kind_word(LinkKind kind);

/// The first line a node sends (unsealed).
struct LinkHello {
  int task = -1;      ///< the sender's task (PMIx rank)
  std::string nonce;  ///< 32 lower-case hex digits, fresh per connection: the session's key derives from it
  std::string proof;  ///< link_hello_proof(token, task, nonce): one word of at most 128 characters
  bool operator==(const LinkHello&) const = default;
};
/// The kinds without fields: the body is the kind's word.
template <LinkKind K>
struct LinkWord {
  static constexpr LinkKind kKind = K;
  bool operator==(const LinkWord&) const = default;
};
using LinkAlive = LinkWord<LinkKind::kAlive>;
using LinkBye = LinkWord<LinkKind::kBye>;

/// The kinds of a number and opaque bytes (sent as hex).
template <LinkKind K>
struct LinkNumberedBytes {
  static constexpr LinkKind kKind = K;
  std::uint64_t number = 0;
  std::string data;
  bool operator==(const LinkNumberedBytes&) const = default;
};
/// A node's part of the job's fence `number` (PMIx data).
using LinkFencePart = LinkNumberedBytes<LinkKind::kFence>;
/// Fence `number` complete: every node's part, in task order.
using LinkFenceWhole = LinkNumberedBytes<LinkKind::kFenced>;
/// The answer to request `number` (a direct modex's data).
using LinkDmodexData = LinkNumberedBytes<LinkKind::kDmodexData>;

/// Fence `number` fails on every node: `why` (its data is more than hyrun relays). From a node:
/// its own part is; from the root: the whole is, or a node said so.
struct LinkFenceFailed {
  static constexpr LinkKind kKind = LinkKind::kFenceFailed;
  std::uint64_t number = 0;
  std::string why;  ///< one line of at most kLinkMaxWhy characters
  bool operator==(const LinkFenceFailed&) const = default;
};
inline constexpr std::size_t kLinkMaxWhy = 512;
/// The first bytes of the sender's next fence, fenced or dmodex-data line (at least one).
struct LinkMore {
  static constexpr LinkKind kKind = LinkKind::kMore;
  std::string data;
  bool operator==(const LinkMore&) const = default;
};

/// Node `task` is lost: seen by `reporter`'s hyrun (going up the tree to the root), or the
/// root's word on it (going down: the job goes on without it, or ends).
struct LinkLoss {
  static constexpr LinkKind kKind = LinkKind::kLost;
  int task = -1;
  int reporter = 0;  ///< the node whose hyrun saw it go
  std::string host;
  std::string why;  ///< possibly empty
  bool operator==(const LinkLoss&) const = default;
};
/// Request `id`: the data `rank` committed.
struct LinkDmodexGet {
  static constexpr LinkKind kKind = LinkKind::kDmodexGet;
  std::uint64_t id = 0;
  std::uint32_t rank = 0;
  bool operator==(const LinkDmodexGet&) const = default;
};
/// Request `id` has no answer (the rank committed nothing the server could give).
struct LinkDmodexNone {
  static constexpr LinkKind kKind = LinkKind::kDmodexNone;
  std::uint64_t id = 0;
  bool operator==(const LinkDmodexNone&) const = default;
};

/// What node `task`'s launch cost it, for the root's summary of --timings: CPU time in
/// microseconds of its hyrun and of its PMIx client helper, bytes sent and received on the
/// node link, the fences across nodes it took part in and the bytes of its parts.
struct LinkCosts {
  static constexpr LinkKind kKind = LinkKind::kCosts;
  int task = 0;
  std::uint64_t cpu_us = 0;
  std::uint64_t helper_cpu_us = 0;
  std::uint64_t link_sent = 0;
  std::uint64_t link_received = 0;
  std::uint64_t fences = 0;
  std::uint64_t fence_bytes = 0;
  bool operator==(const LinkCosts&) const = default;
};

/// Node `task` said bye to its parent, the sender: its subtree ended.
struct LinkEnded {
  static constexpr LinkKind kKind = LinkKind::kEnded;
  int task = -1;
  bool operator==(const LinkEnded&) const = default;
};

namespace link_detail {
std::string format_numbered_bytes(LinkKind kind, std::uint64_t number, const std::string& data);
std::optional<std::pair<std::uint64_t, std::string>> parse_numbered_bytes(std::string_view body, LinkKind kind);
std::optional<LinkHello> parse_hello(std::string_view line);
std::optional<LinkLoss> parse_loss(std::string_view body);
std::optional<LinkDmodexGet> parse_dmodex_get(std::string_view body);
std::optional<LinkDmodexNone> parse_dmodex_none(std::string_view body);
std::optional<LinkFenceFailed> parse_fence_failed(std::string_view body);
std::optional<LinkMore> parse_more(std::string_view body);
std::optional<LinkCosts> parse_costs(std::string_view body);
std::optional<LinkEnded> parse_ended(std::string_view body);
std::vector<std::string> format_pieces(LinkKind kind, std::uint64_t number, std::string_view data);
}  // namespace link_detail

/// The line (hello) or body (the others) of a message.
std::string format_link(const LinkHello& m);
std::string format_link(const LinkLoss& m);
std::string format_link(const LinkDmodexGet& m);
std::string format_link(const LinkDmodexNone& m);
std::string format_link(const LinkFenceFailed& m);
std::string format_link(const LinkMore& m);
std::string format_link(const LinkCosts& m);
std::string format_link(const LinkEnded& m);
template <LinkKind K>
std::string format_link(const LinkWord<K>&) {
  return std::string(link_kind_word(K));
}
template <LinkKind K>
std::string format_link(const LinkNumberedBytes<K>& m) {
  return link_detail::format_numbered_bytes(K, m.number, m.data);
}

/// The bodies that carry `m`: a "more" line a kLinkPieceBytes piece but the last, then m's
/// own line with the last piece (one line when the data fits in one).
template <LinkKind K>
std::vector<std::string> format_link_pieces(const LinkNumberedBytes<K>& m) {
  return link_detail::format_pieces(K, m.number, m.data);
}

/// The message of type M that `text` is exactly, or nullopt. Whether a task, proof or rank is
/// right for the job is the caller's check.
template <class M>
std::optional<M> parse_link(std::string_view text) {
  if constexpr (std::is_same_v<M, LinkHello>) {
    return link_detail::parse_hello(text);
  } else if constexpr (std::is_same_v<M, LinkWord<M::kKind>>) {
    return text == link_kind_word(M::kKind) ? std::optional<M>(M{}) : std::nullopt;
  } else if constexpr (std::is_same_v<M, LinkNumberedBytes<M::kKind>>) {
    auto fields = link_detail::parse_numbered_bytes(text, M::kKind);
    if (!fields) return std::nullopt;
    return M{fields->first, std::move(fields->second)};
  } else if constexpr (std::is_same_v<M, LinkLoss>) {
    return link_detail::parse_loss(text);
  } else if constexpr (std::is_same_v<M, LinkDmodexGet>) {
    return link_detail::parse_dmodex_get(text);
  } else if constexpr (std::is_same_v<M, LinkFenceFailed>) {
    return link_detail::parse_fence_failed(text);
  } else if constexpr (std::is_same_v<M, LinkMore>) {
    return link_detail::parse_more(text);
  } else if constexpr (std::is_same_v<M, LinkCosts>) {
    return link_detail::parse_costs(text);
  } else if constexpr (std::is_same_v<M, LinkEnded>) {
    return link_detail::parse_ended(text);
  } else {
    static_assert(std::is_same_v<M, LinkDmodexNone>, "not a message of the node link");
    return link_detail::parse_dmodex_none(text);
  }
}

}  // namespace hyrun
