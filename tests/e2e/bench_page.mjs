// Benchmark (not a test): decode speed of the page's CPU (wasm) backend in headless Chromium against
// the native CLI on the same machine, alternated in one run (issue 12: "wasm decode in headless
// Chromium ÷ native CLI decode, same model, same machine"), and the time from navigation to a loaded
// model in a cold browser context (issue 14: the default model loads in ≤ 3 s).
//
//   SITE=target/e2e/site ATTNLAB=target/release/attnlab MODELS=mep,rope ROUNDS=3 \
//     node tests/e2e/bench_page.mjs
//
// SITE is a site built by tests/e2e/run.sh (or `attnlab-site build` with models/ copied in); each
// model in MODELS must be in SITE/models/ and, for the CLI, in www/models/ (or MODEL_DIR). Per round
// and model: a fresh page on ?model=M&backend=cpu generates TOKENS tokens greedily from PROMPT three
// times (V8 tiers the wasm up during the first) and the third run's raw decode (#decode-tps) and
// the speed seen on the page (#decode-seen-tps) are kept; then `attnlab generate` the same tokens
// (timings.decode_tokens_per_s) with the CPU's best kernels and with `--cpu-kernels sse2` (4-lane
// SIMD, as wasm's SIMD128). Prints each round and the medians.
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { chromium } from "playwright-core";
import { serve } from "./serve.mjs";

const SITE = process.env.SITE;
const ATTNLAB = process.env.ATTNLAB;
const MODELS = (process.env.MODELS ?? "mep").split(",");
const ROUNDS = Number(process.env.ROUNDS ?? 3);
const TOKENS = Number(process.env.TOKENS ?? 128);
const MODEL_DIR = process.env.MODEL_DIR ?? "www/models";
const PROMPT = process.env.PROMPT ?? "The history of the city";
if (!SITE || !ATTNLAB) {
  console.error("set SITE (a built site with models/) and ATTNLAB (the CLI binary)");
  process.exit(2);
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function pageDecode(browser, url, model) {
  const context = await browser.newContext();
  const page = await context.newPage();
  const t0 = Date.now();
  await page.goto(`${url}?model=${model}&backend=cpu`);
  await page.waitForSelector('main[data-state="ready"]', { timeout: 60_000 });
  const ready = Date.now() - t0; // cold context: the weights come from the server
  await page.fill("#prompt", PROMPT);
  await page.fill("#max-tokens", String(TOKENS));
  await page.fill("#temperature", "0");
  let raw = 0;
  let seen = 0;
  for (let k = 0; k < 3; k++) {
    await page.click("#generate");
    await page.waitForFunction(() => document.querySelector("#status")?.textContent?.startsWith("done"), null, {
      timeout: 120_000,
    });
    raw = Number(await page.locator("#decode-tps").getAttribute("data-value"));
    seen = Number(await page.locator("#decode-seen-tps").getAttribute("data-value"));
  }
  await context.close();
  return { raw, seen, ready };
}

function nativeDecode(model, kernels) {
  const out = execFileSync(ATTNLAB, [
    "--cpu-kernels", kernels, "generate", "--model", join(MODEL_DIR, model), "--prompt", PROMPT, "--max-tokens", String(TOKENS),
    "--temperature", "0", "--ignore-eos", "--json",
  ], { encoding: "utf8" });
  return JSON.parse(out).timings.decode_tokens_per_s;
}

const server = await serve(SITE, "/bench/");
const browser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: ["--headless=new", "--no-sandbox"] });
const rows = Object.fromEntries(MODELS.map((m) => [m, { raw: [], seen: [], native: [], sse2: [], ready: [] }]));
try {
  for (let round = 1; round <= ROUNDS; round++) {
    for (const model of MODELS) {
      const { raw, seen, ready } = await pageDecode(browser, server.url, model);
      const native = nativeDecode(model, "best");
      const sse2 = nativeDecode(model, "sse2");
      Object.entries({ raw, seen, native, sse2, ready }).forEach(([k, v]) => rows[model][k].push(v));
      console.log(
        `round ${round} ${model}: page ready ${ready} ms; page raw ${raw.toFixed(0)} tok/s, seen ${seen.toFixed(0)}; native ${native.toFixed(0)}, ` +
          `native sse2 ${sse2.toFixed(0)}; raw ÷ native ${(raw / native).toFixed(3)}, ÷ sse2 ${(raw / sse2).toFixed(3)}`,
      );
    }
  }
} finally {
  await browser.close();
  server.close();
}
for (const [model, r] of Object.entries(rows)) {
  const ratios = r.raw.map((v, i) => v / r.native[i]);
  const sse2 = r.raw.map((v, i) => v / r.sse2[i]);
  const list = (xs) => xs.map((x) => x.toFixed(3)).join(", ");
  console.log(
    `${model}: page ready ${r.ready.join(", ")} ms (median ${median(r.ready)}); median page raw ${median(r.raw).toFixed(0)} tok/s, seen ${median(r.seen).toFixed(0)}, native ` +
      `${median(r.native).toFixed(0)}, native sse2 ${median(r.sse2).toFixed(0)}; raw ÷ native ${list(ratios)} ` +
      `(median ${median(ratios).toFixed(3)}); raw ÷ native sse2 ${list(sse2)} (median ${median(sse2).toFixed(3)})`,
  );
}
