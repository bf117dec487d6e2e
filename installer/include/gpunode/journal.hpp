// The journal records what each run did, so a rerun after a crash can say
// what was interrupted and `status` can show history. It is advice, never
// authority: check() decides what is true now. Versioned and written
// atomically; a corrupt or unknown-version file is reported and ignored.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "gpunode/host.hpp"
#include "gpunode/result.hpp"
#include "gpunode/utc_time.hpp"  // the records' times

namespace gpunode {

inline constexpr int kJournalVersion = 1;

struct StageRecord {
  // "satisfied", "applied", "blocked", "failed", or "started" (apply began
  // and never finished: the run was interrupted).
  std::string result;
  std::string inputs_digest;  // sha256 of Stage::inputs()
  std::string started_at;     // ISO 8601 UTC
  std::string finished_at;    // empty while "started"
  std::string message;
};

struct RunRecord {
  std::string command;
  std::string started_at;
  std::string finished_at;  // empty: the run did not finish
  int exit_code = -1;
};

struct Journal {
  std::map<std::string, StageRecord> stages;
  std::optional<RunRecord> last_run;
};

struct LoadedJournal {
  Journal journal;
  std::optional<std::string> warning;  // why the file on disk was ignored
  // A journal a newer gpunode wrote (a higher version): its text, kept
  // aside by keep_newer_journal before this one writes its own.
  std::string newer_text;
  // Its version in decimal ("2"); empty when the journal is not newer.
  std::string newer_version;
};

std::string journal_path(const std::string& state_dir);
LoadedJournal load_journal(const FileSystem& fs, const std::string& state_dir);
Result<void> save_journal(FileSystem& fs, const std::string& state_dir,
                          const Journal& journal);
// Copies a newer gpunode's journal (loaded.newer_text) to
// <state-dir>/journal.json.newer-v<N> (or .newer-v<N>.<i> when that is
// taken), atomically, and returns that path: a downgrade must not erase the
// newer version's history.
Result<std::string> keep_newer_journal(FileSystem& fs,
                                       const std::string& state_dir,
                                       const LoadedJournal& loaded);

// Whether `after` records nothing that `before` does not: the same last
// command and exit code, the same stages with the same inputs and messages,
// each with the same result, or "satisfied" where `before` says "applied"
// (what was applied still holds). Times are not compared. A rerun whose
// journal would differ from the file's in nothing else writes nothing
// (issue 24).
bool nothing_new(const Journal& before, const Journal& after);

// Exposed for tests: text <-> journal.
std::string serialize_journal(const Journal& journal);
Result<Journal> parse_journal(const std::string& text);

}  // namespace gpunode
