"""What the driver compiled a model's kernels to, after a prefill chunk: each kernel's
statistics (registers, shared memory, binary size) and, where the driver keeps them, its
internal representations (tuning kernel_code=1): their names and sizes, the most frequent
opcodes, and the lines that name a matrix instruction (MMA).

    python bench/kernel_code.py FILE [--tokens 512] [--kernels gemm_cm2,flash_cm]

Prints nothing for a device without VK_KHR_pipeline_executable_properties (lavapipe, the CPU
backend); bench/NOTES.md, "Which instructions the cooperative-matrix GEMM runs".
"""
import argparse
import collections
import re

import numpy as np

import akunu

# A line of assembly without its address comment and predicate: "/*0120*/ @!P0 HMMA.16816 ..."
_PREFIX = re.compile(r"^\s*(/\*[0-9a-fx]*\*/)?\s*(@!?U?P[T0-9]+\s+)?")


def opcodes(text: str) -> collections.Counter:
    ops = collections.Counter()
    for line in text.splitlines():
        body = _PREFIX.sub("", line).strip()
        if body:
            ops[body.split()[0].rstrip(";")] += 1
    return ops


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--tokens", type=int, default=512, help="the prefill chunk run before reading them")
    ap.add_argument("--kernels", default="gemm_cm2,flash_cm,gemm_cm_short",
                    help="comma-separated name parts of the kernels to show")
    args = ap.parse_args()
    m = akunu.Model(args.model, context=max(1024, args.tokens + 1), progress=False, tuning={"kernel_code": True})
    m.eval([int(x) for x in np.random.default_rng(0).integers(3, m.config.vocab_size, args.tokens)])
    stats = m.kernel_statistics()
    print(f"{m.device}: {len(stats)} kernels, {sum(bool(s['code']) for s in stats)} with internal representations")
    wanted = args.kernels.split(",")
    for s in sorted(stats, key=lambda s: (s["kernel"], s["spec"])):
        if not any(w in s["kernel"] for w in wanted):
            continue
        print(akunu.kernel_statistics_table([s]))
        for c in s["code"]:
            size = f"{len(c['text'])} characters" if c["text"] else f"{c['binary_bytes']} bytes of binary"
            print(f"  {c['name']}: {c['description']} ({size})")
            if c["text"]:
                print("    opcodes:", ", ".join(f"{op} {n}" for op, n in opcodes(c["text"]).most_common(24)))
                mma = [line.strip() for line in c["text"].splitlines() if "MMA" in line.upper()]
                print(f"    {len(mma)} lines name an MMA:", *mma[:8], sep="\n      ")


if __name__ == "__main__":
    main()
