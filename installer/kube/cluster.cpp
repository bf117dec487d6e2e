#include "kube/cluster.hpp"

#include <yaml-cpp/yaml.h>

namespace gpunode {

Result<kube::Client*> cluster(Context& ctx) {
  if (ctx.facts.kube) return ctx.facts.kube.get();
  auto config = kube::load_kubeconfig(ctx.host.fs(), ctx.opts.kubeconfig);
  if (!config) return config.error();
  auto client = kube::Client::connect(*config, ctx.host.clock());
  if (!client) return client.error();
  ctx.facts.kube = std::shared_ptr<kube::Client>(std::move(*client));
  return ctx.facts.kube.get();
}

Result<std::string> node_name(Context& ctx) {
  if (ctx.facts.node) return *ctx.facts.node;
  std::string name = ctx.opts.node;
  const std::string config_path = "/etc/rancher/k3s/config.yaml";
  if (name.empty() && ctx.host.fs().stat(config_path)) {
    auto text = ctx.host.fs().read_file(config_path, 1024 * 1024);
    if (!text) return text.error();
    try {
      YAML::Node config = YAML::Load(*text);
      if (config.IsMap() && config["node-name"] &&
          config["node-name"].IsScalar()) {
        name = config["node-name"].as<std::string>();
      }
    } catch (const YAML::Exception& e) {
      return Error{
          ExitCode::kUsage, "cluster",
          config_path + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg,
          "fix the YAML in " + config_path + " (k3s reads it too)"};
    }
  }
  std::string source = ctx.opts.node.empty() ? config_path : "--node";
  if (name.empty()) {
    name = ctx.host.hostname();
    source = "the host name";
  }
  // k3s lower-cases the host name for the node name.
  for (auto& c : name)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  // The name goes into API paths (/api/v1/nodes/NAME): "../x" from a
  // config.yaml would address another resource.
  if (!valid_node_name(name)) {
    return Error{ExitCode::kUsage, "cluster",
                 source + ": '" + name +
                     "' is not a valid Kubernetes node name (lower-case "
                     "letters, digits, '-' and '.', at most 253 characters)",
                 "set node-name in " + config_path +
                     " to the name k3s registered this node as, or pass "
                     "--node NAME"};
  }
  ctx.facts.node = name;
  return name;
}

}  // namespace gpunode
