"""ByteTokenizer: UTF-8 byte ids, round trips, special tokens."""

from __future__ import annotations

import pytest

from editstream.loader.tokenizer import ByteTokenizer


def test_encode_is_utf8_bytes():
    tok = ByteTokenizer()
    assert tok.encode("make the sky orange") == list(b"make the sky orange")
    assert tok.encode("é") == [0xC3, 0xA9]
    assert tok.encode("") == []
    assert tok.encode("日本語 🎨") == list("日本語 🎨".encode())  # 9 + 1 + 4 bytes, all < 256


@pytest.mark.parametrize("text", ["", "a", "remove the dog. ", "naïve café 日本語 🎨", "<|im_start|> literal"])
def test_round_trip(text):
    tok = ByteTokenizer()
    assert tok.decode(tok.encode(text)) == text


def test_special_tokens():
    tok = ByteTokenizer()
    ids = tok.special_token_ids()
    assert ids == {"bos_token_id": 256, "eos_token_id": 257, "start_of_image": 258, "end_of_image": 259}
    assert tok.vocab_size == len(tok) == 260
    # special strings in the input are plain text, never special ids
    assert max(tok.encode("<|im_end|>")) < 256
    text = tok.decode(
        [ids["bos_token_id"], *tok.encode("hi"), ids["start_of_image"], ids["end_of_image"], ids["eos_token_id"]]
    )
    assert text == "<|im_start|>hi<|vision_start|><|vision_end|><|im_end|>"


def test_decode_errors():
    tok = ByteTokenizer()
    with pytest.raises(ValueError, match="260"):
        tok.decode([65, 260])
    assert tok.decode([0xC3]) == "\ufffd"  # a lone lead byte does not crash
    with pytest.raises(TypeError, match="ByteTokenizer.encode expects str, got bytes"):
        tok.encode(b"bytes")  # type: ignore[arg-type]


def test_instances_agree():
    assert ByteTokenizer().encode("same") == ByteTokenizer().encode("same")
    assert ByteTokenizer().special_token_ids() == ByteTokenizer().special_token_ids()
