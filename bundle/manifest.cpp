// bundle.toml: written by hand (fixed key order, sorted files) so the bytes
// the signature covers are reproducible; read with toml++ and validated
// strictly, because every later check trusts what it says.
#include <toml++/toml.h>

#include <algorithm>
#include <cstdio>
#include <set>
#include <sstream>
#include <string_view>
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
  std::size_t lines_before = 0;  // of the piece being read (pieces_of)

  // The line of `node` in the whole document; 0 when not known.
  std::size_t line(const toml::node& node) const {
    const auto& region = node.source();
    return region.begin.line == 0 ? 0 : region.begin.line + lines_before;
  }
  // "bundle.toml:LINE" of `node`.
  std::string at(const toml::node& node) const {
    const std::size_t n = line(node);
    return n == 0 ? source : source + ":" + std::to_string(n);
  }

  Result<std::string> str(const toml::table& t, const char* key,
                          const std::string& ctx, bool required = true) {
    const toml::node* n = t.get(key);
    if (!n) {
      if (!required) return std::string();
      return bad(ctx, std::string("missing key \"") + key + "\"");
    }
    if (auto v = n->value<std::string>(); v && n->is_string()) return *v;
    return bad(at(*n), std::string("\"") + key + "\" must be a string");
  }

  Result<std::uint64_t> u64(const toml::table& t, const char* key,
                            const std::string& ctx) {
    const toml::node* n = t.get(key);
    if (!n) return bad(ctx, std::string("missing key \"") + key + "\"");
    if (!n->is_integer())
      return bad(at(*n), std::string("\"") + key + "\" must be an integer");
    const std::int64_t v = n->as_integer()->get();
    if (v < 0)
      return bad(at(*n), std::string("\"") + key + "\" must not be negative");
    return static_cast<std::uint64_t>(v);
  }

  Result<std::vector<std::string>> strings(const toml::table& t,
                                           const char* key,
                                           const std::string& ctx) {
    const toml::node* n = t.get(key);
    if (!n) return bad(ctx, std::string("missing key \"") + key + "\"");
    const toml::array* a = n->as_array();
    if (!a)
      return bad(at(*n),
                 std::string("\"") + key + "\" must be an array of strings");
    std::vector<std::string> out;
    for (const toml::node& item : *a) {
      if (!item.is_string())
        return bad(at(item),
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

namespace {

// bundle.toml cut before each line that is exactly "[[files]]" (the header
// write_manifest writes), so that each [[files]] table is parsed, converted
// and dropped in turn: a document of every table at once costs about ten
// times the text (70,000 files: 143 MiB, issue 24). Cutting there never
// changes what a document means: such a line can only be a header, or sit
// inside a multi-line string, and then the piece before it ends inside that
// string and is refused as unterminated. Arrays of tables that continue in
// a later piece ([[images]] after [[files]]) are appended in order, as TOML
// does.
struct Piece {
  std::string_view text;
  std::size_t lines_before = 0;  // lines of the document before this piece
};

std::vector<Piece> pieces_of(std::string_view text) {
  static constexpr std::string_view kHeader = "[[files]]";
  std::vector<Piece> pieces;
  std::size_t piece_start = 0, piece_line = 0, line = 0;
  for (std::size_t at = 0; at < text.size(); ++line) {
    std::size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    if (at > 0 && text.substr(at, end - at) == kHeader) {
      pieces.push_back(
          {text.substr(piece_start, at - piece_start), piece_line});
      piece_start = at;
      piece_line = line;
    }
    at = end + 1;
  }
  pieces.push_back({text.substr(piece_start), piece_line});
  return pieces;
}

}  // namespace

Result<Manifest> parse_manifest(const std::string& text,
                                const std::string& source) {
  if (text.size() > kMaxManifestBytes)
    return bad(source, "is " + std::to_string(text.size()) +
                           " bytes; a bundle.toml may be at most " +
                           std::to_string(kMaxManifestBytes) + " bytes");
  Manifest m;
  const std::vector<Piece> pieces = pieces_of(text);
  // One [[files]] table per piece, in bundle.toml as write_manifest writes
  // it: room for them all at once (no doubling, no copy on growth).
  m.files.reserve(pieces.size());
  // The line of each file's path, by m.files index, for "is listed twice".
  std::vector<std::size_t> file_path_lines;
  file_path_lines.reserve(pieces.size());
  // Cross-references wait until every file is known.
  std::vector<std::string> image_file_at, package_file_at, package_sha_at,
      package_name_at;
  for (std::size_t piece = 0; piece < pieces.size(); ++piece) {
    Reader r{source, pieces[piece].lines_before};
    toml::table doc;
    try {
      doc = toml::parse(pieces[piece].text, source);
    } catch (const toml::parse_error& e) {
      return bad(
          source + ":" + std::to_string(e.source().begin.line + r.lines_before),
          std::string(e.description()));
    }

    if (piece == 0) {
      // The version first: a newer format may change everything else, and
      // the operator needs to hear "too new", not a confusing field error.
      const toml::node* version = doc.get("format_version");
      if (!version) return bad(source, "missing key \"format_version\"");
      if (!version->is_integer())
        return bad(r.at(*version), "\"format_version\" must be an integer");
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
        return bad(r.at(*doc.get("chunk_bytes")),
                   "\"chunk_bytes\" must be positive");
      m.chunk_bytes = *cb;
    }

    // A later piece holds only tables: its top-level keys are table names.
    static const std::set<std::string> kTopKeys = {
        "format_version", "created", "gpunode_version", "min_driver",
        "chunk_bytes",    "images",  "packages",        "files"};
    static const std::set<std::string> kTableKeys = {"images", "packages",
                                                     "files"};
    for (const auto& [key, node] : doc) {
      if (!(piece == 0 ? kTopKeys : kTableKeys).count(std::string(key.str())))
        return bad(r.at(node),
                   "unknown key \"" + std::string(key.str()) + "\"");
    }

    auto table_array = [&](const char* key) -> Result<const toml::array*> {
      const toml::node* n = doc.get(key);
      if (!n) return static_cast<const toml::array*>(nullptr);
      const toml::array* a = n->as_array();
      if (!a || !a->is_array_of_tables())
        return bad(r.at(*n), std::string("\"") + key +
                                 "\" must be an array of tables ([[" + key +
                                 "]])");
      return a;
    };

    auto files = table_array("files");
    if (!files) return files.error();
    if (*files) {
      for (const toml::node& node : **files) {
        const toml::table& t = *node.as_table();
        const std::string ctx = r.at(node);
        FileEntry f;
        auto path = r.str(t, "path", ctx);
        if (!path) return path.error();
        f.path = *path;
        if (auto p = path_problem(f.path))
          return bad(r.at(*t.get("path")),
                     "file path \"" + f.path + "\" " + *p);
        auto size = r.u64(t, "size", ctx);
        if (!size) return size.error();
        f.size = *size;
        auto sha = r.str(t, "sha256", ctx);
        if (!sha) return sha.error();
        f.sha256 = *sha;
        if (!is_hex64(f.sha256))
          return bad(
              r.at(*t.get("sha256")),
              "sha256 of \"" + f.path + "\" is not 64 lowercase hex digits");
        auto chunks = r.strings(t, "chunks", ctx);
        if (!chunks) return chunks.error();
        f.chunks = std::move(*chunks);
        for (const std::string& c : f.chunks) {
          if (!is_hex64(c))
            return bad(r.at(*t.get("chunks")),
                       "a chunk sha256 of \"" + f.path +
                           "\" is not 64 lowercase hex digits");
        }
        // An empty file has no chunks: there is no byte range to hash.
        const std::uint64_t want =
            f.size / m.chunk_bytes + (f.size % m.chunk_bytes ? 1 : 0);
        if (f.chunks.size() != want)
          return bad(r.at(*t.get("chunks")),
                     "\"" + f.path + "\" has " +
                         std::to_string(f.chunks.size()) + " chunk digests; " +
                         std::to_string(f.size) + " bytes in chunks of " +
                         std::to_string(m.chunk_bytes) + " need " +
                         std::to_string(want));
        for (const auto& [key, value] : t) {
          const std::string k(key.str());
          if (k != "path" && k != "size" && k != "sha256" && k != "chunks")
            return bad(r.at(value), "unknown key \"" + k + "\"");
        }
        file_path_lines.push_back(r.line(*t.get("path")));
        m.files.push_back(std::move(f));
      }
    }

    auto images = table_array("images");
    if (!images) return images.error();
    if (*images) {
      for (const toml::node& node : **images) {
        const toml::table& t = *node.as_table();
        const std::string ctx = r.at(node);
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
        for (const auto& [key, value] : t) {
          const std::string k(key.str());
          if (k != "name" && k != "ref" && k != "digest" && k != "file" &&
              k != "platforms")
            return bad(r.at(value), "unknown key \"" + k + "\"");
        }
        image_file_at.push_back(r.at(*t.get("file")));
        m.images.push_back(std::move(i));
      }
    }

    auto packages = table_array("packages");
    if (!packages) return packages.error();
    if (*packages) {
      for (const toml::node& node : **packages) {
        const toml::table& t = *node.as_table();
        const std::string ctx = r.at(node);
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
            return bad(r.at(*t.get(key)),
                       std::string("package \"") + key + "\" is empty");
          *dest = *s;
        }
        if (p.family != "deb" && p.family != "rpm")
          return bad(r.at(*t.get("family")),
                     "package family \"" + p.family +
                         "\" is neither \"deb\" nor \"rpm\"");
        for (const auto& [key, value] : t) {
          const std::string k(key.str());
          if (k != "family" && k != "name" && k != "version" && k != "arch" &&
              k != "file" && k != "sha256")
            return bad(r.at(value), "unknown key \"" + k + "\"");
        }
        package_file_at.push_back(r.at(*t.get("file")));
        package_sha_at.push_back(r.at(*t.get("sha256")));
        package_name_at.push_back(r.at(*t.get("name")));
        m.packages.push_back(std::move(p));
      }
    }
  }

  // A path listed twice is named at its later line; then sorted by path, in
  // place (a second vector of every entry would double what they cost).
  {
    std::vector<std::size_t> order(m.files.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return std::tie(m.files[a].path, file_path_lines[a]) <
             std::tie(m.files[b].path, file_path_lines[b]);
    });
    for (std::size_t k = 1; k < order.size(); ++k) {
      if (m.files[order[k]].path == m.files[order[k - 1]].path)
        return bad(
            source + ":" + std::to_string(file_path_lines[order[k]]),
            "file path \"" + m.files[order[k]].path + "\" is listed twice");
    }
  }
  file_path_lines = {};
  std::sort(
      m.files.begin(), m.files.end(),
      [](const FileEntry& a, const FileEntry& b) { return a.path < b.path; });
  auto listed = [&](const std::string& path) -> const FileEntry* {
    auto it = std::lower_bound(
        m.files.begin(), m.files.end(), path,
        [](const FileEntry& f, const std::string& p) { return f.path < p; });
    return it != m.files.end() && it->path == path ? &*it : nullptr;
  };

  for (std::size_t k = 0; k < m.images.size(); ++k) {
    const ImageEntry& i = m.images[k];
    if (!listed(i.file))
      return bad(image_file_at[k], "image \"" + i.name + "\" names file \"" +
                                       i.file +
                                       "\", which is not listed in [[files]]");
  }
  std::set<std::tuple<std::string, std::string, std::string>> sets;
  for (std::size_t k = 0; k < m.packages.size(); ++k) {
    const PackageEntry& p = m.packages[k];
    const FileEntry* file = listed(p.file);
    if (!file)
      return bad(package_file_at[k],
                 "package \"" + p.name + "\" names file \"" + p.file +
                     "\", which is not listed in [[files]]");
    if (file->sha256 != p.sha256)
      return bad(package_sha_at[k], "package \"" + p.name + "\" gives sha256 " +
                                        p.sha256 + ", but [[files]] gives " +
                                        p.file + " " + file->sha256);
    if (!sets.emplace(p.family, p.arch, p.name).second)
      return bad(package_name_at[k], "package \"" + p.name +
                                         "\" is listed twice for " + p.family +
                                         " " + p.arch);
  }
  return m;
}

}  // namespace gpunode::bundle
