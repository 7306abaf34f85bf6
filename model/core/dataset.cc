#include "model/core/dataset.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model/core/echo.h"

namespace tgraph {

namespace fs = std::filesystem;

std::string Collection::name() const {
  if (named()) return absl::StrCat(kind == CollectionKind::kTile ? "tile@" : "layout@", model);
  return kind == CollectionKind::kTile ? absl::StrCat("tile:", source) : absl::StrCat("layout:", source, ":", search);
}

const std::vector<Collection>& AllCollections() {
  static const std::vector<Collection> kAll = {
      {CollectionKind::kLayout, "xla", "random", ""},
      {CollectionKind::kLayout, "xla", "default", ""},
      {CollectionKind::kLayout, "nlp", "random", ""},
      {CollectionKind::kLayout, "nlp", "default", ""},
      {CollectionKind::kTile, "xla", "", ""},
  };
  return kAll;
}

const std::vector<Collection>& NeighbourhoodCollections() {
  static const std::vector<Collection> kNear = {
      {CollectionKind::kLayout, "xla", "near-default", ""},
      {CollectionKind::kLayout, "xla", "near-best", ""},
      {CollectionKind::kLayout, "nlp", "near-default", ""},
      {CollectionKind::kLayout, "nlp", "near-best", ""},
  };
  return kNear;
}

bool IsNeighbourhood(const Collection& c) {
  return !c.named() && c.kind == CollectionKind::kLayout && (c.search == "near-default" || c.search == "near-best");
}

const std::vector<Collection>& PicksCollections() {
  static const std::vector<Collection> kPicks = {
      {CollectionKind::kLayout, "xla", "picks", ""},
      {CollectionKind::kLayout, "nlp", "picks", ""},
  };
  return kPicks;
}

const std::vector<Collection>& RegionCollections() {
  static const std::vector<Collection> kRegion = {
      {CollectionKind::kLayout, "xla", "region", ""},
      {CollectionKind::kLayout, "nlp", "region", ""},
  };
  return kRegion;
}

bool IsPicks(const Collection& c) { return !c.named() && c.kind == CollectionKind::kLayout && c.search == "picks"; }

namespace {

// The dataset's collections, then the neighbourhood, region and picks ones.
std::vector<Collection> KnownCollections() {
  std::vector<Collection> all = AllCollections();
  const std::vector<Collection>& near = NeighbourhoodCollections();
  all.insert(all.end(), near.begin(), near.end());
  const std::vector<Collection>& region = RegionCollections();
  all.insert(all.end(), region.begin(), region.end());
  const std::vector<Collection>& picks = PicksCollections();
  all.insert(all.end(), picks.begin(), picks.end());
  return all;
}

bool IsModelName(absl::string_view n) {
  if (n.empty() || n.size() > 64) return false;
  auto lower_or_digit = [](char ch) { return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9'); };
  if (!lower_or_digit(n[0])) return false;
  return std::all_of(n.begin(), n.end(), [&](char ch) { return lower_or_digit(ch) || ch == '.' || ch == '_' || ch == '-'; });
}

}  // namespace

absl::StatusOr<Collection> ParseCollection(absl::string_view name) {
  std::vector<std::string> names;
  for (const Collection& c : KnownCollections()) {
    if (c.name() == name) return c;
    if (c.kind == CollectionKind::kTile || c.search == "random" || c.search == "default") names.push_back(c.name());
  }
  names.push_back("layout:xla|nlp:near-default|near-best|region|picks");
  const size_t at = name.find('@');
  if (at != absl::string_view::npos) {
    const absl::string_view kind = name.substr(0, at), model = name.substr(at + 1);
    if ((kind == "layout" || kind == "tile") && IsModelName(model)) {
      Collection c;
      c.kind = kind == "tile" ? CollectionKind::kTile : CollectionKind::kLayout;
      c.model = std::string(model);
      return c;
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown collection '", Echo(name), "'; expected one of: ", absl::StrJoin(names, ", "),
      ", or a model of your own: layout@NAME or tile@NAME (NAME: 1-64 of a-z, 0-9, '.', '_', '-', starting with a "
      "letter or digit, e.g. layout@tpu-v5e)"));
}

std::string SplitDir(const std::string& root, const Collection& c, absl::string_view split) {
  if (c.named())
    return absl::StrCat(root, "/npz/", c.kind == CollectionKind::kTile ? "tile" : "layout", "/@", c.model, "/", split);
  if (c.kind == CollectionKind::kTile) return absl::StrCat(root, "/npz/tile/", c.source, "/", split);
  return absl::StrCat(root, "/npz/layout/", c.source, "/", c.search, "/", split);
}

absl::StatusOr<std::vector<GraphFile>> ListSplit(const std::string& root, const Collection& c,
                                                 absl::string_view split) {
  const std::string dir = SplitDir(root, c, split);
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return absl::NotFoundError(absl::StrCat("collection ", c.name(), ", split '", split, "': directory ", dir,
                                            " does not exist"));
  std::vector<GraphFile> files;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_regular_file(ec) || it->path().extension() != ".npz") continue;
    files.push_back({it->path().stem().string(), it->path().string()});
  }
  if (ec) return absl::InternalError(absl::StrCat(dir, ": cannot list: ", ec.message()));
  std::sort(files.begin(), files.end(), [](const GraphFile& a, const GraphFile& b) { return a.name < b.name; });
  return files;
}

std::vector<Collection> FindCollections(const std::string& root) {
  std::vector<Collection> found;
  for (const Collection& c : KnownCollections()) {
    for (const std::string& split : AllSplits()) {
      std::error_code ec;
      if (fs::is_directory(SplitDir(root, c, split), ec)) {
        found.push_back(c);
        break;
      }
    }
  }
  return found;
}

}  // namespace tgraph
