"""Choosing the tokens of 30-s windows: greedy, sampling (best of n) and beam search, several
windows at once over the model's sequence slots.

Every window is a `Task` (its row of the last encode, its prompt, its rules). A task takes
`width` slots: 1 for greedy, best_of for sampling, beam_size for beam search. Each step feeds
one token to every slot still running, in one `decode` call for all windows; greedy search runs
in chains of steps on the device instead where the engine has them (chain.py). Beam search keeps
each beam's KV in its slot; when a beam is continued twice, its slot is copied into a slot
whose beam was dropped (`copy_sequence`). Where the engine has chains, each beam step's
candidates are picked on the device (`decode_top`: the logit rules and the top beam_size + 1
ids), and the host ranks the beams from those alone.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from akunu.whisper.chain import chain_applies, run_chains
from akunu.whisper.rules import LogitRules, log_softmax


@dataclass
class Task:
    window: int  # row of the last encode
    prompt: list[int]
    sot_index: int  # where <|startoftranscript|> is in the prompt (no_speech_prob is read there)
    rules: LogitRules


@dataclass
class Hypothesis:
    tokens: list[int] = field(default_factory=list)  # sampled, without <|endoftext|>
    sum_logprob: float = 0.0
    logprobs: list[float] = field(default_factory=list)  # of each sampled token, <|endoftext|> included
    finished: bool = False

    def score(self, length_penalty: float) -> float:
        """sum_logprob / length ** length_penalty (faster-whisper's exponential penalty)."""
        return self.sum_logprob / max(len(self.tokens), 1) ** length_penalty


@dataclass
class Decoded:
    best: Hypothesis
    no_speech_prob: float
    candidates: list[Hypothesis]


class _Samples:
    """Independent rows: argmax at temperature 0, else samples from softmax(logits / T)."""

    def __init__(self, task, slots, temperature, rng, max_new, eot):
        self.task, self.slots, self.t, self.rng, self.max_new, self.eot = task, slots, temperature, rng, max_new, eot
        self.hyps = [Hypothesis() for _ in slots]

    @property
    def done(self):
        return all(h.finished for h in self.hyps)

    def step(self, model, rows):
        feeds = []
        for slot, h in zip(self.slots, self.hyps):
            if h.finished:
                continue
            x = self.task.rules.apply(rows[slot], h.tokens)
            lp = log_softmax(x)
            if self.t == 0:
                tok = int(np.argmax(x))
            else:
                p = np.exp(log_softmax(x / self.t))
                tok = int(self.rng.choice(p.size, p=p / p.sum()))
            h.sum_logprob += float(lp[tok])
            h.logprobs.append(float(lp[tok]))
            if tok == self.eot:
                h.finished = True
                continue
            h.tokens.append(tok)
            if len(h.tokens) >= self.max_new:
                h.finished = True
            else:
                feeds.append((slot, tok))
        return feeds

    def candidates(self):
        return self.hyps


class _Beams:
    """OpenAI whisper's beam search: each beam offers its beam_size + 1 best tokens; the best
    beam_size unfinished sequences go on; finished ones are kept until beam_size * patience."""

    def __init__(self, task, slots, beam_size, patience, max_new, eot):
        self.task, self.slots, self.beam_size, self.max_new, self.eot = task, list(slots), beam_size, max_new, eot
        self.max_candidates = max(1, round(beam_size * patience))
        self.beams = [Hypothesis()]  # all slots start with the same prompt
        self.finished: list[Hypothesis] = []
        self.done = False

    def offers(self, rows):
        """Each beam's candidates from its slot's row of logits under the rules, by slot: its
        beam_size + 1 likeliest (token, log-probability) pairs (the host's form of what
        decode_top picks on the device)."""
        out = {}
        for slot, h in zip(self.slots, self.beams):
            lp = log_softmax(self.task.rules.apply(rows[slot], h.tokens))
            out[slot] = [(int(t), float(lp[t])) for t in _top(lp, self.beam_size + 1) if np.isfinite(lp[t])]
        return out

    def step(self, model, offers):
        """Ranks the beams' candidates (offers: by slot, as offers() gives them); returns the
        (slot, token) each kept beam feeds next."""
        cands = {}
        for j, h in enumerate(self.beams):
            for tok, lp in offers[self.slots[j]]:
                cands.setdefault(tuple(h.tokens) + (tok,), (h.sum_logprob + lp, j, lp))
        chosen, newly = [], []
        for seq in sorted(cands, key=lambda s: -cands[s][0]):
            score, j, lp = cands[seq]
            h = Hypothesis(list(seq), score, self.beams[j].logprobs + [lp])
            if seq[-1] == self.eot:
                h.tokens.pop()
                h.finished = True
                newly.append(h)
            else:
                chosen.append((h, j))
                if len(chosen) == self.beam_size:
                    break
        self.finished += newly[:max(0, self.max_candidates - len(self.finished))]
        if len(self.finished) >= self.max_candidates or not chosen or len(chosen[0][0].tokens) >= self.max_new:
            self.beams = [h for h, _ in chosen]
            self.done = True
            return []
        slots = self._reorder(model, [j for _, j in chosen])
        self.beams = [h for h, _ in chosen]
        return [(s, h.tokens[-1]) for s, h in zip(slots, self.beams)]

    def _reorder(self, model, sources):
        """The slot of each new beam: its parent's slot the first time, else a copy of it in a
        slot whose beam was dropped."""
        old = self.slots
        free = [s for j, s in enumerate(old) if j not in set(sources)]
        used, slots = set(), []
        for j in sources:
            if old[j] in used:
                dst = free.pop()
                model.copy_sequence(old[j], dst)
                slots.append(dst)
            else:
                used.add(old[j])
                slots.append(old[j])
        self.slots = slots + free
        return slots

    def candidates(self):
        extra = sorted(self.beams, key=lambda h: -h.sum_logprob)
        return self.finished + extra[:max(0, self.beam_size - len(self.finished))]


def _top(x: np.ndarray, k: int) -> list[int]:
    """Indices of the k largest values, largest first (ties: lower index first). A few argmax
    passes: for the small k of a beam, cheaper than partitioning the whole vocabulary."""
    x = x.copy()
    out = []
    for _ in range(min(k, x.size)):
        i = int(np.argmax(x))
        out.append(i)
        x[i] = -np.inf
    return out


def _prefill(model, groups, no_speech):
    """Feeds each task's prompt to its first slot; returns the logits that choose the first
    token and the no-speech probability read at <|startoftranscript|>."""
    first = [g.slots[0] for g in groups]
    for g, slot in zip(groups, first):
        model.set_audio(slot, g.task.window)
        model.reset(slot)
    # copies: the engine may hand out views of buffers that the next decode overwrites
    at_sot = np.array(model.decode(first, [g.task.prompt[:g.task.sot_index + 1] for g in groups]))
    p = np.exp(log_softmax(at_sot))
    no_speech_probs = p[:, no_speech] if no_speech is not None else np.zeros(len(groups))
    rest = [(i, g.task.prompt[g.task.sot_index + 1:]) for i, g in enumerate(groups)]
    rest = [(i, toks) for i, toks in rest if toks]
    logits = list(at_sot)
    if rest:
        after = np.array(model.decode([first[i] for i, _ in rest], [toks for _, toks in rest]))
        for (i, _), row in zip(rest, after):
            logits[i] = row
    return logits, no_speech_probs


def search(model, tasks: list[Task], tokens, *, temperature: float, beam_size: int, best_of: int, patience: float,
           length_penalty: float, max_new_tokens: int, n_text_ctx: int, rng, slots: int) -> list[Decoded]:
    """The best hypothesis of each task (and all candidates), as many tasks at a time as the
    `slots` sequence slots hold."""
    beam = temperature == 0 and beam_size > 1
    width = beam_size if beam else (best_of if temperature > 0 else 1)
    if width > slots:
        raise ValueError(f"{'beam_size' if beam else 'best_of'} {width} needs {width} sequence slots; the model was "
                         f"loaded with max_sequences={slots}")
    per_round = slots // width
    out = []
    for start in range(0, len(tasks), per_round):
        chunk = tasks[start:start + per_round]
        groups = []
        for i, task in enumerate(chunk):
            max_new = max(1, min(max_new_tokens, n_text_ctx - len(task.prompt)))
            owned = list(range(i * width, (i + 1) * width))
            groups.append(_Beams(task, owned, beam_size, patience, max_new, tokens.eot) if beam else
                          _Samples(task, owned, temperature, rng, max_new, tokens.eot))
        if chain_applies(model, temperature, width):
            out += [Decoded(h, no_speech, [h]) for h, no_speech in run_chains(model, groups, tokens)]
        else:
            out += _run(model, groups, tokens, length_penalty)
    return out


def _top_on_device(model, groups) -> int:
    """Candidates per beam that the engine picks on the device (decode_top), or 0 where the host
    ranks them from the logits: sampling, or an engine without chains (tuning whisper_chain=0)."""
    if not groups or not isinstance(groups[0], _Beams) or not hasattr(model, "decode_top"):
        return 0
    k = groups[0].beam_size + 1
    return k if k <= min(16, getattr(model, "chain_steps", 0)) else 0


def _decode_top(model, groups, tokens, k):
    """Feeds each running beam's last token and returns its candidates under its rules, by slot,
    picked on the device: the logits are not read."""
    seqs, fed, histories, rules = [], [], [], []
    for g in groups:
        if g.done:
            continue
        for slot, h in zip(g.slots, g.beams):
            seqs.append(slot)
            fed.append(h.tokens[-1])
            histories.append(h.tokens)
            rules.append(g.task.rules)
    picked = model.decode_top(
        seqs, fed, histories, k, [r.suppress.tolist() for r in rules], [r.begin_suppress.tolist() for r in rules],
        [bool(r.timestamps) for r in rules], [-1 if r.max_initial is None else int(r.max_initial) for r in rules],
        eot=tokens.eot, timestamp_begin=tokens.timestamp_begin, no_timestamps=tokens.no_timestamps)
    return {s: list(zip(ids, lps)) for s, (ids, lps) in zip(seqs, picked)}


def _run(model, groups, tokens, length_penalty):
    logits, no_speech = _prefill(model, groups, tokens.no_speech)
    rows = {}
    for g, row in zip(groups, logits):
        for s in g.slots[1:] if isinstance(g, _Samples) else []:  # beams copy when they split
            model.copy_sequence(g.slots[0], s)
        rows.update({s: row for s in g.slots})
    top_k, picked = _top_on_device(model, groups), None
    while True:
        feeds = [f for g in groups if not g.done
                 for f in g.step(model, rows if isinstance(g, _Samples) else picked or g.offers(rows))]
        if not feeds:
            break
        if top_k:
            picked = _decode_top(model, groups, tokens, top_k)
            continue
        out = np.array(model.decode([s for s, _ in feeds], [[t] for _, t in feeds]))
        rows = {s: row for (s, _), row in zip(feeds, out)}
    results = []
    for g, ns in zip(groups, no_speech):
        cands = g.candidates()
        best = max(cands, key=lambda h: h.score(length_penalty))
        results.append(Decoded(best, float(ns), cands))
    return results
