// The HTTP API's zod registry: the components of its OpenAPI document (schemas with an `id`) and
// the descriptions of the fields (`.register(apiRegistry, { description })`). Its own, not zod's
// global one, so nothing else in the process adds to the document or clashes with its ids.
import { z } from "zod";

export const apiRegistry = z.registry<{ id?: string; description?: string }>();
