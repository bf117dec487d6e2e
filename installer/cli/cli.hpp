// The command line: parses, validates into Options, dispatches. Every usage
// problem becomes exit code 2 with a message that names the flag.
#pragma once

#include <ostream>

namespace gpunode {

int run_cli(int argc, char** argv, std::ostream& out, std::ostream& err);

}  // namespace gpunode
