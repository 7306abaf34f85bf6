#include "model/tools/tool.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include <nlohmann/json.hpp>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "model/tools/build_info.h"
#include "model/tools/cli.h"

namespace tgraph {
namespace {

constexpr char kUsagePayload[] = "type.tgraph.dev/tgraph.UsageError";

std::string& MutableToolName() {
  static std::string name = "tgraph";
  return name;
}

// Abseil reports a bad flag by printing its message and calling exit(1), which no
// option changes in this Abseil version; while it parses, an exit handler turns that
// into the usage status 2.
bool parsing = false;
void ExitUsageWhileParsing() {
  if (!parsing) return;
  // Abseil printed "ERROR: ..." lines; end them as every other usage error ends.
  std::fprintf(stderr, "%s: bad flags (see --help)\n", MutableToolName().c_str());
  std::fflush(nullptr);
  _exit(kExitUsage);
}

void PrintHelp(const char* usage) {
  std::printf("%s\n\nFlags (--name=default; dashes or underscores both work):\n", usage);
  std::map<std::string, absl::CommandLineFlag*> ours;
  for (const auto& [name, flag] : absl::GetAllFlags())
    if (!absl::StrContains(flag->Filename(), "absl/")) ours.emplace(std::string(name), flag);
  for (const auto& [name, flag] : ours) {
    const std::string def = flag->IsOfType<std::string>() ? absl::StrCat("\"", flag->DefaultValue(), "\"")
                                                           : flag->DefaultValue();
    std::printf("  --%s=%s\n      %s\n", name.c_str(), def.c_str(), flag->Help().c_str());
  }
  std::printf("\nAlso: --flagfile=FILE (flags, one per line), --help, --version.\n"
              "Exit status: 0 success, 1 failure, 2 usage error.\n");
}

}  // namespace

// Whether the tool defines a flag `name` that takes a value (not a bool).
static bool OwnValueFlag(absl::string_view name) {
  const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
  return flag != nullptr && !flag->IsOfType<bool>();
}

void ParseToolFlags(int argc, char** argv, const char* usage) {
  const std::vector<char*> args = ParseToolCommandLine(argc, argv, usage);
  if (args.size() > 1) std::exit(Fail(UsageError(absl::StrCat("unexpected argument '", args[1], "'"))));
}

const std::string& ToolName() { return MutableToolName(); }

std::string VersionLine() { return absl::StrCat(ToolName(), " ", BuildVersion(), " (commit ", BuildCommit(), ")"); }

std::vector<char*> ParseToolCommandLine(int argc, char** argv, const char* usage) {
  const char* slash = std::strrchr(argv[0], '/');
  MutableToolName() = slash ? slash + 1 : argv[0];
  NormalizeFlagDashes(argc, argv);
  absl::SetProgramUsageMessage(usage);
  for (int i = 1; i < argc && std::strcmp(argv[i], "--") != 0; ++i) {
    const absl::string_view a = argv[i];
    if (a == "-h" || a == "--help" || a == "--helpfull" || a == "--helpshort" || a == "--helppackage" ||
        absl::StartsWith(a, "--helpon=") || absl::StartsWith(a, "--helpmatch=")) {
      PrintHelp(usage);
      std::exit(kExitOk);
    }
    // "--version N" is a tool's own version flag when it has one with a value
    // (tgraph-train retire --version 7); "--version" alone prints the tool's version.
    if (std::strcmp(argv[i], "--version") == 0 && !(OwnValueFlag("version") && i + 1 < argc && argv[i + 1][0] != '-')) {
      std::printf("%s\n", VersionLine().c_str());
      std::exit(kExitOk);
    }
  }
  static const bool registered = std::atexit(ExitUsageWhileParsing) == 0;
  (void)registered;
  parsing = true;
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  parsing = false;
  return args;
}

absl::Status UsageError(absl::string_view message) {
  absl::Status s = absl::InvalidArgumentError(absl::StrCat(message, " (see --help)"));
  s.SetPayload(kUsagePayload, absl::Cord("1"));
  return s;
}

bool IsUsageError(const absl::Status& s) { return s.GetPayload(kUsagePayload).has_value(); }

namespace {
std::atomic<bool> json_logs{false};
std::mutex log_mu;
}  // namespace

void SetJsonLogs(bool json) { json_logs = json; }

void Log(LogLevel level, absl::string_view message) {
  const char* name = level == LogLevel::kError ? "ERROR" : level == LogLevel::kWarning ? "WARNING" : "INFO";
  const std::string time = absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone());
  std::string line;
  if (json_logs) {
    line = nlohmann::json{{"time", time}, {"level", name}, {"tool", ToolName()}, {"msg", std::string(message)}}.dump(
        -1, ' ', false, nlohmann::json::error_handler_t::replace);
  } else {
    line = absl::StrCat(time, " ", name, " ", ToolName(), ": ", message);
  }
  line += '\n';
  std::lock_guard<std::mutex> lock(log_mu);
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

int Fail(const absl::Status& s) {
  if (s.ok()) return kExitOk;
  std::fprintf(stderr, "%s: %s\n", ToolName().c_str(), std::string(s.message()).c_str());
  return IsUsageError(s) ? kExitUsage : kExitFailure;
}

}  // namespace tgraph
