// The page of `bpe serve`. Every piece of text (tokens, names, messages)
// goes into the page with textContent, never innerHTML: text such as
// "<script>" is shown, not run.
"use strict";

const textBox = document.getElementById("text");
const results = document.getElementById("results");
const statusLine = document.getElementById("status");
const panels = new Map();
let sequence = 0; // answers to older requests are dropped
let timer = null;

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

async function answer(response) {
  let body = null;
  try { body = await response.json(); } catch (e) { body = null; }
  if (!response.ok) {
    const why = body && body.error ? body.error : response.statusText;
    throw new Error(response.status + ": " + why);
  }
  return body;
}

async function loadTokenizers() {
  const list = await answer(await fetch("/api/tokenizers"));
  for (const t of list) {
    const panel = el("div", "panel");
    panel.dataset.name = t.name;
    const head = el("h3");
    head.appendChild(el("span", "name", t.name));
    const count = el("span", "count", "");
    head.appendChild(count);
    panel.appendChild(head);
    const tokens = el("div", "tokens");
    panel.appendChild(tokens);
    results.appendChild(panel);
    panels.set(t.name, { count, tokens, vocab: t.vocab_size });
  }
}

function render(result) {
  const panel = panels.get(result.name);
  if (!panel) return;
  panel.count.textContent = result.count.toLocaleString("en-US") + " tokens, " +
    result.characters.toLocaleString("en-US") + " chars";
  panel.count.dataset.count = String(result.count);
  const frag = document.createDocumentFragment();
  result.tokens.forEach(([id, piece, newlines], k) => {
    const span = el("span", "tok c" + (k % 4), piece);
    span.title = "id " + id;
    span.dataset.id = String(id);
    frag.appendChild(span);
    for (let n = 0; n < newlines; n++) frag.appendChild(document.createElement("br"));
  });
  if (result.truncated) frag.appendChild(el("span", "more", " … (first " + result.tokens.length + " shown)"));
  panel.tokens.replaceChildren(frag);
}

async function tokenize() {
  const mine = ++sequence;
  try {
    const body = await answer(await fetch("/api/tokenize", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ text: textBox.value }),
    }));
    if (mine !== sequence) return;
    statusLine.textContent = "";
    body.results.forEach(render);
    results.dataset.done = String(mine);
  } catch (e) {
    if (mine === sequence) statusLine.textContent = e.message;
  }
}

textBox.addEventListener("input", () => {
  clearTimeout(timer);
  timer = setTimeout(tokenize, 80);
});

const COLUMNS = [
  ["tokens", "tokens", (v) => v.toLocaleString("en-US")],
  ["bytes_per_token", "bytes/tok", (v) => v.toFixed(3)],
  ["chars_per_token", "chars/tok", (v) => v.toFixed(3)],
  ["tokens_per_word", "tok/word", (v) => v.toFixed(3)],
  ["vocab_used", "vocab used", (v) => (100 * v).toFixed(1) + "%"],
  ["renyi_efficiency", "Rényi eff", (v) => v.toFixed(3)],
  ["words_3plus", "words 3+", (v) => (100 * v).toFixed(1) + "%"],
  ["mb_per_s", "MB/s", (v) => v.toFixed(1)],
];

function compareTable(rows) {
  const table = document.getElementById("compare");
  const head = el("tr");
  for (const h of ["tokenizer", "corpus", ...COLUMNS.map((c) => c[1])]) head.appendChild(el("th", "", h));
  const lines = [head];
  for (const r of rows) {
    const tr = el("tr");
    tr.appendChild(el("td", "", r.tokenizer));
    tr.appendChild(el("td", "", r.section ? r.corpus + " [" + r.section + "]" : r.corpus));
    for (const [key, , fmt] of COLUMNS) tr.appendChild(el("td", "num", r[key] === null ? "-" : fmt(r[key])));
    lines.push(tr);
  }
  table.replaceChildren(...lines);
}

document.getElementById("file").addEventListener("change", async (event) => {
  const file = event.target.files[0];
  const status = document.getElementById("compare-status");
  if (!file) return;
  status.textContent = "measuring " + file.name + " …";
  try {
    const body = await answer(await fetch("/api/compare?name=" + encodeURIComponent(file.name), {
      method: "POST",
      headers: { "Content-Type": "application/octet-stream" },
      body: await file.arrayBuffer(),
    }));
    compareTable(body.rows);
    status.textContent = "";
  } catch (e) {
    status.textContent = e.message;
  }
});

loadTokenizers().then(tokenize).catch((e) => { statusLine.textContent = e.message; });
