// The rendezvous every worker passes before any work: rank 0 hosts the store (store.h) at the master
// address, or, under torchrun with TORCHELASTIC_USE_AGENT_STORE=True, the elastic agent already hosts a
// torch TCPStore there (torch_store.h) and nobody listens; every rank connects (retrying while node 0
// is not up yet), presents the job token (hftrain's store only) and publishes what it runs (hftrain
// version, world layout, the agreement facts: the resolved run spec flattened to keys and a
// fingerprint of the files it names). Rank 0 waits for every rank, saying
// what it waits for ("waiting for 1 of 2 nodes (node_rank 1) at 127.0.0.1:29611 — 10 s of 600 s") at
// 1 s and then every timeout/10 (1 to 10 s); at distributed.rendezvous_timeout it stops the job (exit 1)
// naming the nodes and ranks that never joined and the address they should reach. When every rank has
// joined, rank 0 compares them and stops the job (exit 2 on every rank) when a node runs another
// binary, layout or configuration, naming the node and the first differing keys with both values.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "distributed/store.h"

namespace hftrain {

struct DistEnv;
struct DistributedArgs;

using AgreementFacts = std::vector<std::pair<std::string, std::string>>;

struct RendezvousOptions {
  std::chrono::milliseconds timeout{std::chrono::seconds(600)};         // distributed.rendezvous_timeout
  std::chrono::milliseconds store_timeout{std::chrono::seconds(1800)};  // later store operations (ddp_timeout)
  std::string token;                                                     // "" = any client is accepted
  AgreementFacts facts;  // key -> value every rank must agree on (order irrelevant)
};

struct Rendezvous {
  std::shared_ptr<StoreServer> server;  // rank 0 of hftrain's own store only: keep it alive as long as the process group
  c10::intrusive_ptr<c10d::Store> store;  // a StoreClient, or a TorchStoreClient of torchrun's agent store
};

// Runs the rendezvous for this worker; throws RuntimeFailure (timeout, unreachable store) or ConfigError
// (ranks disagree). Only rank 0 and the local rank 0 of other nodes print the waiting lines.
Rendezvous rendezvous(const DistEnv& env, const RendezvousOptions& options);

// The options `hftrain train` uses: distributed.rendezvous_timeout, ddp_timeout for later store
// operations, the job token from the environment, and as facts the resolved run spec (YAML, flattened)
// plus a fingerprint of every file it names.
RendezvousOptions rendezvous_options_for(const DistributedArgs& args, const std::string& resolved_spec_yaml);

// Flattens a YAML document into "section.key" -> scalar pairs (sequence items as key[i]).
AgreementFacts flatten_yaml(const std::string& yaml_text);

// Adds "file:<key>" -> "<size> bytes, crc32c <hex>" for every fact whose value names an existing regular
// file, so nodes that read different contents under the same path disagree.
void add_file_fingerprints(AgreementFacts& facts);

}  // namespace hftrain
