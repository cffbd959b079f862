"""conftest.py — the tests import this tree's package (python/), whatever is installed; the library
is the one TG_LIB names (scripts/test.sh: the build it made), else the package's own lookup."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
