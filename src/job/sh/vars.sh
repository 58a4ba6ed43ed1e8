# vars.sh: the paths and values the worker's git steps in the sandbox share, as shell variables:
# the first part of every script under job/sh/ that runs as root (before git-store.sh), and of
# the checkpoint's apply. Each is also a TypeScript constant (PRIVATE_DIR in src/backend/types.ts;
# STORE, INDEX, INDEX_TREE, REFRESH, ATTRIBUTES in src/job/git-store.ts; LIST_MAX in
# src/job/patch.ts; AGENT_UID, AGENT_GID and AS_AGENT in src/backend/agent-user.ts), and
# test/unit/assets.test.ts holds the two to the same values.
#   PRIVATE_DIR  root's tmpfs (mode 0700), where nothing of the agent's reaches
#   STORE        the private git store (bare), where every tree is hashed; see git-store.sh
#   INDEX        the baseline's index, kept with its stat data (the stat cache)
#   INDEX_TREE   the tree INDEX is the index of; without it INDEX is not trusted
#   REFRESH      "<second the baseline's add began> <baseline tree>" while INDEX awaits its refresh
#   ATTRIBUTES   the store's info/attributes: every content-rewriting attribute off
#   LIST_MAX     the bound on a patch's file list and on its diffstat, in bytes
#   AS_AGENT     the command prefix that runs a command as the agent (uid AGENT_UID, no capability)
#
# Arguments: none.
# Environment: none read.
# Prints: nothing.
# Exit status: 0 (assignments only).
PRIVATE_DIR=/patchbay
STORE=$PRIVATE_DIR/git
INDEX=$PRIVATE_DIR/baseline.index
INDEX_TREE=$PRIVATE_DIR/baseline.tree
REFRESH=$PRIVATE_DIR/baseline.refresh
ATTRIBUTES=$'* -text !eol -filter -ident !diff !merge !working-tree-encoding\n'
LIST_MAX=16777216
AGENT_UID=1000
AGENT_GID=1000
AS_AGENT=(setpriv --reuid=$AGENT_UID --regid=$AGENT_GID --groups=$AGENT_GID --inh-caps=-all)
