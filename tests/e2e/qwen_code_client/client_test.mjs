// The @qwen-code/qwen-code agent against syv (issue 22): one non-interactive prompt whose tool
// round trip is forced by a loopback proxy (forcing_proxy.mjs), because a tiny model cannot decide
// to call a tool. The proxy forwards every request to syv; only syv's reply to the first chat completion is
// replaced, by a read_file call. qwen-code then runs the tool, sends its result back with the call,
// and prints syv's answer to that: the checks below compare what each side saw.
// Env: SYV_URL, SYV_KEY, SYV_MODEL (client_checks.mjs), SYV_WORK_DIR (a folder the run may empty
// and fill: qwen-code's HOME and project), SYV_CONTEXT (the served model's window, in tokens).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

import { check, finish } from '../client_checks.mjs';
import { replyContent, startForcingProxy } from './forcing_proxy.mjs';
import { finalResult, runQwenCode } from './run_qwen_code.mjs';

const kFileName = 'note.txt';
const kFileText = 'The syv-qwen-code marker is 7f3a9c.\n';
const kCallId = 'call_forced_by_proxy_0';
const kMaxTokens = 64;

for (const name of ['SYV_URL', 'SYV_KEY', 'SYV_MODEL', 'SYV_WORK_DIR', 'SYV_CONTEXT']) {
  if (!process.env[name]) throw new Error(`${name} is not set (see the top of client_test.mjs)`);
}
const workDir = process.env.SYV_WORK_DIR;
if (!path.isAbsolute(workDir)) throw new Error(`SYV_WORK_DIR must be an absolute path: ${workDir}`);
// read_file takes an absolute path inside the project folder.
const filePath = path.join(workDir, 'project', kFileName);
const proxy = await startForcingProxy({
  syvUrl: process.env.SYV_URL,
  syvKey: process.env.SYV_KEY,
  toolCall: { id: kCallId, name: 'read_file', arguments: JSON.stringify({ file_path: filePath }) },
});

const run = await runQwenCode({
  workDir,
  baseUrl: `${proxy.url}/v1`,
  model: process.env.SYV_MODEL,
  systemPrompt: 'You are a coding agent. Use the tools to answer.',
  prompt: `Read ${kFileName} and say what it holds.`,
  files: { [kFileName]: kFileText },
  maxTokens: kMaxTokens,
  contextWindow: Number(process.env.SYV_CONTEXT),
  timeoutMs: 180_000,
});
await proxy.close();
const [first, second] = proxy.exchanges;
// What each side saw, kept for a failure's reader: the requests, syv's replies, qwen-code's output.
fs.writeFileSync(path.join(workDir, 'exchanges.json'), JSON.stringify(proxy.exchanges, null, 2));
fs.writeFileSync(path.join(workDir, 'qwen-code.stdout'), run.stdout);
fs.writeFileSync(path.join(workDir, 'qwen-code.stderr'), run.stderr);

await check('qwen-code sent two chat completions through the proxy and nothing else', () => {
  assert.equal(run.timedOut, false, 'qwen-code did not finish within 180 s');
  const routes = proxy.exchanges.map((e) => `${e.method} ${e.url}`);
  assert.deepEqual(routes, ['POST /v1/chat/completions', 'POST /v1/chat/completions'],
    `${routes}\nstderr: ${run.stderr.slice(-3000)}`);
});

await check('the first request: greedy, max_tokens 64, read_file the only tool; syv answered 200', () => {
  assert.equal(first.body.temperature, 0);
  assert.equal(first.body.max_tokens, kMaxTokens);
  assert.deepEqual(first.body.tools.map((t) => t.function.name), ['read_file']);
  assert.equal(first.status, 200, first.replyText);
  assert.equal(first.replaced, true);
});

await check('qwen-code ran read_file: its result went back in a tool message with the call id', () => {
  const tool = second.body.messages.find((m) => m.role === 'tool');
  assert.ok(tool, JSON.stringify(second.body.messages).slice(-3000));
  assert.equal(tool.tool_call_id, kCallId);
  const content = typeof tool.content === 'string' ? tool.content : JSON.stringify(tool.content);
  assert.ok(content.includes(kFileText.trim()), content);
});

await check('the second request carries the assistant message with the forced call', () => {
  const assistant = second.body.messages.find((m) => m.role === 'assistant');
  assert.ok(assistant, JSON.stringify(second.body.messages).slice(-3000));
  assert.equal(assistant.tool_calls.length, 1);
  assert.equal(assistant.tool_calls[0].id, kCallId);
  assert.equal(assistant.tool_calls[0].function.name, 'read_file');
  assert.deepEqual(JSON.parse(assistant.tool_calls[0].function.arguments), { file_path: filePath });
});

await check("syv answered the second request 200 with text of its own (not the proxy's)", () => {
  assert.equal(second.status, 200, second.replyText);
  assert.equal(second.replaced, false);
  assert.notEqual(replyContent(second).trim(), '', second.replyText);
});

await check("qwen-code exited 0 and its final answer is syv's reply to the second request", () => {
  const output = `${run.stdout.slice(-2000)}\n${run.stderr.slice(-3000)}`;
  assert.equal(run.status, 0, `exit ${run.status} ${run.signal ?? ''}\n${output}`);
  const result = finalResult(run.stdout);
  assert.equal(result.is_error, false, JSON.stringify(result));
  assert.equal(result.result, replyContent(second));
});

finish();
