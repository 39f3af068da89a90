#!/usr/bin/env python3
# Reference test for ROUGE's stemmer: hftrain's porter_stem against NLTK's PorterStemmer in its default
# mode (NLTK_EXTENSIONS), which is what Google's rouge_score applies to tokens longer than 3 characters
# when use_stemmer is true (HF run_summarization.py's setting). The words are generated here: the
# examples of Porter's paper, a cross product of stems and suffixes that reaches every rule of every
# step, the irregular forms NLTK keeps, and seeded random letter-and-digit strings. hftrain stems the same
# words (the hidden Catch2 case "[porter_ref]") and every stem must be identical. Needs python3-nltk.
# Exit 0 = agreement.
import argparse
import json
import os
import random
import shutil
import subprocess
import sys

try:
    from nltk.stem import porter
except ImportError:
    sys.exit("porter_reference: this Python (%s) cannot import nltk (Debian: python3-nltk, installed by "
             "scripts/install-deps.sh)" % sys.executable)

PAPER = ("caresses ponies ties caress cats feed agreed plastered bled motoring sing conflated troubled sized "
         "hopping tanned falling hissing fizzed failing filing happy sky relational conditional rational "
         "valenci hesitanci digitizer conformabli radicalli differentli vileli analogousli vietnamization "
         "predication operator feudalism decisiveness hopefulness callousness formaliti sensitiviti "
         "sensibiliti triplicate formative formalize electriciti electrical hopeful goodness revival "
         "allowance inference airliner gyroscopic adjustable defensible irritant replacement adjustment "
         "dependent adoption homologou communism activate angulariti homologous effective bowdlerize "
         "probate rate cease controll roll generalization oscillators").split()

STEMS = ["relat", "condit", "ration", "valen", "hesit", "digit", "conform", "radic", "differ", "vile", "analog",
         "predic", "oper", "feud", "decis", "hope", "gener", "sens", "electr", "form", "triplic", "good", "revi",
         "allow", "infer", "airlin", "gyroscop", "adjust", "depend", "adopt", "homolog", "commun", "activ",
         "bowdler", "control", "roll", "bell", "cease", "rat", "dy", "ly", "ti", "happ", "agre", "plaster", "motor",
         "sing", "conflat", "troubl", "siz", "hop", "tann", "fall", "hiss", "fizz", "fail", "fil", "cri", "spi",
         "geo", "archaeo", "philo", "theo", "fuel", "ski", "new", "inn", "out", "cann", "proce", "exce", "succe",
         "a", "e", "i", "o", "u", "y", "by", "boy", "toy", "say", "play", "sy", "syzyg", "rhythm", "crwth", "ow",
         "ox", "ax", "ab", "ad", "el", "ill", "odd", "egg", "err", "ebb", "add", "tax", "fix", "mow", "sew",
         "caress", "pony", "agree", "feed", "bleed", "need", "speed", "knowledg", "emerg", "mak", "tak", "us"]
SUFFIXES = ["", "s", "es", "ies", "ied", "ed", "eed", "ing", "ings", "ly", "ally", "alli", "li", "bli", "abli",
            "entli", "eli", "ousli", "fulli", "ation", "ational", "tional", "ations", "ness", "ful", "fully",
            "fulness", "ousness", "iveness", "ability", "ibility", "biliti", "aliti", "iviti", "iciti", "ible",
            "able", "ment", "ement", "ent", "ence", "enci", "ance", "anci", "ize", "izer", "ization", "ism",
            "alism", "ist", "ity", "iti", "ate", "ative", "alize", "icate", "ical", "ic", "er", "ator", "ous",
            "ously", "ou", "ive", "ion", "ions", "sion", "tion", "al", "y", "e", "ll", "logi", "logy", "at", "bl",
            "iz", "ant", "ing", "ed"]
IRREGULAR = "sky skies dying lying tying news innings inning outings outing cannings canning howe proceed exceed succeed".split()


def words():
    out = set(PAPER) | set(IRREGULAR)
    for stem in STEMS:
        for suffix in SUFFIXES:
            out.add(stem + suffix)
            for second in ("s", "ed", "ing", "ly", "ness", "al", "e"):
                out.add(stem + suffix + second)
    rng = random.Random(1980)
    letters = "aeiouybcdfghjklmnpqrstvwxz"
    weights = [6, 6, 6, 6, 4, 4] + [2] * 20
    for _ in range(20000):
        n = rng.randint(1, 14)
        out.add("".join(rng.choices(letters, weights=weights, k=n)))
    for _ in range(500):  # rouge_score's tokens are [a-z0-9]+: digits stem as consonants
        out.add("".join(rng.choices(letters + "0123456789", k=rng.randint(3, 9))))
    return sorted(w for w in out if w)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tests", required=True, help="the hftrain_unit_tests binary")
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    root = os.path.abspath(os.path.join(args.workdir, "porter"))
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    ws = words()
    with open(os.path.join(root, "words.txt"), "w") as f:
        f.write("\n".join(ws) + "\n")
    r = subprocess.run([args.tests, "[porter_ref]"], env=dict(os.environ, HFTRAIN_PORTER_REFERENCE_DIR=root),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    print(r.stdout[-3000:])
    if r.returncode != 0:
        print("FAILED: hftrain side exited %d" % r.returncode)
        return 1
    with open(os.path.join(root, "stems.json")) as f:
        got = json.load(f)
    stemmer = porter.PorterStemmer()
    assert stemmer.mode == porter.PorterStemmer.NLTK_EXTENSIONS
    failures = [(w, stemmer.stem(w), got.get(w)) for w in ws if stemmer.stem(w) != got.get(w)]
    changed = sum(1 for w in ws if stemmer.stem(w) != w)
    if failures:
        print("FAILED: %d of %d words stem differently (word, NLTK, hftrain):" % (len(failures), len(ws)))
        for f in failures[:60]:
            print("  %-20s %-16s %s" % f)
        return 1
    if changed < len(ws) // 3:
        print("FAILED: only %d of %d words change: the words do not exercise the rules" % (changed, len(ws)))
        return 1
    print("porter_reference: %d words agree with NLTK (%d changed by stemming)" % (len(ws), changed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
