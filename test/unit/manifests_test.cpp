// Rendering the platform's manifests for the flags, and the "would applying
// change anything" comparison that keeps reruns free of writes.
#include "kube/manifests.hpp"

#include <catch2/catch.hpp>

#include "plugin/device_plugin_plan.hpp"

using namespace gpunode;
using kube::json;

namespace {
Sharing slicing(int replicas, bool rename) {
  Sharing o;
  o.variant = Variant::kTimeSlicing;
  o.replicas = replicas;
  o.rename = rename;
  return o;
}
const json& container(const DevicePluginPlan& p) {
  return p.daemonset["spec"]["template"]["spec"]["containers"][0];
}
}  // namespace

TEST_CASE("the default manifest is the platform's, with its runtimeClassName",
          "[manifests]") {
  auto p =
      plan_device_plugin(Sharing{}, "nvcr.io/nvidia/k8s-device-plugin:v0.19.3");
  REQUIRE(p);
  CHECK_FALSE(p->configmap);
  CHECK(p->resource == "nvidia.com/gpu");
  CHECK(p->replicas == 1);
  CHECK(p->daemonset["metadata"]["name"] == "nvidia-device-plugin-daemonset");
  CHECK(p->daemonset["metadata"]["namespace"] == "kube-system");
  CHECK(p->daemonset["spec"]["template"]["spec"]["runtimeClassName"] ==
        "nvidia");
  // YAML types survive: a quoted "false" stays a string (env values must be).
  CHECK(container(*p)["env"][0]["value"] == "false");
  CHECK(container(*p)["image"] == "nvcr.io/nvidia/k8s-device-plugin:v0.19.3");
  CHECK(p->daemonset["metadata"]["labels"][kManagedByLabel] == "gpunode");
  CHECK(object_path(p->daemonset) ==
        "/apis/apps/v1/namespaces/kube-system/daemonsets/"
        "nvidia-device-plugin-daemonset");
}

TEST_CASE(
    "time-slicing renders replicas and renameByDefault where the plugin reads "
    "them",
    "[manifests]") {
  auto p = plan_device_plugin(slicing(4, true), "img:1");
  REQUIRE(p);
  REQUIRE(p->configmap);
  CHECK(p->resource == "nvidia.com/gpu.shared");
  const std::string config = (*p->configmap)["data"]["config.yaml"];
  CHECK_THAT(config, Catch::Contains("replicas: 4"));
  CHECK_THAT(config, Catch::Contains("renameByDefault: true"));
  CHECK_THAT(config, Catch::Contains("failRequestsGreaterThanOne: true"));
  // Under sharing.timeSlicing, never under flags (device-plugin #1433).
  auto docs = yaml_documents(config, "config.yaml");
  REQUIRE(docs);
  CHECK((*docs)[0]["sharing"]["timeSlicing"]["renameByDefault"] == true);
  CHECK_FALSE((*docs)[0]["flags"].contains("renameByDefault"));
  CHECK(
      object_path(*p->configmap) ==
      "/api/v1/namespaces/kube-system/configmaps/nvidia-device-plugin-config");
  CHECK(container(*p)["env"][1]["name"] == "CONFIG_FILE");
}

TEST_CASE("every config change changes the pod template, so the pods restart",
          "[manifests]") {
  auto eight = plan_device_plugin(slicing(8, false), "img:1");
  auto four = plan_device_plugin(slicing(4, false), "img:1");
  auto renamed = plan_device_plugin(slicing(8, true), "img:1");
  auto plain = plan_device_plugin(Sharing{}, "img:1");
  REQUIRE((eight && four && renamed && plain));
  const auto hash = [](const DevicePluginPlan& p) {
    return p.daemonset["spec"]["template"]["metadata"]["annotations"]
                      [kConfigHashAnnotation];
  };
  CHECK(hash(*eight) != hash(*four));
  CHECK(hash(*eight) != hash(*renamed));
  CHECK(hash(*eight) != hash(*plain));
  CHECK(hash(*eight) == hash(*plan_device_plugin(slicing(8, false), "img:1")));
}

TEST_CASE("a live object that holds everything desired needs no write",
          "[manifests]") {
  json desired = {{"metadata", {{"name", "x"}, {"labels", {{"a", "1"}}}}},
                  {"spec", {{"list", {{{"k", "v"}}}}, {"n", 2}}}};
  json live = desired;
  live["metadata"]["resourceVersion"] = "42";
  live["metadata"]["uid"] = "u";
  live["spec"]["list"][0]["defaulted"] = "by the server";
  live["status"] = {{"ready", true}};
  CHECK(holds_all_of(live, desired));
  json changed = live;
  changed["spec"]["n"] = 3;
  CHECK_FALSE(holds_all_of(changed, desired));
  json fewer = live;
  fewer["spec"]["list"] = json::array();
  CHECK_FALSE(holds_all_of(fewer, desired));
  json relabelled = live;
  relabelled["metadata"]["labels"].erase("a");
  CHECK_FALSE(holds_all_of(relabelled, desired));
}

TEST_CASE("the RuntimeClass is the one k3s would make, labelled as ours",
          "[manifests]") {
  auto rc = render_runtimeclass();
  REQUIRE(rc);
  CHECK((*rc)["handler"] == "nvidia");
  CHECK((*rc)["metadata"]["name"] == "nvidia");
  CHECK(object_path(*rc) == "/apis/node.k8s.io/v1/runtimeclasses/nvidia");
}

TEST_CASE("the first difference names the field", "[manifests]") {
  json desired = {
      {"spec",
       {{"template", {{"spec", {{"runtimeClassName", "nvidia"}, {"n", 2}}}}}}}};
  json live = desired;
  CHECK(first_difference(live, desired).empty());
  live["spec"]["template"]["spec"].erase("runtimeClassName");
  CHECK(first_difference(live, desired) ==
        "spec.template.spec.runtimeClassName is missing");
  live = desired;
  live["spec"]["template"]["spec"]["n"] = 3;
  CHECK(first_difference(live, desired) == "spec.template.spec.n is 3");
}
