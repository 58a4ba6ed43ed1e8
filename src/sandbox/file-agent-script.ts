// The file agent's own program (see file-agent.ts and its protocol in agent-protocol.ts): a real
// python file, src/sandbox/py/file_agent.py.
import { asset } from "../assets.js";

export const AGENT_SCRIPT = asset("sandbox/py/file_agent.py");
