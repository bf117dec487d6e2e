// The Kubernetes client against the simulated k3s API server: real HTTPS
// with client certificates, server-side apply, Status errors, watches that
// break and expire, and the fault knobs that make retries necessary.
#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "gpunode/kube.hpp"
#include "gpunode/system_host.hpp"
#include "k3s_sim.hpp"
#include "test_support.hpp"

using namespace gpunode;
using namespace gpunode::test;
using kube::json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::steady_clock;

namespace {

const std::string kCms = "/api/v1/namespaces/kube-system/configmaps";
const std::string kRc = "/apis/node.k8s.io/v1/runtimeclasses/nvidia";

json configmap(const std::string& name, const std::string& value) {
  return {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata", {{"name", name}, {"namespace", "kube-system"}}},
          {"data", {{"value", value}}}};
}

std::string data_value(const json& cm) {
  return cm.value("/data/value"_json_pointer, std::string());
}

// A simulated node and clients for it, on the real clock.
struct Cluster {
  TempDir dir;
  std::string root = dir.path() + "/node";
  std::unique_ptr<K3sSim> sim;
  std::unique_ptr<FileSystem> fs = make_rooted_file_system("/");
  std::unique_ptr<Clock> clock = make_system_clock();

  Cluster() {
    make_host_tree(root, "good-v3");
    SimOptions o;
    o.root = root;
    sim = std::make_unique<K3sSim>(o);
  }

  Result<std::unique_ptr<kube::Client>> connect(const std::string& kubeconfig) {
    auto config = kube::load_kubeconfig(*fs, kubeconfig);
    if (!config) return config.error();
    return kube::Client::connect(*config, *clock);
  }

  std::unique_ptr<kube::Client> client() {
    auto c = connect(sim->kubeconfig());
    INFO((c ? "" : c.error().message));
    REQUIRE(c);
    return std::move(*c);
  }
};

steady_clock::time_point in(milliseconds d) { return steady_clock::now() + d; }

long long ms_since(steady_clock::time_point t) {
  return std::chrono::duration_cast<milliseconds>(steady_clock::now() - t)
      .count();
}

}  // namespace

TEST_CASE("sim: get, list, apply (create, then a no-op), remove, 404",
          "[kube][sim]") {
  Cluster c;
  auto client = c.client();
  const auto deadline = in(seconds(20));

  auto nodes = client->list("/api/v1/nodes", deadline);
  REQUIRE(nodes);
  REQUIRE((*nodes)["items"].is_array());
  CHECK((*nodes)["items"].size() == 1);
  auto node = client->get("/api/v1/nodes/gpu-node-1", deadline);
  REQUIRE(node);
  REQUIRE(node->has_value());
  CHECK((**node)["metadata"]["name"] == "gpu-node-1");

  auto missing = client->get(kCms + "/gpunode-nothing", deadline);
  REQUIRE(missing);
  CHECK_FALSE(missing->has_value());

  auto created = client->apply(kCms + "/gpunode-test",
                               configmap("gpunode-test", "1"), deadline);
  INFO((created ? "" : created.error().message));
  REQUIRE(created);
  CHECK(data_value(*created) == "1");
  const std::string rv = (*created)["metadata"]["resourceVersion"];
  // Applying the same content again changes nothing, not even the version.
  auto again = client->apply(kCms + "/gpunode-test",
                             configmap("gpunode-test", "1"), deadline);
  REQUIRE(again);
  CHECK((*again)["metadata"]["resourceVersion"] == rv);
  CHECK(data_value(c.sim->object(kCms + "/gpunode-test")) == "1");

  auto removed = client->remove(kCms + "/gpunode-test", deadline);
  REQUIRE(removed);
  CHECK(*removed);
  auto gone = client->remove(kCms + "/gpunode-test", deadline);
  REQUIRE(gone);
  CHECK_FALSE(*gone);
  auto after = client->get(kCms + "/gpunode-test", deadline);
  REQUIRE(after);
  CHECK_FALSE(after->has_value());
}

TEST_CASE("sim: an immutable field is a 422 with the server's cause",
          "[kube][sim]") {
  Cluster c;
  auto client = c.client();
  const auto deadline = in(seconds(20));
  const json rc = {{"apiVersion", "node.k8s.io/v1"},
                   {"kind", "RuntimeClass"},
                   {"metadata", {{"name", "nvidia"}}},
                   {"handler", "nvidia"}};
  REQUIRE(client->apply(kRc, rc, deadline));
  json other = rc;
  other["handler"] = "crun";
  auto r = client->apply(kRc, other, deadline);
  REQUIRE_FALSE(r);
  INFO(r.error().message);
  CHECK(r.error().status == 422);
  CHECK(r.error().layer == "cluster");
  CHECK_THAT(
      r.error().message,
      Catch::StartsWith("PATCH /apis/node.k8s.io/v1/runtimeclasses/nvidia: "));
  CHECK_THAT(r.error().message, Catch::Contains("immutable"));
  CHECK_THAT(r.error().message, Catch::Contains("(422 Invalid)"));
}

TEST_CASE("sim: a watch sees a change made by another request", "[kube][sim]") {
  Cluster c;
  auto client = c.client();
  auto writer = c.client();
  const auto deadline = in(seconds(20));
  REQUIRE(client->apply(kCms + "/gpunode-watch",
                        configmap("gpunode-watch", "1"), deadline));
  std::vector<std::string> seen;
  auto r = client->watch(
      kCms, "metadata.name=gpunode-watch",
      [&](const std::string& type, const json& cm) {
        seen.push_back(type + " " + data_value(cm));
        if (type == "ADDED" && data_value(cm) == "1") {
          // Changed after the list: only the watch can report it.
          auto w = writer->apply(kCms + "/gpunode-watch",
                                 configmap("gpunode-watch", "2"), deadline);
          REQUIRE(w);
        }
        if (data_value(cm) != "2") return kube::WatchStep::kContinue;
        // A request from inside the watch's own callback, on the same
        // client, while its stream is open (the allocatable stage does so).
        auto now = client->get(kCms + "/gpunode-watch", deadline);
        REQUIRE(now);
        REQUIRE(now->has_value());
        CHECK(data_value(**now) == "2");
        return kube::WatchStep::kDone;
      },
      deadline);
  INFO((r ? "" : r.error().message));
  REQUIRE(r);
  CHECK(seen == std::vector<std::string>{"ADDED 1", "MODIFIED 2"});
}

TEST_CASE("sim: a watch resumes after the server drops it", "[kube][sim]") {
  Cluster c;
  auto client = c.client();
  auto writer = c.client();
  const auto deadline = in(seconds(30));
  REQUIRE(client->apply(kCms + "/gpunode-drop", configmap("gpunode-drop", "1"),
                        deadline));
  std::vector<std::string> seen;
  std::thread change;
  auto r = client->watch(
      kCms, "metadata.name=gpunode-drop",
      [&](const std::string& type, const json& cm) {
        seen.push_back(type + " " + data_value(cm));
        if (!change.joinable()) {
          // Drop the open watch, then change the object while we are
          // (re)connecting: resuming from the last resourceVersion must
          // still deliver the change, once.
          change = std::thread([&] {
            std::this_thread::sleep_for(milliseconds(300));
            c.sim->faults({{"drop_watches", true}});
            std::this_thread::sleep_for(milliseconds(200));
            (void)writer->apply(kCms + "/gpunode-drop",
                                configmap("gpunode-drop", "2"), deadline);
          });
        }
        return data_value(cm) == "2" ? kube::WatchStep::kDone
                                     : kube::WatchStep::kContinue;
      },
      deadline);
  if (change.joinable()) change.join();
  INFO((r ? "" : r.error().message));
  REQUIRE(r);
  CHECK(seen == std::vector<std::string>{"ADDED 1", "MODIFIED 2"});
  const json stats = c.sim->stats();
  INFO(stats.dump());
  CHECK(stats["by_verb"].value("watch", 0) >= 2);  // it reconnected
  CHECK(stats["by_verb"].value("list", 0) == 1);   // without listing again
}

TEST_CASE("sim: a watch across an API server restart lists again (410)",
          "[kube][sim]") {
  Cluster c;
  auto client = c.client();
  auto writer = c.client();
  const auto deadline = in(seconds(30));
  REQUIRE(client->apply(kCms + "/gpunode-restart",
                        configmap("gpunode-restart", "1"), deadline));
  std::vector<std::string> seen;
  std::thread change;
  auto r = client->watch(
      kCms, "metadata.name=gpunode-restart",
      [&](const std::string& type, const json& cm) {
        seen.push_back(type + " " + data_value(cm));
        if (!change.joinable()) {
          change = std::thread([&] {
            std::this_thread::sleep_for(milliseconds(300));
            c.sim->faults({{"restart", true}});
            std::this_thread::sleep_for(milliseconds(700));
            (void)writer->apply(kCms + "/gpunode-restart",
                                configmap("gpunode-restart", "2"), deadline);
          });
        }
        return data_value(cm) == "2" ? kube::WatchStep::kDone
                                     : kube::WatchStep::kContinue;
      },
      deadline);
  if (change.joinable()) change.join();
  INFO((r ? "" : r.error().message));
  REQUIRE(r);
  INFO(c.sim->stats().dump());
  // The history is gone after the restart: the resumed watch gets 410 and
  // the client lists again, delivering the object as ADDED once more.
  REQUIRE(seen.size() >= 3);
  CHECK(seen[0] == "ADDED 1");
  CHECK(seen[1] == "ADDED 1");
  CHECK(seen.back().substr(seen.back().size() - 1) == "2");
  CHECK(c.sim->stats()["by_verb"].value("list", 0) >= 2);
}

TEST_CASE("sim: 5xx and 429 are retried within the deadline", "[kube][sim]") {
  Cluster c;
  auto client = c.client();
  SECTION("5xx") {
    c.sim->faults({{"error_5xx", 3}});
    auto r = client->list("/api/v1/nodes", in(seconds(20)));
    INFO((r ? "" : r.error().message));
    CHECK(r);
  }
  SECTION("429 with Retry-After") {
    c.sim->faults({{"error_429", 2}, {"retry_after", 1}});
    const auto start = steady_clock::now();
    auto r = client->get("/api/v1/nodes/gpu-node-1", in(seconds(20)));
    INFO((r ? "" : r.error().message));
    CHECK(r);
    CHECK(ms_since(start) >= 1900);  // two waits of one second
  }
  SECTION("5xx past the deadline: the last cause and the attempts") {
    c.sim->faults({{"error_5xx", 1000}});
    auto r = client->list("/api/v1/nodes", in(seconds(2)));
    REQUIRE_FALSE(r);
    CHECK(r.error().status >= 500);
    CHECK_THAT(r.error().message, Catch::Contains("gave up after"));
    c.sim->faults({{"error_5xx", 0}});
  }
}

TEST_CASE("sim: refused connections are retried", "[kube][sim]") {
  Cluster c;
  auto client = c.client();
  c.sim->faults({{"refuse_ms", 1500}});
  const auto start = steady_clock::now();
  auto r = client->list("/api/v1/nodes", in(seconds(20)));
  INFO((r ? "" : r.error().message));
  CHECK(r);
  CHECK(ms_since(start) >= 1000);
}

TEST_CASE("sim: a kubeconfig with the wrong CA gets a clear TLS error",
          "[kube][sim]") {
  Cluster c;
  const std::string kubeconfig = c.sim->kubeconfig_with_wrong_ca();
  auto client = c.connect(kubeconfig);
  REQUIRE(client);
  const auto start = steady_clock::now();
  auto r = (*client)->list("/api/v1/nodes", in(seconds(20)));
  REQUIRE_FALSE(r);
  CHECK(r.error().exit == ExitCode::kBlocked);
  CHECK_THAT(r.error().message,
             Catch::Contains("the API server's certificate is not signed by "
                             "the CA in " +
                             kubeconfig));
  CHECK(ms_since(start) < 5000);  // not retried: retrying cannot fix it
}

TEST_CASE("sim: an expired client certificate is refused before connecting",
          "[kube][sim]") {
  Cluster c;
  c.sim->reset_stats();
  const std::string kubeconfig = c.sim->kubeconfig_with_expired_cert();
  auto client = c.connect(kubeconfig);
  REQUIRE_FALSE(client);
  CHECK(client.error().exit == ExitCode::kBlocked);
  CHECK_THAT(client.error().message,
             Catch::Contains("the client certificate in " + kubeconfig +
                             " expired on "));
  CHECK(c.sim->stats()["requests"] == 0);
}
