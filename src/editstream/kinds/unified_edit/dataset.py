"""Image-editing samples: an input image, one or more instructions, the edited image(s)."""

from __future__ import annotations

import random
from typing import Any

from editstream.plugin import RowDataset


class UnifiedEditIterableDataset(RowDataset):
    """Edit chains from rows with ``image_list`` (>= 2 images) and ``instruction_list`` (phrasings of edit i -> i+1);
    draws in the reference's order (SPEC 6), only drawn images decoded, so a bad row fails where it does there."""

    def parse_row(self, row: Any) -> dict[str, Any]:
        images = row["image_list"]
        instructions = row["instruction_list"]
        n = len(images)
        start = random.choice(range(n - 1))
        end = random.choice(range(start + 1, min(start + 3, n)))

        data = self._init_data()
        self._add_image(data, self.load_image(images[start]), need_loss=False, need_vae=True, need_vit=True)

        if end - start > 1 and random.random() < 0.5:
            if end == n - 1:
                end -= 1
            text = "".join(random.choice(instructions[idx - 1]) + ". " for idx in range(start + 1, end + 1))
            self._add_text(data, text.rstrip(), need_loss=False)
            self._add_image(data, self.load_image(images[end]), need_loss=True, need_vae=False, need_vit=False)
            return data

        for idx in range(start + 1, end + 1):
            self._add_text(data, random.choice(instructions[idx - 1]), need_loss=False)
            last = idx == end
            self._add_image(data, self.load_image(images[idx]), need_loss=True, need_vae=not last, need_vit=not last)
        return data
