"""read_json: a missing file is the default; anything else that is not a small UTF-8 JSON file is
a ConfigError naming the file and what to do."""

from __future__ import annotations

from pathlib import Path

import pytest

from pincer.core.errors import ConfigError
from pincer.store.jsonfile import MAX_JSON_FILE_BYTES, read_json


def test_read_json_reads_refuses_and_defaults(tmp_path: Path) -> None:
    assert read_json(tmp_path / "absent.json", default={"d": 1}) == {"d": 1}
    good = tmp_path / "good.json"
    good.write_text('{"a": [1, 2]}', encoding="utf-8")
    assert read_json(good) == {"a": [1, 2]}
    big = tmp_path / "big.json"
    with big.open("wb") as file:
        file.truncate(MAX_JSON_FILE_BYTES + 1)  # sparse: no disk spent
    with pytest.raises(ConfigError, match=f"big.json is larger than {MAX_JSON_FILE_BYTES} bytes") as info:
        read_json(big)
    assert info.value.hint == "is this the right file?"
    latin = tmp_path / "latin.json"
    latin.write_bytes('{"a": "caf\u00e9"}'.encode("latin-1"))
    with pytest.raises(ConfigError, match="latin.json is not UTF-8 text"):
        read_json(latin)
    broken = tmp_path / "broken.json"
    broken.write_text('{"a":\n  }', encoding="utf-8")
    with pytest.raises(ConfigError, match="broken.json is not valid JSON: .* at line 2 column 3"):
        read_json(broken)
