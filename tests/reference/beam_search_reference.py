#!/usr/bin/env python3
# Reference test for generation: HF-layout gpt2, llama and t5 directories with random weights (made with
# hf_family_cases.py's and t5_reference.py's writers), and a beam search written here from the
# description of HF generate()'s beam search (transformers v4.36-v4.49: BeamSearchScorer /
# BeamHypotheses), over this script's own float64 forward, recomputed from the whole sequence at every
# step (no KV cache). For t5 the prompt is the encoder's input and the searched sequences are decoder
# sequences that start with decoder_start_token_id, which takes the prompt's place in the rules below
# (HF's encoder-decoder generation). hftrain runs the same cases through generate_sequences (the hidden Catch2 case
# "[beam_ref]" of hftrain_unit_tests) and must return the same token sequences, best first, with scores
# within 1e-4. num_beams 1 cases compare greedy decoding. Exit 0 = agreement.
#
# The rules, as this script implements them:
#   scores   each step, per running beam: log_softmax of the next-token logits; tokens forbidden by
#            no_repeat_ngram_size (a token completing an n-gram already present in the beam, prompt
#            included) or min_new_tokens (eos before that many generated tokens) get -inf; plus the beam's
#            running total (the first step counts only beam 0: the others start at -1e9).
#   select   the 2 * num_beams best (total, beam, token) over all beams. Walking them best first: an eos
#            candidate among the first num_beams is offered as a finished hypothesis (tokens so far,
#            total, generated length = generated tokens + 1 for the eos); other candidates become the
#            next beams until num_beams are chosen.
#   keep     finished hypotheses score total / generated_length ** length_penalty; at most num_beams are
#            kept: a new one enters while fewer are kept or when it beats the worst; beyond num_beams the
#            lowest (earliest among equal) leaves.
#   stop     once num_beams are kept: early_stopping "true" stops at once; "false" when the worst kept
#            score >= best candidate total / (generated length after this step) ** length_penalty;
#            "never" the same, but with max_new_tokens as the length when length_penalty > 0. Otherwise at
#            prompt + max_new_tokens tokens, when every running beam is offered (length = its generated
#            tokens, no eos).
#   result   the num_return_sequences best kept, best first, equal scores: the later-offered first.
#   lengths  max_length, when given, replaces max_new_tokens: max_new_tokens = max_length - prompt length
#            (positive in every case); min_length forbids eos while the sequence (prompt included) is shorter; forced_bos
#            makes a sequence of length 1 continue with that token only, forced_eos the sequence one token
#            short of prompt + max_new_tokens: every other token gets -inf and the forced one log-probability
#            0 (HF's ForcedBOS / ForcedEOS processors replace the scores).
import json
import os
import sys

try:
    import torch
except ImportError:
    sys.exit("beam_search_reference: this Python (%s) cannot import torch; configure with "
             "-DHFTRAIN_REFERENCE_PYTHON=/path/to/python3" % sys.executable)

from hf_family_cases import gpt2_case, llama_case  # noqa: E402
from hf_family_forwards import gpt2_forward, llama_forward  # noqa: E402
from hf_reference_harness import run_hftrain_side, write_model_dir  # noqa: E402
from t5_reference import t5_config, t5_forward_decoder_ids, t5_weights  # noqa: E402

NEG_INF = float("-inf")


def make_logprobs(forward, cfg, W, max_context):
    """Next-token log-probabilities (float64) for a list of equally long token lists."""
    def logprobs(seqs):
        ids = torch.tensor(seqs, dtype=torch.int64)
        if max_context and ids.shape[1] > max_context:
            ids = ids[:, -max_context:]  # hftrain's sliding window: the last max_context tokens, positions from 0
        logits = forward(cfg, W, ids, None)[:, -1, :]
        return torch.log_softmax(logits, -1)
    return logprobs


def make_t5_logprobs(cfg, W, source):
    """Next-token log-probabilities (float64) of decoder sequences, the encoder reading `source`."""
    def logprobs(seqs):
        dec = torch.tensor(seqs, dtype=torch.int64)
        ids = torch.tensor([source] * len(seqs), dtype=torch.int64)
        return torch.log_softmax(t5_forward_decoder_ids(cfg, W, ids, None, dec)[:, -1, :], -1)
    return logprobs


def banned_tokens(seq, prompt_len, s):
    out = set()
    n = s["no_repeat_ngram_size"]
    if n > 0 and len(seq) >= n - 1:
        tail = seq[len(seq) - (n - 1):] if n > 1 else []
        for start in range(len(seq) - n + 1):
            if seq[start:start + n - 1] == tail:
                out.add(seq[start + n - 1])
    if s["eos"] is not None and len(seq) - prompt_len < s["min_new_tokens"]:
        out.add(s["eos"])
    if s["eos"] is not None and s["min_length"] is not None and len(seq) < s["min_length"]:
        out.add(s["eos"])
    return out


def new_token_budget(s, prompt_len):
    return s["max_new_tokens"] if s["max_length"] is None else s["max_length"] - prompt_len  # the cases keep it > 0


def processed(lp, seq, prompt_len, s):
    """The log-probabilities [V] of the next token after HF's processors."""
    lp = lp.clone()
    for t in banned_tokens(seq, prompt_len, s):
        lp[t] = NEG_INF
    forced = None
    if s["forced_bos"] is not None and len(seq) == 1:
        forced = s["forced_bos"]
    if s["forced_eos"] is not None and len(seq) == prompt_len + new_token_budget(s, prompt_len) - 1:
        forced = s["forced_eos"]
    if forced is not None:
        lp.fill_(NEG_INF)
        lp[forced] = 0.0
    return lp


def greedy(logprobs, prompt, s):
    seq = list(prompt)
    for _ in range(new_token_budget(s, len(prompt))):
        lp = processed(logprobs([seq])[0], seq, len(prompt), s)
        tok = int(lp.argmax())
        seq.append(tok)
        if s["eos"] is not None and tok == s["eos"]:
            break
    return [{"tokens": seq[len(prompt):], "score": 0.0}]


def beam_search(logprobs, prompt, s):
    nb, alpha, mode, eos = s["num_beams"], s["length_penalty"], s["early_stopping"], s["eos"]
    P = len(prompt)
    max_new = new_token_budget(s, P)
    beams = [(0.0 if b == 0 else -1e9, list(prompt)) for b in range(nb)]
    kept = []  # [score, generated tokens, ...] in the order offered (removals keep the order)
    state = {"worst": 1e9}

    def offer(total, seq, generated_len, with_eos):
        score = total / (generated_len ** alpha)
        if len(kept) < nb or score > state["worst"]:
            kept.append((score, seq[P:] + ([eos] if with_eos else [])))
            if len(kept) > nb:
                ranked = sorted(range(len(kept)), key=lambda k: (kept[k][0], k))
                state["worst"] = kept[ranked[1]][0]
                del kept[ranked[0]]
            else:
                state["worst"] = min(state["worst"], score)

    stopped = False
    while True:
        lps = logprobs([seq for _, seq in beams])
        vocab = lps.shape[1]
        candidates = []
        for b, (total, seq) in enumerate(beams):
            row = processed(lps[b], seq, P, s).tolist()
            for t in range(vocab):
                candidates.append((total + row[t], b, t))
        candidates.sort(key=lambda c: -c[0])
        candidates = candidates[:2 * nb]
        following = []
        generated_after_step = len(beams[0][1]) + 1 - P
        for rank, (total, b, t) in enumerate(candidates):
            if eos is not None and t == eos:
                if rank < nb:
                    offer(total, beams[b][1], generated_after_step, True)
            else:
                following.append((total, beams[b][1] + [t]))
            if len(following) == nb:
                break
        if len(kept) >= nb:
            best = candidates[0][0]
            if mode == "true":
                stopped = True
            else:
                length = max_new if (mode == "never" and alpha > 0) else generated_after_step
                stopped = state["worst"] >= best / (length ** alpha)
        beams = following
        if stopped or len(beams[0][1]) >= P + max_new:
            break
    if not stopped:
        for total, seq in beams:
            offer(total, seq, len(seq) - P, False)
    order = sorted(range(len(kept)), key=lambda k: (kept[k][0], k), reverse=True)
    return [{"tokens": kept[k][1], "score": kept[k][0]} for k in order[:s["num_return_sequences"]]]


def generate(logprobs, prompt, s):
    return greedy(logprobs, prompt, s) if s["num_beams"] == 1 else beam_search(logprobs, prompt, s)


def settings(**kw):
    s = {"max_new_tokens": 8, "num_beams": 1, "length_penalty": 1.0, "early_stopping": "false",
         "no_repeat_ngram_size": 0, "num_return_sequences": 1, "min_new_tokens": 0, "eos": None, "max_context": 0,
         "max_length": None, "min_length": None, "forced_bos": None, "forced_eos": None}
    s.update(kw)
    return s


def make_cases(root):
    gen = torch.Generator().manual_seed(4321)
    models = {}
    cfg, W, ft = gpt2_case(gen, prefix=True, extra_buffers=False)
    write_model_dir(os.path.join(root, "gpt2"), cfg, ft)
    models["gpt2"] = (gpt2_forward, cfg, W)
    cfg, W = llama_case(gen, tie=False, kv_heads=2, theta=10000.0)
    write_model_dir(os.path.join(root, "llama"), cfg, W)
    models["llama"] = (llama_forward, cfg, W)
    # t5: gated-gelu, untied head, 2 encoder / 3 decoder blocks
    cfg = t5_config(feed_forward_proj="gated-gelu", tie_word_embeddings=False, relative_attention_num_buckets=16,
                    relative_attention_max_distance=20)
    W = t5_weights(gen, cfg)
    write_model_dir(os.path.join(root, "t5"), cfg, W)
    models["t5"] = (None, cfg, W)

    def searcher(model, prompt, max_context):
        """(logprobs, the searched sequences' prompt): the decoder start token for t5."""
        forward, cfg, W = models[model]
        if forward is None:
            return make_t5_logprobs(cfg, W, prompt), [cfg["decoder_start_token_id"]]
        return make_logprobs(forward, cfg, W, max_context), prompt

    cases = []
    for model, (_, cfg, _) in models.items():
        V = cfg["vocab_size"]
        for p in range(4):
            prompt = torch.randint(3, V, (4 + p,), generator=gen).tolist()
            lp, start = searcher(model, prompt, 0)
            # eos candidates that beam search meets: the greedy token at step 2 (greedy stops there), the
            # runner-up at step 3 (a beam finishes while others go on), and the token greedy decoding
            # repeats most (likely in many contexts: many hypotheses finish).
            path = greedy(lp, start, settings())[0]["tokens"]
            step3 = lp([start + path[:2]])[0]
            runner_up = int(step3.topk(2).indices[1])
            early_eos = path[1]
            frequent = max(path, key=path.count)
            variants = [
                ("greedy", settings()),
                ("greedy_eos_ngram_min", settings(eos=early_eos, no_repeat_ngram_size=2, min_new_tokens=3)),
                ("b2_eos", settings(num_beams=2, eos=runner_up)),
                ("b4_true_ret4", settings(num_beams=4, early_stopping="true", eos=frequent, num_return_sequences=4)),
                ("b4_false_ret4", settings(num_beams=4, early_stopping="false", eos=frequent, num_return_sequences=4)),
                ("b4_never_ret4", settings(num_beams=4, early_stopping="never", eos=frequent, num_return_sequences=4)),
                ("b3_true_lp2_ret3", settings(num_beams=3, early_stopping="true", length_penalty=2.0, eos=runner_up,
                                              num_return_sequences=3, max_new_tokens=10)),
                ("b3_false_lp2_ret3", settings(num_beams=3, early_stopping="false", length_penalty=2.0, eos=runner_up,
                                               num_return_sequences=3, max_new_tokens=10)),
                ("b3_never_lp2_ret3", settings(num_beams=3, early_stopping="never", length_penalty=2.0, eos=runner_up,
                                               num_return_sequences=3, max_new_tokens=10)),
                ("b2_true_early_ret2", settings(num_beams=2, early_stopping="true", eos=early_eos, num_return_sequences=2,
                                                max_new_tokens=10)),
                ("b2_false_early_ret2", settings(num_beams=2, early_stopping="false", eos=early_eos,
                                                 num_return_sequences=2, max_new_tokens=10)),
                ("b2_never_early_ret2", settings(num_beams=2, early_stopping="never", eos=early_eos,
                                                 num_return_sequences=2, max_new_tokens=10)),
                ("b3_true_freq_ret3", settings(num_beams=3, early_stopping="true", eos=frequent, num_return_sequences=3,
                                               max_new_tokens=10)),
                ("b3_false_freq_ret3", settings(num_beams=3, early_stopping="false", eos=frequent,
                                                num_return_sequences=3, max_new_tokens=10)),
                ("b3_never_freq_ret3", settings(num_beams=3, early_stopping="never", eos=frequent,
                                                num_return_sequences=3, max_new_tokens=10)),
                ("b2_true_lp05", settings(num_beams=2, early_stopping="true", length_penalty=0.5, eos=frequent)),
                ("b2_false_lp05", settings(num_beams=2, early_stopping="false", length_penalty=0.5, eos=frequent)),
                ("b2_never_lp05", settings(num_beams=2, early_stopping="never", length_penalty=0.5, eos=frequent)),
                ("b3_never_lp2", settings(num_beams=3, early_stopping="never", length_penalty=2.0, eos=frequent)),
                ("b3_false_lp2", settings(num_beams=3, early_stopping="false", length_penalty=2.0, eos=frequent)),
                ("b3_never_lpneg", settings(num_beams=3, early_stopping="never", length_penalty=-1.0, eos=runner_up)),
                ("b3_lp0_early", settings(num_beams=3, length_penalty=0.0, eos=early_eos, num_return_sequences=3)),
                ("b4_ngram2_ret4", settings(num_beams=4, no_repeat_ngram_size=2, eos=frequent, num_return_sequences=4,
                                            max_new_tokens=10)),
                ("b3_ngram1", settings(num_beams=3, no_repeat_ngram_size=1, max_new_tokens=6)),
                ("b3_min_new", settings(num_beams=3, min_new_tokens=5, eos=frequent, num_return_sequences=2)),
                ("b2_no_eos_ret2", settings(num_beams=2, num_return_sequences=2, max_new_tokens=6)),
                ("b3_window", settings(num_beams=3, eos=frequent, max_context=7, max_new_tokens=9,
                                       num_return_sequences=2)),
                # HF max_length / min_length count the prompt (the decoder start token for t5).
                ("greedy_max_length", settings(max_length=len(start) + 5, max_new_tokens=50)),
                ("b3_max_min_length", settings(num_beams=3, max_length=len(start) + 9, min_length=len(start) + 6,
                                               eos=frequent, num_return_sequences=2)),
                # Forced tokens: the start token's successor (a one-token start: t5's decoder) and the last.
                ("greedy_forced", settings(forced_bos=runner_up, forced_eos=early_eos, max_new_tokens=6)),
                ("b3_forced_ret3", settings(num_beams=3, forced_bos=runner_up, forced_eos=frequent, eos=frequent,
                                            max_new_tokens=7, num_return_sequences=3)),
                ("b2_forced_eos_never", settings(num_beams=2, forced_eos=early_eos, eos=early_eos,
                                                 early_stopping="never", length_penalty=2.0, max_length=len(start) + 6)),
            ]
            for name, s in variants:
                lp, start = searcher(model, prompt, s["max_context"])
                expected = generate(lp, start, s)
                cases.append(dict(s, name="%s_p%d_%s" % (model, p, name), model=model, prompt=prompt,
                                  expected=expected))
    return cases


def main():
    root, cases, r = run_hftrain_side("beam_search", make_cases,
                                      lambda cases: [{k: v for k, v in c.items() if k != "expected"} for c in cases],
                                      "HFTRAIN_BEAM_REFERENCE_DIR", "[beam_ref]", 4000)
    if r.returncode != 0:
        print("FAILED: hftrain side exited %d" % r.returncode)
        return 1
    with open(os.path.join(root, "hftrain_results.json")) as f:
        got = json.load(f)
    failures = []
    finished_by_eos = differing_settings = 0
    by_prompt = {}
    for c in cases:
        mine, theirs = c["expected"], got.get(c["name"])
        finished_by_eos += sum(1 for h in mine if c["eos"] is not None and h["tokens"][-1:] == [c["eos"]])
        by_prompt.setdefault((c["model"], tuple(c["prompt"])), set()).add(json.dumps([h["tokens"] for h in mine]))
        if theirs is None:
            failures.append("%s: no hftrain result" % c["name"])
            continue
        if [h["tokens"] for h in theirs] != [h["tokens"] for h in mine]:
            failures.append("%s: sequences differ:\n    hftrain   %s\n    reference %s" % (
                c["name"], [h["tokens"] for h in theirs], [h["tokens"] for h in mine]))
            continue
        if c["num_beams"] > 1:
            for a, b in zip(theirs, mine):
                if abs(a["score"] - b["score"]) > 1e-4 * max(1.0, abs(b["score"])):
                    failures.append("%s: score %.8f, reference %.8f" % (c["name"], a["score"], b["score"]))
        print("%-34s ok  %s" % (c["name"], " | ".join("%s %.4f" % (h["tokens"], h["score"]) for h in mine)))
    differing_settings = sum(len(v) for v in by_prompt.values())
    # Each early_stopping mode must decide some case differently from the others.
    results = {c["name"]: json.dumps([h["tokens"] for h in c["expected"]]) for c in cases}
    mode_differences = {("true", "false"): 0, ("false", "never"): 0}
    for name in results:
        if "_false_" in name:
            for a, b in mode_differences:
                other = name.replace("_false_", "_%s_" % (a if b == "false" else b))
                if other in results and results[other] != results[name]:
                    mode_differences[(a, b)] += 1
    for (a, b), n in mode_differences.items():
        if n == 0:
            failures.append("no case where early_stopping %s and %s give different results" % (a, b))
    # The cases must exercise what they claim: hypotheses that end with eos, and settings that change the result.
    if finished_by_eos < 10:
        failures.append("only %d returned hypotheses end with eos: the cases do not exercise eos" % finished_by_eos)
    # Forced tokens must show: t5's first generated token is forced_bos (its decoder starts with one token),
    # and every hypothesis that reached the length limit ends with forced_eos.
    for c in cases:
        if c["forced_bos"] is not None and c["model"] == "t5":
            if any(h["tokens"][:1] != [c["forced_bos"]] for h in c["expected"]):
                failures.append("%s: a hypothesis does not start with forced_bos" % c["name"])
        if c["forced_eos"] is not None:
            start_len = 1 if c["model"] == "t5" else len(c["prompt"])
            limit = new_token_budget(c, start_len)
            if any(len(h["tokens"]) == limit and h["tokens"][-1] != c["forced_eos"] for h in c["expected"]):
                failures.append("%s: a hypothesis at the length limit does not end with forced_eos" % c["name"])
    if differing_settings < 3 * len(by_prompt):
        failures.append("the settings produce only %d distinct results over %d prompts" % (differing_settings,
                                                                                          len(by_prompt)))
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        return 1
    print("beam_search_reference: %d cases agree (%d returned hypotheses end with eos, %d distinct results, "
          "early_stopping true/false differ in %d cases, false/never in %d)" % (
              len(cases), finished_by_eos, differing_settings, mode_differences[("true", "false")],
              mode_differences[("false", "never")]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
