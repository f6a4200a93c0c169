"""Perplexity of Gemma 3 270M Q4_K_M in transformers (float32, the GGUF dequantized) with every
linear layer's input rounded per block of 32 as an integer GEMM would round it: to 16 bits, to 8
bits (llama.cpp's q8_0), or to 8 bits except the blocks a rule refines to 16:

    rms A     blocks whose largest |x| exceeds A times the row's root mean square
    budget B  the largest blocks of the row (by largest |x|, squared) until the rest's share of
              the row's sum of squared block maxima is at most B

Prints each rounding's perplexity on the real-model test's text, its deviation from the
unrounded model and the share of blocks at 16 bits. Needs torch, transformers and accelerate;
the GGUF comes from akunu's cache (akunu.models.gemma3_270m).

    python bench/x_rounding_ppl.py
"""
import math

import torch
import transformers

import akunu
from akunu import models

TEXT = ("The history of the printing press begins in the fifteenth century, when Johannes Gutenberg "
        "combined movable metal type, oil-based ink and a wooden screw press. Within fifty years, "
        "presses had spread to more than two hundred cities, and the price of books fell sharply. "
        "Scholars could compare identical copies of a text, which changed how knowledge was shared.")


def rounded(x, bits):
    """x [..., k] rounded to `bits` per block of 32, and each block's largest |x| [..., k/32, 1]."""
    b = x.reshape(*x.shape[:-1], -1, 32)
    amax = b.abs().amax(-1, keepdim=True)
    d = amax / (2 ** (bits - 1) - 1)
    inv = torch.where(amax > 0, 1 / d, torch.zeros_like(d))
    return torch.round(b * inv) * d, amax


def refined(x, amax, rule, value):
    """Which blocks [..., k/32, 1] the rule keeps at 16 bits."""
    if rule == "rms":
        return amax > value * x.pow(2).mean(-1, keepdim=True).sqrt().unsqueeze(-1)
    a2 = amax.squeeze(-1) ** 2
    srt = torch.sort(a2, -1).values
    kept = (torch.cumsum(srt, -1) <= value * a2.sum(-1, keepdim=True)).sum(-1, keepdim=True)
    thr = torch.gather(torch.cat([srt, torch.full_like(srt[..., :1], float("inf"))], -1), -1, kept)
    return (a2 >= thr).unsqueeze(-1)


def main():
    path = models.gemma3_270m()
    ids = akunu.Tokenizer.from_file(str(path)).encode(TEXT)
    hf = transformers.AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name,
                                                           dtype=torch.float32).eval()
    mode = {"bits": None, "rule": None, "value": 0.0, "blocks": 0, "refined": 0}

    def hook(_, args):
        x = args[0]
        if mode["bits"] is None or x.shape[-1] % 32:
            return None
        r, amax = rounded(x, mode["bits"])
        if mode["rule"]:
            sel = refined(x, amax, mode["rule"], mode["value"])
            r = torch.where(sel, rounded(x, 16)[0], r)
            mode["blocks"] += sel.numel()
            mode["refined"] += int(sel.sum())
        return (r.reshape(x.shape),)

    for mod in hf.modules():
        if isinstance(mod, torch.nn.Linear):
            mod.register_forward_pre_hook(hook)

    def ppl():
        with torch.no_grad():
            logits = hf(torch.tensor([ids])).logits[0].double()
        lp = torch.log_softmax(logits, -1)[torch.arange(len(ids) - 1), torch.tensor(ids[1:])]
        return math.exp(-lp.mean().item())

    base = ppl()
    print(f"{len(ids)} tokens, unrounded perplexity {base:.4f}")
    cases = [(16, None, 0), (8, None, 0)] + [(8, "rms", a) for a in (2, 3, 4, 6, 8)]
    cases += [(8, "budget", b) for b in (0.5, 0.25, 0.1, 0.05)]
    for bits, rule, value in cases:
        mode.update(bits=bits, rule=rule, value=value, blocks=0, refined=0)
        p = ppl()
        share = mode["refined"] / mode["blocks"] if mode["blocks"] else float(bits == 16)
        print(f"x{bits:<2} {rule or '':6s} {value:<5} perplexity {p:.4f}  deviation {(p - base) / base:+.2e}  "
              f"at 16 bits {share:.3f}")


if __name__ == "__main__":
    main()
