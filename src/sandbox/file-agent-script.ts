// The file agent's own program (see file-agent.ts and its protocol in agent-protocol.ts): a real
// python file, src/sandbox/py/file_agent.py, with the root rule of trusted.py in it.
import { asset } from "../core/assets.js";
import { withTrustedRule } from "./trusted.js";

export const AGENT_SCRIPT = withTrustedRule(asset("sandbox/py/file_agent.py"));
