// Device selection through the real binary on a build without CUDA: `--nproc-per-node auto` (and the
// spec's `nproc_per_node: auto`) starts one worker and says why, the run-start block names the device,
// workers report theirs to rank 0, `distributed.backend: nccl` is refused, and `auto` is taken by
// `hftrain estimate` and refused by name by `checkpoint convert`.
#include <catch2/catch.hpp>

#include <iostream>

#include "test_dist_helpers.h"
#include "util/torch_compat.h"

using namespace hftrain_test;

namespace {

bool skip_on_cuda_build() {
  if (!hftrain::kCudaBuild) return false;
  std::cout << "HFTRAIN_TEST_SKIPPED: this build's LibTorch has CUDA; the CPU-build behaviour is checked elsewhere"
            << std::endl;
  return true;
}

}  // namespace

TEST_CASE("gpu devices: nproc-per-node auto on a CPU build runs one worker and logs why", "[integration][dist]") {
  if (skip_on_cuda_build()) return;
  const std::string dir = dist_dir("gpu_auto");
  write_text(dir + "/spec.yaml", dist_spec(2));
  CliResult r = run_hftrain("train spec.yaml --nproc-per-node auto", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("distributed.nproc_per_node auto: 1 worker: this build's LibTorch has no CUDA"));
  CHECK_THAT(r.output, Catch::Contains("World size = 1"));
  CHECK_THAT(r.output, Catch::Contains("Device = cpu, "));
  CHECK_THAT(r.output, !Catch::Contains("[rank 1]"));
  // The saved spec records the number the run used.
  CHECK_THAT(read_text(dir + "/out/run_spec.yaml"), Catch::Contains("nproc_per_node: 1"));

  // The spec's own `auto`, with use_cpu: the same single worker (a build without CUDA is the first reason).
  r = run_hftrain("train spec.yaml --set distributed.nproc_per_node=auto --set training.use_cpu=true "
                  "--set training.output_dir=out2",
                  dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("distributed.nproc_per_node auto: 1 worker: this build's LibTorch has no CUDA"));
}

TEST_CASE("gpu devices: two CPU workers report their device to the run-start block", "[integration][dist]") {
  const std::string dir = dist_dir("gpu_two_cpu");
  write_text(dir + "/spec.yaml", dist_spec(2, "  use_cpu: true\n"));
  CliResult r = run_hftrain("train spec.yaml --nproc-per-node 2", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("World size = 2"));
  CHECK_THAT(r.output, Catch::Contains("Device = cpu, "));  // every rank said cpu
}

TEST_CASE("gpu devices: backend nccl is refused clearly on a CPU build", "[integration][dist]") {
  if (skip_on_cuda_build()) return;
  const std::string dir = dist_dir("gpu_nccl");
  write_text(dir + "/spec.yaml", dist_spec(2) + "distributed: {backend: nccl}\n");
  CliResult r = run_hftrain("train spec.yaml", dir);
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("distributed.backend") && Catch::Contains("nccl needs CUDA") &&
                           Catch::Contains("use gloo (or auto)"));
  CHECK_FALSE(std::filesystem::exists(dir + "/out"));
  r = run_hftrain("train spec.yaml --nproc-per-node 2", dir);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("nccl needs CUDA"));
}

TEST_CASE("gpu devices: estimate takes nproc-per-node auto, convert and bad counts are refused", "[integration][dist]") {
  if (skip_on_cuda_build()) return;
  const std::string dir = dist_dir("gpu_estimate");
  write_text(dir + "/spec.yaml", dist_spec(2));
  CliResult r = run_hftrain("estimate spec.yaml --nproc-per-node auto", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("distributed.nproc_per_node auto: 1 worker"));
  CHECK_THAT(r.output, Catch::Contains("workers: 1 (1 per node"));
  r = run_hftrain("estimate spec.yaml --set distributed.nproc_per_node=auto --nnodes 2", dir);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("workers: 2 (1 per node x 2 nodes"));

  r = run_hftrain("checkpoint convert out/checkpoint-2 --nproc-per-node auto --stage 1 w", dir);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("auto is not accepted here") && Catch::Contains("give the number of workers"));
  r = run_hftrain("train spec.yaml --nproc-per-node 0", dir);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("not a positive number of workers or auto"));
  r = run_hftrain("train spec.yaml --set distributed.nproc_per_node=gpu", dir);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("distributed.nproc_per_node") && Catch::Contains("expected integer or auto"));
  r = run_hftrain("train spec.yaml --set distributed.nproc_per_node=0", dir);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("must be >= 1 or auto, got 0"));
}
