// Drives a running syv server with the Vercel AI SDK (`ai`) through both of its OpenAI providers:
// `@ai-sdk/openai` (its default model calls the Responses API, `.chat()` chat completions) and
// `@ai-sdk/openai-compatible` (chat completions). For each: generateText, streamText (the same
// greedy text), a tool round trip (the model calls a tool, the SDK runs it and sends the result
// back, the model answers) and generateObject (a zod schema). The demo model's weights are noise,
// so the tool call is forced on the first step (toolChoice), and the object conforms only because
// syv constrains decoding to the schema.
// Env: SYV_URL, SYV_KEY, SYV_MODEL (../client_checks.mjs).
import assert from "node:assert/strict";
import { generateObject, generateText, stepCountIs, streamText, tool } from "ai";
import { createOpenAI } from "@ai-sdk/openai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { z } from "zod";
import { check, finish } from "../client_checks.mjs";

// The SDK warns on stderr about settings a provider drops (the Responses API has no seed).
globalThis.AI_SDK_LOG_WARNINGS = false;

const baseURL = `${process.env.SYV_URL}/v1`;
const apiKey = process.env.SYV_KEY;
const modelName = process.env.SYV_MODEL;
const openai = createOpenAI({ baseURL, apiKey });
const compatible = createOpenAICompatible({ name: "syv", baseURL, apiKey, supportsStructuredOutputs: true });

const models = [
  ["@ai-sdk/openai (Responses API)", openai(modelName)],
  ["@ai-sdk/openai .chat()", openai.chat(modelName)],
  ["@ai-sdk/openai-compatible", compatible(modelName)],
];

for (const [label, model] of models) {
  let greedy = null;
  await check(`${label}: generateText`, async () => {
    const r = await generateText({ model, prompt: "Say hello", maxOutputTokens: 8, temperature: 0, maxRetries: 0 });
    assert.equal(typeof r.text, "string");
    assert.ok(["stop", "length"].includes(r.finishReason), r.finishReason);
    assert.ok(r.usage.inputTokens > 0 && r.usage.outputTokens > 0, JSON.stringify(r.usage));
    greedy = r.text;
  });

  await check(`${label}: streamText gives generateText's greedy text`, async () => {
    const r = streamText({ model, prompt: "Say hello", maxOutputTokens: 8, temperature: 0, maxRetries: 0 });
    let text = "";
    for await (const delta of r.textStream) text += delta;
    assert.ok(["stop", "length"].includes(await r.finishReason));
    if (greedy !== null) assert.equal(text, greedy);
  });

  await check(`${label}: a tool round trip (forced call, result sent back, answer)`, async () => {
    const calls = [];
    const r = await generateText({
      model,
      prompt: "Weather in Paris?",
      maxOutputTokens: 100,
      temperature: 0,
      maxRetries: 0,
      tools: {
        get_weather: tool({
          description: "Weather of a city",
          inputSchema: z.object({ city: z.string().max(12) }),
          execute: async ({ city }) => {
            calls.push(city);
            return `sunny, 21 C in ${city}`;
          },
        }),
      },
      // Step 0 must call the tool; step 1 answers with its result.
      prepareStep: ({ stepNumber }) =>
        stepNumber === 0 ? { toolChoice: { type: "tool", toolName: "get_weather" } } : { toolChoice: "none" },
      stopWhen: stepCountIs(2),
    });
    assert.equal(r.steps.length, 2, JSON.stringify(r.steps.map((s) => s.finishReason)));
    const [first, second] = r.steps;
    assert.equal(first.finishReason, "tool-calls");
    assert.equal(first.toolCalls.length, 1);
    assert.equal(first.toolCalls[0].toolName, "get_weather");
    assert.equal(typeof first.toolCalls[0].input.city, "string");
    assert.deepEqual(calls, [first.toolCalls[0].input.city]);
    // The second request carried the call and its result; the model answered.
    const sent = JSON.stringify(second.request.body);
    assert.ok(sent.includes(first.toolCalls[0].toolCallId), sent);
    assert.ok(sent.includes("sunny, 21 C in"), sent);
    // The Responses provider names the stored call by reference (store is on by default).
    if (label.includes("Responses")) assert.ok(sent.includes('"item_reference"'), sent);
    assert.ok(["stop", "length"].includes(second.finishReason), second.finishReason);
    assert.equal(second.toolCalls.length, 0);
  });

  await check(`${label}: generateObject conforms to its zod schema`, async () => {
    // The Responses API has no seed (the provider drops it), so a sampled object there would
    // change from run to run and the check with it: that provider decodes greedily, once.
    const seeds = label.includes("Responses") ? [null] : [1, 2];
    for (const seed of seeds) {
      const r = await generateObject({
        model,
        schema: z.object({ name: z.string().max(10), legs: z.number().int().min(0).max(8), kind: z.enum(["cat", "dog"]) }),
        schemaName: "pet",
        prompt: "A pet as JSON",
        // The grammar bounds the object (whitespace runs of at most 21 bytes) well below 600 tokens.
        maxOutputTokens: 600,
        temperature: seed === null ? 0 : 1,
        ...(seed === null ? {} : { seed }),
        maxRetries: 0,
      });
      assert.deepEqual(Object.keys(r.object), ["name", "legs", "kind"]);
      assert.ok(Number.isInteger(r.object.legs) && r.object.legs >= 0 && r.object.legs <= 8, String(r.object.legs));
      assert.ok(["cat", "dog"].includes(r.object.kind), r.object.kind);
    }
  });
}

finish();
