#include "kube/dry_run_client.hpp"

namespace gpunode::kube {
namespace {

using Deadline = std::chrono::steady_clock::time_point;

std::string dry(const std::string& path) {
  return path + (path.find('?') == std::string::npos ? "?" : "&") +
         "dryRun=All";
}

class DryRunClient : public Client {
 public:
  explicit DryRunClient(std::shared_ptr<Client> real)
      : real_(std::move(real)) {}

  Result<std::optional<json>> get(const std::string& path,
                                  Deadline deadline) override {
    return real_->get(path, deadline);
  }
  Result<json> list(const std::string& path, Deadline deadline) override {
    return real_->list(path, deadline);
  }
  Result<json> apply(const std::string& path, const json& object,
                     Deadline deadline) override {
    return real_->apply(dry(path), object, deadline);
  }
  Result<json> create(const std::string& collection_path, const json& object,
                      Deadline deadline) override {
    return real_->create(dry(collection_path), object, deadline);
  }
  Result<bool> remove(const std::string& path, Deadline deadline) override {
    return real_->remove(dry(path), deadline);
  }
  Result<std::string> get_text(const std::string& path,
                               Deadline deadline) override {
    return real_->get_text(path, deadline);
  }
  Result<void> watch(
      const std::string& collection_path, const std::string& field_selector,
      const std::function<WatchStep(const std::string&, const json&)>& on_event,
      Deadline deadline) override {
    return real_->watch(collection_path, field_selector, on_event, deadline);
  }

 private:
  std::shared_ptr<Client> real_;
};

}  // namespace

std::shared_ptr<Client> make_dry_run_client(std::shared_ptr<Client> real) {
  return std::make_shared<DryRunClient>(std::move(real));
}

}  // namespace gpunode::kube
