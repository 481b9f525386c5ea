// Drives a running syv server with LangChain's ChatOpenAI (`@langchain/openai`), on chat
// completions and with `useResponsesApi` on /v1/responses. For each: invoke, stream (the same
// greedy text), a tool round trip (bindTools with the tool forced, the tool run, its ToolMessage
// sent back, the model answering) and withStructuredOutput (a zod schema, by JSON schema and by
// function calling). The demo model's weights are noise, so the tool call is forced (tool_choice)
// and the object conforms only because syv constrains decoding to the schema.
// Env: SYV_URL, SYV_KEY, SYV_MODEL (../client_checks.mjs).
import assert from "node:assert/strict";
import { ChatOpenAI } from "@langchain/openai";
import { HumanMessage } from "@langchain/core/messages";
import { tool } from "@langchain/core/tools";
import { z } from "zod";
import { check, finish } from "../client_checks.mjs";

const baseURL = `${process.env.SYV_URL}/v1`;
// The bodies LangChain sent, to see what a round trip's second request carried.
const sent = [];
const recordingFetch = (url, init) => {
  if (init && typeof init.body === "string") sent.push(init.body);
  return fetch(url, init);
};
const chat = (useResponsesApi, options) =>
  new ChatOpenAI({
    model: process.env.SYV_MODEL,
    apiKey: process.env.SYV_KEY,
    configuration: { baseURL, fetch: recordingFetch },
    maxRetries: 0,
    useResponsesApi,
    ...options,
  });

const weather = tool(async ({ city }) => `sunny, 21 C in ${city}`, {
  name: "get_weather",
  description: "Weather of a city",
  schema: z.object({ city: z.string().max(12) }),
});
const Pet = z.object({ name: z.string().max(10), legs: z.number().int().min(0).max(8), kind: z.enum(["cat", "dog"]) });

for (const useResponsesApi of [false, true]) {
  const label = useResponsesApi ? "ChatOpenAI useResponsesApi" : "ChatOpenAI";
  const greedy = chat(useResponsesApi, { temperature: 0, maxTokens: 8 });
  let text = null;
  await check(`${label}: invoke`, async () => {
    const m = await greedy.invoke("Say hello");
    assert.equal(typeof m.text, "string");
    assert.ok(m.usage_metadata.input_tokens > 0 && m.usage_metadata.output_tokens > 0, JSON.stringify(m.usage_metadata));
    text = m.text;
  });

  await check(`${label}: stream gives invoke's greedy text`, async () => {
    let all = null;
    for await (const chunk of await greedy.stream("Say hello")) all = all === null ? chunk : all.concat(chunk);
    assert.ok(all !== null);
    if (text !== null) assert.equal(all.text, text);
  });

  await check(`${label}: a tool round trip (forced call, ToolMessage back, answer)`, async () => {
    const model = chat(useResponsesApi, { temperature: 0, maxTokens: 100 });
    const question = new HumanMessage("Weather in Paris?");
    const call = await model.bindTools([weather], { tool_choice: "get_weather" }).invoke([question]);
    assert.equal(call.tool_calls.length, 1, JSON.stringify(call));
    assert.equal(call.tool_calls[0].name, "get_weather");
    assert.equal(typeof call.tool_calls[0].args.city, "string");
    const result = await weather.invoke(call.tool_calls[0]);  // a ToolMessage for that call
    assert.equal(result.tool_call_id, call.tool_calls[0].id);
    const answer = await model.bindTools([weather], { tool_choice: "none" }).invoke([question, call, result]);
    assert.equal(typeof answer.text, "string");
    assert.equal(answer.tool_calls.length, 0);
    const last = sent[sent.length - 1];  // the call and its result went back
    assert.ok(last.includes(call.tool_calls[0].id) && last.includes("sunny, 21 C in"), last);
  });

  for (const method of ["jsonSchema", "functionCalling"]) {
    await check(`${label}: withStructuredOutput (${method}) conforms to its zod schema`, async () => {
      for (const seed of [1, 2]) {
        // The grammar bounds the object (whitespace runs of at most 21 bytes) well below 600 tokens.
        const model = chat(useResponsesApi, { temperature: 1, maxTokens: 600, modelKwargs: { seed } });
        const pet = await model.withStructuredOutput(Pet, { name: "pet", method, strict: true }).invoke("A pet as JSON");
        assert.deepEqual(Object.keys(pet), ["name", "legs", "kind"]);
        assert.ok(Number.isInteger(pet.legs) && pet.legs >= 0 && pet.legs <= 8, String(pet.legs));
        assert.ok(["cat", "dog"].includes(pet.kind), pet.kind);
      }
    });
  }
}

finish();
