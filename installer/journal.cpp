// The journal: <state-dir>/journal.json, versioned, written atomically.
#include "gpunode/journal.hpp"

#include <algorithm>
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

// The version of a journal newer than this gpunode reads, else 0.
long long newer_version(const std::string& text) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return 0;
  const auto v = j.find("version");
  if (v == j.end() || !v->is_number_integer()) return 0;
  const long long n = v->get<long long>();
  return n > kJournalVersion ? n : 0;
}

// No history, and why the file on disk gave none.
LoadedJournal ignored(std::string why) {
  return {Journal{}, std::move(why), {}, 0};
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
  if (parsed) return {std::move(*parsed), std::nullopt, {}, 0};
  if (const long long newer = newer_version(*text); newer > 0) {
    return {Journal{},
            "journal " + path +
                " was written by a newer gpunode (journal "
                "version " +
                std::to_string(newer) + "; this one reads " +
                std::to_string(kJournalVersion) +
                "): not read here; install keeps it aside as " + path +
                ".newer-v" + std::to_string(newer) + " before writing its own",
            std::move(*text), newer};
  }
  return ignored("journal " + path + " ignored (" + parsed.error().message +
                 "); starting without history");
}

Result<std::string> keep_newer_journal(FileSystem& fs,
                                       const std::string& state_dir,
                                       const LoadedJournal& loaded) {
  const std::string base = journal_path(state_dir) + ".newer-v" +
                           std::to_string(loaded.newer_version);
  // One copy per newer journal met: never over an earlier one.
  std::string path = base;
  for (int i = 1; fs.stat(path) || fs.is_symlink(path); ++i) {
    if (i > kMaxKeptJournals)
      return Error{ExitCode::kCannotRun, "journal",
                   "cannot keep the newer gpunode's journal aside: " + base +
                       " and " + std::to_string(kMaxKeptJournals) +
                       " numbered copies exist",
                   "move the journal.json.newer-* files out of " + state_dir +
                       ", then rerun"};
    path = base + "." + std::to_string(i);
  }
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
