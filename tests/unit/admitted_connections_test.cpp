// The PMIx server's record of the connections it admitted: a descriptor counts only while it
// names the socket admitted (numbers are reused), a judged connection leaves the record but
// stays admitted, and one libpmix closed leaves it unjudged and no longer held.
#include "hyrun/pmix/admitted_connections.hpp"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

#include "hyrun/common/unique_fd.hpp"

namespace hyrun::pmix {
namespace {

struct Pair {
  UniqueFd ours, theirs;
};

Pair socket_pair() {
  int fds[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  return {UniqueFd(fds[0]), UniqueFd(fds[1])};
}

// The children of the connections judged now, each kept unless `verdict` says it is done.
std::vector<pid_t> judge_all(bool verdict) {
  std::vector<pid_t> judged;
  judge_admitted([&](const AdmittedConnection& c) {
    judged.push_back(c.child.value_or(-1));
    return verdict;
  });
  return judged;
}

TEST(AdmittedConnections, ADescriptorCountsWhileItNamesTheSocketAdmitted) {
  judge_all(true);  // whatever an earlier test left
  ASSERT_FALSE(any_admitted_unjudged());
  Pair a = socket_pair();
  remember_admitted(a.ours.get(), 42);
  EXPECT_TRUE(is_admitted(a.ours.get()));
  EXPECT_FALSE(is_admitted(a.theirs.get()));
  EXPECT_TRUE(any_admitted_unjudged());
  EXPECT_EQ(judge_all(false), std::vector<pid_t>{42});
  EXPECT_EQ(judge_all(false), std::vector<pid_t>{42}) << "kept while not judged done";

  // libpmix closes it; the next socket takes its number.
  const int number = a.ours.get();
  a.ours.reset();
  Pair b = socket_pair();
  ASSERT_EQ(b.ours.get(), number);
  EXPECT_FALSE(is_admitted(b.ours.get())) << "another socket under the same number";
  EXPECT_TRUE(judge_all(false).empty()) << "a closed connection is dropped unjudged";
  EXPECT_FALSE(any_admitted_unjudged());

  remember_admitted(b.ours.get(), std::nullopt);
  EXPECT_EQ(judge_all(true), std::vector<pid_t>{-1});
  EXPECT_FALSE(any_admitted_unjudged());
  EXPECT_TRUE(is_admitted(b.ours.get())) << "judged, still admitted: its handshake's answers are recognised";
}

// A rank's end is judged once libpmix has closed its connections (read them to the end): held
// counts judged connections too, only under the child they were admitted under, and only while
// the descriptor still names the socket admitted.
TEST(AdmittedConnections, AChildsConnectionIsHeldUntilLibpmixClosesIt) {
  Pair a = socket_pair(), b = socket_pair();
  remember_admitted(a.ours.get(), 7001);
  remember_admitted(b.ours.get(), 7001);
  judge_all(true);  // their handshakes completed
  EXPECT_TRUE(any_held_under(7001));
  EXPECT_FALSE(any_held_under(7002));
  a.ours.reset();
  EXPECT_TRUE(any_held_under(7001)) << "its second connection is still open";
  const int number = b.ours.get();
  b.ours.reset();
  EXPECT_FALSE(any_held_under(7001));
  Pair c = socket_pair();  // takes a closed one's number, not its child
  ASSERT_TRUE(c.ours.get() == number || c.theirs.get() == number);
  EXPECT_FALSE(any_held_under(7001)) << "another socket under the same number";
}

// The door looks last under the children a connection was admitted under (socket_holder.hpp):
// a child stays among them after its connection closed, as a process of the job connects once.
TEST(AdmittedConnections, TheChildrenConnectionsWereAdmittedUnderOutliveTheConnections) {
  Pair a = socket_pair(), b = socket_pair();
  remember_admitted(a.ours.get(), 7101);
  remember_admitted(b.ours.get(), std::nullopt);
  judge_all(true);
  auto children = children_admitted();
  EXPECT_TRUE(children.contains(7101));
  EXPECT_FALSE(children.contains(7102));
  a.ours.reset();
  EXPECT_TRUE(children_admitted().contains(7101)) << "closed, still a child that connected";
}

}  // namespace
}  // namespace hyrun::pmix
