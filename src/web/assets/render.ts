// The transcript renderer's script (transcript.js, plain browser JavaScript in a file of its own).
import { asset } from "../../core/assets.js";

export const RENDER_JS = asset("web/assets/transcript.js");
