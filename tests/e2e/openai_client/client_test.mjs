// Drives a running syv server with the official `openai` npm package.
// Env: SYV_URL (http://127.0.0.1:PORT), SYV_KEY (a valid key), SYV_MODEL (served model name).
// Exits non-zero on the first failed check; prints one line per check.
import assert from "node:assert/strict";
import OpenAI from "openai";

const baseURL = `${process.env.SYV_URL}/v1`;
const model = process.env.SYV_MODEL;
const client = new OpenAI({ baseURL, apiKey: process.env.SYV_KEY, maxRetries: 0, timeout: 120000 });
let passed = 0;
let failed = 0;

async function check(name, fn) {
  try {
    await fn();
    passed++;
    console.log(`ok - ${name}`);
  } catch (e) {
    failed++;
    console.log(`not ok - ${name}: ${e && e.stack ? e.stack : e}`);
  }
}

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

console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
