// A kube::Client for unit tests, after ninja's FakeCommandRunner
// (src/build_test.cc): it records every request in order and answers from
// what the test set up, so a cluster stage's check and apply run without
// the API server simulator.
//
// Where an answer comes from, first match wins:
//   1. a canned answer for (verb, path): a json, "absent", an Error, or for
//      WATCH a scripted stream; a path may hold '*', which matches any run
//      of characters other than '/' (e.g. a Pod with a random name);
//   2. the object store: put() objects there; APPLY and CREATE store what
//      they send, DELETE erases; a path the store knows to be gone
//      (put_absent(), or deleted) answers GET with nullopt and DELETE with
//      false, as a 404 does for the real client;
//   3. otherwise GET, LIST, GET_TEXT, DELETE and WATCH fail with an Error
//      "FakeKubeClient: no answer for GET /x" (layer kNoAnswerLayer), which
//      is recorded as unanswered: a test that forgot to say what the cluster
//      holds fails loudly instead of reading "not found". APPLY and CREATE
//      need no answer: they store.
// The shapes are the real client's (installer/kube/client.cpp HttpClient):
// list() returns the List object with "items", get() of a 404 nullopt,
// remove() of a 404 false, create() of a stored name a 409 Error.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "gpunode/kube.hpp"
#include "kube/http.hpp"
#include "test_support.hpp"

namespace gpunode::test {

enum class KubeVerb { kGet, kList, kApply, kCreate, kDelete, kGetText, kWatch };
// "GET", "LIST", "APPLY", "CREATE", "DELETE", "GET_TEXT", "WATCH".
const char* kube_verb_name(KubeVerb verb);

// The layer of the error an unanswered request gets: no stage code path
// treats it as the cluster's, so it cannot pass for a connection problem.
inline constexpr const char* kNoAnswerLayer = "fake-kube";

struct KubeRequest {
  KubeVerb verb = KubeVerb::kGet;
  std::string path;            // as the caller passed it, query included
  std::string field_selector;  // WATCH only
  kube::json body;             // APPLY, CREATE: the object sent; else null
  std::chrono::steady_clock::time_point deadline;
  bool answered = true;  // false: it got the "no answer" error
  // "APPLY /apis/..." (the selector in parentheses for WATCH): what tests
  // compare whole sequences by.
  std::string line() const;
};

struct WatchEvent {
  std::string type;  // ADDED, MODIFIED, DELETED
  kube::json object;
};

// What one watch() call sees: the events in order (the real client hands
// the listed items as ADDED first: script them so), then `end`, or when
// there is none, the deadline passes: the fake clock moves to the deadline
// (the real watch waits until then; nothing sleeps) and the call returns
// the real client's ExitCode::kTimeout error.
struct WatchStream {
  std::vector<WatchEvent> events;
  std::optional<Error> end;
};

class FakeKubeClient : public kube::Client {
 public:
  // `clock` is the one the stages' host has: watch() moves it.
  explicit FakeKubeClient(FakeClock& clock) : clock_(clock) {}

  // --- the store ---
  void put(const std::string& path, kube::json object);
  void put_absent(const std::string& path);
  // The object at `path`, if it is there.
  std::optional<kube::json> stored(const std::string& path) const;

  // --- canned answers (win over the store; every call gets the same) ---
  // GET, LIST, APPLY, CREATE: the json; GET_TEXT: `body` must be a string.
  void answer(KubeVerb verb, const std::string& path, kube::json body);
  // GET: nullopt; DELETE: false (a 404).
  void answer_absent(KubeVerb verb, const std::string& path);
  void answer_error(KubeVerb verb, const std::string& path, Error error);
  // answer_error() with status_error() / connection_error() for the same
  // verb and path.
  void answer_status(KubeVerb verb, const std::string& path, int http_status,
                     const std::string& message);
  void answer_unreachable(KubeVerb verb, const std::string& path);
  // LIST: a List object holding `items`.
  void answer_list(const std::string& path, std::vector<kube::json> items);
  void answer_text(const std::string& path, std::string text);
  // WATCH of `collection_path` (any field selector): each call takes the
  // next stream; the last one is handed again to every later call, as a
  // relist of an unchanged cluster would hand the same objects.
  void answer_watch(const std::string& collection_path, WatchStream stream);

  // --- errors as the real client builds them ---
  // An HTTP Status error (kube::detail::http_error), e.g. 403, 404, 500.
  static Error status_error(KubeVerb verb, const std::string& path,
                            int http_status, const std::string& message);
  // No HTTP answer (kube::detail::transport_error), by default the API
  // server not listening: layer "cluster", status 0.
  static Error connection_error(
      KubeVerb verb, const std::string& path,
      kube::detail::Failure kind = kube::detail::Failure::kRefused);

  // --- what was asked ---
  const std::vector<KubeRequest>& requests() const { return requests_; }
  std::vector<KubeRequest> writes() const;  // APPLY, CREATE, DELETE
  std::vector<std::string> write_lines() const;
  std::vector<KubeRequest> unanswered() const;
  // Requests of `verb`, on `path` when it is not empty.
  std::size_t count(KubeVerb verb, const std::string& path = "") const;
  void clear_requests() { requests_.clear(); }

  // kube::Client
  Result<std::optional<kube::json>> get(
      const std::string& path,
      std::chrono::steady_clock::time_point deadline) override;
  Result<kube::json> list(
      const std::string& path,
      std::chrono::steady_clock::time_point deadline) override;
  Result<kube::json> apply(
      const std::string& path, const kube::json& object,
      std::chrono::steady_clock::time_point deadline) override;
  Result<kube::json> create(
      const std::string& collection_path, const kube::json& object,
      std::chrono::steady_clock::time_point deadline) override;
  Result<bool> remove(const std::string& path,
                      std::chrono::steady_clock::time_point deadline) override;
  Result<std::string> get_text(
      const std::string& path,
      std::chrono::steady_clock::time_point deadline) override;
  Result<void> watch(
      const std::string& collection_path, const std::string& field_selector,
      const std::function<kube::WatchStep(const std::string& type,
                                          const kube::json& object)>& on_event,
      std::chrono::steady_clock::time_point deadline) override;

 private:
  struct Absent {};
  using Canned = std::variant<kube::json, Absent, Error>;

  void set_canned(KubeVerb verb, const std::string& path, Canned answer);
  KubeRequest& record(KubeVerb verb, const std::string& path,
                      std::chrono::steady_clock::time_point deadline,
                      kube::json body = nullptr);
  const Canned* canned(KubeVerb verb, const std::string& path) const;
  Error no_answer(KubeRequest& request) const;
  kube::json store(const std::string& path, kube::json object);

  FakeClock& clock_;
  std::vector<KubeRequest> requests_;
  // (verb, path pattern) in the order registered; a later answer for the
  // same key replaces the earlier one.
  std::vector<std::pair<std::pair<KubeVerb, std::string>, Canned>> canned_;
  std::map<std::string, std::optional<kube::json>> store_;
  std::map<std::string, std::vector<WatchStream>> watches_;
  std::map<std::string, std::size_t> watch_calls_;
  long long resource_version_ = 1000;
};

}  // namespace gpunode::test
