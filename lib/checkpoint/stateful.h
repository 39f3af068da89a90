// The save / load hooks of a run's stateful parts (the engine, the schedule, the data position, the
// trainer state, the RNG): a checkpoint is what each part adds, a resume what each part reads back, so the
// code that assembles, writes and commits a checkpoint never reaches into a part.
#pragma once

#include <string>
#include <utility>

#include "checkpoint/checkpoint_manager.h"
#include "checkpoint/checkpoint_reader.h"

namespace hftrain {

// The files the parts add to one checkpoint.
class CheckpointContents {
 public:
  // `per_rank`: every rank writes its own files into the checkpoint (data-parallel or sharded runs);
  // otherwise rank 0 writes them with the rest.
  explicit CheckpointContents(bool per_rank) : per_rank_(per_rank) {}
  // A file of the whole run, written once, by rank 0.
  void add(const std::string& name, std::string bytes) { shared_.emplace_back(name, std::move(bytes)); }
  // A file of this rank (e.g. its RNG state).
  void add_own(const std::string& name, std::string bytes) {
    (per_rank_ ? own_ : shared_).emplace_back(name, std::move(bytes));
  }
  bool per_rank() const { return per_rank_; }
  const CheckpointFiles& shared() const { return shared_; }
  const CheckpointFiles& own() const { return own_; }

 private:
  bool per_rank_;
  CheckpointFiles shared_, own_;
};

class Stateful {
 public:
  virtual ~Stateful() = default;
  // Adds this part's files; called on every rank.
  virtual void save(CheckpointContents& out) = 0;
  // Restores this part from a complete checkpoint; called on every rank (a part may communicate).
  virtual void load(const CheckpointReader& in) = 0;
};

}  // namespace hftrain
