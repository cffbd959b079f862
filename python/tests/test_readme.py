"""test_readme.py — the README's Python example runs and prints what its comment says."""
import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_readme_python_example_runs():
    with open(os.path.join(REPO, "README.md")) as f:
        readme = f.read()
    code = re.search(r"## Python\n.*?```python\n(.*?)```", readme, re.S).group(1)
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.split("\n")
    assert " ".join(lines[0:2]).split() == "[[ 3. 4. 5. 6. ] [ 7.5 8.5 9.5 10.5]]".split()
    assert float(lines[2]) < 0.05  # two points, three weights: the line fits them
