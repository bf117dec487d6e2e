// The test double the cluster-stage tests stand on: its defaults are the
// ones that make a forgotten answer fail loudly, and its answers have the
// real client's shapes (installer/kube/client.cpp).
#include "fake_kube_client.hpp"

#include <catch2/catch.hpp>

namespace gpunode::test {
namespace {

using kube::json;

const std::string kPath = "/api/v1/namespaces/default/configmaps/x";

struct Fixture {
  FakeClock clock;
  FakeKubeClient kube{clock};
  std::chrono::steady_clock::time_point deadline =
      clock.steady_now() + std::chrono::seconds(30);
};

}  // namespace

TEST_CASE("FakeKubeClient: a request nobody answered is an error, recorded",
          "[fake-kube]") {
  Fixture f;
  auto got = f.kube.get(kPath, f.deadline);
  REQUIRE_FALSE(got);
  CHECK(got.error().message == "FakeKubeClient: no answer for GET " + kPath);
  CHECK(got.error().layer == kNoAnswerLayer);
  CHECK_FALSE(f.kube.list("/api/v1/nodes", f.deadline));
  CHECK_FALSE(f.kube.remove(kPath, f.deadline));
  CHECK_FALSE(f.kube.get_text(kPath + "/log", f.deadline));
  CHECK_FALSE(f.kube.watch(
      "/api/v1/nodes", "",
      [](const std::string&, const json&) { return kube::WatchStep::kDone; },
      f.deadline));
  REQUIRE(f.kube.unanswered().size() == 5);
  CHECK(f.kube.unanswered()[0].line() == "GET " + kPath);
  CHECK(f.kube.requests().size() == 5);
}

TEST_CASE("FakeKubeClient: the store behaves as the API server would",
          "[fake-kube]") {
  Fixture f;
  const json cm = {{"apiVersion", "v1"},
                   {"kind", "ConfigMap"},
                   {"metadata", {{"name", "x"}, {"namespace", "default"}}}};
  SECTION("apply stores and returns what is stored") {
    auto applied = f.kube.apply(kPath, cm, f.deadline);
    REQUIRE(applied);
    CHECK((*applied)["metadata"].contains("resourceVersion"));
    auto got = f.kube.get(kPath, f.deadline);
    REQUIRE(got);
    REQUIRE(*got);
    CHECK(**got == *applied);
    CHECK(f.kube.writes().size() == 1);
    CHECK(f.kube.writes()[0].body == cm);
  }
  SECTION("delete: true, then gone (404 shapes)") {
    f.kube.put(kPath, cm);
    CHECK(*f.kube.remove(kPath, f.deadline));
    CHECK_FALSE(*f.kube.remove(kPath, f.deadline));
    auto got = f.kube.get(kPath, f.deadline);
    REQUIRE(got);
    CHECK_FALSE(*got);
    CHECK(f.kube.unanswered().empty());
  }
  SECTION("create stores under the collection; a second is a 409") {
    const std::string pods = "/api/v1/namespaces/default/configmaps";
    REQUIRE(f.kube.create(pods, cm, f.deadline));
    CHECK(f.kube.stored(pods + "/x"));
    auto again = f.kube.create(pods, cm, f.deadline);
    REQUIRE_FALSE(again);
    CHECK(again.error().status == 409);
  }
  SECTION("a canned answer wins over the store") {
    f.kube.put(kPath, cm);
    f.kube.answer_absent(KubeVerb::kGet, kPath);
    auto got = f.kube.get(kPath, f.deadline);
    REQUIRE(got);
    CHECK_FALSE(*got);
    f.kube.answer_status(KubeVerb::kGet, kPath, 403, "no");
    got = f.kube.get(kPath, f.deadline);
    REQUIRE_FALSE(got);
    CHECK(got.error().status == 403);
    CHECK(got.error().message ==
          "GET " + kPath +
              ": the credentials in /etc/rancher/k3s/k3s.yaml were refused "
              "for this request: no (403 Forbidden)");
  }
}

TEST_CASE("FakeKubeClient: '*' in a canned path matches one segment",
          "[fake-kube]") {
  Fixture f;
  f.kube.answer_text("/api/v1/namespaces/default/pods/*/log", "hello");
  auto log =
      f.kube.get_text("/api/v1/namespaces/default/pods/p-1/log", f.deadline);
  REQUIRE(log);
  CHECK(*log == "hello");
  CHECK_FALSE(
      f.kube.get_text("/api/v1/namespaces/default/pods/a/b/log", f.deadline));
}

TEST_CASE("FakeKubeClient: lists are List objects with items", "[fake-kube]") {
  Fixture f;
  f.kube.answer_list("/api/v1/nodes", {{{"metadata", {{"name", "n1"}}}}});
  auto list = f.kube.list("/api/v1/nodes", f.deadline);
  REQUIRE(list);
  CHECK((*list)["kind"] == "List");
  REQUIRE((*list)["items"].size() == 1);
  CHECK((*list)["items"][0]["metadata"]["name"] == "n1");
}

TEST_CASE(
    "FakeKubeClient: a watch hands its events, then waits out the "
    "deadline",
    "[fake-kube]") {
  Fixture f;
  WatchStream first;
  first.events = {{"ADDED", {{"n", 1}}}, {"MODIFIED", {{"n", 2}}}};
  WatchStream second;
  second.events = {{"ADDED", {{"n", 3}}}};
  f.kube.answer_watch("/api/v1/nodes", first);
  f.kube.answer_watch("/api/v1/nodes", second);
  std::vector<int> seen;
  auto collect = [&](const std::string&, const json& o) {
    seen.push_back(o["n"].get<int>());
    return kube::WatchStep::kContinue;
  };
  auto watched =
      f.kube.watch("/api/v1/nodes", "metadata.name=n1", collect, f.deadline);
  REQUIRE_FALSE(watched);
  CHECK(watched.error().exit == ExitCode::kTimeout);
  CHECK(watched.error().message ==
        "watch /api/v1/nodes (metadata.name=n1): timed out waiting");
  CHECK(f.clock.steady_now() == f.deadline);
  CHECK(seen == std::vector<int>{1, 2});
  // The deadline has passed: the next call times out before any event,
  // as the real one does.
  CHECK_FALSE(f.kube.watch("/api/v1/nodes", "", collect, f.deadline));
  CHECK(seen == std::vector<int>{1, 2});
  // Later calls take the next stream, then keep the last one.
  const auto later = f.clock.steady_now() + std::chrono::seconds(5);
  (void)f.kube.watch("/api/v1/nodes", "", collect, later);
  (void)f.kube.watch("/api/v1/nodes", "", collect,
                     f.clock.steady_now() + std::chrono::seconds(5));
  CHECK(seen == std::vector<int>{1, 2, 3, 3});
  CHECK(f.kube.requests()[0].line() ==
        "WATCH /api/v1/nodes (metadata.name=n1)");
}

TEST_CASE("FakeKubeClient: a watch ends when told, or with its scripted error",
          "[fake-kube]") {
  Fixture f;
  WatchStream s;
  s.events = {{"ADDED", json::object()}};
  s.end = FakeKubeClient::connection_error(KubeVerb::kWatch, "/api/v1/nodes");
  f.kube.answer_watch("/api/v1/nodes", s);
  auto done = f.kube.watch(
      "/api/v1/nodes", "",
      [](const std::string&, const json&) { return kube::WatchStep::kDone; },
      f.deadline);
  CHECK(done);
  auto ended = f.kube.watch(
      "/api/v1/nodes", "",
      [](const std::string&, const json&) {
        return kube::WatchStep::kContinue;
      },
      f.deadline);
  REQUIRE_FALSE(ended);
  CHECK(ended.error().layer == "cluster");
  CHECK(ended.error().status == 0);
  CHECK_THAT(ended.error().message,
             Catch::Contains("cannot connect to the API server at "
                             "https://127.0.0.1:6443"));
  CHECK(f.clock.steady_now() < f.deadline);  // an error does not wait
}

}  // namespace gpunode::test
