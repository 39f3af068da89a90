// `hftrain checkpoint inspect` through the real binary: a ZeRO-2 bf16 checkpoint of two workers and a
// one-process checkpoint are described (step, layout from the shards' partition maps, precision, files)
// and verified; a corrupted shard makes it exit 1 naming the file; a directory that is not a checkpoint
// is refused.
#include <catch2/catch.hpp>

#include <fstream>
#include <set>
#include <string>

#include "test_dist_helpers.h"

using namespace hftrain_test;
namespace fs = std::filesystem;

TEST_CASE("checkpoint inspect describes and verifies sharded and single-process checkpoints", "[integration][checkpoint]") {
  const std::string dir = dist_dir("inspect");
  write_text(dir + "/spec.yaml", dist_spec(2, "  save_strategy: steps\n  save_steps: 2\n"));
  CliResult train = run_hftrain("train spec.yaml --nproc-per-node 2 --set zero.stage=2 --set precision.bf16=true", dir);
  INFO(train.output);
  REQUIRE(train.exit_code == 0);
  CliResult r = run_hftrain("checkpoint inspect out/checkpoint-2", dir);
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("step: 2 (epoch"));
  CHECK_THAT(r.output, Catch::Contains("resumable"));
  CHECK_THAT(r.output, Catch::Contains("layout: ZeRO stage 2, 2 workers (global_step2/); 2 flat groups, 3600 trainable "
                                       "elements"));
  CHECK_THAT(r.output, Catch::Contains("precision: bf16 parameters and gradients, fp32 master weights"));
  CHECK_THAT(r.output, Catch::Contains("global_step2/zero_pp_rank_1_mp_rank_00_optim_states.safetensors"));
  CHECK_THAT(r.output, Catch::Contains("manifest: complete:"));
  {  // The manifest lists each file once (the streamed model.safetensors had been listed twice), and every
     // file of the directory but the manifest itself.
    const auto manifest = nlohmann::json::parse(read_text(dir + "/out/checkpoint-2/manifest.json"));
    std::multiset<std::string> listed;
    for (const auto& f : manifest.at("files")) listed.insert(f.at("name").get<std::string>());
    std::set<std::string> on_disk;
    for (const auto& e : fs::recursive_directory_iterator(dir + "/out/checkpoint-2"))
      if (e.is_regular_file()) on_disk.insert(fs::relative(e.path(), dir + "/out/checkpoint-2").string());
    on_disk.erase("manifest.json");
    CHECK(listed.count("model.safetensors") == 1);
    CHECK(std::set<std::string>(listed.begin(), listed.end()).size() == listed.size());
    CHECK(std::set<std::string>(listed.begin(), listed.end()) == on_disk);
  }

  // One flipped byte in rank 1's shard: the check names the file and the exit code says so.
  const std::string shard = dir + "/out/checkpoint-2/global_step2/zero_pp_rank_1_mp_rank_00_optim_states.safetensors";
  {
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-1, std::ios::end);
    f.put('\x5a');
  }
  CliResult bad = run_hftrain("checkpoint inspect out/checkpoint-2", dir);
  CHECK(bad.exit_code == 1);
  CHECK_THAT(bad.output, Catch::Contains("manifest: NOT complete:") && Catch::Contains("zero_pp_rank_1_mp_rank_00_optim_states"));

  CliResult single = run_hftrain("train spec.yaml --set training.output_dir=single", dir);
  REQUIRE(single.exit_code == 0);
  CliResult s = run_hftrain("checkpoint inspect single/checkpoint-2", dir);
  INFO(s.output);
  CHECK(s.exit_code == 0);
  CHECK_THAT(s.output, Catch::Contains("optimizer.safetensors (stage 0), 1 worker"));
  CHECK_THAT(s.output, Catch::Contains("precision: fp32"));

  CHECK(run_hftrain("checkpoint inspect out", dir).exit_code == 1);  // the run directory, not a checkpoint
  CHECK_THAT(run_hftrain("checkpoint inspect out", dir).output, Catch::Contains("has no manifest.json"));
  CHECK(run_hftrain("checkpoint inspect nowhere", dir).exit_code == 2);
}
