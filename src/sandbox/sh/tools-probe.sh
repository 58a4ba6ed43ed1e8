# tools-probe.sh: asks the image, once per sandbox, what the repo's load through the file agent
# needs (src/sandbox/sandbox.ts, probeTools): tar, and GNU head (whose `head -c` reads no further
# than asked, so a command's stdin can be split with it; busybox's may read on). Run as the agent.
#
# Arguments: none.
# Environment: none read.
# Prints: nothing.
# Exit status: 0 both there; 4 tar but no GNU head; 3 no tar.
command -v tar >/dev/null || exit 3; head --version 2>/dev/null | grep -q 'GNU coreutils' || exit 4
