#include "fake_kube_client.hpp"

#include <algorithm>

namespace gpunode::test {
namespace {

using kube::json;
using SteadyTime = std::chrono::steady_clock::time_point;

// What the real client's messages name the server by.
const kube::detail::Endpoint kEndpoint{"/etc/rancher/k3s/k3s.yaml",
                                       "https://127.0.0.1:6443"};

// The HTTP method the real client sends for each call.
const char* http_method(KubeVerb verb) {
  switch (verb) {
    case KubeVerb::kApply:
      return "PATCH";
    case KubeVerb::kCreate:
      return "POST";
    case KubeVerb::kDelete:
      return "DELETE";
    default:
      return "GET";
  }
}

// '*' matches any run of characters other than '/'.
bool path_matches(const std::string& pattern, const std::string& path) {
  std::size_t p = 0, s = 0;
  while (p < pattern.size()) {
    if (pattern[p] == '*') {
      ++p;
      for (std::size_t end = s;; ++end) {
        if (path_matches(pattern.substr(p), path.substr(end))) return true;
        if (end == path.size() || path[end] == '/') return false;
      }
    }
    if (s == path.size() || pattern[p] != path[s]) return false;
    ++p, ++s;
  }
  return s == path.size();
}

std::string object_name(const json& object) {
  if (!object.is_object() || !object.contains("metadata")) return {};
  return object["metadata"].value("name", "");
}

}  // namespace

const char* kube_verb_name(KubeVerb verb) {
  switch (verb) {
    case KubeVerb::kGet:
      return "GET";
    case KubeVerb::kList:
      return "LIST";
    case KubeVerb::kApply:
      return "APPLY";
    case KubeVerb::kCreate:
      return "CREATE";
    case KubeVerb::kDelete:
      return "DELETE";
    case KubeVerb::kGetText:
      return "GET_TEXT";
    case KubeVerb::kWatch:
      return "WATCH";
  }
  return "?";
}

std::string KubeRequest::line() const {
  return std::string(kube_verb_name(verb)) + " " + path +
         (field_selector.empty() ? "" : " (" + field_selector + ")");
}

void FakeKubeClient::put(const std::string& path, json object) {
  store_[path] = std::move(object);
}

void FakeKubeClient::put_absent(const std::string& path) {
  store_[path] = std::nullopt;
}

std::optional<json> FakeKubeClient::stored(const std::string& path) const {
  const auto it = store_.find(path);
  return it == store_.end() ? std::nullopt : it->second;
}

void FakeKubeClient::set_canned(KubeVerb verb, const std::string& path,
                                Canned answer) {
  for (auto& [key, value] : canned_) {
    if (key.first == verb && key.second == path) {
      value = std::move(answer);
      return;
    }
  }
  canned_.push_back({{verb, path}, std::move(answer)});
}

void FakeKubeClient::answer(KubeVerb verb, const std::string& path, json body) {
  set_canned(verb, path, std::move(body));
}

void FakeKubeClient::answer_absent(KubeVerb verb, const std::string& path) {
  set_canned(verb, path, Absent{});
}

void FakeKubeClient::answer_error(KubeVerb verb, const std::string& path,
                                  Error error) {
  set_canned(verb, path, std::move(error));
}

void FakeKubeClient::answer_status(KubeVerb verb, const std::string& path,
                                   int http_status,
                                   const std::string& message) {
  answer_error(verb, path, status_error(verb, path, http_status, message));
}

void FakeKubeClient::answer_unreachable(KubeVerb verb,
                                        const std::string& path) {
  answer_error(verb, path, connection_error(verb, path));
}

void FakeKubeClient::answer_list(const std::string& path,
                                 std::vector<json> items) {
  answer(KubeVerb::kList, path,
         json{{"kind", "List"},
              {"apiVersion", "v1"},
              {"metadata", {{"resourceVersion", "1"}}},
              {"items", json(std::move(items))}});
}

void FakeKubeClient::answer_text(const std::string& path, std::string text) {
  answer(KubeVerb::kGetText, path, json(std::move(text)));
}

void FakeKubeClient::answer_watch(const std::string& collection_path,
                                  WatchStream stream) {
  watches_[collection_path].push_back(std::move(stream));
}

Error FakeKubeClient::status_error(KubeVerb verb, const std::string& path,
                                   int http_status,
                                   const std::string& message) {
  const json status = {{"kind", "Status"},
                       {"apiVersion", "v1"},
                       {"status", "Failure"},
                       {"message", message},
                       {"code", http_status}};
  return kube::detail::http_error(http_method(verb), path, http_status,
                                  status.dump(), kEndpoint);
}

Error FakeKubeClient::connection_error(KubeVerb verb, const std::string& path,
                                       kube::detail::Failure kind) {
  return kube::detail::transport_error(
      http_method(verb), path, {kind, "scripted by the test"}, kEndpoint);
}

std::vector<KubeRequest> FakeKubeClient::writes() const {
  std::vector<KubeRequest> out;
  for (const auto& r : requests_) {
    if (r.verb == KubeVerb::kApply || r.verb == KubeVerb::kCreate ||
        r.verb == KubeVerb::kDelete)
      out.push_back(r);
  }
  return out;
}

std::vector<std::string> FakeKubeClient::write_lines() const {
  std::vector<std::string> out;
  for (const auto& r : writes()) out.push_back(r.line());
  return out;
}

std::vector<KubeRequest> FakeKubeClient::unanswered() const {
  std::vector<KubeRequest> out;
  for (const auto& r : requests_)
    if (!r.answered) out.push_back(r);
  return out;
}

std::size_t FakeKubeClient::count(KubeVerb verb,
                                  const std::string& path) const {
  return static_cast<std::size_t>(
      std::count_if(requests_.begin(), requests_.end(), [&](const auto& r) {
        return r.verb == verb && (path.empty() || r.path == path);
      }));
}

KubeRequest& FakeKubeClient::record(KubeVerb verb, const std::string& path,
                                    SteadyTime deadline, json body) {
  requests_.push_back(KubeRequest{verb, path, {}, std::move(body), deadline});
  return requests_.back();
}

const FakeKubeClient::Canned* FakeKubeClient::canned(
    KubeVerb verb, const std::string& path) const {
  // An exact answer beats a pattern.
  for (const auto& [key, value] : canned_)
    if (key.first == verb && key.second == path) return &value;
  for (const auto& [key, value] : canned_)
    if (key.first == verb && path_matches(key.second, path)) return &value;
  return nullptr;
}

Error FakeKubeClient::no_answer(KubeRequest& request) const {
  request.answered = false;
  return Error{ExitCode::kBlocked, kNoAnswerLayer,
               std::string("FakeKubeClient: no answer for ") +
                   kube_verb_name(request.verb) + " " + request.path,
               "answer it in the test (answer*, put, put_absent)"};
}

json FakeKubeClient::store(const std::string& path, json object) {
  // What the API server adds; holds_all_of() must not mind it.
  if (object.is_object()) {
    object["metadata"]["resourceVersion"] = std::to_string(++resource_version_);
  }
  store_[path] = object;
  return object;
}

Result<std::optional<json>> FakeKubeClient::get(const std::string& path,
                                                SteadyTime deadline) {
  KubeRequest& r = record(KubeVerb::kGet, path, deadline);
  if (const Canned* c = canned(KubeVerb::kGet, path)) {
    if (const auto* e = std::get_if<Error>(c)) return *e;
    if (std::holds_alternative<Absent>(*c)) return std::optional<json>();
    return std::optional<json>(std::get<json>(*c));
  }
  const auto it = store_.find(path);
  if (it == store_.end()) return no_answer(r);
  return it->second;
}

Result<json> FakeKubeClient::list(const std::string& path,
                                  SteadyTime deadline) {
  KubeRequest& r = record(KubeVerb::kList, path, deadline);
  const Canned* c = canned(KubeVerb::kList, path);
  if (c == nullptr || std::holds_alternative<Absent>(*c)) return no_answer(r);
  if (const auto* e = std::get_if<Error>(c)) return *e;
  return std::get<json>(*c);
}

Result<json> FakeKubeClient::apply(const std::string& path, const json& object,
                                   SteadyTime deadline) {
  record(KubeVerb::kApply, path, deadline, object);
  if (const Canned* c = canned(KubeVerb::kApply, path)) {
    if (const auto* e = std::get_if<Error>(c)) return *e;
    if (const auto* j = std::get_if<json>(c)) return *j;
  }
  // Server-side apply with force=true: the sent object is what is stored
  // (a replace: the fake keeps no field managers to merge by).
  return store(path, object);
}

Result<json> FakeKubeClient::create(const std::string& collection_path,
                                    const json& object, SteadyTime deadline) {
  record(KubeVerb::kCreate, collection_path, deadline, object);
  if (const Canned* c = canned(KubeVerb::kCreate, collection_path)) {
    if (const auto* e = std::get_if<Error>(c)) return *e;
    if (const auto* j = std::get_if<json>(c)) return *j;
  }
  const std::string path = collection_path + "/" + object_name(object);
  if (stored(path)) {
    return status_error(KubeVerb::kCreate, collection_path, 409,
                        "\"" + object_name(object) + "\" already exists");
  }
  return store(path, object);
}

Result<bool> FakeKubeClient::remove(const std::string& path,
                                    SteadyTime deadline) {
  KubeRequest& r = record(KubeVerb::kDelete, path, deadline);
  if (const Canned* c = canned(KubeVerb::kDelete, path)) {
    if (const auto* e = std::get_if<Error>(c)) return *e;
    if (std::holds_alternative<Absent>(*c)) return false;
    return true;
  }
  const auto it = store_.find(path);
  if (it == store_.end()) return no_answer(r);
  const bool was_there = it->second.has_value();
  it->second = std::nullopt;
  return was_there;
}

Result<std::string> FakeKubeClient::get_text(const std::string& path,
                                             SteadyTime deadline) {
  KubeRequest& r = record(KubeVerb::kGetText, path, deadline);
  const Canned* c = canned(KubeVerb::kGetText, path);
  if (c == nullptr) return no_answer(r);
  if (const auto* e = std::get_if<Error>(c)) return *e;
  if (std::holds_alternative<Absent>(*c)) {
    return status_error(KubeVerb::kGetText, path, 404, "not found");
  }
  const json& text = std::get<json>(*c);
  return text.is_string() ? text.get<std::string>() : text.dump();
}

Result<void> FakeKubeClient::watch(
    const std::string& collection_path, const std::string& field_selector,
    const std::function<kube::WatchStep(const std::string&, const json&)>&
        on_event,
    SteadyTime deadline) {
  KubeRequest& r = record(KubeVerb::kWatch, collection_path, deadline);
  r.field_selector = field_selector;
  // The real client's words (client.cpp HttpClient::watch).
  const Error timed_out{
      ExitCode::kTimeout,
      "cluster",
      "watch " + collection_path +
          (field_selector.empty() ? "" : " (" + field_selector + ")") +
          ": timed out waiting",
      {}};
  if (const Canned* c = canned(KubeVerb::kWatch, collection_path)) {
    if (const auto* e = std::get_if<Error>(c)) return *e;
  }
  const std::vector<WatchStream>* streams = nullptr;
  for (const auto& [pattern, s] : watches_) {
    if (path_matches(pattern, collection_path)) streams = &s;
  }
  if (streams == nullptr || streams->empty()) return no_answer(r);
  if (clock_.steady_now() >= deadline) return timed_out;
  std::size_t& calls = watch_calls_[collection_path];
  // Copied: on_event may call back into this client.
  const WatchStream stream = (*streams)[std::min(calls, streams->size() - 1)];
  ++calls;
  for (const WatchEvent& e : stream.events) {
    if (on_event(e.type, e.object) == kube::WatchStep::kDone) return {};
  }
  if (stream.end) return *stream.end;
  const auto now = clock_.steady_now();
  if (deadline > now) {
    clock_.advance(
        std::chrono::ceil<std::chrono::milliseconds>(deadline - now));
  }
  return timed_out;
}

}  // namespace gpunode::test
