// `gpunode uninstall`: removes what gpunode created, and only that: the
// device plugin DaemonSet and ConfigMap and the RuntimeClass when they carry
// gpunode's managed-by label (k3s's own RuntimeClass stays), and the image
// unless --keep-image.
#pragma once

#include "gpunode/host.hpp"
#include "gpunode/options.hpp"
#include "gpunode/report.hpp"

namespace gpunode {

ExitCode run_uninstall(Host& host, const Options& opts, bool keep_image,
                       Reporter& report);

}  // namespace gpunode
