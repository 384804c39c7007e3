// tilesearch: the command-line entry point. Parses the subcommand and runs it; every user error
// is one line "tilesearch: error: <message>" on stderr and exit code 2.
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <map>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/algorithm/container.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "tools/commands.h"
#include "tools/distributed.h"

namespace {

// The last error reported, for FinishDistributed (a rank > 0 sends it to rank 0).
std::string& LastError() {
  static std::string error;
  return error;
}

int ReportError(const std::string& message) {
  LastError() = absl::StrReplaceAll(message, {{"\n", "; "}});
  // Exactly one line, whatever the message holds; under mpiexec rank 0 reports for every rank.
  if (!tilesearch::tools::IsServingRank())
    std::cerr << "tilesearch: error: " << LastError() << "\n";
  return 2;
}

// XGBoost trains with OpenMP (libgomp), which reads OMP_WAIT_POLICY once, when the library is
// loaded, before main runs. Its default lets idle worker threads spin at every barrier; on a busy
// host (measurement workers, compile workers, other jobs) a training round then took 9-19 s
// instead of 0.03-0.07 s with the passive policy (bench/NOTES.md). So when the user has not chosen
// a policy, the process restarts itself once with OMP_WAIT_POLICY=passive (same pid, same
// arguments); a failed exec just continues with the default policy.
void RestartWithPassiveOpenMpWait(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  if (::setenv("OMP_WAIT_POLICY", "passive", /*overwrite=*/0) != 0) return;
  ::execv("/proc/self/exe", argv);
}

// The first option on the command line that neither the chosen subcommand nor the program
// knows ("--trails"), as an error message; nullopt when every option is known. Values that look
// like negative numbers are not options.
std::optional<std::string> UnknownOption(CLI::App& app, int argc, char** argv) {
  std::vector<CLI::App*> chosen = app.get_subcommands();
  if (chosen.empty()) return std::nullopt;
  CLI::App* sub = chosen.front();
  for (int i = 2; i < argc; ++i) {
    const std::string token = argv[i];
    if (token == "--") break;
    if (token.size() < 2 || token[0] != '-' || absl::ascii_isdigit(token[1]) || token[1] == '.')
      continue;
    const std::string name = token.substr(0, token.find('='));
    if (sub->get_option_no_throw(name) != nullptr || app.get_option_no_throw(name) != nullptr)
      continue;
    return "unknown option '" + name + "' for '" + sub->get_name() + "' (see tilesearch " +
           sub->get_name() + " --help)";
  }
  return std::nullopt;
}

}  // namespace

int RunCommand(int argc, char** argv) {
  CLI::App app{"tilesearch: search GPU and CPU kernel schedules for tensor operators (Ansor-style)",
               "tilesearch"};
  app.require_subcommand(1);
  using tilesearch::tools::CommandAction;
  using tilesearch::tools::ExitCodeAction;
  std::map<CLI::App*, ExitCodeAction> actions;
  auto exit_zero = [](CommandAction action) -> ExitCodeAction {
    return [action]() -> absl::StatusOr<int> {
      absl::Status status = action();
      if (!status.ok()) return status;
      return 0;
    };
  };
  CLI::App* ops = app.add_subcommand("ops", "list the operator library");
  actions[ops] = exit_zero(tilesearch::tools::AddOpsCommand(*ops));
  CLI::App* show = app.add_subcommand(
      "show", "print an operator's ComputeDAG and naive loop nest, or a schedule's lowered nest");
  actions[show] = exit_zero(tilesearch::tools::AddShowCommand(*show));
  CLI::App* check = app.add_subcommand(
      "check", "run a schedule in the interpreter against the naive program on random inputs");
  actions[check] = tilesearch::tools::AddCheckCommand(*check);
  CLI::App* measure = app.add_subcommand(
      "measure", "compile a schedule, check it and time it on its target (cpu or cuda)");
  actions[measure] = tilesearch::tools::AddMeasureCommand(*measure);
  CLI::App* bench_compile = app.add_subcommand(
      "bench-compile", "compile-time benchmark: many GPU matmul tilings through MLIR -> PTX");
  actions[bench_compile] = exit_zero(tilesearch::tools::AddBenchCompileCommand(*bench_compile));
  CLI::App* tune = app.add_subcommand(
      "tune", "search schedules for a workload on a target (evolutionary search + cost model)");
  actions[tune] = tilesearch::tools::AddTuneCommand(*tune);
  CLI::App* replay =
      app.add_subcommand("replay",
                         "rebuild the best logged kernel of a workload and write it out (cuda: "
                         "PTX, cubin, launch JSON, header; cpu: object file, header, JSON)");
  actions[replay] = tilesearch::tools::AddReplayCommand(*replay);
  CLI::App* predict =
      app.add_subcommand("predict",
                         "a schedule for an untuned workload from tuned shapes and a cost model, "
                         "without measuring; checked, written as a schedule file or artifacts");
  actions[predict] = tilesearch::tools::AddPredictCommand(*predict);
  CLI::App* export_dispatch =
      app.add_subcommand("export-dispatch",
                         "kernels for buckets of one varying dimension (best records or "
                         "predictions), checked, with a C dispatch header");
  actions[export_dispatch] = tilesearch::tools::AddExportDispatchCommand(*export_dispatch);
  CLI::App* inspect = app.add_subcommand(
      "inspect", "summarize a tuning log per workload: trials, best, errors, tuning curve");
  actions[inspect] = tilesearch::tools::AddInspectCommand(*inspect);
  CLI::App* tune_graph = app.add_subcommand(
      "tune-graph", "partition a model layer into tasks and tune them with the task scheduler");
  actions[tune_graph] = tilesearch::tools::AddTuneGraphCommand(*tune_graph);
  CLI::App* run_graph = app.add_subcommand(
      "run-graph",
      "run a model layer with its tasks' best logged kernels: check, latency, breakdown");
  actions[run_graph] = tilesearch::tools::AddRunGraphCommand(*run_graph);
  CLI::App* bench = app.add_subcommand("bench",
                                       "tune every problem of benchmark suites (resuming their "
                                       "logs) and replay the best into artifacts");
  actions[bench] = tilesearch::tools::AddBenchCommand(*bench);

  CLI::App* train_model = app.add_subcommand(
      "train-model", "pretrain a cost model on the tuning logs of many workloads");
  actions[train_model] = exit_zero(tilesearch::tools::AddTrainModelCommand(*train_model));
  CLI::App* eval_model = app.add_subcommand(
      "eval-model",
      "leave-one-workload-out evaluation of pretrained, online-only and random cost models");
  actions[eval_model] = exit_zero(tilesearch::tools::AddEvalModelCommand(*eval_model));

  // CLI11 reports an unknown first word only as a missing subcommand; name it instead.
  if (argc > 1 && argv[1][0] != '-') {
    std::vector<std::string> names;  // in the order they were added (the help's order)
    for (const CLI::App* sub : app.get_subcommands({})) names.push_back(sub->get_name());
    if (!absl::c_linear_search(names, argv[1])) {
      return ReportError(std::string("unknown command '") + argv[1] + "' (expected one of " +
                         absl::StrJoin(names, ", ") + ")");
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    // Under mpiexec rank 0 prints the help for every rank.
    return tilesearch::tools::IsServingRank() ? 0 : app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return tilesearch::tools::IsServingRank() ? 0 : app.exit(e);
  } catch (const CLI::RequiredError& e) {
    // CLI11 checks required options before unknown ones; a misspelled option is the likelier
    // mistake, and naming it says what to fix.
    if (std::optional<std::string> unknown = UnknownOption(app, argc, argv)) {
      return ReportError(*unknown);
    }
    return ReportError(e.what());
  } catch (const CLI::ParseError& e) {
    return ReportError(e.what());
  }
  for (const auto& [sub, action] : actions) {
    if (!sub->parsed()) continue;
    if (absl::Status spread = tilesearch::tools::CheckDistributedCommand(sub->get_name());
        !spread.ok()) {
      return ReportError(std::string(spread.message()));
    }
    try {
      absl::StatusOr<int> code = action();
      if (!code.ok()) return ReportError(std::string(code.status().message()));
      return *code;
    } catch (const std::bad_alloc&) {
      // A workload too large for this machine's memory that no earlier check caught.
      return ReportError(
          "out of memory (the workload's buffers do not fit in this machine's memory)");
    }
  }
  return ReportError("no command given (try --help)");
}

int main(int argc, char** argv) {
  RestartWithPassiveOpenMpWait(argv);
  // Under mpiexec / srun (the MPI build): join the job before parsing (MPI may own argv).
  if (absl::Status started = tilesearch::tools::StartDistributed(&argc, &argv); !started.ok()) {
    return ReportError(std::string(started.message()));
  }
  const int code = RunCommand(argc, argv);
  return tilesearch::tools::FinishDistributed(code, LastError());
}
