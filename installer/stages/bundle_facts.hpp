// --bundle, verified once per run before any stage takes anything from it:
// refusing to act on a bundle whose hashes or signature do not verify.
#pragma once

#include "gpunode/stage.hpp"

namespace gpunode {

// nullptr without --bundle; an Error (ExitCode::kIntegrity or kUsage) when
// the bundle does not verify.
Result<const VerifiedBundle*> verified_bundle(Context& ctx);

}  // namespace gpunode
