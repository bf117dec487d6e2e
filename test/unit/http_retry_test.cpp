// The shared HTTP stack's retry loop (common/include/gpunode/http.hpp) over a
// scripted transport and a fake clock: Retry-After, exponential backoff,
// the deadline, the attempt limit and Ctrl-C.
#include <signal.h>

#include <catch2/catch.hpp>
#include <deque>
#include <string>
#include <vector>

#include "gpunode/http.hpp"
#include "gpunode/interrupt.hpp"
#include "test_support.hpp"

using namespace gpunode;
using namespace gpunode::http;
using gpunode::test::FakeClock;
using std::chrono::milliseconds;
using std::chrono::seconds;

namespace {

// Answers from a script, noting when (on the fake clock) each request came.
class ScriptedTransport : public Transport {
 public:
  explicit ScriptedTransport(FakeClock& clock) : clock_(clock) {}

  Outcome perform(const HttpRequest&, milliseconds timeout, milliseconds,
                  const OnData&) override {
    at.push_back(clock_.steady_now() - SteadyTime());
    timeouts.push_back(timeout);
    REQUIRE_FALSE(script.empty());
    Outcome next = script.front();
    script.pop_front();
    if (on_perform) on_perform();
    return next;
  }

  std::deque<Outcome> script;
  std::vector<SteadyTime::duration> at;  // since the fake clock's epoch
  std::vector<milliseconds> timeouts;
  std::function<void()> on_perform;

 private:
  FakeClock& clock_;
};

HttpResponse answer(int status, std::optional<seconds> retry_after = {}) {
  HttpResponse r;
  r.status = status;
  r.retry_after = retry_after;
  return r;
}

Error error(const std::string& message) {
  return Error{ExitCode::kBlocked, "test", message, {}};
}

// A caller as the real ones are: 2xx is done, a retryable status or a
// connection failure is retried (with the server's Retry-After), anything
// else fails.
struct Caller {
  FakeClock clock;
  ScriptedTransport transport{clock};
  RetryPlan plan;
  std::vector<int> gave_up_after;  // attempts, each time on_give_up ran

  Caller() {
    plan.policy.first_backoff = milliseconds(100);
    plan.policy.max_backoff = milliseconds(1000);
    plan.jitter = [] { return 1.0; };  // the whole window: exact delays
    plan.layer = "test";
    plan.on_deadline = [](int attempts) {
      return Error{ExitCode::kTimeout,
                   "test",
                   "deadline after " + std::to_string(attempts),
                   {}};
    };
    plan.on_give_up = [this](const Step& last, int attempts) {
      gave_up_after.push_back(attempts);
      Error e = last.error;
      e.message += "; gave up after " + std::to_string(attempts);
      return e;
    };
  }

  SteadyTime in(milliseconds d) { return clock.steady_now() + d; }

  Result<void> run() {
    return retry(clock, plan, [&](const Attempt& attempt) {
      const Outcome outcome =
          transport.perform({}, attempt.remaining, attempt.remaining, {});
      if (std::holds_alternative<TransportError>(outcome))
        return Step::retry(error("connection refused"));
      const auto& r = std::get<HttpResponse>(outcome);
      if (r.status < 300) return Step::done();
      if (is_retryable_status(r.status)) {
        std::optional<milliseconds> after;
        if (r.retry_after) after = *r.retry_after;
        return Step::retry(error("HTTP " + std::to_string(r.status)), after);
      }
      return Step::fail(error("HTTP " + std::to_string(r.status)));
    });
  }
};

}  // namespace

TEST_CASE("http::retry waits what a 429's Retry-After asks, not its backoff",
          "[http]") {
  Caller c;
  c.transport.script = {answer(429, seconds(3)), answer(200)};
  REQUIRE(c.run());
  REQUIRE(c.transport.at.size() == 2);
  CHECK(c.transport.at[1] - c.transport.at[0] == milliseconds(3000));
}

TEST_CASE("http::retry backs off exponentially on 503, up to the cap",
          "[http]") {
  Caller c;
  c.transport.script = {answer(503), answer(503), answer(503),
                        answer(503), answer(503), answer(200)};
  REQUIRE(c.run());
  REQUIRE(c.transport.at.size() == 6);
  std::vector<milliseconds> waits;
  for (std::size_t i = 1; i < c.transport.at.size(); ++i)
    waits.push_back(std::chrono::duration_cast<milliseconds>(
        c.transport.at[i] - c.transport.at[i - 1]));
  // 100, 200, 400, 800, then max_backoff.
  CHECK(waits == std::vector<milliseconds>{milliseconds(100), milliseconds(200),
                                           milliseconds(400), milliseconds(800),
                                           milliseconds(1000)});
}

TEST_CASE("http::retry gives up when the next try would end past retry_until",
          "[http]") {
  Caller c;
  c.plan.deadline = c.in(milliseconds(10000));
  c.plan.retry_until = c.in(milliseconds(1000));
  c.transport.script = {answer(503), answer(503), answer(503), answer(503),
                        answer(503)};
  auto r = c.run();
  REQUIRE_FALSE(r);
  // At 0, 100, 300, 700; the next (800 ms later) would end at 1500.
  CHECK(c.transport.at.size() == 4);
  CHECK(c.gave_up_after == std::vector<int>{4});
  CHECK(r.error().message == "HTTP 503; gave up after 4");
  // A Retry-After past it gives up at once.
  Caller d;
  d.plan.retry_until = d.in(milliseconds(1000));
  d.transport.script = {answer(503, seconds(2))};
  REQUIRE_FALSE(d.run());
  CHECK(d.transport.at.size() == 1);
  CHECK(d.gave_up_after == std::vector<int>{1});
}

TEST_CASE("http::retry starts no attempt after the deadline", "[http]") {
  Caller c;
  c.plan.deadline = c.in(milliseconds(250));
  c.transport.script = {answer(503), answer(503), answer(503)};
  auto r = c.run();
  REQUIRE_FALSE(r);
  // At 0 and 100; the one due at 300 is past the deadline.
  CHECK(c.transport.at.size() == 2);
  CHECK(r.error().exit == ExitCode::kTimeout);
  CHECK(r.error().message == "deadline after 2");
  // Each attempt was given the time left, no more.
  CHECK(c.transport.timeouts ==
        std::vector<milliseconds>{milliseconds(250), milliseconds(150)});
}

TEST_CASE(
    "http::retry stops at max_attempts, and kAgain and kFail do not retry",
    "[http]") {
  Caller c;
  c.plan.max_attempts = 3;
  c.transport.script = {TransportError{Failure::kRefused, "refused"},
                        answer(502), answer(503), answer(200)};
  auto r = c.run();
  REQUIRE_FALSE(r);
  CHECK(c.transport.at.size() == 3);
  CHECK(c.gave_up_after == std::vector<int>{3});

  Caller f;
  f.transport.script = {answer(404), answer(200)};
  auto final = f.run();
  REQUIRE_FALSE(final);
  CHECK(final.error().message == "HTTP 404");
  CHECK(f.transport.at.size() == 1);

  // kAgain (a 401 answered with a token) is tried at once and not counted.
  FakeClock clock;
  RetryPlan plan;
  plan.max_attempts = 1;
  plan.on_give_up = [](const Step& last, int) { return last.error; };
  std::vector<int> numbers;
  auto again = retry(clock, plan, [&](const Attempt& a) {
    numbers.push_back(a.number);
    return numbers.size() == 1 ? Step::again() : Step::done();
  });
  CHECK(again);
  CHECK(numbers == std::vector<int>{1, 1});
  CHECK(clock.steady_now() == SteadyTime());
}

TEST_CASE("http::retry stops on Ctrl-C before and after an attempt", "[http]") {
  install_interrupt_handlers();
  Caller c;
  c.transport.script = {answer(503), answer(200)};
  c.transport.on_perform = [] { ::raise(SIGINT); };
  auto r = c.run();
  reset_interrupt_for_tests();
  REQUIRE_FALSE(r);
  CHECK(r.error().exit == ExitCode::kInterrupted);
  CHECK(r.error().layer == "test");
  CHECK(c.transport.at.size() == 1);            // not tried again
  CHECK(c.clock.steady_now() == SteadyTime());  // nor waited for

  Caller d;
  d.transport.script = {answer(200)};
  ::raise(SIGINT);
  auto before = d.run();
  reset_interrupt_for_tests();
  REQUIRE_FALSE(before);
  CHECK(before.error().exit == ExitCode::kInterrupted);
  CHECK(d.transport.at.empty());
}

TEST_CASE("http::next_delay: Retry-After first, backoff else, none past until",
          "[http]") {
  const RetryPolicy policy{milliseconds(200), milliseconds(5000)};
  const SteadyTime now{};
  const SteadyTime until = now + milliseconds(1000);
  CHECK(next_delay(policy, 1, milliseconds(700), 0.0, now, until) ==
        milliseconds(700));
  CHECK(next_delay(policy, 1, std::nullopt, 0.0, now, until) ==
        milliseconds(100));
  CHECK_FALSE(next_delay(policy, 1, milliseconds(1000), 0.0, now, until));
  CHECK_FALSE(next_delay(policy, 1, std::nullopt, 0.0, until, until));
  CHECK(next_delay(policy, 30, std::nullopt, 1.0, now, SteadyTime::max()) ==
        milliseconds(5000));
}

TEST_CASE("http::url_encode keeps only RFC 3986's unreserved characters",
          "[http]") {
  CHECK(url_encode("repository:nvidia/k8s-device-plugin:pull") ==
        "repository%3Anvidia%2Fk8s-device-plugin%3Apull");
  CHECK(url_encode("a-b_c.d~e09") == "a-b_c.d~e09");
  CHECK(url_encode("metadata.name=x,y") == "metadata.name%3Dx%2Cy");
}
