// --bundle, verified once per run before any stage takes anything from it
// (Context::bundle()): refusing to act on a bundle whose hashes or
// signature do not verify.
#pragma once

#include "gpunode/stage.hpp"
#include "plugin/manifest_texts.hpp"

namespace gpunode {

// Verifies --bundle (given) and reads what the stages need from it: an
// Error (ExitCode::kIntegrity or kUsage) when it does not verify.
Result<VerifiedBundle> verify_run_bundle(Context& ctx);

// The manifests a run installs: the verified bundle's manifests/*.yml (a
// bundle made by another gpunode version carries the manifests that go with
// its image), else (nullptr) the compiled-in ones.
ManifestTexts manifest_texts_of(const VerifiedBundle* bundle);

}  // namespace gpunode
