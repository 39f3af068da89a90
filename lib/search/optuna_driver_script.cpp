// The Python side of the Optuna driver (optuna_driver.h), kept in the binary so that hftrain needs no file
// beside it: a loop that reads one JSON request per line on stdin and writes one JSON answer per line on
// stdout, calling Optuna's own API (create_study / ask / report / should_prune / tell / best_trial). No
// search algorithm is written here: sampling, pruning and storage are Optuna's.
#include "search/optuna_driver.h"

namespace hftrain {

const char* const kOptunaDriverScript = R"PY(
import json, math, os, signal, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for hftrain search, which tells us what to do
try:
    import optuna
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
    from optuna.trial import TrialState
    if not sys.stderr.isatty() or os.environ.get("NO_COLOR"):  # Optuna's handler always writes colour codes
        import logging
        optuna.logging.disable_default_handler()
        plain = logging.StreamHandler(sys.stderr)
        plain.setFormatter(logging.Formatter("[%(levelname)1.1s %(asctime)s] %(message)s"))
        logging.getLogger("optuna").addHandler(plain)
except Exception as e:  # reported on the first request
    optuna = None
    import_error = "%s: %s" % (type(e).__name__, e)

class ConfigProblem(Exception):
    pass

study = None
trials = {}  # number -> optuna.trial.Trial asked by this process

def make_sampler(s):
    kind = s.get("type", "tpe")
    if kind == "tpe":
        kw = {"seed": s.get("seed")}
        if "n_startup_trials" in s:
            kw["n_startup_trials"] = s["n_startup_trials"]
        return optuna.samplers.TPESampler(**kw)
    if kind == "random":
        return optuna.samplers.RandomSampler(seed=s.get("seed"))
    if kind == "cmaes":
        kw = {"seed": s.get("seed")}
        if "n_startup_trials" in s:
            kw["n_startup_trials"] = s["n_startup_trials"]
        return optuna.samplers.CmaEsSampler(**kw)
    raise ConfigProblem("unknown sampler " + kind)

def make_pruner(p):
    kind = p.get("type", "median")
    opts = {k: v for k, v in p.items() if k != "type"}
    if kind == "median":
        return optuna.pruners.MedianPruner(**opts)
    if kind == "hyperband":
        return optuna.pruners.HyperbandPruner(**opts)
    if kind == "successive_halving":
        return optuna.pruners.SuccessiveHalvingPruner(**opts)
    if kind == "none":
        return optuna.pruners.NopPruner()
    raise ConfigProblem("unknown pruner " + kind)

def sqlite_storage(url):
    # Processes that start together may each find the file without tables and create them: the loser's
    # CREATE TABLE fails ("already exists"), or its INSERT of the schema version does ("UNIQUE constraint
    # failed: alembic_version..."). Trying again finds the tables and the version made.
    races = ("already exists", "UNIQUE constraint failed", "database is locked")
    for attempt in range(8):
        try:
            return optuna.storages.RDBStorage(url, engine_kwargs={"connect_args": {"timeout": 60}})
        except Exception as e:
            if attempt == 7 or not any(r in str(e) for r in races):
                raise
            time.sleep(0.2 * (attempt + 1))

def distribution(d):
    if d["type"] == "float":
        return FloatDistribution(d["low"], d["high"], log=d["log"], step=d["step"])
    if d["type"] == "int":
        return IntDistribution(d["low"], d["high"], log=d["log"], step=d["step"])
    return CategoricalDistribution(d["choices"])

def number_or_none(v):
    return None if v is None or (isinstance(v, float) and not math.isfinite(v)) else v

def describe(t):
    return {"number": t.number, "state": t.state.name, "value": number_or_none(t.value), "params": t.params,
            "user_attrs": t.user_attrs, "intermediate_values": {str(k): number_or_none(v) for k, v in t.intermediate_values.items()}}

def handle(r):
    global study
    op = r["op"]
    if op == "open":
        storage = r["storage"]
        try:
            if storage.startswith("sqlite:"):  # several processes share one file: wait for its lock
                storage = sqlite_storage(storage)
            study = optuna.create_study(storage=storage, study_name=r["study_name"], direction=r["direction"],
                                        sampler=make_sampler(r["sampler"]), pruner=make_pruner(r["pruner"]),
                                        load_if_exists=True)
        except Exception as e:  # a bad storage URL, a missing database driver, ...
            raise ConfigProblem("storage %s, study %s: %s: %s" % (r["storage"], r["study_name"], type(e).__name__, e))
        direction = study.direction.name.lower()
        if direction != r["direction"]:
            raise ConfigProblem("study '%s' in %s optimizes in direction %s, not %s" %
                                (r["study_name"], r["storage"], direction, r["direction"]))
        return {"study_name": study.study_name, "trials": len(study.trials), "optuna": optuna.__version__}
    if op == "ask":
        t = study.ask({d["name"]: distribution(d) for d in r["space"]})
        trials[t.number] = t
        return {"number": t.number, "params": t.params}
    if op == "report":
        t = trials[r["number"]]
        t.report(r["value"], r["step"])
        return {"should_prune": bool(t.should_prune())}
    if op == "tell":
        t = trials.pop(r["number"])
        for k, v in r.get("attrs", {}).items():
            t.set_user_attr(k, v)
        state = {"complete": TrialState.COMPLETE, "pruned": TrialState.PRUNED, "fail": TrialState.FAIL}[r["state"]]
        frozen = study.tell(t, r.get("value") if state == TrialState.COMPLETE else None, state=state)
        return {"state": frozen.state.name, "value": number_or_none(frozen.value)}
    if op == "trials":
        return {"trials": [describe(t) for t in study.trials]}
    if op == "best":
        try:
            return {"best": describe(study.best_trial)}
        except ValueError:
            return {"best": None}
    raise ValueError("unknown request " + op)

for line in sys.stdin:
    try:
        if optuna is None:
            raise ConfigProblem("cannot import optuna with %s (%s); install python3-optuna" % (sys.executable, import_error))
        answer = {"ok": True, "result": handle(json.loads(line))}
    except ConfigProblem as e:
        answer = {"ok": False, "config": True, "error": str(e)}
    except Exception as e:
        answer = {"ok": False, "config": False, "error": "%s: %s" % (type(e).__name__, e)}
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()
)PY";

}  // namespace hftrain
