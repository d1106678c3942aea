// End-to-end tests of the attnlab page in headless Debian Chromium, driven by playwright-core.
//
// Run by tests/e2e/run.sh (from scripts/test.sh), which builds the site with attnlab-site, puts random
// models in it with `attnlab init`, and sets:
//   SITE        the built site: dist/ plus models/index.json listing random models alibi (default),
//               regla and regla-init (regla's "initial checkpoint"), and models/default = alibi
//   ATTNLAB     the attnlab CLI binary (numbers from the page are checked against it)
//   SHOTS       folder for the screenshots of every view (CI artifacts)
// Every assertion reads numbers back from the page (data-* attributes), not pixels.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { copyFileSync, linkSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";
import { serve } from "./serve.mjs";

const SITE = process.env.SITE;
const ATTNLAB = process.env.ATTNLAB;
const SHOTS = process.env.SHOTS ?? join(tmpdir(), "attnlab-shots");
const PREFIX = "/sub/attnlab/";
// The page's default prompt: the trace views show it before anything is generated.
const DEFAULT_PROMPT = "The history of the city";
const LOAD_MS = 60_000;

assert.ok(SITE && ATTNLAB, "run through tests/e2e/run.sh (SITE and ATTNLAB must be set)");
mkdirSync(SHOTS, { recursive: true });

let server;
let browser;

const FLAGS = [
  "--headless=new",
  "--no-sandbox",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--disable-quic",
];
const WEBGPU = ["--enable-unsafe-webgpu", "--use-webgpu-adapter=swiftshader", "--enable-unsafe-swiftshader"];

before(async () => {
  server = await serve(SITE, PREFIX);
  browser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: [...FLAGS, ...WEBGPU] });
});

after(async () => {
  await browser?.close();
  server?.close();
});

/**
 * A fresh page on `query` (e.g. "?model=regla"), with every request outside the site refused;
 * `setup(page)` may add routes first (they take precedence); `viewport` and `colorScheme` (light or
 * dark) set the browser's. Waits for `main[data-state=<state>]`.
 */
async function open(query = "", { state = "ready", setup, on = browser, viewport = { width: 1200, height: 1400 }, colorScheme } = {}) {
  const context = await on.newContext({ viewport, colorScheme });
  const page = await context.newPage();
  const outside = [];
  await page.route("**/*", (route) => {
    const url = route.request().url();
    if (url.startsWith(server.url) || url.startsWith("data:")) return route.continue();
    outside.push(url);
    return route.abort();
  });
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  if (setup) await setup(page);
  await page.goto(server.url + query);
  await page.waitForSelector(`main[data-state="${state}"]`, { timeout: LOAD_MS });
  return { page, context, outside, errors };
}

const attr = (page, sel, name) => page.locator(sel).first().getAttribute(name);
const numbers = (s) => (s ?? "").split(",").filter((x) => x !== "").map(Number);

/** Set a range input's value the way a user's drag does (fires `input`). */
async function slide(page, sel, value) {
  await page.locator(sel).evaluate((el, v) => {
    el.value = String(v);
    el.dispatchEvent(new Event("input", { bubbles: true }));
  }, value);
}

async function kernelValues(page) {
  await page.waitForSelector('#kernel-curves[data-current="true"] #kernel-chart g.series');
  return numbers(await attr(page, "#kernel-chart g.series", "data-values"));
}

/** Kernel curves of the next model (a slider edit makes a new one in the worker) than `model`. */
async function kernelValuesAfterEdit(page, model) {
  await page.waitForFunction(
    (m) => {
      const c = document.querySelector('#kernel-curves[data-current="true"]');
      return c && c.getAttribute("data-model") !== m;
    },
    model,
  );
  return kernelValues(page);
}

const kernelModel = (page) => attr(page, "#kernel-curves", "data-model");

/**
 * A setup for `open` that runs `code` in the model's worker before its wasm starts: the worker
 * script is served with `code` in front (the model, the GPU device and the caches live there).
 */
function workerPrelude(code) {
  return (page) =>
    page.route("**/worker-*.js", async (route) => {
      const response = await route.fetch();
      await route.fulfill({ response, body: `${code}\n${await response.text()}` });
    });
}

async function pplValues(page) {
  await page.click("#tab-extrapolation");
  const current = '#ppl-chart g.series[data-label="current settings"]';
  await page.waitForSelector(`#ppl-view[data-running="false"] ${current}[data-values*="."]`, { timeout: 120_000 });
  return numbers(await attr(page, current, "data-values"));
}

/** Parse a safetensors file: { name: { shape, data: Float32Array } }. */
function readSafetensors(path) {
  const buf = readFileSync(path);
  const n = Number(buf.readBigUInt64LE(0));
  const header = JSON.parse(buf.subarray(8, 8 + n).toString("utf8"));
  const out = {};
  for (const [name, t] of Object.entries(header)) {
    if (name === "__metadata__") continue;
    const [a, b] = t.data_offsets;
    const bytes = buf.subarray(8 + n + a, 8 + n + b);
    out[name] = { shape: t.shape, data: new Float32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length)) };
  }
  return out;
}

function cli(args) {
  return execFileSync(ATTNLAB, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
}

function promptFile() {
  const dir = mkdtempSync(join(tmpdir(), "attnlab-e2e-"));
  const file = join(dir, "prompt.txt");
  writeFileSync(file, DEFAULT_PROMPT);
  return file;
}

test("loads from a subpath and generates 32 tokens on the CPU, with throughput shown", async () => {
  // ?backend=cpu forces the CPU (wasm) runtime even where WebGPU works.
  const { page, context, outside, errors } = await open("?backend=cpu");
  assert.equal(await attr(page, "#backend", "data-backend"), "cpu");
  assert.equal(await page.inputValue("#backend-choice"), "cpu");
  await page.fill("#max-tokens", "32");
  await page.fill("#seed", "7");
  await page.click("#generate");
  await page.waitForFunction(() => document.querySelector("#status")?.textContent?.startsWith("done"), null, {
    timeout: LOAD_MS,
  });
  const status = await page.textContent("#status");
  const generated = await page.textContent("#generated");
  assert.match(status, /done: (32|\d+) tokens/);
  assert.ok(generated.length > 0, "some text was generated");
  const prefill = Number(await attr(page, "#prefill-tps", "data-value"));
  const decode = Number(await attr(page, "#decode-tps", "data-value"));
  assert.ok(prefill > 0 && decode > 0, `tokens/s shown: prefill ${prefill}, decode ${decode}`);
  assert.equal(await attr(page, "#run-backend", "data-backend"), "cpu");
  console.log(`# CPU (wasm) in headless Chromium: prefill ${prefill.toFixed(1)} tok/s, decode ${decode.toFixed(1)} tok/s`);
  await page.screenshot({ path: join(SHOTS, "generate.png"), fullPage: true });
  assert.deepEqual(outside, [], "no request leaves the page's origin");
  assert.deepEqual(errors, []);
  await context.close();
});

test("decode speed seen vs raw; a long prompt prefills in the worker: progress shows, the page stays responsive, Stop ends it at once", async () => {
  const { page, context, errors } = await open("?backend=cpu");
  // Decode first, with nothing else in the worker: the speed seen on the page (tokens on screen,
  // rendering included) beside the raw one (time inside the model) and the worker's wall time.
  await page.fill("#prompt", "The history of the city");
  await page.fill("#max-tokens", "512");
  await page.fill("#temperature", "0");
  const run = await generateRun(page);
  const seen = Number(await attr(page, "#decode-seen-tps", "data-value"));
  const wall = Number(await attr(page, "#decode-seen-tps", "data-worker-wall"));
  assert.match(run.status, /^done: \d+ tokens/);
  assert.ok(run.decode > 0 && seen > 0, `raw ${run.decode}, seen ${seen}`);
  console.log(`# decode (CPU/wasm, 512 tokens): raw ${run.decode.toFixed(1)} tok/s, worker wall ${wall.toFixed(1)} tok/s, seen ${seen.toFixed(1)} tok/s, seen/raw ${(seen / run.decode).toFixed(3)}`);
  // Held-out Brown text, thousands of tokens: the page's main thread must stay free while it prefills.
  const text = readFileSync(join(SITE, "eval", "heldout.txt"), "utf8").slice(0, 19_000);
  await page.fill("#prompt", text);
  await page.fill("#max-tokens", "4");
  await page.click("#generate");
  await page.waitForSelector("#prefill-progress", { timeout: LOAD_MS });
  const total = Number(await attr(page, "#prefill-progress", "data-total"));
  // The longest gap between two 10 ms timers on the main thread over 0.4 s of prefill (short enough
  // that the prompt is still being prefilled on a fast machine).
  const gap = await page.evaluate(
    () =>
      new Promise((resolve) => {
        let last = performance.now();
        let worst = 0;
        const t = setInterval(() => {
          const now = performance.now();
          worst = Math.max(worst, now - last);
          last = now;
        }, 10);
        setTimeout(() => {
          clearInterval(t);
          resolve(worst);
        }, 400);
      }),
  );
  const done = Number(await attr(page, "#prefill-progress", "data-done"));
  assert.ok(total > 4000 && done > 0 && done < total, `prefill progress ${done} of ${total}`);
  await page.locator("#prefill-progress").scrollIntoViewIfNeeded();
  await page.screenshot({ path: join(SHOTS, "prefill-progress.png") });
  const t0 = Date.now();
  await page.click("#stop");
  await page.waitForFunction(() => /^stopped while prefilling \(\d+ of \d+/.test(document.querySelector("#status")?.textContent ?? ""), null, {
    timeout: LOAD_MS,
  });
  const stopMs = Date.now() - t0;
  assert.equal(await page.inputValue("#prompt"), text, "the prompt is kept");
  // The page answers while the worker computes: another lab tab opens during the next prefill.
  await page.click("#generate");
  await page.waitForSelector("#prefill-progress", { timeout: LOAD_MS });
  await page.click("#tab-gates");
  await page.waitForSelector("#gate-view");
  // The gate view's trace waits for the run: Stop is not delayed by it.
  const t1 = Date.now();
  await page.click("#stop");
  await page.waitForFunction(() => /^stopped while prefilling/.test(document.querySelector("#status")?.textContent ?? ""), null, {
    timeout: LOAD_MS,
  });
  const stopWithViewMs = Date.now() - t1;
  // Once the run has stopped, the view computes its trace.
  await page.waitForSelector('#gate-view[data-running="false"]', { timeout: LOAD_MS });
  assert.equal(await attr(page, "main", "data-state"), "ready");
  console.log(`# ${total}-token prompt: ${done} prefilled after ~0.5 s; main thread's longest gap ${gap.toFixed(1)} ms; Stop → stopped in ${stopMs} ms (click to status, Playwright included), ${stopWithViewMs} ms with the gate view waiting`);

  assert.deepEqual(errors, []);
  await context.close();
});

test("a shipped model (trained mep, F16) loads and writes its first token; load-to-first-token measured", async () => {
  const t0 = Date.now();
  const { page, context, outside, errors } = await open("?model=mep&backend=cpu");
  const loaded = Date.now() - t0;
  await page.fill("#prompt", "The jury said");
  await page.fill("#max-tokens", "1");
  await page.fill("#seed", "1");
  await page.click("#generate");
  await page.waitForFunction(() => document.querySelector("#status")?.textContent?.startsWith("done"), null, {
    timeout: LOAD_MS,
  });
  const first = Date.now() - t0;
  const generated = await page.textContent("#generated");
  assert.ok(generated.trim().length > 0, "a token was written");
  console.log(`# load-to-first-token, shipped mep (F16, CPU/wasm, cold, local server): page ready ${loaded} ms, first token ${first} ms`);
  assert.deepEqual(outside, [], "no request leaves the page's origin");
  assert.deepEqual(errors, []);
  await context.close();
});

test("slope and mix sliders change the kernel curves and the perplexity plot", async () => {
  const { page, context, errors } = await open();
  await page.click("#tab-kernels");
  await page.waitForSelector("#kernel-chart g.series");
  const before = await kernelValues(page);
  assert.ok(before.length > 10 && before.every(Number.isFinite));
  await page.screenshot({ path: join(SHOTS, "kernels.png"), fullPage: true });

  const pplBefore = await pplValues(page);
  assert.ok(pplBefore.length >= 1 && pplBefore.every((v) => Number.isFinite(v) && v > 1), `${pplBefore}`);
  await page.screenshot({ path: join(SHOTS, "extrapolation.png"), fullPage: true });

  await page.click("#tab-kernels");
  const trained = await kernelModel(page);
  await slide(page, "#slope-scale", 2); // ×4
  await page.waitForFunction(() => document.querySelector("#slope-scale-value")?.textContent === "×4.0000");
  const scaled = await kernelValuesAfterEdit(page, trained);
  assert.notDeepEqual(scaled, before, "the slope slider changes B(d)");
  // ALiBi: B = −m·d, so ×4 slopes is ×4 bias (MEP digest §3.6).
  assert.ok(Math.abs(scaled[10] - 4 * before[10]) < 1e-3 * Math.abs(before[10]) + 1e-6, `${scaled[10]} vs ${before[10]}`);

  const scaledModel = await kernelModel(page);
  await slide(page, "#mix-weight-1", 0.8); // switch on kernel β (exp(m/2)): the model becomes a mix
  const mixed = await kernelValuesAfterEdit(page, scaledModel);
  assert.notDeepEqual(mixed, scaled, "the mix-weight slider changes B(d)");
  assert.ok(mixed.every(Number.isFinite));

  const pplAfter = await pplValues(page);
  assert.equal(pplAfter.length, pplBefore.length);
  assert.notDeepEqual(pplAfter, pplBefore, "the perplexity plot follows the sliders");

  // Extremes stay finite: zero slopes, and all weight on one kernel.
  await page.click("#tab-kernels");
  await slide(page, "#slope-scale", -6);
  await slide(page, "#mix-weight-0", 0);
  await slide(page, "#mix-weight-1", 1);
  assert.ok((await kernelValues(page)).every(Number.isFinite));
  await page.click("#reset-trained");
  await page.waitForFunction(() => document.querySelector("#bias-state")?.textContent?.includes("as trained"));
  assert.deepEqual(await kernelValues(page), before, "reset to trained restores the curves");
  assert.deepEqual(errors, []);
  await context.close();
});

test("a heatmap cell read by keyboard equals attnlab dump; LAA AUC equals attnlab analyze", async () => {
  const { page, context, errors } = await open();
  await page.click("#tab-attention");
  await page.waitForSelector("#heatmap canvas");
  await page.focus("#heatmap canvas");
  for (let k = 0; k < 3; k++) await page.keyboard.press("ArrowDown");
  await page.keyboard.press("ArrowRight");
  await page.waitForFunction(() => document.querySelector("#heatmap")?.getAttribute("data-selected") === "3,1");
  const shown = Number(await attr(page, "#heatmap", "data-value"));
  const readout = await page.textContent("#heatmap .readout");
  assert.match(readout, /query 3 .* key 1 .*: /);
  await page.screenshot({ path: join(SHOTS, "attention.png"), fullPage: true });

  const file = promptFile();
  const dump = join(tmpdir(), `attnlab-e2e-${process.pid}.safetensors`);
  cli(["dump", "--model", join(SITE, "models/alibi"), "--text", file, "--out", dump, "--attention"]);
  const t = readSafetensors(dump)["attention.layer0"];
  const n = t.shape[1];
  const expected = t.data[0 * n * n + 3 * n + 1];
  assert.ok(Math.abs(shown - expected) < 1e-5, `page ${shown} vs CLI ${expected}`);

  await page.click("#tab-laa");
  await page.waitForSelector("#laa-table tr[data-auc]");
  const aucs = await page.$$eval("#laa-table tr[data-auc]", (rows) => rows.map((r) => Number(r.dataset.auc)));
  const analyzed = JSON.parse(cli(["analyze", "--model", join(SITE, "models/alibi"), "--text", file, "--json"]));
  const cliAucs = analyzed.layers.map((l) => l.laa.auc);
  assert.equal(aucs.length, cliAucs.length);
  aucs.forEach((a, i) => assert.ok(Math.abs(a - cliAucs[i]) < 1e-6, `layer ${i}: page ${a} vs CLI ${cliAucs[i]}`));
  await page.screenshot({ path: join(SHOTS, "laa.png"), fullPage: true });
  assert.deepEqual(errors, []);
  await context.close();
});

/** Parse CSV text (quoted fields may hold commas, quotes and line breaks) into rows of fields. */
function parseCsv(text) {
  const rows = [[]];
  let field = "";
  let quoted = false;
  for (let k = 0; k < text.length; k++) {
    const c = text[k];
    if (quoted) {
      if (c === '"' && text[k + 1] === '"') (field += '"'), k++;
      else if (c === '"') quoted = false;
      else field += c;
    } else if (c === '"') quoted = true;
    else if (c === ",") rows.at(-1).push(field), (field = "");
    else if (c === "\n") rows.at(-1).push(field), (field = ""), rows.push([]);
    else field += c;
  }
  if (field !== "" || rows.at(-1).length > 0) rows.at(-1).push(field);
  return rows.filter((r) => r.length > 0);
}

/** Row `q` of the zoomed heatmap as its CSV export writes it (one string per key, "" = masked). */
async function heatmapRow(page, q) {
  const rows = parseCsv((await download(page, "#heatmap-export-csv")).bytes.toString("utf8"));
  return rows[1 + q].slice(1);
}

/** Move to the heatmap cell (query i, key j) of an n × n map and click it. */
async function clickCell(page, n, i, j) {
  const canvas = page.locator("#heatmap canvas");
  await canvas.scrollIntoViewIfNeeded();
  const box = await canvas.boundingBox();
  const [x, y] = [box.x + ((j + 0.5) * box.width) / n, box.y + ((i + 0.5) * box.height) / n];
  await page.mouse.move(x, y);
  await page.mouse.click(x, y);
}

const stripWeights = (page) => page.$$eval("#token-strip .tok", (els) => els.map((e) => e.dataset.weight));
const tokClass = (page, k) => attr(page, `#token-strip .tok[data-pos="${k}"]`, "class");

test("views linked to the text: a token shades the text with its heatmap row (head and layer mean), a heatmap cell marks both tokens, arrows move, the link keeps it", async () => {
  const { page, context, errors } = await open("?backend=cpu");
  await page.fill("#max-tokens", "10");
  assert.match((await generateRun(page)).status, /^done: \d+ tokens/);
  await page.click("#tab-attention");
  // The strip holds the traced text (prompt and output): as many tokens as the heatmap's rows.
  await page.waitForFunction(() => {
    const h = document.querySelector('#attention-view[data-running="false"] #heatmap');
    const n = Number(h?.dataset.n ?? 0);
    return n > 8 && document.querySelectorAll("#token-strip .tok").length === n;
  }, null, { timeout: LOAD_MS });
  const n = Number(await attr(page, "#heatmap", "data-n"));
  const q = n - 3;
  const heads = await page.locator(".thumb-row >> nth=1").locator(".thumb").count();
  // Pin query q from the strip; it stays while the thumbnails change the heatmap's head.
  await page.click(`#token-strip .tok[data-pos="${q}"]`);
  await page.waitForSelector(`#token-strip[data-query="${q}"]`);
  const rows = [];
  for (let h = 0; h < heads; h++) {
    await page.click(`.thumb[title="L1 H${h}"]`);
    await page.waitForSelector(`#heatmap .heatmap-title:text("layer 1, head ${h} ")`);
    rows.push(await heatmapRow(page, q));
  }
  // Head mode (the heatmap's L1 H<last>): every token's data-weight is the CSV's string, futures empty.
  const weights = await stripWeights(page);
  assert.equal(weights.length, n);
  assert.deepEqual(weights, rows.at(-1), "the strip's weights are the heatmap's row, digit for digit");
  let maxDiff = 0;
  weights.forEach((w, j) => j <= q && (maxDiff = Math.max(maxDiff, Math.abs(Number(w) - Number(rows.at(-1)[j])))));
  assert.ok(weights.slice(q + 1).every((w) => w === ""), "future keys have no weight");
  assert.match(await tokClass(page, q + 1), /\bfuture\b/);
  assert.equal(await attr(page, "#heatmap", "data-row"), String(q), "the heatmap marks the query's row");
  console.log(`# strip head mode, query ${q} of ${n}: ${weights.slice(0, q + 1).join(" ")} (max |strip − heatmap| ${maxDiff})`);
  // Layer-mean mode: the mean of the layer's heads' rows.
  await page.selectOption("#strip-source", "layer");
  await page.waitForSelector('#token-strip[data-source="layer"]');
  const mean = await stripWeights(page);
  let meanDiff = 0;
  for (let j = 0; j <= q; j++) {
    const want = rows.reduce((s, r) => s + Number(r[j]), 0) / heads;
    meanDiff = Math.max(meanDiff, Math.abs(Number(mean[j]) - want));
  }
  assert.ok(meanDiff < 1e-6, `layer mean: max |strip − mean of ${heads} heatmap rows| = ${meanDiff}`);
  console.log(`# strip layer-mean mode over ${heads} heads: max |strip − mean of heatmap rows| ${meanDiff}`);
  // All layers: a mean of probability rows, so it sums to 1.
  await page.selectOption("#strip-source", "all");
  await page.waitForSelector('#token-strip[data-source="all"]');
  const sum = (await stripWeights(page)).slice(0, q + 1).reduce((s, w) => s + Number(w), 0);
  assert.ok(Math.abs(sum - 1) < 1e-5, `all layers' row sums to ${sum}`);
  await page.selectOption("#strip-source", "head");

  // A heatmap cell (query q, key 1) marks both tokens, the read-out gives its weight, the URL keeps it.
  await clickCell(page, n, q, 1);
  await page.waitForSelector(`#heatmap[data-selected="${q},1"]`);
  assert.match(await tokClass(page, q), /\bquery\b/);
  assert.match(await tokClass(page, 1), /\bkey\b/);
  assert.doesNotMatch(await tokClass(page, q), /\bkey\b/);
  const w1 = await attr(page, '#token-strip .tok[data-pos="1"]', "data-weight");
  assert.equal(w1, await attr(page, "#heatmap", "data-value"));
  assert.ok((await page.textContent("#token-readout")).includes(`key 1 `) && (await page.textContent("#token-readout")).includes(w1));
  await urlParam(page, "cell", `${q},1`);
  await page.locator("#attention-view").screenshot({ path: join(SHOTS, "linked-light.png") });

  // LAA marks the token: its own curve per layer.
  await page.click("#tab-laa");
  await page.waitForSelector(TABS.laa, { timeout: LOAD_MS });
  const layers = await page.locator("#laa-table tr[data-auc]").count();
  assert.equal(await page.locator(`#laa-chart g.series[data-label^="token ${q} "]`).count(), layers);
  await page.click("#tab-attention");
  await page.waitForSelector(TABS.attention, { timeout: LOAD_MS });

  // Keyboard: arrows move the pinned query (the key stays), Space unpins, Enter pins, Escape clears.
  await page.focus(`#token-strip .tok[data-pos="${q}"]`);
  await page.keyboard.press("ArrowLeft");
  await page.keyboard.press("ArrowLeft");
  await page.waitForSelector(`#heatmap[data-selected="${q - 2},1"]`);
  assert.equal(await page.evaluate(() => document.activeElement?.dataset.pos), String(q - 2), "the focus follows");
  assert.match(await tokClass(page, q - 2), /\bquery\b/);
  await urlParam(page, "cell", `${q - 2},1`);
  await page.keyboard.press("Space");
  await urlParam(page, "cell", null);
  await page.keyboard.press("Enter");
  await urlParam(page, "cell", `${q - 2},${q - 2}`);
  await page.keyboard.press("Escape");
  await page.waitForSelector('#token-strip[data-query=""]');
  await urlParam(page, "cell", null);
  await page.keyboard.press("ArrowRight");
  await page.keyboard.press("ArrowRight");
  // (Enter-free pin of q − 1 keeps its own key, q − 1, when the arrow moves on to q.)
  await page.waitForSelector(`#heatmap[data-selected="${q},${q - 1}"]`);
  await clickCell(page, n, q, 1);
  await urlParam(page, "cell", `${q},1`);
  const before = await stripWeights(page);
  const link = page.url();
  assert.deepEqual(errors, []);
  await context.close();

  // The link in a fresh (dark) page: same output, same cell, same marks and weights.
  const fresh = await open(link.slice(server.url.length), { colorScheme: "dark" });
  await fresh.page.waitForSelector(`#heatmap[data-n="${n}"][data-selected="${q},1"]`, { timeout: LOAD_MS });
  await fresh.page.waitForSelector(`#token-strip[data-query="${q}"]`);
  assert.match(await tokClass(fresh.page, q), /\bquery\b/);
  assert.match(await tokClass(fresh.page, 1), /\bkey\b/);
  assert.deepEqual(await stripWeights(fresh.page), before);
  await fresh.page.locator("#attention-view").screenshot({ path: join(SHOTS, "linked-dark.png") });
  assert.deepEqual(fresh.errors, []);
  await fresh.context.close();
});

test("gate saturation of a ReGLA model equals attnlab analyze", async () => {
  const { page, context, errors } = await open("?model=regla");
  await page.click("#tab-gates");
  await page.waitForSelector('.gate-cell[data-quantity="f"]');
  const shown = await page.$$eval('.gate-cell[data-quantity="f"]', (cells) =>
    cells.map((c) => [Number(c.dataset.layer), Number(c.dataset.saturation)]),
  );
  const file = promptFile();
  const analyzed = JSON.parse(
    cli(["analyze", "--model", join(SITE, "models/regla"), "--text", file, "--json", "--bins", "20"]),
  );
  const cliSat = analyzed.gates.filter((g) => g.quantity === "f" && g.head === null);
  assert.equal(shown.length, cliSat.length);
  for (const [layer, sat] of shown) {
    const c = cliSat.find((g) => g.layer === layer);
    assert.ok(c && Math.abs(c.saturation - sat) < 1e-9, `layer ${layer}: page ${sat} vs CLI ${c?.saturation}`);
  }
  // Linked to the text: a pinned token lists its gate values, each head's mean of attnlab dump's F there.
  const pos = 2;
  await page.click(`#token-strip .tok[data-pos="${pos}"]`);
  await page.waitForSelector(`#gates-at[data-pos="${pos}"] tr[data-quantity="f"]`);
  const atToken = await page.$$eval('#gates-at tr[data-quantity="f"]', (rows) =>
    rows.map((r) => [Number(r.dataset.layer), r.dataset.values.split(",").map(Number)]),
  );
  const dump = join(tmpdir(), `attnlab-e2e-gates-${process.pid}.safetensors`);
  cli(["dump", "--model", join(SITE, "models/regla"), "--text", file, "--out", dump, "--gates"]);
  const tensors = readSafetensors(dump);
  assert.equal(atToken.length, shown.length);
  let gateDiff = 0;
  for (const [layer, heads] of atToken) {
    const { shape, data } = tensors[`gates.layer${layer}.f`];
    const [, h, dim] = shape;
    assert.equal(heads.length, h);
    heads.forEach((v, k) => {
      const base = (pos * h + k) * dim;
      const want = data.subarray(base, base + dim).reduce((a, b) => a + b, 0) / dim;
      gateDiff = Math.max(gateDiff, Math.abs(v - want));
    });
  }
  assert.ok(gateDiff < 1e-6, `gates at token ${pos}: max |page − attnlab dump| = ${gateDiff}`);
  console.log(`# gates at token ${pos}: ${JSON.stringify(atToken)} (max |page − dump| ${gateDiff})`);
  await page.screenshot({ path: join(SHOTS, "gates.png"), fullPage: true });
  assert.deepEqual(errors, []);
  await context.close();
});

test("bad input keeps the prompt and shows a clear message", async () => {
  const { page, context, errors } = await open();
  await page.fill("#prompt", "");
  await page.click("#generate");
  await page.waitForSelector("#error");
  assert.match(await page.textContent("#error"), /empty prompt/i);
  const long = "word ".repeat(20000);
  await page.fill("#prompt", long);
  await page.click("#generate");
  await page.waitForFunction(() => /max_context/.test(document.querySelector("#error")?.textContent ?? ""));
  assert.equal((await page.inputValue("#prompt")).length, long.length, "the prompt is kept");
  assert.deepEqual(errors, []);
  await context.close();
});

/** Wait until the page's address has `name=value` (it is written shortly after a change). */
async function urlParam(page, name, value) {
  await page.waitForFunction(([n, v]) => new URLSearchParams(location.search).get(n) === v, [name, value]);
}

/** Wait until the status line reads exactly `text`. */
async function statusIs(page, text) {
  await page.waitForFunction((t) => document.querySelector("#status")?.textContent === t, text, { timeout: LOAD_MS });
}

/**
 * Wait until the status shows a run decoding (at least `min` tokens). The state can be short (a
 * random model writes 4096 tokens in ~2 s), so the page is polled on a timer: the default polling
 * on animation frames misses it when the browser draws no frames for a while, as when SwiftShader
 * compiles the Auto speed test's WebGPU pipelines after a load. A timeout names the last status.
 */
async function whileGenerating(page, min = 1) {
  const decoding = (m) => {
    const n = /generating… (\d+) tokens/.exec(document.querySelector("#status")?.textContent ?? "");
    return n !== null && Number(n[1]) >= m;
  };
  try {
    await page.waitForFunction(decoding, min, { timeout: LOAD_MS, polling: 10 });
  } catch (e) {
    throw new Error(`no run decoding ${min}+ tokens within ${LOAD_MS} ms; status: ${await page.textContent("#status")}`, { cause: e });
  }
}

test("the picker lists the index's models by family; a link to a model outside the index names the list and shows the default", async () => {
  const { page, context, errors } = await open();
  const groups = await page.$$eval("#model-picker optgroup", (gs) =>
    gs.map((g) => [g.label, [...g.querySelectorAll("option")].map((o) => o.value)]),
  );
  assert.deepEqual(groups, [
    ["softmax + position bias", ["alibi"]],
    ["gated linear attention", ["regla", "regla-init"]],
    ["trained (shipped)", ["mep", "linear-elu", "transnormer", "fast-decay", "regla-fig4", "gla-fig4", "rope", "regla-fig4-init", "gla-fig4-init"]],
    ["small random (e2e)", ["alibi-small"]],
    ["softmax + position bias (second collection, e2e)", ["long/mep"]],
  ]);
  assert.equal(await page.inputValue("#model-picker"), "alibi", "the index's default is shown");
  assert.match(await page.textContent("#model-description"), /Random ALiBi model/);
  assert.match(await page.textContent("#status"), /model alibi loaded/);
  await page.screenshot({ path: join(SHOTS, "picker.png") });
  assert.deepEqual(errors, []);
  await context.close();

  // A stale link: the model it names is not in the index. The page says so and shows the default.
  const bad = await open("?model=gla");
  const message = await bad.page.textContent("#url-warning");
  assert.match(message, /model: no model gla/);
  assert.match(message, /alibi, regla, regla-init, mep/);
  assert.equal(await bad.page.inputValue("#model-picker"), "alibi");
  assert.deepEqual(bad.errors, []);
  await bad.context.close();
});

test("a collection the index lists: its models are picked as folder/name, load with its shared tokenizer, and generate what the CLI does", async () => {
  const { page, context, errors } = await open("?backend=cpu");
  await page.fill("#prompt", "The jury said");
  await page.selectOption("#model-picker", "long/mep");
  await statusIs(page, "model long/mep loaded: ready");
  await urlParam(page, "model", "long/mep");
  assert.match(page.url(), /[?&]model=long\/mep(&|$)/, "the link stays readable");
  assert.match(await page.textContent("#model-description"), /second collection/);
  await page.fill("#temperature", "0");
  await page.fill("#max-tokens", "12");
  await page.click("#generate");
  await page.waitForFunction(() => document.querySelector("#status")?.textContent?.startsWith("done"), null, { timeout: LOAD_MS });
  const cliOut = JSON.parse(
    cli(["generate", "--model", join(SITE, "models/long/mep"), "--prompt", "The jury said", "--max-tokens", "12", "--temperature", "0", "--json"]),
  );
  assert.equal(await page.textContent("#generated"), cliOut.text, "greedy tokens equal the CLI's");
  await page.reload();
  await page.waitForSelector('main[data-state="ready"]', { timeout: LOAD_MS });
  assert.equal(await page.inputValue("#model-picker"), "long/mep", "a reload keeps the choice");
  assert.deepEqual(errors, []);
  await context.close();
  // A collection whose index is missing is named; the page does not panic.
  const broken = await open("", {
    state: "load-failed",
    setup: (p) => p.route("**/models/long/index.json", (route) => route.fulfill({ status: 404, body: "not found" })),
  });
  const why = await broken.page.textContent("#error");
  console.log(`# a collection's index missing: ${why}`);
  assert.match(why, /models\/long\/index\.json is missing, but models\/index\.json lists the collection `long`/);
  assert.deepEqual(broken.errors, [], "no panic");
  await broken.context.close();
});

test("without models/index.json the page loads models/default; a corrupt index is a clear error", async () => {
  const missing = await open("", {
    setup: (page) => page.route("**/models/index.json", (route) => route.fulfill({ status: 404, body: "not found" })),
  });
  assert.equal(await missing.page.locator("#model-picker").count(), 0, "no picker without an index");
  assert.match(await missing.page.textContent("#status"), /model default loaded/);
  assert.deepEqual(missing.errors, []);
  await missing.context.close();

  const corrupt = await open("", {
    state: "load-failed",
    setup: (page) =>
      page.route("**/models/index.json", (route) =>
        route.fulfill({ status: 200, contentType: "application/json", body: '{"default": "x", "models": [' }),
      ),
  });
  assert.match(await corrupt.page.textContent("#error"), /models\/index\.json/);
  assert.deepEqual(corrupt.errors, [], "no panic");
  await corrupt.context.close();
});

test("choosing another model loads it, keeps it in the URL, and generation works", async () => {
  const { page, context, errors } = await open();
  await page.fill("#prompt", "Once upon a time");
  await page.selectOption("#model-picker", "regla");
  await statusIs(page, "model regla loaded: ready");
  await urlParam(page, "model", "regla");
  assert.equal(await page.inputValue("#prompt"), "Once upon a time", "the prompt is kept");
  assert.match(await page.textContent("#model-description"), /Random ReGLA model/);
  await page.fill("#max-tokens", "8");
  await page.click("#generate");
  await page.waitForFunction(() => document.querySelector("#status")?.textContent?.startsWith("done"), null, {
    timeout: LOAD_MS,
  });
  assert.equal(await attr(page, "#output-model", "data-model"), "regla");
  assert.ok((await page.textContent("#generated")).length > 0);
  await page.reload();
  await page.waitForSelector('main[data-state="ready"]', { timeout: LOAD_MS });
  assert.equal(await page.inputValue("#model-picker"), "regla", "a reload keeps the choice");
  assert.deepEqual(errors, []);
  await context.close();
});

test("switching models while generating stops the run cleanly and never mixes the models' tokens", async () => {
  // The trained mep (not the small random default, which can write all 4096 tokens between two polls
  // on a fast machine) keeps the run going long enough to be switched away from mid-run.
  const { page, context, errors } = await open("?model=mep&backend=cpu");
  await page.fill("#prompt", "Once upon a time");
  await page.fill("#max-tokens", "4096");
  await page.click("#generate");
  await whileGenerating(page);
  // Two quick switches: the first load is superseded by the second.
  await page.selectOption("#model-picker", "regla-init");
  await page.selectOption("#model-picker", "regla");
  await statusIs(page, "model regla loaded: ready");
  assert.equal(await attr(page, "#output-model", "data-model"), "mep");
  assert.equal(await attr(page, "#output-model", "data-cut"), "true");
  const cut = await page.textContent("#generated");
  assert.ok(cut.length > 0, "the text written so far stays");
  console.log(`# switched away from mep after ${cut.length} characters of a 4096-token run`);
  await page.waitForTimeout(700);
  assert.equal(await page.textContent("#generated"), cut, "no token arrives after the switch");
  assert.equal(await page.inputValue("#prompt"), "Once upon a time", "the prompt is kept");
  assert.equal(new URL(page.url()).searchParams.get("model"), "regla");
  // The lab follows the new model.
  await page.click("#tab-gates");
  await page.waitForSelector('.gate-cell[data-quantity="f"]');
  await page.fill("#max-tokens", "8");
  await page.click("#generate");
  await page.waitForFunction(() => document.querySelector("#status")?.textContent?.startsWith("done"), null, {
    timeout: LOAD_MS,
  });
  assert.equal(await attr(page, "#output-model", "data-model"), "regla");
  assert.equal(await attr(page, "#output-model", "data-cut"), "false");
  assert.deepEqual(errors, []);
  await context.close();
});

test("the gate view compares the trained model with its initial checkpoint (ReGLA Fig. 4)", async () => {
  const { page, context, errors } = await open("?model=regla");
  await page.click("#tab-gates");
  await page.waitForSelector('#fig4[data-state="ready"]', { timeout: LOAD_MS });
  const cells = (which) =>
    page.$$eval(`#fig4 .fig4-cell[data-which="${which}"][data-quantity="f"]`, (cs) =>
      cs.map((c) => ({
        layer: Number(c.dataset.layer),
        saturation: Number(c.dataset.saturation),
        bins: (c.querySelector("svg.histogram")?.dataset.counts ?? "").split(",").length,
      })),
    );
  const initial = await cells("initial");
  const trained = await cells("trained");
  assert.ok(trained.length > 0 && initial.length === trained.length, `${initial.length} vs ${trained.length}`);
  assert.ok([...initial, ...trained].every((c) => c.bins === 20), "two 20-bin histograms per layer");
  assert.match(await page.textContent("#fig4"), /Fig\. 4/);
  const file = promptFile();
  const analyzed = JSON.parse(
    cli(["analyze", "--model", join(SITE, "models/regla-init"), "--text", file, "--json", "--bins", "20"]),
  );
  for (const c of initial) {
    const g = analyzed.gates.find((g) => g.quantity === "f" && g.head === null && g.layer === c.layer);
    assert.ok(g && Math.abs(g.saturation - c.saturation) < 1e-9, `layer ${c.layer}: page ${c.saturation} vs CLI ${g?.saturation}`);
  }
  const mean = (cs) => cs.reduce((a, c) => a + c.saturation, 0) / cs.length;
  console.log(`# Fig. 4 (random models): F saturated ${(100 * mean(initial)).toFixed(1)}% at ±6 init vs ${(100 * mean(trained)).toFixed(1)}%`);
  assert.ok(mean(initial) > mean(trained), "gate biases at ±6 saturate the gates");
  await page.screenshot({ path: join(SHOTS, "fig4.png"), fullPage: true });
  // A model without an initial checkpoint shows no comparison.
  await page.selectOption("#model-picker", "alibi");
  await statusIs(page, "model alibi loaded: ready");
  await page.click("#tab-gates");
  assert.equal(await page.locator("#fig4").count(), 0);
  assert.deepEqual(errors, []);
  await context.close();
});

/**
 * `open(query, options)` with WebGPU generating; skips `t` (returning null) only when this Chromium
 * has no WebGPU at all (no navigator.gpu or no adapter): any other reason fails.
 */
async function openOnWebGpu(t, query, options = {}) {
  const opened = await open(query, options);
  const { page, context } = opened;
  await page.waitForSelector('#backend:is([data-backend="webgpu"], [data-backend="cpu"])', { timeout: LOAD_MS });
  if ((await attr(page, "#backend", "data-backend")) === "webgpu") return opened;
  const notice = (await page.textContent("#backend-notice")) ?? "";
  assert.match(notice, /navigator\.gpu|no WebGPU adapter/, notice);
  await context.close();
  t.skip(`no WebGPU in this Chromium: ${notice}`);
  return null;
}

/**
 * Generate with the form's current settings; returns the text and throughput of the run.
 * `timeoutMs` is for long prompts on WebGPU: SwiftShader prefilled 9.4 tok/s on the CI machine, so a
 * 2,000-character prompt (799 tokens) takes about 85 s (85.4 s measured here while training ran).
 */
async function generateRun(page, timeoutMs = LOAD_MS) {
  await page.click("#generate");
  await page.waitForFunction(() => /^(done|stopped)/.test(document.querySelector("#status")?.textContent ?? ""), null, {
    timeout: timeoutMs,
  });
  return {
    status: await page.textContent("#status"),
    text: await page.textContent("#generated"),
    backend: await attr(page, "#run-backend", "data-backend"),
    prefill: Number(await attr(page, "#prefill-tps", "data-value")),
    decode: Number(await attr(page, "#decode-tps", "data-value")),
  };
}

test("generation runs on WebGPU and its greedy output equals the CPU's", async (t) => {
  // ?backend=gpu: WebGPU whenever it works (Auto would pick the faster CPU over SwiftShader).
  const { page, context, errors } = await open("?backend=gpu");
  await page.waitForSelector('#backend:is([data-backend="webgpu"], [data-backend="cpu"])', { timeout: LOAD_MS });
  if ((await attr(page, "#backend", "data-backend")) !== "webgpu") {
    const notice = (await page.textContent("#backend-notice")) ?? "";
    // Only a browser without WebGPU (no flag support, no adapter) may skip; any other reason fails.
    assert.match(notice, /navigator\.gpu|no WebGPU adapter/, notice);
    await context.close();
    t.skip(`no WebGPU in this Chromium: ${notice}`);
    return;
  }
  const badge = await page.textContent("#backend");
  assert.match(badge, /WebGPU · \S/);
  console.log(`# ${badge}`);
  await page.fill("#prompt", "Once upon a time");
  // SwiftShader (a CPU emulation of a GPU) decodes at a few tokens/s: short runs.
  await page.fill("#max-tokens", "12");
  await page.fill("#temperature", "0");
  const gpu = await generateRun(page);
  assert.equal(gpu.backend, "webgpu");
  assert.match(gpu.status, /^done: \d+ tokens/);
  assert.ok(gpu.text.length > 0 && gpu.decode > 0);
  // The same greedy run on the CPU engine.
  await page.selectOption("#backend-choice", "cpu");
  assert.equal(await attr(page, "#backend", "data-backend"), "cpu");
  const cpu = await generateRun(page);
  assert.equal(cpu.backend, "cpu");
  assert.equal(gpu.text, cpu.text, "greedy output on WebGPU equals the CPU's");
  assert.equal(gpu.status, cpu.status);
  console.log(
    `# WebGPU (${badge.replace(/^backend: WebGPU · /, "")}): prefill ${gpu.prefill.toFixed(1)} tok/s, decode ${gpu.decode.toFixed(1)} tok/s; ` +
      `CPU (wasm): prefill ${cpu.prefill.toFixed(1)} tok/s, decode ${cpu.decode.toFixed(1)} tok/s`,
  );
  // Sampling (temperature > 0) on the GPU uses the same sampler: seeded, reproducible.
  await page.selectOption("#backend-choice", "webgpu");
  await page.fill("#temperature", "0.8");
  await page.fill("#seed", "3");
  await page.fill("#max-tokens", "4");
  const a = await generateRun(page);
  const b = await generateRun(page);
  assert.equal(a.backend, "webgpu");
  assert.equal(a.text, b.text, "same seed, same text");
  // A bias edit runs on the GPU too (the edited model is uploaded at its first generation).
  await page.click("#tab-kernels");
  await slide(page, "#slope-scale", 2);
  await page.waitForFunction(() => document.querySelector("#bias-state")?.textContent?.includes("edited"));
  await page.fill("#temperature", "0");
  await page.fill("#max-tokens", "6");
  const edited = await generateRun(page);
  assert.equal(edited.backend, "webgpu");
  assert.match(edited.status, /^done/);
  await page.selectOption("#backend-choice", "cpu");
  const editedCpu = await generateRun(page);
  assert.equal(editedCpu.backend, "cpu");
  assert.equal(edited.text, editedCpu.text, "the GPU runs the edited model, not the trained one");
  await page.screenshot({ path: join(SHOTS, "webgpu.png"), fullPage: true });
  assert.deepEqual(errors, []);
  await context.close();
});

test("Auto times both backends at load and generates on the faster; the user can override", async (t) => {
  const { page, context, errors } = await open();
  assert.equal(await page.inputValue("#backend-choice"), "auto");
  await page.waitForSelector('#backend:is([data-backend="webgpu"], [data-backend="cpu"])', { timeout: LOAD_MS });
  const badge = await page.textContent("#backend");
  const measured = badge.match(/auto: ([\d.]+) tok\/s vs ([\d.]+) on (the CPU|WebGPU)/);
  if (!measured) {
    assert.match((await page.textContent("#backend-notice")) ?? "", /navigator\.gpu|no WebGPU adapter/, badge);
    await context.close();
    t.skip(`no WebGPU in this Chromium: ${badge}`);
    return;
  }
  const [, fast, slow, other] = measured;
  assert.ok(Number(fast) >= Number(slow), badge);
  const chosen = await attr(page, "#backend", "data-backend");
  assert.equal(chosen, other === "the CPU" ? "webgpu" : "cpu", badge);
  console.log(`# Auto: ${badge}`);
  await page.fill("#max-tokens", "4");
  const run = await generateRun(page);
  assert.equal(run.backend, chosen, "the run goes where Auto chose");
  // Overriding: the other backend generates; back to Auto restores the choice.
  const otherChoice = chosen === "webgpu" ? "cpu" : "webgpu";
  await page.selectOption("#backend-choice", otherChoice);
  const forced = await generateRun(page);
  assert.equal(forced.backend, otherChoice);
  await page.selectOption("#backend-choice", "auto");
  assert.equal(await attr(page, "#backend", "data-backend"), chosen);
  assert.deepEqual(errors, []);
  await context.close();
});

test("without WebGPU the page says why and generates on the CPU", async () => {
  const noGpu = await chromium.launch({ executablePath: "/usr/bin/chromium", args: [...FLAGS, "--disable-features=WebGPU"] });
  try {
    const { page, context, errors } = await open("", { on: noGpu });
    await page.waitForSelector('#backend[data-backend="cpu"]', { timeout: LOAD_MS });
    assert.match(await page.textContent("#backend"), /CPU \(wasm\)/);
    const notice = await page.textContent("#backend-notice");
    // Chromium may keep navigator.gpu and answer requestAdapter() with null instead.
    assert.match(notice, /^WebGPU unavailable, generating on the CPU: .*(navigator\.gpu|no WebGPU adapter)/);
    // Trying again asks anew and, still without WebGPU, lands on the CPU with the notice.
    assert.equal(await attr(page, "#backend", "data-probes"), "1");
    await page.click("#retry-webgpu");
    await page.waitForSelector('#backend[data-probes="2"][data-backend="cpu"] ~ #backend-notice #retry-webgpu', {
      timeout: LOAD_MS,
    });
    await page.fill("#max-tokens", "8");
    const run = await generateRun(page);
    assert.equal(run.backend, "cpu");
    assert.match(run.status, /^done: \d+ tokens/);
    assert.ok(run.text.length > 0);
    assert.deepEqual(errors, []);
    await context.close();
  } finally {
    await noGpu.close();
  }
});

test("losing the GPU device mid-generation stops the run, keeps its text and switches to the CPU", async (t) => {
  // Keep a handle on the worker's GPUDevice so the test can destroy it (a device loss).
  const setup = workerPrelude(`if ("GPUAdapter" in self) {
      const request = GPUAdapter.prototype.requestDevice;
      GPUAdapter.prototype.requestDevice = async function (...args) {
        const device = await request.apply(this, args);
        self.__attnlabDevices = [...(self.__attnlabDevices ?? []), device];
        return device;
      };
    }`);
  const opened = await openOnWebGpu(t, "?backend=gpu", { setup });
  if (!opened) return;
  const { page, context, errors } = opened;
  await page.fill("#max-tokens", "4096");
  await page.click("#generate");
  await whileGenerating(page, 2);
  await page.workers()[0].evaluate(() => self.__attnlabDevices.forEach((d) => d.destroy()));
  await page.waitForFunction(() => /^stopped after \d+ tokens: /.test(document.querySelector("#status")?.textContent ?? ""), null, {
    timeout: LOAD_MS,
  });
  const status = await page.textContent("#status");
  console.log(`# after device.destroy(): ${status}`);
  const kept = await page.textContent("#generated");
  assert.ok(kept.length > 0, "the text so far stays");
  assert.equal(await attr(page, "#backend", "data-backend"), "cpu");
  assert.match(await page.textContent("#backend-notice"), /^WebGPU unavailable, generating on the CPU: /);
  // The next run uses the CPU engine.
  await page.fill("#max-tokens", "8");
  const run = await generateRun(page);
  assert.equal(run.backend, "cpu");
  assert.match(run.status, /^done: \d+ tokens/);
  // "Try WebGPU again" negotiates a new device without a reload; the text stays.
  await page.fill("#prompt", "Once upon a time");
  await page.click("#retry-webgpu");
  await page.waitForSelector('#backend[data-backend="webgpu"]', { timeout: LOAD_MS });
  assert.equal(await page.locator("#backend-notice").count(), 0, "no fallback notice on the new device");
  assert.equal(await page.inputValue("#prompt"), "Once upon a time", "the prompt is kept");
  assert.equal(await page.textContent("#generated"), run.text, "the output is kept");
  await page.fill("#max-tokens", "3");
  const again = await generateRun(page);
  assert.equal(again.backend, "webgpu", "generation runs on the new WebGPU device");
  assert.match(again.status, /^done: \d+ tokens/);
  console.log(`# after "Try WebGPU again": ${await page.textContent("#backend")}`);
  assert.deepEqual(errors, []);
  await context.close();
});

/** The heatmap's window: [row0, col0, side, stride]. */
const heatWindow = async (page) => numbers(await attr(page, "#heatmap", "data-window"));

/** Hover window cell (b, c) of the zoomed heatmap. */
async function hoverCell(page, b, c) {
  const canvas = page.locator("#heatmap canvas");
  await canvas.scrollIntoViewIfNeeded();
  const side = (await heatWindow(page))[2];
  const box = await canvas.boundingBox();
  await page.mouse.move(box.x + ((c + 0.5) * box.width) / side, box.y + ((b + 0.5) * box.height) / side);
}

test("zoom on an exact map (CPU): the window is cut in the page around the locked cell, which keeps its value; pan and the whole map", async () => {
  const { page, context, errors } = await open("?backend=cpu");
  await page.fill("#prompt", readFileSync(join(SITE, "eval", "heldout.txt"), "utf8").slice(0, 800));
  await page.fill("#max-tokens", "1");
  await generateRun(page);
  await page.click("#tab-attention");
  await page.waitForFunction(() => Number(document.querySelector("#heatmap")?.dataset.tokens) > 200, null, { timeout: LOAD_MS });
  const n = Number(await attr(page, "#heatmap", "data-tokens"));
  assert.deepEqual(await heatWindow(page), [0, 0, n, 1]);
  await page.focus("#heatmap canvas");
  for (let k = 0; k < 40; k++) await page.keyboard.press("ArrowDown");
  for (let k = 0; k < 20; k++) await page.keyboard.press("ArrowRight");
  await page.waitForFunction(() => document.querySelector("#heatmap")?.dataset.selected === "40,20");
  const value = await attr(page, "#heatmap", "data-value");
  await page.keyboard.press("+");
  await page.waitForFunction(() => document.querySelector("#heatmap")?.dataset.zoom === "zoomed");
  const [row0, col0, side, stride] = await heatWindow(page);
  assert.equal(stride, 1);
  assert.equal(side, Math.round(n / 2));
  assert.ok(row0 <= 40 && 40 < row0 + side && col0 <= 20 && 20 < col0 + side, `the window ${row0},${col0} holds the locked cell`);
  assert.equal(await attr(page, "#heatmap", "data-selected"), "40,20");
  assert.equal(await attr(page, "#heatmap", "data-value"), value, "the locked cell keeps its value in the window");
  await page.click("#heatmap-pan-down");
  await page.waitForFunction((r) => Number(document.querySelector("#heatmap")?.dataset.window.split(",")[0]) > r, row0);
  await page.click("#heatmap-zoom-whole");
  assert.deepEqual(await heatWindow(page), [0, 0, n, 1]);
  assert.equal(await page.locator("#heatmap-zoom-out").isDisabled(), true);
  assert.deepEqual(errors, []);
  await context.close();
});

test("long texts on WebGPU: the views trace in the worker's GPU, binned maps zoom down to single tokens equal to attnlab dump, LAA of the first 512 tokens equals attnlab analyze", async (t) => {
  const opened = await openOnWebGpu(t, "?backend=gpu");
  if (!opened) return;
  const { page, context, errors } = opened;
  const heldout = readFileSync(join(SITE, "eval", "heldout.txt"), "utf8");
  const prompt = heldout.slice(0, 2000);
  await page.fill("#prompt", prompt);
  await page.fill("#max-tokens", "1");
  const prefillStart = Date.now();
  await generateRun(page, 300_000);
  console.log(`# ${prompt.length}-character prompt generated on WebGPU in ${((Date.now() - prefillStart) / 1000).toFixed(1)} s`);
  const traceStart = Date.now();
  await page.click("#tab-attention");
  await page.waitForFunction(() => Number(document.querySelector("#heatmap")?.dataset.tokens) > 512, null, { timeout: 300_000 });
  const traceS = (Date.now() - traceStart) / 1000;
  const tokens = Number(await attr(page, "#heatmap", "data-tokens"));
  const [, , side, stride] = await heatWindow(page);
  console.log(`# ${tokens} tokens traced on WebGPU in ${traceS.toFixed(1)} s (SwiftShader; prefill, binned maps, exact first 512): map ${side}×${side}, ${stride} tokens per cell`);
  assert.ok(stride >= 2 && side === Math.ceil(tokens / stride), `binned map: ${side} cells of ${stride}`);
  assert.match(await page.textContent("#attention-view .trace-note"), /traced on WebGPU: the maps are binned on the GPU/);
  assert.equal(await page.locator("#token-strip").count(), 0, "the strip links exact maps only");
  // Zoom in around a cell until one cell is one token; the window comes from the worker.
  await hoverCell(page, 150, 100);
  for (let k = 0; k < 6 && (await heatWindow(page))[3] > 1; k++) {
    const t0 = Date.now();
    await page.click("#heatmap-zoom-in");
    await page.waitForFunction(() => document.querySelector("#heatmap")?.dataset.zoom === "zoomed", null, { timeout: 60_000 });
    console.log(`# zoom ${k + 1}: window ${(await heatWindow(page)).join(",")} fetched from the worker's GPU trace in ${Date.now() - t0} ms`);
  }
  const [row0, col0, zside, zstride] = await heatWindow(page);
  assert.equal(zstride, 1, "zoomed to single tokens");
  await hoverCell(page, 5, 2);
  await page.waitForFunction(() => document.querySelector("#heatmap")?.dataset.selected !== "");
  const [qi, kj] = numbers(await attr(page, "#heatmap", "data-selected"));
  const shown = Number(await attr(page, "#heatmap", "data-value"));
  assert.deepEqual([qi, kj], [row0 + 5, col0 + 2]);
  assert.match(await page.textContent("#heatmap .readout"), new RegExp(`^query ${qi} .* → key ${kj} .*: `));
  await page.screenshot({ path: join(SHOTS, "attention-gpu-zoomed.png"), fullPage: true });
  // The CLI's exact matrices of the prompt (rows depend only on earlier tokens).
  const dir = mkdtempSync(join(tmpdir(), "attnlab-e2e-"));
  writeFileSync(join(dir, "prompt.txt"), prompt);
  cli(["dump", "--model", join(SITE, "models/alibi"), "--text", join(dir, "prompt.txt"), "--out", join(dir, "d.safetensors"), "--attention", "--max-tokens", "1000"]);
  const a = readSafetensors(join(dir, "d.safetensors"))["attention.layer0"];
  const n = a.shape[1];
  assert.ok(qi < n - 8, `query ${qi} lies inside the prompt's ${n} tokens`);
  const expected = a.data[qi * n + kj];
  assert.ok(Math.abs(shown - expected) < 1e-4, `page ${shown} vs CLI ${expected} at (${qi}, ${kj})`);
  console.log(`# zoomed window ${row0},${col0} (${zside} cells): cell (${qi}, ${kj}) = ${shown} (CLI ${expected})`);
  // Pan and back to the whole map.
  await page.click("#heatmap-pan-right");
  await page.waitForFunction((c) => Number(document.querySelector("#heatmap")?.dataset.window.split(",")[1]) > c, col0, { timeout: 60_000 });
  await page.click("#heatmap-zoom-whole");
  assert.deepEqual(await heatWindow(page), [0, 0, side, stride]);

  // LAA and the head summaries come from an exact GPU trace of the first 512 tokens: equal to the
  // CLI's analysis of those tokens.
  assert.match(await page.textContent("#attention-view .trace-note"), /cover the first 512 tokens/);
  await page.click("#tab-laa");
  await page.waitForSelector("#laa-table tr[data-auc]", { timeout: 120_000 });
  const aucs = await page.$$eval("#laa-table tr[data-auc]", (rows) => rows.map((r) => Number(r.dataset.auc)));
  assert.match(await page.textContent("#laa-chart"), /locally accumulated attention, 512 tokens/);
  const analyzed = JSON.parse(cli(["analyze", "--model", join(SITE, "models/alibi"), "--text", join(dir, "prompt.txt"), "--max-tokens", "512", "--json"]));
  assert.equal(analyzed.tokens, 512);
  analyzed.layers.forEach((l, i) => assert.ok(Math.abs(aucs[i] - l.laa.auc) < 1e-5, `layer ${i}: page ${aucs[i]} vs CLI ${l.laa.auc}`));
  await page.screenshot({ path: join(SHOTS, "laa-gpu.png"), fullPage: true });
  assert.deepEqual(errors, []);
  await context.close();
});

test("a linear-family model's maps on WebGPU (Fast Decay: key- and value-axis gates) equal attnlab dump", async (t) => {
  const opened = await openOnWebGpu(t, "?model=fast-decay&backend=gpu");
  if (!opened) return;
  const { page, context, errors } = opened;
  const prompt = readFileSync(join(SITE, "eval", "heldout.txt"), "utf8").slice(0, 600);
  await page.fill("#prompt", prompt);
  await page.fill("#max-tokens", "1");
  await generateRun(page);
  await page.click("#tab-attention");
  await page.waitForFunction(() => Number(document.querySelector("#heatmap")?.dataset.tokens) > 64, null, { timeout: 120_000 });
  assert.equal(await attr(page, "#attention-view", "data-device"), "webgpu", "traced in the worker's GPU");
  const [, , side, stride] = await heatWindow(page);
  assert.equal(stride, 1, "an exact map");
  const dir = mkdtempSync(join(tmpdir(), "attnlab-e2e-"));
  writeFileSync(join(dir, "prompt.txt"), prompt);
  cli(["dump", "--model", join(SITE, "models/fast-decay"), "--text", join(dir, "prompt.txt"), "--out", join(dir, "d.safetensors"), "--attention"]);
  const a = readSafetensors(join(dir, "d.safetensors"))["attention.layer0"];
  const n = a.shape[1];
  // Near the diagonal (this model's gates decay fast: far cells are ~0 on both sides).
  for (const [b, c] of [[side - 2, side - 3], [side >> 1, (side >> 1) - 1], [side - 2, side - 4]]) {
    await hoverCell(page, b, c);
    await page.waitForFunction((want) => document.querySelector("#heatmap")?.dataset.selected === want, `${b},${c}`);
    const shown = Number(await attr(page, "#heatmap", "data-value"));
    const expected = a.data[b * n + c];
    assert.ok(Math.abs(expected) > 1e-3, `cell (${b}, ${c}) carries weight: ${expected}`);
    assert.ok(Math.abs(shown - expected) < 1e-4, `page ${shown} vs CLI ${expected} at (${b}, ${c})`);
    console.log(`# fast-decay on WebGPU: cell (${b}, ${c}) = ${shown} (CLI ${expected})`);
  }
  assert.deepEqual(errors, []);
  await context.close();
});

test("the perplexity sweep runs on WebGPU when generation does: its first length equals attnlab eval", async (t) => {
  const opened = await openOnWebGpu(t, "?backend=gpu");
  if (!opened) return;
  const { page, context, errors } = opened;
  const t0 = Date.now();
  await page.click("#tab-extrapolation");
  const current = '#ppl-chart g.series[data-label="current settings"]';
  // SwiftShader is slow: the first length (32 windows of 128 tokens) is enough to compare.
  await page.waitForSelector(`#ppl-view[data-device="webgpu"] ${current}[data-values*="."]`, { timeout: 240_000 });
  const first = numbers(await attr(page, current, "data-values"))[0];
  console.log(`# perplexity at 128 tokens on WebGPU (SwiftShader): ${first} after ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  assert.match(await page.textContent("#ppl-view"), /computed on WebGPU/);
  const evaluated = JSON.parse(cli(["eval", "--model", join(SITE, "models/alibi"), "--text", join(SITE, "eval", "heldout.txt"), "--lengths", "128", "--max-windows", "32", "--json"]));
  const expected = evaluated.results[0].ppl;
  assert.ok(Math.abs(first - expected) / expected < 1e-3, `page ${first} vs CLI ${expected}`);
  assert.deepEqual(errors, []);
  await context.close();
});

/**
 * Make the model's worker (the newest) throw an uncaught error, as a panic in its wasm does; with
 * `restarts`, returns once a new worker runs.
 */
async function crashWorker(page, message, restarts = true) {
  const old = page.workers();
  await old[old.length - 1].evaluate((m) => setTimeout(() => {
    throw new Error(m);
  }), message);
  const deadline = Date.now() + LOAD_MS;
  while (restarts && Date.now() < deadline && page.workers().every((w) => old.includes(w))) await page.waitForTimeout(50);
}

test("a crashed worker: the page names it, keeps the text and the slider edit, starts a new worker and generates again; crashing in a loop asks for a reload", async () => {
  // The trained mep on the CPU: its run lasts long enough to crash mid-run (the small random default
  // can write all 4096 tokens before the page draws a frame that shows them).
  const { page, context, errors } = await open("?model=mep&backend=cpu");
  // A slider edit that must survive the restart (the new worker applies it again).
  await slide(page, "#slope-scale", 2); // ×4
  await page.waitForFunction(() => /[?&]slope=4\b/.test(location.search));
  const curves = await kernelValues(page);
  // Sampled, so that the run cannot end early at an end-of-text token.
  await page.fill("#temperature", "1");
  await page.fill("#max-tokens", "4096");
  await page.click("#generate");
  await whileGenerating(page, 2);
  const before = await page.textContent("#generated");
  await crashWorker(page, "simulated crash");
  await page.waitForFunction(() => /the model's worker stopped \(.*simulated crash\)\. A new worker started and loads mep again; your text is kept\./.test(document.querySelector("#worker-notice")?.textContent ?? ""), null, {
    timeout: LOAD_MS,
  });
  // The run in flight ended with the reason; its text stays.
  assert.match(await page.textContent("#error"), /^Generation failed: the model's worker stopped \(.*simulated crash\)/);
  await page.waitForSelector('main[data-state="ready"]', { timeout: LOAD_MS });
  const kept = await page.textContent("#generated");
  assert.ok(before.length > 0 && kept.startsWith(before), "the text generated before the crash stays");
  assert.equal(await page.inputValue("#prompt"), DEFAULT_PROMPT, "the prompt stays");
  for (let t = 0; t < 100 && page.workers().length > 1; t++) await page.waitForTimeout(50);
  assert.equal(page.workers().length, 1, "the stopped worker was terminated");
  // The new worker has the model with the edit: the same kernel curves as before the crash.
  assert.match(await page.evaluate(() => location.search), /[?&]slope=4\b/);
  assert.equal(await page.inputValue("#slope-scale"), "2");
  await page.waitForSelector('#kernel-curves[data-current="true"] #kernel-chart g.series');
  assert.deepEqual(await kernelValues(page), curves);
  await page.fill("#max-tokens", "8");
  const run = await generateRun(page);
  assert.match(run.status, /^done: \d+ tokens/);
  console.log(`# before the crash: ${before.length} chars; after: ${kept.length}; notice: ${await page.textContent("#worker-notice")}`);
  await page.screenshot({ path: join(SHOTS, "worker-restarted.png") });
  // Three more crashes within a minute: the page stops restarting and asks for a reload.
  for (let k = 0; k < 3; k++) {
    await crashWorker(page, `crash ${k}`, k < 2);
    const where = k < 2 ? "#worker-notice" : "#error";
    await page.waitForFunction(([k, where]) => new RegExp(`crash ${k}`).test(document.querySelector(where)?.textContent ?? ""), [k, where], { timeout: LOAD_MS });
  }
  assert.match(await page.textContent("#error"), /crash 2\), 4 times within a minute; reload the page/);
  assert.equal(await page.inputValue("#prompt"), DEFAULT_PROMPT);
  assert.deepEqual(errors, []);
  await context.close();
});

test("a worker that stops silently (no error event, as when the browser stops it for memory): the watchdog names it, keeps the text, and a new worker generates", async () => {
  const { page, context, errors } = await open();
  await page.fill("#max-tokens", "6");
  await generateRun(page);
  const text = await page.textContent("#generated");
  const old = page.workers();
  const stopped = Date.now();
  // close() ends the worker without an error event.
  await old[old.length - 1].evaluate(() => setTimeout(() => close()));
  await page.waitForFunction(() => /the model's worker stopped \(it answered nothing for \d+ s; the browser may have stopped it/.test(document.querySelector("#worker-notice")?.textContent ?? ""), null, {
    timeout: 90_000,
  });
  const noticed = (Date.now() - stopped) / 1000;
  console.log(`# a silently stopped worker was noticed after ${noticed.toFixed(1)} s: ${await page.textContent("#worker-notice")}`);
  assert.ok(noticed < 45, `noticed after ${noticed} s`);
  await page.waitForSelector('main[data-state="ready"]', { timeout: LOAD_MS });
  assert.equal(await page.textContent("#generated"), text, "the text stays");
  assert.equal(await page.inputValue("#prompt"), DEFAULT_PROMPT, "the prompt stays");
  const run = await generateRun(page);
  assert.match(run.status, /^done: \d+ tokens/);
  assert.deepEqual(errors, []);
  await context.close();
});

/** Paths (below the site prefix) of the requests the page makes from now on. */
function recordRequests(page) {
  const paths = [];
  page.on("request", (r) => {
    const path = new URL(r.url()).pathname;
    if (path.startsWith(PREFIX)) paths.push(path.slice(PREFIX.length));
  });
  return paths;
}

async function reloadReady(page) {
  await page.reload();
  await page.waitForSelector('main[data-state="ready"]', { timeout: LOAD_MS });
}

/** Replace the cached entry of `path` with `edit(bytes)`, keeping its headers (the integrity value). */
async function tamperCache(page, path, how) {
  await page.evaluate(
    async ([path, how]) => {
      const cache = await caches.open("attnlab-models-v1");
      const url = new URL(path, document.baseURI).href;
      const old = await cache.match(url);
      if (!old) throw new Error(`${url} is not cached`);
      let bytes = new Uint8Array(await old.arrayBuffer());
      if (how === "truncate") bytes = bytes.slice(0, bytes.length - 100);
      else bytes[bytes.length >> 1] ^= 0x5a;
      await cache.put(url, new Response(bytes, { headers: new Headers(old.headers) }));
    },
    [path, how],
  );
}

test("model files come from the browser cache on reload; a corrupt entry is noticed and fetched again", async () => {
  const { page, context, errors } = await open("?backend=cpu");
  assert.equal(await attr(page, "#model-source", "data-source"), "network");
  assert.match(await page.textContent("#model-source"), /now kept in the browser cache/);
  const requests = recordRequests(page);

  await reloadReady(page);
  assert.equal(await attr(page, "#model-source", "data-source"), "cache");
  const modelFiles = requests.filter((p) => p.startsWith("models/alibi/"));
  assert.deepEqual(modelFiles, [], "no model file is requested from the server on reload");
  assert.equal(await page.locator("#cache-notice").count(), 0);

  // A truncated entry (integrity header kept): noticed, deleted, fetched again.
  await tamperCache(page, "models/alibi/model.safetensors", "truncate");
  requests.length = 0;
  await reloadReady(page);
  const notice = await page.textContent("#cache-notice");
  console.log(`# ${notice}`);
  assert.match(notice, /^cached model\.safetensors of alibi was corrupt \(.*bytes where .* were stored\): fetched again$/);
  assert.ok(requests.includes("models/alibi/model.safetensors"), "the server was asked again");
  assert.ok(!requests.includes("models/alibi/config.json"), "intact entries still come from the cache");
  assert.equal(await attr(page, "#model-source", "data-source"), "mixed");
  await page.fill("#max-tokens", "8");
  const run = await generateRun(page);
  assert.match(run.status, /^done: \d+ tokens/);
  assert.ok(run.text.length > 0, "generation works after the refetch");

  // One altered byte (same length) is caught by the checksum.
  await tamperCache(page, "models/alibi/model.safetensors", "flip");
  requests.length = 0;
  await reloadReady(page);
  assert.match(await page.textContent("#cache-notice"), /^cached model\.safetensors of alibi was corrupt \(the checksum differs\): fetched again$/);
  assert.ok(requests.includes("models/alibi/model.safetensors"));
  // The refetched file was stored again.
  requests.length = 0;
  await reloadReady(page);
  assert.equal(await attr(page, "#model-source", "data-source"), "cache");
  assert.equal(await page.locator("#cache-notice").count(), 0);

  // A model with the collection's shared tokenizer is cached whole, the shared file included.
  await page.selectOption("#model-picker", "regla-init");
  await statusIs(page, "model regla-init loaded: ready");
  requests.length = 0;
  await reloadReady(page);
  assert.equal(await attr(page, "#model-source", "data-source"), "cache");
  // Indexes (the main one and each collection's) are read fresh on every load; model files are not.
  assert.deepEqual(requests.filter((p) => p.startsWith("models/") && !/^models\/([^/]+\/)?index\.json$/.test(p)), []);
  assert.deepEqual(errors, []);
  await context.close();

  // Without the Cache API (in the worker, which loads the model) the page loads from the network
  // and says so.
  const noCache = await open("", { setup: workerPrelude(`Object.defineProperty(self, "caches", { value: undefined });`) });
  assert.equal(await attr(noCache.page, "#model-source", "data-source"), "network");
  assert.match(await noCache.page.textContent("#model-source"), /not cached: .*Cache API/);
  assert.deepEqual(noCache.errors, []);
  await noCache.context.close();
});

test("the extrapolation view draws every shipped model's curve from results.json", async () => {
  const table = JSON.parse(readFileSync(join(SITE, "results.json"), "utf8"));
  const { page, context, errors } = await open();
  await page.click("#tab-extrapolation");
  await page.waitForSelector('#ppl-chart g.series[data-label^="shipped: "]', { timeout: LOAD_MS });
  const curves = '#ppl-chart g.series[data-label^="shipped: "], #ppl-chart g.series[data-label^="extra seed: "]';
  const shown = await page.$$eval(curves, (gs) =>
    gs.map((g) => ({
      kind: g.dataset.label.replace(/: .*$/, ""),
      name: g.dataset.label.replace(/^(shipped|extra seed): /, "").replace(/ · .*$/, ""),
      budget: (g.dataset.label.match(/ · ([\d.]+)([Mk]) tokens$/) || []).slice(1),
      xs: g.dataset.xs.split(",").map(Number),
      ys: g.dataset.values.split(",").map(Number),
      width: Number(g.querySelector("path").getAttribute("stroke-width")),
    })),
  );
  assert.equal(shown.length, table.models.length, "one curve per model of the table");
  for (const m of table.models) {
    const s = shown.find((c) => c.name === m.name);
    assert.ok(s, `${m.name} is plotted`);
    // Extra seeds (report-only, from seeds/) are labelled as such, not as shipped.
    assert.equal(s.kind, m.extra_seed ? "extra seed" : "shipped", `${m.name}: label kind`);
    assert.deepEqual(s.xs, m.ppl.map((p) => p.length), `${m.name}: lengths`);
    assert.deepEqual(s.ys, m.ppl.map((p) => p.ppl), `${m.name}: perplexities equal results.json`);
    // Each label carries the model's training budget from results.json (the set may mix budgets).
    const budget = m.training && m.training.budget;
    if (budget) {
      const [value, unit] = s.budget;
      assert.ok(Math.abs(Number(value) * (unit === "M" ? 1e6 : 1e3) - budget) <= 0.05 * (unit === "M" ? 1e6 : 1e3), `${m.name}: ${s.budget} vs ${budget}`);
    } else {
      assert.deepEqual(s.budget, [], `${m.name} has no budget in results.json`);
    }
  }
  const seeds = table.models.filter((m) => m.extra_seed).length;
  const note = await page.textContent("#shipped-state");
  assert.ok(note.includes(seeds ? `the ${table.models.length - seeds} shipped models and ${seeds} extra seeds` : `the ${table.models.length} shipped models`), note);
  const budgets = new Set(table.models.filter((m) => m.training && m.training.budget).map((m) => m.training.budget));
  assert.equal(await attr(page, "#shipped-state", "data-mixed-budgets"), String(budgets.size > 1));
  assert.equal((await page.textContent("#shipped-state")).includes("different token budgets"), budgets.size > 1);
  // The loaded model's name (alibi) is highlighted among the thin lines.
  const alibi = shown.find((c) => c.name === "alibi");
  assert.ok(alibi && shown.every((c) => c === alibi || c.width < alibi.width), "the current model is highlighted");
  const legend = await page.$$eval("#ppl-chart-legend li", (lis) => lis.map((li) => li.dataset.label));
  assert.ok(legend.some((l) => /^shipped: mep( · |$)/.test(l)) && legend.includes("current settings"), `${legend}`);
  // (The slider test's extrapolation.png shows them under the page's finished sweep.)
  assert.deepEqual(errors, []);
  await context.close();

  const missing = await open("", {
    setup: (page) => page.route("**/results.json", (route) => route.fulfill({ status: 404, body: "not found" })),
  });
  await missing.page.click("#tab-extrapolation");
  await missing.page.waitForSelector("#shipped-missing", { timeout: LOAD_MS });
  assert.match(await missing.page.textContent("#shipped-missing"), /results\.json is not on the server/);
  assert.equal(await missing.page.locator('#ppl-chart g.series[data-label^="shipped: "]').count(), 0);
  assert.deepEqual(missing.errors, []);
  await missing.context.close();
});


// ---- Shareable state: the address holds the view (issue 15) -------------------------------------

/** Everything the page shows that a link must restore, read from the page. */
async function controls(page) {
  const value = (sel) => page.inputValue(sel);
  const checked = (sel) => page.locator(sel).isChecked();
  await page.click("#tab-kernels");
  await page.waitForSelector('#kernel-curves[data-current="true"] #kernel-chart g.series');
  const kernels = {
    slope: await page.textContent("#slope-scale-value"),
    mix: await Promise.all([0, 1, 2].map(async (k) => [await value(`#mix-kernel-${k}`), await value(`#mix-weight-${k}`), await value(`#mix-scale-${k}`)])),
    layer: await value("#kernel-layer"),
    range: await value("#kernel-range"),
    kernelCurve: await checked('input[name="curve-kind"] >> nth=1'),
    logY: await checked("#kernel-log-y"),
    bias: await page.textContent("#bias-state"),
    values: await kernelValues(page),
  };
  await page.click("#tab-attention");
  await page.waitForSelector('#attention-view[data-running="false"] #heatmap[data-selected]');
  return {
    form: await Promise.all(["#prompt", "#max-tokens", "#temperature", "#top-k", "#top-p", "#seed", "#backend-choice"].map(value)),
    generated: await page.textContent("#generated"),
    kernels,
    stage: await page.$$eval('input[name="stage"]', (rs) => rs.findIndex((r) => r.checked)),
    thumb: await page.getAttribute('.thumb[aria-pressed="true"]', "title"),
    cell: await attr(page, "#heatmap", "data-selected"),
    cellValue: await attr(page, "#heatmap", "data-value"),
    n: await attr(page, "#heatmap", "data-n"),
  };
}

test("a link holds the view: opened in a fresh page it restores every control and regenerates the same output", async () => {
  const { page, context, errors } = await open("?backend=cpu");
  await context.grantPermissions(["clipboard-read", "clipboard-write"]);
  await page.fill("#prompt", "Once upon a time, in a café & a garden");
  await page.fill("#max-tokens", "10");
  await page.fill("#temperature", "0.7");
  await page.fill("#top-k", "12");
  await page.fill("#top-p", "0.85");
  await page.fill("#seed", "1234");
  // The sliders: slope ×2^1.5, kernel β on, kernel γ switched to a Gaussian with slope ×2.
  await page.click("#tab-kernels");
  let model = await kernelModel(page);
  await kernelValues(page);
  await slide(page, "#slope-scale", 1.5);
  await kernelValuesAfterEdit(page, model);
  model = await kernelModel(page);
  await slide(page, "#mix-weight-1", 0.4);
  await kernelValuesAfterEdit(page, model);
  model = await kernelModel(page);
  await page.selectOption("#mix-kernel-2", "gaussian");
  await kernelValuesAfterEdit(page, model);
  model = await kernelModel(page);
  await slide(page, "#mix-scale-2", 1);
  await kernelValuesAfterEdit(page, model);
  // The kernel chart: layer 1, 8× the training length, exp(B(d)) on a log axis.
  await page.selectOption("#kernel-layer", "1");
  await page.selectOption("#kernel-range", "8");
  await page.check('input[name="curve-kind"] >> nth=1');
  await page.check("#kernel-log-y");
  const run = await generateRun(page);
  assert.match(run.status, /^done: \d+ tokens/);
  // The attention view: the biased logits of layer 1, head 2, and a cell locked by keyboard.
  await page.click("#tab-attention");
  await page.check('input[name="stage"] >> nth=1');
  await page.click('.thumb[title="L1 H2"]');
  await page.waitForSelector('#attention-view[data-running="false"] #heatmap');
  await page.focus("#heatmap canvas");
  for (let k = 0; k < 4; k++) await page.keyboard.press("ArrowDown");
  await page.keyboard.press("ArrowRight");
  await page.keyboard.press("ArrowRight");
  await urlParam(page, "cell", "4,2");
  const before = await controls(page);
  assert.equal(before.cell, "4,2");
  assert.equal(before.thumb, "L1 H2");
  assert.ok(before.generated.length > 0);
  // "copy link" puts the address on the clipboard.
  await page.click("#copy-link");
  await page.waitForSelector("#copy-link-status[data-link^=http]");
  const link = await attr(page, "#copy-link-status", "data-link");
  assert.equal(await page.evaluate(() => navigator.clipboard.readText()), link);
  assert.equal(link, page.url());
  const params = new URL(link).searchParams;
  assert.equal(params.get("prompt"), "Once upon a time, in a café & a garden");
  assert.equal(params.get("gen"), run.status.match(/^done: (\d+)/)[1]);
  console.log(`# shared link (${link.length} characters): ${new URL(link).search}`);
  await page.screenshot({ path: join(SHOTS, "share-source.png"), fullPage: true });
  await context.close();

  // A fresh page on the link: every control comes back and the output is generated again.
  const fresh = await open(link.slice(server.url.length));
  await fresh.page.waitForFunction(() => document.querySelector("#status")?.textContent?.startsWith("done"), null, {
    timeout: LOAD_MS,
  });
  // (The same tokens; the reason may read "max tokens" where the first run met the end of text.)
  const tokens = run.status.match(/^done: (\d+) tokens/)[1];
  assert.match(await fresh.page.textContent("#status"), new RegExp(`^done: ${tokens} tokens`));
  await fresh.page.waitForSelector(`#heatmap[data-n="${before.n}"][data-selected="4,2"]`, { timeout: LOAD_MS });
  const after = await controls(fresh.page);
  assert.deepEqual(after, before);
  assert.equal(await fresh.page.locator("#url-warning").count(), 0, "a link the page wrote has nothing to warn about");
  // The restored page writes the same address back.
  await fresh.page.waitForTimeout(500);
  assert.equal(new URL(fresh.page.url()).search, new URL(link).search);
  await fresh.page.screenshot({ path: join(SHOTS, "share-restored.png"), fullPage: true });
  assert.deepEqual(errors, []);
  assert.deepEqual(fresh.errors, []);
  await fresh.context.close();
});

test("a link with bad or stale parameters names each one and opens a working page with defaults", async () => {
  const bad =
    "?model=gla&temperature=abc&seed=-1&tab=foo&slope=xyz&cell=a,b&zoom=3&layer=9&head=0&kernel_layer=7&prompt=%E2%28&max_tokens=4";
  const { page, context, errors } = await open(bad);
  const warnings = () => page.$$eval("#url-warning li", (lis) => lis.map((li) => li.textContent));
  const named = (await warnings()).map((w) => w.split(":")[0]);
  for (const name of ["model", "temperature", "seed", "tab", "slope", "cell", "zoom", "prompt"]) {
    assert.ok(named.includes(name), `${name} is named: ${named}`);
  }
  assert.ok((await warnings()).includes("temperature: 'abc' cannot be used (temperature: enter a number from 0 to 10); the default is used"));
  // Defaults where the link was bad, the link's values where it was good.
  assert.equal(await page.inputValue("#model-picker"), "alibi");
  assert.equal(await page.inputValue("#prompt"), DEFAULT_PROMPT);
  assert.equal(await page.inputValue("#temperature"), "0.8");
  assert.equal(await page.inputValue("#seed"), "0");
  assert.equal(await page.inputValue("#max-tokens"), "4");
  assert.equal(await attr(page, "#tab-kernels", "aria-selected"), "true");
  // Parameters only a model can check: the kernel layer (on the kernel tab) and the zoomed head.
  await page.waitForFunction(() => /kernel_layer: the model has \d+ layers; layer \d+ is shown/.test(document.querySelector("#url-warning")?.textContent ?? ""));
  await page.click("#tab-attention");
  await page.waitForFunction(() => /layer: layer 9, head 0: the model has \d+ layers of \d+ heads; layer 0, head 0 is shown/.test(document.querySelector("#url-warning")?.textContent ?? ""));
  assert.equal(await page.getAttribute('.thumb[aria-pressed="true"]', "title"), "L0 H0");
  await page.screenshot({ path: join(SHOTS, "share-bad-link.png"), fullPage: true });
  // The page works, and its address drops what it could not use.
  const run = await generateRun(page);
  assert.match(run.status, /^done: \d+ tokens/);
  await urlParam(page, "temperature", "0.8");
  const params = new URL(page.url()).searchParams;
  for (const name of ["zoom", "slope", "cell"]) assert.equal(params.get(name), null, name);
  assert.equal(params.get("prompt"), DEFAULT_PROMPT, "the page's own values are in its address");
  assert.deepEqual([params.get("tab"), params.get("layer"), params.get("head")], ["attention", "0", "0"]);
  await page.click("#url-warning .dismiss");
  assert.equal(await page.locator("#url-warning").count(), 0);
  assert.deepEqual(errors, []);
  await context.close();

  // Sliders on a model whose biases are learned: named, and the model runs as trained; the link's
  // output (gen=3) is regenerated on a linear-attention model too.
  const learned = await open("?model=regla&slope=2&gen=3&seed=5&backend=cpu");
  assert.match(await learned.page.textContent("#url-warning"), /slope, uniform, mix: this model's biases are learned/);
  await learned.page.waitForFunction(() => document.querySelector("#status")?.textContent?.startsWith("done"), null, {
    timeout: LOAD_MS,
  });
  assert.match(await learned.page.textContent("#status"), /^done: 3 tokens/);
  assert.match(await learned.page.textContent("#bias-state"), /as trained/);
  assert.deepEqual(learned.errors, []);
  await learned.context.close();
});

// ---- Figure exports (issue 15) ------------------------------------------------------------------

/** The attnlab version exported figures name (the workspace's). */
const VERSION = readFileSync(join(import.meta.dirname, "../../Cargo.toml"), "utf8").match(/\[workspace\.package\][^[]*?version = "([^"]+)"/)[1];

/** Click `sel` and capture the download it starts: its file name and bytes. */
async function download(page, sel) {
  const [d] = await Promise.all([page.waitForEvent("download"), page.click(sel)]);
  return { name: d.suggestedFilename(), bytes: readFileSync(await d.path()) };
}

/** Parse an exported SVG in the page: parse errors, the root, every text, and element counts. */
function parseSvg(page, text) {
  return page.evaluate((t) => {
    const doc = new DOMParser().parseFromString(t, "image/svg+xml");
    return {
      error: doc.querySelector("parsererror")?.textContent ?? null,
      root: doc.documentElement.localName,
      ns: doc.documentElement.namespaceURI,
      texts: [...doc.querySelectorAll("text")].map((e) => e.textContent),
      paths: doc.querySelectorAll("path").length,
      image: doc.querySelector("image")?.getAttribute("href")?.slice(0, 22) ?? null,
      width: Number(doc.documentElement.getAttribute("width")),
    };
  }, text);
}

/** Check a PNG file: signature and width (from its IHDR chunk). */
function pngWidth(bytes) {
  assert.deepEqual([...bytes.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], "PNG signature");
  assert.ok(bytes.length > 1000, `${bytes.length} bytes`);
  return bytes.readUInt32BE(16);
}

test("every export of the kernel chart and the heatmap downloads the figure, or its data equal to what the view shows", async () => {
  const { page, context, errors } = await open();
  await page.click("#tab-kernels");
  await kernelValues(page);
  const head0 = '#kernel-chart g.series[data-label="head 0"]';
  const shown = numbers(await attr(page, head0, "data-values"));
  const xs = numbers(await attr(page, head0, "data-xs"));
  const title = await page.textContent("#kernel-chart .chart-title");
  const model = (await page.textContent("#model-info")).match(/^(\S+) ·/)[1];

  const svg = await download(page, "#kernel-chart-export-svg");
  assert.equal(svg.name, "attnlab-kernel-chart.svg");
  const parsed = await parseSvg(page, svg.bytes.toString("utf8"));
  assert.equal(parsed.error, null, "the SVG parses");
  assert.equal(parsed.root, "svg");
  assert.equal(parsed.ns, "http://www.w3.org/2000/svg");
  const texts = parsed.texts.join("\n");
  for (const t of [title, "distance d = i − j (tokens)", "B_h(d)", "head 0", "training length", `attnlab ${VERSION} · model ${model} · bias: as trained`, "text: prompt"]) {
    assert.ok(texts.includes(t), `the SVG has "${t}"`);
  }
  assert.ok(parsed.paths >= 4, "one line per head");
  const png = await download(page, "#kernel-chart-export-png");
  assert.equal(png.name, "attnlab-kernel-chart.png");
  assert.equal(pngWidth(png.bytes), 2 * parsed.width, "drawn at twice the SVG's size");
  writeFileSync(join(SHOTS, "export-kernel-chart.png"), png.bytes);
  writeFileSync(join(SHOTS, "export-kernel-chart.svg"), svg.bytes);

  const csv = (await download(page, "#kernel-chart-export-csv")).bytes.toString("utf8").trim().split("\n");
  assert.equal(csv[0], "series,distance d = i − j (tokens),B_h(d)");
  const rows = csv.slice(1).filter((l) => l.startsWith("head 0,")).map((l) => l.split(",").slice(1).map(Number));
  assert.deepEqual(rows.map((r) => r[0]), xs);
  assert.deepEqual(rows.map((r) => r[1]), shown, "the CSV's numbers are the chart's");
  const json = JSON.parse((await download(page, "#kernel-chart-export-json")).bytes.toString("utf8"));
  assert.equal(json.title, title);
  assert.equal(json.attnlab, VERSION);
  assert.equal(json.series[0].label, "head 0");
  assert.deepEqual(json.series[0].x, xs);
  assert.deepEqual(json.series[0].y, shown, "the JSON's numbers are the chart's");

  // The heatmap: a cell locked by keyboard, then each export.
  await page.click("#tab-attention");
  await page.waitForSelector("#heatmap canvas");
  await page.focus("#heatmap canvas");
  for (let k = 0; k < 3; k++) await page.keyboard.press("ArrowDown");
  await page.keyboard.press("ArrowRight");
  await page.waitForFunction(() => document.querySelector("#heatmap")?.getAttribute("data-selected") === "3,1");
  const value = await attr(page, "#heatmap", "data-value");
  const n = Number(await attr(page, "#heatmap", "data-n"));
  const heatTitle = await page.textContent("#heatmap .heatmap-title");
  const hsvg = await download(page, "#heatmap-export-svg");
  const h = await parseSvg(page, hsvg.bytes.toString("utf8"));
  assert.equal(h.error, null, "the heatmap SVG parses");
  const htexts = h.texts.join("\n");
  for (const t of [heatTitle, "key (token attended to)", "query (token attending)", "masked", `attnlab ${VERSION}`, "probabilities"]) {
    assert.ok(htexts.includes(t), `the heatmap SVG has "${t}"`);
  }
  assert.equal(h.image, "data:image/png;base64,", "the canvas pixels as painted");
  const hpng = await download(page, "#heatmap-export-png");
  assert.equal(pngWidth(hpng.bytes), 2 * h.width);
  writeFileSync(join(SHOTS, "export-heatmap.png"), hpng.bytes);
  const hcsv = (await download(page, "#heatmap-export-csv")).bytes.toString("utf8").trim().split("\n");
  assert.equal(hcsv.length, n + 1, "a header and one row per query");
  assert.equal(hcsv[1 + 3].split(",")[1 + 1], value, "the CSV's cell is the one the page shows");
  const hjson = JSON.parse((await download(page, "#heatmap-export-json")).bytes.toString("utf8"));
  assert.equal(hjson.matrix.length, n);
  assert.equal(hjson.matrix[3][1], Number(value), "the JSON's cell is the one the page shows");
  assert.equal(hjson.matrix[1][3], null, "future keys are masked");
  assert.equal(hjson.title, heatTitle);
  assert.equal(await page.textContent("#heatmap .export-status"), "saved attnlab-heatmap.json");
  await page.screenshot({ path: join(SHOTS, "exports.png"), fullPage: true });
  assert.deepEqual(errors, []);
  await context.close();
});

// ---- Layout, legends, dark theme, gate exports (issue 15 item 5) ---------------------------------

/** The page's bounding box of the first element matching each selector. */
function boxes(page, sels) {
  return page.evaluate((ss) => ss.map((s) => {
    const r = document.querySelector(s)?.getBoundingClientRect();
    return r ? { left: r.left, right: r.right, top: r.top, bottom: r.bottom, width: r.width } : null;
  }), sels);
}

/**
 * Every (label, series) pair whose bounding boxes overlap: `labels` (legend entries, marker
 * labels, caption lines) against `series` (a plotted line with its dots), both CSS selectors.
 */
function clashes(page, labels, series) {
  return page.evaluate(([ls, ss]) => {
    const box = (e) => e.getBoundingClientRect();
    const L = [...document.querySelectorAll(ls)].map((e) => [e.textContent.trim(), box(e)]);
    const S = [...document.querySelectorAll(ss)].map((e) => [e.dataset.label, box(e)]);
    const hit = (a, b) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
    const pairs = L.flatMap(([l, a]) => S.filter(([, b]) => hit(a, b)).map(([s]) => `${l} × ${s}`));
    return { labels: L.length, series: S.length, pairs };
  }, [labels, series]);
}

/** Relative luminance (0 black … 1 white) of a computed CSS colour `rgb(r, g, b)`. */
function luminance(css) {
  const [r, g, b] = css.match(/[\d.]+/g).slice(0, 3).map((v) => {
    const c = Number(v) / 255;
    return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
  });
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}

const TABS = {
  kernels: '#kernel-curves[data-current="true"]',
  attention: '#attention-view[data-running="false"] #heatmap canvas',
  extrapolation: "#ppl-chart",
  laa: '#laa-view[data-running="false"] #laa-chart g.series',
  gates: '#gate-view[data-running="false"] .gate-cell',
};

test("wide screens put the generator beside the views with larger plots; a 390 px screen never scrolls sideways", async () => {
  const { page, context, errors } = await open("", { viewport: { width: 1440, height: 900 } });
  await page.click("#tab-laa");
  await page.waitForSelector(TABS.laa, { timeout: LOAD_MS });
  const sels = ["#generator-column", "#views-column", "#laa-chart"];
  const [gen, views, wide] = await boxes(page, sels);
  console.log(`# 1440×900: generator x ${gen.left.toFixed(0)}–${gen.right.toFixed(0)}, views x ${views.left.toFixed(0)}–${views.right.toFixed(0)}, LAA chart ${wide.width.toFixed(0)} px wide`);
  assert.ok(views.left >= gen.right, "the views lie right of the generator");
  assert.ok(Math.abs(views.top - gen.top) < 2, "side by side, tops aligned");
  assert.ok(views.width > 1.6 * gen.width, "the views get about two thirds");
  await page.screenshot({ path: join(SHOTS, "layout-wide.png") });
  await page.setViewportSize({ width: 800, height: 900 });
  const [gen800, views800, narrow] = await boxes(page, sels);
  console.log(`# 800×900: views top ${views800.top.toFixed(0)} below generator bottom ${gen800.bottom.toFixed(0)}, LAA chart ${narrow.width.toFixed(0)} px wide`);
  assert.ok(views800.top >= gen800.bottom, "one column below 1200 px");
  assert.ok(wide.width > narrow.width + 100, `the plot grows on a wide screen: ${wide.width} vs ${narrow.width}`);
  assert.deepEqual(errors, []);
  await context.close();

  // A phone: every view of a gated model (with the Fig. 4 comparison) fits the width.
  const phone = await open("?model=regla", { viewport: { width: 390, height: 844 } });
  for (const [tab, ready] of Object.entries(TABS)) {
    await phone.page.click(`#tab-${tab}`);
    await phone.page.waitForSelector(ready, { timeout: LOAD_MS });
    if (tab === "gates") await phone.page.waitForSelector('#fig4[data-state="ready"]', { timeout: LOAD_MS });
    const [scroll, inner] = await phone.page.evaluate(() => [document.scrollingElement.scrollWidth, innerWidth]);
    assert.ok(scroll <= inner, `${tab}: page ${scroll} px wide in a ${inner} px window`);
  }
  await phone.page.locator("#gate-view").evaluate((e) => e.scrollIntoView());
  await phone.page.screenshot({ path: join(SHOTS, "layout-narrow.png") });
  assert.deepEqual(phone.errors, []);
  await phone.context.close();
});

test("legends never cover data: the LAA and perplexity legends lie outside every plotted line, on screen and exported", async () => {
  const { page, context, errors } = await open();
  await page.click("#tab-laa");
  await page.waitForSelector(TABS.laa, { timeout: LOAD_MS });
  const laa = await clashes(page, "#laa-chart g.legend-item", "#laa-chart g.series");
  assert.ok(laa.series >= 5 && laa.labels === laa.series, `one legend entry per line: ${JSON.stringify(laa)}`);
  assert.deepEqual(laa.pairs, [], "no LAA legend entry overlaps a line");
  // The exported figure, drawn in the page as a file would be.
  const svg = (await download(page, "#laa-chart-export-svg")).bytes.toString("utf8");
  await page.evaluate((t) => {
    const d = document.createElement("div");
    d.id = "drawn-export";
    d.innerHTML = t;
    document.body.append(d);
  }, svg);
  const exported = await clashes(page, "#drawn-export g.legend-item, #drawn-export .caption", "#drawn-export g.series");
  assert.ok(exported.labels >= laa.series + 2 && exported.series === laa.series, JSON.stringify(exported));
  assert.deepEqual(exported.pairs, [], "no legend entry or caption line of the exported LAA figure overlaps a line");
  await page.evaluate(() => document.querySelector("#drawn-export").remove());

  await pplValues(page);
  await page.waitForSelector('#ppl-chart g.series[data-label^="shipped: "]', { timeout: LOAD_MS });
  const ppl = await clashes(page, "#ppl-chart-legend li, #ppl-chart g.marker text", "#ppl-chart g.series");
  assert.ok(ppl.series > 2 && ppl.labels === ppl.series + 1, `the legend list and the marker label: ${JSON.stringify({ ...ppl, pairs: ppl.pairs.length })}`);
  assert.deepEqual(ppl.pairs, [], "no perplexity legend entry or marker label overlaps a line");
  console.log(`# legends: LAA ${laa.labels} entries, exported ${exported.labels} labels, perplexity ${ppl.labels} labels; no overlap with ${laa.series}, ${exported.series}, ${ppl.series} lines`);
  await page.locator("#ppl-chart").evaluate((e) => e.scrollIntoView());
  await page.screenshot({ path: join(SHOTS, "legend-ppl.png") });
  assert.deepEqual(errors, []);
  await context.close();
});

test("the page follows a dark system theme (charts included); exported figures stay light", async () => {
  const { page, context, errors } = await open("", { colorScheme: "dark", viewport: { width: 1440, height: 900 } });
  await page.click("#tab-laa");
  await page.waitForSelector(TABS.laa, { timeout: LOAD_MS });
  const styles = await page.evaluate(() => {
    const cs = (sel) => getComputedStyle(document.querySelector(sel));
    return {
      bg: cs("body").backgroundColor,
      fg: cs("body").color,
      card: cs("section.lab").backgroundColor,
      title: cs("#laa-chart .chart-title").fill,
      axis: cs("#laa-chart").color,
      legend: cs("#laa-chart g.legend-item text").fill,
    };
  });
  console.log(`# dark theme: ${JSON.stringify(styles)}`);
  assert.ok(luminance(styles.bg) < 0.05 && luminance(styles.card) < 0.05, "dark page and panels");
  for (const k of ["fg", "title", "axis", "legend"]) assert.ok(luminance(styles[k]) > 0.6, `light ${k}: ${styles[k]}`);
  await page.screenshot({ path: join(SHOTS, "layout-dark.png") });
  const svg = (await download(page, "#laa-chart-export-svg")).bytes.toString("utf8");
  const paper = await page.evaluate((t) => {
    const doc = new DOMParser().parseFromString(t, "image/svg+xml");
    return { bg: doc.querySelector("svg > rect")?.getAttribute("fill"), style: doc.querySelector("style")?.textContent ?? "" };
  }, svg);
  assert.equal(paper.bg, "#fff", "the exported figure keeps its white background");
  assert.match(paper.style, /\.figure-export text\{[^}]*fill:#222/, "and dark text");
  assert.deepEqual(errors, []);
  await context.close();
});

test("gate histograms export as SVG, PNG, CSV and JSON holding the counts the view shows", async () => {
  const { page, context, errors } = await open("?model=regla");
  await page.click("#tab-gates");
  await page.waitForSelector(TABS.gates, { timeout: LOAD_MS });
  const id = "gate-0-f";
  const counts = numbers(await attr(page, `#${id}`, "data-counts"));
  const title = await page.textContent(`#${id} .chart-title`);
  assert.equal(counts.length, 20);
  const svg = await download(page, `#${id}-export-svg`);
  assert.equal(svg.name, `attnlab-${id}.svg`);
  const parsed = await parseSvg(page, svg.bytes.toString("utf8"));
  assert.equal(parsed.error, null, "the SVG parses");
  assert.equal(parsed.ns, "http://www.w3.org/2000/svg");
  const texts = parsed.texts.join("\n");
  for (const t of [title, "0.5", `attnlab ${VERSION}`, "model regla", "text: prompt"]) {
    assert.ok(texts.includes(t), `the SVG has "${t}"`);
  }
  const bars = await page.evaluate((t) => {
    const doc = new DOMParser().parseFromString(t, "image/svg+xml");
    return { counts: doc.documentElement.dataset.counts, bars: doc.querySelectorAll("rect title").length };
  }, svg.bytes.toString("utf8"));
  assert.deepEqual(numbers(bars.counts), counts, "the SVG's counts are the view's");
  assert.equal(bars.bars, 20, "one bar per bin");
  const png = await download(page, `#${id}-export-png`);
  assert.equal(pngWidth(png.bytes), 2 * parsed.width, "drawn at twice the SVG's size");
  writeFileSync(join(SHOTS, `export-${id}.png`), png.bytes);
  const csv = (await download(page, `#${id}-export-csv`)).bytes.toString("utf8").trim().split("\n");
  assert.equal(csv[0], "bin start,bin end,count");
  const rows = csv.slice(1).map((l) => l.split(",").map(Number));
  assert.deepEqual(rows.map((r) => r[2]), counts, "the CSV's counts are the view's");
  assert.deepEqual(rows.map((r) => r[0]), counts.map((_, k) => k / 20), "bin edges");
  const json = JSON.parse((await download(page, `#${id}-export-json`)).bytes.toString("utf8"));
  assert.deepEqual(json.counts, counts, "the JSON's counts are the view's");
  assert.equal(json.title, title);
  assert.equal(json.bin_edges.length, 21);
  assert.equal(await page.textContent(`#${id}-figure .export-status`), `saved attnlab-${id}.json`);
  // The Fig. 4 comparison's histograms export too, each with its own model's counts.
  await page.waitForSelector('#fig4[data-state="ready"]', { timeout: LOAD_MS });
  const initial = numbers(await attr(page, "#fig4-initial-0-f", "data-counts"));
  const icsv = (await download(page, "#fig4-initial-0-f-export-csv")).bytes.toString("utf8").trim().split("\n");
  assert.deepEqual(icsv.slice(1).map((l) => Number(l.split(",")[2])), initial);
  assert.notDeepEqual(initial, counts, "the initial checkpoint's gates differ");
  console.log(`# gate export ${id}: ${counts.reduce((a, b) => a + b, 0)} values in 20 bins, SVG ${parsed.width} px wide, PNG ${png.bytes.length} bytes`);
  assert.deepEqual(errors, []);
  await context.close();
});

// ---- "Open model…" (issue 13): local attnlab / Hugging Face folders --------------------------------
const HF_FIXTURES = join(process.cwd(), "../../crates/core/tests/fixtures/hf");
const SCREENS = process.env.SCREENS ?? join(SHOTS, "open");
mkdirSync(SCREENS, { recursive: true });

/**
 * A tokenizer.json that fits a `size`-id vocabulary (96 by default): one BPE token per printable
 * ASCII character (ids 0..94, no merges), filler tokens `[i]` up to size − 2 (never produced by
 * encoding, decodable) and <|endoftext|> = size − 1, fused back together on decode.
 */
function tinyTokenizer(size = 96) {
  const vocab = {};
  for (let c = 32; c < 127; c++) vocab[String.fromCharCode(c)] = c - 32;
  for (let i = 95; i < size - 1; i++) vocab[`[${i}]`] = i;
  vocab["<|endoftext|>"] = size - 1;
  const eos = { id: size - 1, content: "<|endoftext|>", single_word: false, lstrip: false, rstrip: false, normalized: false, special: true };
  return JSON.stringify({
    version: "1.0", truncation: null, padding: null, added_tokens: [eos],
    normalizer: null, pre_tokenizer: null, post_processor: null, decoder: { type: "Fuse" },
    model: { type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null,
      fuse_unk: false, byte_fallback: false, ignore_merges: false, vocab, merges: [] },
  });
}

/**
 * A temp folder named `name` holding the fixture's config.json and model.safetensors, plus a
 * tokenizer (`tokenizer`: its text, or null for none); `edit(config)` may change the config.
 */
function hfFolder(fixture, name, { tokenizer = tinyTokenizer(), edit } = {}) {
  const dir = join(mkdtempSync(join(tmpdir(), "attnlab-open-")), name);
  mkdirSync(dir);
  const config = JSON.parse(readFileSync(join(HF_FIXTURES, fixture, "config.json"), "utf8"));
  writeFileSync(join(dir, "config.json"), JSON.stringify(edit ? edit(config) : config));
  writeFileSync(join(dir, "model.safetensors"), readFileSync(join(HF_FIXTURES, fixture, "model.safetensors")));
  if (tokenizer !== null) writeFileSync(join(dir, "tokenizer.json"), tokenizer);
  return dir;
}

/** A Llama folder whose safetensors header declares 10⁹ parameters (the file itself is tiny). */
function hugeFolder() {
  const dir = hfFolder("llama-gqa-untied", "huge");
  const header = Buffer.from(JSON.stringify({ w: { dtype: "F32", shape: [1e9], data_offsets: [0, 4e9] } }));
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(header.length));
  writeFileSync(join(dir, "model.safetensors"), Buffer.concat([len, header]));
  return dir;
}

/** Parameters of a safetensors file: the sum of its tensors' element counts (header only). */
function headerParams(path) {
  const buf = readFileSync(path);
  const header = JSON.parse(buf.subarray(8, 8 + Number(buf.readBigUInt64LE(0))).toString("utf8"));
  return Object.entries(header)
    .filter(([k]) => k !== "__metadata__")
    .reduce((sum, [, t]) => sum + t.shape.reduce((a, b) => a * b, 1), 0);
}

/** Open `dir` through the folder input (or, with `files`, its files through the file input). */
async function openLocal(page, dir, { files = false } = {}) {
  if (files) {
    const names = ["config.json", "model.safetensors", "tokenizer.json"];
    await page.setInputFiles("#open-files", names.map((n) => join(dir, n)));
  } else {
    await page.setInputFiles("#open-folder", dir);
  }
  await page.waitForSelector('#open-status:is([data-state="done"], [data-state="failed"])', { timeout: LOAD_MS });
  return page.getAttribute("#open-status", "data-state");
}

/** Generate `n` tokens; the number of tokens the status line reports. */
async function generateCount(page, n) {
  await page.fill("#max-tokens", String(n));
  await page.click("#generate");
  await page.waitForFunction(() => document.querySelector("#status")?.textContent?.startsWith("done"), null, {
    timeout: LOAD_MS,
  });
  const status = await page.textContent("#status");
  const m = status.match(/^done: (\d+) tokens/);
  assert.ok(m, status);
  return Number(m[1]);
}

test("Open model…: a Llama-style folder and a BLOOM-style folder's files load locally and generate", async () => {
  const { page, context, outside, errors } = await open("?backend=cpu");
  assert.match(await page.textContent("#open-note"), /read locally: nothing is uploaded/);
  await page.fill("#prompt", "Hello there");
  const llama = hfFolder("llama-gqa-untied", "llama-gqa-untied");
  assert.equal(await openLocal(page, llama), "done", await page.textContent("#error").catch(() => ""));
  await statusIs(page, "model llama-gqa-untied opened from local files: ready");
  const llamaParams = headerParams(join(llama, "model.safetensors"));
  assert.equal(await attr(page, "#model-info", "data-architecture"), "LlamaForCausalLM");
  assert.equal(Number(await attr(page, "#model-info", "data-params")), llamaParams);
  assert.match(await page.textContent("#open-status"), /opened llama-gqa-untied \(LlamaForCausalLM, [\d,]+ parameters/);
  // An F32 checkpoint is held as f32: the line says what the weights take and what loading needed.
  assert.match(await page.textContent("#open-status"), /weights in memory [\d.]+ KiB f32, about [\d.]+ KiB needed while loading/);
  assert.equal(await page.inputValue("#prompt"), "Hello there", "the prompt is kept");
  const n1 = await generateCount(page, 6);
  assert.ok(n1 >= 1 && n1 <= 6, `${n1}`);
  assert.equal(await attr(page, "#output-model", "data-model"), "llama-gqa-untied");
  await page.screenshot({ path: join(SCREENS, "opened-llama.png"), fullPage: true });
  console.log(`# opened Llama (LlamaForCausalLM): ${llamaParams} parameters, generated ${n1} tokens`);

  const bloom = hfFolder("bloom-6-heads", "bloom-6-heads");
  assert.equal(await openLocal(page, bloom, { files: true }), "done");
  await statusIs(page, "model local BloomForCausalLM opened from local files: ready");
  assert.match(await page.textContent("#model-picker"), /opened: local BloomForCausalLM/);
  const bloomParams = headerParams(join(bloom, "model.safetensors"));
  assert.equal(await attr(page, "#model-info", "data-architecture"), "BloomForCausalLM");
  assert.equal(Number(await attr(page, "#model-info", "data-params")), bloomParams);
  assert.match(await page.textContent("#model-info"), /alibi/);
  const n2 = await generateCount(page, 5);
  assert.ok(n2 >= 1 && n2 <= 5, `${n2}`);
  console.log(`# opened BLOOM (BloomForCausalLM): ${bloomParams} parameters, generated ${n2} tokens`);

  // ALiBi slopes of the BLOOM model are steerable like the shipped models'.
  await page.click("#tab-kernels");
  await page.waitForSelector("#kernel-chart g.series");
  const before = await kernelValues(page);
  assert.ok(before.length > 10 && before.every(Number.isFinite));
  await slide(page, "#slope-scale", 2); // ×4
  await page.waitForFunction(() => document.querySelector("#slope-scale-value")?.textContent === "×4.0000");
  const scaled = await kernelValues(page);
  assert.notDeepEqual(scaled, before, "the slope slider changes the BLOOM model's B(d)");
  assert.ok(Math.abs(scaled[10] - 4 * before[10]) < 1e-3 * Math.abs(before[10]) + 1e-6, `${scaled[10]} vs ${before[10]}`);
  await page.screenshot({ path: join(SCREENS, "opened-bloom-kernels.png"), fullPage: true });
  const n3 = await generateCount(page, 4);
  assert.ok(n3 >= 1, "the steered BLOOM model generates");
  console.log(`# BLOOM kernel at d=10: ${before[10]} → ${scaled[10]} at ×4 slopes; steered run ${n3} tokens`);
  assert.deepEqual(outside, [], "nothing leaves the page's origin");
  assert.deepEqual(errors, []);
  await context.close();
});

/**
 * Drop `dir` on the page as a folder: real File objects (through a hidden input) behind fake File
 * System entries, since a synthetic drop carries no entries of its own.
 */
async function dropFolder(page, dir, names) {
  await page.evaluate(() => {
    const input = Object.assign(document.createElement("input"), { type: "file", multiple: true, id: "drop-src" });
    input.style.display = "none";
    document.body.append(input);
  });
  await page.setInputFiles("#drop-src", names.map((n) => join(dir, n)));
  await page.evaluate(() => {
    const files = [...document.querySelector("#drop-src").files];
    const entry = (f) => ({ isFile: true, isDirectory: false, name: f.name, file: (ok) => ok(f) });
    let listed = 0;
    // readEntries answers in batches until an empty one: two batches here.
    const batches = [files.slice(0, 1).map(entry), files.slice(1).map(entry), []];
    const folder = { isFile: false, isDirectory: true, name: "dropped",
      createReader: () => ({ readEntries: (ok) => ok(batches[Math.min(listed++, 2)]) }) };
    const drop = new Event("drop", { bubbles: true, cancelable: true });
    Object.defineProperty(drop, "dataTransfer", { value: { items: [{ webkitGetAsEntry: () => folder }], files: [] } });
    document.querySelector("main.app").dispatchEvent(drop);
  });
  await page.waitForSelector('#open-status:is([data-state="done"], [data-state="failed"])', { timeout: LOAD_MS });
  return page.getAttribute("#open-status", "data-state");
}

test("Open model…: a dropped folder of an fla GLA checkpoint (keys narrower than values) generates, its gates equal attnlab analyze", async () => {
  const { page, context, errors } = await open("?backend=cpu");
  const dir = hfFolder("gla-narrow-keys-untied-bf16", "gla-narrow-keys");
  assert.equal(await dropFolder(page, dir, ["config.json", "model.safetensors", "tokenizer.json"]), "done",
    await page.textContent("#error").catch(() => ""));
  assert.equal(await attr(page, "#model-info", "data-architecture"), "GLAForCausalLM");
  assert.match(await page.textContent("#model-info"), /gla/);
  // The gate view traces the prompt (before any output is appended to it).
  await page.click("#tab-gates");
  await page.waitForSelector('.gate-cell[data-quantity="f"]');
  const shown = await page.$$eval('.gate-cell[data-quantity="f"]', (cells) =>
    cells.map((c) => [Number(c.dataset.layer), Number(c.dataset.saturation)]),
  );
  const analyzed = JSON.parse(cli(["analyze", "--model", dir, "--text", promptFile(), "--json", "--bins", "20"]));
  const cliSat = analyzed.gates.filter((g) => g.quantity === "f" && g.head === null);
  assert.equal(shown.length, cliSat.length);
  assert.equal(shown.length, 2, "both layers are gated");
  for (const [layer, sat] of shown) {
    const c = cliSat.find((g) => g.layer === layer);
    assert.ok(c && Math.abs(c.saturation - sat) < 1e-9, `layer ${layer}: page ${sat} vs CLI ${c?.saturation}`);
  }
  await page.screenshot({ path: join(SCREENS, "dropped-gla-gates.png"), fullPage: true });
  const n = await generateCount(page, 5);
  assert.ok(n >= 1 && n <= 5, `${n}`);
  console.log(`# dropped fla GLA folder: generated ${n} tokens; gate saturation ${shown.map((x) => x[1]).join(", ")}`);
  assert.deepEqual(errors, []);
  await context.close();
});

test("Open model…: bad folders are refused by name; the prompt and the previous model stay", async () => {
  const { page, context, errors } = await open("?backend=cpu");
  await page.fill("#prompt", "Keep this prompt");
  const cases = [
    [hfFolder("llama-gqa-untied", "mpt", { edit: (c) => ({ ...c, architectures: ["MptForCausalLM"] }) }),
      /MptForCausalLM is not supported/],
    [hfFolder("llama-gqa-untied", "no-tokenizer", { tokenizer: null }), /tokenizer\.json is missing/],
    [hfFolder("llama-gqa-untied", "big-tokenizer", { tokenizer: readFileSync(join(SITE, "models/tokenizer.json"), "utf8") }),
      /tokenizer\.json: .*2048 ids but the model's vocab_size is 96/],
    [hugeFolder(), /huge does not fit the page's memory: 1,000,000,000 parameters need about 11\.18 GiB .* limit of 3\.00 GiB/],
  ];
  for (const [dir, message] of cases) {
    assert.equal(await openLocal(page, dir), "failed");
    const error = await page.textContent("#error");
    assert.match(error, message);
    console.log(`# refused: ${error}`);
    if (message.source.startsWith("Mpt")) await page.screenshot({ path: join(SCREENS, "open-error.png"), fullPage: true });
    assert.equal(await page.inputValue("#prompt"), "Keep this prompt", "the prompt is kept");
    assert.match(await page.textContent("#status"), /model alibi loaded/);
  }
  assert.equal(await attr(page, "#model-info", "data-architecture"), "attnlab");
  const n = await generateCount(page, 4);
  assert.ok(n >= 1, "the previous model still generates");
  assert.equal(await attr(page, "#output-model", "data-model"), "alibi");
  assert.deepEqual(errors, []);
  await context.close();
});

// ---- A ~135M-parameter F16 checkpoint in the page (issue 13; manual, too slow for CI) -------------
// ATTNLAB_BIG_MODEL names a Hugging Face folder, e.g. the SmolLM-135M-shaped one that
// `scripts/hf_fixtures.py --bench-models DIR` writes (DIR/smollm-135m-shape), with a synthetic
// tokenizer of the model's vocabulary size (random weights generate any id). Run it alone on a
// built site (docs/bench.md):
//   SITE=DIST ATTNLAB=target/release/attnlab ATTNLAB_BIG_MODEL=DIR/smollm-135m-shape \
//     node --test --test-name-pattern=100M page.test.mjs
const BIG_MODEL = process.env.ATTNLAB_BIG_MODEL;

/** Peak resident set (VmHWM) of the largest Chromium renderer process, in bytes. */
function rendererPeakRss() {
  let peak = 0;
  for (const pid of readdirSync("/proc").filter((p) => /^\d+$/.test(p))) {
    try {
      if (!readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("--type=renderer")) continue;
      const kib = Number(readFileSync(`/proc/${pid}/status`, "utf8").match(/VmHWM:\s+(\d+)/)?.[1] ?? 0);
      peak = Math.max(peak, kib * 1024);
    } catch {
      // the process ended meanwhile
    }
  }
  return peak;
}

test("Open model…: a 100M+ F16 checkpoint (ATTNLAB_BIG_MODEL, any family) loads and generates on the CPU", { skip: !BIG_MODEL && "set ATTNLAB_BIG_MODEL" }, async () => {
  const dir = join(mkdtempSync(join(tmpdir(), "attnlab-big-")), BIG_MODEL.split("/").filter(Boolean).pop());
  mkdirSync(dir);
  // Hard links (Playwright does not follow symbolic links in a picked folder), else copies.
  for (const f of ["config.json", "model.safetensors"]) {
    try {
      linkSync(join(BIG_MODEL, f), join(dir, f));
    } catch {
      copyFileSync(join(BIG_MODEL, f), join(dir, f));
    }
  }
  const vocab = JSON.parse(readFileSync(join(BIG_MODEL, "config.json"), "utf8")).vocab_size;
  writeFileSync(join(dir, "tokenizer.json"), tinyTokenizer(vocab));
  const { page, context, errors } = await open("?backend=cpu");
  // The model worker's wasm memory, as the page shows it: its size is the heap's peak.
  const wasmBytes = async () => Number((await attr(page, "#model-info", "data-worker-bytes")) ?? 0);
  const before = await wasmBytes();
  const t0 = Date.now();
  await page.setInputFiles("#open-folder", dir);
  await page.waitForSelector('#open-status:is([data-state="done"], [data-state="failed"])', { timeout: 600_000 });
  const loadMs = Date.now() - t0;
  const status = await page.textContent("#open-status");
  if ((await attr(page, "#open-status", "data-state")) !== "done") {
    assert.fail(`${status} ${await page.locator("#error").textContent({ timeout: 1000 }).catch(() => "")}`);
  }
  const afterLoad = await wasmBytes();
  const params = headerParams(join(dir, "model.safetensors"));
  assert.match(status, new RegExp(`${params.toLocaleString("en-US")} parameters; weights in memory [^)]*[\\d.]+ MiB f16`));
  assert.equal(Number(await attr(page, "#model-info", "data-params")), params);
  await page.fill("#prompt", "The history of the city");
  await page.fill("#max-tokens", "16");
  await page.fill("#seed", "1");
  await page.click("#generate");
  await page.waitForFunction(() => document.querySelector("#status")?.textContent?.startsWith("done"), null, { timeout: 600_000 });
  const prefill = Number(await attr(page, "#prefill-tps", "data-value"));
  const decode = Number(await attr(page, "#decode-tps", "data-value"));
  assert.ok(prefill > 0 && decode > 0, `prefill ${prefill}, decode ${decode}`);
  await page.screenshot({ path: join(SCREENS, "opened-135m.png"), fullPage: true });
  const mib = (b) => (b / 2 ** 20).toFixed(1);
  console.log(`# 135M: ${status}`);
  console.log(`# 135M: load ${loadMs} ms; generation ${await page.textContent("#status")}; prefill ${prefill.toFixed(2)} tok/s, decode ${decode.toFixed(2)} tok/s`);
  console.log(`# 135M: wasm memory ${mib(before)} MiB before, ${mib(afterLoad)} MiB after loading, ${mib(await wasmBytes())} MiB after generating; renderer peak RSS ${mib(rendererPeakRss())} MiB`);
  assert.deepEqual(errors, []);
  await context.close();
});

// ---- Compare mode (issue 15, item 1) -------------------------------------------------------------

const SCREENS_COMPARE = process.env.SCREENS_COMPARE ?? join(SHOTS, "compare");
const COMPARE_PROMPT = "The history of the city is the story of the people who lived by the river and the roads they built.";
mkdirSync(SCREENS_COMPARE, { recursive: true });

/** Wait until compare mode's model B is loaded (`#compare-bar[data-state=ready]`). */
const compareReady = (page) => page.waitForSelector('#compare-bar[data-state="ready"]', { timeout: LOAD_MS });

/** The attention view of both models, with B's map and the difference map drawn. */
async function compareMaps(page) {
  await compareReady(page);
  await page.waitForSelector('#attention-view[data-running="false"] #heatmap-b canvas', { timeout: LOAD_MS });
  await page.waitForSelector("#heatmap-diff canvas");
}

/** A heatmap's CSV export (`id`: heatmap, heatmap-b, heatmap-diff) as rows of numbers (NaN = masked). */
async function matrixCsv(page, id) {
  const rows = parseCsv((await download(page, `#${id}-export-csv`)).bytes.toString("utf8"));
  return rows.slice(1).map((r) => r.slice(1).map((v) => (v === "" ? NaN : Number(v))));
}

/** The colorbar's ends of heatmap `id` as shown. */
const colorbar = (page, id) => page.$$eval(`#${id} .colorbar > span`, (s) => [s[0].textContent, s[1].textContent]);

/** A series' values of chart `chart` whose label starts with `label`. */
async function seriesValues(page, chart, label) {
  const sel = `#${chart} g.series[data-label^="${label}"]`;
  await page.waitForSelector(sel, { timeout: LOAD_MS });
  return numbers(await attr(page, sel, "data-values"));
}

test("compare mode: two shipped models side by side with synchronized layer, head and cell, one scale, and A − B equal to the two CSVs; the URL restores it", async () => {
  const { page, context, errors } = await open(`?model=mep&prompt=${encodeURIComponent(COMPARE_PROMPT)}&tab=attention&b=transnormer&compare=1`);
  await compareMaps(page);
  assert.match(await page.textContent("#compare-status"), /A mep .* vs B transnormer/);
  // Layer and head chosen on B's side select them on A's.
  await page.click('.thumb-grid[data-side="b"] button[title="L2 H1"]');
  await page.waitForFunction(() => /layer 2, head 1/.test(document.querySelector("#heatmap .heatmap-title")?.textContent));
  assert.match(await page.textContent("#heatmap-b .heatmap-title"), /B transnormer · layer 2, head 1/);
  assert.equal(await attr(page, '.thumb-grid[data-side="a"] button[title="L2 H1"]', "aria-pressed"), "true");
  // A cell clicked on the difference map is locked on all three.
  const n = Number(await attr(page, "#heatmap-diff", "data-n"));
  assert.equal(n, Number(await attr(page, "#heatmap-b", "data-n")), "same text, same tokens");
  const canvas = page.locator("#heatmap-diff canvas");
  await canvas.scrollIntoViewIfNeeded();
  const box = await canvas.boundingBox();
  const [i, j] = [Math.min(9, n - 1), 2];
  await page.mouse.move(box.x + ((j + 0.5) * box.width) / n, box.y + ((i + 0.5) * box.height) / n);
  await page.mouse.down();
  await page.mouse.up();
  for (const id of ["heatmap", "heatmap-b", "heatmap-diff"]) {
    await page.waitForFunction(([id, c]) => document.querySelector(`#${id}`)?.getAttribute("data-selected") === c, [id, `${i},${j}`]);
  }
  const [va, vb, vd] = await Promise.all(["heatmap", "heatmap-b", "heatmap-diff"].map((id) => attr(page, `#${id}`, "data-value")));
  assert.equal(Math.fround(Number(vd)), Math.fround(Math.fround(Number(va)) - Math.fround(Number(vb))), `${vd} = ${va} − ${vb}`);
  // One colour range for A and B (it spans both), its own diverging one for A − B.
  assert.deepEqual(await colorbar(page, "heatmap"), await colorbar(page, "heatmap-b"));
  const [lo, hi] = (await colorbar(page, "heatmap-diff")).map(Number);
  assert.equal(lo, -hi, "the difference scale is symmetric");
  // Every visible cell of the difference's CSV is A's minus B's (f32 arithmetic).
  const [A, B, D] = [await matrixCsv(page, "heatmap"), await matrixCsv(page, "heatmap-b"), await matrixCsv(page, "heatmap-diff")];
  let worst = 0;
  let cells = 0;
  for (let q = 0; q < n; q++) {
    for (let k = 0; k <= q; k++) {
      const want = Math.fround(Math.fround(A[q][k]) - Math.fround(B[q][k]));
      worst = Math.max(worst, Math.abs(Math.fround(D[q][k]) - want));
      cells++;
    }
    assert.ok(Number.isNaN(D[q][q + 1] ?? NaN), "future keys stay masked");
  }
  console.log(`compare: ${cells} cells, max |diff − (A−B)| = ${worst}`);
  assert.equal(worst, 0, `max |diff − (A−B)| = ${worst}`);
  // The difference map exports like every figure, its caption naming both models.
  const svg = await parseSvg(page, (await download(page, "#heatmap-diff-export-svg")).bytes.toString("utf8"));
  assert.equal(svg.error, null);
  assert.ok(svg.texts.join("\n").includes(`attnlab ${VERSION} · model mep − transnormer (A − B)`), svg.texts.join("|"));
  const png = await download(page, "#heatmap-diff-export-png");
  assert.equal(pngWidth(png.bytes), 2 * svg.width);
  writeFileSync(join(SCREENS_COMPARE, "export-difference.png"), png.bytes);
  const json = JSON.parse((await download(page, "#heatmap-diff-export-json")).bytes.toString("utf8"));
  assert.equal(json.matrix[i][j], Number(vd));
  assert.ok(json.caption[0].includes("mep − transnormer"));
  await page.screenshot({ path: join(SCREENS_COMPARE, "attention.png"), fullPage: true });

  // The address holds it; a reload restores B, the selection and the cell.
  await page.waitForFunction((c) => location.search.includes(`&tab=attention&layer=2&head=1&cell=${c}&b=transnormer&compare=1`), `${i},${j}`);
  await page.reload();
  await page.waitForSelector('main[data-state="ready"]', { timeout: LOAD_MS });
  await compareMaps(page);
  assert.match(await page.textContent("#heatmap-b .heatmap-title"), /layer 2, head 1/);
  assert.equal(await attr(page, "#heatmap-diff", "data-selected"), `${i},${j}`);
  assert.equal(await attr(page, "#heatmap-diff", "data-value"), vd);
  // Compare off: B's maps go, the URL says so, the single view is back.
  await page.click("#compare-on");
  await page.waitForSelector("#heatmap-b", { state: "detached" });
  await page.waitForFunction(() => location.search.includes("compare=0"));
  assert.equal(await page.locator("#heatmap").count(), 1);
  assert.deepEqual(errors, []);
  await context.close();
});

test("compare mode beside a smaller model clamps the selection and says so", async () => {
  const { page, context, errors } = await open("?model=mep&tab=attention&b=alibi-small&compare=1&layer=3&head=3");
  await compareMaps(page);
  assert.match(await page.textContent("#heatmap .heatmap-title"), /layer 3, head 3/);
  assert.match(await page.textContent("#heatmap-b .heatmap-title"), /B alibi-small · layer 1, head 1/);
  assert.match(await page.textContent(".clamp-note"), /alibi-small has 2 layers of 2 heads: layer 3, head 3 is shown as layer 1, head 1/);
  // Choosing on the small side selects the same on the big one.
  await page.click('.thumb-grid[data-side="b"] button[title="L0 H1"]');
  await page.waitForFunction(() => /layer 0, head 1/.test(document.querySelector("#heatmap .heatmap-title")?.textContent));
  assert.equal(await page.locator(".clamp-note").count(), 0);
  await page.screenshot({ path: join(SCREENS_COMPARE, "attention-clamped.png"), fullPage: true });
  assert.deepEqual(errors, []);
  await context.close();
});

test("compare presets: overlays (kernels, LAA, gates) hold each model's own single-model curves; the preset is in the URL", async () => {
  const { page, context, errors } = await open();
  // MEP kernels vs ALiBi: loads mep as A, alibi as B, on the kernel tab.
  await page.click("#preset-mep-alibi");
  await statusIs(page, "model mep loaded: ready");
  await compareReady(page);
  await page.waitForFunction(() => /preset=mep-alibi/.test(location.search) && /model=mep/.test(location.search) && /b=alibi/.test(location.search));
  assert.match(await page.textContent("#preset-claim"), /MEP/);
  const kA = await seriesValues(page, "kernel-compare", "A mep · head 0");
  const kB = await seriesValues(page, "kernel-compare", "B alibi · head 0");
  assert.deepEqual(kA, numbers(await attr(page, '#kernel-chart g.series[data-label="head 0"]', "data-values")), "A's overlay line is A's own curve");
  await page.screenshot({ path: join(SCREENS_COMPARE, "kernels.png"), fullPage: true });
  const ksvg = await parseSvg(page, (await download(page, "#kernel-compare-export-svg")).bytes.toString("utf8"));
  assert.equal(ksvg.error, null);
  assert.ok(ksvg.texts.join("\n").includes("model mep (A) vs alibi (B)"));
  const kcsv = (await download(page, "#kernel-compare-export-csv")).bytes.toString("utf8");
  assert.ok(kcsv.includes("B alibi · head 0,0,"), "the CSV holds B's lines");

  // TransNormer Fig. 2: transnormer vs linear-elu vs a softmax model (rope, the preset's reference,
  // loaded and traced in the worker without another click) on the LAA tab.
  await page.click("#preset-transnormer-fig2");
  await statusIs(page, "model transnormer loaded: ready");
  await compareReady(page);
  await page.waitForSelector('#laa-view[data-running="false"] #laa-compare g.series', { timeout: LOAD_MS });
  const lA = await seriesValues(page, "laa-compare", "A transnormer · layer 0");
  const lB = await seriesValues(page, "laa-compare", "B linear-elu · layer 0");
  assert.deepEqual(lA, await seriesValues(page, "laa-chart", "layer 0 "), "A's overlay line is A's own LAA curve");
  await seriesValues(page, "laa-compare", "ref rope · layer 0");
  // Every layer of the reference, by layer: "ref rope · layer L ..." → values.
  const refLines = async (p, chart, prefix) =>
    p.$$eval(`#${chart} g.series`, (gs, prefix) =>
      gs
        .filter((g) => g.dataset.label.startsWith(prefix))
        .map((g) => [Number(g.dataset.label.slice(prefix.length).split(" ")[0]), g.dataset.values.split(",").map(Number)])
        .sort((a, b) => a[0] - b[0]),
      prefix,
    );
  const lR = await refLines(page, "laa-compare", "ref rope · layer ");
  assert.ok(lR.length >= 2 && lR.every(([l], k) => l === k), `reference layers ${lR.map(([l]) => l)}`);
  assert.equal(await page.locator("#laa-compare-table th", { hasText: "LAA AUC rope" }).count(), 1);
  await page.screenshot({ path: join(SCREENS_COMPARE, "laa.png"), fullPage: true });
  await page.locator("#laa-compare-block").screenshot({ path: join(SCREENS_COMPARE, "laa-three-way.png") });
  const ljson = JSON.parse((await download(page, "#laa-compare-export-json")).bytes.toString("utf8"));
  assert.ok(ljson.caption[0].includes("model transnormer (A) vs linear-elu (B) and rope"));
  assert.deepEqual(ljson.series.find((s) => s.label.startsWith("B linear-elu · layer 0")).y, lB);
  assert.deepEqual(ljson.series.find((s) => s.label.startsWith("ref rope · layer 0")).y, lR[0][1]);

  // ReGLA Fig. 4: regla-fig4 vs gla-fig4 gates.
  await page.click("#preset-regla-fig4");
  await statusIs(page, "model regla-fig4 loaded: ready");
  await compareReady(page);
  await page.waitForSelector('#gate-view[data-running="false"] #gates-compare .gate-compare-cell', { timeout: LOAD_MS });
  const gB = await seriesValues(page, "gates-compare-0-f", "B gla-fig4");
  const gA = await seriesValues(page, "gates-compare-0-f", "A regla-fig4");
  const countsA = numbers(await attr(page, '.gate-cell[data-layer="0"][data-quantity="f"] svg', "data-counts"));
  const total = countsA.reduce((a, b) => a + b, 0);
  assert.deepEqual(gA, countsA.map((c) => c / total), "A's overlay is A's histogram as shares");
  // The paper's figure: both models' gates before (initial checkpoint) and after training.
  await page.waitForSelector('#fig4[data-state="ready"] #fig4-b[data-state="ready"]', { timeout: LOAD_MS });
  const fig4 = await page.$$eval("#fig4 .fig4-cell", (cs) =>
    cs.map((c) => ({
      side: c.closest("#fig4-b") ? "b" : "a",
      which: c.dataset.which,
      key: `${c.dataset.layer}-${c.dataset.quantity}`,
      saturation: Number(c.dataset.saturation),
      counts: (c.querySelector("svg.histogram")?.dataset.counts ?? "").split(",").map(Number),
    })),
  );
  const fig4Of = (side, which) => Object.fromEntries(fig4.filter((c) => c.side === side && c.which === which).map((c) => [c.key, c.counts]));
  /** A page's own gate view: (layer-quantity) → histogram counts. */
  const ownGates = (p) =>
    p.$$eval(".gate-cell", (cs) =>
      Object.fromEntries(cs.map((c) => [`${c.dataset.layer}-${c.dataset.quantity}`, (c.querySelector("svg")?.dataset.counts ?? "").split(",").map(Number)])),
    );
  const fig4Histograms = { "regla-fig4-init": fig4Of("a", "initial"), "regla-fig4": fig4Of("a", "trained"), "gla-fig4-init": fig4Of("b", "initial"), "gla-fig4": fig4Of("b", "trained") };
  for (const [m, h] of Object.entries(fig4Histograms)) assert.ok(h["0-f"]?.length === 20, `${m}: layer 0 F histogram shown`);
  assert.deepEqual(fig4Histograms["regla-fig4"], await ownGates(page), "regla-fig4's Fig. 4 histograms are its own gate view's");
  const sat = (side, which) => {
    const cs = fig4.filter((c) => c.side === side && c.which === which && c.key.endsWith("-f"));
    return ((100 * cs.reduce((a, c) => a + c.saturation, 0)) / cs.length).toFixed(1);
  };
  console.log(`# Fig. 4 preset (shipped models): F saturated ${sat("a", "initial")}% → ${sat("a", "trained")}% (regla-fig4), ${sat("b", "initial")}% → ${sat("b", "trained")}% (gla-fig4)`);
  await page.screenshot({ path: join(SCREENS_COMPARE, "gates.png"), fullPage: true });
  await page.locator("#fig4").screenshot({ path: join(SCREENS_COMPARE, "fig4-both.png") });
  assert.match(page.url(), /model=regla-fig4.*tab=gates.*b=gla-fig4&compare=1&preset=regla-fig4/);
  assert.deepEqual(errors, []);
  await context.close();

  // Each B line equals that model's own single-model view.
  const single = await open("?model=alibi&tab=kernels");
  const alibi0 = await seriesValues(single.page, "kernel-chart", "head 0");
  const m = Math.min(alibi0.length, kB.length);
  assert.ok(m > 100);
  assert.deepEqual(kB.slice(0, m), alibi0.slice(0, m), "B's kernel line is alibi's own");
  await single.context.close();
  const elu = await open("?model=linear-elu&tab=laa");
  await elu.page.waitForSelector('#laa-view[data-running="false"] #laa-chart g.series', { timeout: LOAD_MS });
  assert.deepEqual(lB, await seriesValues(elu.page, "laa-chart", "layer 0 "), "B's LAA line is linear-elu's own");
  await elu.context.close();
  const rope = await open("?model=rope&tab=laa");
  await rope.page.waitForSelector('#laa-view[data-running="false"] #laa-chart g.series', { timeout: LOAD_MS });
  const ropeOwn = await refLines(rope.page, "laa-chart", "layer ");
  assert.deepEqual(lR, ropeOwn.slice(0, lR.length), "the reference's LAA lines are rope's own, layer by layer");
  assert.equal(ropeOwn.length, lR.length, "every layer of rope");
  await rope.context.close();
  const gla = await open("?model=gla-fig4&tab=gates");
  await gla.page.waitForSelector('#gate-view[data-running="false"] .gate-cell', { timeout: LOAD_MS });
  const countsB = numbers(await attr(gla.page, '.gate-cell[data-layer="0"][data-quantity="f"] svg', "data-counts"));
  const totalB = countsB.reduce((a, b) => a + b, 0);
  assert.deepEqual(gB, countsB.map((c) => c / totalB), "B's gate line is gla-fig4's own histogram");
  assert.deepEqual(fig4Histograms["gla-fig4"], await ownGates(gla.page), "gla-fig4's Fig. 4 histograms are its own gate view's");
  await gla.context.close();
  for (const m of ["regla-fig4-init", "gla-fig4-init"]) {
    const own = await open(`?model=${m}&tab=gates`);
    await own.page.waitForSelector('#gate-view[data-running="false"] .gate-cell', { timeout: LOAD_MS });
    assert.deepEqual(fig4Histograms[m], await ownGates(own.page), `${m}'s Fig. 4 histograms are its own gate view's`);
    assert.deepEqual(own.errors, []);
    await own.context.close();
  }
});

test("compare mode: one model under two slider settings (B = the model as trained); perplexity overlay", async () => {
  const { page, context, errors } = await open("?model=alibi&tab=kernels&b=%40trained&compare=1");
  await compareReady(page);
  const before = await seriesValues(page, "kernel-compare", "A alibi · head 0");
  assert.deepEqual(before, await seriesValues(page, "kernel-compare", "B alibi as trained · head 0"));
  const model = await kernelModel(page);
  await slide(page, "#slope-scale", 1);
  await kernelValuesAfterEdit(page, model);
  const edited = numbers(await attr(page, '#kernel-chart g.series[data-label="head 0"]', "data-values"));
  await page.waitForFunction((v) => {
    const g = document.querySelector('#kernel-compare g.series[data-label^="A alibi · head 0"]');
    const got = (g?.getAttribute("data-values") ?? "").split(",").map(Number);
    return got.length === v.length && got.every((x, k) => x === v[k]);
  }, edited);
  assert.notDeepEqual(edited, before);
  assert.deepEqual(await seriesValues(page, "kernel-compare", "B alibi as trained · head 0"), before, "B stays as trained");
  await page.screenshot({ path: join(SCREENS_COMPARE, "kernels-sliders.png"), fullPage: true });
  // Perplexity: both sweeps on one chart; A's line is the view's own "current settings" curve.
  await page.click("#tab-extrapolation");
  await page.waitForSelector('#ppl-view[data-running="false"] #ppl-compare-block[data-running="false"]', { timeout: 240_000 });
  const pA = await seriesValues(page, "ppl-compare", "A alibi · current settings");
  assert.deepEqual(pA, numbers(await attr(page, '#ppl-chart g.series[data-label="current settings"]', "data-values")));
  const pB = await seriesValues(page, "ppl-compare", "B alibi as trained · held-out sweep");
  const lengths = await page.locator("#ppl-view > table tbody tr").count();
  assert.ok(lengths >= 4, `${lengths} lengths swept`);
  assert.equal(pA.length, lengths);
  assert.equal(pB.length, lengths);
  assert.notDeepEqual(pA, pB, "the slider edit changes A's perplexity, not B's");
  assert.ok(pB.every((v) => v > 1), `${pB}`);
  await page.screenshot({ path: join(SCREENS_COMPARE, "perplexity.png"), fullPage: true });
  assert.deepEqual(errors, []);
  await context.close();
});

test("a link with a stale or bad model B names it and opens a working page without comparison", async () => {
  for (const [q, why] of [["?b=gone&compare=1", /b: no model gone in the models index/], ["?b=..%2Fx&compare=1", /b: '\.\.\/x' cannot be used/]]) {
    const { page, context, errors } = await open(q);
    await page.waitForSelector("#url-warning");
    assert.match(await page.textContent("#url-warning"), why);
    await page.waitForSelector("#compare-bar");
    assert.equal(await attr(page, "#compare-bar", "data-b"), "");
    assert.notEqual(await attr(page, "#compare-bar", "data-state"), "ready");
    await page.waitForFunction(() => !location.search.includes("b="));
    await page.click("#tab-attention");
    await page.waitForSelector('#attention-view[data-running="false"] #heatmap canvas');
    assert.equal(await page.locator("#heatmap-b").count(), 0);
    assert.deepEqual(errors, []);
    await context.close();
  }
});

const TUNE_TEXT =
  "The jury said the city had no evidence of any irregularities. The jury said the river ran through the city. " +
  "The history of the city is the history of the river, and the jury said so in its report to the court.";

/** The zoomed heatmap's first `rows` rows (CSV strings) of the current model, once its trace is drawn. */
async function heatmapRows(page, rows) {
  await page.waitForSelector("#heatmap canvas");
  const csv = parseCsv((await download(page, "#heatmap-export-csv")).bytes.toString("utf8"));
  return csv.slice(1, 1 + rows).map((r) => r.slice(1).join(","));
}

test("train on this text on WebGPU: the WGSL trainer takes the steps in the worker, the loss falls, the views show the fine-tuned model", async (t) => {
  const opened = await openOnWebGpu(t, "?backend=gpu&tab=attention");
  if (!opened) return;
  const { page, context, errors } = opened;
  const before = await heatmapRows(page, 5);
  await page.fill("#tune-text", TUNE_TEXT);
  await page.fill("#tune-steps", "12");
  await page.fill("#tune-lr", "0.005");
  await page.click("#tune-start");
  await page.waitForSelector('#tune-status[data-state="done"]', { timeout: 300_000 });
  const device = await attr(page, "#tune-setup", "data-device");
  assert.match(device, /^WebGPU · \S/, `the steps ran on ${device}`);
  assert.match(await page.textContent("#tune-setup"), /^on WebGPU · /);
  const num = async (sel, name) => Number(await attr(page, sel, name));
  const [lossBefore, lossAfter] = [await num("#tune-setup", "data-loss-before"), await num("#tune-status", "data-loss-after")];
  const [first, last] = [await num("#tune-status", "data-loss-first"), await num("#tune-status", "data-loss-last")];
  assert.equal(await num("#tune-status", "data-steps"), 12);
  assert.ok(lossAfter < lossBefore - 0.2, `loss on the text ${lossBefore} → ${lossAfter}`);
  assert.ok(last < first, `batch loss ${first} → ${last}`);
  assert.match(await page.textContent("#status"), /\+tuned: fine-tuned on the text, ready/);
  let after = before;
  for (let k = 0; k < 50 && after.join() === before.join(); k++) {
    await page.waitForTimeout(100);
    after = await heatmapRows(page, 5);
  }
  assert.notEqual(after.join("|"), before.join("|"), "the heatmap shows the fine-tuned model");
  console.log(`# WebGPU fine-tune (${device}): loss on the text ${lossBefore.toFixed(3)} → ${lossAfter.toFixed(3)}; ${(await page.textContent("#tune-status")).trim()}`);
  await page.screenshot({ path: join(SHOTS, "tune-webgpu.png"), fullPage: true });
  assert.deepEqual(errors, []);
  await context.close();
});

test("train on this text on a gated linear model (ReGLA): the fused recurrence trains in the worker's wasm, the loss falls, the maps change", async () => {
  const { page, context, errors } = await open("?model=regla&backend=cpu&tab=attention");
  const before = await heatmapRows(page, 5);
  await page.fill("#tune-text", TUNE_TEXT);
  await page.fill("#tune-steps", "8");
  await page.fill("#tune-lr", "0.005");
  await page.click("#tune-start");
  await page.waitForSelector('#tune-status[data-state="done"]', { timeout: 180_000 });
  const num = async (sel, name) => Number(await attr(page, sel, name));
  const [lossBefore, lossAfter] = [await num("#tune-setup", "data-loss-before"), await num("#tune-status", "data-loss-after")];
  console.log(`# regla fine-tune, 8 steps on the CPU (wasm): loss on the text ${lossBefore} → ${lossAfter}`);
  assert.equal(await num("#tune-status", "data-steps"), 8);
  assert.ok(lossAfter < lossBefore - 0.1, `loss on the text ${lossBefore} → ${lossAfter}`);
  let after = before;
  for (let k = 0; k < 50 && after.join() === before.join(); k++) {
    await page.waitForTimeout(100);
    after = await heatmapRows(page, 5);
  }
  assert.notEqual(after.join("|"), before.join("|"), "the heatmap shows the fine-tuned model");
  assert.deepEqual(errors, []);
  await context.close();
});

test("train on this text: the loss falls over a few steps in the worker, every view then shows the fine-tuned model, Stop keeps the steps done, bad input is named", async () => {
  const { page, context, errors } = await open("?backend=cpu&tab=attention");
  const before = await heatmapRows(page, 5);
  // Bad input first: a text too short, with the text kept in its box.
  await page.fill("#tune-text", "The city");
  await page.click("#tune-start");
  await page.waitForSelector('#tune-status[data-state="failed"]');
  assert.match(await page.textContent("#tune-status"), /has \d+ tokens; fine-tuning needs at least 9/);
  assert.equal(await page.inputValue("#tune-text"), "The city");
  await page.fill("#tune-steps", "0");
  await page.click("#tune-start");
  await page.waitForFunction(() => /steps: enter a whole number/.test(document.querySelector("#tune-status")?.textContent ?? ""));
  await page.fill("#tune-steps", "12");
  // A file over 1 MB is refused by name (the text stays); a .txt file fills the box.
  await page.setInputFiles("#tune-file", { name: "big.txt", mimeType: "text/plain", buffer: Buffer.alloc(1_200_000, 97) });
  await page.waitForFunction(() => /big\.txt: 1\.2 MB; the panel reads text files of up to 1 MB/.test(document.querySelector("#tune-status")?.textContent ?? ""));
  assert.equal(await page.inputValue("#tune-text"), "The city");
  await page.setInputFiles("#tune-file", { name: "text.txt", mimeType: "text/plain", buffer: Buffer.from(TUNE_TEXT) });
  await page.waitForFunction((t) => document.querySelector("#tune-text")?.value === t, TUNE_TEXT);
  // A dozen steps on the text: the batch loss and the loss on the whole text fall.
  await page.fill("#tune-lr", "0.005");
  await page.click("#tune-start");
  await page.waitForSelector('#tune-status[data-state="done"]', { timeout: 180_000 });
  const num = async (sel, name) => Number(await attr(page, sel, name));
  const [lossBefore, lossAfter] = [await num("#tune-setup", "data-loss-before"), await num("#tune-status", "data-loss-after")];
  const [first, last] = [await num("#tune-status", "data-loss-first"), await num("#tune-status", "data-loss-last")];
  assert.equal(await num("#tune-status", "data-steps"), 12);
  assert.equal(await attr(page, "#tune-setup", "data-device"), "the CPU (wasm)");
  assert.ok(lossAfter < lossBefore - 0.2, `loss on the text ${lossBefore} → ${lossAfter}`);
  assert.ok(last < first, `batch loss ${first} → ${last}`);
  const plotted = numbers(await attr(page, '#tune-loss g.series[data-label="batch loss"]', "data-values"));
  assert.equal(plotted.length, 12, "one point per step");
  assert.match(await page.textContent("#status"), /\+tuned: fine-tuned on the text, ready/);
  // The views trace the fine-tuned model: the attention rows change.
  let after = before;
  for (let k = 0; k < 50 && after.join() === before.join(); k++) {
    await page.waitForTimeout(100);
    after = await heatmapRows(page, 5);
  }
  assert.notEqual(after.join("|"), before.join("|"), "the heatmap shows the fine-tuned model");
  await page.screenshot({ path: join(SHOTS, "tune.png"), fullPage: true });
  // Download: the three files of the fine-tuned model, which Open model… reads back as the same model.
  const dir = mkdtempSync(join(tmpdir(), "attnlab-tuned-"));
  const saved = [];
  const saving = new Promise((resolve) =>
    page.on("download", async (d) => {
      await d.saveAs(join(dir, d.suggestedFilename()));
      saved.push(d.suggestedFilename());
      if (saved.length === 3) resolve();
    }),
  );
  await page.click("#tune-download");
  await saving;
  assert.deepEqual(saved.sort(), ["config.json", "model.safetensors", "tokenizer.json"]);
  await page.waitForSelector('#tune-download-status[data-state="done"]');
  const tuned = readSafetensors(join(dir, "model.safetensors"))["tok_emb.weight"].data;
  const original = readSafetensors(join(SITE, "models/alibi/model.safetensors"))["tok_emb.weight"].data;
  assert.equal(tuned.length, original.length);
  assert.ok(tuned.some((v, k) => v !== original[k]), "the downloaded weights are the tuned ones");
  assert.equal(await openLocal(page, dir, { files: true }), "done");
  let reopened = before;
  for (let k = 0; k < 50 && reopened.join() !== after.join(); k++) {
    await page.waitForTimeout(100);
    reopened = await heatmapRows(page, 5);
  }
  assert.deepEqual(reopened, after, "the reopened download traces exactly as the fine-tuned model");
  // Generation runs on the fine-tuned model.
  await page.fill("#max-tokens", "8");
  await page.click("#generate");
  await page.waitForFunction(() => document.querySelector("#status")?.textContent?.startsWith("done"), null, { timeout: 60_000 });
  // Stop: a long fine-tune ends after the current step and keeps the steps done.
  await page.fill("#tune-steps", "2000");
  await page.click("#tune-start");
  await page.waitForFunction(() => Number(document.querySelector("#tune-status")?.dataset.steps ?? 0) >= 2, null, { timeout: 60_000 });
  await page.click("#tune-stop");
  await page.waitForSelector('#tune-status[data-state="done"]', { timeout: 30_000 });
  const stopped = await page.textContent("#tune-status");
  const done = await num("#tune-status", "data-steps");
  assert.match(stopped, new RegExp(`trained ${done} steps \\(stopped\\)`));
  assert.ok(done >= 2 && done < 2000, `${done} steps`);
  assert.deepEqual(errors, []);
  await context.close();
});
