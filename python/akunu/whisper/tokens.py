"""Whisper's special tokens, its prompt layout and the token groups the decoding rules use.

The ids come from the tokenizer by name (`<|startoftranscript|>`, `<|notimestamps|>`, ...), so
the English-only vocabulary (51,864 ids) and the multilingual ones (51,865 and up) are read the
same way. Timestamp tokens follow `<|notimestamps|>`: `timestamp_begin + i` is `i * 0.02` s.
"""
from __future__ import annotations

import string
from functools import cached_property

# Whisper's language codes in token order (`<|en|>` is the first language token).
LANGUAGES = (
    "en zh de es ru ko fr ja pt tr pl ca nl ar sv it id hi fi vi he uk el ms cs ro da hu ta no th ur hr bg lt la mi "
    "ml cy sk te fa lv bn sr az sl kn et mk br eu is hy ne mn bs kk sq sw gl mr pa si km sn yo so af oc ka be tg "
    "sd gu am yi lo uz fo ht ps tk nn mt sa lb my bo tl mg as tt haw ln ha ba jw su yue").split()
# Scripts written without spaces: words are split where the tokens decode to whole characters.
NO_SPACE_LANGUAGES = {"zh", "ja", "th", "lo", "my", "yue"}
TIME_PRECISION = 0.02  # seconds per timestamp step (two mel frames)


class WhisperTokens:
    """Special ids, prompts and text of one Whisper vocabulary (an akunu.Tokenizer)."""

    def __init__(self, tokenizer, n_vocab: int, language: str | None = None, task: str = "transcribe"):
        self.tokenizer = tokenizer
        self.n_vocab = n_vocab
        self.multilingual = n_vocab >= 51865
        ids = {name: tokenizer.token_to_id(f"<|{name}|>") for name in (
            "endoftext", "startoftranscript", "translate", "transcribe", "startoflm", "startofprev", "nospeech",
            "nocaptions", "notimestamps")}
        missing = [n for n in ("endoftext", "startoftranscript", "notimestamps") if ids[n] is None]
        if missing:
            raise ValueError(f"the tokenizer has no {', '.join(f'<|{n}|>' for n in missing)}: not a Whisper vocabulary")
        self.eot, self.sot, self.no_timestamps = ids["endoftext"], ids["startoftranscript"], ids["notimestamps"]
        self.translate, self.transcribe = ids["translate"], ids["transcribe"]
        self.sot_lm, self.sot_prev = ids["startoflm"], ids["startofprev"]
        self.no_speech = ids["nospeech"] if ids["nospeech"] is not None else ids["nocaptions"]
        self.timestamp_begin = self.no_timestamps + 1
        self.language_ids = {code: tokenizer.token_to_id(f"<|{code}|>") for code in LANGUAGES}
        self.language_ids = {c: i for c, i in self.language_ids.items() if i is not None}
        self.task = task
        self.language = language if self.multilingual else "en"

    def with_language(self, language: str | None, task: str | None = None) -> WhisperTokens:
        """A copy for another language (and task); checks the language code."""
        if language is not None and language not in self.language_ids:
            raise ValueError(f"language {language!r} is not one of Whisper's codes ({', '.join(self.language_ids)})")
        if task not in (None, "transcribe", "translate"):
            raise ValueError(f"task {task!r}: expected 'transcribe' or 'translate'")
        other = WhisperTokens.__new__(WhisperTokens)
        other.__dict__.update({k: v for k, v in self.__dict__.items() if k != "non_speech"})
        other.task = task or self.task
        other.language = language if self.multilingual else "en"
        return other

    @property
    def sot_sequence(self) -> list[int]:
        """<|startoftranscript|>, then for a multilingual model the language and the task."""
        seq = [self.sot]
        if self.multilingual:
            seq.append(self.language_ids[self.language or "en"])
            seq.append(self.translate if self.task == "translate" else self.transcribe)
        return seq

    def prompt(self, previous: list[int], timestamps: bool, prefix: list[int] | None, n_text_ctx: int) -> list[int]:
        """The decoder's prompt: previous text after <|startofprev|> (its last n_text_ctx // 2 - 1
        tokens), the start sequence, <|notimestamps|> or a first timestamp before a prefix."""
        prompt = [self.sot_prev] + previous[-(n_text_ctx // 2 - 1):] if previous else []
        prompt += self.sot_sequence
        if not timestamps:
            prompt.append(self.no_timestamps)
        if prefix:
            if timestamps:
                prompt.append(self.timestamp_begin)
            prompt += prefix[:n_text_ctx // 2 - 1]
        return prompt

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False, parse_special=False)

    def decode(self, tokens) -> str:
        """The text of the text tokens (timestamps and other special tokens left out)."""
        return self.tokenizer.decode([t for t in tokens if t < self.eot])

    def decode_with_timestamps(self, tokens) -> str:
        out, run = [], []
        for t in list(tokens) + [None]:
            if t is None or t >= self.timestamp_begin:
                out.append(self.decode(run))
                run = []
                if t is not None:
                    out.append(f"<|{(t - self.timestamp_begin) * TIME_PRECISION:.2f}|>")
            else:
                run.append(t)
        return "".join(out)

    @cached_property
    def non_speech(self) -> list[int]:
        """Tokens of symbols that are not speech (speaker tags, music signs, brackets), as
        OpenAI's whisper suppresses them; " -" and " '" stay allowed inside words."""
        symbols = list('"#()*+/:;<=>@[\\]^_`{|}~「」『』')
        symbols += "<< >> <<< >>> -- --- -( -[ (' (\" (( )) ((( ))) [[ ]] {{ }} ♪♪ ♪♪♪".split()
        misc = set("♩♪♫♬♭♮♯")
        result = {self.encode(" -")[0], self.encode(" '")[0]}
        for symbol in symbols + sorted(misc):
            for toks in (self.encode(symbol), self.encode(" " + symbol)):
                if len(toks) == 1 or symbol in misc:
                    result.add(toks[0])
        return sorted(result)

    def suppressed(self, suppress_tokens) -> list[int]:
        """The ids to suppress at every step: suppress_tokens (-1 standing for the non-speech
        symbols) plus the task, start and no-speech tokens, which are never sampled."""
        ids = set(t for t in (suppress_tokens or []) if t >= 0)
        if suppress_tokens and -1 in suppress_tokens:
            ids.update(self.non_speech)
        ids.update(t for t in (self.transcribe, self.translate, self.sot, self.sot_prev, self.sot_lm, self.no_speech)
                   if t is not None)
        return sorted(i for i in ids if i < self.n_vocab)

    def split_to_words(self, tokens: list[int]) -> tuple[list[str], list[list[int]]]:
        """Words and their tokens: at spaces and punctuation, or at whole characters for the
        languages written without spaces."""
        pieces, piece_tokens = self._split_on_unicode(tokens)
        if self.language in NO_SPACE_LANGUAGES:
            return pieces, piece_tokens
        words, word_tokens = [], []
        for piece, toks in zip(pieces, piece_tokens):
            starts_word = toks[0] >= self.eot or piece.startswith(" ") or piece.strip() in string.punctuation
            if starts_word or not words:
                words.append(piece)
                word_tokens.append(list(toks))
            else:
                words[-1] += piece
                word_tokens[-1].extend(toks)
        return words, word_tokens

    def _split_on_unicode(self, tokens):
        full = self.decode_with_timestamps(tokens)
        pieces, piece_tokens, current, offset = [], [], [], 0
        for t in tokens:
            current.append(t)
            text = self.decode_with_timestamps(current)
            bad = text.find("\ufffd")
            if bad < 0 or (offset + bad < len(full) and full[offset + bad] == "\ufffd"):
                pieces.append(text)
                piece_tokens.append(current)
                current, offset = [], offset + len(text)
        return pieces, piece_tokens
