// CopilotKit's runtime in front of uistream's AG-UI endpoint, as an
// application runs it: `CopilotRuntime` (@copilotkit/runtime/v2) with one
// agent, "default", an `HttpAgent` (@ag-ui/client, the version CopilotKit
// pins) pointed at the endpoint, served by the runtime's own Node listener
// (`createCopilotNodeListener`) on a free loopback port.
//
// The runtime is the client of uistream: a browser talks to the runtime, the
// runtime's HttpAgent to the endpoint. It forwards only `authorization` and
// `x-*` headers of the browser's request (so not a session cookie), so here
// it holds a session of its own: the cookies and CSRF token it is given
// (the test took them from /api/csrf), and the cookies the endpoint sets
// (the session an anonymous visitor's first run creates).
//
//   node runtime.mjs
//     Serves until killed: UISTREAM_AGUI_URL (the endpoint), UISTREAM_COOKIE,
//     UISTREAM_CSRF; with UISTREAM_PAGE (a directory: index.html, app.js,
//     app.css) it serves that page at / too, so the page and the runtime
//     share an origin. Prints {"runtimeUrl", "origin"} as one JSON line once
//     it listens.

import { readFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import { extname, join } from 'node:path';
import { HttpAgent } from '@ag-ui/client';
import { CopilotRuntime } from '@copilotkit/runtime/v2';
import { createCopilotNodeListener } from '@copilotkit/runtime/v2/node';

export const BASE_PATH = '/api/copilotkit';

/** A fetch that keeps the cookies it is given and those responses set. */
export function cookieFetch(cookie = '') {
  const jar = new Map(
    cookie
      .split('; ')
      .filter(Boolean)
      .map(pair => [pair.slice(0, pair.indexOf('=')), pair.slice(pair.indexOf('=') + 1)]),
  );
  return async (input, init = {}) => {
    const headers = new Headers(init.headers);
    if (jar.size) headers.set('cookie', [...jar].map(([k, v]) => `${k}=${v}`).join('; '));
    const response = await fetch(input, { ...init, headers });
    for (const line of response.headers.getSetCookie()) {
      const [pair] = line.split(';');
      jar.set(pair.slice(0, pair.indexOf('=')).trim(), pair.slice(pair.indexOf('=') + 1));
    }
    return response;
  };
}

const TYPES = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript', '.css': 'text/css', '.woff2': 'font/woff2', '.woff': 'font/woff', '.ttf': 'font/ttf' };

async function servePage(page, request, response) {
  const path = new URL(request.url, 'http://page').pathname;
  const name = path === '/' ? 'index.html' : path.slice(1);
  if (!/^(assets\/)?[\w.-]+$/.test(name)) {
    response.writeHead(404).end();
    return;
  }
  try {
    const body = await readFile(join(page, name));
    response.writeHead(200, { 'content-type': TYPES[extname(name)] ?? 'application/octet-stream' }).end(body);
  } catch {
    response.writeHead(404).end();
  }
}

/** The runtime on 127.0.0.1, a free port: {runtimeUrl, origin, close()}. */
export async function startRuntime({ aguiUrl, cookie, csrf, page }) {
  const agent = new HttpAgent({
    url: aguiUrl,
    headers: csrf ? { 'X-CSRFToken': csrf } : {},
    fetch: cookieFetch(cookie),
  });
  const runtime = new CopilotRuntime({ agents: { default: agent } });
  const listener = createCopilotNodeListener({ runtime, basePath: BASE_PATH, cors: true, activateChannels: false });
  const server = createServer((request, response) => {
    if (page && !request.url.startsWith(BASE_PATH)) return servePage(page, request, response);
    return listener(request, response);
  });
  await new Promise(resolve => server.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${server.address().port}`;
  const close = () =>
    new Promise(resolve => {
      server.closeAllConnections();
      server.close(resolve);
    });
  return { runtimeUrl: origin + BASE_PATH, origin, close };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const env = process.env;
  const { runtimeUrl, origin } = await startRuntime({
    aguiUrl: env.UISTREAM_AGUI_URL,
    cookie: env.UISTREAM_COOKIE,
    csrf: env.UISTREAM_CSRF,
    page: env.UISTREAM_PAGE,
  });
  process.stdout.write(JSON.stringify({ runtimeUrl, origin }) + '\n');
}
