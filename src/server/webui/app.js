// The chat page of `syv serve`. Plain JavaScript, no dependencies, nothing fetched from outside
// this server. The API key, the settings and the conversations live in this browser's
// localStorage; every /v1/* call carries the key (Authorization: Bearer). Model text is put in
// the page with textContent only (markdown.js), never innerHTML.
"use strict";
(function () {
  const $ = (id) => document.getElementById(id);
  const STORE = { key: "syv.key", settings: "syv.settings", conversations: "syv.conversations",
    current: "syv.current" };
  const load = (name, fallback) => {
    try { const v = JSON.parse(localStorage.getItem(name)); return v == null ? fallback : v; }
    catch { return fallback; }
  };
  // A full storage quota loses nothing on the page; it only says so.
  const save = (name, value) => {
    try { localStorage.setItem(name, JSON.stringify(value)); } catch (e) {
      showError("Could not save to the browser's storage (" + e.message + "): delete old conversations.");
    }
  };

  let conversations = load(STORE.conversations, []);  // [{id, title, messages, updated}]
  let currentId = load(STORE.current, null);
  let settings = Object.assign({ system: "", temperature: 0.7, top_p: 0.95, max_tokens: 1024,
    seed: "", tools: "" }, load(STORE.settings, {}));
  let modelId = null;
  let controller = null;  // the AbortController of the reply being streamed

  // ---- storage ----------------------------------------------------------------------------
  const current = () => conversations.find((c) => c.id === currentId) || null;
  function persist() {
    save(STORE.conversations, conversations);
    save(STORE.current, currentId);
  }
  function newConversation() {
    const c = { id: Date.now().toString(36) + Math.random().toString(36).slice(2, 6), title: "",
      messages: [], updated: Date.now() };
    conversations.unshift(c);
    currentId = c.id;
    persist();
    return c;
  }

  // ---- banner and API helpers -------------------------------------------------------------
  function showError(text) {
    $("banner").textContent = text;
    $("banner").hidden = !text;
  }
  function apiKey() { return $("key").value.trim(); }
  function headers() {
    return { "Content-Type": "application/json", "Authorization": "Bearer " + apiKey() };
  }
  // The message of an error answer, with what to do about a 401.
  async function errorText(res) {
    let message = "";
    try { message = (await res.json()).error.message; } catch { /* not JSON */ }
    if (res.status === 401) {
      return "The server refused the API key (401). Paste the key that `syv serve` printed " +
        "into Settings \u2192 API key.";
    }
    return "HTTP " + res.status + (message ? ": " + message : "");
  }
  async function fetchModel() {
    if (!apiKey()) {
      showError("Enter the API key that `syv serve` printed (Settings \u2192 API key).");
      return null;
    }
    const res = await fetch("/v1/models", { headers: headers() });
    if (!res.ok) { showError(await errorText(res)); return null; }
    const body = await res.json();
    modelId = body.data && body.data[0] ? body.data[0].id : null;
    $("model").textContent = modelId ? "syv \u00b7 " + modelId : "syv";
    showError("");
    return modelId;
  }

  // ---- rendering --------------------------------------------------------------------------
  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text != null) e.textContent = text;
    return e;
  }
  function button(label, onClick, cls) {
    const b = el("button", cls, label);
    b.type = "button";
    b.addEventListener("click", onClick);
    return b;
  }
  function renderList() {
    const ul = $("conversations");
    ul.replaceChildren();
    for (const c of conversations) {
      const li = el("li", c.id === currentId ? "active" : "");
      li.appendChild(el("span", "", c.title || "New chat"));
      li.title = c.title || "New chat";
      li.addEventListener("click", () => {
        if (controller) return;
        currentId = c.id; persist(); renderAll();
      });
      li.appendChild(button("\u00d7", (ev) => {
        ev.stopPropagation();
        if (controller && c.id === currentId) return;
        conversations = conversations.filter((x) => x.id !== c.id);
        if (currentId === c.id) currentId = conversations.length ? conversations[0].id : null;
        persist(); renderAll();
      }, "delete"));
      ul.appendChild(li);
    }
  }
  // Reasoning: reasoning_content from the server, or a <think> block left in the text.
  function splitThink(m) {
    let reasoning = m.reasoning || "";
    let content = m.content || "";
    const t = content.match(/^\s*<think>([\s\S]*?)(<\/think>|$)/);
    if (t) { reasoning += t[1]; content = content.slice(t[0].length).replace(/^\n+/, ""); }
    return { reasoning, content };
  }
  function formatStats(s) {
    const parts = [];
    if (s.completion_tokens != null) parts.push(s.completion_tokens + " tokens");
    if (s.ttft_ms != null) parts.push("TTFT " + Math.round(s.ttft_ms) + " ms");
    if (s.tokens_per_s != null) parts.push(s.tokens_per_s.toFixed(1) + " tok/s");
    if (s.prompt_tokens != null) {
      parts.push("prompt " + s.prompt_tokens + " (" + (s.cached_tokens || 0) + " cached)");
    }
    if (s.finish_reason) parts.push(s.finish_reason);
    return parts.join(" \u00b7 ");
  }
  function renderMessage(m, index, conv) {
    const box = el("div", "msg " + m.role);
    box.dataset.index = index;
    box.appendChild(el("div", "role", m.role));
    const { reasoning, content } = splitThink(m);
    if (reasoning) {
      const d = el("details", "reasoning");
      d.appendChild(el("summary", "", m.streaming && !content ? "Thinking\u2026" : "Reasoning"));
      d.appendChild(el("div", "text", reasoning));
      box.appendChild(d);
    }
    const body = el("div", "content" + (m.streaming ? " cursor" : ""));
    body.appendChild(window.syvMarkdown.render(content));
    box.appendChild(body);
    for (const call of m.tool_calls || []) {
      const d = el("details", "tool-call");
      d.open = true;
      d.appendChild(el("summary", "", "Tool call: " + (call.function && call.function.name)));
      const pre = el("pre");
      let args = call.function && call.function.arguments;
      try { args = JSON.stringify(JSON.parse(args), null, 2); } catch { /* shown as sent */ }
      pre.appendChild(el("code", "", args));
      d.appendChild(pre);
      box.appendChild(d);
    }
    if (m.stats) box.appendChild(el("div", "meta", formatStats(m.stats)));
    if (!controller) {
      const actions = el("div", "actions");
      if (m.role === "user") actions.appendChild(button("Edit", () => editMessage(box, conv, index)));
      if (m.role === "assistant" && index === conv.messages.length - 1) {
        actions.appendChild(button("Regenerate", () => regenerate(conv), "regenerate"));
      }
      if (actions.childElementCount) box.appendChild(actions);
    }
    return box;
  }
  function renderMessages() {
    const conv = current();
    const list = $("messages");
    const atBottom = list.scrollHeight - list.scrollTop - list.clientHeight < 40;
    list.replaceChildren();
    if (conv) conv.messages.forEach((m, i) => list.appendChild(renderMessage(m, i, conv)));
    if (atBottom || controller) list.scrollTop = list.scrollHeight;
  }
  function renderAll() {
    renderList();
    renderMessages();
    $("send").disabled = !!controller;
    $("stop").disabled = !controller;
  }
  let frame = 0;  // one redraw per animation frame while streaming
  function scheduleRender() {
    if (!frame) frame = requestAnimationFrame(() => { frame = 0; renderMessages(); });
  }

  // ---- editing ----------------------------------------------------------------------------
  function editMessage(box, conv, index) {
    const area = el("textarea", "edit");
    area.value = conv.messages[index].content;
    const actions = el("div", "actions");
    actions.appendChild(button("Save & send", () => {
      const text = area.value.trim();
      if (!text) return;
      conv.messages = conv.messages.slice(0, index);
      conv.messages.push({ role: "user", content: text });
      if (index === 0) conv.title = text.slice(0, 60);
      persist();
      generate(conv);
    }, "save"));
    actions.appendChild(button("Cancel", renderMessages));
    box.replaceChildren(el("div", "role", "user"), area, actions);
    area.focus();
  }
  function regenerate(conv) {
    const last = conv.messages[conv.messages.length - 1];
    if (last && last.role === "assistant") conv.messages.pop();
    persist();
    generate(conv);
  }

  // ---- the request ------------------------------------------------------------------------
  function requestBody(conv) {
    const messages = [];
    if (settings.system.trim()) messages.push({ role: "system", content: settings.system });
    for (const m of conv.messages) {
      const out = { role: m.role, content: splitThink(m).content };
      if (m.tool_calls && m.tool_calls.length) out.tool_calls = m.tool_calls;
      messages.push(out);
    }
    // Only fields syv supports (it refuses unknown ones with 400).
    const body = { model: modelId, messages, stream: true, stream_options: { include_usage: true } };
    const num = (v) => (v === "" || v == null || Number.isNaN(Number(v)) ? null : Number(v));
    if (num(settings.temperature) != null) body.temperature = num(settings.temperature);
    if (num(settings.top_p) != null) body.top_p = num(settings.top_p);
    if (num(settings.max_tokens) != null) body.max_tokens = Math.round(num(settings.max_tokens));
    if (num(settings.seed) != null) body.seed = Math.round(num(settings.seed));
    if (settings.tools.trim()) body.tools = JSON.parse(settings.tools);
    return body;
  }

  // Reads an SSE body, calling onEvent(json) for each `data:` event until [DONE].
  async function readEvents(res, onEvent) {
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const event = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        for (const line of event.split("\n")) {
          if (!line.startsWith("data:")) continue;  // ": keep-alive" comments
          const data = line.slice(5).trim();
          if (data === "[DONE]") return;
          onEvent(JSON.parse(data));
        }
      }
    }
  }

  async function generate(conv) {
    if (controller) return;
    showError("");
    try {
      if (!modelId && !(await fetchModel())) return;
    } catch (e) {
      showError("Cannot reach the server: " + e.message);
      return;
    }
    let body;
    try { body = requestBody(conv); } catch (e) {
      showError("Tools: not valid JSON (" + e.message + ")");
      return;
    }
    const reply = { role: "assistant", content: "", reasoning: "", tool_calls: [], streaming: true,
      stats: {} };
    conv.messages.push(reply);
    conv.updated = Date.now();
    controller = new AbortController();
    renderAll();
    const t0 = performance.now();
    let tFirst = null;
    let chunks = 0;
    try {
      const res = await fetch("/v1/chat/completions", { method: "POST", headers: headers(),
        body: JSON.stringify(body), signal: controller.signal });
      if (!res.ok) throw new Error(await errorText(res));
      await readEvents(res, (chunk) => {
        if (chunk.usage) {
          reply.stats.prompt_tokens = chunk.usage.prompt_tokens;
          reply.stats.completion_tokens = chunk.usage.completion_tokens;
          const details = chunk.usage.prompt_tokens_details;
          reply.stats.cached_tokens = details ? details.cached_tokens : 0;
        }
        for (const choice of chunk.choices || []) {
          const d = choice.delta || {};
          if (d.content || d.reasoning_content || d.tool_calls) {
            if (tFirst == null) {
              tFirst = performance.now();
              reply.stats.ttft_ms = tFirst - t0;
            }
            chunks++;
          }
          if (d.content) reply.content += d.content;
          if (d.reasoning_content) reply.reasoning += d.reasoning_content;
          if (d.tool_calls) reply.tool_calls.push(...d.tool_calls);
          if (choice.finish_reason) reply.stats.finish_reason = choice.finish_reason;
        }
        scheduleRender();
      });
    } catch (e) {
      if (e.name === "AbortError") {
        reply.stats.finish_reason = "stopped";
      } else {
        showError(e.message);
        reply.stats.finish_reason = "error";
      }
    } finally {
      const tEnd = performance.now();
      const n = reply.stats.completion_tokens != null ? reply.stats.completion_tokens : chunks;
      reply.stats.completion_tokens = n;
      // Decode speed: tokens after the first over the time after the first.
      if (tFirst != null && n > 1 && tEnd > tFirst) {
        reply.stats.tokens_per_s = (n - 1) / ((tEnd - tFirst) / 1000);
      }
      delete reply.streaming;
      if (!reply.tool_calls.length) delete reply.tool_calls;
      controller = null;
      persist();
      renderAll();
    }
  }

  function send() {
    const text = $("input").value.trim();
    if (!text || controller) return;
    const conv = current() || newConversation();
    if (!conv.messages.length) conv.title = text.slice(0, 60);
    conv.messages.push({ role: "user", content: text });
    $("input").value = "";
    persist();
    generate(conv);
  }

  // ---- server numbers (/metrics) ----------------------------------------------------------
  async function refreshStats() {
    if (!$("stats-panel").open || !apiKey()) return;
    try {
      const res = await fetch("/metrics", { headers: headers() });
      if (!res.ok) return;
      const m = {};
      for (const line of (await res.text()).split("\n")) {
        const p = line.match(/^([a-z_]+) ([0-9.e+-]+)$/);
        if (p) m[p[1]] = Number(p[2]);
      }
      const rows = [["running", m.syv_requests_running], ["waiting", m.syv_requests_waiting]];
      const used = m.syv_kv_pages_used, free = m.syv_kv_pages_free;
      if (used != null && free != null) {
        rows.push(["KV pages", used + " / " + (used + free) + " (" +
          (100 * used / Math.max(1, used + free)).toFixed(1) + "%)"]);
      }
      const hit = m.syv_prefix_cache_hit_tokens_total, query = m.syv_prefix_cache_query_tokens_total;
      if (query != null) {
        rows.push(["prefix hits", query ? (100 * hit / query).toFixed(1) + "% of " + query + " tokens" : "-"]);
      }
      // Speculative decoding (--speculative-method): drafts fed and drafts kept.
      const drafted = m.syv_spec_draft_tokens_total, kept = m.syv_spec_accepted_tokens_total;
      if (drafted) {
        rows.push(["drafts kept", (100 * kept / drafted).toFixed(1) + "% of " + drafted]);
      }
      const dl = $("stats");
      dl.replaceChildren();
      for (const [k, v] of rows) {
        if (v == null) continue;
        dl.appendChild(el("dt", "", k));
        dl.appendChild(el("dd", "", String(v)));
      }
    } catch { /* the server may be restarting */ }
  }

  // ---- wiring -----------------------------------------------------------------------------
  function bindSetting(id, name) {
    const input = $(id);
    input.value = settings[name] == null ? "" : settings[name];
    input.addEventListener("change", () => { settings[name] = input.value; save(STORE.settings, settings); });
  }
  function init() {
    $("key").value = localStorage.getItem(STORE.key) || "";
    $("key").addEventListener("change", () => {
      localStorage.setItem(STORE.key, apiKey());
      modelId = null;
      fetchModel().catch((e) => showError(e.message));
    });
    bindSetting("system", "system");
    bindSetting("temperature", "temperature");
    bindSetting("top-p", "top_p");
    bindSetting("max-tokens", "max_tokens");
    bindSetting("seed", "seed");
    bindSetting("tools", "tools");
    $("composer").addEventListener("submit", (ev) => { ev.preventDefault(); send(); });
    $("input").addEventListener("keydown", (ev) => {
      if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) { ev.preventDefault(); send(); }
    });
    $("stop").addEventListener("click", () => { if (controller) controller.abort(); });
    $("new-chat").addEventListener("click", () => {
      if (controller) return;
      newConversation(); renderAll(); $("input").focus();
    });
    $("stats-panel").addEventListener("toggle", refreshStats);
    setInterval(refreshStats, 2000);
    // A reply that was streaming when the page closed ends as it was.
    for (const c of conversations) for (const m of c.messages) delete m.streaming;
    if (!current() && conversations.length) currentId = conversations[0].id;
    renderAll();
    if (apiKey()) fetchModel().catch((e) => showError(e.message));
    else showError("Enter the API key that `syv serve` printed (Settings \u2192 API key).");
  }
  init();
})();
