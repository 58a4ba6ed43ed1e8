// Who the agent is inside a box: uid and gid 1000, the image's `agent` user (images/sandbox/Dockerfile
// creates it with this uid), and how root in the sandbox runs a command as it. One place for both,
// so no part of the worker names the agent by a bare number. Pure.

export const AGENT_UID = 1000;
export const AGENT_GID = 1000;
/** The agent as Docker's exec `User` ("uid:gid"). */
export const AGENT_USER = `${AGENT_UID}:${AGENT_GID}`;

/**
 * The argv prefix that makes root in the sandbox run a command as the agent: its uid, gid and only
 * group, and no capability left to inherit (setpriv, util-linux: in the image).
 */
export const AS_AGENT: readonly string[] = [
  "setpriv",
  `--reuid=${AGENT_UID}`,
  `--regid=${AGENT_GID}`,
  `--groups=${AGENT_GID}`,
  "--inh-caps=-all",
];

/** AS_AGENT as a word list for a shell script (its words need no quoting). */
export const AS_AGENT_SH = AS_AGENT.join(" ");
