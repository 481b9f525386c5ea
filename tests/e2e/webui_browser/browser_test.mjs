// Drives the chat page of a running `syv serve` (the demo model) in Debian's chromium, headless,
// through puppeteer-core. Env: SYV_URL (http://127.0.0.1:PORT), SYV_KEY (a valid key),
// SYV_MODEL (served model name), CHROMIUM (the browser's path), SYV_SHOTS (a folder for the
// screenshots). Prints one line per check and "N passed, M failed"; stops at the first failure
// (later checks build on earlier ones).
import assert from "node:assert/strict";
import fs from "node:fs";
import puppeteer from "puppeteer-core";

const url = process.env.SYV_URL;
const key = process.env.SYV_KEY;
const model = process.env.SYV_MODEL;
const shots = process.env.SYV_SHOTS;
fs.rmSync(shots, { recursive: true, force: true });  // no stale screenshot of an earlier run
fs.mkdirSync(shots, { recursive: true });
let passed = 0;
let failed = 0;

const browser = await puppeteer.launch({
  executablePath: process.env.CHROMIUM,
  headless: true,
  // --no-sandbox: CI containers run as root, where chromium's sandbox cannot start.
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,860"],
  defaultViewport: { width: 1280, height: 860 },
  timeout: 120000,  // ctest -j runs this beside the other tests, sanitizer builds included
});
const page = await browser.newPage();
page.setDefaultTimeout(60000);
const pageErrors = [];
const foreign = [];
page.on("pageerror", (e) => pageErrors.push(String(e)));
// The browser logs every non-2xx answer ("Failed to load resource"); the 401 of the wrong key is
// one on purpose. Anything else (a script error, a CSP violation) fails the test.
page.on("console", (m) => {
  if (m.type() === "error" && !m.text().startsWith("Failed to load resource")) pageErrors.push(m.text());
});
page.on("request", (r) => { if (!r.url().startsWith(url) && !r.url().startsWith("data:")) foreign.push(r.url()); });

async function metric(name) {
  const res = await fetch(`${url}/metrics`, { headers: { Authorization: `Bearer ${key}` } });
  const m = (await res.text()).match(new RegExp(`^${name} ([0-9.e+-]+)$`, "m"));
  return m ? Number(m[1]) : NaN;
}
const text = (sel) => page.$eval(sel, (e) => e.textContent);
const count = (sel) => page.$$eval(sel, (e) => e.length);
async function setField(sel, value) {
  await page.$eval(sel, (e, v) => {
    e.value = v;
    e.dispatchEvent(new Event("change"));
  }, value);
}
// Waits until the reply being streamed has ended (the Stop button is disabled again).
const replyDone = () => page.waitForFunction(() => document.getElementById("stop").disabled &&
  !document.querySelector(".cursor"), { timeout: 120000 });

async function check(name, fn) {
  if (failed) return;
  try {
    await fn();
    passed++;
    console.log(`ok - ${name}`);
  } catch (e) {
    failed++;
    console.log(`not ok - ${name}: ${e && e.stack ? e.stack : e}`);
    await page.screenshot({ path: `${shots}/webui-failure.png` }).catch(() => {});
  }
}

await check("the page loads without a key and asks for one", async () => {
  const res = await page.goto(url + "/", { waitUntil: "load" });
  assert.equal(res.status(), 200);
  assert.equal(await page.title(), "syv chat");
  await page.waitForSelector("#banner:not([hidden])");
  assert.match(await text("#banner"), /API key/);
});

await check("a wrong key gets the 401 message", async () => {
  await setField("#key", "sk-wrong-key");
  await page.waitForFunction(() => /401/.test(document.getElementById("banner").textContent));
});

await check("the right key names the model", async () => {
  await setField("#key", key);
  await page.waitForFunction((m) => document.getElementById("model").textContent.includes(m), {}, model);
  assert.equal(await page.$eval("#banner", (e) => e.hidden), true);
});

await check("a message gets a streamed reply with its numbers", async () => {
  // The demo model's random weights repeat "\n" at low temperatures; at 2 it writes words. A
  // seed makes them the same words every run (unseeded, a reply of only newlines came once).
  await setField("#temperature", "2");
  await setField("#top-p", "1");
  await setField("#max-tokens", "24");
  await setField("#seed", "7");
  await page.type("#input", "Hello there");
  await page.keyboard.press("Enter");
  await page.waitForSelector(".msg.assistant");
  await replyDone();
  assert.equal(await count(".msg"), 2);
  assert.equal(await text(".msg.user .content"), "Hello there");
  assert.ok((await text(".msg.assistant .content")).length > 0, "empty reply");
  const meta = await text(".msg.assistant .meta");
  assert.match(meta, /\d+ tokens · TTFT \d+ ms · [\d.]+ tok\/s · prompt \d+ \(\d+ cached\)/);
  assert.equal(await text("#conversations li.active span"), "Hello there");
});

await check("stop mid-stream cancels the request on the server", async () => {
  await setField("#max-tokens", "3000");
  await page.type("#input", "Tell me a long story");
  await page.click("#send");
  // Text is on the page while the reply is still streaming.
  await page.waitForFunction(() => {
    const c = document.querySelectorAll(".msg.assistant .content");
    const last = c[c.length - 1];
    return c.length === 2 && last.classList.contains("cursor") && last.textContent.length > 20;
  }, { timeout: 60000 });
  assert.equal(await metric("syv_requests_running"), 1);
  await page.click("#stop");
  await replyDone();
  const deadline = Date.now() + 10000;
  let running;
  while ((running = await metric("syv_requests_running")) !== 0 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.equal(running, 0, "syv_requests_running after stop");
  assert.match(await text(".msg.assistant:last-of-type .meta"), /stopped/);
  await page.screenshot({ path: `${shots}/webui.png` });
});

await check("regenerate replaces the last reply", async () => {
  await setField("#max-tokens", "8");
  await page.click(".msg.assistant:last-of-type .regenerate");
  await replyDone();
  assert.equal(await count(".msg"), 4);
  assert.doesNotMatch(await text(".msg.assistant:last-of-type .meta"), /stopped/);
});

await check("edit-and-resend replaces the conversation from that message on", async () => {
  await page.click(".msg.user .actions button");  // Edit on the first message
  await page.$eval(".msg.user textarea.edit", (e) => { e.value = "Hello again, edited"; });
  await page.click(".msg.user .save");
  await page.waitForSelector(".msg.assistant");
  await replyDone();
  assert.equal(await count(".msg"), 2);
  assert.equal(await text(".msg.user .content"), "Hello again, edited");
});

await check("a reload keeps the key, the settings and the conversation", async () => {
  await setField("#system", "You are terse.");
  await page.reload({ waitUntil: "load" });
  await page.waitForSelector(".msg.assistant .meta");
  assert.equal(await count(".msg"), 2);
  assert.equal(await text(".msg.user .content"), "Hello again, edited");
  assert.equal(await page.$eval("#key", (e) => e.value), key);
  assert.equal(await page.$eval("#system", (e) => e.value), "You are terse.");
  assert.equal(await page.$eval("#max-tokens", (e) => e.value), "8");
  assert.equal(await page.$eval("#seed", (e) => e.value), "7");
  await page.click("#stats-panel summary");
  await page.waitForFunction(() => /running/.test(document.getElementById("stats").textContent));
  await page.screenshot({ path: `${shots}/webui-reload.png` });
});

await check("tools and a system prompt are sent as fields the server accepts; bad tools JSON is named", async () => {
  await setField("#tools", "[{\"type\":\"function\",\"function\":{\"name\":\"get_time\"," +
    "\"parameters\":{\"type\":\"object\",\"properties\":{}}}}]");
  await page.type("#input", "What time is it?");
  await page.keyboard.press("Enter");
  await replyDone();
  assert.equal(await page.$eval("#banner", (e) => e.hidden), true, await text("#banner"));
  assert.equal(await count(".msg"), 4);
  assert.match(await text(".msg.assistant:last-of-type .meta"), /\d+ tokens/);
  await setField("#tools", "[not json");
  await page.type("#input", "Again");
  await page.keyboard.press("Enter");
  await page.waitForFunction(() => /Tools: not valid JSON/.test(document.getElementById("banner").textContent));
  await setField("#tools", "");
});

await check("markup in a reply shows as text; reasoning collapsed; tool calls shown", async () => {
  const reply = "<img src=x onerror=\"window.__xss=1\"> and <script>window.__xss=2</script>\n\n" +
    "**bold** `code` [link](javascript:window.__xss=3)\n\n```html\n<b onclick=x>hi</b>\n```";
  await page.evaluate((content) => {
    const conv = { id: "xss", title: "crafted", updated: Date.now(), messages: [
      { role: "user", content: "<img src=x onerror=\"window.__xss=4\">" },
      { role: "assistant", content, reasoning: "<img src=y onerror=\"window.__xss=5\">",
        tool_calls: [{ id: "call_1", type: "function",
          function: { name: "get_time", arguments: "{\"tz\":\"<img src=z onerror=alert(1)>\"}" } }] },
    ] };
    const all = JSON.parse(localStorage.getItem("syv.conversations"));
    localStorage.setItem("syv.conversations", JSON.stringify([conv, ...all]));
    localStorage.setItem("syv.current", JSON.stringify("xss"));
  }, reply);
  await page.reload({ waitUntil: "load" });
  await page.waitForSelector(".msg.assistant");
  assert.equal(await count("#messages img, #messages script, #messages b"), 0);
  assert.equal(await page.evaluate(() => window.__xss), undefined);
  const content = await text(".msg.assistant .content");
  assert.ok(content.includes("<img src=x onerror=\"window.__xss=1\">"), content);
  assert.ok(content.includes("<script>window.__xss=2</script>"), content);
  assert.equal(await text(".msg.assistant strong"), "bold");
  assert.equal(await text(".msg.assistant pre code"), "<b onclick=x>hi</b>");
  assert.equal(await count(".msg.assistant a"), 0, "a javascript: link became a link");
  assert.equal(await page.$eval(".msg.assistant details.reasoning", (e) => e.open), false);
  assert.match(await text(".msg.assistant details.tool-call"), /get_time[\s\S]*<img src=z/);
  assert.match(await text(".msg.user .content"), /^<img src=x onerror=/);
  await page.screenshot({ path: `${shots}/webui-markup.png` });
});

await check("no page errors, nothing fetched from another origin", async () => {
  assert.deepEqual(pageErrors, []);
  assert.deepEqual(foreign, []);
});

await browser.close();
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
