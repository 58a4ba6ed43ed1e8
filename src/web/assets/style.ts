// The dashboard's and the static viewer's stylesheet (style.css).
import { asset } from "../../core/assets.js";

export const STYLE_CSS = asset("web/assets/style.css");
