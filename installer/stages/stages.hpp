// Factories for every stage; the order they run in is pipeline.cpp's alone.
#pragma once

#include <memory>

#include "gpunode/stage.hpp"

namespace gpunode {

std::unique_ptr<Stage> make_preflight_stage();
std::unique_ptr<Stage> make_driver_stage();
std::unique_ptr<Stage> make_toolkit_stage();
std::unique_ptr<Stage> make_handler_stage();
std::unique_ptr<Stage> make_runtimeclass_stage();
std::unique_ptr<Stage> make_image_stage();
std::unique_ptr<Stage> make_plugin_stage();
std::unique_ptr<Stage> make_allocatable_stage();
std::unique_ptr<Stage> make_smoke_stage();

}  // namespace gpunode
