"""A conversation that keeps its KV cache between turns (akunu chat).

Each turn renders the whole conversation with the chat template, as Model.chat does, but runs
only what the cache does not already hold: the cache keeps the previous turn's prompt and the
reply tokens fed back, and the new rendering shares a prefix with them (all of it, unless the
template writes the reply back differently from how it was generated). The cache is cut back
to that common prefix and the rest is prefilled. The answer is the one Model.chat gives for
the same messages: same tokens in the cache, same positions.
"""
from __future__ import annotations

from akunu._akunu import Error
from akunu.sampling import Sampler, Stream


class ChatSession:
    def __init__(self, model, sampler: Sampler | None = None, system: str | None = None, max_tokens: int = 256,
                 chat_template: str | None = None):
        self.model, self.sampler, self.max_tokens = model, sampler or Sampler(), max_tokens
        self.chat_template = chat_template
        self.messages: list[dict] = [{"role": "system", "content": system}] if system else []
        self._cached: list[int] = []   # the ids the KV cache holds
        self.prefilled = 0             # tokens the last turn ran before its answer

    def ask(self, text: str) -> Stream:
        """The answer to `text`, streamed; the caller appends it with done() (or a partial one
        when it stopped the stream early)."""
        self.messages.append({"role": "user", "content": text})
        ids = self.model.tokenizer.apply_chat_template(self.messages, add_generation_prompt=True,
                                                       chat_template=self.chat_template)
        if len(ids) >= self.model.context:
            self.messages.pop()
            raise ValueError(f"the conversation ({len(ids)} tokens) no longer fits the context of "
                             f"{self.model.context}; start again with a larger --context")
        keep = self._keep(ids)
        self.prefilled = len(ids) - keep
        self._prompt = ids
        return self.model.generate(ids[keep:], max_tokens=min(self.max_tokens, self.model.context - len(ids)),
                                   sampler=self.sampler, reset=False)

    def done(self, stream: Stream) -> None:
        """Records the (possibly stopped) answer and what the cache now holds."""
        stream.close()
        result = stream.result
        self.messages.append({"role": "assistant", "content": result.text})
        held = self.model.kv_cache.current_length
        self._cached = (self._prompt + result.token_ids)[:held]

    def _keep(self, ids: list[int]) -> int:
        """Cuts the cache back to its common prefix with ids (leaving at least the last id to
        run) and returns that prefix's length; 0 after a reset where it cannot be cut."""
        keep = 0
        for a, b in zip(self._cached, ids[:-1]):
            if a != b:
                break
            keep += 1
        try:
            self.model.kv_cache.truncate(keep)
        except Error:  # a ring cache may not rewind that far
            self.model.reset()
            keep = 0
        self._cached = self._cached[:keep]
        return keep
