// The Messages API's rules for a request's tools, as the tests check the list the model receives:
// unique names of its pattern; a client tool has an input_schema of type object and nothing but
// name, description, input_schema, cache_control; a built-in tool has its type and name (and its
// own options) only.
export function toolRuleProblems(tools: any[]): string[] {
  const problems: string[] = [];
  const names = tools.map((t) => t.name);
  if (new Set(names).size !== names.length) problems.push(`names not unique: ${names.join(",")}`);
  for (const t of tools) {
    if (typeof t.name !== "string" || !/^[a-zA-Z0-9_-]{1,64}$/.test(t.name)) problems.push(`bad name ${t.name}`);
    if (t.type !== undefined && t.type !== "custom") {
      if (Object.keys(t).some((k) => !["type", "name", "cache_control", "max_characters"].includes(k)))
        problems.push(`built-in ${t.name} has extra keys`);
      continue;
    }
    if (Object.keys(t).some((k) => !["type", "name", "description", "input_schema", "cache_control"].includes(k)))
      problems.push(`${t.name} has extra keys`);
    if (t.input_schema === null || typeof t.input_schema !== "object" || t.input_schema.type !== "object")
      problems.push(`${t.name}: input_schema.type is not object`);
    if (t.description !== undefined && typeof t.description !== "string")
      problems.push(`${t.name}: description not a string`);
  }
  return problems;
}
