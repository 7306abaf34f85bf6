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
  return kind == CollectionKind::kTile ? absl::StrCat("tile:", source) : absl::StrCat("layout:", source, ":", search);
}

const std::vector<Collection>& AllCollections() {
  static const std::vector<Collection> kAll = {
      {CollectionKind::kLayout, "xla", "random"},
      {CollectionKind::kLayout, "xla", "default"},
      {CollectionKind::kLayout, "nlp", "random"},
      {CollectionKind::kLayout, "nlp", "default"},
      {CollectionKind::kTile, "xla", ""},
  };
  return kAll;
}

absl::StatusOr<Collection> ParseCollection(absl::string_view name) {
  std::vector<std::string> names;
  for (const Collection& c : AllCollections()) {
    if (c.name() == name) return c;
    names.push_back(c.name());
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown collection '", Echo(name), "'; expected one of: ", absl::StrJoin(names, ", ")));
}

std::string SplitDir(const std::string& root, const Collection& c, absl::string_view split) {
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
  for (const Collection& c : AllCollections()) {
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
