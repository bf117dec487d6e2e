// --bundle, verified once per run before any stage takes anything from it:
// refusing to act on a bundle whose hashes or signature do not verify.
#pragma once

#include "gpunode/stage.hpp"
#include "kube/manifests.hpp"

namespace gpunode {

// nullptr without --bundle; an Error (ExitCode::kIntegrity or kUsage) when
// the bundle does not verify.
Result<const VerifiedBundle*> verified_bundle(Context& ctx);

// The manifests this run installs: the verified bundle's manifests/*.yml
// with --bundle (a bundle made by another gpunode version carries the
// manifests that go with its image), else the compiled-in ones.
Result<ManifestTexts> manifest_texts(Context& ctx);

}  // namespace gpunode
