// The journal: <state-dir>/journal.json, versioned, written atomically.
#include "gpunode/journal.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

namespace gpunode {
namespace {

using json = nlohmann::json;

// A journal larger than this is not ours; refuse to load it into memory.
constexpr std::size_t kMaxJournalBytes = 4 * 1024 * 1024;

json stage_to_json(const StageRecord& r) {
  return json{{"result", r.result},
              {"inputs_digest", r.inputs_digest},
              {"started_at", r.started_at},
              {"finished_at", r.finished_at},
              {"message", r.message}};
}

std::string get_string(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return {};
  if (!it->is_string())
    throw json::type_error::create(302, std::string(key) + " is not a string",
                                   &j);
  return it->get<std::string>();
}

// The version of a journal newer than this gpunode reads, as a decimal,
// else empty. A version past what an integer holds (JSON gives it as a
// float) is newer all the same: a later gpunode's history is kept aside,
// never overwritten for want of a reading.
std::string newer_version(const std::string& text) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return {};
  const auto v = j.find("version");
  if (v == j.end()) return {};
  if (v->is_number_unsigned()) {
    return v->get<std::uint64_t>() > static_cast<std::uint64_t>(kJournalVersion)
               ? v->dump()
               : std::string();
  }
  if (v->is_number_integer())
    return v->get<long long>() > kJournalVersion ? v->dump() : std::string();
  if (!v->is_number_float()) return {};
  const double d = v->get<double>();
  if (!std::isfinite(d) || d <= kJournalVersion) return {};
  if (std::floor(d) != d || d >= 1e30) return v->dump();
  char digits[40];
  std::snprintf(digits, sizeof digits, "%.0f", d);
  return digits;
}

// Where keep_newer_journal puts a newer journal: .newer-v<N>, or the first
// free .newer-v<N>.<i>, never over an earlier copy; empty when all are
// taken.
std::string kept_journal_path(const FileSystem& fs,
                              const std::string& state_dir,
                              const std::string& version);

// No history, and why the file on disk gave none.
LoadedJournal ignored(std::string why) {
  return {Journal{}, std::move(why), {}, {}};
}

// Copies of newer journals kept at most (a node downgraded that often has
// another problem).
constexpr int kMaxKeptJournals = 100;

}  // namespace

std::string journal_path(const std::string& state_dir) {
  return state_dir + "/journal.json";
}

std::string serialize_journal(const Journal& journal) {
  json j;
  j["version"] = kJournalVersion;
  j["stages"] = json::object();
  for (const auto& [name, rec] : journal.stages)
    j["stages"][name] = stage_to_json(rec);
  if (journal.last_run) {
    j["last_run"] = json{{"command", journal.last_run->command},
                         {"started_at", journal.last_run->started_at},
                         {"finished_at", journal.last_run->finished_at},
                         {"exit_code", journal.last_run->exit_code}};
  }
  // Messages quote what tools printed, which need not be UTF-8: replace
  // bad bytes rather than throw (a throw here ended the run as "internal
  // error").
  return j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

Result<Journal> parse_journal(const std::string& text) {
  auto bad = [](const std::string& why) {
    return Error{ExitCode::kUsage, "journal", why, {}};
  };
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return bad("not a JSON object");
  auto version = j.find("version");
  if (version == j.end() || !version->is_number_integer())
    return bad("no version");
  if (version->get<long long>() != kJournalVersion) {
    return bad("version " + version->dump() + " is not the supported version " +
               std::to_string(kJournalVersion));
  }
  Journal journal;
  try {
    if (auto stages = j.find("stages"); stages != j.end()) {
      if (!stages->is_object()) return bad("stages is not an object");
      for (const auto& [name, rec] : stages->items()) {
        if (!rec.is_object()) return bad("stage " + name + " is not an object");
        journal.stages[name] = StageRecord{
            get_string(rec, "result"), get_string(rec, "inputs_digest"),
            get_string(rec, "started_at"), get_string(rec, "finished_at"),
            get_string(rec, "message")};
      }
    }
    if (auto run = j.find("last_run"); run != j.end() && run->is_object()) {
      RunRecord r;
      r.command = get_string(*run, "command");
      r.started_at = get_string(*run, "started_at");
      r.finished_at = get_string(*run, "finished_at");
      auto code = run->find("exit_code");
      if (code != run->end() && code->is_number_integer())
        r.exit_code = code->get<int>();
      journal.last_run = r;
    }
  } catch (const json::exception& e) {
    return bad(e.what());
  }
  return journal;
}

LoadedJournal load_journal(const FileSystem& fs, const std::string& state_dir) {
  const std::string path = journal_path(state_dir);
  // Never read through a link: the next save replaces the link itself.
  if (fs.is_symlink(path)) {
    return ignored("journal " + path +
                   " is a symbolic link: ignored, and replaced by a file at "
                   "the next write; starting without history");
  }
  if (!fs.stat(path)) return {};
  auto text = fs.read_file(path, kMaxJournalBytes);
  if (!text)
    return ignored(text.error().message + "; starting without history");
  auto parsed = parse_journal(*text);
  if (parsed) return {std::move(*parsed), std::nullopt, {}, {}};
  if (std::string newer = newer_version(*text); !newer.empty()) {
    const std::string kept = kept_journal_path(fs, state_dir, newer);
    std::string warning = "journal " + path +
                          " was written by a newer gpunode (journal "
                          "version " +
                          newer + "; this one reads " +
                          std::to_string(kJournalVersion) + "): not read here";
    warning +=
        kept.empty()
            ? "; install cannot keep it aside (the numbered copies "
              "are all taken)"
            : "; install keeps it aside as " + kept + " before writing its own";
    return {Journal{}, std::move(warning), std::move(*text), std::move(newer)};
  }
  return ignored("journal " + path + " ignored (" + parsed.error().message +
                 "); starting without history");
}

namespace {

std::string kept_journal_path(const FileSystem& fs,
                              const std::string& state_dir,
                              const std::string& version) {
  const std::string base = journal_path(state_dir) + ".newer-v" + version;
  std::string path = base;
  for (int i = 1; fs.stat(path) || fs.is_symlink(path); ++i) {
    if (i > kMaxKeptJournals) return {};
    path = base + "." + std::to_string(i);
  }
  return path;
}

}  // namespace

Result<std::string> keep_newer_journal(FileSystem& fs,
                                       const std::string& state_dir,
                                       const LoadedJournal& loaded) {
  // One copy per newer journal met: never over an earlier one.
  const std::string path =
      kept_journal_path(fs, state_dir, loaded.newer_version);
  if (path.empty())
    return Error{ExitCode::kCannotRun, "journal",
                 "cannot keep the newer gpunode's journal aside: " +
                     journal_path(state_dir) + ".newer-v" +
                     loaded.newer_version + " and " +
                     std::to_string(kMaxKeptJournals) +
                     " numbered copies exist",
                 "move the journal.json.newer-* files out of " + state_dir +
                     ", then rerun"};
  if (auto r = fs.write_file_atomic(path, loaded.newer_text, 0600); !r)
    return r.error();
  return path;
}

bool nothing_new(const Journal& before, const Journal& after) {
  auto same_stage = [](const auto& was, const auto& now) {
    const bool same_result =
        was.second.result == now.second.result ||
        (was.second.result == "applied" && now.second.result == "satisfied");
    return was.first == now.first && same_result &&
           was.second.inputs_digest == now.second.inputs_digest &&
           was.second.message == now.second.message &&
           was.second.finished_at.empty() == now.second.finished_at.empty();
  };
  if (before.stages.size() != after.stages.size() ||
      !std::equal(before.stages.begin(), before.stages.end(),
                  after.stages.begin(), same_stage))
    return false;
  if (before.last_run.has_value() != after.last_run.has_value()) return false;
  return !before.last_run ||
         (before.last_run->command == after.last_run->command &&
          before.last_run->exit_code == after.last_run->exit_code &&
          before.last_run->finished_at.empty() ==
              after.last_run->finished_at.empty());
}

Result<void> save_journal(FileSystem& fs, const std::string& state_dir,
                          const Journal& journal) {
  if (auto r = fs.create_directories(state_dir); !r) return r;
  return fs.write_file_atomic(journal_path(state_dir),
                              serialize_journal(journal), 0600);
}

}  // namespace gpunode
