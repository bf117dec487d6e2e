#include "cli/flags.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>

#include "cli/site_config.hpp"
#include "exposure/gpu_exposure.hpp"
#include "gpunode/images_lock.hpp"
#include "gpunode/text.hpp"

namespace gpunode {

// CLI11 reads "010" as octal and "0x10" as hex; GPUNODE_REPLICAS and the
// site config read decimal. One meaning for one text: decimal, leading
// zeros dropped before CLI11 converts it.
CLI::Validator decimal_only() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        const bool negative = !text.empty() && text[0] == '-';
        std::string digits = text.substr(negative ? 1 : 0);
        if (digits.empty() ||
            digits.find_first_not_of("0123456789") != std::string::npos)
          return "expected a whole number in decimal, got " +
                 quoted_value(text);
        digits.erase(
            0, std::min(digits.find_first_not_of('0'), digits.size() - 1));
        text = (negative ? "-" : "") + digits;
        return "";
      },
      "DECIMAL", "decimal");
}

Error with_help_fix(Error e, const std::string& command) {
  if (e.fix.empty())
    e.fix = "gpunode " + command + " --help gives each flag's values";
  return e;
}

std::string site_default_note(const char* flag, const std::string& builtin) {
  for (const SettingSpec& spec : setting_specs())
    if (std::string(spec.flag) == flag)
      return ". Unset: " + std::string(spec.env) + ", else config.toml's " +
             spec.key + (builtin.empty() ? "" : ", else " + builtin);
  return "";
}

bool valid_node_name(const std::string& n) {
  // Kubernetes node names are DNS subdomains (RFC 1123): this also keeps
  // "/" and ".." out of every URL path they end up in.
  if (n.empty() || n.size() > 253) return false;
  for (char c : n) {
    if (!(std::islower(static_cast<unsigned char>(c)) ||
          std::isdigit(static_cast<unsigned char>(c)) || c == '-' ||
          c == '.')) {
      return false;
    }
  }
  if (n.front() == '-' || n.front() == '.' || n.back() == '-' ||
      n.back() == '.')
    return false;
  return n.find("..") == std::string::npos;
}

const char* scope_name(Scope s) {
  switch (s) {
    case Scope::kNode:
      return "node";
    case Scope::kCluster:
      return "cluster";
    case Scope::kBoth:
      return "both";
  }
  return "both";
}

const char* proof_depth_name(ProofDepth d) {
  return d == ProofDepth::kDeep ? "deep" : "quick";
}

std::optional<ProofDepth> parse_proof_depth(const std::string& text) {
  if (text == "quick") return ProofDepth::kQuick;
  if (text == "deep") return ProofDepth::kDeep;
  return std::nullopt;
}

std::optional<Scope> parse_scope(const std::string& text) {
  for (Scope s : {Scope::kNode, Scope::kCluster, Scope::kBoth})
    if (text == scope_name(s)) return s;
  return std::nullopt;
}

bool valid_driver_version(const std::string& v) {
  if (v.empty() || v.front() == '.' || v.back() == '.') return false;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (v[i] == '.' ? v[i - 1] == '.'
                    : !std::isdigit(static_cast<unsigned char>(v[i]))) {
      return false;
    }
  }
  return true;
}

Result<std::chrono::milliseconds> parse_duration(const std::string& text) {
  auto bad = [&]() {
    return usage_error(
        "--timeout: expected a positive duration of at most 168h such as 10m, "
        "90s or 1h30m, got " +
        quoted_value(text));
  };
  if (text.empty()) return bad();
  std::size_t i = 0;
  long long total_ms = 0;
  bool any = false;
  while (i < text.size()) {
    std::size_t start = i;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])))
      ++i;
    if (i == start || i - start > 9) return bad();
    long long n = std::stoll(text.substr(start, i - start));
    std::string unit;
    while (i < text.size() && std::isalpha(static_cast<unsigned char>(text[i])))
      unit += text[i++];
    long long scale = 0;
    if (unit.empty() && !any && i == text.size())
      scale = 1000;
    else if (unit == "ms")
      scale = 1;
    else if (unit == "s")
      scale = 1000;
    else if (unit == "m")
      scale = 60 * 1000;
    else if (unit == "h")
      scale = 3600 * 1000;
    else
      return bad();
    total_ms += n * scale;
    any = true;
  }
  if (total_ms <= 0) return bad();
  if (total_ms > 7LL * 24 * 3600 * 1000) {
    return usage_error("--timeout: " + quoted_value(text) +
                       " is longer than a week; use at most 168h");
  }
  return std::chrono::milliseconds(total_ms);
}

namespace {

void add_proof_flags(CLI::App* cmd, FlagValues& v) {
  cmd->add_option(
      "--smoke-image", v.smoke_image,
      "The proof Pods' image: /bin/sh and the CUDA sample at /cuda-samples/"
      "vectorAdd. In k3s's containerd already, or imported from the bundle "
      "when it carries it (default: " +
          locked_cuda_sample_image().ref + ")");
  cmd->add_option("--proof", v.proof,
                  "quick (the CUDA sample on every GPU, and DCGM's "
                  "diagnostic level 1 where this host has DCGM: seconds) or "
                  "deep (DCGM level 2: about 2 minutes)")
      ->capture_default_str();
}

}  // namespace

void add_flags(CLI::App* cmd, FlagValues& v, FlagSet set) {
  // Where: every command.
  cmd->add_option("--root", v.root,
                  "Directory that stands for the host's / (every host path is "
                  "read under it); "
                  "tests and the demo point it at a fake host tree")
      ->capture_default_str();
  cmd->add_option(
         "--state-dir", v.state_dir,
         "Where the journal and lock live, as a host path under --root")
      ->capture_default_str();
  cmd->add_option(
         "--kubeconfig", v.kubeconfig,
         "Kubeconfig used to reach the cluster (a host path, under "
         "--root). Unless given, a node-scope run (the default on a k3s "
         "agent) uses the kubelet's own, "
         "/var/lib/rancher/k3s/agent/kubelet.kubeconfig")
      ->capture_default_str();
  cmd->add_option(
      "--timeout", v.timeout,
      "Give up after this long, e.g. 10m, 90s, 1h30m (at most 168h)" +
          site_default_note("--timeout", v.timeout));
  cmd->add_option("--image-ref", v.image_ref,
                  "Device plugin image reference (default: " +
                      locked_device_plugin_image().ref +
                      ", from images/images.lock)");
  if (set == FlagSet::kProve) {
    add_proof_flags(cmd, v);
    cmd->add_option("--node", v.node,
                    "Kubernetes node name of this host (default: node-name "
                    "from /etc/rancher/k3s/config.yaml, else the host name)");
    cmd->add_option("--bundle", v.bundle,
                    "Offline bundle directory: verified, then its archive of "
                    "the CUDA sample is named in a fix when a node lacks it; "
                    "never written");
    cmd->add_option("--trust-key", v.trust_keys,
                    "Publisher key (Ed25519 .pub) the bundle must be signed "
                    "with; also read: <root>/etc/gpunode/trusted-keys/*.pub");
    cmd->add_option(
        "--scope", v.scope,
        "'cluster' (prove every GPU node; needs an admin kubeconfig) or "
        "'both' (the same, and this host's DCGM diagnostic too; the "
        "default on a k3s server). A node's own identity cannot make Pods");
  }
  if (set != FlagSet::kUninstall && set != FlagSet::kProve) {
    // What: the layers and how the GPUs are advertised.
    cmd->add_option(
        "--node", v.node,
        "Kubernetes node name of this host (default: node-name from "
        "/etc/rancher/k3s/config.yaml, else the host name)");
    cmd->add_option("--variant", v.variant,
                    "Device plugin manifest: " + exposure_choices(true) +
                        site_default_note("--variant", v.variant));
    cmd->add_option(
           "--replicas", v.replicas,
           "Time-slicing slots per GPU (2 to 1024; default 8). Only with "
           "--variant time-slicing" +
               site_default_note("--replicas",
                                 std::to_string(kDefaultSharedReplicas) +
                                     " with time-slicing"))
        ->transform(decimal_only());
    cmd->add_flag(
        "--rename-shared", v.rename_shared,
        "Advertise nvidia.com/gpu.shared instead of nvidia.com/gpu "
        "(time-slicing "
        "only); the platform then needs GEO_MLOPS_SERVING_GPU_RESOURCE");
    cmd->add_option("--only", v.only, "Run only these stages (comma-separated)")
        ->delimiter(',');
    cmd->add_option("--skip", v.skip, "Skip these stages (comma-separated)")
        ->delimiter(',');
    cmd->add_option("--min-driver", v.min_driver,
                    "Lowest acceptable NVIDIA driver version, e.g. 550.54.15" +
                        site_default_note("--min-driver"));
    cmd->add_option(
        "--bundle", v.bundle,
        "Offline bundle directory (the USB stick): verified first (signature, "
        "every file's hash), then its images and settings are used; never "
        "written");
    cmd->add_option("--trust-key", v.trust_keys,
                    "Publisher key (Ed25519 .pub) the bundle must be signed "
                    "with; also read: "
                    "<root>/etc/gpunode/trusted-keys/*.pub. Default: "
                    "GPUNODE_TRUST_KEYS, else config.toml's trust-keys");
    cmd->add_flag(
        "--insecure-skip-signature", v.insecure_skip_signature,
        "Accept a bundle without checking who signed it (its hashes are still "
        "checked)");
    cmd->add_option(
        "--image-archive", v.image_archive,
        "Device plugin image archive to import (OCI layout or docker archive "
        "tar, "
        "optionally .gz/.zst), e.g. from the bundle on the USB stick");
    cmd->add_flag("--replace-existing", v.replace_existing,
                  "Remove another NVIDIA device plugin DaemonSet (e.g. a Helm "
                  "release) before "
                  "installing this one; without it gpunode refuses to install "
                  "a second plugin. The cluster part's: refused with --scope "
                  "node");
  }
  if (set != FlagSet::kUninstall && set != FlagSet::kProve) {
    cmd->add_option(
        "--scope", v.scope,
        "Which part to do: 'node' (this host and its own Node's labels, "
        "with the kubelet's identity: the default on a k3s agent), "
        "'cluster' (RuntimeClass, device plugin DaemonSet and ConfigMap, "
        "then wait for every GPU node; needs an admin kubeconfig) or 'both' "
        "(the default elsewhere)");
  } else if (set == FlagSet::kUninstall) {
    cmd->add_option(
        "--scope", v.scope,
        "Which part to take back: 'node' (this node's GPU labels and "
        "images: the default on a k3s agent), 'cluster' (the DaemonSet, "
        "ConfigMap and RuntimeClass, which serve every GPU node; needs an "
        "admin kubeconfig) or 'both' (the default elsewhere)");
  }
  if (set == FlagSet::kInstall || set == FlagSet::kPlan) {
    cmd->add_flag(
        "--all-nodes", v.all_nodes,
        "Allow a change of the device plugin's settings (variant, replicas) "
        "that restarts the plugin on other GPU nodes too: one DaemonSet "
        "serves them all. The cluster part's: refused with --scope node");
    cmd->add_flag(
        "--smoke", v.smoke,
        "Finally prove every GPU of every GPU node, as gpunode prove does: "
        "CUDA Pods (runtimeClassName nvidia, one slot each) until each GPU "
        "has printed \"Test PASSED\". The proof is the cluster part's; with "
        "--scope node, --smoke readies this node for it (imports the "
        "bundle's CUDA sample)");
    add_proof_flags(cmd, v);
  }
  if (set == FlagSet::kInstall) {
    cmd->add_flag("--restart-k3s", v.restart_k3s,
                  "Restart k3s (or k3s-agent) when containerd lacks the nvidia "
                  "runtime although "
                  "the toolkit is installed, and wait for the new config");
    cmd->add_flag("--upgrade-toolkit", v.upgrade_toolkit,
                  "Install the bundle's NVIDIA container toolkit packages "
                  "although another version is installed (newer or older)");
    cmd->add_flag("--dry-run", v.dry_run,
                  "Check everything, change nothing (same as 'plan')");
  }
  // How: output.
  cmd->add_flag(
      "--json", v.json,
      "One JSON object per line on stdout; human text stays on stderr");
  cmd->add_flag("--no-color", v.no_color,
                "No colours (also: NO_COLOR set, or not a TTY)");
  cmd->add_flag("-v,--verbose", v.verbosity,
                "More detail; twice for debug logs");
}

void note_given_flags(const CLI::App& cmd, Options& o) {
  if (const CLI::Option* k = cmd.get_option_no_throw("--kubeconfig"))
    o.kubeconfig_given = k->count() > 0;
}

Result<Options> validate_flags(const FlagValues& v) {
  Options o;
  struct stat st {};
  if (v.root.empty() || v.root.front() != '/') {
    return usage_error("--root: must be an absolute directory path, got " +
                       quoted_value(v.root));
  }
  if (::stat(v.root.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return usage_error("--root: '" + v.root + "' is not a directory");
  }
  o.root = v.root;
  if (v.state_dir.empty() || v.state_dir.front() != '/' ||
      v.state_dir.find("/../") != std::string::npos ||
      (v.state_dir.size() >= 3 &&
       v.state_dir.compare(v.state_dir.size() - 3, 3, "/..") == 0)) {
    return usage_error(
        "--state-dir: must be an absolute host path without '..', got " +
        quoted_value(v.state_dir));
  }
  o.state_dir = v.state_dir;

  auto sharing = parse_sharing(
      v.variant,
      v.replicas ? std::optional<long long>(*v.replicas) : std::nullopt,
      v.rename_shared);
  if (sharing.problem) {
    const char* flag = sharing.problem->setting == SharingSetting::kVariant
                           ? "--variant"
                       : sharing.problem->setting == SharingSetting::kReplicas
                           ? "--replicas"
                           : "--rename-shared";
    std::string message = std::string(flag) + ": " + sharing.problem->message;
    if (sharing.problem->setting != SharingSetting::kVariant &&
        !v.variant_origin.empty())
      message += "; the variant " + quoted_value(v.variant) + " comes from " +
                 v.variant_origin;
    Error e = usage_error(message);
    // A fix that fits the setting refused.
    switch (sharing.problem->setting) {
      case SharingSetting::kVariant:
        e.fix = "give --variant one of " + exposure_choices();
        break;
      case SharingSetting::kReplicas:
        // The variant is known here (else the problem is the variant's).
        e.fix = !variant_takes_replicas(v.variant)
                    ? "add --variant time-slicing, or drop --replicas"
                    : "give --replicas a whole number from " +
                          std::to_string(kMinSharedReplicas) + " to " +
                          std::to_string(kMaxReplicas);
        break;
      case SharingSetting::kRename:
        e.fix = "add --variant time-slicing, or drop --rename-shared";
        break;
    }
    return e;
  }
  o.sharing = *sharing.sharing;

  // An explicit empty --node (e.g. --node "$NODE" with NODE unset) is an
  // error, not a request to discover the name.
  if (v.node && !valid_node_name(*v.node)) {
    return usage_error(
        "--node: " + quoted_value(*v.node) +
        " is not a valid Kubernetes node name (lower-case letters, digits, "
        "'-' and '.', at most 253 characters)");
  }
  o.node = v.node.value_or("");
  if (v.kubeconfig.empty())
    return usage_error("--kubeconfig: must not be empty");
  o.kubeconfig = v.kubeconfig;
  if (!v.scope.empty()) {
    o.scope = parse_scope(v.scope);
    if (!o.scope) {
      return usage_error("--scope: " + quoted_value(v.scope) +
                         " is not one of node, cluster, both");
    }
  }
  o.all_nodes = v.all_nodes;

  auto timeout = parse_duration(v.timeout);
  if (!timeout) return timeout.error();
  o.timeout = *timeout;

  if (!v.min_driver.empty()) {
    if (!valid_driver_version(v.min_driver)) {
      return usage_error(
          "--min-driver: expected a dotted version such as 550.54.15, got " +
          quoted_value(v.min_driver));
    }
    o.min_driver = v.min_driver;
  }
  if (!v.image_archive.empty()) {
    if (::stat(v.image_archive.c_str(), &st) != 0) {
      return usage_error("--image-archive: '" + v.image_archive +
                         "' does not exist");
    }
    if (!S_ISREG(st.st_mode)) {
      return usage_error("--image-archive: '" + v.image_archive +
                         "' is not a regular file");
    }
    o.image_archive = v.image_archive;
  }
  o.image_ref =
      v.image_ref.empty() ? locked_device_plugin_image().ref : v.image_ref;
  if (o.image_ref.find_first_of(" \t\n\"'") != std::string::npos ||
      o.image_ref.find('/') == std::string::npos) {
    return usage_error(
        "--image-ref: " + quoted_value(o.image_ref) +
        " is not a full image reference such as registry/repo/name:tag");
  }
  if (!v.bundle.empty()) {
    if (!v.image_archive.empty()) {
      Error e = usage_error(
          "--image-archive: not with --bundle (the bundle brings the image)");
      e.fix =
          "drop --image-archive: the bundle's images/ holds the device "
          "plugin's archive, verified with the bundle";
      return e;
    }
    if (::stat(v.bundle.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return usage_error("--bundle: '" + v.bundle + "' is not a directory");
    }
    o.bundle = v.bundle;
  }
  o.trust_keys = v.trust_keys;
  o.insecure_skip_signature = v.insecure_skip_signature;
  o.replace_existing = v.replace_existing;
  o.smoke = v.smoke;
  if (auto depth = parse_proof_depth(v.proof)) {
    o.proof = *depth;
  } else {
    return usage_error("--proof: " + quoted_value(v.proof) +
                       " is not one of quick, deep");
  }
  o.smoke_image =
      v.smoke_image.empty() ? locked_cuda_sample_image().ref : v.smoke_image;
  o.only = v.only;
  o.skip = v.skip;
  o.restart_k3s = v.restart_k3s;
  o.upgrade_toolkit = v.upgrade_toolkit;
  o.dry_run = v.dry_run;
  o.json = v.json;
  o.color = !v.no_color;
  o.verbosity = v.verbosity;
  return o;
}

}  // namespace gpunode
