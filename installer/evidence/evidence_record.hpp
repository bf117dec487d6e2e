// The evidence record: what one node is, what its plan was, what each
// stage's check found and what was proven on its GPUs, signed with the
// node's evidence key (evidence/evidence_key.hpp) so that an auditor can
// check it offline. Schema: docs/evidence.md (held to it by
// test/unit/evidence_record_test.cpp).
//
// The file is one JSON object in canonical form (nlohmann's dump(): keys
// sorted, no spaces), {"record": {...}, "signature": {...}}, whose
// signature covers the canonical text of "record". verify_evidence() takes
// only that exact form: a file with any byte changed is refused (exit 4),
// whether the change breaks the signature or only the form.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "gpunode/result.hpp"

namespace gpunode {

inline constexpr const char* kEvidenceSchema = "gpunode.evidence/v1";

// Adds "schema" and signs: the file's text (with a final newline).
Result<std::string> signed_evidence(nlohmann::json record,
                                    const std::string& private_pem,
                                    const std::string& public_pem);

struct VerifiedEvidence {
  nlohmann::json record;
  std::string public_pem;
  std::string fingerprint;  // the key's, as bundle keys are named
};

// Checks the form, the schema and the signature (by the key the file
// names); ExitCode::kIntegrity for anything else.
Result<VerifiedEvidence> verify_evidence(const std::string& text);

}  // namespace gpunode
