"""Synthetic documents for the leak-check benchmark, and the exact set of true cross-split pairs.

    make_docs.py OUT_DIR [DOCS] [PLANTED] [SEED]

Writes OUT_DIR/docs.csv (doc_id,note) and OUT_DIR/truth.json. Documents are 15-45 words (mean 30)
drawn with mild Zipf weights from a 4,000-word vocabulary of pseudo-words, so two random
documents share few character 5-grams. PLANTED of them are near copies of another document with
one word replaced: their Jaccard over the 5-grams of the normalized text (lowercase, white space
collapsed) falls around 0.78-0.93. True pairs = planted pairs with exact Jaccard >= 0.8 whose two
documents land in different splits under leak-check's rule `hash(doc_id) < 0.5` (blake3 of the
id text, first 8 bytes little-endian, >> 11, / 2**53). Same arguments: byte-identical output."""
import json
import os
import random
import sys

from blake3 import blake3

WIDTH = 5
THRESHOLD = 0.8


def normalize(text):
    return " ".join(text.lower().split())


def shingles(text):
    """Set of WIDTH-character windows of the normalized text (a shorter text is one shingle), as
    runfn_stats::minhash::shingle_hashes builds them (there as hashes of the windows)."""
    n = normalize(text)
    if not n:
        return set()
    if len(n) <= WIDTH:
        return {n}
    return {n[i:i + WIDTH] for i in range(len(n) - WIDTH + 1)}


def jaccard(a, b):
    if not a and not b:
        return 0.0
    return len(a & b) / len(a | b)


def fraction(doc_id):
    return (int.from_bytes(blake3(doc_id.encode()).digest()[:8], "little") >> 11) / 2 ** 53


def split_of(doc_id):
    return "a" if fraction(doc_id) < 0.5 else "b"


def main():
    out = sys.argv[1]
    n_docs = int(sys.argv[2]) if len(sys.argv) > 2 else 100_000
    planted = int(sys.argv[3]) if len(sys.argv) > 3 else 2_000
    seed = int(sys.argv[4]) if len(sys.argv) > 4 else 7
    rng = random.Random(f"runfn-bench-leak-docs-{seed}")
    letters = "abcdefghijklmnopqrstuvwxyz"
    vocab = set()
    while len(vocab) < 4000:
        vocab.add("".join(rng.choice(letters) for _ in range(rng.randint(3, 9))))
    vocab = sorted(vocab)
    rng.shuffle(vocab)
    weights = [1 / (rank + 1) ** 0.8 for rank in range(len(vocab))]

    def sentence():
        words = rng.choices(vocab, weights, k=rng.randint(15, 45))
        return words

    def render(words):
        return words[0].capitalize() + " " + " ".join(words[1:]) + "."

    bases = [sentence() for _ in range(n_docs - planted)]
    texts = [render(w) for w in bases]
    pairs = []  # (index of base, index of copy) in `texts`
    for base in rng.sample(range(len(bases)), planted):
        words = list(bases[base])
        pos = rng.randrange(len(words))
        words[pos] = rng.choice([w for w in rng.sample(vocab, 8) if w != words[pos]])
        texts.append(render(words))
        pairs.append((base, len(texts) - 1))
    order = list(range(len(texts)))
    rng.shuffle(order)
    position = {old: new for new, old in enumerate(order)}
    ids = [f"doc-{i:07d}" for i in range(len(texts))]

    os.makedirs(out, exist_ok=True)
    tmp = os.path.join(out, "docs.csv.tmp")
    with open(tmp, "w") as f:
        f.write("doc_id,note\n")
        for new, old in enumerate(order):
            f.write(f"{ids[new]},{texts[old]}\n")
    os.replace(tmp, os.path.join(out, "docs.csv"))

    truth = []
    for base, copy in pairs:
        id_a, id_b = ids[position[base]], ids[position[copy]]
        j = jaccard(shingles(texts[base]), shingles(texts[copy]))
        truth.append({"a": id_a, "b": id_b, "jaccard": round(j, 6),
                      "split_a": split_of(id_a), "split_b": split_of(id_b)})
    above = [t for t in truth if t["jaccard"] >= THRESHOLD]
    cross = [t for t in above if t["split_a"] != t["split_b"]]
    doc = {"docs": len(texts), "planted_pairs": planted, "planted_at_or_above_threshold": len(above),
           "true_pairs": len(cross), "threshold": THRESHOLD, "shingle_chars": WIDTH,
           "docs_in_split_a": sum(split_of(i) == "a" for i in ids),
           "jaccard_min": min(t["jaccard"] for t in truth), "jaccard_max": max(t["jaccard"] for t in truth),
           "pairs": truth}
    with open(os.path.join(out, "truth.json.tmp"), "w") as f:
        json.dump(doc, f)
    os.replace(os.path.join(out, "truth.json.tmp"), os.path.join(out, "truth.json"))
    print(f"bench-data: {len(texts)} documents, {planted} planted pairs, {len(above)} with Jaccard >= "
          f"{THRESHOLD}, {len(cross)} of them across splits", file=sys.stderr)


if __name__ == "__main__":
    main()
