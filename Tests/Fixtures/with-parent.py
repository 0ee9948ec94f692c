# Runs a helper server for the end-to-end tests so that it never outlives
# them: the command dies with this wrapper (PR_SET_PDEATHSIG, so a SIGKILL
# of the wrapper kills it too), and the wrapper ends it when its own parent,
# the test process, goes away (killed, or stopped by Ctrl-C), which left
# nginx and TLS origins running before.
#
#   python3 with-parent.py COMMAND [ARGUMENT...]
import ctypes
import os
import signal
import subprocess
import sys
import time

PR_SET_PDEATHSIG = 1
libc = ctypes.CDLL(None, use_errno=True)


def die_with_the_wrapper():
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


parent = os.getppid()
child = subprocess.Popen(sys.argv[1:], preexec_fn=die_with_the_wrapper)
signal.signal(signal.SIGTERM, lambda number, frame: child.kill())
while child.poll() is None:
    if os.getppid() != parent:
        child.kill()
        break
    time.sleep(0.2)
sys.exit(child.wait())
