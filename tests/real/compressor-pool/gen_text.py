"""Writes about SIZE_MB MB of deterministic word-salad text to stdout
(tests/real/compressor-pool): compresses to about 48% with gzip -6."""
import random
import sys

size = int(sys.argv[1]) * 1000 * 1000
rng = random.Random(1)
words = ["".join(rng.choice("etaoinshrdlcumwfgypbvkjxqz") for _ in range(rng.randint(2, 9)))
         for _ in range(5000)]
out = sys.stdout
written = 0
while written < size:
    chunk = "\n".join(" ".join(rng.choices(words, k=12)) for _ in range(2000)) + "\n"
    out.write(chunk)
    written += len(chunk)
