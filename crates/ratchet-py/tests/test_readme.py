"""The README's Python example runs verbatim and prints what it says."""

import pathlib
import re
import subprocess
import sys

README = pathlib.Path(__file__).resolve().parents[3] / "README.md"


def test_the_readme_example_runs(tmp_path):
    text = README.read_text()
    section = text.split("## From Python", 1)[1]
    example = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    assert len(example.strip().splitlines()) <= 20
    out = subprocess.run([sys.executable, "-c", example], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["sent to ada@example.com", "sent to linus@example.com",
                                       "EmailSent"]
