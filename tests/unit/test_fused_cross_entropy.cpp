// The fused cross-entropy kernel (kernels/cross_entropy.h) against float64 LibTorch, loss and gradient, on every
// instruction set this machine has; and the chunked LM loss (models/lm_loss) through it against its LibTorch-op path.
#include <catch2/catch.hpp>

#include <torch/torch.h>

#include <stdexcept>
#include <vector>

#include "kernels/cross_entropy.h"
#include "kernels/kernel_choice.h"
#include "models/lm_loss.h"
#include "util/error.h"

using namespace hftrain;

TEST_CASE("fused cross-entropy equals float64 log-softmax NLL with label smoothing, loss and gradient, on every ISA",
          "[unit][kernels]") {
  for (const std::string& isa : kernels::model_kernel_isas()) {
    kernels::set_model_kernel_isa(isa);
    for (const int64_t vocab : {1, 7, 16, 17, 37, 1003}) {
      for (const double epsilon : {0.0, 0.1}) {
        INFO(isa << " vocab " << vocab << " epsilon " << epsilon);
        torch::manual_seed(vocab);
        const int64_t rows = 6;
        auto z64 = torch::randn({rows, vocab}, torch::kDouble) * 6;
        z64[0] = z64[0] + 80;  // large logits: the max must be taken out
        auto labels = torch::randint(0, vocab, {rows}, torch::kLong);
        labels[2] = -100;  // ignored
        const double scale = 1.0 / 5;
        // float64 reference on the float32 logits.
        auto z = z64.to(torch::kFloat);
        auto zr = z.to(torch::kDouble);
        auto logp = torch::log_softmax(zr, 1);
        auto safe = labels.clamp_min(0).unsqueeze(1);
        auto nll = -logp.gather(1, safe).squeeze(1);
        auto smooth = -logp.mean(1);
        auto keep = labels.ne(-100).to(torch::kDouble);
        auto want_loss = ((1 - epsilon) * nll + epsilon * smooth) * keep;
        auto want_grad = (torch::softmax(zr, 1) - (1 - epsilon) * torch::one_hot(safe.squeeze(1), vocab).to(torch::kDouble) -
                          epsilon / static_cast<double>(vocab)) * scale * keep.unsqueeze(1);

        for (const bool gradient : {false, true}) {
          auto logits = z.clone();
          auto loss = torch::empty({rows});
          kernels::CrossEntropyRows p;
          p.logits = logits.data_ptr<float>();
          p.rows = rows;
          p.vocab = vocab;
          p.labels = labels.data_ptr<int64_t>();
          p.epsilon = static_cast<float>(epsilon);
          p.scale = static_cast<float>(scale);
          p.gradient = gradient;
          kernels::cross_entropy_rows(p, loss.data_ptr<float>());
          const auto loss_err = (loss.to(torch::kDouble) - want_loss).abs() - 1e-6 * want_loss.abs();
          CHECK(loss_err.max().item<double>() < 2e-6);
          if (gradient) {
            // float sums of up to 1003 terms: a few 1e-7 of the gradient's scale
            CHECK((logits.to(torch::kDouble) - want_grad).abs().max().item<double>() < 2e-6 * scale);
          } else {
            CHECK(torch::equal(logits, z));  // without the gradient the logits are left alone
          }
        }
      }
    }
  }
  kernels::set_model_kernel_isa("");
}

TEST_CASE("fused cross-entropy refuses a label outside the vocabulary, naming the row, before writing anything",
          "[unit][kernels]") {
  auto z = torch::randn({3, 10});
  const auto before = z.clone();
  auto labels = torch::tensor(std::vector<int64_t>{1, 10, 2});
  auto loss = torch::full({3}, 7.0f);
  kernels::CrossEntropyRows p;
  p.logits = z.data_ptr<float>();
  p.rows = 3;
  p.vocab = 10;
  p.labels = labels.data_ptr<int64_t>();
  p.gradient = true;
  CHECK_THROWS_AS(kernels::cross_entropy_rows(p, loss.data_ptr<float>()), std::out_of_range);
  CHECK_THROWS_WITH(kernels::cross_entropy_rows(p, loss.data_ptr<float>()),
                    Catch::Contains("row 1") && Catch::Contains("10") && Catch::Contains("[0, 10)"));
  CHECK(torch::equal(z, before));
  CHECK(torch::equal(loss, torch::full({3}, 7.0f)));
  // Through the LM loss: a clear runtime failure.
  auto h = torch::randn({3, 4}), w = torch::randn({10, 4});
  CHECK_THROWS_AS(linear_cross_entropy(h, w, torch::Tensor(), labels, 0.0, 0.0, 0), RuntimeFailure);
}

TEST_CASE("the chunked LM loss gives the same loss and gradients through the fused cross-entropy as through LibTorch's ops",
          "[unit][kernels][lm_loss]") {
  torch::manual_seed(9);
  auto h0 = torch::randn({2, 13, 24}), w0 = torch::randn({301, 24}) * 0.3, b0 = torch::randn({301});
  auto labels = torch::randint(0, 301, {2, 13}, torch::kLong);
  labels[0][3] = -100;
  auto run = [&](bool fused, double epsilon) {
    kernels::set_fused_kernels_enabled(fused);
    auto h = h0.clone().requires_grad_(true), w = w0.clone().requires_grad_(true), b = b0.clone().requires_grad_(true);
    auto loss = linear_cross_entropy(h, w, b, labels, epsilon, 0.0, 8);
    loss.backward();
    kernels::set_fused_kernels_enabled(true);
    return std::vector<torch::Tensor>{loss.detach(), h.grad(), w.grad(), b.grad()};
  };
  for (const double epsilon : {0.0, 0.1}) {
    INFO("epsilon " << epsilon);
    const auto fused = run(true, epsilon), ops = run(false, epsilon);
    for (std::size_t i = 0; i < fused.size(); ++i) {
      INFO("tensor " << i);
      const double tol = 2e-6 * std::max(1.0, ops[i].abs().max().item<double>());
      CHECK((fused[i] - ops[i]).abs().max().item<double>() <= tol);
    }
  }
}
