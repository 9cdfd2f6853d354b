import os
import sys

# appproc (starting and stopping a reference app) lives with the conformance suite.
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "conformance"))
