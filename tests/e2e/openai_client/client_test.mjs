// Drives a running syv server with the official `openai` npm package.
// Env: SYV_URL (http://127.0.0.1:PORT), SYV_KEY (a valid key), SYV_MODEL (served model name).
// Prints one line per check and exits non-zero when any failed (../client_checks.mjs).
import assert from "node:assert/strict";
import OpenAI from "openai";
import { check, finish } from "../client_checks.mjs";

const baseURL = `${process.env.SYV_URL}/v1`;
const model = process.env.SYV_MODEL;
const client = new OpenAI({ baseURL, apiKey: process.env.SYV_KEY, maxRetries: 0, timeout: 120000 });

await check("models.list names the served model", async () => {
  const list = await client.models.list();
  assert.ok(list.data.some((m) => m.id === model), JSON.stringify(list.data));
});

await check("models.retrieve returns the served model; another id raises NotFoundError", async () => {
  const card = await client.models.retrieve(model);
  assert.equal(card.id, model);
  assert.equal(card.object, "model");
  await assert.rejects(client.models.retrieve("no-such-model"), (e) => {
    assert.ok(e instanceof OpenAI.NotFoundError, String(e));
    assert.equal(e.code, "model_not_found");
    return true;
  });
});

await check("logit_bias +100 on a token makes greedy output repeat it", async () => {
  // The token's id and text from syv's own /tokenize and /detokenize.
  const call = async (path, body) => {
    const res = await fetch(`${process.env.SYV_URL}${path}`, {
      method: "POST",
      headers: { Authorization: `Bearer ${process.env.SYV_KEY}`, "Content-Type": "application/json" },
      body: JSON.stringify(body),
    });
    return res.json();
  };
  const fox = (await call("/tokenize", { prompt: " fox" })).tokens[0];
  const text = (await call("/detokenize", { tokens: [fox] })).prompt;
  const r = await client.completions.create({
    model,
    prompt: "Hello",
    max_tokens: 3,
    temperature: 0,
    logit_bias: { [String(fox)]: 100 },
  });
  assert.equal(r.choices[0].text, text.repeat(3));
  assert.equal(r.usage.completion_tokens, 3);
});

await check("a field syv cannot honour raises BadRequestError naming it", async () => {
  await assert.rejects(
    client.chat.completions.create({
      model,
      messages: [{ role: "user", content: "hi" }],
      max_tokens: 2,
      guided_json: { type: "string", format: "email" },
    }),
    (e) => {
      assert.ok(e instanceof OpenAI.BadRequestError, String(e));
      assert.equal(e.param, "guided_json");
      assert.equal(e.code, "unsupported_parameter");
      return true;
    },
  );
});

let chatText = null;
await check("chat.completions.create (non-streaming)", async () => {
  const r = await client.chat.completions.create({
    model,
    messages: [{ role: "user", content: "Say hello" }],
    max_tokens: 8,
    temperature: 0,
  });
  assert.equal(r.object, "chat.completion");
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].message.role, "assistant");
  assert.equal(typeof r.choices[0].message.content, "string");
  assert.ok(["stop", "length"].includes(r.choices[0].finish_reason));
  assert.ok(r.usage.prompt_tokens > 0);
  assert.ok(r.usage.completion_tokens > 0 && r.usage.completion_tokens <= 8);
  assert.equal(typeof r.usage.prompt_tokens_details.cached_tokens, "number");
  chatText = r.choices[0].message.content;
});

await check("chat.completions.create (streaming) equals non-streaming greedy text", async () => {
  const stream = await client.chat.completions.create({
    model,
    messages: [{ role: "user", content: "Say hello" }],
    max_tokens: 8,
    temperature: 0,
    stream: true,
    stream_options: { include_usage: true },
  });
  let text = "";
  let finish = null;
  let usage = null;
  for await (const chunk of stream) {
    assert.equal(chunk.object, "chat.completion.chunk");
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      if (c.delta.content) text += c.delta.content;
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.ok(finish === "stop" || finish === "length");
  assert.ok(usage && usage.completion_tokens > 0, JSON.stringify(usage));
  if (chatText !== null) assert.equal(text, chatText);
});

await check("completions.create (non-streaming and streaming agree)", async () => {
  const r = await client.completions.create({ model, prompt: "Once upon a time", max_tokens: 6, temperature: 0 });
  assert.equal(r.object, "text_completion");
  assert.equal(typeof r.choices[0].text, "string");
  const stream = await client.completions.create({
    model,
    prompt: "Once upon a time",
    max_tokens: 6,
    temperature: 0,
    stream: true,
  });
  let text = "";
  for await (const chunk of stream) for (const c of chunk.choices) text += c.text;
  assert.equal(text, r.choices[0].text);
});

await check("a wrong key raises AuthenticationError (401)", async () => {
  const bad = new OpenAI({ baseURL, apiKey: "sk-wrong-key", maxRetries: 0 });
  await assert.rejects(
    bad.chat.completions.create({ model, messages: [{ role: "user", content: "hi" }], max_tokens: 2 }),
    (e) => {
      assert.ok(e instanceof OpenAI.AuthenticationError, String(e));
      assert.equal(e.status, 401);
      assert.equal(e.code, "invalid_api_key");
      return true;
    },
  );
});

await check("an out-of-range parameter raises BadRequestError naming it", async () => {
  await assert.rejects(
    client.chat.completions.create({ model, messages: [{ role: "user", content: "hi" }], temperature: 5 }),
    (e) => {
      assert.ok(e instanceof OpenAI.BadRequestError, String(e));
      assert.equal(e.status, 400);
      assert.equal(e.param, "temperature");
      return true;
    },
  );
});

await check("response_format json_schema: the demo model's noise comes back as a conforming object", async () => {
  for (const seed of [1, 2]) {
    const r = await client.chat.completions.create({
      model,
      messages: [{ role: "user", content: "A pet as JSON" }],
      max_tokens: 300,
      temperature: 1,
      seed,
      response_format: {
        type: "json_schema",
        json_schema: {
          name: "pet",
          strict: true,
          schema: {
            type: "object",
            properties: {
              name: { type: "string", maxLength: 10 },
              legs: { type: "integer", minimum: 0, maximum: 8 },
              kind: { enum: ["cat", "dog"] },
            },
            required: ["name", "legs", "kind"],
            additionalProperties: false,
          },
        },
      },
    });
    assert.equal(r.choices[0].finish_reason, "stop");
    const pet = JSON.parse(r.choices[0].message.content);
    assert.deepEqual(Object.keys(pet), ["name", "legs", "kind"]);
    assert.equal(typeof pet.name, "string");
    assert.ok(Number.isInteger(pet.legs) && pet.legs >= 0 && pet.legs <= 8, String(pet.legs));
    assert.ok(pet.kind === "cat" || pet.kind === "dog", pet.kind);
  }
});

// The Responses API (client.responses): the same conversation as on chat gives the same greedy text.
let responsesText = null;
await check("responses.create (non-streaming) answers as chat does", async () => {
  const r = await client.responses.create({
    model,
    instructions: "Be brief.",
    input: "Say hello",
    max_output_tokens: 8,
    temperature: 0,
  });
  assert.equal(r.object, "response");
  assert.ok(r.id.startsWith("resp_"), r.id);
  assert.ok(r.status === "completed" || r.status === "incomplete", r.status);
  assert.equal(typeof r.output_text, "string");
  assert.ok(r.usage.input_tokens > 0 && r.usage.output_tokens > 0, JSON.stringify(r.usage));
  assert.equal(typeof r.usage.input_tokens_details.cached_tokens, "number");
  const chat = await client.chat.completions.create({
    model,
    messages: [
      { role: "system", content: "Be brief." },
      { role: "user", content: "Say hello" },
    ],
    max_tokens: 8,
    temperature: 0,
  });
  assert.equal(r.usage.input_tokens, chat.usage.prompt_tokens);
  assert.equal(r.output_text, chat.choices[0].message.content ?? "");
  responsesText = r.output_text;
});

await check("responses.create (streaming): the event sequence, the same text", async () => {
  const stream = await client.responses.create({
    model,
    instructions: "Be brief.",
    input: "Say hello",
    max_output_tokens: 8,
    temperature: 0,
    stream: true,
  });
  const types = [];
  let text = "";
  let final = null;
  let seq = 0;
  for await (const event of stream) {
    types.push(event.type);
    assert.equal(event.sequence_number, seq++);
    if (event.type === "response.output_text.delta") text += event.delta;
    if (event.type === "response.completed" || event.type === "response.incomplete") final = event.response;
  }
  assert.equal(types[0], "response.created");
  assert.equal(types[1], "response.in_progress");
  assert.ok(final !== null, types.join(","));
  assert.equal(types[types.length - 1], `response.${final.status}`);
  if (responsesText !== null) assert.equal(text, responsesText);
  assert.ok(final.usage.output_tokens > 0);
});

const weatherTool = {
  type: "function",
  name: "get_weather",
  description: "Weather of a city",
  parameters: {
    type: "object",
    properties: { city: { type: "string", maxLength: 12 } },
    required: ["city"],
    additionalProperties: false,
  },
};

await check("responses: a forced function call, its output sent back (input items and previous_response_id)", async () => {
  const first = await client.responses.create({
    model,
    input: [{ role: "user", content: [{ type: "input_text", text: "Weather in Paris?" }] }],
    tools: [weatherTool],
    tool_choice: { type: "function", name: "get_weather" },
    max_output_tokens: 200,
    temperature: 1,
    seed: 3,
  });
  assert.equal(first.status, "completed", JSON.stringify(first));
  const calls = first.output.filter((item) => item.type === "function_call");
  assert.equal(calls.length, 1, JSON.stringify(first.output));
  assert.equal(calls[0].name, "get_weather");
  assert.ok(calls[0].call_id.startsWith("call_"), calls[0].call_id);
  const args = JSON.parse(calls[0].arguments);
  assert.deepEqual(Object.keys(args), ["city"]);
  assert.equal(typeof args.city, "string");
  const result = { type: "function_call_output", call_id: calls[0].call_id, output: "sunny, 21 C" };
  // The whole conversation sent back as items (what stateless clients do) ...
  const whole = await client.responses.create({
    model,
    input: [
      { role: "user", content: [{ type: "input_text", text: "Weather in Paris?" }] },
      ...first.output,
      result,
    ],
    tools: [weatherTool],
    max_output_tokens: 4,
    temperature: 0,
    store: false,
  });
  assert.ok(whole.status === "completed" || whole.status === "incomplete", whole.status);
  assert.equal(whole.store, false);
  // ... and chained by id: the same prompt, so the same greedy answer.
  const chained = await client.responses.create({
    model,
    previous_response_id: first.id,
    input: [result],
    tools: [weatherTool],
    max_output_tokens: 4,
    temperature: 0,
  });
  assert.equal(chained.previous_response_id, first.id);
  assert.equal(chained.usage.input_tokens, whole.usage.input_tokens);
  assert.equal(chained.output_text, whole.output_text);
  const stored = await client.responses.retrieve(chained.id);
  assert.equal(stored.id, chained.id);
  await assert.rejects(
    client.responses.create({ model, previous_response_id: whole.id, input: "again" }),
    (e) => {
      assert.ok(e instanceof OpenAI.BadRequestError, String(e));
      assert.equal(e.param, "previous_response_id");
      return true;
    },
  );
});

await check("responses: streamed function call events", async () => {
  const stream = await client.responses.create({
    model,
    input: "Weather in Paris?",
    tools: [weatherTool],
    tool_choice: "required",
    parallel_tool_calls: false,
    max_output_tokens: 200,
    temperature: 0,
    stream: true,
  });
  let args = "";
  let done = null;
  for await (const event of stream) {
    if (event.type === "response.function_call_arguments.delta") args += event.delta;
    if (event.type === "response.function_call_arguments.done") done = event.arguments;
  }
  assert.equal(done, args);
  assert.equal(typeof JSON.parse(args).city, "string");
});

await check("responses: text.format json_schema gives a conforming object", async () => {
  const r = await client.responses.create({
    model,
    input: "A pet as JSON",
    max_output_tokens: 300,
    temperature: 1,
    seed: 5,
    text: {
      format: {
        type: "json_schema",
        name: "pet",
        strict: true,
        schema: {
          type: "object",
          properties: { name: { type: "string", maxLength: 10 }, legs: { type: "integer", minimum: 0, maximum: 8 } },
          required: ["name", "legs"],
          additionalProperties: false,
        },
      },
    },
  });
  assert.equal(r.status, "completed");
  const pet = JSON.parse(r.output_text);
  assert.deepEqual(Object.keys(pet), ["name", "legs"]);
  assert.ok(Number.isInteger(pet.legs) && pet.legs >= 0 && pet.legs <= 8, String(pet.legs));
});

await check("completions: echo + logprobs + max_tokens 0 scores the prompt", async () => {
  const r = await client.completions.create({ model, prompt: "The cat sat on the mat", echo: true, logprobs: 1, max_tokens: 0 });
  const lp = r.choices[0].logprobs;
  assert.equal(r.choices[0].text, "The cat sat on the mat");
  assert.equal(lp.token_logprobs[0], null);
  assert.equal(lp.tokens.join(""), "The cat sat on the mat");
  assert.ok(lp.token_logprobs.slice(1).every((x) => typeof x === "number" && x <= 0));
  assert.equal(r.usage.completion_tokens, 0);
});

await check("completions: streamed echo + logprobs and prompt_logprobs equal the whole answer", async () => {
  const body = { model, prompt: "The cat sat on the mat", echo: true, logprobs: 2, max_tokens: 4, temperature: 0 };
  // prompt_logprobs is vLLM's field: the client passes unknown fields through.
  const whole = await client.completions.create({ ...body, prompt_logprobs: 1 });
  const stream = await client.completions.create({ ...body, prompt_logprobs: 1, stream: true });
  let text = "";
  const lp = { tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] };
  let promptLogprobs = null;
  let carrying = 0;
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      text += c.text;
      if (c.logprobs) for (const key of Object.keys(lp)) lp[key].push(...c.logprobs[key]);
      if (c.prompt_logprobs) {
        promptLogprobs = c.prompt_logprobs;
        carrying++;
      }
    }
  }
  assert.equal(text, whole.choices[0].text);
  assert.deepEqual(lp, whole.choices[0].logprobs);
  assert.equal(carrying, 1);
  assert.deepEqual(promptLogprobs, whole.choices[0].prompt_logprobs);
  assert.equal(lp.token_logprobs[0], null);
});

await check("responses: inputItems.list pages a chain; cancel refused; delete", async () => {
  const first = await client.responses.create({ model, input: "Say hi", max_output_tokens: 4, temperature: 0 });
  const second = await client.responses.create({
    model,
    previous_response_id: first.id,
    input: [{ role: "user", content: "Again" }],
    max_output_tokens: 4,
    temperature: 0,
  });
  const items = [];
  for await (const item of client.responses.inputItems.list(second.id, { limit: 1 })) items.push(item);
  assert.equal(items.length, 1 + first.output.length + 1, JSON.stringify(items));
  assert.deepEqual(items[0].content, [{ type: "input_text", text: "Say hi" }]);
  assert.deepEqual(items.slice(1, 1 + first.output.length), first.output);
  assert.equal(items[items.length - 1].content[0].text, "Again");
  assert.equal(new Set(items.map((i) => i.id)).size, items.length);
  const desc = [];
  for await (const item of client.responses.inputItems.list(second.id, { order: "desc", limit: 2 })) desc.push(item);
  assert.deepEqual(desc.reverse(), items);
  await assert.rejects(client.responses.cancel(first.id), (e) => {
    assert.ok(e instanceof OpenAI.BadRequestError, String(e));
    assert.match(e.message, /Cannot cancel a synchronous response/);
    return true;
  });
  await client.responses.delete(first.id);
  await assert.rejects(client.responses.retrieve(first.id), (e) => e instanceof OpenAI.NotFoundError);
  await assert.rejects(client.responses.delete(first.id), (e) => e instanceof OpenAI.NotFoundError);
  assert.equal((await client.responses.retrieve(second.id)).id, second.id);
});

finish();
