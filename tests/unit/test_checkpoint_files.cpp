// Checkpoint commit, manifest verification and discovery on real directories: a committed checkpoint
// verifies; truncation, corruption, a missing file or manifest is reported naming the file; resume
// resolution skips such checkpoints (and hidden .partial leftovers) and picks the highest complete one.
#include <unistd.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <thread>

#include "checkpoint/checkpoint_files.h"
#include "checkpoint/checkpoint_finder.h"
#include "checkpoint/checkpoint_manager.h"
#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/checkpoint_writer.h"
#include "checkpoint/manifest.h"
#include "train/trainer_state.h"
#include "util/error.h"
#include "util/fs.h"

using namespace hftrain;
namespace fs = std::filesystem;

namespace {

fs::path fresh(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("hftrain_unit_ckpt_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string commit_checkpoint(const fs::path& out, int64_t step, const std::string& payload = "payload") {
  CheckpointWriter w(out.string(), step);
  w.add("a.bin", payload);
  w.add("b.json", "{\"step\": " + std::to_string(step) + "}\n");
  return w.commit(false);
}

std::vector<std::string> warnings;
void collect(const std::string& w) { warnings.push_back(w); }

}  // namespace

TEST_CASE("xxh64 matches the reference value", "[unit][checkpoint]") {
  // XXH64 of the empty input with seed 0, as published with the xxHash specification.
  CHECK(xxh64_hex(xxh64_of("", 0)) == "ef46db3751d8e999");
}

TEST_CASE("concurrent atomic writes of one path never fail and leave one whole file", "[unit][checkpoint]") {
  // Two `hftrain search` processes sharing a study's output_dir both write best_trial.json; with one shared
  // temporary name, one writer renamed the other's file away and the other failed (ENOENT).
  const fs::path dir = fresh("atomic_writers");
  const std::string path = (dir / "best_trial.json").string();
  std::vector<std::string> contents;
  for (char c : {'a', 'b', 'c', 'd'}) contents.push_back(std::string(4096, c));
  std::vector<std::string> errors(contents.size());
  std::vector<std::thread> writers;
  for (std::size_t w = 0; w < contents.size(); ++w)
    writers.emplace_back([&, w] {
      try {
        for (int i = 0; i < 100; ++i) write_file_atomic(path, contents[w]);
      } catch (const std::exception& e) {
        errors[w] = e.what();
      }
    });
  for (auto& t : writers) t.join();
  for (const auto& e : errors) CHECK(e.empty());
  const std::string final_text = read_text_file(path);
  CHECK(std::find(contents.begin(), contents.end(), final_text) != contents.end());
  CHECK(std::distance(fs::directory_iterator(dir), fs::directory_iterator()) == 1);  // no temporary left behind
}

TEST_CASE("checkpoint directory names", "[unit][checkpoint]") {
  CHECK(ckpt::parse_checkpoint_dir_name("checkpoint-12") == 12);
  CHECK(!ckpt::parse_checkpoint_dir_name("checkpoint-"));
  CHECK(!ckpt::parse_checkpoint_dir_name("checkpoint-1a"));
  CHECK(!ckpt::parse_checkpoint_dir_name(".checkpoint-3.partial"));
  CHECK(!ckpt::parse_checkpoint_dir_name("xcheckpoint-3"));
  CHECK(ckpt::is_stale_temporary(".checkpoint-3.partial"));
  CHECK(ckpt::is_stale_temporary(".checkpoint-3.old"));
  CHECK(ckpt::is_stale_temporary(".checkpoint-3.deleting"));
  CHECK(!ckpt::is_stale_temporary(".checkpoint-x.partial"));
  CHECK(!ckpt::is_stale_temporary("checkpoint-3"));
  CHECK(ckpt::rng_state_file(0, 1) == "rng_state.safetensors");
  CHECK(ckpt::rng_state_file(3, 4) == "rng_state_3.safetensors");
}

TEST_CASE("a committed checkpoint has a manifest of every file and verifies", "[unit][checkpoint]") {
  const fs::path out = fresh("commit");
  const std::string dir = commit_checkpoint(out, 7);
  CHECK(dir == (out / "checkpoint-7").string());
  CHECK(!fs::exists(out / ".checkpoint-7.partial"));
  const Manifest m = read_manifest(dir);
  CHECK(m.global_step == 7);
  REQUIRE(m.files.size() == 2);
  CHECK(m.files[0].name == "a.bin");
  CHECK(m.files[0].size == 7);
  CHECK(m.files[0].xxh64 == xxh64_of("payload", 7));
  CHECK(verify_checkpoint(dir).empty());
  CheckpointReader r(dir);
  CHECK(r.text("a.bin") == "payload");
  CHECK(r.json("b.json")["step"] == 7);
  CHECK_THROWS_WITH(r.text("c.bin"), Catch::Contains("c.bin") && Catch::Contains("not listed"));
}

TEST_CASE("verification names the truncated or corrupt or missing file", "[unit][checkpoint]") {
  const fs::path out = fresh("verify");
  const std::string dir = commit_checkpoint(out, 3);
  SECTION("truncated") {
    fs::resize_file(fs::path(dir) / "a.bin", 3);
    CHECK_THAT(verify_checkpoint(dir), Catch::Contains("a.bin") && Catch::Contains("truncated"));
    CHECK_THROWS_WITH(CheckpointReader(dir).bytes("a.bin"), Catch::Contains("a.bin"));
  }
  SECTION("corrupt, same size") {
    write_file_atomic(dir + "/a.bin", std::string("paxload"));
    CHECK_THAT(verify_checkpoint(dir), Catch::Contains("a.bin") && Catch::Contains("corrupt"));
  }
  SECTION("missing file") {
    fs::remove(fs::path(dir) / "b.json");
    CHECK_THAT(verify_checkpoint(dir), Catch::Contains("b.json") && Catch::Contains("missing"));
  }
  SECTION("missing manifest") {
    fs::remove(fs::path(dir) / "manifest.json");
    CHECK_THAT(verify_checkpoint(dir), Catch::Contains("manifest.json"));
  }
  SECTION("manifest pointing outside the checkpoint") {
    write_file_atomic(dir + "/manifest.json",
                      std::string(R"({"format":"hftrain-checkpoint","version":1,"global_step":3,"files":[)"
                                  R"({"name":"../x","size":1,"xxh64":"0000000000000000"}]})"));
    CHECK_THAT(verify_checkpoint(dir), Catch::Contains("../x"));
  }
}

TEST_CASE("a failed save removes its temporary directory and leaves older checkpoints alone", "[unit][checkpoint]") {
  const fs::path out = fresh("failed");
  commit_checkpoint(out, 2);
  const std::string before = read_text_file((out / "checkpoint-2/a.bin").string());
  {
    CheckpointWriter w(out.string(), 4);
    w.add("a.bin", "x");
    CHECK(fs::exists(out / ".checkpoint-4.partial/a.bin"));
    CHECK_THROWS_AS(w.add("../escape", "x"), RuntimeFailure);
  }  // not committed
  CHECK(!fs::exists(out / ".checkpoint-4.partial"));
  CHECK(!fs::exists(out / "checkpoint-4"));
  CHECK(read_text_file((out / "checkpoint-2/a.bin").string()) == before);
  CHECK(verify_checkpoint((out / "checkpoint-2").string()).empty());
}

TEST_CASE("committing over an existing checkpoint-N replaces it whole", "[unit][checkpoint]") {
  const fs::path out = fresh("replace");
  commit_checkpoint(out, 5, "old");
  commit_checkpoint(out, 5, "newer");
  CHECK(read_text_file((out / "checkpoint-5/a.bin").string()) == "newer");
  CHECK(verify_checkpoint((out / "checkpoint-5").string()).empty());
  CHECK(!fs::exists(out / ".checkpoint-5.old"));
}

TEST_CASE("files in subdirectories and adopted files are in the manifest", "[unit][checkpoint]") {
  const fs::path out = fresh("adopt");
  CheckpointWriter w(out.string(), 9);
  w.add("global_step9/x.safetensors", "xx");
  write_file_atomic(w.tmp_dir() + "/latest", std::string("global_step9"));
  w.adopt("latest");
  const std::string dir = w.commit(false);
  const Manifest m = read_manifest(dir);
  REQUIRE(m.find("global_step9/x.safetensors"));
  REQUIRE(m.find("latest"));
  CHECK(m.find("latest")->size == 12);
  CHECK(verify_checkpoint(dir).empty());
}

TEST_CASE("resume picks the highest complete checkpoint numerically and skips broken ones", "[unit][checkpoint]") {
  const fs::path out = fresh("finder");
  for (int s : {9, 10, 100, 20}) commit_checkpoint(out, s);
  fs::create_directories(out / ".checkpoint-200.partial");  // a crash mid-save
  fs::create_directories(out / "checkpoint-300");           // no manifest: never committed by hftrain
  std::ofstream(out / "checkpoint-400") << "a file, not a directory";
  fs::resize_file(out / "checkpoint-100/a.bin", 1);         // truncated after the commit

  std::vector<int64_t> steps;
  for (const auto& c : list_checkpoints(out.string())) steps.push_back(c.step);
  CHECK(steps == std::vector<int64_t>{9, 10, 20, 100, 300});

  warnings.clear();
  CHECK(resolve_resume_checkpoint("last", out.string(), collect) == (out / "checkpoint-20").string());
  REQUIRE(warnings.size() == 2);
  CHECK_THAT(warnings[0], Catch::Contains("checkpoint-300") && Catch::Contains("manifest.json"));
  CHECK_THAT(warnings[1], Catch::Contains("checkpoint-100") && Catch::Contains("a.bin"));
  CHECK(resolve_resume_checkpoint("True", out.string(), collect) == (out / "checkpoint-20").string());
  CHECK(resolve_resume_checkpoint("", out.string(), collect).empty());
  CHECK(resolve_resume_checkpoint("false", out.string(), collect).empty());
  CHECK(resolve_resume_checkpoint((out / "checkpoint-10").string(), out.string(), collect) ==
        (out / "checkpoint-10").string());
  CHECK_THROWS_WITH(resolve_resume_checkpoint((out / "checkpoint-100").string(), out.string(), collect),
                    Catch::Contains("a.bin"));
  CHECK_THROWS_WITH(resolve_resume_checkpoint((out / "nope").string(), out.string(), collect),
                    Catch::Contains("nope"));
  const fs::path empty = fresh("finder_empty");
  CHECK_THROWS_WITH(resolve_resume_checkpoint("last", empty.string(), collect),
                    Catch::Contains("no valid checkpoint found"));
  // Known before a run starts, so a usage problem (exit 2), not a runtime failure.
  CHECK_THROWS_AS(resolve_resume_checkpoint((out / "nope").string(), out.string(), collect), ConfigError);
  CHECK_THROWS_AS(resolve_resume_checkpoint("last", empty.string(), collect), ConfigError);
}

TEST_CASE("a resume_from_checkpoint that cannot be resumed is explained before the run", "[unit][checkpoint]") {
  const fs::path out = fresh("resume_setting");
  commit_checkpoint(out, 4);
  commit_checkpoint(out, 8);
  fs::resize_file(out / "checkpoint-8/a.bin", 2);
  std::ofstream(out / "model.safetensors") << "weights";
  const std::string o = out.string();

  CHECK(resume_setting_problem("", o).empty());
  CHECK(resume_setting_problem("false", o).empty());
  CHECK(resume_setting_problem("last", o).empty());  // checkpoint-4 verifies
  CHECK(resume_setting_problem(o + "/checkpoint-4", o).empty());
  CHECK(resume_setting_problem(o + "/nope", o) == "'" + o + "/nope' does not exist");
  CHECK(resume_setting_problem(o + "/model.safetensors", o) == "'" + o + "/model.safetensors' is a file, not a checkpoint directory");
  // The output_dir itself given by mistake: what it holds, and the checkpoint inside it that would do.
  CHECK(resume_setting_problem(o, o) == "'" + o + "' holds no complete checkpoint (no manifest.json); it contains: "
                                        "checkpoint-4/, checkpoint-8/, model.safetensors; its newest complete checkpoint is '" +
                                        o + "/checkpoint-4'");
  CHECK_THAT(resume_setting_problem(o + "/checkpoint-8", o),
             Catch::Contains("cannot resume from '" + o + "/checkpoint-8'") && Catch::Contains("a.bin") &&
                 Catch::Contains("truncated"));
  const fs::path empty = fresh("resume_setting_empty");
  CHECK(resume_setting_problem(empty.string(), o) == "'" + empty.string() + "' holds no complete checkpoint (no manifest.json); "
                                                     "it contains: nothing (empty directory)");
  fs::remove_all(out / "checkpoint-4");
  CHECK(resume_setting_problem("True", o) == "'True': no valid checkpoint found in output directory '" + o + "'; skipping " + o +
                                             "/checkpoint-8: '" + o +
                                             "/checkpoint-8/a.bin' is 2 bytes but the manifest records 7 (truncated or overwritten)");
  CHECK(resume_setting_problem("last", o + "/absent") ==
        "'last': no valid checkpoint found in output directory '" + o + "/absent' (it does not exist)");
}

TEST_CASE("the manager cleans crash leftovers and rotates after a save", "[unit][checkpoint]") {
  const fs::path out = fresh("manager");
  fs::create_directories(out / ".checkpoint-3.partial");
  fs::create_directories(out / ".checkpoint-1.deleting");
  fs::create_directories(out / ".keep-me");
  CheckpointManager m({out.string(), 2, false});
  for (int64_t s : {1, 2, 3}) m.save(s, {{"a.bin", "x"}}, false, std::nullopt);
  CHECK(!fs::exists(out / ".checkpoint-3.partial"));
  CHECK(!fs::exists(out / ".checkpoint-1.deleting"));
  CHECK(fs::exists(out / ".keep-me"));
  std::vector<int64_t> steps;
  for (const auto& c : list_checkpoints(out.string())) steps.push_back(c.step);
  CHECK(steps == std::vector<int64_t>{2, 3});
}

TEST_CASE("save_only_model checkpoints are complete but not resumable", "[unit][checkpoint]") {
  const fs::path out = fresh("model_only");
  commit_checkpoint(out, 1);
  CheckpointWriter w(out.string(), 2);
  w.add("model.safetensors", "m");
  w.commit(true);
  warnings.clear();
  CHECK(resolve_resume_checkpoint("last", out.string(), collect) == (out / "checkpoint-1").string());
  REQUIRE(warnings.size() == 1);
  CHECK_THAT(warnings[0], Catch::Contains("save_only_model"));
}

TEST_CASE("trainer_state.json round-trips and reads HF's files", "[unit][checkpoint]") {
  TrainerState s;
  s.global_step = 12;
  s.epoch = 1.0 / 3.0;
  s.max_steps = 40;
  s.log_history = nlohmann::json::array({{{"loss", 1.25}, {"step", 4}}});
  s.best_metric = 0.1 + 0.2;
  s.best_global_step = 8;
  s.best_model_checkpoint = "out/checkpoint-8";
  s.stateful_callbacks = {{"EarlyStoppingCallback", {{"args", {}}, {"attributes", {{"early_stopping_patience_counter", 2}}}}}};
  const TrainerState r = TrainerState::from_json_text(s.to_json_text(), "t");
  CHECK(r.to_json_text() == s.to_json_text());
  CHECK(r.epoch == s.epoch);  // bitwise: JSON numbers round-trip doubles exactly

  // An HF file with fields hftrain does not keep (and without newer ones) still loads.
  const TrainerState hf = TrainerState::from_json_text(
      R"({"epoch": 2.0, "global_step": 500, "is_hyper_param_search": false, "log_history": [],
          "best_metric": null, "best_model_checkpoint": null, "trial_name": null, "total_flos": 1.5e12})",
      "hf");
  CHECK(hf.global_step == 500);
  CHECK(hf.best_global_step.is_null());
  CHECK_THROWS_WITH(TrainerState::from_json_text("{", "broken.json"), Catch::Contains("broken.json"));
}
