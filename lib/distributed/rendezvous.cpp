// The rendezvous before any work: join, progress lines, timeout, agreement (see rendezvous.h).
#include "distributed/rendezvous.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sys/stat.h>
#include <thread>
#include <yaml-cpp/yaml.h>

#include "distributed/env.h"
#include "distributed/torch_store.h"
#include "log/logger.h"
#include "runspec/sections.h"
#include "util/error.h"
#include "util/version.h"

namespace hftrain {
namespace {

using Clock = std::chrono::steady_clock;
const std::string kJoinPrefix = "hftrain/rdzv/join/";
const std::string kVerdict = "hftrain/rdzv/verdict";
constexpr std::size_t kMaxListedKeys = 5;

double seconds(std::chrono::milliseconds d) { return static_cast<double>(d.count()) / 1000.0; }

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string join_ints(const std::vector<int>& v) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s;
}

uint64_t fnv1a(const char* p, std::size_t n, uint64_t h = 1469598103934665603ull) {
  for (std::size_t i = 0; i < n; ++i) h = (h ^ static_cast<unsigned char>(p[i])) * 1099511628211ull;
  return h;
}

std::string hex64(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string host_name() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "?";
  return buf;
}

// Which node a rank is on: the launcher, torchrun and SLURM (block distribution) number ranks node by node.
int node_of(int rank, const DistEnv& env) { return rank / std::max(1, env.local_world_size); }
int node_rank_of(const DistEnv& env) { return node_of(env.rank, env); }
std::string where_of(const DistEnv& env) { return env.master_addr + ":" + std::to_string(env.master_port); }
std::string who(int rank, const DistEnv& env) {
  return "node_rank " + std::to_string(node_of(rank, env)) + " (rank " + std::to_string(rank) + ")";
}

// Missing ranks grouped by node.
std::map<int, std::vector<int>> by_node(const std::vector<int>& ranks, const DistEnv& env) {
  std::map<int, std::vector<int>> out;
  for (int r : ranks) out[node_of(r, env)].push_back(r);
  return out;
}

std::string waiting_line(const std::vector<int>& missing, const DistEnv& env, double elapsed, double limit) {
  const auto nodes = by_node(missing, env);
  const int nnodes = (env.world_size + std::max(1, env.local_world_size) - 1) / std::max(1, env.local_world_size);
  std::vector<int> ids;
  for (const auto& kv : nodes) ids.push_back(kv.first);
  return "waiting for " + std::to_string(nodes.size()) + " of " + std::to_string(nnodes) + " node" +
         (nnodes == 1 ? "" : "s") + " (node_rank " + join_ints(ids) + ") at " + where_of(env) + " \xE2\x80\x94 " +
         std::to_string(static_cast<int>(elapsed)) + " s of " + num(limit) + " s";
}

std::string never_joined(const std::vector<int>& missing, const DistEnv& env, double limit) {
  std::string list;
  for (const auto& [node, ranks] : by_node(missing, env))
    list += (list.empty() ? "" : "; ") + std::string("node_rank ") + std::to_string(node) + " (rank" +
            (ranks.size() > 1 ? "s " : " ") + join_ints(ranks) + ")";
  const std::string start = env.agent_store ? "Start torchrun on every node with the same --nnodes, --master_addr " +
                                                  env.master_addr + " and --master_port " + std::to_string(env.master_port)
                                            : "Start every node with the same --nnodes, --master-addr " + env.master_addr +
                                                  " --master-port " + std::to_string(env.master_port) +
                                                  " and HFTRAIN_RDZV_TOKEN";
  return "rendezvous: " + list + " never joined at " + where_of(env) + " within distributed.rendezvous_timeout (" +
         num(limit) + " s). " + start + ", check that port " +
         std::to_string(env.master_port) + " of " + env.master_addr +
         " is reachable from every node, or raise distributed.rendezvous_timeout";
}

// Prints progress at 1 s, then every timeout/10 (1 to 10 s).
class Ticker {
 public:
  Ticker(Clock::time_point start, std::chrono::milliseconds timeout)
      : start_(start), interval_(std::clamp(seconds(timeout) / 10, 1.0, 10.0)) {}
  double elapsed() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }
  bool due() {
    const double t = elapsed();
    if (t < next_) return false;
    next_ = (next_ < interval_ ? interval_ : next_ + interval_);
    while (next_ <= t) next_ += interval_;
    return true;
  }

 private:
  Clock::time_point start_;
  double interval_;
  double next_ = 1.0;
};

nlohmann::json my_join_record(const DistEnv& env, const AgreementFacts& facts) {
  nlohmann::json f = nlohmann::json::object();
  for (const auto& [k, v] : facts) f[k] = v;
  const std::string dumped = f.dump();
  return {{"node_rank", node_rank_of(env)},
          {"host", host_name()},
          {"pid", static_cast<int>(::getpid())},
          {"version", version_text()},
          {"layout", std::to_string(env.world_size) + " workers, " + std::to_string(env.local_world_size) + " per node"},
          {"facts_hash", hex64(fnv1a(dumped.data(), dumped.size()))},
          {"facts", f}};
}

// A spec value as people write it: a number in its shortest text that reads back to the same double
// (the resolved spec prints doubles with 17 digits, e.g. 0.0030000000000000001); anything else unchanged.
std::string readable_value(const std::string& text) {
  char* end = nullptr;
  const double d = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || text.find_first_of(".eE") == std::string::npos) return text;
  char buf[40];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, d);
    if (std::strtod(buf, nullptr) == d) return buf;
  }
  return text;
}

// "" when `theirs` agrees with rank 0's record, else what differs (the first keys, with both values).
std::string disagreement(const nlohmann::json& mine, const nlohmann::json& theirs, int rank, const DistEnv& env) {
  const std::string a = " on " + who(0, env) + ", ", b = " on " + who(rank, env);
  for (const char* k : {"version", "layout"})
    if (mine[k] != theirs[k])
      return std::string(k == std::string("version") ? "hftrain binary" : "world layout") + ": '" +
             mine[k].get<std::string>() + "'" + a + "'" + theirs[k].get<std::string>() + "'" + b;
  if (mine["facts_hash"] == theirs["facts_hash"]) return "";
  std::set<std::string> keys;
  for (const auto& kv : mine["facts"].items()) keys.insert(kv.key());
  for (const auto& kv : theirs["facts"].items()) keys.insert(kv.key());
  std::vector<std::string> lines;
  for (const auto& k : keys) {
    auto value = [&](const nlohmann::json& rec) {
      return rec["facts"].contains(k) ? "'" + readable_value(rec["facts"][k].get<std::string>()) + "'" : std::string("(not set)");
    };
    if (value(mine) != value(theirs)) lines.push_back(k + ": " + value(mine) + a + value(theirs) + b);
  }
  std::string out = std::to_string(lines.size()) + " differing key" + (lines.size() == 1 ? "" : "s");
  for (std::size_t i = 0; i < lines.size() && i < kMaxListedKeys; ++i) out += "\n  " + lines[i];
  if (lines.size() > kMaxListedKeys) out += "\n  ...";
  return out;
}

void set_text(c10d::Store& store, const std::string& key, const std::string& value) {
  store.set(key, std::vector<uint8_t>(value.begin(), value.end()));
}

std::string get_text(c10d::Store& store, const std::string& key) {
  const std::vector<uint8_t> v = store.get(key);
  return std::string(v.begin(), v.end());
}

std::vector<int> missing_ranks(c10d::Store& store, int world_size) {
  std::vector<int> out;
  for (int r = 0; r < world_size; ++r)
    if (!store.check({kJoinPrefix + std::to_string(r)})) out.push_back(r);
  return out;
}

// Rank 0: every rank joined; compare them. Returns "" or the message every rank stops with.
std::string compare_ranks(c10d::Store& store, const DistEnv& env) {
  const auto mine = nlohmann::json::parse(get_text(store, kJoinPrefix + "0"));
  for (int r = 1; r < env.world_size; ++r) {
    const auto theirs = nlohmann::json::parse(get_text(store, kJoinPrefix + std::to_string(r)));
    const std::string diff = disagreement(mine, theirs, r, env);
    if (!diff.empty())
      return "rendezvous: " + who(r, env) + " (host " + theirs["host"].get<std::string>() +
             ") was started with another configuration than " + who(0, env) + "; the job stops before any work. " +
             diff;
  }
  return "";
}

// One attempt at the store: hftrain's own (rank 0 hosts it) or torchrun's agent store; nullptr while
// nothing listens there.
c10::intrusive_ptr<c10d::Store> connect_once(const DistEnv& env, const RendezvousOptions& o, std::string& error) {
  if (env.agent_store)
    return TorchStoreClient::connect(env.master_addr, env.master_port, env.restart_count, o.store_timeout, error);
  const std::string me = host_name() + " pid " + std::to_string(::getpid()) + " rank " + std::to_string(env.rank);
  return StoreClient::connect(env.master_addr, env.master_port, o.token, me, o.store_timeout, error);
}

std::string never_opened(const DistEnv& env, double limit, const std::string& error) {
  const std::string within = " within distributed.rendezvous_timeout (" + num(limit) + " s; last error: " + error + "). ";
  if (env.agent_store)
    return "rendezvous: torchrun's agent store at " + where_of(env) + " (TORCHELASTIC_USE_AGENT_STORE=True) never "
           "answered" + within + "The elastic agent of node 0 hosts it: start the workers through torchrun, and check "
           "that --master_addr / --master_port are reachable from this node";
  return "rendezvous: " + who(0, env) + " never opened the rendezvous at " + where_of(env) + within +
         "Start node 0 (--node-rank 0) with the same --master-addr and --master-port, and check that the port is "
         "reachable from this node";
}

c10::intrusive_ptr<c10d::Store> connect_with_retries(const DistEnv& env, const RendezvousOptions& o,
                                                     Clock::time_point start) {
  Ticker ticker(start, o.timeout);
  for (;;) {
    std::string error;
    auto client = connect_once(env, o, error);
    if (client) return client;
    if (ticker.elapsed() >= seconds(o.timeout)) throw RuntimeFailure(never_opened(env, seconds(o.timeout), error));
    if (env.local_rank == 0 && ticker.due())
      log_warning("waiting for " + std::string(env.agent_store ? "torchrun's agent store" : "node_rank 0 to open the rendezvous") +
                  " at " + where_of(env) + " (" + error + ") \xE2\x80\x94 " +
                  std::to_string(static_cast<int>(ticker.elapsed())) + " s of " + num(seconds(o.timeout)) + " s");
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

}  // namespace

AgreementFacts flatten_yaml(const std::string& yaml_text) {
  AgreementFacts out;
  std::function<void(const YAML::Node&, const std::string&)> walk = [&](const YAML::Node& n, const std::string& path) {
    if (n.IsMap()) {
      for (const auto& kv : n) walk(kv.second, path.empty() ? kv.first.Scalar() : path + "." + kv.first.Scalar());
    } else if (n.IsSequence()) {
      for (std::size_t i = 0; i < n.size(); ++i) walk(n[i], path + "[" + std::to_string(i) + "]");
    } else {
      out.emplace_back(path, n.IsNull() ? std::string("null") : n.Scalar());
    }
  };
  walk(YAML::Load(yaml_text), "");
  return out;
}

void add_file_fingerprints(AgreementFacts& facts) {
  AgreementFacts files;
  for (const auto& [key, value] : facts) {
    struct stat st {};
    if (value.empty() || ::stat(value.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    std::ifstream in(value, std::ios::binary);
    std::vector<char> buf(1 << 20);
    uint64_t h = 1469598103934665603ull, size = 0;
    while (in.read(buf.data(), static_cast<std::streamsize>(buf.size())) || in.gcount() > 0) {
      h = fnv1a(buf.data(), static_cast<std::size_t>(in.gcount()), h);
      size += static_cast<uint64_t>(in.gcount());
    }
    files.emplace_back("file:" + key, std::to_string(size) + " bytes, content hash " + hex64(h));
  }
  facts.insert(facts.end(), files.begin(), files.end());
}

RendezvousOptions rendezvous_options_for(const DistributedArgs& args, const std::string& resolved_spec_yaml) {
  RendezvousOptions o;
  o.timeout = std::chrono::seconds(args.rendezvous_timeout);
  o.store_timeout = std::chrono::seconds(args.ddp_timeout);
  o.token = job_token_from_env();
  o.facts = flatten_yaml(resolved_spec_yaml);
  add_file_fingerprints(o.facts);
  return o;
}

Rendezvous rendezvous(const DistEnv& env, const RendezvousOptions& o) {
  const auto start = Clock::now();
  const double limit = seconds(o.timeout);
  Rendezvous out;
  if (env.agent_store) {
    if (!o.token.empty() && env.local_rank == 0)
      log_info(std::string(kJobTokenVariable) + " is not used: torchrun's agent store (torch's TCPStore) takes no token");
  } else if (env.rank == 0) {
    out.server = std::make_shared<StoreServer>(env.master_addr, env.master_port, o.token);
    if (o.token.empty() && out.server->address().rfind("127.", 0) != 0 && out.server->address() != "::1")
      log_warning(std::string(kJobTokenVariable) + " is not set: any process that reaches " + where_of(env) +
                  " can join this job's rendezvous; export the same secret value on every node");
  }
  out.store = connect_with_retries(env, o, start);
  c10d::Store& store = *out.store;
  set_text(store, kJoinPrefix + std::to_string(env.rank), my_join_record(env, o.facts).dump());
  Ticker ticker(start, o.timeout);
  const bool reports = env.local_rank == 0;
  // Rank 0 decides; the others follow its verdict (a little later than rank 0's own deadline).
  const double deadline = env.rank == 0 ? limit : limit + 5.0;
  for (;;) {
    if (env.rank != 0 && store.check({kVerdict})) {
      const auto verdict = nlohmann::json::parse(get_text(store, kVerdict));
      if (verdict["ok"].get<bool>()) return out;
      const std::string msg = verdict["message"].get<std::string>() + " (reported by rank 0)";
      if (verdict["code"].get<int>() == 2) throw ConfigError(msg);
      throw RuntimeFailure(msg);
    }
    const std::vector<int> missing = missing_ranks(store, env.world_size);
    if (env.rank == 0 && missing.empty()) {
      const std::string diff = compare_ranks(store, env);
      set_text(store, kVerdict, nlohmann::json{{"ok", diff.empty()}, {"code", 2}, {"message", diff}}.dump());
      if (diff.empty()) {
        if (ticker.elapsed() >= 1.0)
          log_info("rendezvous: all " + std::to_string(env.world_size) + " workers joined at " + where_of(env) + " after " +
                   num(static_cast<int>(ticker.elapsed() * 10) / 10.0) + " s");
        return out;
      }
      std::this_thread::sleep_for(std::chrono::seconds(1));  // lets the other ranks read the verdict
      throw ConfigError(diff);
    }
    if (ticker.elapsed() >= deadline) {
      const std::string msg = missing.empty() ? "rendezvous: every rank joined at " + where_of(env) +
                                                    " but rank 0 gave no verdict within distributed.rendezvous_timeout"
                                              : never_joined(missing, env, limit);
      if (env.rank == 0) {
        set_text(store, kVerdict, nlohmann::json{{"ok", false}, {"code", 1}, {"message", msg}}.dump());
        std::this_thread::sleep_for(std::chrono::seconds(1));
      }
      throw RuntimeFailure(msg);
    }
    if (reports && !missing.empty() && ticker.due())
      log_warning(waiting_line(missing, env, ticker.elapsed(), limit));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace hftrain
