// Retry arithmetic and the retry loop (common/include/gpunode/http.hpp). The
// backoff follows client-go's (k8s.io/client-go/util/flowcontrol,
// wait.Backoff): exponential, capped, with jitter; Retry-After as
// delta-seconds is what kube-apiserver's max-in-flight filter sends
// (staging/src/k8s.io/apiserver/pkg/server/filters/maxinflight.go).
#include <algorithm>
#include <cctype>
#include <random>

#include "gpunode/http.hpp"
#include "gpunode/interrupt.hpp"

namespace gpunode::http {

using std::chrono::milliseconds;

milliseconds backoff_delay(const RetryPolicy& policy, int retry,
                           double jitter) {
  const auto first = std::max<long long>(policy.first_backoff.count(), 1);
  const auto cap = std::max<long long>(policy.max_backoff.count(), first);
  long long window = first;
  for (int i = 1; i < retry && window < cap; ++i) window *= 2;
  window = std::min(window, cap);
  jitter = std::clamp(jitter, 0.0, 1.0);
  const long long half = window / 2;
  return milliseconds(
      window - half +
      static_cast<long long>(static_cast<double>(half) * jitter));
}

std::optional<std::chrono::seconds> parse_retry_after(std::string_view value) {
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) {
    value.remove_prefix(1);
  }
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t' ||
                            value.back() == '\r' || value.back() == '\n')) {
    value.remove_suffix(1);
  }
  if (value.empty() || value.size() > 9) return std::nullopt;
  long long n = 0;
  for (char c : value) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + (c - '0');
  }
  return std::chrono::seconds(n);
}

bool is_retryable_status(int http_status) {
  return http_status == 429 || http_status == 500 || http_status == 502 ||
         http_status == 503 || http_status == 504;
}

std::string url_encode(const std::string& s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 15]);
    }
  }
  return out;
}

double random_jitter() {
  thread_local std::mt19937_64 rng(std::random_device{}());
  return std::uniform_real_distribution<double>(0.0, 1.0)(rng);
}

std::optional<milliseconds> next_delay(const RetryPolicy& policy, int attempts,
                                       std::optional<milliseconds> retry_after,
                                       double jitter, SteadyTime now,
                                       SteadyTime until) {
  const milliseconds delay =
      retry_after ? *retry_after : backoff_delay(policy, attempts, jitter);
  // Compared as a duration: `until` may be SteadyTime::max().
  if (now >= until || delay >= until - now) return std::nullopt;
  return delay;
}

Result<void> retry(Clock& clock, const RetryPlan& plan,
                   const std::function<Step(const Attempt&)>& attempt) {
  int attempts = 0;
  for (;;) {
    if (stop_requested()) return interrupted_error(plan.layer);
    const SteadyTime now = clock.steady_now();
    if (now >= plan.deadline) return plan.on_deadline(attempts);
    ++attempts;
    const auto remaining =
        plan.deadline == SteadyTime::max()
            ? milliseconds::max()
            : std::chrono::duration_cast<milliseconds>(plan.deadline - now);
    Step step = attempt(Attempt{attempts, remaining});
    if (step.kind == Step::Kind::kDone) return {};
    if (stop_requested()) return interrupted_error(plan.layer);
    if (step.kind == Step::Kind::kFail) return std::move(step.error);
    if (step.kind == Step::Kind::kAgain) {
      --attempts;
      continue;
    }
    if (plan.max_attempts > 0 && attempts >= plan.max_attempts)
      return plan.on_give_up(step, attempts);
    const auto delay = next_delay(plan.policy, attempts, step.retry_after,
                                  plan.jitter ? plan.jitter() : random_jitter(),
                                  clock.steady_now(), plan.retry_until);
    if (!delay) return plan.on_give_up(step, attempts);
    clock.sleep_for(*delay);
  }
}

}  // namespace gpunode::http
