// libFuzzer target: the Kubernetes watch decoder (newline-delimited JSON
// events split across chunks, ERROR/410/BOOKMARK handling, resourceVersion
// tracking), driven through the real Client::watch over a scripted
// transport and a fake clock, so nothing is sent and nothing sleeps.
//
// Input: parts separated by "--" lines. The first is the LIST answer's body;
// each further part is one watch stream, delivered in 7-byte chunks so
// events are split mid-line. When the parts run out the server answers 403
// (not retried), which ends the watch.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "fuzz_input.hpp"
#include "kube/http.hpp"

namespace {

using namespace gpunode::kube::detail;
using std::chrono::milliseconds;

class FakeClock : public gpunode::Clock {
 public:
  std::chrono::system_clock::time_point now() const override {
    return std::chrono::system_clock::time_point(std::chrono::seconds(1)) +
           (steady_ - std::chrono::steady_clock::time_point());
  }
  std::chrono::steady_clock::time_point steady_now() const override {
    return steady_;
  }
  void sleep_for(milliseconds d) override { steady_ += d; }

 private:
  std::chrono::steady_clock::time_point steady_{};
};

class ScriptedTransport : public Transport {
 public:
  ScriptedTransport(FakeClock& clock, std::vector<std::string> parts)
      : clock_(clock), parts_(std::move(parts)) {}

  Outcome perform(const HttpRequest& request, milliseconds, milliseconds,
                  const OnData& on_data) override {
    clock_.sleep_for(milliseconds(10));  // every exchange takes a moment
    HttpResponse r;
    r.status = 200;
    if (request.target.find("watch=1") == std::string::npos) {
      r.body = parts_[0];  // LIST (again after a 410)
      return r;
    }
    if (next_ >= parts_.size() || !on_data) {
      r.status = 403;
      r.body = R"({"kind":"Status","code":403,"message":"forbidden"})";
      return r;
    }
    const std::string& stream = parts_[next_++];
    for (std::size_t at = 0; at < stream.size(); at += 7) {
      if (!on_data(std::string_view(stream).substr(at, 7))) {
        r.stopped = true;
        break;
      }
    }
    return r;
  }

 private:
  FakeClock& clock_;
  std::vector<std::string> parts_;
  std::size_t next_ = 1;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data,
                                      std::size_t size) {
  FakeClock clock;
  auto client = make_client(
      std::make_unique<ScriptedTransport>(
          clock, gpunode::fuzz::split_parts(data, size)),
      Endpoint{"/etc/rancher/k3s/k3s.yaml", "https://127.0.0.1:6443"}, clock,
      gpunode::kube::RetryPolicy{}, [] { return 0.5; });
  int events = 0;
  (void)client->watch(
      "/api/v1/nodes", "metadata.name=gpu-1",
      [&](const std::string& type, const gpunode::kube::json& object) {
        // The allocatable stage stops once the node shows what it waits for.
        if (type == "MODIFIED" && object.is_object() &&
            object.contains("status"))
          return gpunode::kube::WatchStep::kDone;
        return ++events > 1000 ? gpunode::kube::WatchStep::kDone
                               : gpunode::kube::WatchStep::kContinue;
      },
      clock.steady_now() + std::chrono::minutes(10));
  return 0;
}
