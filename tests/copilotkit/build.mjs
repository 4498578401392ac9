// Bundles page/ into dist/ (app.js, app.css, index.html) with esbuild: no
// CDN, everything from the pinned node_modules.
import { copyFile, mkdir } from 'node:fs/promises';
import { build } from 'esbuild';

await mkdir('dist', { recursive: true });
await build({
  entryPoints: { app: 'page/main.jsx' },
  bundle: true,
  format: 'esm',
  jsx: 'automatic',
  minify: true,
  outdir: 'dist',
  define: { 'process.env.NODE_ENV': '"production"' },
  // Fonts the styles name (KaTeX's) are left out: files next to the bundle.
  loader: { '.woff': 'file', '.woff2': 'file', '.ttf': 'file' },
  assetNames: 'assets/[name]-[hash]',
  logLevel: 'warning',
});
await copyFile('page/index.html', 'dist/index.html');
