"""`make test`'s schedule: the files handed out first to the test processes exist."""

from pathlib import Path

from tests.conftest import HEAVIEST_FILES

ROOT = Path(__file__).resolve().parents[1]


def test_the_heaviest_files_exist_once_each():
    assert len(set(HEAVIEST_FILES)) == len(HEAVIEST_FILES) >= 1
    missing = [name for name in HEAVIEST_FILES if not (ROOT / name).is_file()]
    assert missing == [], f"renamed or removed: update tests/conftest.py's HEAVIEST_FILES {missing}"
