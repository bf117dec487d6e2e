// check_recorded_facts (bundle_records.hpp): the [[images]] and [[packages]]
// entries of a bundle.toml whose every file hash has just matched. The
// readers are the ones `bundle create` recorded them with (image_archive.cpp,
// toolkit_packages.cpp), so what create wrote verify reads back the same way.
#include "gpunode/bundle_records.hpp"
#include "gpunode/image_archive.hpp"
#include "gpunode/toolkit_packages.hpp"

namespace gpunode::bundle {
namespace {

// A reader's failure: fatal when the run must stop (out of descriptors or
// memory, a Ctrl-C, the deadline), else a problem with the record.
bool fatal(const Error& e) {
  return e.exit == ExitCode::kCannotRun || e.exit == ExitCode::kInterrupted ||
         e.exit == ExitCode::kTimeout;
}

}  // namespace

Result<std::vector<std::string>> check_recorded_facts(
    const Manifest& manifest, const OpenListedFile& open_listed) {
  std::vector<std::string> problems;
  for (const ImageEntry& image : manifest.images) {
    const std::string what = "image \"" + image.name + "\" (" + image.ref + ")";
    auto fd = open_listed(image.file);
    if (!fd) {
      if (fatal(fd.error())) return fd.error();
      problems.push_back(what + ": " + image.file + ": " + fd.error().message);
      continue;
    }
    // Only index.json / manifest.json (and a docker archive's small config)
    // are read; the tar's other members are seeked over.
    auto info = peek_image_archive_fd(fd->get(), image.file, image.ref);
    if (!info) {
      if (fatal(info.error())) return info.error();
      problems.push_back(what + ": " + info.error().message);
    } else if (info->target_digest != image.digest) {
      problems.push_back(
          what + ": bundle.toml records digest " + image.digest + ", but " +
          image.file + " holds " +
          (info->target_digest.empty() ? "no digest" : info->target_digest));
    }
  }
  for (const PackageEntry& package : manifest.packages) {
    const std::string recorded = package.family + " " + package.name + " " +
                                 package.version + " " + package.arch;
    const std::string what = "package " + recorded;
    auto fd = open_listed(package.file);
    if (!fd) {
      if (fatal(fd.error())) return fd.error();
      problems.push_back(what + ": " + package.file + ": " +
                         fd.error().message);
      continue;
    }
    auto info = read_package_info_fd(fd->get(), package.file);
    if (!info) {
      if (fatal(info.error())) return info.error();
      problems.push_back(what + ": " + info.error().message);
      continue;
    }
    const std::string found = info->family + " " + info->name + " " +
                              info->version + " " + info->arch;
    if (found != recorded)
      problems.push_back(what + " is what bundle.toml records, but " +
                         package.file + " says it is " + found);
  }
  return problems;
}

}  // namespace gpunode::bundle
