// Text from outside (file names, bundle.toml fields, nvidia-smi's output, API
// server messages, child programs' stderr) must not steer the terminal: an
// ESC sequence can erase or recolour the line before it, a newline can forge
// a line of its own ("bundle verify: ok ..."). Every human line gpunode
// prints passes its text through terminal_safe(); --json needs no such care
// (JSON escapes control characters itself).
#pragma once

#include <string>
#include <string_view>

namespace gpunode {

// `text` with every control character written as a visible escape: C0
// controls, DEL and the C1 controls (U+0080..U+009F) as \n, \t, \r, \e or
// \xNN / \u00NN, and a byte that is not part of valid UTF-8 as \xNN (some
// terminals read a lone 0x9B as CSI). A backslash stays as it is.
std::string terminal_safe(std::string_view text);

}  // namespace gpunode
