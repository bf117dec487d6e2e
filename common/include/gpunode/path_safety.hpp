// Whether root may trust a path: nobody but root (or the user running
// gpunode) can replace it or anything above it. The rule sudo applies to its
// files and sshd (StrictModes, OpenSSH misc.c safe_path()) to the ones it
// reads: each component, from / down, owned by root or us and writable by
// neither its group nor others; a directory with the sticky bit (/tmp) may
// be writable by others when it is not the path itself, since there only an
// entry's owner may rename or remove it; a symbolic link on the way must be
// ours too (in a sticky directory its owner could swap it), and its target's
// own chain is checked in turn. The state dir (state_dir.hpp) and the trust
// anchors (trust_anchor.hpp) both ask this one question.
#pragma once

#include <optional>
#include <string>

#include "gpunode/host.hpp"

namespace gpunode {

struct UnsafeComponent {
  std::string path;  // the component at fault, a path on this machine
  std::string why;   // "is writable by everyone (mode 0777)", ...
  std::string fix;   // "sudo chmod go-w /srv", ...
};

// `real` is a path on this machine. A component that does not exist ends
// the walk (what is missing is made, or named, by the caller).
std::optional<UnsafeComponent> find_unsafe_component(const std::string& real);

// The same for a host path under `fs`'s root: with --root, resolve() follows
// the host's links inside the root, so those links are checked here first,
// each as the host would see it.
std::optional<UnsafeComponent> find_unsafe_component(
    const FileSystem& fs, const std::string& host_path);

}  // namespace gpunode
