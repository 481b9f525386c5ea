// A small, safe markdown subset for model output: fenced code blocks, headings, lists, block
// quotes, paragraphs, and inline `code`, **bold**, *italic* and http(s) links. Every piece of text
// becomes a text node (textContent); no model text ever reaches innerHTML, so markup in a reply
// (<img src=x onerror=...>) shows as the characters it is.
"use strict";
(function () {
  const el = (tag, cls) => {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    return e;
  };

  // Inline spans: `code`, **bold**, *italic* / _italic_, [text](http(s)://url).
  const INLINE = /(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)|\*\*([^*\n]+)\*\*|\*([^*\s][^*\n]*)\*|\b_([^_\n]+)_\b|\[([^\]\n]+)\]\((https?:\/\/[^\s)]+)\)/g;
  function inline(parent, text) {
    let last = 0;
    for (const m of text.matchAll(INLINE)) {
      if (m.index > last) parent.appendChild(document.createTextNode(text.slice(last, m.index)));
      let node;
      if (m[1]) {
        node = el("code");
        node.textContent = m[2];
      } else if (m[3]) {
        node = el("strong");
        inline(node, m[3]);
      } else if (m[4] || m[5]) {
        node = el("em");
        inline(node, m[4] || m[5]);
      } else {
        node = el("a");
        node.textContent = m[6];
        node.href = m[7];  // only http(s) matches the pattern: no javascript: links
        node.target = "_blank";
        node.rel = "noopener noreferrer";
      }
      parent.appendChild(node);
      last = m.index + m[0].length;
    }
    if (last < text.length) parent.appendChild(document.createTextNode(text.slice(last)));
  }

  // Renders `text` into a DocumentFragment. An unclosed code fence (a reply still streaming)
  // runs to the end.
  function render(text) {
    const out = document.createDocumentFragment();
    const lines = String(text).split("\n");
    let para = [];
    let list = null;
    const flushPara = () => {
      if (para.length) {
        const p = el("p");
        inline(p, para.join("\n"));
        out.appendChild(p);
        para = [];
      }
    };
    const flushList = () => { list = null; };
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i];
      const fence = line.match(/^\s*(```+|~~~+)\s*([\w+#.-]*)/);
      if (fence) {
        flushPara(); flushList();
        const body = [];
        for (i++; i < lines.length && !lines[i].trim().startsWith(fence[1]); i++) body.push(lines[i]);
        const pre = el("pre");
        if (fence[2]) {
          const lang = el("div", "lang");
          lang.textContent = fence[2];
          pre.appendChild(lang);
        }
        const code = el("code");
        code.textContent = body.join("\n");
        pre.appendChild(code);
        out.appendChild(pre);
        continue;
      }
      const heading = line.match(/^(#{1,6})\s+(.*)$/);
      const bullet = line.match(/^\s*([-*+]|\d+[.)])\s+(.*)$/);
      const quote = line.match(/^>\s?(.*)$/);
      if (heading) {
        flushPara(); flushList();
        const h = el("h" + Math.min(6, heading[1].length + 2));
        inline(h, heading[2]);
        out.appendChild(h);
      } else if (bullet) {
        flushPara();
        const ordered = /\d/.test(bullet[1]);
        if (!list || (list.tagName === "OL") !== ordered) {
          list = el(ordered ? "ol" : "ul");
          out.appendChild(list);
        }
        const li = el("li");
        inline(li, bullet[2]);
        list.appendChild(li);
      } else if (quote) {
        flushPara(); flushList();
        const q = el("blockquote");
        inline(q, quote[1]);
        out.appendChild(q);
      } else if (line.trim() === "") {
        flushPara(); flushList();
      } else {
        flushList();
        para.push(line);
      }
    }
    flushPara();
    return out;
  }

  window.syvMarkdown = { render };
})();
