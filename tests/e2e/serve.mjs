// A minimal static file server for the e2e tests: serves ROOT under a URL prefix (a subpath, like
// GitHub Pages' /<repo>/), with the MIME types the page needs, on 127.0.0.1 only.
import { createServer } from "node:http";
import { readFile, stat } from "node:fs/promises";
import { extname, join, normalize, sep } from "node:path";

const TYPES = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript",
  ".wasm": "application/wasm",
  ".css": "text/css",
  ".json": "application/json",
  ".txt": "text/plain; charset=utf-8",
  ".safetensors": "application/octet-stream",
  ".png": "image/png",
};

/** Serve `root` at `http://127.0.0.1:<port><prefix>`; resolves to { url, close }. */
export function serve(root, prefix) {
  const server = createServer(async (req, res) => {
    const path = decodeURIComponent(new URL(req.url, "http://x").pathname);
    if (!path.startsWith(prefix)) {
      res.writeHead(404).end("outside the site prefix");
      return;
    }
    let rel = normalize(path.slice(prefix.length) || "index.html");
    if (rel.startsWith("..") || rel.includes(`${sep}..${sep}`)) {
      res.writeHead(403).end();
      return;
    }
    let file = join(root, rel);
    try {
      if ((await stat(file)).isDirectory()) file = join(file, "index.html");
      const body = await readFile(file);
      res.writeHead(200, {
        "content-type": TYPES[extname(file)] ?? "application/octet-stream",
        "content-length": body.length,
      });
      res.end(body);
    } catch {
      res.writeHead(404, { "content-type": "text/plain" }).end("not found");
    }
  });
  return new Promise((resolve) => {
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      resolve({ url: `http://127.0.0.1:${port}${prefix}`, close: () => server.close() });
    });
  });
}
