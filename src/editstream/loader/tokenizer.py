"""A tiny deterministic byte-level tokenizer for demos and tests (no downloads, no vocab files): text
maps to its UTF-8 bytes (ids 0-255), the four BAGEL special tokens take ids 256-259."""

from __future__ import annotations

from collections.abc import Iterable

BOS_TOKEN = "<|im_start|>"
EOS_TOKEN = "<|im_end|>"
VISION_START_TOKEN = "<|vision_start|>"
VISION_END_TOKEN = "<|vision_end|>"

_NUM_BYTES = 256


class ByteTokenizer:
    """UTF-8 byte tokenizer with BAGEL's chat/vision special tokens, usable wherever a tokenizer is expected."""

    def __init__(self) -> None:
        self.bos_token_id = _NUM_BYTES
        self.eos_token_id = _NUM_BYTES + 1
        self.start_of_image = _NUM_BYTES + 2
        self.end_of_image = _NUM_BYTES + 3
        names = (BOS_TOKEN, EOS_TOKEN, VISION_START_TOKEN, VISION_END_TOKEN)
        self._special_names = dict(enumerate(names, start=_NUM_BYTES))

    @property
    def vocab_size(self) -> int:
        """Number of ids: 256 byte values plus the 4 special tokens."""
        return _NUM_BYTES + len(self._special_names)

    def __len__(self) -> int:
        return self.vocab_size

    def __repr__(self) -> str:
        return f"ByteTokenizer(vocab_size={self.vocab_size})"

    def encode(self, text: str) -> list[int]:
        """The UTF-8 bytes of ``text`` as ids; special-token strings in the text are not parsed."""
        if not isinstance(text, str):
            raise TypeError(f"ByteTokenizer.encode expects str, got {type(text).__name__}")
        return list(text.encode("utf-8"))

    def decode(self, ids: Iterable[int]) -> str:
        """Inverse of ``encode``; special ids render as their token strings, invalid UTF-8 as U+FFFD."""
        out: list[str] = []
        pending = bytearray()
        for i in ids:
            i = int(i)
            if 0 <= i < _NUM_BYTES:
                pending.append(i)
                continue
            name = self._special_names.get(i)
            if name is None:
                raise ValueError(f"token id {i} is outside the vocabulary [0, {self.vocab_size})")
            out.append(pending.decode("utf-8", errors="replace"))
            pending.clear()
            out.append(name)
        out.append(pending.decode("utf-8", errors="replace"))
        return "".join(out)

    def special_token_ids(self) -> dict[str, int]:
        """The ``special_tokens`` dict the packer takes (BOS, EOS, vision start/end ids)."""
        names = ("bos_token_id", "eos_token_id", "start_of_image", "end_of_image")
        return {name: getattr(self, name) for name in names}
