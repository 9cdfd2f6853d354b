import os
import resource
import sys

# appproc (starting and stopping a reference app) lives with the conformance suite.
here = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(here, "..", "conformance"))
sys.path.insert(0, here)

# Thousands of client sockets here, and the app inherits the limit.
_soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
_want = 16384 if _hard == resource.RLIM_INFINITY else min(16384, _hard)
if _soft < _want:
    resource.setrlimit(resource.RLIMIT_NOFILE, (_want, _hard))
