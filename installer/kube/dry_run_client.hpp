// A Client whose writes change nothing: each apply, create and remove goes
// to the API server with dryRun=All, which runs admission and validation
// and answers as for a real write, but stores nothing
// (k8s.io/apiserver pkg/endpoints/handlers: dryRun "All"). Reads pass
// through. What `plan` runs a stage's apply() against.
#pragma once

#include <memory>

#include "gpunode/kube.hpp"

namespace gpunode::kube {

std::shared_ptr<Client> make_dry_run_client(std::shared_ptr<Client> real);

}  // namespace gpunode::kube
