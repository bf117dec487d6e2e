// bundle.toml: written by hand (fixed key order, sorted files) so the bytes
// the signature covers are reproducible; read with toml++ and validated
// strictly, because every later check trusts what it says.
#include <toml++/toml.h>

#include <algorithm>
#include <cstdio>
#include <set>
#include <sstream>
#include <tuple>

#include "gpunode/bundle.hpp"

namespace gpunode::bundle {

namespace {

// A TOML basic string. Control characters are escaped so that a hostile or
// odd name can never break the line structure of the document.
std::string quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
  return out;
}

std::string string_array(const std::vector<std::string>& items,
                         bool one_per_line) {
  if (items.empty()) return "[]";
  std::string out = "[";
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (one_per_line) {
      out += "\n  " + quote(items[i]) + ",";
    } else {
      if (i) out += ", ";
      out += quote(items[i]);
    }
  }
  out += one_per_line ? "\n]" : "]";
  return out;
}

Error bad(const std::string& source, const std::string& what) {
  return usage_error(source + ": " + what);
}

std::string where(const std::string& source, const toml::node& node) {
  const auto& region = node.source();
  if (region.begin.line == 0) return source;
  return source + ":" + std::to_string(region.begin.line);
}

bool is_hex64(const std::string& s) {
  if (s.size() != 64) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
  });
}

// Relative, '/'-separated, no empty, "." or ".." component: a path that can
// only name something inside the bundle directory.
std::optional<std::string> path_problem(const std::string& p) {
  if (p.empty()) return "is empty";
  if (p.front() == '/') return "is absolute";
  if (p.find('\\') != std::string::npos) return "contains a backslash";
  if (p.find('\0') != std::string::npos) return "contains a NUL byte";
  std::size_t start = 0;
  while (true) {
    const std::size_t slash = p.find('/', start);
    const std::string part = p.substr(
        start, slash == std::string::npos ? std::string::npos : slash - start);
    if (part == "..") return "contains \"..\"";
    if (part.empty() || part == ".") return "has an empty or \".\" component";
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  if (p == "bundle.toml" || p == "bundle.toml.sig")
    return "names the manifest or its signature";
  return std::nullopt;
}

// Typed field access with the line of the offending node in every error.
struct Reader {
  const std::string& source;

  Result<std::string> str(const toml::table& t, const char* key,
                          const std::string& ctx, bool required = true) {
    const toml::node* n = t.get(key);
    if (!n) {
      if (!required) return std::string();
      return bad(ctx, std::string("missing key \"") + key + "\"");
    }
    if (auto v = n->value<std::string>(); v && n->is_string()) return *v;
    return bad(where(source, *n),
               std::string("\"") + key + "\" must be a string");
  }

  Result<std::uint64_t> u64(const toml::table& t, const char* key,
                            const std::string& ctx) {
    const toml::node* n = t.get(key);
    if (!n) return bad(ctx, std::string("missing key \"") + key + "\"");
    if (!n->is_integer())
      return bad(where(source, *n),
                 std::string("\"") + key + "\" must be an integer");
    const std::int64_t v = n->as_integer()->get();
    if (v < 0)
      return bad(where(source, *n),
                 std::string("\"") + key + "\" must not be negative");
    return static_cast<std::uint64_t>(v);
  }

  Result<std::vector<std::string>> strings(const toml::table& t,
                                           const char* key,
                                           const std::string& ctx) {
    const toml::node* n = t.get(key);
    if (!n) return bad(ctx, std::string("missing key \"") + key + "\"");
    const toml::array* a = n->as_array();
    if (!a)
      return bad(where(source, *n),
                 std::string("\"") + key + "\" must be an array of strings");
    std::vector<std::string> out;
    for (const toml::node& item : *a) {
      if (!item.is_string())
        return bad(where(source, item),
                   std::string("\"") + key + "\" must be an array of strings");
      out.push_back(item.as_string()->get());
    }
    return out;
  }
};

}  // namespace

std::string write_manifest(const Manifest& m) {
  Manifest sorted = m;
  std::sort(
      sorted.files.begin(), sorted.files.end(),
      [](const FileEntry& a, const FileEntry& b) { return a.path < b.path; });
  std::ostringstream out;
  out << "# gpunode offline bundle. bundle.toml.sig signs these exact bytes.\n";
  out << "format_version = " << sorted.format_version << "\n";
  out << "created = " << quote(sorted.created) << "\n";
  out << "gpunode_version = " << quote(sorted.gpunode_version) << "\n";
  out << "min_driver = " << quote(sorted.min_driver) << "\n";
  out << "chunk_bytes = " << sorted.chunk_bytes << "\n";
  // Images keep the order given: it is the install order.
  for (const ImageEntry& i : sorted.images) {
    out << "\n[[images]]\n";
    out << "name = " << quote(i.name) << "\n";
    out << "ref = " << quote(i.ref) << "\n";
    out << "digest = " << quote(i.digest) << "\n";
    out << "platforms = " << string_array(i.platforms, false) << "\n";
    out << "file = " << quote(i.file) << "\n";
  }
  std::sort(sorted.packages.begin(), sorted.packages.end(),
            [](const PackageEntry& a, const PackageEntry& b) {
              return std::tie(a.family, a.arch, a.name) <
                     std::tie(b.family, b.arch, b.name);
            });
  for (const PackageEntry& p : sorted.packages) {
    out << "\n[[packages]]\n";
    out << "family = " << quote(p.family) << "\n";
    out << "name = " << quote(p.name) << "\n";
    out << "version = " << quote(p.version) << "\n";
    out << "arch = " << quote(p.arch) << "\n";
    out << "file = " << quote(p.file) << "\n";
    out << "sha256 = " << quote(p.sha256) << "\n";
  }
  for (const FileEntry& f : sorted.files) {
    out << "\n[[files]]\n";
    out << "path = " << quote(f.path) << "\n";
    out << "size = " << f.size << "\n";
    out << "sha256 = " << quote(f.sha256) << "\n";
    out << "chunks = " << string_array(f.chunks, true) << "\n";
  }
  return out.str();
}

Result<Manifest> parse_manifest(const std::string& text,
                                const std::string& source) {
  if (text.size() > kMaxManifestBytes)
    return bad(source, "is " + std::to_string(text.size()) +
                           " bytes; a bundle.toml may be at most " +
                           std::to_string(kMaxManifestBytes) + " bytes");
  toml::table doc;
  try {
    doc = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    return bad(source + ":" + std::to_string(e.source().begin.line),
               std::string(e.description()));
  }
  Reader r{source};
  Manifest m;

  // The version first: a newer format may change everything else, and the
  // operator needs to hear "too new", not a confusing field error.
  const toml::node* version = doc.get("format_version");
  if (!version) return bad(source, "missing key \"format_version\"");
  if (!version->is_integer())
    return bad(where(source, *version),
               "\"format_version\" must be an integer");
  const std::int64_t v = version->as_integer()->get();
  if (v != kFormatVersion)
    return usage_error("bundle.toml format version " + std::to_string(v) +
                       " is not supported (supported: " +
                       std::to_string(kFormatVersion) + ")");
  m.format_version = static_cast<int>(v);

  auto created = r.str(doc, "created", source);
  if (!created) return created.error();
  m.created = *created;
  auto gv = r.str(doc, "gpunode_version", source);
  if (!gv) return gv.error();
  m.gpunode_version = *gv;
  auto md = r.str(doc, "min_driver", source, false);
  if (!md) return md.error();
  m.min_driver = *md;
  auto cb = r.u64(doc, "chunk_bytes", source);
  if (!cb) return cb.error();
  if (*cb == 0)
    return bad(where(source, *doc.get("chunk_bytes")),
               "\"chunk_bytes\" must be positive");
  m.chunk_bytes = *cb;

  static const std::set<std::string> kTopKeys = {
      "format_version", "created", "gpunode_version", "min_driver",
      "chunk_bytes",    "images",  "packages",        "files"};
  for (const auto& [key, node] : doc) {
    if (!kTopKeys.count(std::string(key.str())))
      return bad(where(source, node),
                 "unknown key \"" + std::string(key.str()) + "\"");
  }

  auto table_array = [&](const char* key) -> Result<const toml::array*> {
    const toml::node* n = doc.get(key);
    if (!n) return static_cast<const toml::array*>(nullptr);
    const toml::array* a = n->as_array();
    if (!a || !a->is_array_of_tables())
      return bad(where(source, *n), std::string("\"") + key +
                                        "\" must be an array of tables ([[" +
                                        key + "]])");
    return a;
  };

  auto files = table_array("files");
  if (!files) return files.error();
  std::set<std::string> seen;
  if (*files) {
    for (const toml::node& node : **files) {
      const toml::table& t = *node.as_table();
      const std::string ctx = where(source, node);
      FileEntry f;
      auto path = r.str(t, "path", ctx);
      if (!path) return path.error();
      f.path = *path;
      if (auto p = path_problem(f.path))
        return bad(where(source, *t.get("path")),
                   "file path \"" + f.path + "\" " + *p);
      if (!seen.insert(f.path).second)
        return bad(where(source, *t.get("path")),
                   "file path \"" + f.path + "\" is listed twice");
      auto size = r.u64(t, "size", ctx);
      if (!size) return size.error();
      f.size = *size;
      auto sha = r.str(t, "sha256", ctx);
      if (!sha) return sha.error();
      f.sha256 = *sha;
      if (!is_hex64(f.sha256))
        return bad(
            where(source, *t.get("sha256")),
            "sha256 of \"" + f.path + "\" is not 64 lowercase hex digits");
      auto chunks = r.strings(t, "chunks", ctx);
      if (!chunks) return chunks.error();
      f.chunks = std::move(*chunks);
      for (const std::string& c : f.chunks) {
        if (!is_hex64(c))
          return bad(where(source, *t.get("chunks")),
                     "a chunk sha256 of \"" + f.path +
                         "\" is not 64 lowercase hex digits");
      }
      // An empty file has no chunks: there is no byte range to hash.
      const std::uint64_t want =
          f.size / m.chunk_bytes + (f.size % m.chunk_bytes ? 1 : 0);
      if (f.chunks.size() != want)
        return bad(where(source, *t.get("chunks")),
                   "\"" + f.path + "\" has " + std::to_string(f.chunks.size()) +
                       " chunk digests; " + std::to_string(f.size) +
                       " bytes in chunks of " + std::to_string(m.chunk_bytes) +
                       " need " + std::to_string(want));
      for (const auto& [key, value] : t) {
        const std::string k(key.str());
        if (k != "path" && k != "size" && k != "sha256" && k != "chunks")
          return bad(where(source, value), "unknown key \"" + k + "\"");
      }
      m.files.push_back(std::move(f));
    }
  }
  std::sort(
      m.files.begin(), m.files.end(),
      [](const FileEntry& a, const FileEntry& b) { return a.path < b.path; });

  auto images = table_array("images");
  if (!images) return images.error();
  if (*images) {
    for (const toml::node& node : **images) {
      const toml::table& t = *node.as_table();
      const std::string ctx = where(source, node);
      ImageEntry i;
      for (auto [key, dest] :
           {std::pair<const char*, std::string*>{"name", &i.name},
            {"ref", &i.ref},
            {"digest", &i.digest},
            {"file", &i.file}}) {
        auto s = r.str(t, key, ctx);
        if (!s) return s.error();
        *dest = *s;
      }
      auto platforms = r.strings(t, "platforms", ctx);
      if (!platforms) return platforms.error();
      i.platforms = std::move(*platforms);
      if (!seen.count(i.file))
        return bad(where(source, *t.get("file")),
                   "image \"" + i.name + "\" names file \"" + i.file +
                       "\", which is not listed in [[files]]");
      for (const auto& [key, value] : t) {
        const std::string k(key.str());
        if (k != "name" && k != "ref" && k != "digest" && k != "file" &&
            k != "platforms")
          return bad(where(source, value), "unknown key \"" + k + "\"");
      }
      m.images.push_back(std::move(i));
    }
  }

  auto packages = table_array("packages");
  if (!packages) return packages.error();
  if (*packages) {
    std::set<std::tuple<std::string, std::string, std::string>> sets;
    for (const toml::node& node : **packages) {
      const toml::table& t = *node.as_table();
      const std::string ctx = where(source, node);
      PackageEntry p;
      for (auto [key, dest] :
           {std::pair<const char*, std::string*>{"family", &p.family},
            {"name", &p.name},
            {"version", &p.version},
            {"arch", &p.arch},
            {"file", &p.file},
            {"sha256", &p.sha256}}) {
        auto s = r.str(t, key, ctx);
        if (!s) return s.error();
        if (s->empty())
          return bad(where(source, *t.get(key)),
                     std::string("package \"") + key + "\" is empty");
        *dest = *s;
      }
      if (p.family != "deb" && p.family != "rpm")
        return bad(where(source, *t.get("family")),
                   "package family \"" + p.family +
                       "\" is neither \"deb\" nor \"rpm\"");
      const auto file =
          std::find_if(m.files.begin(), m.files.end(),
                       [&](const FileEntry& f) { return f.path == p.file; });
      if (file == m.files.end())
        return bad(where(source, *t.get("file")),
                   "package \"" + p.name + "\" names file \"" + p.file +
                       "\", which is not listed in [[files]]");
      if (file->sha256 != p.sha256)
        return bad(where(source, *t.get("sha256")),
                   "package \"" + p.name + "\" gives sha256 " + p.sha256 +
                       ", but [[files]] gives " + p.file + " " + file->sha256);
      if (!sets.emplace(p.family, p.arch, p.name).second)
        return bad(where(source, *t.get("name")),
                   "package \"" + p.name + "\" is listed twice for " +
                       p.family + " " + p.arch);
      for (const auto& [key, value] : t) {
        const std::string k(key.str());
        if (k != "family" && k != "name" && k != "version" && k != "arch" &&
            k != "file" && k != "sha256")
          return bad(where(source, value), "unknown key \"" + k + "\"");
      }
      m.packages.push_back(std::move(p));
    }
  }
  return m;
}

}  // namespace gpunode::bundle
