// The supervisor's own program (see supervisor.ts): a real python file, src/sandbox/py/supervisor.py,
// whose header says what it does and the one-line requests it serves.
import { asset } from "../core/assets.js";

export const SUPERVISOR_SCRIPT = asset("sandbox/py/supervisor.py");
