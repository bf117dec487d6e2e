// The strategies gpunode ships, the fallback first: a new one is its own
// file and one line here.
#include "exposure/gpu_exposure.hpp"

namespace gpunode {

ExposureKind default_exposure();       // default_exposure.cpp
ExposureKind time_slicing_exposure();  // time_slicing_exposure.cpp

std::vector<ExposureKind> builtin_exposures() {
  return {default_exposure(), time_slicing_exposure()};
}

}  // namespace gpunode
