// Words for a child's failure (host.hpp), so that every message about a
// program gpunode ran says the same thing the same way.
#include <signal.h>

#include <algorithm>
#include <string>

#include "gpunode/host.hpp"
#include "gpunode/interrupt.hpp"

namespace gpunode {

std::string first_line_of(const std::string& text) {
  constexpr std::size_t kMaxQuote = 300;
  std::size_t i = 0;
  while (i < text.size()) {
    std::size_t j = text.find('\n', i);
    if (j == std::string::npos) j = text.size();
    std::size_t b = i, e = j;
    while (b < e && (text[b] == ' ' || text[b] == '\t' || text[b] == '\r')) ++b;
    while (e > b &&
           (text[e - 1] == ' ' || text[e - 1] == '\t' || text[e - 1] == '\r'))
      --e;
    if (e > b) {
      std::string line = text.substr(b, std::min(e - b, kMaxQuote));
      if (e - b > kMaxQuote) line += "...";
      return line;
    }
    i = j + 1;
  }
  return "";
}

std::string signal_name(int sig) {
  // sigabbrev_np() would do this, but only from glibc 2.32; the portable
  // build runs on 2.31 (packaging/prove-portable.sh).
  switch (sig) {
    case SIGHUP:
      return "SIGHUP";
    case SIGINT:
      return "SIGINT";
    case SIGQUIT:
      return "SIGQUIT";
    case SIGILL:
      return "SIGILL";
    case SIGTRAP:
      return "SIGTRAP";
    case SIGABRT:
      return "SIGABRT";
    case SIGBUS:
      return "SIGBUS";
    case SIGFPE:
      return "SIGFPE";
    case SIGKILL:
      return "SIGKILL";
    case SIGUSR1:
      return "SIGUSR1";
    case SIGSEGV:
      return "SIGSEGV";
    case SIGUSR2:
      return "SIGUSR2";
    case SIGPIPE:
      return "SIGPIPE";
    case SIGALRM:
      return "SIGALRM";
    case SIGTERM:
      return "SIGTERM";
    case SIGXCPU:
      return "SIGXCPU";
    case SIGXFSZ:
      return "SIGXFSZ";
    case SIGSYS:
      return "SIGSYS";
    default:
      return "signal " + std::to_string(sig);
  }
}

std::string cut_note(const ProcessResult& r) {
  if (!r.out_cut && !r.err_cut) return "";
  const std::string streams = r.out_cut && r.err_cut
                                  ? "output and error output"
                                  : (r.out_cut ? "output" : "error output");
  return " (" + streams + " cut at " + std::to_string(kMaxCapturedBytes >> 20) +
         " MiB)";
}

std::string describe_failure(const ProcessResult& r) {
  std::string how;
  if (r.not_found) {
    how = "not found on PATH";
  } else if (!r.spawn_error.empty()) {
    how = "could not be started: " + r.spawn_error;
  } else if (r.input_error) {
    how = "its input failed: " + r.input_error->message;
  } else if (r.interrupted) {
    how = "stopped because gpunode was interrupted";
  } else if (r.timed_out) {
    how = "timed out (killed)";
  } else if (r.term_signal != 0) {
    how = "killed by signal " + std::to_string(r.term_signal);
    const std::string name = signal_name(r.term_signal);
    if (name.rfind("SIG", 0) == 0) how += " (" + name + ")";
  } else if (r.exit_code != 0) {
    how = "exit code " + std::to_string(r.exit_code);
  } else {
    how = "exit code 0";
  }
  std::string said = first_line_of(r.err);
  if (said.empty()) said = first_line_of(r.out);
  if (!said.empty()) how += ": " + said;
  return how + cut_note(r);
}

}  // namespace gpunode
