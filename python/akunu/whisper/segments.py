"""A window's tokens cut into segments at its timestamp pairs, and where the next window
starts (seek, in mel frames), as OpenAI's whisper and faster-whisper do it."""
from __future__ import annotations

from akunu.whisper.tokens import TIME_PRECISION

FRAMES_PER_SECOND = 100  # mel frames (hop 160 at 16 kHz)
INPUT_STRIDE = 2  # mel frames per timestamp step


def split_by_timestamps(tokens: list[int], timestamp_begin: int, time_offset: float, seek: int, segment_size: int,
                        segment_duration: float) -> tuple[list[dict], int, bool]:
    """(segments {seek, start, end, tokens}, the next seek, whether the window ended on a lone
    timestamp). Tokens after the last closed pair are left for the next window, which starts at
    that pair's time; a lone timestamp at the end means nothing more was said in the window."""
    def is_ts(t):
        return t >= timestamp_begin

    def at(t):
        return time_offset + (t - timestamp_begin) * TIME_PRECISION

    single_ending = len(tokens) >= 2 and not is_ts(tokens[-2]) and is_ts(tokens[-1])
    cuts = [i for i in range(1, len(tokens)) if is_ts(tokens[i]) and is_ts(tokens[i - 1])]
    if not cuts:
        stamps = [t for t in tokens if is_ts(t)]
        end = time_offset + segment_duration
        if stamps and stamps[-1] != timestamp_begin:
            end = at(stamps[-1])
        return [dict(seek=seek, start=time_offset, end=end, tokens=tokens)], seek + segment_size, single_ending
    if single_ending:
        cuts.append(len(tokens))
    segments, last = [], 0
    for cut in cuts:
        piece = tokens[last:cut]
        segments.append(dict(seek=seek, start=at(piece[0]), end=at(piece[-1]), tokens=piece))
        last = cut
    if single_ending:
        return segments, seek + segment_size, True
    return segments, seek + (tokens[last - 1] - timestamp_begin) * INPUT_STRIDE, False
