// The scripted server speaks the API the real SDK expects (SSE, errors, retries via
// `retry-after-ms`, aborts, `close()` with open requests).
import Anthropic from "@anthropic-ai/sdk";
import { afterEach, describe, expect, it } from "vitest";
import {
  apiError,
  lastToolResults,
  reply,
  startFakeAnthropic,
  text,
  toolResultText,
  toolUse,
  type FakeAnthropic,
  type Policy,
  type Reply,
} from "../support/fake-anthropic.js";

const MODEL = "claude-test-model";
let fake: FakeAnthropic | undefined;
afterEach(async () => {
  await fake?.close();
  fake = undefined;
});

async function setup(script: Reply[] | Policy) {
  fake = await startFakeAnthropic(script);
  return { fake, client: new Anthropic({ apiKey: "test", baseURL: fake.url, maxRetries: 2 }) };
}
const ask = (content: string) => ({ model: MODEL, max_tokens: 1024, messages: [{ role: "user" as const, content }] });

describe("fake-anthropic with the real SDK", () => {
  it("streams text + tool_use that finalMessage() reconstructs exactly", async () => {
    const input = {
      path: "src/a.ts",
      edits: [{ line: 3, text: 'const x = "ü 🚀";\n' }],
      opts: { dry: false, n: null },
    };
    const content = [
      text("Let me edit that file — with ünïcödé 🚀 and more text."),
      toolUse("edit_file", input, "toolu_abc"),
    ];
    const { fake, client } = await setup([reply(...content)]);

    const events: string[] = [];
    const stream = client.messages.stream(ask("go"));
    stream.on("streamEvent", (e) => events.push(e.type));
    const msg = await stream.finalMessage();

    expect(msg.content).toEqual(content);
    expect(JSON.parse(JSON.stringify(msg.content))).toEqual(content); // lazy input getter serialises too
    expect(msg.stop_reason).toBe("tool_use");
    expect(msg.model).toBe(MODEL);
    expect(msg.usage.output_tokens).toBeGreaterThan(1);
    expect(msg.usage.input_tokens).toBeGreaterThan(0);
    expect(events[0]).toBe("message_start");
    expect(events.at(-1)).toBe("message_stop");
    expect(events.filter((t) => t === "content_block_delta").length).toBeGreaterThan(2);
    expect(fake.requests[0]!.stream).toBe(true);
  });

  it("uses real SSE framing incl. ping (raw fetch)", async () => {
    const { fake } = await setup([reply(text("hi"))]);
    const res = await fetch(`${fake.url}/v1/messages`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ ...ask("x"), stream: true }),
    });
    expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const raw = await res.text();
    const names = [...raw.matchAll(/^event: (\w+)\ndata: (.*)\n\n/gm)].map((m) => {
      expect(JSON.parse(m[2]!).type).toBe(m[1]);
      return m[1];
    });
    expect(names).toEqual([
      "message_start",
      "ping",
      "content_block_start",
      "content_block_delta",
      "content_block_delta",
      "content_block_stop",
      "message_delta",
      "message_stop",
    ]);
  });

  it("answers non-streaming create with a full Message", async () => {
    const { fake, client } = await setup([reply(text("hello"))]);
    const msg = await client.messages.create(ask("hi"));
    expect(msg).toMatchObject({
      type: "message",
      role: "assistant",
      model: MODEL,
      content: [text("hello")],
      stop_reason: "end_turn",
      stop_sequence: null,
    });
    expect(msg.id).toMatch(/^msg_/);
    expect(msg.usage).toEqual(expect.objectContaining({ cache_creation_input_tokens: 0, cache_read_input_tokens: 0 }));
    // SDK 1.14 sends apiKey as a bearer token, not x-api-key.
    expect(fake.requests[0]!.headers.authorization).toBe("Bearer test");
    expect(fake.requests[0]!.stream).toBe(false);
  });

  it("529 then a message: SDK retries quickly and succeeds", async () => {
    const { fake, client } = await setup([{ kind: "error", status: 529 }, reply(text("ok"))]);
    const msg = await client.messages.stream(ask("hi")).finalMessage();
    expect(msg.content).toEqual([text("ok")]);
    expect(fake.requests.length).toBe(2);
    expect(fake.requests[1]!.headers["x-stainless-retry-count"]).toBe("1");
    // Quick because the 529 says retry-after-ms: 1, which beats the SDK's ~0.5 s default backoff.
    const again = await startFakeAnthropic([{ kind: "error", status: 529 }]);
    try {
      const res = await fetch(`${again.url}/v1/messages`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(ask("x")),
      });
      expect(res.status).toBe(529);
      expect(res.headers.get("retry-after-ms")).toBe("1");
      expect((await res.json()).error.type).toBe("overloaded_error");
    } finally {
      await again.close();
    }
  });

  it("429 rate limit retries too; retries stop at maxRetries", async () => {
    const { fake, client } = await setup([apiError(429), apiError(500), apiError(503), reply(text("never"))]);
    const err = await client.messages.create(ask("hi")).catch((e) => e);
    expect(err).toBeInstanceOf(Anthropic.InternalServerError);
    expect(err.status).toBe(503);
    expect(fake.requests.length).toBe(3); // 1 try + 2 retries
  });

  it("400 is thrown (not retried) with status and scripted message", async () => {
    const { fake, client } = await setup([apiError(400, "messages: field required")]);
    const err = await client.messages.create(ask("hi")).catch((e) => e);
    expect(err).toBeInstanceOf(Anthropic.BadRequestError);
    expect(err).toBeInstanceOf(Anthropic.APIError);
    expect(err.status).toBe(400);
    expect(err.message).toContain("messages: field required");
    expect(err.type).toBe("invalid_request_error");
    expect(err.apiMessage).toBe("messages: field required");
    expect(fake.requests.length).toBe(1);
  });

  it("records tools and cache_control, and simulates prompt caching", async () => {
    const { fake, client } = await setup([reply(text("a")), reply(text("b"))]);
    const tools = [
      {
        name: "read_file",
        description: "Read a file",
        input_schema: { type: "object" as const, properties: { path: { type: "string" } } },
      },
    ];
    const system = [
      {
        type: "text" as const,
        text: "You are a careful agent. ".repeat(40),
        cache_control: { type: "ephemeral" as const },
      },
    ];
    const first = await client.messages.create({ ...ask("task"), tools, system });
    const req = fake.requests[0]!.body;
    expect(req.tools).toEqual(tools);
    expect(req.system[0].cache_control).toEqual({ type: "ephemeral" });
    expect(first.usage.cache_read_input_tokens).toBe(0);
    expect(first.usage.cache_creation_input_tokens).toBeGreaterThan(200);

    const second = await client.messages.create({
      model: MODEL,
      max_tokens: 1024,
      tools,
      system,
      messages: [
        { role: "user", content: "task" },
        { role: "assistant", content: "a" },
        { role: "user", content: [{ type: "text", text: "more", cache_control: { type: "ephemeral" } }] },
      ],
    });
    expect(second.usage.cache_read_input_tokens).toBe(first.usage.cache_creation_input_tokens);
    expect(second.usage.cache_creation_input_tokens).toBeGreaterThan(0);
    expect(second.usage.input_tokens).toBe(0); // everything sits before the last breakpoint
  });

  it("script exhaustion fails clearly and is not retried", async () => {
    const { fake, client } = await setup([reply(text("only one"))]);
    await client.messages.create(ask("1"));
    const err = await client.messages.create(ask("2")).catch((e) => e);
    expect(err).toBeInstanceOf(Anthropic.InternalServerError);
    expect(err.message).toContain("fake-anthropic: script exhausted after 1 requests");
    expect(fake.requests.length).toBe(2);
  });

  it("Policy sees every request; tool_result helpers read the last one", async () => {
    const policy: Policy = ({ index, requests }) =>
      index === 0 ? reply(toolUse("run", { cmd: "ls" }, "toolu_1")) : reply(text(`seen ${requests.length}`));
    const { fake, client } = await setup(policy);
    const first = await client.messages.create(ask("list"));
    expect(first.stop_reason).toBe("tool_use");
    const second = await client.messages.create({
      model: MODEL,
      max_tokens: 100,
      messages: [
        { role: "user", content: "list" },
        { role: "assistant", content: first.content },
        {
          role: "user",
          content: [{ type: "tool_result", tool_use_id: "toolu_1", content: [{ type: "text", text: "a.txt" }] }],
        },
      ],
    });
    expect(second.content).toEqual([text("seen 2")]);
    const results = lastToolResults(fake);
    expect(results.map((r) => r.tool_use_id)).toEqual(["toolu_1"]);
    expect(toolResultText(results[0])).toBe("a.txt");
    expect(toolUse("x", {}).id).not.toBe(toolUse("x", {}).id);
  });

  it("delayMs supports abort and timeout; close() does not hang on open requests", async () => {
    const { fake, client } = await setup(() => ({ kind: "message", content: [text("late")], delayMs: 5_000 }));
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 50);
    await expect(client.messages.create(ask("x"), { signal: ac.signal })).rejects.toBeInstanceOf(
      Anthropic.APIUserAbortError,
    );
    await expect(client.messages.create(ask("y"), { timeout: 50, maxRetries: 0 })).rejects.toBeInstanceOf(
      Anthropic.APIConnectionTimeoutError,
    );
    const pending = client.messages.create(ask("z"), { maxRetries: 0 }).catch((e) => e);
    // The request is in (the aborted ones may or may not have reached the server).
    const asked = (t: string) => fake.requests.some((r) => JSON.stringify(r.body.messages).includes(JSON.stringify(t)));
    while (!asked("z")) await new Promise((r) => setTimeout(r, 5));
    // close() does not wait for the 5 s reply: the open request fails instead of getting "late".
    await fake.close();
    expect(await pending).toBeInstanceOf(Anthropic.APIConnectionError);
  });

  it("404s unknown paths", async () => {
    const { fake } = await setup([]);
    const res = await fetch(`${fake.url}/v1/models`, { method: "POST" });
    expect(res.status).toBe(404);
    expect((await res.json()).error.type).toBe("not_found_error");
    expect(fake.requests.length).toBe(0);
  });
});
