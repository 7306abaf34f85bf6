// The conventions every tgraph command-line tool follows (docs/operations.md, "Command-
// line tools"): --help lists the tool's own flags and exits 0; --version prints the
// project version and git commit; flags may use dashes or underscores; exit status 0
// on success, 2 on a usage error (an unknown flag, a bad flag value, a missing or
// contradictory argument), 1 on any other failure.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace tgraph {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;
// Some inputs were refused and said so, the others done (tgraph-featurize fusions: a
// module whose fusions could not all be read).
inline constexpr int kExitPartial = 3;

// Parses the command line: handles --help (also -h, --helpfull, --helpshort) and
// --version itself and exits 0; an unknown flag or a value that does not parse
// (on the command line or in a --flagfile) exits 2 with Abseil's message. Returns
// the positional arguments, argv[0] first. `usage` is the tool's synopsis.
std::vector<char*> ParseToolCommandLine(int argc, char** argv, const char* usage);

// ParseToolCommandLine for a tool that takes no positional argument: one is a usage
// error (the tool exits 2, naming it).
void ParseToolFlags(int argc, char** argv, const char* usage);

// The name the tool was started as ("tgraph-client"), for messages.
const std::string& ToolName();

// A usage error: INVALID_ARGUMENT marked so that Fail() exits with kExitUsage.
absl::Status UsageError(absl::string_view message);
bool IsUsageError(const absl::Status& s);

// Prints "<tool>: <message>" to stderr and returns the exit status for `s`:
// kExitUsage for a UsageError, else kExitFailure (kExitOk for OK).
int Fail(const absl::Status& s);

// "<tool> <version> (commit <commit>)".
std::string VersionLine();

// Log lines on stderr, one whole line per call (safe from any thread):
//   2026-11-23T00:45:12.345Z INFO tgraph-server: serving tgraph.v1.Ranker on port 50051
// or, after SetJsonLogs(true), one JSON object per line (for log collectors):
//   {"time":"2026-11-23T00:45:12.345Z","level":"INFO","tool":"tgraph-server","msg":"..."}
enum class LogLevel { kInfo, kWarning, kError };
void SetJsonLogs(bool json);
void Log(LogLevel level, absl::string_view message);
inline void LogInfo(absl::string_view message) { Log(LogLevel::kInfo, message); }
inline void LogWarning(absl::string_view message) { Log(LogLevel::kWarning, message); }
inline void LogError(absl::string_view message) { Log(LogLevel::kError, message); }

}  // namespace tgraph
