// What the Messages API requires of a request's `messages`, as a checker: the problems found, none
// when valid. The first message is the user's; roles alternate; every tool_result answers a
// tool_use of the message just before (and every tool_use of an assistant message that is not the
// last is answered in the next one); tool_use ids are unique in the request.

export function messageProblems(messages: any[]): string[] {
  const problems: string[] = [];
  if (!Array.isArray(messages) || !messages.length) return ["no messages"];
  if (messages[0]?.role !== "user") problems.push("the first message is not the user's");
  const ids = new Set<string>();
  const blocksOf = (m: any): any[] =>
    typeof m?.content === "string" ? [{ type: "text", text: m.content }] : Array.isArray(m?.content) ? m.content : [];
  messages.forEach((m, i) => {
    if (m?.role !== "user" && m?.role !== "assistant") problems.push(`message ${i}: role ${String(m?.role)}`);
    if (i > 0 && messages[i - 1]?.role === m?.role) problems.push(`message ${i}: two ${m?.role} messages in a row`);
    if (!blocksOf(m).length) problems.push(`message ${i}: empty content`);
    const prevUses = new Set(
      blocksOf(messages[i - 1])
        .filter((b) => b?.type === "tool_use" && messages[i - 1]?.role === "assistant")
        .map((b) => b.id),
    );
    for (const b of blocksOf(m)) {
      if (b?.type === "tool_use") {
        if (m.role !== "assistant") problems.push(`message ${i}: tool_use in a user message`);
        if (ids.has(b.id)) problems.push(`message ${i}: tool_use id ${b.id} used twice`);
        ids.add(b.id);
      }
      if (b?.type === "tool_result") {
        if (m.role !== "user") problems.push(`message ${i}: tool_result in an assistant message`);
        if (!prevUses.has(b.tool_use_id))
          problems.push(`message ${i}: tool_result for ${b.tool_use_id} answers no tool_use of the message before`);
      }
    }
    if (m?.role === "assistant" && i < messages.length - 1) {
      const answered = new Set(
        blocksOf(messages[i + 1])
          .filter((b) => b?.type === "tool_result")
          .map((b) => b.tool_use_id),
      );
      for (const b of blocksOf(m))
        if (b?.type === "tool_use" && !answered.has(b.id))
          problems.push(`message ${i}: tool_use ${b.id} has no tool_result in the next message`);
    }
  });
  return problems;
}
